"""The staged pipeline every path into JAX goes through, modelled on `jax.stages`.

    target = Target.load(fn, static=["n"], device="cpu")     # what, where, how
    args = target.args("f32[8,128], 3")                      # the spec, parsed once
    traced = target.trace(args)          # Traced:   jaxpr            (+ seconds)
    lowered = traced.lower()             # Lowered:  StableHLO        (+ seconds)
    compiled = lowered.compile()         # Compiled: optimized HLO, cost, memory (+ seconds)
    stats = compiled.time_runs(runs=20)  # RunStats of the compiled executable

`Target` decides, once for everyone (Explore, the cache lab, the lessons, the
pass-by-pass view, the CLI): 64-bit mode, the device, the static arguments, the
compiler options and the memory limit. Every stage runs inside `target.scope()`
and turns a failure into a classified `UserCodeError` naming the stage; a stage
never reaches back to the one before it: what later steps need of an earlier stage
is handed on as plain data (`arg_names`, JAX's name of each argument leaf, from the
jaxpr), as `jax.stages` hands on `args_info`.

x64: JAX truncates 64-bit dtypes to 32 bits unless x64 is on. `Target.x64` None
(the default) turns it on exactly when the spec asks for a 64-bit dtype, so
`f64[4]` means f64 everywhere; True or False force it, as a user flipping
`jax_enable_x64` would.
"""

from __future__ import annotations

import contextlib
import inspect
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import ModuleType
from typing import Any

import jax

from viz import events
from viz.errors import USER_EXITS, ErrorInfo, ErrorKind, UserCodeError, classify
from viz.source import load_function
from viz.spec import SpecError, abstract_args, concrete_args, input_bytes, parse_spec, uses_x64
from viz.spec.mesh import MeshSpec, parse_mesh
from viz.timing import RunStats, time_calls

DEFAULT_MEMORY_LIMIT = 8 << 30
DONATED_COPY_BYTES = 256 << 20  # fresh copies of donated inputs one timed sample may hold
SPEC_HINT = "write arrays as f32[8,128], literals as 3 or 'relu', or a name your code defines"


def spec_error(message: str, hint: str = SPEC_HINT) -> UserCodeError:
    return UserCodeError(ErrorInfo(ErrorKind.SPEC_ERROR, message, hint, stage="spec"))


def resolve_device(device: str) -> jax.Device:
    """The first device of a configuration such as 'cpu', 'cpu:8' or 'gpu'."""
    platform, _, count = device.partition(":")
    if count and not count.isdigit():
        raise UserCodeError(
            ErrorInfo(
                ErrorKind.DEVICE_UNAVAILABLE,
                f"`{device}` is not a device: write cpu, cpu:8 or gpu",
                "pick a device the worker lists",
                stage="spec",
            )
        )
    try:
        devices = jax.devices({"cuda": "gpu"}.get(platform, platform))
    except RuntimeError as exc:
        raise UserCodeError(
            ErrorInfo(
                ErrorKind.DEVICE_UNAVAILABLE,
                f"No {platform} device: {exc}",
                "pick a device the worker lists",
                stage="spec",
            )
        ) from None
    if count and len(devices) < int(count):
        raise UserCodeError(
            ErrorInfo(
                ErrorKind.DEVICE_UNAVAILABLE,
                f"{device} needs {count} devices but this process has {len(devices)}",
                "use the worker for cpu:N (it sets XLA_FLAGS before JAX starts)",
                stage="spec",
            )
        )
    return devices[0]


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
    return [jax.tree.map(jax.numpy.copy, v) if i in donated else v for i, v in enumerate(values)]


@dataclass(frozen=True)
class Args:
    """An args spec parsed once: its items, and whether it needs 64-bit mode."""

    spec: str
    items: list[Any]
    x64: bool
    mesh: Any = None  # the jax Mesh the arrays are placed on (None: one device)

    @classmethod
    def of_avals(cls, avals: Sequence[jax.ShapeDtypeStruct], x64: bool) -> Args:
        """Arguments known by shape and dtype only (a jaxpr's inputs), written in no spec:
        they trace, lower and compile like a spec's arrays, but cannot run."""
        return cls("", list(avals), x64)

    def abstract(self) -> list[Any]:
        return abstract_args(self.items, self.mesh)

    def concrete(self, seed: int = 0) -> list[Any]:
        return concrete_args(self.items, seed, self.mesh)

    def input_bytes(self) -> int:
        return input_bytes(self.items)


@dataclass
class Target:
    """A loaded function and how to compile it: static arguments, device, x64,
    compiler options and the memory limit for running it. `expressions`: whether a
    spec may hold Python expressions (`jnp.ones(3)`); False takes the spec language
    and the module's own names only (demo mode: the worker sets it)."""

    fn: Callable
    namespace: dict[str, Any] = field(default_factory=dict)
    user_file: str | None = None
    static: Sequence[str | int] = ()
    device: str = "cpu"
    x64: bool | None = None  # None: on when the spec uses a 64-bit dtype
    compiler_options: dict[str, Any] = field(default_factory=dict)
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT
    donate: Sequence[str | int] = ()  # as donate_argnames / donate_argnums
    expressions: bool = True
    mesh: str = ""  # `data=4, model=2` (viz.spec.mesh): the mesh `@ P(...)` splits over

    @classmethod
    def load(cls, fn: Callable, **settings: Any) -> Target:
        """A target for `fn` whose spec names resolve in `fn`'s own module."""
        settings.setdefault("namespace", getattr(fn, "__globals__", {}))
        code = getattr(fn, "__code__", None)
        settings.setdefault("user_file", getattr(code, "co_filename", None))
        return cls(fn, **settings)

    @classmethod
    def in_module(cls, fn: Callable, module: ModuleType, **settings: Any) -> Target:
        """A target for `fn` of a loaded user module (its names, its source file)."""
        return cls(fn, namespace=vars(module), user_file=module.__file__, **settings)

    @classmethod
    def from_code(
        cls, code: str, function: str | None, folder: str | None = None, **settings: Any
    ) -> Target:
        """A target for `function` of freshly loaded user code (classified load errors);
        `folder`: where the code's file lives, put on sys.path for its imports."""
        module, fn = load_function(code, function, folder)
        return cls.in_module(fn, module, **settings)

    @property
    def name(self) -> str:
        return getattr(self.fn, "__name__", "fn")

    @cached_property
    def params(self) -> list[str]:
        try:
            return list(inspect.signature(self.fn).parameters)
        except (TypeError, ValueError):
            return []

    def _positions(self, items: Sequence[str | int], what: str) -> tuple[int, ...]:
        """Parameter positions of names or numbers (spec_error for an unknown name)."""
        nums = []
        for item in items:
            if isinstance(item, int) or str(item).isdigit():
                nums.append(int(item))
            elif item in self.params:
                nums.append(self.params.index(item))
            else:
                raise spec_error(
                    f"`{item}` is not a parameter of {self.name}",
                    f"{what} names must be among: {', '.join(self.params)}",
                )
        return tuple(sorted(set(nums)))

    @cached_property
    def static_argnums(self) -> tuple[int, ...]:
        return self._positions(self.static, "static")

    @cached_property
    def donate_argnums(self) -> tuple[int, ...]:
        nums = self._positions(self.donate, "donated")
        both = [self.param_names(n + 1)[n] for n in nums if n in self.static_argnums]
        if both:
            raise spec_error(
                f"`{both[0]}` is both static and donated",
                "only arrays can be donated: unmark one of the two",
            )
        return nums

    @cached_property
    def jitted(self) -> Any:
        """The one `jax.jit` of the function (the cache lab calls it again and again)."""
        return jax.jit(
            self.fn, static_argnums=self.static_argnums, donate_argnums=self.donate_argnums
        )

    @cached_property
    def mesh_spec(self) -> MeshSpec | None:
        """The mesh as parsed (None: no mesh); spec_error for a bad mesh text."""
        try:
            return parse_mesh(self.mesh)
        except SpecError as exc:
            hint = "write the mesh as NAME=SIZE, e.g. data=4, model=2"
            raise spec_error(f"mesh: {exc}", hint) from None

    @cached_property
    def device_mesh(self) -> jax.sharding.Mesh | None:
        """The jax Mesh on this target's devices (an error when there are too few)."""
        from viz.sharding.build import device_mesh

        spec = self.mesh_spec
        return device_mesh(spec, self.device) if spec is not None else None

    def param_names(self, count: int) -> list[str]:
        return [self.params[i] if i < len(self.params) else f"arg{i}" for i in range(count)]

    def args(self, spec: str, x64: bool | None = None) -> Args:
        """Parse `spec` in the function's namespace; spec_error names the bad item.
        `x64` overrides the target's setting for this call (the cache lab's switch).
        Values the spec evaluates (`jnp.ones(3, dtype=jnp.float64)`) are made inside
        the target's x64 mode and device, like everything else."""
        x64 = self.x64 if x64 is None else x64
        if x64 is None:  # decided by the spec's own array items
            items = self._parse(spec)
            x64 = uses_x64(items)
            if not x64:  # parsed in 32-bit mode already
                return Args(spec, items, x64, self.device_mesh)
        with self.scope(Args(spec, [], x64)):
            return Args(spec, self._parse(spec), x64, self.device_mesh)

    def _parse(self, spec: str) -> list[Any]:
        try:
            mesh = self.mesh_spec
            return parse_spec(spec, self.namespace, expressions=self.expressions, mesh=mesh)
        except SpecError as exc:
            raise spec_error(str(exc)) from None

    def dynamic(self, values: Sequence[Any]) -> list[Any]:
        """The arguments a compiled executable takes: the static ones are baked in."""
        return [v for i, v in enumerate(values) if i not in self.static_argnums]

    @contextlib.contextmanager
    def scope(self, args: Args) -> Iterator[None]:
        """x64, the default device and the mesh (`jax.set_mesh`: a bare `P(...)` in the
        function resolves to it), as every stage of this target sees them."""
        mesh = self.device_mesh
        with (
            jax.enable_x64(args.x64),
            jax.default_device(resolve_device(self.device)),
            jax.set_mesh(mesh) if mesh is not None else contextlib.nullcontext(),
        ):
            yield

    def trace(self, args: Args) -> Traced:
        with self.scope(args):
            abstract = args.abstract()
            with timed("trace", self.user_file) as seconds:
                traced = self.jitted.trace(*abstract)
        return Traced(self, args, traced, seconds[0], abstract)


@dataclass(frozen=True)
class ArgLeaf:
    """One dynamic argument leaf as the compiled program takes it (a
    `jax.stages.ArgInfo` with JAX's name of the leaf)."""

    name: str  # x, xs[0], params['w']
    shape: tuple[int, ...]
    dtype: str
    donated: bool


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
    # XLA's memory analysis, once: it takes 80 ms on a 96-layer model, and the report,
    # the donation panel and the memory check before running all read it
    _memory: dict[str, int | None] | None = field(default=None, init=False, repr=False)

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

        return {
            "flops": get("flops"),
            "bytes_accessed": get("bytes accessed"),
            "transcendentals": get("transcendentals"),
        }

    def memory(self) -> dict[str, int | None]:
        if self._memory is None:
            raw = self.compiled.memory_analysis()
            fields = {
                "argument_bytes": "argument_size_in_bytes",
                "output_bytes": "output_size_in_bytes",
                "temp_bytes": "temp_size_in_bytes",
                "alias_bytes": "alias_size_in_bytes",
                "generated_code_bytes": "generated_code_size_in_bytes",
            }
            self._memory = {key: getattr(raw, attr, None) for key, attr in fields.items()}
        return dict(self._memory)

    def check_memory(self) -> None:
        """`memory` error when running would need more than the target's limit."""
        mem = self.memory()
        needed = self.args.input_bytes() + sum(
            mem.get(k) or 0 for k in ("output_bytes", "temp_bytes", "generated_code_bytes")
        )
        limit = self.target.memory_limit_bytes
        if needed > limit:
            raise UserCodeError(
                ErrorInfo(
                    ErrorKind.MEMORY,
                    f"Running needs about {needed / 2**30:.1f} GiB (inputs, outputs and XLA's "
                    f"temporaries) but the worker's limit is {limit / 2**30:.1f} GiB. "
                    "The compile-only results above are complete.",
                    "analyze with runs=0 (compile only), or shrink the shapes",
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
        """Time the function without jit, op by op (raises what the function raises)."""
        with self.target.scope(self.args):
            values = self.args.concrete()
            return time_calls(
                lambda: self.target.fn(*values), block, max_samples=runs, budget_s=budget_s
            )
