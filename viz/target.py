"""`Target`: a loaded function and how to compile it, the way into the stages
(`viz.stages`), and `Args`, an args spec parsed once for it.

    target = Target.from_settings(settings)   # what, where, how (viz.settings)
    args = target.args("f32[8,128], 3")       # the spec, parsed once
    traced = trace(target, args)              # viz.stages: Traced, and on from there

`Target` decides, once for everyone (Explore, the cache lab, the lessons, the
pass-by-pass view, the CLI): 64-bit mode, the device, the static and donated
arguments, the compiler options, the mesh and the memory limit, from the `Settings`
it keeps whole. A page's, a request's, the CLI's or `viz.analyze`'s settings come in
through `Target.from_settings`, the one way to make one (with the function itself
where the caller holds it: `viz.analyze`, the lessons' own variants).

x64: JAX truncates 64-bit dtypes to 32 bits unless x64 is on. `Target.x64` None
(the default) turns it on exactly when the spec asks for a 64-bit dtype, so
`f64[4]` means f64 everywhere; True or False force it, as a user flipping
`jax_enable_x64` would.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import jax
import numpy as np

from viz.errors import ErrorInfo, ErrorKind, UserCodeError
from viz.platforms import DeviceConfig, DeviceError
from viz.settings import Settings
from viz.source import load_function
from viz.spec import SpecError, abstract_args, concrete_args, input_bytes, parse_spec, uses_x64
from viz.spec.mesh import MeshSpec, parse_mesh

DEFAULT_MEMORY_LIMIT = 8 << 30
SPEC_HINT = "write arrays as f32[8,128], literals as 3 or 'relu', or a name your code defines"


def spec_error(message: str, hint: str = SPEC_HINT) -> UserCodeError:
    return UserCodeError(ErrorInfo(ErrorKind.SPEC_ERROR, message, hint, stage="spec"))


def resolve_device(device: str) -> jax.Device:
    """The first device of a configuration such as 'cpu', 'cpu:8', 'gpu' or 'tpu'."""
    try:
        config = DeviceConfig.parse(device)
    except DeviceError as exc:
        raise UserCodeError(
            ErrorInfo(
                ErrorKind.DEVICE_UNAVAILABLE,
                str(exc),
                "pick a device the worker lists",
                stage="spec",
            )
        ) from None
    try:
        devices = jax.devices(config.jax_platform)
    except RuntimeError as exc:
        raise UserCodeError(
            ErrorInfo(
                ErrorKind.DEVICE_UNAVAILABLE,
                f"No {config.platform} device: {exc}",
                "pick a device the worker lists",
                stage="spec",
            )
        ) from None
    if config.count and len(devices) < config.count:
        raise UserCodeError(
            ErrorInfo(
                ErrorKind.DEVICE_UNAVAILABLE,
                f"{device} needs {config.count} devices but this process has {len(devices)}",
                "use the worker for cpu:N (it sets XLA_FLAGS before JAX starts)",
                stage="spec",
            )
        )
    return devices[0]


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


def _defined(fn: Callable) -> Callable:
    """The function `fn` wraps, where it is a wrapper (`jax.jit`, `eqx.filter_jit`, a
    `functools.wraps` decorator, `functools.partial`): the one whose module and file
    are the user's; `fn` itself otherwise."""
    for _ in range(100):  # a chain of wrappers, never a cycle
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif callable(getattr(fn, "__wrapped__", None)):
            fn = fn.__wrapped__
        else:
            break
    return fn


def _with_state(fn: Callable) -> Callable:
    """`fn`, or for a function under flax's `nnx.jit`, one that also returns the Modules
    it was given: nnx.jit hands their new state back (an optimizer's step, batch
    statistics, an RNG's count) by updating them, which a jax.jit of it would drop, and
    XLA the computations that make it (an nnx train step's whole update) with it.
    Returned as nnx.jit returns them, this is the program nnx.jit compiles."""
    if not _nnx_jit(fn):
        return fn
    from flax import nnx

    @functools.wraps(fn)  # its signature: JAX names the arguments by it
    def with_state(*args: Any) -> Any:
        out = fn(*args)
        return out, [a for a in args if nnx.graph.is_graph_node(a)]

    return with_state


def names_of(fn: Callable) -> dict[str, Any]:
    """The names of the module `fn` (or the function it wraps) was defined in."""
    return getattr(_defined(fn), "__globals__", {})


def spec_names(fn: Callable, caller: dict[str, Any]) -> dict[str, Any]:
    """The names a spec reads where the user calls from (a notebook cell's, a script's),
    then those of `fn`'s module (an imported function's constants)."""
    return {**names_of(fn), **caller}


def _nnx_jit(fn: Any) -> bool:
    kind = type(fn)
    return kind.__name__ == "JitWrapped" and kind.__module__.startswith("flax.nnx")


def _equinox_jit(fn: Any) -> bool:
    kind = type(fn)
    return kind.__name__ == "_JitWrapper" and kind.__module__.startswith("equinox")


def unjitted(fn: Callable) -> Callable:
    """`fn` without the jit decorators around it (`@jax.jit`, `eqx.filter_jit`,
    `nnx.jit`): the Python an eager call runs op by op. Other wrappers stay (a
    `functools.partial`'s arguments, a decorator's own work)."""
    for _ in range(100):  # a chain of wrappers, never a cycle
        jitted = isinstance(fn, jax.stages.Wrapped) or _equinox_jit(fn) or _nnx_jit(fn)
        inner = getattr(fn, "__wrapped__", None) if jitted else None
        if not callable(inner):
            break
        fn = inner
    return fn


@jax.tree_util.register_static
class _Kept:
    """A leaf `eqx.filter_jit` keeps static (anything but an array: an MLP's
    activation, a Python float), as a pytree node without leaves, equal to another of
    the same value (the executable's call compares them with the traced ones)."""

    def __init__(self, value: Any):
        self.value = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Kept):
            return NotImplemented
        if self.value is other.value:
            return True
        try:
            return type(self.value) is type(other.value) and bool(self.value == other.value)
        except Exception:  # a value that cannot say: by identity
            return False

    def __repr__(self) -> str:  # as a pytree's text shows it (the cache lab's reasons)
        return f"static {self.value!r}"

    def __hash__(self) -> int:
        try:
            return hash((type(self.value), self.value))
        except TypeError:  # unhashable: by identity, as jit hashes a function
            return id(self.value)


def _traced_by_jit(leaf: Any) -> bool:
    return isinstance(leaf, jax.Array | np.ndarray | np.generic | jax.ShapeDtypeStruct)


def _keep(values: Sequence[Any]) -> list[Any]:
    """Each argument with its leaves that are not arrays kept static (`_Kept`)."""
    return [jax.tree.map(lambda x: x if _traced_by_jit(x) else _Kept(x), v) for v in values]


def _filtered(fn: Callable) -> Callable:
    """The function `eqx.filter_jit` compiles: `fn`'s own Python on its arguments with
    the kept leaves given back, its outputs the arrays alone (filter_jit hands the rest
    back beside the program)."""
    inner = unjitted(fn)

    @functools.wraps(inner)  # its signature: JAX names the arguments by it
    def filtered(*args: Any) -> Any:
        given = jax.tree.map(
            lambda x: x.value if isinstance(x, _Kept) else x,
            args,
            is_leaf=lambda x: isinstance(x, _Kept),
        )
        return jax.tree.map(lambda x: x if _traced_by_jit(x) else None, inner(*given))

    return filtered


def eager_copies(values: Sequence[Any]) -> list[Any]:
    """`values` with each nnx Module (a graph node) cloned: an eager call updates the
    Modules it is given (an optimizer's step), which must stay the caller's as they
    were."""
    nnx = sys.modules.get("flax.nnx")
    if nnx is None:
        return list(values)
    return [nnx.clone(v) if nnx.graph.is_graph_node(v) else v for v in values]


@dataclass
class Target:
    """A loaded function and how to compile it: the `Settings` it was made from, kept
    whole (static and donated arguments, device, x64, compiler options, mesh, memory
    limit), the names its spec resolves in and its source file. `expressions`: whether a
    spec may hold Python expressions (`jnp.ones(3)`); False takes the spec language
    and the module's own names only (demo mode: the worker sets it). Made by
    `Target.from_settings`, and only there."""

    fn: Callable
    settings: Settings = field(default_factory=Settings)
    namespace: dict[str, Any] = field(default_factory=dict)
    user_file: str | None = None
    expressions: bool = True
    default_memory_limit: int = DEFAULT_MEMORY_LIMIT  # where the settings name none
    memory_limit_of: str = "the worker's limit"  # what that limit is, in words

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        fn: Callable | None = None,
        *,
        namespace: dict[str, Any] | None = None,
        user_file: str | None = None,
        expressions: bool = True,
        memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT,
        memory_limit_of: str = "the worker's limit",
    ) -> Target:
        """The target `settings` describe: their function loaded from their code (with
        classified load errors), or `fn` when the caller holds it (`viz.analyze`, a
        lesson's variants), its spec's names `namespace` (default: `fn`'s module's) and
        its source `user_file` (default: where `fn` was defined). `memory_limit_bytes`
        applies when the settings name no limit of their own; `memory_limit_of` says
        what it is ("the pool's memory budget": a worker's)."""
        if fn is None:
            module, fn = load_function(
                settings.code, settings.function, settings.folder, settings.file
            )
            namespace, user_file = vars(module), module.__file__
        if namespace is None:
            namespace = names_of(fn)
        if user_file is None:
            user_file = getattr(getattr(_defined(fn), "__code__", None), "co_filename", None)
        return cls(
            fn, settings, namespace, user_file, expressions, memory_limit_bytes, memory_limit_of
        )

    @classmethod
    def from_code(cls, code: str, function: str | None, *, static: Sequence[str] = ()) -> Target:
        """`from_settings` of the settings that name `function` of `code` (and its
        static arguments) alone."""
        return cls.from_settings(Settings(code=code, function=function, static=list(static)))

    @property
    def static(self) -> list[str]:
        return self.settings.static

    @property
    def donate(self) -> list[str]:
        return self.settings.donate

    @property
    def device(self) -> str:
        return self.settings.device

    @property
    def x64(self) -> bool | None:
        """None: on when the spec uses a 64-bit dtype."""
        return self.settings.x64

    @property
    def compiler_options(self) -> dict[str, Any]:
        return self.settings.compiler_options

    @property
    def mesh(self) -> str:
        """`data=4, model=2` (viz.spec.mesh): the mesh `@ P(...)` splits over."""
        return self.settings.mesh

    @property
    def memory_limit_bytes(self) -> int:
        return self.settings.memory_limit_bytes or self.default_memory_limit

    @property
    def name(self) -> str:
        """As the settings name it (the CLI's `file.py::triple`), else as the function
        (or the one a `functools.partial` wraps) names itself."""
        return self.settings.function or getattr(_defined(self.fn), "__name__", "fn")

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
        fn = _filtered(self.fn) if _equinox_jit(self.fn) else _with_state(self.fn)
        return jax.jit(
            fn,
            static_argnums=self.static_argnums,
            donate_argnums=self.donate_argnums,
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
            raise spec_error(exc.named(list(self.params))) from None

    def kept_static(self, leaf: Any) -> bool:
        """Whether the function's jit keeps this argument leaf static: `eqx.filter_jit`
        keeps every leaf that is not an array."""
        return _equinox_jit(self.fn) and not _traced_by_jit(leaf)

    def traceable(self, values: Sequence[Any]) -> list[Any]:
        """The arguments as `jitted` takes them: for an `eqx.filter_jit` function, with
        the leaves that are not arrays kept static, as filter_jit keeps them."""
        return _keep(values) if _equinox_jit(self.fn) else list(values)

    def dynamic(self, values: Sequence[Any]) -> list[Any]:
        """The arguments a compiled executable takes: the static ones are baked in."""
        traceable = self.traceable(values)
        return [v for i, v in enumerate(traceable) if i not in self.static_argnums]

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
