"""An analysis in flight, drawn as it goes (issue #36): a stage bar that counts the
seconds of the stage under way, and below it what the worker has sent so far (a
streamed `Analyze`'s `Progress` frames carry a glimpse of the report as each stage
starts), drawn by the page.

A rerun asked for while the analysis runs (a click, the editor sending its text) would
stop the page in the middle of a drawing call, and the analysis's answer would be
lost with it: the rerun waits until the answer is in and recorded (`close`), as it
did when nothing was drawn while waiting."""

from __future__ import annotations

import time
from collections.abc import Callable

import streamlit as st
from streamlit.runtime.scriptrunner import RerunException, StopException

from viz.progress import STAGES
from viz.report import Report, Timings
from viz.units import seconds
from viz.worker.protocol import Progress

BODY_EVERY_S = 0.3  # a burst of frames (a small program's stages) is drawn once
WAITING = "waiting"  # for the worker: queued, or still importing JAX and warming up
SHOWN_WAIT_S = 0.1  # a shorter wait for the worker is not worth a place in the bar


class LiveAnalysis:
    """The stage bar and the partial result of one analysis; `progress` and `tick` are
    `ui.ask`'s `on_progress` and `on_tick`. `draw(known)` lays out a glimpse of the
    report, from the start (`known`: the report as the request describes it, nothing
    measured yet), so the page's layout and its charts' code are in place before the
    first numbers come, which then fill it in. `stages`: those the analysis goes
    through (`viz.progress.STAGES`, without `run` when nothing is timed)."""

    def __init__(
        self, draw: Callable[[Report], None], known: Report, stages: tuple[str, ...] = STAGES
    ):
        self._stages = stages  # those the analysis will go through (no runs: no `run`)
        self._bar = st.empty()
        self._body = st.empty()
        self._draw = draw
        self._stage = WAITING
        self._since = time.monotonic()  # when the stage under way started
        self._took: dict[str, float] = {}  # seconds of the stages the page timed itself
        self._known = known
        self._drawn_at = 0.0  # when the body was last drawn
        self._pending = False  # frames came that the body does not show yet
        self._interrupted: RerunException | StopException | None = None
        self._show(body=True)

    @property
    def stage(self) -> str:
        """The stage under way (`waiting` before the worker's first frame)."""
        return self._stage

    def progress(self, step: Progress) -> None:
        if step.report is None or step.label not in self._stages:
            return
        now = time.monotonic()
        if step.label != self._stage:
            self._took[self._stage] = now - self._since
            self._stage, self._since = step.label, now
        self._pending |= _drawn(step.report) != _drawn(self._known)
        self._known = step.report
        self._show(body=self._pending)

    def tick(self) -> None:
        self._show(body=self._pending)

    def close(self) -> None:
        """Clear the bar and the partial result (the page draws the whole result next),
        then let a rerun asked for meanwhile happen."""
        self._bar.empty()
        self._body.empty()
        if self._interrupted is not None:
            raise self._interrupted

    def _show(self, body: bool) -> None:
        if self._interrupted is not None:
            return  # a rerun comes once the answer is in: nothing more to draw
        try:
            self._bar.markdown(self.bar_text())
            if body and time.monotonic() - self._drawn_at >= BODY_EVERY_S:
                with self._body.container():
                    self._draw(self._known)
                self._drawn_at, self._pending = time.monotonic(), False
        except (RerunException, StopException) as exc:
            self._interrupted = exc

    def bar_text(self) -> str:
        """Each stage: done with its seconds, under way with the seconds so far, or to
        come. Trace, lower and compile are timed by the worker, the rest here; the wait
        for the worker shows only while it lasts, or where it lasted."""
        waited = self._stage == WAITING or self._took.get(WAITING, 0.0) >= SHOWN_WAIT_S
        parts = []
        for stage in (WAITING, *self._stages) if waited else self._stages:
            took = self._seconds(stage)
            if stage == self._stage:
                elapsed = time.monotonic() - self._since
                parts.append(f":material/hourglass_top: **Under way: {stage}** {elapsed:.1f} s")
            elif took is not None:
                parts.append(f":material/check: {stage} {seconds(took)}")
            else:
                parts.append(f":gray[{stage}]")
        return " · ".join(parts)

    def _seconds(self, stage: str) -> float | None:
        """A finished stage's seconds (None: not finished, or never run)."""
        timed = _timed_by_worker(self._known.timings).get(stage)
        return timed if timed is not None else self._took.get(stage)


def _timed_by_worker(t: Timings) -> dict[str, float | None]:
    """The stages the worker times itself, and their seconds so far."""
    return {"trace": t.trace_s, "lower": t.lower_s, "compile": t.compile_s}


def _drawn(report: Report) -> tuple:
    """What the body shows of a glimpse: it is drawn again only when this changes."""
    t = report.timings
    j, s, c = report.jaxpr, report.stablehlo, report.compiled
    counts = (j and j.eqn_count, s and s.op_count, c and c.op_count)
    return counts, tuple(sorted(report.graphs)), t.trace_s, t.lower_s, t.compile_s
