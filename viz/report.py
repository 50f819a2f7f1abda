"""The Report: typed, JSON-able data describing one analysis.

Each section is a dataclass whose fields are the JSON keys of DESIGN.md's report
contract (extra fields only add to it); `Report.to_dict()` is the JSON the CLI
writes and the worker sends. Sections can also be read like the JSON
(`report.jaxpr["eqn_count"]`). Nothing here imports jax, so the app can read
reports that came from the worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from viz.errors import ErrorInfo
from viz.record import Record

# What each count counts; shown in the app and written into every report.
COUNT_DEFINITIONS = {
    "jaxpr.eqn_count": "equations of the traced jaxpr, including those inside nested "
    "jaxprs (pjit, scan, while, cond branches, custom_jvp/vjp); a container "
    "equation counts once itself",
    "stablehlo.op_count": "operations inside the module's functions, constants "
    "included, func.func and return terminators excluded; ops with regions "
    "(while, case, reduce) count once plus their region ops",
    "compiled.op_count": "instructions XLA executes after optimization: every "
    "non-fused instruction plus one per fusion (fused ops are not counted "
    "separately)",
    "compiled.fusion_count": "fusion instructions in the optimized HLO",
    "compiled.kernel_count": "units of work XLA launches: fusions plus non-fused "
    "compute instructions (parameters, constants, tuples, bitcasts and control "
    "flow shells excluded)",
}


@dataclass
class Timings(Record):
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


@dataclass
class JaxprSection(Record):
    text: str = ""
    eqn_count: int | None = None
    primitives: dict[str, int] = field(default_factory=dict)


@dataclass
class StableHLOSection(Record):
    text: str = ""
    op_count: int | None = None
    ops: dict[str, int] = field(default_factory=dict)


@dataclass
class CompiledSection(Record):
    text: str = ""
    op_count: int | None = None
    ops: dict[str, int] = field(default_factory=dict)
    fusion_count: int | None = None
    kernel_count: int | None = None


@dataclass
class Cost(Record):
    flops: float | None = None
    bytes_accessed: float | None = None
    transcendentals: float | None = None


@dataclass
class Memory(Record):
    argument_bytes: int | None = None
    output_bytes: int | None = None
    temp_bytes: int | None = None
    alias_bytes: int | None = None
    generated_code_bytes: int | None = None


@dataclass
class Runs(Record):
    """Run-time distributions (`viz.timing.RunStats` as data): jit, and eager if it ran."""

    jit: dict[str, Any] | None = None
    eager: dict[str, Any] | None = None


@dataclass
class DonatedArg(Record):
    name: str  # the leaf as JAX names it: x, params['w']
    donated: bool
    aliased_output: int | None  # flat output index whose buffer it became
    reason: str = ""  # why a donated leaf was not reused


@dataclass
class Donation(Record):
    args: list[DonatedArg] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    saved_bytes: int | None = None  # memory_analysis's alias bytes: outputs written in place

    def to_dict(self) -> dict[str, Any]:
        return {
            "args": [a.to_dict() for a in self.args],
            "warnings": list(self.warnings),
            "saved_bytes": self.saved_bytes,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Donation | None:
        if data is None:
            return None
        args = [DonatedArg.from_dict(a) for a in data.get("args", [])]
        return cls(args, list(data.get("warnings", [])), data.get("saved_bytes"))


@dataclass
class Report:
    ok: bool = True
    error: dict[str, Any] | None = None
    device: str = "cpu"
    jax_version: str = ""
    function: str = ""
    args: str = ""
    static: list[str] = field(default_factory=list)
    donate: list[str] = field(default_factory=list)
    compiler_options: dict[str, Any] = field(default_factory=dict)  # as passed to XLA
    x64: bool = False
    source_file: str | None = None
    timings: Timings = field(default_factory=Timings)
    jaxpr: JaxprSection | None = None
    stablehlo: StableHLOSection | None = None
    compiled: CompiledSection | None = None
    cost: Cost | None = None
    memory: Memory | None = None
    graphs: dict[str, Any] = field(default_factory=dict)  # ir → {total_nodes, visible_nodes, dot}
    kernels: list[dict[str, Any]] = field(default_factory=list)
    run: Runs | None = None
    donation: Donation | None = None
    compile_events: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # issue #12: kernels and what went into them (viz.fusion.map), per-kernel time
    fusion_map: list[dict[str, Any]] = field(default_factory=list)
    fusion_map_coverage: dict[str, Any] | None = None
    profile: dict[str, Any] | None = None
    mlir: str | None = None  # StableHLO with locations, when asked for (analyze(mlir=True))
    count_definitions: dict[str, str] = field(default_factory=lambda: dict(COUNT_DEFINITIONS))
    graph_models: dict[str, Any] = field(default_factory=dict)  # full Graphs, for the app

    SECTIONS: ClassVar[dict[str, type[Record]]] = {
        "timings": Timings,
        "jaxpr": JaxprSection,
        "stablehlo": StableHLOSection,
        "compiled": CompiledSection,
        "cost": Cost,
        "memory": Memory,
        "run": Runs,
        "donation": Donation,
    }

    def to_dict(self, include_models: bool = False) -> dict[str, Any]:
        """Plain data: the JSON of DESIGN.md's report contract (serializes only)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in self.SECTIONS:
            section = data[name]
            data[name] = section.to_dict() if section is not None else None
        models = data.pop("graph_models")
        if include_models:
            data["graph_models"] = {
                ir: g.to_dict() if hasattr(g, "to_dict") else g for ir, g in models.items()
            }
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        for name, section in cls.SECTIONS.items():
            if name in values:
                values[name] = section.from_dict(values[name])
        return cls(**values)

    def fail(self, error: ErrorInfo | dict[str, Any]) -> Report:
        self.ok = False
        self.error = error.to_dict() if isinstance(error, ErrorInfo) else error
        return self
