"""A Streamlit page for browser tests: a saved JSON report (`jitscope analyze --json`)
as Explore shows it, its error card and its Memory tab, without running anything.
`?report=NAME` reads tests/fixtures/tpu_v5e/reports/NAME.json (a real TPU v5e's), or
NAME.json in the folder `SAVED_REPORTS` names (a test's copies of them)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from ui import memory  # noqa: E402
from ui.cards import error_card  # noqa: E402
from ui.results import Result  # noqa: E402
from viz.report import Report  # noqa: E402
from viz.settings import Settings  # noqa: E402
from viz.worker.requests import Analyze  # noqa: E402

REPORTS = Path(
    os.environ.get("SAVED_REPORTS") or ROOT / "tests" / "fixtures" / "tpu_v5e" / "reports"
)

st.set_page_config(layout="wide")  # as app.py
name = st.query_params.get("report", "peak")
report = Report.from_dict(json.loads((REPORTS / f"{name}.json").read_text()))
asked = Analyze(settings=Settings(function=report.function, device=report.device))
st.title(f"{report.function} on {report.device}")
if report.error:
    error_card(report.error)
memory.panel(Result(asked, report), 0)
