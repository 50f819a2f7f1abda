"""A run of the history as data: `Run` (what ran, and its summary numbers), `Recorded`
(a run and its report, read together) and the skeleton report of a pruned run.

A run's `summary` is `viz.diff.numbers(report)`, decoded once into a `Summary`; a
pruned run's report is `skeleton(run)`, its numbers with no texts, kernels or graphs.
`sample_runs` and `sample_of` tell which runs are of a built-in sample, unedited;
`default_pair` is the two runs the Diff page compares until told otherwise.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from viz.diff import Origin
from viz.errors import KINDS, ErrorInfo, ErrorKind
from viz.history.schema import code_hash
from viz.plain import Plain, flat
from viz.report import (
    CompiledSection,
    Cost,
    JaxprSection,
    Memory,
    Report,
    StableHLOSection,
    Subject,
    Timings,
)
from viz.samples import Sample, get_sample, list_samples
from viz.settings import Settings

# what a run keeps of its settings: not its code (kept once per text, by `code_hash`)
# nor the folder, file, x64, mesh or memory limit, which the history file has no columns for
NOT_KEPT = ("code", "folder", "file", "x64", "mesh", "memory_limit_bytes")


@dataclass(frozen=True)
class Run(Plain):
    """One recorded analysis: what ran (its settings: the function, args, static and
    donated arguments, device, compiler options and the built-in sample whose code ran,
    if any), and its summary numbers. Its JSON has the settings' keys as its own."""

    id: int
    created: float  # Unix time
    source: str  # app, cli or api
    ok: bool
    error_kind: str | None
    code_hash: str | None
    jax_version: str
    settings: Settings = field(default_factory=Settings, metadata=flat(omit=NOT_KEPT))
    summary: dict[str, Any] = field(default_factory=dict)  # viz.diff.numbers(report)
    full: bool = False  # whether the full report is still kept

    @property
    def when(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.created))

    @property
    def origin(self) -> Origin:
        """This run as one side of a diff."""
        return Origin(id=self.id, when=self.when, full=self.full)

    @property
    def numbers(self) -> Report:
        """Its summary numbers as a report (`skeleton`): counts, timings, cost, memory."""
        return skeleton(self)

    @property
    def options_text(self) -> str:
        """Static, donated and compiler options in one short line ('' when none)."""
        s = self.settings
        parts = [f"{k}={v}" for k, v in s.compiler_options.items()]
        if s.static:
            parts.append("static " + ", ".join(s.static))
        if s.donate:
            parts.append("donate " + ", ".join(s.donate))
        return " · ".join(parts)


@dataclass(frozen=True)
class Recorded:
    """A run of the history and its report, read together: the full report while the
    history keeps it (`run.full`), else the run's numbers as a report (`skeleton`)."""

    run: Run
    report: Report

    @property
    def origin(self) -> Origin:
        return self.run.origin


@dataclass
class Summary(Plain):
    """A run's stored summary (`viz.diff.numbers`), decoded once. A file written by an
    older jitscope may lack keys (they take their defaults) or hold nulls."""

    counts: dict[str, int | None] = field(default_factory=dict)  # by COUNT_PATHS name
    timings: Timings | None = None
    cost: Cost | None = None
    memory: Memory | None = None
    ops: dict[str, int] | None = None
    stablehlo_ops: dict[str, int] | None = None


def skeleton(run: Run) -> Report:
    """A report with only what a pruned run still knows: its summary numbers. Every
    section is there, with no text; no kernels, no graphs."""
    s = Summary.from_dict(run.summary)
    counts = s.counts or {}
    ran = run.settings
    return Report(
        ok=run.ok,
        error=None if run.ok else _kept_error(run.error_kind),
        subject=replace(Subject.asked(ran), jax_version=run.jax_version),
        timings=s.timings or Timings(),
        cost=s.cost or Cost(),
        memory=s.memory or Memory(),
        jaxpr=JaxprSection(eqn_count=counts.get("jaxpr.eqn_count")),
        stablehlo=StableHLOSection(
            op_count=counts.get("stablehlo.op_count"), ops=dict(s.stablehlo_ops or {})
        ),
        compiled=CompiledSection(
            op_count=counts.get("compiled.op_count"),
            kernel_count=counts.get("compiled.kernel_count"),
            fusion_count=counts.get("compiled.fusion_count"),
            ops=dict(s.ops or {}),
        ),
    )


def _kept_error(kind: str | None) -> ErrorInfo:
    """A failed run's error, of which the history keeps the kind only."""
    if kind in KINDS:
        shown = kind.replace("_", " ")
        return ErrorInfo(kind, f"{shown}: the history kept only the kind of this error")
    return ErrorInfo(
        ErrorKind.INTERNAL_ERROR,
        f"this run failed ({kind or 'kind not recorded'}); the history kept no more of it",
    )


def shipped_sample(name: str | None) -> Sample | None:
    """The built-in sample of that name, None for none (or one no longer shipped)."""
    try:
        return get_sample(name) if name else None
    except KeyError:
        return None


def sample_runs(runs: list[Run]) -> list[Run]:
    """Only runs of a built-in sample whose code is still that sample's code (demo mode
    shows and re-opens these only, and re-opens them by sample name)."""
    pristine = {s.name: code_hash(s.code) for s in list_samples()}
    return [
        r for r in runs if (name := r.settings.sample) in pristine and r.code_hash == pristine[name]
    ]


def sample_of(code: str) -> str | None:
    """The built-in sample whose file is exactly `code`, if any."""
    return next((s.name for s in list_samples() if s.code == code), None)


def default_pair(runs: list[Run]) -> tuple[Run, Run, str]:
    """The two runs to diff by default (`runs` newest first, at least one): the two
    newest successful runs of one function, else the two newest runs and a word on why."""
    done = [r for r in runs if r.ok]
    times = Counter(r.settings.function for r in done)
    b = next((r for r in done if times[r.settings.function] > 1), None)
    if b is not None:
        a = next(r for r in done if r.id < b.id and r.settings.function == b.settings.function)
        return a, b, ""
    a, b = runs[min(1, len(runs) - 1)], runs[0]
    return a, b, "no two successful runs of one function yet: these are the two newest runs"
