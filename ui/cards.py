"""Error cards, code excerpts, the report's JSON download and the time stamp."""

from __future__ import annotations

import json
import time

import streamlit as st

from viz.errors import ErrorInfo
from viz.report import Report


def error_card(error: ErrorInfo, code: str | None = None) -> None:
    where = f" · line {error.line}" if error.line else ""
    st.error(
        f"**{error.kind.replace('_', ' ')}**{where}  \n{error.message}",
        icon=":material/error:",
    )
    if error.hint:
        st.info(f"**Fix:** {error.hint}", icon=":material/lightbulb:")
    if code and error.line:
        st.code(excerpt(code, error.line), language="python")
    if error.detail:
        with st.expander("Full message"):
            st.text(error.detail)


def excerpt(code: str, line: int, context: int = 3) -> str:
    """The lines around `line`, the offending one marked with an arrow."""
    lines = code.splitlines()
    start, stop = max(line - 1 - context, 0), min(line + context, len(lines))
    width = len(str(stop))
    return "\n".join(
        f"{'→' if i + 1 == line else ' '} {i + 1:>{width}} | {lines[i]}" for i in range(start, stop)
    )


def report_json(report: Report) -> str:
    """The report file the CLI writes with `--json`."""
    return json.dumps(report.public_dict(), indent=2, default=str)


def stamp() -> str:
    return time.strftime("%H:%M:%S")
