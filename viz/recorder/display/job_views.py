"""What the Recordings page's job view shows, as plain rows (stdlib only)."""

from __future__ import annotations

from typing import Any

from viz.recorder.display.divergence import Divergence
from viz.recorder.display.job import JobView
from viz.units import seconds

KIND_MEANING = {
    "missing": "compiled by some processes only: their collectives no longer line up",
    "signature": "compiled for another signature: the processes run different programs",
    "count": "compiled a different number of times with the same signatures",
    "order": "the same programs across processes, compiled (and first run) in another order",
}


def process_rows(view: JobView) -> list[dict[str, Any]]:
    first = view.first_ended.index if view.first_ended else None
    return [
        {
            "process": p.index,
            "host": p.host,
            "compiles": p.compiles,
            "compile time": seconds(p.compile_s),
            "wall time": seconds(p.wall_s),
            "started": f"+{p.started_s:.2f} s",
            "ended": _ended(p.ended_early, p.index == first) + p.ending,
            "recording": p.recording,
        }
        for p in view.processes
    ]


def _ended(early: bool, first: bool) -> str:
    if first:
        return "⚠ ended first: "
    return "⚠ ended early: " if early else ""


def ended_first_text(view: JobView) -> str | None:
    """'Process 2 ended first, 3.60 s into the job: exit status 137 (SIGKILL); …'."""
    first = view.first_ended
    if first is None:
        return None
    others = [p for p in view.processes if p.index != first.index and p.ended_s is not None]
    after = ""
    if others:
        after = "; the other " + (f"{len(others)} ended" if len(others) > 1 else "process ended")
        after += " after it"
    return (
        f"Process {first.index} ended first, {first.ended_s:.2f} s into the job: "
        f"{first.ending}{after}."
    )


def site_rows(divergence: Divergence) -> list[dict[str, Any]]:
    """Where each process was when they parted, innermost frame first in the stack."""
    return [
        {
            "process": s.process,
            "called from": s.call_site,
            "what": s.note,
            "at": None if s.t_s is None else f"{s.t_s:.2f} s",
            "stack": " ← ".join(reversed(s.stack)),
        }
        for s in divergence.call_sites
    ]


def straggler_rows(view: JobView) -> list[dict[str, Any]]:
    """A row per function, a column per process; the slowest against the median."""
    rows = []
    for s in view.stragglers:
        row: dict[str, Any] = {"function": s.function, "defined at": s.defined_at}
        for p in view.processes:
            row[f"p{p.index}"] = seconds(s.compile_s.get(p.index))
        row["slowest"] = f"process {s.slowest}"
        row["median"] = seconds(s.median_s)
        row["over the median"] = seconds(s.wait_s, signed=True)
        rows.append(row)
    return rows


def divergence_title(divergence: Divergence) -> str:
    """'**missing** · `batch_stats`' (the detail names the processes)."""
    return f"**{divergence.kind}** · `{divergence.function}`"
