"""The user's module a worker keeps between requests (issue #52): a second analysis of
unchanged code, with other arguments or options, does not run the module again (the
96-layer sample spends 0.8-0.9 s making its parameters). Code that changed, or a
restarted worker, loads afresh. Reuse must give what a fresh load would:

- Each request gets a copy of the module as it was loaded: a namespace of its own,
  holding the same values (not copied), whose functions are new function objects
  over it. A function that rebinds a global (`global n; n += 1`) rebinds it in its
  own copy; and JAX, which caches what it traced per function object (a `lax.scan`
  body, a function jitted inside another), traces each request's functions afresh.
- Values are shared, so a request that changed one in place (appended to a list,
  set a key or an attribute, wrote into a numpy array, deleted a jax array by
  donating it) leaves the module unlike a fresh load: before each reuse its state is
  compared with its state just after loading (`state_of`), and any change loads it
  afresh. Python's and numpy's global random state are put back as they were.
- What cannot be told safely is loaded afresh every time: a module that holds an
  object whose state this cannot read (a generator, a file, a random generator, a
  lock: an object of an unknown type without attributes to compare), a function the
  module wrapped at its top level (`jax.jit`, `jax.custom_vjp`, `functools.partial`,
  `lru_cache`: what they cached is state), more than MAX_VALUES values, or more than
  MAX_ARRAY_BYTES of numpy data to checksum.

State outside the module is not looked at (other modules' globals, files, the
environment, JAX's configuration): a fresh load would not reset it either, unless
the module's own top-level code sets it, which a reuse does not do again. Functions
reached only through a container or a class (`ACTS = {"gelu": gelu}`, a method) are
the module's own objects, not copies: JAX may reuse what it traced of them. One
module is kept, the last one loaded: its arrays stay in memory between requests.
"""

from __future__ import annotations

import collections
import random
import sys
import types
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from viz.source import add_import_folder, find_function, load_module, remember_module

MAX_VALUES = 200_000  # objects compared per module (the 96-layer sample: 1,265, in 4 ms)
MAX_ARRAY_BYTES = 64 << 20  # numpy data checksummed per module
ATOMS = (type(None), bool, int, float, complex, str, bytes, range, slice, type(...))
SEQUENCES = (list, tuple, set, frozenset, collections.deque)
# objects without attributes of these packages' types are values: compared by identity
VALUES = ("jax", "jaxlib", "numpy", "ml_dtypes", "dataclasses", "enum", "typing", "types")
# those of these packages keep state where attributes do not show it
STATEFUL = ("random", "numpy.random", "io", "_io", "threading", "_thread", "queue", "socket")
DESCRIPTORS = (
    types.GetSetDescriptorType,
    types.MemberDescriptorType,
    types.WrapperDescriptorType,
    types.MethodDescriptorType,
    types.ClassMethodDescriptorType,
    types.MethodWrapperType,
    types.BuiltinFunctionType,
    types.ModuleType,  # another module's state is its own: a fresh load shares it too
)


class Untellable(Exception):
    """A value whose state cannot be told: the module is loaded afresh every time."""


@dataclass
class _State:
    """What a module held, in a form any change since shows in (`state_of`)."""

    tokens: list[Any]
    held: list[Any]  # the objects compared by identity, kept alive: their ids stay theirs


def state_of(namespace: dict[str, Any]) -> _State:
    """The state of a module's namespace: every value reached from it, atoms by value,
    containers, functions and objects by what they hold, numpy arrays by content, jax
    arrays by identity and whether they were deleted, JAX's and numpy's other values by
    identity. Untellable where that is not enough (see the module's docstring)."""
    walk = _Walk(namespace)
    walk.mapping({k: v for k, v in namespace.items() if k != "__builtins__"})
    return _State(walk.tokens, walk.held)


class _Walk:
    def __init__(self, namespace: dict[str, Any]):
        self.namespace = namespace
        self.name = namespace.get("__name__")
        self.tokens: list[Any] = []
        self.held: list[Any] = []
        self.seen: dict[int, int] = {}  # id → the order it was first seen in
        self.array_bytes = 0

    def visit(self, value: Any) -> None:
        if isinstance(value, ATOMS):
            self.tokens.append((type(value), value))
            return
        if id(value) in self.seen:  # shared, or a cycle
            self.tokens.append(("again", self.seen[id(value)]))
            return
        self.seen[id(value)] = len(self.seen)
        if len(self.seen) > MAX_VALUES:
            raise Untellable(f"more than {MAX_VALUES} values")
        self.held.append(value)
        self.tokens.append((type(value), id(value)))
        self._inside(value)

    def contents(self, items: Iterable[Any]) -> None:
        items = list(items)
        self.tokens.append(len(items))
        for item in items:
            self.visit(item)

    def mapping(self, mapping: Mapping[Any, Any]) -> None:
        self.contents(part for item in mapping.items() for part in item)

    def _inside(self, value: Any) -> None:
        """What `value` holds, where that can change in place."""
        if isinstance(value, dict):
            self.mapping(value)
        elif isinstance(value, SEQUENCES):
            self.contents(value)
        elif isinstance(value, types.FunctionType):
            self._function(value)
        elif isinstance(value, type):
            if value.__module__ == self.name:  # a class of the module: its attributes
                self.mapping(vars(value))
        elif isinstance(value, staticmethod | classmethod):
            self.visit(value.__func__)
        elif isinstance(value, property):
            self.contents((value.fget, value.fset, value.fdel))
        elif isinstance(value, DESCRIPTORS):
            pass
        elif type(value).__module__ == "numpy" and hasattr(value, "tobytes"):
            self._numpy(value)
        elif hasattr(value, "is_deleted"):  # a jax array: immutable, but donation deletes it
            self.tokens.append(value.is_deleted())
        else:
            self._object(value)

    def _function(self, fn: types.FunctionType) -> None:
        if fn.__globals__ is not self.namespace:  # another module's function…
            self._not_wrapping(fn)  # …unless it wraps one of ours: jax.checkpoint(f)
            return
        self.contents((fn.__defaults__, fn.__kwdefaults__))
        self.contents(cell.cell_contents for cell in fn.__closure__ or () if _full(cell))
        self.mapping(vars(fn))

    def _numpy(self, value: Any) -> None:
        if value.dtype.hasobject:
            raise Untellable("a numpy array of Python objects")
        self.array_bytes += value.nbytes
        if self.array_bytes > MAX_ARRAY_BYTES:
            raise Untellable(f"more than {MAX_ARRAY_BYTES >> 20} MiB of numpy arrays")
        self.tokens.append((value.shape, str(value.dtype), zlib.crc32(value.tobytes())))

    def _object(self, value: Any) -> None:
        """Any other object: by its attributes where it has them; by identity where it
        is one of JAX's or numpy's values (shardings, dtypes, scalars); else it cannot
        be told (a generator, a file, a lock)."""
        kind = type(value)
        self._not_wrapping(value)
        if hasattr(kind, "__next__") or _from(kind, STATEFUL):
            raise Untellable(f"a {kind.__name__}: its state is not in its attributes")
        if hasattr(value, "__dict__"):
            self.mapping(vars(value))
        elif not _from(kind, VALUES):
            raise Untellable(f"a {kind.__name__}, whose state cannot be read")

    def _not_wrapping(self, value: Any) -> None:
        """Untellable where `value` wraps a function of this module (`jax.jit(f)`,
        `partial(f)`, `custom_vjp(f)`): what the wrapper caches is state."""
        for inner in (getattr(value, a, None) for a in ("__wrapped__", "func", "fun")):
            if getattr(inner, "__globals__", None) is self.namespace:
                raise Untellable(f"{inner.__name__} wrapped by {type(value).__name__}")


def _from(kind: type, packages: tuple[str, ...]) -> bool:
    """Whether `kind` is defined in one of `packages` or in a module below one."""
    home = kind.__module__ or ""
    return any(home == p or home.startswith(f"{p}.") for p in packages)


def _full(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (an empty cell raises)
    except ValueError:
        return False
    return True


@dataclass
class _Kept:
    """A module as loaded, its state then and the global random state it left."""

    key: tuple[str, str | None, str | None]  # code, folder, file
    module: types.ModuleType
    state: _State
    randomness: tuple[Any, Any]

    def unchanged(self) -> bool:
        try:
            return state_of(vars(self.module)).tokens == self.state.tokens
        except Untellable:
            return False

    def copy(self) -> types.ModuleType:
        """A module of its own over the same values, its functions new objects; the
        global random state put back as the load left it."""
        code, folder, _ = self.key
        remember_module(self.module, code)  # its name and lines, as a load sets them
        add_import_folder(folder)
        _set_randomness(self.randomness)
        copy = types.ModuleType(self.module.__name__)
        namespace = vars(copy)
        namespace.update(vars(self.module))
        for name, value in namespace.items():
            if isinstance(value, types.FunctionType) and value.__globals__ is vars(self.module):
                namespace[name] = _function_over(value, namespace)
        return copy


def _function_over(fn: types.FunctionType, namespace: dict[str, Any]) -> types.FunctionType:
    """`fn` again, a new function object whose globals are `namespace`."""
    new = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__, new.__doc__ = fn.__qualname__, fn.__doc__
    new.__module__, new.__annotations__ = fn.__module__, fn.__annotations__
    new.__dict__.update(vars(fn))
    return new


def _randomness() -> tuple[Any, Any]:
    numpy = sys.modules.get("numpy")
    return random.getstate(), numpy.random.get_state() if numpy else None


def _set_randomness(state: tuple[Any, Any]) -> None:
    python, numpy_state = state
    random.setstate(python)
    numpy = sys.modules.get("numpy")
    if numpy is not None and numpy_state is not None:
        numpy.random.set_state(numpy_state)


class Modules:
    """The last user module loaded, reused while its code and state are unchanged."""

    def __init__(self) -> None:
        self._kept: _Kept | None = None
        self.loads = 0  # modules run (a reuse runs none)

    def function(
        self, code: str, name: str | None, folder: str | None = None, file: str | None = None
    ) -> tuple[types.ModuleType, Callable]:
        """The module of `code` (a copy of the kept one where it can be reused, else
        freshly loaded) and its function `name`, as `viz.source.load_function`."""
        key = (code, folder, file)
        kept = self._kept
        if kept is None or kept.key != key or not kept.unchanged():
            self._kept = kept = None  # its arrays go before the new module's are made
            self.loads += 1
            module = load_module(code, folder, file)
            kept = self._keep(key, module)
            if kept is None:
                return module, find_function(module, code, name)
        module = kept.copy()
        return module, find_function(module, code, name)

    def _keep(
        self, key: tuple[str, str | None, str | None], module: types.ModuleType
    ) -> _Kept | None:
        try:
            self._kept = _Kept(key, module, state_of(vars(module)), _randomness())
        except Untellable:
            self._kept = None
        return self._kept
