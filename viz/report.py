"""The Report: typed, JSON-able data describing one analysis.

Each section is a plain dataclass (`viz.plain`) whose fields are the JSON keys of
DESIGN.md's report contract (extra fields only add to it). `Report.to_dict()` is the
JSON the CLI writes and the worker sends; `Report.from_dict()` reads it back, once,
where it arrives (the worker client, the history), and every reader after that reads
attributes. Nothing here imports jax, so the app can read reports from the worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from types import ModuleType
from typing import Any

from viz.compile_profile.model import CompileProfileSection
from viz.errors import ErrorInfo
from viz.fusion.model import FusionCoverage, FusionEntry
from viz.fusion.profile import Profile
from viz.ir.model import IR, Graphs
from viz.memory.model import Memory
from viz.plain import Arriving, Plain, encode, flat
from viz.settings import Settings
from viz.sharding.model import ShardingSection
from viz.specialization.model import ShapeOp, SpecializedArg
from viz.timing import RunStats
from viz.units import plural

# what XLA's cost analysis does with a while loop (a scan, a fori_loop): its body's
# FLOPs and bytes once, whatever its trip count
LOOP_COST = "XLA counts a loop's body once, whatever its trip count"


class Count(StrEnum):
    """A count the report defines (`count_definitions`), by its path in the JSON."""

    JAXPR_EQNS = "jaxpr.eqn_count"
    STABLEHLO_OPS = "stablehlo.op_count"
    COMPILED_OPS = "compiled.op_count"
    FUSIONS = "compiled.fusion_count"
    KERNELS = "compiled.kernel_count"


# What each count counts; shown in the app and written into every report.
COUNT_DEFINITIONS = {
    Count.JAXPR_EQNS: "equations of the traced jaxpr, including those inside nested "
    "jaxprs (pjit, scan, while, cond branches, custom_jvp/vjp); a container "
    "equation counts once itself",
    Count.STABLEHLO_OPS: "operations inside the module's functions, constants "
    "included, func.func and return terminators excluded; ops with regions "
    "(while, case, reduce) count once plus their region ops",
    Count.COMPILED_OPS: "instructions XLA executes after optimization: every "
    "non-fused instruction plus one per fusion (fused ops are not counted "
    "separately)",
    Count.FUSIONS: "fusion instructions in the optimized HLO",
    Count.KERNELS: "units of work XLA launches: fusions plus non-fused "
    "compute instructions (parameters, constants, tuples, bitcasts and control "
    "flow shells excluded)",
}


@dataclass
class Timings(Plain):
    trace_s: float | None = None
    lower_s: float | None = None
    compile_s: float | None = None
    first_call_s: float | None = None
    run_median_s: float | None = None
    run_min_s: float | None = None
    run_p90_s: float | None = None
    runs: int = 0
    eager_median_s: float | None = None
    compile_from_disk: bool = False  # JAX's persistent cache supplied the executable
    # the program's own time per call on the device (from the kernel profile's trace:
    # its `XLA Modules` runs); None: not profiled, or the device has no clock of its own
    device_s: float | None = None  # per call, on the device's clock (the profile's trace)
    device_clock: str = ""  # device: a clock of its own; host: the wall clock (cpu)


@dataclass
class JaxprSection(Arriving, Plain):
    text: str = ""
    eqn_count: int | None = None
    primitives: dict[str, int] = field(default_factory=dict)


@dataclass
class StableHLOSection(Arriving, Plain):
    text: str = ""
    op_count: int | None = None
    ops: dict[str, int] = field(default_factory=dict)


@dataclass
class CompiledSection(Arriving, Plain):
    text: str = ""
    op_count: int | None = None
    ops: dict[str, int] = field(default_factory=dict)
    fusion_count: int | None = None
    kernel_count: int | None = None


@dataclass
class Cost(Plain):
    flops: float | None = None
    bytes_accessed: float | None = None
    transcendentals: float | None = None


@dataclass
class Runs(Plain):
    """Run-time distributions (`viz.timing`): jit, and eager if it ran."""

    jit: RunStats | None = None
    eager: RunStats | None = None


@dataclass
class GraphSummary(Plain):
    """What the report keeps of one IR's graph: node counts and the default view's DOT."""

    total_nodes: int
    visible_nodes: int
    dot: str


@dataclass
class Kernel(Plain):
    """One fusion XLA launches: its fused-op histogram and the source lines in it."""

    name: str
    kind: str
    colour: str
    ops: dict[str, int] = field(default_factory=dict)
    lines: list[int] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


@dataclass
class DonatedArg(Plain):
    name: str  # the leaf as JAX names it: x, params['w']
    donated: bool
    aliased_output: int | None  # flat output index whose buffer it became
    reason: str = ""  # why a donated leaf was not reused


@dataclass
class Donation(Plain):
    args: list[DonatedArg] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    saved_bytes: int | None = None  # memory_analysis's alias bytes: outputs written in place


@dataclass(frozen=True)
class Subject(Plain):
    """What an analysis is of, and where and how it ran: the report's header (its keys
    the report's own, in this order, in its JSON)."""

    device: str = "cpu"
    jax_version: str = ""
    function: str = ""
    args: str = ""
    static: list[str] = field(default_factory=list)
    donate: list[str] = field(default_factory=list)
    compiler_options: dict[str, Any] = field(default_factory=dict)  # as passed to XLA
    x64: bool = False
    source_file: str | None = None

    @classmethod
    def asked(cls, settings: Settings) -> Subject:
        """What `settings` ask for, before anything ran: their function, args spec,
        static and donated arguments, compiler options and device (the rest is known
        once it ran)."""
        return cls(
            function=settings.function or "",
            args=settings.args,
            static=list(settings.static),
            donate=list(settings.donate),
            compiler_options=dict(settings.compiler_options),
            device=settings.device,
        )


@dataclass(frozen=True)
class Report(Arriving, Plain):
    """Built once, from what each stage found (`assemble`), and never changed after:
    `dataclasses.replace` makes another where one is really needed. From the worker, its
    texts, fusion map, kernels and graph models follow the rest (`viz.worker.parts`):
    reading one waits for it (`viz.plain.Arriving`)."""

    ok: bool = True
    error: ErrorInfo | None = None
    subject: Subject = field(default_factory=Subject, metadata=flat())
    timings: Timings = field(default_factory=Timings)
    jaxpr: JaxprSection | None = None
    stablehlo: StableHLOSection | None = None
    compiled: CompiledSection | None = None
    cost: Cost | None = None
    memory: Memory | None = None
    graphs: dict[str, GraphSummary] = field(default_factory=dict)  # by IR
    kernels: list[Kernel] = field(default_factory=list)
    run: Runs | None = None
    donation: Donation | None = None
    compile_events: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # issue #12: kernels and what went into them (viz.fusion.map), per-kernel time
    fusion_map: list[FusionEntry] = field(default_factory=list)
    fusion_map_coverage: FusionCoverage | None = None
    profile: Profile | None = None
    mlir: str | None = None  # StableHLO with locations, when asked for (analyze(mlir=True))
    # issue #21: what the executable is specialized on, per argument leaf
    specialization: list[SpecializedArg] = field(default_factory=list)
    specialization_ops: list[ShapeOp] = field(default_factory=list)  # sizes from arguments
    # issue #21: how the program is split over a device mesh (None: one device)
    sharding: ShardingSection | None = None
    # issue #36: where the compile time went (analyze(compile_profile=True))
    compile_profile: CompileProfileSection | None = None
    count_definitions: dict[str, str] = field(default_factory=lambda: dict(COUNT_DEFINITIONS))
    graph_models: Graphs = field(default_factory=Graphs)  # full graphs, for the app

    def __post_init__(self) -> None:
        if not isinstance(self.graph_models, Graphs):  # given as a dict of graphs
            object.__setattr__(self, "graph_models", Graphs(self.graph_models))

    def to_dict(self, include_models: bool = False) -> dict[str, Any]:
        """Plain data: the JSON of DESIGN.md's report contract (serializes only). The
        graph models travel only when asked for (the worker sends them to the app)."""
        data: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "subject":
                data.update(self.subject.to_dict())  # flat: the header's keys are its own
            elif f.name != "graph_models" or include_models:
                data[f.name] = encode(getattr(self, f.name))
        return data

    def public_dict(self) -> dict[str, Any]:
        """The report file jitscope writes (the CLI's `--json`, the app's download, the
        HTML export): the JSON without the StableHLO with locations, which goes to a
        file of its own (`--mlir`)."""
        data = self.to_dict()
        del data["mlir"]
        return data

    def __repr__(self) -> str:
        """One line: the dataclass's own repr carries every IR's text (megabytes for a
        big model), and a notebook stores the repr beside the HTML of each output."""
        chain = " → ".join(
            f"{n} {what}"
            for n, what in (
                (self.jaxpr and self.jaxpr.eqn_count, "eqns"),
                (self.stablehlo and self.stablehlo.op_count, "ops"),
                (self.compiled and self.compiled.kernel_count, "kernels"),
            )
            if n is not None
        )
        state = f"error {self.error.kind.value}" if self.error else "ok"
        said = "; ".join(part for part in (state, chain) if part)
        return f"<Report {self.function}({self.args}) on {self.device}: {said}>"

    def definition(self, count: Count) -> str | None:
        """What `count` counts, as this report defines it."""
        return self.count_definitions.get(count)

    def section(self, ir: IR) -> JaxprSection | StableHLOSection | CompiledSection | None:
        """One IR's section (None: the analysis did not get that far)."""
        sections = {IR.JAXPR: self.jaxpr, IR.STABLEHLO: self.stablehlo, IR.COMPILED: self.compiled}
        return sections[ir]

    def _repr_html_(self) -> str:
        """Jupyter, Colab and VS Code draw a Report as its Overview (viz.notebook)."""
        return _notebook().repr_html(self)

    def _ipython_display_(self) -> None:
        """IPython displays a Report through here: a report that `viz.show` already drew in
        this cell (its last line) displays nothing, and leaves no empty `Out[n]:`."""
        _notebook().display_report(self)

    @classmethod
    def failed(cls, subject: Subject, error: ErrorInfo) -> Report:
        """The report of an analysis of `subject` that found nothing but `error`."""
        return cls(ok=False, error=error, subject=subject)

    # -- its header, read where it is kept: the subject -----------------------------
    @property
    def device(self) -> str:
        return self.subject.device

    @property
    def jax_version(self) -> str:
        return self.subject.jax_version

    @property
    def function(self) -> str:
        return self.subject.function

    @property
    def args(self) -> str:
        return self.subject.args

    @property
    def static(self) -> list[str]:
        return self.subject.static

    @property
    def donate(self) -> list[str]:
        return self.subject.donate

    @property
    def compiler_options(self) -> dict[str, Any]:
        return self.subject.compiler_options

    @property
    def x64(self) -> bool:
        return self.subject.x64

    @property
    def source_file(self) -> str | None:
        return self.subject.source_file

    # -- derived numbers, computed here once for every reader ---------------------
    @property
    def compile_total_s(self) -> float:
        """trace + lower + compile: the one-time cost of the first call."""
        t = self.timings
        return sum(v or 0 for v in (t.trace_s, t.lower_s, t.compile_s))

    @property
    def memory_total_bytes(self) -> int | None:
        """Arguments + outputs + XLA's temporaries (None before compiling)."""
        m = self.memory
        if m is None:
            return None
        return sum(v or 0 for v in (m.argument_bytes, m.output_bytes, m.temp_bytes))

    @property
    def cost_note(self) -> str:
        """What XLA's cost analysis (`cost`) leaves out: a while loop's body (a scan, a
        fori_loop) counts once, whatever its trip count; '' for a program without one."""
        loops = (self.compiled.ops or {}).get("while", 0) if self.compiled else 0
        if not loops:
            return ""
        return f"{LOOP_COST} ({plural(loops, 'while loop')})"

    @property
    def mapped_kernels(self) -> int:
        """Kernels in the fusion map (`no_kernel` instructions left out)."""
        return sum(1 for e in self.fusion_map if e.is_kernel)

    @property
    def error_line(self) -> int | None:
        return self.error.line if self.error else None


def _notebook() -> ModuleType:
    """`viz.notebook`, which draws a report in a notebook cell. It imports this module,
    so it is imported here, when a notebook first draws one: the one hook back."""
    import viz.notebook

    return viz.notebook
