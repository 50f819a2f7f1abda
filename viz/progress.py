"""An analysis as it goes: its stages in order, and what is known when each starts.

`viz.pipeline.analyze_target(..., on_stage=...)` calls `on_stage(stage, known)` as each
stage starts, and again while XLA compiles, as the jaxpr and the StableHLO are read:
`stage` is the stage under way (one of STAGES), `known` a small copy of the report so
far (`glimpse`). The worker sends each as a `Progress` frame; Explore draws it. No jax.

A long request (an analysis streamed, a lesson's sweep, a compile profile) tells how
far it is through an `OnProgress`: a callback that hears a `Progress` frame's JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from viz.plain import Plain, pending
from viz.report import CompiledSection, JaxprSection, Report, StableHLOSection

# load: the user's module run and the arguments made; run: the timed runs (and eager,
# and the kernel profile when asked for) once the compiled program is known
STAGES = ("load", "trace", "lower", "compile", "run")

OnStage = Callable[[str, Report], None]


@dataclass
class Progress(Plain):
    """How far a long request is: `done` of `total` steps, the last one's label. A
    streamed analysis (`Analyze.stream`) labels each step with the stage under way
    (`viz.progress.STAGES`) and sends what is known so far (`viz.progress.glimpse`)."""

    done: int
    total: int
    label: str = ""
    report: Report | None = None

    @property
    def share(self) -> float:
        return self.done / max(self.total, 1)


OnProgress = Callable[[dict[str, Any]], None]  # hears a Progress frame's JSON


def glimpse(report: Report) -> Report:
    """What a page draws while the analysis goes on: the report's counts, timings, cost,
    memory and the default graph views; not its texts, graph models, fusion map or
    kernels, which only the finished report carries (a 96-layer model's are megabytes).
    The pipeline glimpses the report assembled from what it has found so far."""
    return Report(
        ok=report.ok,
        error=report.error,
        subject=replace(report.subject, source_file=None),  # its header, but the file
        timings=replace(report.timings),
        jaxpr=_untexted(report.jaxpr),
        stablehlo=_untexted(report.stablehlo),
        compiled=_untexted(report.compiled),
        cost=None if pending(report, "cost") else report.cost,  # XLA's analyses, not
        memory=None if pending(report, "memory") else report.memory,  # waited for
        graphs=dict(report.graphs),
    )


Section = TypeVar("Section", JaxprSection, StableHLOSection, CompiledSection)


def _untexted(section: Section | None) -> Section | None:
    return None if section is None else replace(section, text="")
