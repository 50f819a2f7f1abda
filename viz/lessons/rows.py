"""The lessons' measurements as rows (no jax): what `viz.lessons.measure` finds, as the
worker's replies carry it and the lesson pages and charts read it."""

from __future__ import annotations

from dataclasses import dataclass

from viz.plain import Plain


@dataclass
class PlacementRow(Plain):
    strategy: str
    compile_s: float
    first_call_s: float
    run_s: float
    executables: int
    kernels_per_call: int
    run_min_s: float = 0.0  # the fastest of the per-call samples (run_s: their median)
    program: str = ""  # the compiled program's fingerprint under jit(outer), else ""


@dataclass
class StageTimes(Plain):
    """One compile of a lesson's program, stage by stage, and its size."""

    trace_s: float
    lower_s: float
    compile_s: float
    total_s: float
    eqns: int
    stablehlo_lines: int
    run_s: float


@dataclass
class ScalingRow(StageTimes):
    n: int = 0
    variant: str = ""  # unrolled | scan | fori_loop


@dataclass
class ShapeRow(StageTimes):
    size: int = 0
    spec: str = ""
    eager_s: float = 0.0
    break_even_calls: float | None = None  # calls of one shape that pay for its compile


@dataclass
class BucketCostRow(Plain):
    bucket: int
    compile_s: float
    run_s: float


@dataclass
class UnrollVerdict(Plain):
    """At one N: what unrolling costs over scan once, what it saves per call, and after
    how many calls it has paid off (None: never)."""

    n: int
    extra_compile_s: float
    saved_per_call_s: float
    pays_off_after_calls: float | None
