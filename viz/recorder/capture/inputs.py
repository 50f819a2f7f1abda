"""What a compile was given, by content: the key that tells a needed recompile (new
data) from an avoidable one (the same inputs as an earlier compile).

JAX's cache keys a jitted function by its object and its settings, a static argument
by equality (a function, by identity), an array by its type. So a new function object,
a new jit wrapper, a new closure compile again even when nothing the computation reads
has changed. `inputs` reads what it does read: the arrays' types, the static values, the
code of each function (the jitted one, a static one) and the data its closure holds, a
function by its code and closure rather than its identity, a jit wrapper by the function
inside. A small array in a closure is read by its bytes, a large one by its identity
(the same object: the same data). Equal keys: the same inputs. Never raises.
"""

from __future__ import annotations

import functools
import hashlib
import types
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from viz.recorder.capture import values
from viz.recorder.capture.unwrap import unwrap
from viz.spec import array_item, dtype_name

MAX_DEPTH = 6  # closures followed into closures
MAX_NODES = 400  # values read per compile; past it, the rest by identity
MAX_BYTES = 1 << 16  # a closure's array read by its bytes up to this size
MAX_DATA = 12  # closure arrays kept in words


@dataclass
class Inputs:
    """A compile's inputs by content, and the closure's arrays in words."""

    key: str  # equal keys: the same inputs
    data: dict[str, str] = field(default_factory=dict)  # 'data' → 'f32[500,3]'
    # a static function argument → (the id of the function inside, its wrapper: 'jit', '')
    functions: dict[str, tuple[int, str]] = field(default_factory=dict)


def inputs(fun: Any, arrays: list[str], static: dict[str, Any], transform: str | None) -> Inputs:
    """`fun`: the function jit compiled; `arrays`: its dynamic leaves in words (shape,
    dtype, placement, as the cache keys them); `static`: the static values by name."""
    reader = _Reader()
    parts = [reader.read(fun, "", MAX_DEPTH), *arrays, f"under {transform}"]
    functions = {}
    for name, value in static.items():
        parts.append(f"{name}={reader.read(value, name, MAX_DEPTH)}")
        if callable(value):
            found = unwrap(value)
            functions[name] = (id(found.fun), found.layers[0] if found.layers else "")
    digest = hashlib.sha1("\x1f".join(parts).encode(errors="replace")).hexdigest()
    return Inputs(digest, reader.data, functions)


class _Reader:
    def __init__(self) -> None:
        self.nodes = 0
        self.data: dict[str, str] = {}

    def read(self, value: Any, path: str, depth: int) -> str:
        self.nodes += 1
        try:
            if self.nodes > MAX_NODES or depth <= 0:
                return _identity(value)
            return self._read(value, path, depth)
        except Exception:  # a user object may do anything
            return _identity(value)

    def _read(self, value: Any, path: str, depth: int) -> str:
        if value is None or isinstance(value, bool | int | float | complex | str | bytes):
            return repr(value)
        if _is_array(value):
            return self._array(value, path)
        if isinstance(value, functools.partial):
            inner = [self.read(v, path, depth - 1) for v in (value.func, *value.args)]
            keywords = [f"{k}={self.read(v, k, depth - 1)}" for k, v in value.keywords.items()]
            return f"partial({', '.join(inner + keywords)})"
        if isinstance(value, types.MethodType):
            self_text = self.read(value.__self__, path, depth - 1)
            return f"{self.read(value.__func__, path, depth)} of {self_text}"
        if isinstance(value, types.FunctionType):
            return self._function(value, path, depth)
        if callable(value) and hasattr(value, "__wrapped__"):  # a jit wrapper, a decorator
            found = unwrap(value)
            return f"{'/'.join(found.layers)}:{self.read(found.fun, path, depth - 1)}"
        if _is_closed_jaxpr(value):  # a lax loop's body, in a primitive's params
            consts = [self.read(c, path, depth - 1) for c in value.consts]
            return f"{value.jaxpr}[{', '.join(consts)}]"
        if type(value).__name__ == "Primitive":  # JAX's, in an op-by-op compile's closure
            return str(value.name)
        if isinstance(value, tuple | list):
            return "(" + ", ".join(self.read(v, path, depth - 1) for v in value) + ")"
        if isinstance(value, dict):
            items = [f"{k!r}: {self.read(v, str(k), depth - 1)}" for k, v in value.items()]
            return "{" + ", ".join(items) + "}"
        return values.words(value, "").key  # by its fields, or by identity

    def _function(self, fun: types.FunctionType, path: str, depth: int) -> str:
        """Its code, its defaults and what its closure holds, each cell by name."""
        code = fun.__code__
        cells = []
        for name, cell in zip(code.co_freevars, fun.__closure__ or (), strict=False):
            try:
                held = cell.cell_contents
            except ValueError:  # an empty cell
                held = None
            inner = f"{path}.{name}" if path else name
            cells.append(f"{name}={self.read(held, inner, depth - 1)}")
        defaults = [self.read(d, path, depth - 1) for d in fun.__defaults__ or ()]
        place = f"{code.co_filename}:{code.co_firstlineno}:{code.co_qualname}"
        return f"{place}[{', '.join(cells)}]({', '.join(defaults)})"

    def _array(self, value: Any, path: str) -> str:
        text = array_item(dtype_name(value.dtype), tuple(value.shape))  # 'f32[500,3]'
        if path and len(self.data) < MAX_DATA:
            self.data.setdefault(path, text)
        if getattr(value, "nbytes", MAX_BYTES + 1) <= MAX_BYTES and not _is_tracer(value):
            digest = hashlib.sha1(np.asarray(value).tobytes()).hexdigest()[:16]
            return f"{text}#{digest}"
        return text + _identity(value)


def _is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and not callable(value)


def _is_closed_jaxpr(value: Any) -> bool:
    return type(value).__name__ == "ClosedJaxpr" and hasattr(value, "consts")


def _is_tracer(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


def _identity(value: Any) -> str:
    """A token that the same live object keeps (`viz.recorder.capture.values`)."""
    return f"{type(value).__qualname__}{values.token(value)}"
