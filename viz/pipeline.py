"""trace → lower → compile → run, each stage timed, errors classified.

Follows JAX's own staged API (`jit(f).trace(...)` → `Traced.lower()` →
`Lowered.compile()`): each stage's output feeds the next, and everything read
from it lands in the Report as plain data.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jax

from viz import graph as graph_views
from viz.errors import ErrorInfo, UserCodeError, classify
from viz.ir import model
from viz.ir.hlo import fusion_count, kernel_count, kernels, read_hlo
from viz.ir.jaxpr import read_jaxpr
from viz.ir.stablehlo import read_stablehlo
from viz.report import Report
from viz.spec import SpecError, abstract_args, concrete_args, input_bytes, parse_spec, uses_x64
from viz.timing import time_calls

DEFAULT_MEMORY_LIMIT = 8 << 30

_events: list[tuple[str, float]] = []


def _record_event(name: str, duration: float, **_: Any) -> None:
    _events.append((name, duration))


def _record_plain_event(name: str, **_: Any) -> None:
    _events.append((name, 0.0))  # e.g. /jax/compilation_cache/cache_hits


jax.monitoring.register_event_duration_secs_listener(_record_event)
jax.monitoring.register_event_listener(_record_plain_event)


BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"


@contextlib.contextmanager
def compile_events() -> Iterator[list[tuple[str, float]]]:
    """Collect JAX's own compile-duration events (name, seconds) emitted inside the block."""
    start = len(_events)
    found: list[tuple[str, float]] = []
    try:
        yield found
    finally:
        found.extend(e for e in _events[start:] if "/compile" in e[0] or "cache" in e[0])


def event_totals(events: list[tuple[str, float]]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for name, duration in events:
        totals[name] = totals.get(name, 0.0) + duration
    return totals


def compile_seconds(events: list[tuple[str, float]]) -> float:
    """Time JAX spent tracing, lowering and compiling, by its own events."""
    return sum(d for name, d in events if "/compile/" in name)


def disk_cache_hit(events: list[tuple[str, float]]) -> bool:
    """Whether the persistent compilation cache supplied an executable."""
    return any(name.endswith("/compilation_cache/cache_hits") for name, _ in events)


def backend_compiles(events: list[tuple[str, float]]) -> int:
    """How many XLA compilations ran (each jitted function or eager primitive compiled)."""
    return sum(1 for name, _ in events if name == BACKEND_COMPILE)


def resolve_device(device: str) -> jax.Device:
    platform, _, count = device.partition(":")
    try:
        devices = jax.devices({"cuda": "gpu"}.get(platform, platform))
    except RuntimeError as exc:
        raise UserCodeError(
            ErrorInfo(
                "device_unavailable",
                f"No {platform} device: {exc}",
                "pick a device the worker lists",
                stage="spec",
            )
        ) from None
    if count and len(devices) < int(count):
        raise UserCodeError(
            ErrorInfo(
                "device_unavailable",
                f"{device} needs {count} devices but this process has {len(devices)}",
                "use the worker for cpu:N (it sets XLA_FLAGS before JAX starts)",
                stage="spec",
            )
        )
    return devices[0]


def static_argnums(fn: Callable, static: Sequence[str | int]) -> tuple[int, ...]:
    """Positions of the static parameters, named or numbered."""
    params = list(inspect.signature(fn).parameters)
    nums = []
    for item in static:
        if isinstance(item, int) or str(item).isdigit():
            nums.append(int(item))
        elif item in params:
            nums.append(params.index(item))
        else:
            raise UserCodeError(
                ErrorInfo(
                    "spec_error",
                    f"`{item}` is not a parameter of {fn.__name__}",
                    f"static names must be among: {', '.join(params)}",
                    stage="spec",
                )
            )
    return tuple(sorted(set(nums)))


def param_names(fn: Callable, count: int) -> list[str]:
    names = list(inspect.signature(fn).parameters)
    return [names[i] if i < len(names) else f"arg{i}" for i in range(count)]


def _normalise_cost(raw: Any) -> dict[str, float | None]:
    if isinstance(raw, list | tuple):
        raw = raw[0] if raw else None
    raw = raw or {}

    def get(key: str) -> float | None:
        value = raw.get(key)
        return float(value) if value is not None and value >= 0 else None

    return {
        "flops": get("flops"),
        "bytes_accessed": get("bytes accessed"),
        "transcendentals": get("transcendentals"),
    }


def _normalise_memory(raw: Any) -> dict[str, int | None]:
    fields = {
        "argument_bytes": "argument_size_in_bytes",
        "output_bytes": "output_size_in_bytes",
        "temp_bytes": "temp_size_in_bytes",
        "alias_bytes": "alias_size_in_bytes",
        "generated_code_bytes": "generated_code_size_in_bytes",
    }
    return {key: getattr(raw, attr, None) for key, attr in fields.items()}


def block(out: Any) -> Any:
    """Wait for the result (the common single-array case without a pytree walk)."""
    if isinstance(out, jax.Array):
        return out.block_until_ready()
    return jax.block_until_ready(out)


class _Stage:
    """Times one pipeline stage and turns its exception into a classified error."""

    def __init__(self, report: Report, user_file: str | None):
        self.report, self.user_file = report, user_file

    def __call__(self, name: str, work: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        try:
            return work()
        except UserCodeError:
            raise
        except Exception as exc:
            raise UserCodeError(classify(exc, name, self.user_file)) from exc
        finally:
            if name in ("trace", "lower", "compile"):
                self.report.timings[f"{name}_s"] = time.perf_counter() - start


def analyze(
    fn: Callable,
    args: str = "",
    static: Sequence[str | int] = (),
    device: str = "cpu",
    runs: int = 20,
    *,
    namespace: dict[str, Any] | None = None,
    user_file: str | None = None,
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT,
    time_budget_s: float = 2.0,
    history: bool = False,
) -> Report:
    """Analyze `fn` on the args spec. Never raises for problems in user code: they are
    reported in `report.error` with `report.ok == False`, keeping what was learned.
    `history=True` also records the run in `viz.history` (the CLI and app always do)."""
    report = Report(
        device=device,
        jax_version=jax.__version__,
        function=getattr(fn, "__name__", "fn"),
        args=args,
        static=[str(s) for s in static],
    )
    namespace = namespace if namespace is not None else getattr(fn, "__globals__", {})
    user_file = user_file or getattr(getattr(fn, "__code__", None), "co_filename", None)
    report.source_file = user_file
    try:
        items = _parse(args, namespace)
        x64 = jax.enable_x64(True) if uses_x64(items) else contextlib.nullcontext()
        with x64, jax.default_device(resolve_device(device)):
            _compile_and_run(
                report, fn, items, static, runs, user_file, memory_limit_bytes, time_budget_s
            )
    except UserCodeError as exc:
        report.fail(exc.info.to_dict())
    if history:
        from viz.history import record_api_run

        record_api_run(report)
    return report


def _parse(args: str, namespace: dict[str, Any]) -> list[Any]:
    try:
        return parse_spec(args, namespace)
    except SpecError as exc:
        raise UserCodeError(
            ErrorInfo(
                "spec_error",
                str(exc),
                "write arrays as f32[8,128], literals as 3 or 'relu', or a name your code defines",
                stage="spec",
            )
        ) from None


def _compile_and_run(
    report: Report,
    fn: Callable,
    items: list[Any],
    static: Sequence[str | int],
    runs: int,
    user_file: str | None,
    memory_limit: int,
    budget_s: float,
) -> None:
    stage = _Stage(report, user_file)
    nums = static_argnums(fn, static)
    jitted = jax.jit(fn, static_argnums=nums)
    abstract = abstract_args(items)
    names = param_names(fn, len(items))
    with compile_events() as events:
        traced = stage("trace", lambda: jitted.trace(*abstract))
        lowered = stage("lower", traced.lower)
        # XLA compiles without holding the GIL: read the first two IRs meanwhile, so
        # jitscope adds little to the wall time, and a compile error keeps them.
        with ThreadPoolExecutor(1) as background:
            pending = background.submit(stage, "compile", lowered.compile)
            _read_ir(
                report, "jaxpr", lambda: str(traced.jaxpr), lambda: read_jaxpr(traced.jaxpr, names)
            )
            _read_ir(
                report,
                "stablehlo",
                lowered.as_text,
                lambda: read_stablehlo(lowered.compiler_ir("stablehlo")),
            )
            compiled = pending.result()
    report.compile_events = event_totals(events)
    _read_ir(report, "compiled", compiled.as_text, lambda: read_hlo(compiled))
    report.cost = _normalise_cost(compiled.cost_analysis())
    report.memory = _normalise_memory(compiled.memory_analysis())
    if runs > 0:
        _check_memory(report, items, memory_limit)
        _time_runs(report, fn, jitted, items, runs, stage, budget_s)


def _read_ir(
    report: Report, ir: str, text: Callable[[], str], read: Callable[[], model.Graph]
) -> None:
    """One IR's text, graph, counts and default view into the report."""
    section: dict[str, Any] = {"text": text() or ""}
    setattr(report, ir, section)
    try:
        graph = read()
    except Exception as exc:  # a reader bug must not hide the other results
        report.warnings.append(f"could not read the {ir} graph: {type(exc).__name__}: {exc}")
        return
    hist = model.op_histogram(graph)
    count_key, hist_key = ("eqn_count", "primitives") if ir == "jaxpr" else ("op_count", "ops")
    section.update({count_key: sum(hist.values()), hist_key: hist})
    if ir == "compiled":
        section["fusion_count"] = fusion_count(graph)
        section["kernel_count"] = kernel_count(graph)
        report.kernels = kernels(graph)
    report.graphs[ir] = graph_views.summary(graph)
    report.graph_models[ir] = graph


def _check_memory(report: Report, items: list[Any], limit: int) -> None:
    mem = report.memory or {}
    needed = input_bytes(items) + sum(
        mem.get(k) or 0 for k in ("output_bytes", "temp_bytes", "generated_code_bytes")
    )
    if needed > limit:
        raise UserCodeError(
            ErrorInfo(
                "memory",
                f"Running needs about {needed / 2**30:.1f} GiB (inputs, outputs and XLA's "
                f"temporaries) but the worker's limit is {limit / 2**30:.1f} GiB. "
                "The compile-only results above are complete.",
                "analyze with runs=0 (compile only), or shrink the shapes",
                stage="run",
            )
        )


def _time_runs(
    report: Report,
    fn: Callable,
    jitted: Any,
    items: list[Any],
    runs: int,
    stage: _Stage,
    budget_s: float,
) -> None:
    """Time the jitted function the way users call it. Its first call finds the
    executable compiled above in JAX's compilation cache, so nothing compiles twice."""
    values = concrete_args(items)
    stats = stage(
        "run",
        lambda: time_calls(lambda: jitted(*values), block, max_samples=runs, budget_s=budget_s),
    )
    report.timings.update(
        first_call_s=stats.first_call_s,
        run_median_s=stats.median_s,
        run_min_s=stats.min_s,
        run_p90_s=stats.p90_s,
        runs=stats.samples,
    )
    report.run = {"jit": stats.to_dict(), "eager": None}
    try:
        eager = time_calls(
            lambda: fn(*values), block, max_samples=max(3, runs // 2), budget_s=budget_s / 2
        )
    except Exception as exc:  # eager failing (e.g. jit-only code) is worth a note, not an error
        report.warnings.append(f"eager run failed: {type(exc).__name__}: {exc}")
        return
    report.timings["eager_median_s"] = eager.median_s
    report.run["eager"] = eager.to_dict()
