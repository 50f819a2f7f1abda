"""What an analysis found, stage by stage, as typed sections, and the Report built from
them once (`assemble`).

Each stage and reader returns its section: an `IRRead` per IR (text, graph, default
view, op histogram, or the warning that says why the graph is missing), the
`Executable` read after the compile, and a `Found` (a value, or the warning that says
why there is none) for each reader that must not fail the analysis. The pipeline keeps
them in one `Sections` as they come; `assemble` turns them into the report's JSON
sections, its warnings in the order the stages ran. No jax.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from viz.compile_profile.model import CompileProfileSection
from viz.errors import ErrorInfo
from viz.found import Found
from viz.fusion.map import FusionMap, Side
from viz.fusion.profile import Profile
from viz.ir.model import Graph
from viz.memory.model import DeviceMemory, Residual
from viz.plain import Later
from viz.platforms import platform_of
from viz.report import (
    CompiledSection,
    Cost,
    Donation,
    FusionCoverage,
    FusionEntry,
    GraphSummary,
    JaxprSection,
    Kernel,
    Memory,
    Report,
    Runs,
    StableHLOSection,
    Subject,
    Timings,
)
from viz.sharding.model import ShardingSection
from viz.specialization.model import ShapeOp, SpecializedArg
from viz.timing import RunStats

T = TypeVar("T")


@dataclass(frozen=True)
class IRRead:
    """One IR as read: its text, graph, default view and op histogram (no graph, but a
    warning, when the reader failed: a reader bug must not hide the other results)."""

    name: str  # jaxpr, stablehlo, compiled
    text: str | Later  # a `Later` (and the view too) where made on first read (`lazy`)
    graph: Graph | None = None
    view: GraphSummary | Later | None = None
    hist: dict[str, int] = field(default_factory=dict)
    warning: str = ""
    side: Side | None = None  # its side of the fusion map, for the jaxpr and StableHLO

    @property
    def count(self) -> int | None:
        """Its ops (None: no graph, so no count)."""
        return None if self.graph is None else sum(self.hist.values())


@dataclass(frozen=True)
class CompiledRead:
    """The compiled HLO as read from one text: the IR, and its kernels and counts."""

    read: IRRead
    kernels: list[Kernel] = field(default_factory=list)
    fusion_count: int = 0
    kernel_count: int = 0
    fusion_map: FusionMap | None = None  # with the jaxpr and StableHLO, where made early


@dataclass(frozen=True)
class Executable:
    """What the compile made, read once it returned: the executable's text (a `Later`
    where the graph shown came from XLA's dump: made where first read), the compiled HLO
    read shown, and what JAX said about the compile."""

    text: str | Later
    shown: CompiledRead
    warnings: list[str] = field(default_factory=list)  # JAX's and XLA's, as they came
    events: dict[str, float] = field(default_factory=dict)  # JAX's compile events
    from_disk: bool = False  # JAX's persistent cache supplied the executable

    def made_text(self) -> str:
        """The executable's text, made now where it was left to be made."""
        return _made_now(self.text)


@dataclass(frozen=True)
class Analyses:
    """XLA's analyses of the executable: its cost, and its memory (the totals, the
    profile and the limit a run must fit in)."""

    cost: Cost
    memory: Memory


Specialized = tuple[list[SpecializedArg], list[ShapeOp]]


@dataclass
class Sections:
    """Every section an analysis produced, as far as it got (None: not reached, or not
    asked for). The pipeline sets each as its stage returns it."""

    error: ErrorInfo | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # trace, lower, compile
    jaxpr: IRRead | None = None
    stablehlo: IRRead | None = None
    mlir: str | None = None  # StableHLO with locations, when asked for
    executable: Executable | None = None
    # XLA's analyses, or (in the worker) a `Later` that makes them once the report's
    # head is sent: the first screen does not wait for them
    analyses: Analyses | Later | None = None
    # in a caller's own process, a `Later` that makes them where first read (`lazy`)
    fusion_map: Found[FusionMap] | Later | None = None
    donation: Donation | None = None
    sharding: Found[ShardingSection] | Later | None = None
    runs: RunStats | None = None
    eager: Found[RunStats] | None = None
    profile: Found[Profile] | None = None
    specialization: Found[Specialized] | None = None
    compile_profile: Found[CompileProfileSection] | None = None
    residuals: Found[tuple[list[Residual], str]] | None = None  # what jax.checkpoint saves
    device_memory: DeviceMemory | None = None  # the device's memory_stats() after the runs

    def analysed(self) -> Analyses | None:
        """XLA's analyses, made now where they were deferred."""
        if isinstance(self.analyses, Later):
            self.analyses = self.analyses.value()
        return self.analyses

    @property
    def lazy(self) -> bool:
        """Whether some section is still to be made where first read (`Later`)."""
        return any(type(s) is Later for s in (self.fusion_map, self.sharding, self.analyses))

    def irs(self) -> list[IRRead]:
        """The IRs read so far, in the order of the stages."""
        exe = self.executable
        found = (self.jaxpr, self.stablehlo, exe.shown.read if exe else None)
        return [r for r in found if r is not None]

    def graphs(self) -> dict[str, Graph]:
        """The IRs' graphs by name (an IR whose reader failed has none)."""
        return graphs_of(self.irs())

    def graph(self, name: str) -> Graph | None:
        return self.graphs().get(name)

    @property
    def fusion_entries(self) -> list[FusionEntry]:
        """The fusion map's kernels (none where it was not made)."""
        fusion = _value(self.fusion_map)
        return fusion.entries if fusion else []

    def with_beside(self, reads: list[IRRead]) -> Sections:
        """These sections with the IRs the reader thread has read beside the compile
        and the pipeline has not set yet (what a streamed glimpse shows early)."""
        irs = {r.name: r for r in reads}
        return replace(
            self,
            jaxpr=self.jaxpr or irs.get("jaxpr"),
            stablehlo=self.stablehlo or irs.get("stablehlo"),
        )


def graphs_of(reads: Iterable[IRRead]) -> dict[str, Graph]:
    """The graphs of `reads` by IR name (an IR whose reader failed has none)."""
    return {r.name: r.graph for r in reads if r.graph is not None}


def sides_of(reads: Iterable[IRRead]) -> dict[str, Side]:
    """The fusion map's sides made for `reads` (the jaxpr's and StableHLO's, where made)."""
    return {r.name: r.side for r in reads if r.side is not None}


def assemble(subject: Subject, found: Sections) -> Report:
    """The report of `subject` from `found`: built here, once. A section still to be
    made (`Later`) gives the report's fields that read it as `Later`s too."""
    exe = found.executable
    rows, shape_ops = _value(found.specialization) or ([], [])
    views = {r.name: r.view for r in found.irs() if r.view is not None}
    return Report(
        ok=found.error is None,
        error=found.error,
        subject=subject,
        timings=_timings(found, subject.device),
        jaxpr=None if found.jaxpr is None else _jaxpr(found.jaxpr),
        stablehlo=None if found.stablehlo is None else _stablehlo(found.stablehlo),
        compiled=None if exe is None else _compiled(exe),
        cost=_analysed(found, lambda a: a.cost),
        memory=_analysed(found, lambda a: _memory(a.memory, found)),
        graphs=_made(views) if any(type(v) is Later for v in views.values()) else views,
        kernels=[] if exe is None or exe.shown.read.graph is None else exe.shown.kernels,
        run=None if found.runs is None else Runs(jit=found.runs, eager=_value(found.eager)),
        donation=found.donation,
        compile_events={} if exe is None else exe.events,
        warnings=Later(lambda: _warnings(found)) if found.lazy else _warnings(found),
        fusion_map=_part(found.fusion_map, lambda f: [] if f is None else f.entries),
        fusion_map_coverage=_part(
            found.fusion_map, lambda f: None if f is None else FusionCoverage(**f.coverage)
        ),
        profile=_value(found.profile),
        mlir=found.mlir,
        specialization=rows,
        specialization_ops=shape_ops,
        sharding=_part(found.sharding, lambda s: s),
        compile_profile=_value(found.compile_profile),
        graph_models=found.graphs(),
    )


def _part(section: Found[T] | Later | None, part: Callable[[T | None], object]) -> object:
    """`part` of a section's value (None: no section, or none found), or a `Later` of it
    where the section is still to be made."""
    if type(section) is Later:
        return Later(lambda: part(_value(section)))
    return part(_value(section))


def _made(views: dict[str, GraphSummary | Later]) -> Later:
    """The views, each made where the report's `graphs` is first read."""
    return Later(lambda: {name: _made_now(view) for name, view in views.items()})


def _made_now(value: T | Later) -> T:
    return value.value() if type(value) is Later else value


def _analysed(found: Sections, part: Callable[[Analyses], T]) -> T | Later | None:
    """`part` of XLA's analyses: made now where they are, else once they are."""
    analyses = found.analyses
    if isinstance(analyses, Later):
        return Later(lambda: part(analyses.value()))
    return None if analyses is None else part(analyses)


def _memory(memory: Memory, found: Sections) -> Memory:
    """The memory section, with the residuals jax.checkpoint saves."""
    residuals, note = _value(found.residuals) or ([], "")
    return replace(memory, residuals=residuals, residuals_note=note, device=found.device_memory)


def _value(found: Found[T] | Later | None) -> T | None:
    """A section's value (a `Later` one made now)."""
    found = _made_now(found)
    return None if found is None else found.value


def _timings(found: Sections, device: str) -> Timings:
    """Each stage's time, the runs' where they ran, and the program's device time
    where the kernel profile read it."""
    profile = _value(found.profile)
    stages = Timings(
        trace_s=found.seconds.get("trace"),
        lower_s=found.seconds.get("lower"),
        compile_s=found.seconds.get("compile"),
        compile_from_disk=found.executable is not None and found.executable.from_disk,
        device_s=None if profile is None else profile.device_step_s,
    )
    stats, eager = found.runs, _value(found.eager)
    if stats is None:
        return stages
    return replace(
        stages,
        first_call_s=stats.first_call_s,
        run_median_s=stats.median_s,
        run_min_s=stats.min_s,
        run_p90_s=stats.p90_s,
        runs=stats.samples,
        eager_median_s=None if eager is None else eager.median_s,
        device_clock="device" if platform_of(device).trace_rules.device_clock else "host",
    )


def _jaxpr(read: IRRead) -> JaxprSection:
    return JaxprSection(text=read.text, eqn_count=read.count, primitives=_hist(read))


def _stablehlo(read: IRRead) -> StableHLOSection:
    return StableHLOSection(text=read.text or "", op_count=read.count, ops=_hist(read))


def _compiled(exe: Executable) -> CompiledSection:
    shown = exe.shown
    if shown.read.graph is None:
        return CompiledSection(text=exe.text)
    return CompiledSection(
        text=exe.text,
        op_count=shown.read.count,
        ops=shown.read.hist,
        fusion_count=shown.fusion_count,
        kernel_count=shown.kernel_count,
    )


def _hist(read: IRRead) -> dict[str, int]:
    return read.hist if read.graph is not None else {}


def _warnings(found: Sections) -> list[str]:
    """Every warning, in the order the stages ran (a report's readers expect it)."""
    exe = found.executable
    said = [r.warning for r in (found.jaxpr, found.stablehlo) if r is not None]
    if exe is not None:
        said += [exe.shown.read.warning, *exe.warnings]
    for each in (
        found.fusion_map,
        found.sharding,
        found.eager,
        found.profile,
        found.specialization,
        found.residuals,
        found.compile_profile,
    ):
        each = _made_now(each)
        said.append(each.warning if each is not None else "")
    return [w for w in said if w]
