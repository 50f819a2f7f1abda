"""The Report: plain, JSON-able data describing one analysis.

Keys follow DESIGN.md's report contract; extra keys only add to it. Nothing here
imports jax, so the app can read reports that came from the worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

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


def _empty_timings() -> dict[str, Any]:
    keys = ("trace_s", "lower_s", "compile_s", "first_call_s", "run_median_s", "run_min_s")
    return {**dict.fromkeys(keys), "runs": 0, "eager_median_s": None}


@dataclass
class Report:
    ok: bool = True
    error: dict[str, Any] | None = None
    device: str = "cpu"
    jax_version: str = ""
    function: str = ""
    args: str = ""
    static: list[str] = field(default_factory=list)
    source_file: str | None = None
    timings: dict[str, Any] = field(default_factory=_empty_timings)
    jaxpr: dict[str, Any] | None = None
    stablehlo: dict[str, Any] | None = None
    compiled: dict[str, Any] | None = None
    cost: dict[str, Any] | None = None
    memory: dict[str, Any] | None = None
    graphs: dict[str, Any] = field(default_factory=dict)
    kernels: list[dict[str, Any]] = field(default_factory=list)
    run: dict[str, Any] | None = None  # run-time distribution: jit and eager samples
    compile_events: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # issue #12: kernels and what went into them (viz.fusion_map), per-kernel time
    fusion_map: list[dict[str, Any]] = field(default_factory=list)
    fusion_map_coverage: dict[str, Any] | None = None
    profile: dict[str, Any] | None = None
    mlir: str | None = None  # StableHLO with locations, when asked for (analyze(mlir=True))
    count_definitions: dict[str, str] = field(default_factory=lambda: dict(COUNT_DEFINITIONS))
    graph_models: dict[str, Any] = field(default_factory=dict)  # full Graphs, for the app

    def to_dict(self, include_models: bool = False) -> dict[str, Any]:
        """Plain data (shallow: the sections are already plain dicts and lists).

        Builds the fusion map first when the graph models allow (issue #12: it is
        computed on request, here, rather than by every analysis)."""
        from viz.fusion_report import add_fusion_map

        add_fusion_map(self)
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        models = data.pop("graph_models")
        if include_models:
            data["graph_models"] = {
                ir: g.to_dict() if hasattr(g, "to_dict") else g for ir, g in models.items()
            }
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    def fail(self, error: dict[str, Any]) -> Report:
        self.ok = False
        self.error = error
        return self
