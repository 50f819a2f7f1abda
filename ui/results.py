"""This session's results in Explore: each report exactly as the worker sent it, and
beside it what only the page needs (the code it ran, when, its history id, the
pass-by-pass and profile results asked for later). No jax here.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from ui.cards import report_json
from viz import charts
from viz.export import html_report
from viz.format import nbytes, seconds, si
from viz.history import History, HistoryError

FULL_RESULTS = 8  # results that keep their graph models (each can be tens of MB)


@dataclass
class Result:
    """One analysis shown in Explore. `report` is the worker's report dict; the only
    change ever made to it is dropping its graph models once the result is old
    (`trim`): they are the app's copy of the graphs, not part of the report JSON."""

    report: dict[str, Any]
    code: str
    stamp: str = field(default_factory=lambda: time.strftime("%H:%M:%S"))
    history_id: int | None = None
    sample: str | None = None  # the built-in sample whose code ran, if any
    passes: dict[str, Any] | None = None  # the worker's pass-by-pass answer, once asked
    profile: dict[str, Any] | None = None  # per-kernel times, once "Profile kernels" ran
    trimmed: bool = False

    @property
    def ok(self) -> bool:
        return bool(self.report.get("ok"))

    @property
    def function(self) -> str:
        return self.report.get("function") or ""

    def trim(self) -> None:
        if self.report.pop("graph_models", None) is not None:
            self.trimmed = True

    def settings(self) -> dict[str, Any]:
        """What this result was analysed with, as worker request arguments: a second
        compile of the same run (pass-by-pass, profile, a variant) must use them all."""
        r = self.report
        return {
            "code": self.code,
            "function": r.get("function"),
            "args": r.get("args") or "",
            "static": list(r.get("static") or []),
            "donate": list(r.get("donate") or []),
            "compiler_options": dict(r.get("compiler_options") or {}),
            "device": r.get("device") or "cpu",
            "x64": r.get("x64"),
        }

    def label(self, index: int) -> str:
        r = self.report
        failed = "" if self.ok else f" · {(r.get('error') or {}).get('kind', 'error')}"
        return f"#{index + 1} · {r.get('function')}({r.get('args')}) · {self.stamp}{failed}"

    def diff_side(self) -> int | dict[str, Any]:
        """How `open_diff` names this result: its history id, else the report."""
        return self.history_id if self.history_id is not None else self.report


def results() -> list[Result]:
    return st.session_state.setdefault("results", [])


def shown() -> tuple[int, Result] | None:
    """The result on screen and its index (the newest unless another was picked)."""
    history = results()
    if not history:
        return None
    index = min(st.session_state.get("shown", len(history) - 1), len(history) - 1)
    return index, history[index]


def add(result: Result) -> int:
    """Append a result and show it; older results keep their numbers and texts but
    drop their graph models. Returns its index."""
    history = results()
    history.append(result)
    for old in history[:-FULL_RESULTS]:
        old.trim()
    st.session_state.shown = len(history) - 1
    return st.session_state.shown


def record(report: dict[str, Any], code: str, sample: str | None) -> int | None:
    """Every analysis goes into the run history (the History page reads it back)."""
    try:
        return History().record(report, code=code, sample=sample, source="app")
    except (sqlite3.Error, OSError, HistoryError) as exc:
        st.toast(f"Not recorded in the history: {exc}", icon=":material/warning:")
        return None


# -- the tabs that lay out a result's numbers ------------------------------------
def timing_tab(r: dict[str, Any]) -> None:
    t = r["timings"]
    m = st.columns(4)
    m[0].metric("first call", seconds(t.get("first_call_s")))
    m[1].metric("jit (median)", seconds(t.get("run_median_s")))
    m[2].metric("eager (median)", seconds(t.get("eager_median_s")))
    calls = charts.break_even_calls(r)
    m[3].metric(
        "compile pays off after",
        "never" if calls == float("inf") else (f"{calls:,.0f} calls" if calls else "–"),
        help="trace+lower+compile time ÷ (eager − jit) time per call",
    )
    left, right = st.columns(2)
    left.plotly_chart(charts.stage_waterfall(r), width="stretch", key="ti_stages")
    right.plotly_chart(charts.run_distribution(r), width="stretch", key="ti_runs")


def cost_tab(r: dict[str, Any]) -> None:
    donation_panel(r)
    cost, mem = r.get("cost") or {}, r.get("memory") or {}
    flops, moved = cost.get("flops"), cost.get("bytes_accessed")
    m = st.columns(4)
    m[0].metric("FLOPs", si(flops))
    m[1].metric("bytes accessed", nbytes(moved))
    m[2].metric(
        "arithmetic intensity",
        f"{flops / moved:.2f} FLOP/B" if flops and moved else "–",
        help="FLOPs per byte moved: low means memory-bound",
    )
    m[3].metric("transcendentals", si(cost.get("transcendentals")))
    m = st.columns(4)
    for col, (label, key) in zip(
        m,
        (
            ("arguments", "argument_bytes"),
            ("outputs", "output_bytes"),
            ("temporaries", "temp_bytes"),
            ("generated code", "generated_code_bytes"),
        ),
        strict=True,
    ):
        col.metric(label, nbytes(mem.get(key)))


def export_tab(r: dict[str, Any], index: int) -> None:
    name = r.get("function") or "report"
    c = st.columns(3)
    c[0].download_button(
        "JSON report", report_json(r), f"{name}.json", "application/json", key=f"json_{index}"
    )
    c[1].download_button(
        "HTML report (offline)",
        lambda: html_report(r),
        f"{name}.html",
        "text/html",
        key=f"html_{index}",
        on_click="ignore",
    )
    c[2].markdown("Share: copy this page's URL — it carries the code, function, args and device.")


def donation_panel(report: dict[str, Any]) -> None:
    """Which donated leaves XLA reused for an output (and why not), JAX's warnings, and
    the program's memory with and without the reuse (memory_analysis: no recompile)."""
    donation = report.get("donation")
    if not donation:
        return
    st.markdown("**Donation** · a donated input's buffer may become an output's")
    rows = [
        {
            "argument": a["name"],
            "donated": a["donated"],
            "aliased output": "–" if a["aliased_output"] is None else f"#{a['aliased_output']}",
            "not reused because": a["reason"] or "",
        }
        for a in donation["args"]
    ]
    st.dataframe(rows, hide_index=True, width="stretch")
    for warning in donation.get("warnings") or []:
        st.warning(f"JAX: {warning}", icon=":material/warning:")
    mem = report.get("memory") or {}
    without = sum(mem.get(k) or 0 for k in ("argument_bytes", "output_bytes", "temp_bytes"))
    alias = mem.get("alias_bytes") or 0
    m = st.columns(3)
    m[0].metric(
        "memory without donation",
        nbytes(without),
        help="arguments + outputs + temporaries, as if no buffer were reused",
    )
    m[1].metric(
        "with donation",
        nbytes(without - alias),
        delta=f"-{nbytes(alias)}" if alias else None,
        delta_color="inverse",
        help="minus XLA's alias bytes: outputs written into donated inputs",
    )
    m[2].metric("reused in place", nbytes(alias), help="memory_analysis: alias_size_in_bytes")
