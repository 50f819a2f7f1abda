"""Error cards, code excerpts and small formatting helpers."""

from __future__ import annotations

import json
import time
from typing import Any

import streamlit as st


def error_card(error: dict[str, Any], code: str | None = None) -> None:
    where = f" · line {error['line']}" if error.get("line") else ""
    st.error(
        f"**{error['kind'].replace('_', ' ')}**{where}  \n{error['message']}",
        icon=":material/error:",
    )
    if error.get("hint"):
        st.info(f"**Fix:** {error['hint']}", icon=":material/lightbulb:")
    if code and error.get("line"):
        st.code(excerpt(code, error["line"]), language="python")
    if error.get("detail"):
        with st.expander("Full message"):
            st.text(error["detail"])


def excerpt(code: str, line: int, context: int = 3) -> str:
    """The lines around `line`, the offending one marked with an arrow."""
    lines = code.splitlines()
    start, stop = max(line - 1 - context, 0), min(line + context, len(lines))
    width = len(str(stop))
    return "\n".join(
        f"{'→' if i + 1 == line else ' '} {i + 1:>{width}} | {lines[i]}" for i in range(start, stop)
    )


def report_json(report: dict[str, Any]) -> str:
    public = {k: v for k, v in report.items() if k not in ("graph_models", "stdout")}
    return json.dumps(public, indent=2, default=str)


def stamp() -> str:
    return time.strftime("%H:%M:%S")
