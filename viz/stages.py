"""The staged pipeline every path into JAX goes through, modelled on `jax.stages`.

    target = Target.from_settings(settings)  # viz.target: what, where, how
    args = target.args("f32[8,128], 3")      # the spec, parsed once
    traced = trace(target, args)         # Traced:   jaxpr            (+ seconds)
    lowered = traced.lower()             # Lowered:  StableHLO        (+ seconds)
    compiled = lowered.compile()         # Compiled: optimized HLO, cost, memory (+ seconds)
    stats = compiled.time_runs(runs=20)  # RunStats of the compiled executable

The `Target` (`viz.target`) decides 64-bit mode, the device, the static arguments, the
compiler options and the memory limit. Every stage runs inside `target.scope()`
and turns a failure into a classified `UserCodeError` naming the stage; a stage
never reaches back to the one before it: what later steps need of an earlier stage
is handed on as plain data (`arg_names`, JAX's name of each argument leaf, from the
jaxpr), as `jax.stages` hands on `args_info`.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import jax

from viz import events, jax_private
from viz.errors import USER_EXITS, ErrorInfo, ErrorKind, UserCodeError, classify
from viz.memory.display import peak_fillers
from viz.memory.model import DeviceMemory
from viz.memory.profile import (
    MemoryProfile,
    executable_profile,
    with_kernel_lines,
    with_origins,
    with_reasons,
)
from viz.target import Args, Target, eager_copies, resolve_device, unjitted
from viz.timing import MIN_EAGER_SAMPLES, RunStats, time_calls
from viz.units import nbytes

# jitscope's own frames (the worker, the pipeline) are not the user's: kept out of every
# op's location and of the tracebacks JAX filters
jax_private.hide_jitscope_frames()

DONATED_COPY_BYTES = 256 << 20  # fresh copies of donated inputs one timed sample may hold


def block(out: Any) -> Any:
    """Wait for a result (the common single-array case without a pytree walk)."""
    if isinstance(out, jax.Array):
        return out.block_until_ready()
    return jax.block_until_ready(out)


@contextlib.contextmanager
def timed(stage: str, user_file: str | None) -> Iterator[list[float]]:
    """Time a stage (seconds appended to the yielded list) and classify its failure."""
    seconds: list[float] = []
    start = time.perf_counter()
    try:
        yield seconds
    except UserCodeError:
        raise
    except (Exception, *USER_EXITS) as exc:
        spent = time.perf_counter() - start
        raise UserCodeError(classify(exc, stage, user_file), spent) from exc
    seconds.append(time.perf_counter() - start)


@contextlib.contextmanager
def jax_warnings() -> Iterator[list[str]]:
    """The warnings JAX emits inside the block (e.g. donated buffers it could not use)."""
    said: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield said
    said.extend(str(w.message).split("\n")[0] for w in caught)


def _copy_donated(values: list[Any], donated: tuple[int, ...]) -> list[Any]:
    """Fresh copies of the donated arguments' arrays (an equinox model's functions are
    no arrays: kept as they are)."""
    return [jax.tree.map(_copy_array, v) if i in donated else v for i, v in enumerate(values)]


def _copy_array(leaf: Any) -> Any:
    return jax.numpy.copy(leaf) if isinstance(leaf, jax.Array) else leaf


@dataclass(frozen=True)
class ArgLeaf:
    """One dynamic argument leaf as the compiled program takes it (a
    `jax.stages.ArgInfo` with JAX's name of the leaf)."""

    name: str  # x, xs[0], params['w']
    shape: tuple[int, ...]
    dtype: str
    donated: bool


def trace(target: Target, args: Args) -> Traced:
    """The first stage: `target`'s function traced on `args` (their abstract values)."""
    with target.scope(args):
        abstract = args.abstract()
        with timed("trace", target.user_file) as seconds:
            traced = target.jitted.trace(*target.traceable(abstract))
    return Traced(target, args, traced, seconds[0], abstract)


@dataclass
class Traced:
    """The trace stage: the jaxpr of the function on these argument shapes."""

    target: Target
    args: Args
    traced: Any  # jax.stages.Traced
    seconds: float
    abstract: list[Any] = field(default_factory=list)  # the arguments it traced (args.abstract())

    @property
    def jaxpr(self) -> Any:
        return self.traced.jaxpr

    @property
    def arg_names(self) -> tuple[str, ...]:
        """JAX's name of each dynamic argument leaf, in order (the jaxpr's debug info)."""
        return tuple(self.jaxpr.jaxpr.debug_info.arg_names)

    def lower(self) -> Lowered:
        with (
            self.target.scope(self.args),
            jax_warnings() as said,
            timed("lower", self.target.user_file) as seconds,
        ):
            lowered = self.traced.lower()
        return Lowered(self.target, self.args, lowered, seconds[0], said, self.arg_names)


@dataclass
class Lowered:
    """The lower stage: the StableHLO module handed to XLA."""

    target: Target
    args: Args
    lowered: Any  # jax.stages.Lowered
    seconds: float
    warnings: list[str] = field(default_factory=list)  # what JAX warned while lowering
    arg_names: tuple[str, ...] = ()  # handed on from the trace

    def text(self, debug_info: bool = False) -> str:
        return self.lowered.as_text(debug_info=debug_info)

    def mlir_module(self) -> Any:
        return self.lowered.compiler_ir("stablehlo")

    def compile(self, extra_options: dict[str, Any] | None = None) -> Compiled:
        """XLA's compile with the target's compiler options (plus `extra_options`)."""
        options = {**self.target.compiler_options, **(extra_options or {})}
        with (
            self.target.scope(self.args),
            events.collect() as found,
            jax_warnings() as said,
            timed("compile", self.target.user_file) as seconds,
        ):
            compiled = self.lowered.compile(compiler_options=options or None)
        warned = self.warnings + said
        return Compiled(self.target, self.args, compiled, seconds[0], found, warned, self.arg_names)


@dataclass
class Compiled:
    """The compile stage: the optimized executable, its HLO, cost and memory."""

    target: Target
    args: Args
    compiled: Any  # jax.stages.Compiled
    seconds: float
    events: events.CompileEvents
    warnings: list[str] = field(default_factory=list)  # JAX's warnings, lower and compile
    arg_names: tuple[str, ...] = ()  # handed on from the trace
    # XLA's dump of the optimized module and its buffer assignment (an HloProto), where
    # the compile asked for one (`viz.hlo_dump`): the memory profile's source on a TPU
    dumped_hlo: bytes | None = None
    # XLA's memory analysis, once: it takes 80 ms on a 96-layer model, and the report,
    # the donation panel and the memory check before running all read it
    _memory: dict[str, int | None] | None = field(default=None, init=False, repr=False)
    _raw_memory: Any = field(default=None, init=False, repr=False)
    _layout: MemoryProfile | None = field(default=None, init=False, repr=False)
    _profile: MemoryProfile | None = field(default=None, init=False, repr=False)

    def text(self) -> str:
        return self.compiled.as_text()

    def args_info(self) -> list[ArgLeaf]:
        """The dynamic argument leaves, named, in order (static arguments are baked in)."""
        positional, _ = self.compiled.args_info
        leaves = jax.tree.leaves(positional)
        return [
            ArgLeaf(name, tuple(info.shape), str(info.dtype), bool(info.donated))
            for name, info in zip(self.arg_names, leaves, strict=False)
        ]

    def out_info(self) -> list[tuple[tuple[int, ...], str]]:
        """(shape, dtype) of each flat output."""
        return [(tuple(o.shape), str(o.dtype)) for o in jax.tree.leaves(self.compiled.out_info)]

    def cost(self) -> dict[str, float | None]:
        raw = self.compiled.cost_analysis()
        if isinstance(raw, list | tuple):
            raw = raw[0] if raw else None
        raw = raw or {}

        def get(key: str) -> float | None:
            value = raw.get(key)
            return float(value) if value is not None and value >= 0 else None

        # XLA leaves a zero count out of its map (no `transcendentals` for a program of
        # none): where it counted at all, a missing count is 0, not unknown
        counted = 0.0 if "flops" in raw else None
        transcendentals = get("transcendentals") if "transcendentals" in raw else counted
        return {
            "flops": get("flops"),
            "bytes_accessed": get("bytes accessed"),
            "transcendentals": transcendentals,
        }

    def memory(self) -> dict[str, int | None]:
        """XLA's totals (`memory_analysis()`), and its own peak (`xla_peak_bytes`: on
        CPU, the arguments and outputs only)."""
        if self._memory is None:
            raw = self._analysis()
            fields = {
                "argument_bytes": "argument_size_in_bytes",
                "output_bytes": "output_size_in_bytes",
                "temp_bytes": "temp_size_in_bytes",
                "alias_bytes": "alias_size_in_bytes",
                "generated_code_bytes": "generated_code_size_in_bytes",
                "xla_peak_bytes": "peak_memory_in_bytes",
            }
            self._memory = {key: getattr(raw, attr, None) for key, attr in fields.items()}
        return dict(self._memory)

    def _analysis(self) -> Any:
        """XLA's memory analysis, asked for once (its buffer assignment is read twice)."""
        if self._raw_memory is None:
            self._raw_memory = self.compiled.memory_analysis()
        return self._raw_memory

    def memory_layout(self) -> MemoryProfile:
        """The memory profile from XLA's buffer assignment and scheduled module, without
        lines (`memory_profile` adds them): read once. ValueError where XLA gives no
        buffer assignment."""
        if self._layout is None:
            executable = self.compiled.runtime_executable()
            self._layout = executable_profile(
                executable, self._analysis(), self.dumped_hlo, self.target.device
            )
        return self._layout

    def memory_profile(self, graph: Any = None, kernels: Sequence[Any] = ()) -> MemoryProfile:
        """The memory profile, each buffer's line read from `graph` (the compiled HLO's
        `viz.ir.model.Graph`), else from the fusion map's `kernels` (`FusionEntry`):
        kept for the memory check before running."""
        if self._profile is None:
            found = with_origins(self.memory_layout(), graph)
            found = with_kernel_lines(found, list(kernels), self.target.user_file)
            self._profile = with_reasons(found, graph)
        return self._profile

    def memory_limit(self) -> tuple[int, str]:
        """What a run must fit in: the device's own limit where it reports one (a GPU's
        `memory_stats()['bytes_limit']`), else the target's limit (the CPU's case): in
        the app, the pool's memory budget, which every worker shares."""
        stats = self._memory_stats() or {}
        if stats.get("bytes_limit"):
            return int(stats["bytes_limit"]), "the device's memory"
        if self.target.settings.memory_limit_bytes:
            return self.target.memory_limit_bytes, "the worker's limit"
        return self.target.memory_limit_bytes, self.target.memory_limit_of

    def _memory_stats(self) -> dict[str, int] | None:
        """The device's `memory_stats()` (None on the CPU, which keeps none, and where
        the backend cannot say: its `memory_stats` not implemented)."""
        try:
            return resolve_device(self.target.device).memory_stats()
        except Exception:  # the analysis stands without the device's count
            return None

    def device_memory(self) -> DeviceMemory | None:
        """The device's own count of its memory, now (after the runs): None where it
        keeps none."""
        return DeviceMemory.of(self._memory_stats())

    def check_memory(self) -> None:
        """`memory` error when running would need more than the limit: the peak of the
        memory profile (with the buffers that fill it), else XLA's totals."""
        limit, of = self.memory_limit()
        try:
            profile: MemoryProfile | None = self._profile or self.memory_profile()
        except Exception:  # no profile: the totals, as XLA gives them
            profile = None
        if profile is not None:
            needed = profile.peak_bytes
            what = f"{nbytes(needed)} at its peak: {peak_fillers(profile)}"
        else:
            mem = self.memory()
            needed = self.args.input_bytes() + sum(
                mem.get(k) or 0 for k in ("output_bytes", "temp_bytes", "generated_code_bytes")
            )
            what = f"about {nbytes(needed)} (inputs, outputs and XLA's temporaries)"
        if needed > limit:
            raise UserCodeError(
                ErrorInfo(
                    ErrorKind.MEMORY,
                    f"Running needs {what}; {of} is {nbytes(limit)}. "
                    "Nothing ran: the compile-only results are complete.",
                    "analyze with runs=0 (compile only), shrink the shapes, or lower the "
                    "peak: the Memory tab shows what fills it",
                    stage="run",
                )
            )

    def time_runs(self, runs: int, budget_s: float = 2.0) -> RunStats:
        """Time the compiled executable itself (what was compiled is what runs). Donated
        inputs are consumed by each call: every call gets fresh copies, made before the
        clock starts, and a sample holds at most DONATED_COPY_BYTES of them."""
        self.check_memory()
        target = self.target
        with target.scope(self.args):
            values = self.args.concrete()
            dynamic = target.dynamic(values)
            with timed("run", target.user_file):
                if not target.donate_argnums:
                    call = lambda: self.compiled(*dynamic)  # noqa: E731
                    return time_calls(call, block, max_samples=runs, budget_s=budget_s)
                return time_calls(
                    lambda fresh: self.compiled(*fresh),
                    block,
                    max_samples=runs,
                    budget_s=budget_s,
                    fresh=lambda: target.dynamic(_copy_donated(values, target.donate_argnums)),
                    max_number=max(1, DONATED_COPY_BYTES // max(self._donated_bytes(values), 1)),
                )

    def _donated_bytes(self, values: list[Any]) -> int:
        donated = [values[i] for i in self.target.donate_argnums if i < len(values)]
        return sum(int(getattr(leaf, "nbytes", 0)) for leaf in jax.tree.leaves(donated))

    def runner(self, calls: int) -> Callable[[], Any]:
        """`calls` calls of the compiled executable (for the profiler), each on inputs
        made beforehand: a donated input is consumed by the call that gets it."""
        self.check_memory()
        target = self.target
        with target.scope(self.args):
            values = self.args.concrete()
            ready = [
                block(target.dynamic(_copy_donated(values, target.donate_argnums)))
                for _ in range(calls if target.donate_argnums else 1)
            ]

        def call() -> Any:
            made = ready.pop() if len(ready) > 1 else ready[0]
            return self.compiled(*made)

        return call

    def time_eager(self, runs: int, budget_s: float = 1.0) -> RunStats:
        """Time the function without jit, op by op (raises what the function raises):
        its first call (which compiles each op) and a warm-up are not samples, and at
        least MIN_EAGER_SAMPLES are taken even past `budget_s`. The compiles of the
        calls after the first are counted: a jit inside the function (diffrax's
        diffeqsolve given a new lambda) compiling again on each call."""
        with self.target.scope(self.args):
            values, fn = eager_copies(self.args.concrete()), unjitted(self.target.fn)
            first: list[int] = []

            def call() -> Any:
                if first:
                    return fn(*values)
                with events.collect() as seen:
                    out = fn(*values)
                first.append(seen.backend_compiles())
                return out

            with events.collect() as seen:
                stats = time_calls(
                    call,
                    block,
                    max_samples=max(runs, MIN_EAGER_SAMPLES),
                    budget_s=budget_s,
                    min_samples=MIN_EAGER_SAMPLES,
                )
            return replace(stats, compiles=seen.backend_compiles() - sum(first))
