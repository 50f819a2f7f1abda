"""This session's results in Explore: each analysis as the worker sent it (a typed
report and what the code printed), and beside it what only the page needs (the code
it ran, when, its history id, the pass-by-pass and profile answers asked for later).
No jax here.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field, replace
from typing import Any

import streamlit as st

from ui.cards import report_json
from ui.editor import clear_marks
from viz import charts
from viz.export import html_report
from viz.follow import SourceLines
from viz.fusion.profile import Profile
from viz.history import History, HistoryError
from viz.report import Report
from viz.units import MISSING, count, nbytes, seconds, si
from viz.worker.protocol import Analyze, CompileProfile, CompileProfiled, Passes, PassesReply

FULL_RESULTS = 8  # results that keep their graph models (each can be tens of MB)


@dataclass
class Result:
    """One analysis shown in Explore: the request that ran and the worker's answer.
    The only change ever made to its report is dropping the graph models once the
    result is old (`trim`): they are the app's copy of the graphs, not part of the
    report JSON."""

    asked: Analyze  # what ran: code, function, spec, settings (a variant changes one)
    report: Report
    stdout: str = ""  # what the user's code printed
    stamp: str = field(default_factory=lambda: time.strftime("%H:%M:%S"))
    history_id: int | None = None
    passes: PassesReply | None = None  # the worker's pass-by-pass answer, once asked
    profile: Profile | None = None  # per-kernel times, once "Profile kernels" ran
    compile_profiled: CompileProfiled | None = None  # "Where did the compile time go?"
    trimmed: bool = False
    automatic: bool = False  # a first visit's or a link's run: recorded once only
    recorded: bool = False  # in the history (or tried: `record`)

    @property
    def code(self) -> str:
        return self.asked.settings.code

    @property
    def sample(self) -> str | None:
        return self.asked.settings.sample  # the built-in sample whose code ran, if any

    @property
    def ok(self) -> bool:
        return self.report.ok

    @property
    def function(self) -> str:
        return self.report.function

    @property
    def kernel_profile(self) -> Profile | None:
        """The profile asked for later, else the one the analysis itself made."""
        return self.profile or self.report.profile

    @functools.cached_property
    def lines(self) -> SourceLines:
        """Its lines and what each became in every IR (built once, when first asked)."""
        return SourceLines(self.report)

    def trim(self) -> None:
        if self.report.graph_models:  # a report is never changed: this one is a copy
            self.report = replace(self.report, graph_models={})
            self.__dict__.pop("lines", None)  # it holds the graphs
            self.trimmed = True

    def request(self, **changes: Any) -> Analyze:
        """This result's analysis again, `changes` changed: a second compile of the
        same run (profile, a variant) must use all its settings."""
        return replace(self.asked, **changes)

    def passes_request(self) -> Passes:
        """Pass-by-pass, compiled with this result's settings."""
        return Passes(self.asked.settings)

    def compile_profile_request(self) -> CompileProfile:
        """The compile profile, with this result's settings."""
        return CompileProfile(self.asked.settings)

    def label(self, index: int) -> str:
        r = self.report
        failed = f" · {r.error.kind}" if r.error else ""
        return f"#{index + 1} · {r.function}({r.args}) · {self.stamp}{failed}"

    def diff_side(self) -> int | Report:
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


def shown_result() -> Result | None:
    """The result on screen (None: none yet)."""
    found = shown()
    return found[1] if found else None


def add(result: Result) -> int:
    """Append a result and show it; older results keep their numbers and texts but
    drop their graph models. Returns its index."""
    history = results()
    history.append(result)
    for old in history[:-FULL_RESULTS]:
        old.trim()
    st.session_state.shown = len(history) - 1
    clear_marks()  # the lines a view marked are the lines of an earlier result
    return st.session_state.shown


def record(res: Result) -> None:
    """Every analysis goes into the run history once (the History page reads it back),
    whole: its graph models, which follow the report from the worker, included. An
    `automatic` one (a first visit's, a link's) only if no identical run is there: each
    page load would add the same row again."""
    if res.recorded:
        return
    res.recorded = True
    try:
        res.history_id = History().record(
            res.report, code=res.code, sample=res.sample, source="app", once=res.automatic
        )
    except HistoryError as exc:
        st.toast(f"Not recorded in the history: {exc}", icon=":material/warning:")


def record_new() -> None:
    """Record the results not recorded yet: the analysis whose first screen was just
    drawn (its graph models may still be on their way), or one a rerun interrupted."""
    for res in results():
        record(res)


# -- the tabs that lay out a result's numbers ------------------------------------
def timing_tab(r: Report, asked: int) -> None:
    """The times, each median with its samples; `asked`: the timed runs asked for (a
    slow call gets fewer: the timing stops once its time budget is spent)."""
    t = r.timings
    m = st.columns(4)
    m[0].metric("first call", seconds(t.first_call_s))
    jit_n, eager_n = charts.samples(r)
    cut = 0 < jit_n < asked
    for column, label, median, n, said in (
        (m[1], "jit (median)", t.run_median_s, jit_n, f" of {asked}" if cut else ""),
        (m[2], "eager (median)", t.eager_median_s, eager_n, ""),
    ):
        samples = f"n = {n}{said}" if n else None
        column.metric(label, seconds(median), samples, "off", delta_arrow="off")
    m[3].metric(
        "compile pays off after",
        charts.pays_off_after(r),
        help="trace + lower + compile time ÷ (eager − jit) time per call; it needs "
        f"{charts.MIN_EAGER_SAMPLES} eager samples or more",
    )
    if cut:
        st.caption(
            f"{jit_n} of the {asked} timed runs asked for: the timing stops once its time "
            "budget is spent, so a slow call gets fewer (the median is of those)."
        )
    left, right = st.columns(2)
    left.plotly_chart(charts.stage_waterfall(r), width="stretch", key="ti_stages")
    right.plotly_chart(charts.run_distribution(r), width="stretch", key="ti_runs")


# XLA's cost analysis, each count in a JAX user's words: (label, what it counts)
COST_MEANINGS = {
    "FLOPs": "floating-point operations in one call of the optimized program; a "
    "matmul's multiply-add counts 2",
    "bytes accessed": "what the ops read and write, summed op by op (a fused "
    "intermediate is never written out, so not counted); not the memory held",
    "transcendentals": "exp, log, tanh, sin… evaluated, one per element; counted apart "
    "from the FLOPs",
    "FLOPs per byte": "arithmetic intensity, FLOPs ÷ bytes accessed: low means the "
    "program waits on memory, high on arithmetic",
}


def cost_tab(r: Report) -> None:
    """XLA's static counts for one call, each with what it counts, then the rates they
    give at the measured time per call: every number from XLA's cost analysis and the
    run's own timing."""
    cost = r.cost
    flops, moved = (cost.flops, cost.bytes_accessed) if cost else (None, None)
    st.markdown(
        f"**XLA's cost analysis** of `{r.function}` · per call · what "
        "`jax.jit(f).lower(…).compile().cost_analysis()` returns, counted on the "
        "optimized program before it runs"
    )
    values = {
        "FLOPs": si(flops),
        "bytes accessed": nbytes(moved),
        "transcendentals": si(cost.transcendentals if cost else None),
        "FLOPs per byte": count(float(f"{flops / moved:.3g}")) if flops and moved else MISSING,
    }
    for column, (label, value) in zip(st.columns(4), values.items(), strict=True):
        column.metric(label, value)
        column.caption(COST_MEANINGS[label])
    if r.cost_note:  # a scan's 20 steps counted as one: the numbers are one pass's
        st.caption(
            f":material/loop: {r.cost_note}: these counts hold one pass of each loop, so "
            "no FLOP/s or bytes/s are made of them (the time per call holds every pass)."
        )
    else:
        rates(r, flops, moved)
    st.caption("Where the bytes go, the peak and what would lower it: the Memory tab.")


def rates(r: Report, flops: float | None, moved: float | None) -> None:
    """The counts over the measured time per call: the device's own time where the
    profile read it, else the wall median (on a CPU, one clock)."""
    t = r.timings
    took, clock = (t.device_s, "device time") if t.device_s else (t.run_median_s, "wall median")
    if not took:
        st.caption("FLOP/s and bytes/s need a timed run: set Timed runs above 0 and analyze.")
        return
    st.markdown(f"**At the measured speed** · {seconds(took)} per call ({clock})")
    m = st.columns(4)
    m[0].metric("FLOP/s", si(flops / took) if flops else MISSING)
    m[0].caption("FLOPs ÷ the time per call")
    m[1].metric("bytes/s", nbytes(moved / took) if moved else MISSING)
    m[1].caption("bytes accessed ÷ the time per call")


def export_tab(r: Report, index: int) -> None:
    name = r.function or "report"
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
    st.caption(
        "JSON: the whole report as `jitscope analyze --json` writes it (docs/contracts.md): "
        "counts, the three IRs' texts, timings, fusion map, cost, memory. HTML: one file "
        "that opens offline: the counts, charts, memory, fusion map and the IR texts."
    )
