"""Measurements behind the lesson pages; they run in the worker (they import jax).

Each function takes its lesson's request's `Settings` (the code, the function, its args
spec) and what the lesson sweeps (the worker's handler unpacks the request: this package
never imports the worker, whose replies carry these rows) and measures the user's own
code now into the lesson's typed rows (`viz.lessons.rows`):
- `placement`: jit on the outer function, the inner one, both, or neither;
- `scaling`: compile cost of a loop body repeated N times, unrolled vs
  `lax.scan` vs `lax.fori_loop`;
- `shape_sweep`: compile and run time as one dimension of one argument grows;
- `bucket_costs`: ahead-of-time compile and run time per batch-size bucket.
`progress` hears a `Progress` frame's JSON after each measurement (`viz.progress`).
Everything compiles through `viz.stages` (x64, the device, the spec); `expressions`
is the targets' (False in demo mode: the spec language and the code's own names).
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Callable
from typing import Any

import jax
from jax import lax
from jax.extend.core import JaxprEqn, jaxpr_as_fun

from viz import events
from viz.ir.hlo import read_hlo
from viz.ir.kernels import kernel_count, kernels
from viz.ir.model import Graph
from viz.lessons.rows import BucketCostRow, PlacementRow, ScalingRow, ShapeRow, StageTimes
from viz.lessons.verdicts import break_even, fit_exponent
from viz.progress import OnProgress, Progress
from viz.settings import Settings
from viz.source import find_function, load_module
from viz.spec import resize
from viz.stages import Compiled, block, timed, trace
from viz.target import Args, Target
from viz.timing import time_calls
from viz.units import seconds


def _quick_time(call: Callable[[], Any], budget_s: float = 0.5) -> float:
    return time_calls(call, block, max_samples=7, budget_s=budget_s).median_s


def _step(progress: OnProgress, done: int, total: int, label: str) -> None:
    progress(Progress(done, total, label).to_dict())


# -- 1. where to put jit -------------------------------------------------------
def placement(
    settings: Settings, outer: str, inner: str, progress: OnProgress, expressions: bool = True
) -> tuple[list[PlacementRow], str]:
    """Four strategies on the same outer(inner) program (its settings' code; their args,
    the outer function's), measured end to end: their rows and the recommendation."""
    strategies = [
        ("jit(outer)", True, False),
        ("jit(inner) only", False, True),
        ("both", True, True),
        ("none", False, False),
    ]
    _warm_up(settings, outer, inner, expressions)
    rows = []
    for done, (label, jit_outer, jit_inner) in enumerate(strategies, 1):
        jax.clear_caches()  # every strategy starts cold (a cache lab in this worker is told)
        target = _placement_target(settings, outer, inner, jit_inner, expressions)
        rows.append(_measure_placement(target, settings.args, label, jit_outer))
        _step(progress, done, len(strategies), label)
    return rows, _recommend(rows, outer, inner)


def _warm_up(settings: Settings, outer: str, inner: str, expressions: bool) -> None:
    """Compile the outer program once, unmeasured: the process's first compile pays
    one-time costs (JAX's and XLA's own start) that would land on the first strategy."""
    target = _placement_target(settings, outer, inner, False, expressions)
    trace(target, target.args(settings.args)).lower().compile()


def _placement_target(
    settings: Settings, outer: str, inner: str, jit_inner: bool, expressions: bool
) -> Target:
    """The outer function of a fresh module (so the inner rebinding stays local), its
    inner function jitted or not."""
    code = settings.code
    module = load_module(code)
    inner_fn = find_function(module, code, inner)
    if jit_inner:
        setattr(module, inner, jax.jit(inner_fn))  # outer looks its callee up at call time
    outer_fn = find_function(module, code, outer)
    return Target.from_settings(
        settings,
        outer_fn,
        namespace=vars(module),
        user_file=module.__file__,
        expressions=expressions,
    )


def _measure_placement(target: Target, args: str, label: str, jit_outer: bool) -> PlacementRow:
    parsed = target.args(args)
    call = target.jitted if jit_outer else target.fn
    with target.scope(parsed):
        values = parsed.concrete()
        # the first call traces the user's code (and compiles it): its failure is theirs
        with events.collect() as found, timed("trace", target.user_file):
            start = time.perf_counter()
            block(call(*values))
            first = time.perf_counter() - start
        runs = time_calls(lambda: call(*values), block, max_samples=7, budget_s=0.5)
        launched, program = _kernels_per_call(target, parsed, jit_outer)
    return PlacementRow(
        strategy=label,
        compile_s=found.compile_seconds(),
        first_call_s=first,
        run_s=runs.median_s,
        executables=found.backend_compiles(),
        kernels_per_call=launched,
        run_min_s=runs.min_s,
        program=program,
    )


def _kernels_per_call(target: Target, parsed: Args, jit_outer: bool) -> tuple[int, str]:
    """Kernels launched by one call of the outer function, and the compiled program's
    fingerprint under jit ("" without: no one program): the compiled program's kernels
    under jit; otherwise one per eagerly dispatched primitive, plus each jitted inner
    call's kernels."""
    traced = trace(target, parsed)
    if jit_outer:
        graph = read_hlo(traced.lower().compile().compiled)
        return kernel_count(graph), _fingerprint(graph)
    per_jaxpr: dict[int, int] = {}
    total = 0
    for eqn in traced.jaxpr.eqns:
        inner = eqn.params.get("jaxpr") if eqn.primitive.name in ("pjit", "jit") else None
        if inner is None:
            total += 1
            continue
        if id(inner) not in per_jaxpr:
            per_jaxpr[id(inner)] = _call_kernels(target, parsed, eqn)
        total += per_jaxpr[id(inner)]
    return total, ""


def _fingerprint(graph: Graph) -> str:
    """The compiled program as its kernels (kind and ops, in order), without the names
    and source lines that differ between two compiles of the same program."""
    shape = [(k["kind"], sorted(k["ops"].items())) for k in kernels(graph)]
    return hashlib.sha1(repr((kernel_count(graph), shape)).encode()).hexdigest()[:16]


def _call_kernels(target: Target, parsed: Args, eqn: JaxprEqn) -> int:
    """Kernels of a jitted call that runs eagerly dispatched: its own executable, compiled
    from its jaxpr on its operands' shapes, with the outer target's device and x64."""
    call = Target.from_settings(
        Settings(device=target.device),
        jaxpr_as_fun(eqn.params["jaxpr"]),
        namespace={},
        user_file=target.user_file,
    )
    avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in eqn.invars]
    compiled = trace(call, Args.of_avals(avals, parsed.x64)).lower().compile()
    return kernel_count(read_hlo(compiled.compiled))


TIE_SHARE = 0.15  # per-call times closer than this share of the faster are one speed


def same_speed(a: PlacementRow, b: PlacementRow) -> bool:
    """Whether two strategies' per-call times differ by measurement noise only: their
    samples' ranges (fastest to median) overlap, or their fastest samples are within
    TIE_SHARE of each other."""
    overlap = a.run_min_s <= b.run_s and b.run_min_s <= a.run_s
    close = abs(a.run_min_s - b.run_min_s) <= TIE_SHARE * min(a.run_min_s, b.run_min_s)
    return overlap or close


def _recommend(rows: list[PlacementRow], outer: str, inner: str) -> str:
    by = {r.strategy: r for r in rows}
    best = min(rows, key=lambda r: r.run_s)
    fastest = [r for r in rows if same_speed(r, best) or (r.program and r.program == best.program)]
    whole, part, both = by["jit(outer)"], by["jit(inner) only"], by["both"]
    names = " and ".join(f"**{r.strategy}**" for r in fastest)
    tie = ", one speed within the runs' noise" if len(fastest) > 1 else ""
    said = [f"Fastest per call: {names} ({seconds(best.run_s)}{tie})."]
    if whole.program and whole.program == both.program:
        said.append(
            f"jit(outer) and both are the same program ({whole.kernels_per_call} kernels): "
            f"XLA inlines the jitted `{inner}` into `{outer}`; their differences are noise."
        )
    said.append(_whole_vs_part(whole, part, outer, inner))
    said.append(
        f"Compile cost: {seconds(whole.compile_s)} for jit(outer), "
        f"{seconds(part.compile_s)} for jit(inner) only."
    )
    return " ".join(said)


def _whole_vs_part(whole: PlacementRow, part: PlacementRow, outer: str, inner: str) -> str:
    """jit on the outer function against jit on the inner one alone, per call."""
    if same_speed(whole, part):
        return f"jit on `{outer}` and jit on `{inner}` alone run at the same speed."
    ratio = part.run_s / whole.run_s
    faster = f"{ratio:.1f}× faster" if ratio > 1 else f"{1 / ratio:.1f}× slower"
    return (
        f"jit on `{outer}` runs {faster} per call than jit on `{inner}` alone "
        f"({whole.kernels_per_call} vs {part.kernels_per_call} kernels per call): XLA "
        f"fuses across the calls of `{inner}` only when it sees the whole program."
    )


# -- 2. compile cost vs program size --------------------------------------------
def loop_variants(step: Callable, n: int) -> dict[str, Callable]:
    def unrolled(x: Any) -> Any:
        for _ in range(n):
            x = step(x)
        return x

    def scanned(x: Any) -> Any:
        return lax.scan(lambda c, _: (step(c), None), x, None, length=n)[0]

    def fori(x: Any) -> Any:
        return lax.fori_loop(0, n, lambda _, c: step(c), x)

    return {"unrolled": unrolled, "scan": scanned, "fori_loop": fori}


def scaling(
    settings: Settings, sizes: list[int], progress: OnProgress, expressions: bool = True
) -> tuple[list[ScalingRow], dict[str, float | None]]:
    """The settings' function (the step) unrolled, scanned and fori-looped N times for
    each N of `sizes`: the rows, and each variant's fitted exponent of compile time
    against N."""
    step_target = Target.from_settings(settings, expressions=expressions)
    rows: list[ScalingRow] = []
    total = len(sizes) * 3
    for n in sizes:
        for variant, fn in loop_variants(step_target.fn, n).items():
            target = Target.from_settings(
                settings,
                fn,
                namespace=step_target.namespace,
                user_file=step_target.user_file,
                expressions=expressions,
            )
            times, compiled = _stage_times(target, target.args(settings.args))
            times.run_s = _run_time(compiled, 0.3)
            rows.append(ScalingRow(**vars(times), n=n, variant=variant))
            _step(progress, len(rows), total, f"{variant} N={n}")
    exponents = {
        v: fit_exponent(
            [r.n for r in rows if r.variant == v and r.n >= 4],
            [r.compile_s for r in rows if r.variant == v and r.n >= 4],
        )
        for v in ("unrolled", "scan", "fori_loop")
    }
    return rows, exponents


def _stage_times(target: Target, parsed: Args) -> tuple[StageTimes, Compiled]:
    """Trace, lower and compile once through the staged pipeline, each stage timed (the
    run time is the caller's to measure)."""
    traced = trace(target, parsed)
    lowered = traced.lower()
    compiled = lowered.compile()
    times = StageTimes(
        trace_s=traced.seconds,
        lower_s=lowered.seconds,
        compile_s=compiled.seconds,
        total_s=traced.seconds + lowered.seconds + compiled.seconds,
        eqns=len(traced.jaxpr.eqns),
        stablehlo_lines=lowered.text().count("\n"),
        run_s=0.0,
    )
    return times, compiled


def _run_time(compiled: Compiled, budget_s: float) -> float:
    """Median time of one call of the compiled executable (inside its target's scope)."""
    target, parsed = compiled.target, compiled.args
    with target.scope(parsed):
        dynamic = target.dynamic(parsed.concrete())
        return _quick_time(lambda: compiled.compiled(*dynamic), budget_s)


# -- 3. shape sweep ---------------------------------------------------------------
def shape_sweep(
    settings: Settings,
    param: str,
    axis: int,
    sizes: list[int],
    progress: OnProgress,
    expressions: bool = True,
) -> list[ShapeRow]:
    """Compile and run time as axis `axis` of parameter `param` takes each of `sizes`."""
    args = settings.args
    target = Target.from_settings(settings, expressions=expressions)
    names = target.param_names(len(target.args(args).items))
    _stage_times(target, target.args(resize(args, names, param, axis, _unswept(sizes))))
    rows = []
    for done, size in enumerate(sizes, 1):
        spec = resize(args, names, param, axis, size)
        times, compiled = _stage_times(target, target.args(spec))
        times.run_s = run = _run_time(compiled, 0.4)
        eager = compiled.time_eager(7, 0.4).median_s
        rows.append(
            ShapeRow(
                **vars(times),
                size=size,
                spec=spec,
                eager_s=eager,
                break_even_calls=break_even(times.total_s, eager, run),
            )
        )
        _step(progress, done, len(sizes), f"{param} axis {axis} = {size}")
    return rows


def _unswept(sizes: list[int]) -> int:
    """A size the sweep does not measure: compiled once first, unmeasured, so that the
    first swept size does not carry the process's first trace and compile of the
    function (JAX's and XLA's own start)."""
    return next(n for n in itertools.count(1) if n not in sizes)


# -- 4. batch-size buckets ----------------------------------------------------------
def bucket_costs(
    settings: Settings,
    batch_arg: str,
    buckets: list[int],
    progress: OnProgress,
    expressions: bool = True,
) -> list[BucketCostRow]:
    """AOT-compile the function at each bucket size of `batch_arg`'s first axis; compile
    and run time per bucket."""
    args = settings.args
    target = Target.from_settings(settings, expressions=expressions)
    names = target.param_names(len(target.args(args).items))
    rows = []
    for done, size in enumerate(sorted(set(buckets)), 1):
        parsed = target.args(resize(args, names, batch_arg, 0, size))
        compiled = trace(target, parsed).lower().compile()
        rows.append(BucketCostRow(size, compiled.seconds, _run_time(compiled, 0.3)))
        _step(progress, done, len(set(buckets)), f"bucket {size}")
    return rows
