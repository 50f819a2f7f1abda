"""Which function of the user's did jit compile? Layers peeled off down to it.

People jit wrapped functions: `jax.jit(jax.jacfwd(functools.partial(f, eps=…)))`,
`jax.jit(jax.grad(loss))`, `jax.jit(jax.vmap(step))`, a `custom_jvp`, a framework's
decorator. JAX names such a function `<unknown>`; `unwrap` follows `functools.partial`,
`__wrapped__` (which `functools.wraps` leaves on every JAX transformation and most
decorators), a `custom_jvp`/`custom_vjp`'s stored function and a bound method's
function, down to the function whose source the user wrote, and names each layer on
the way (`['jacfwd', 'partial']`; a framework's wrapper by the framework's name for it,
`filter_grad`, `nnx.jit`). Never raises: an object whose attributes misbehave
ends the walk where it stands.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any

from viz.recorder.capture import frameworks

MAX_LAYERS = 16  # a longer chain is a cycle or something odd: stop there


@dataclass
class Unwrapped:
    fun: Any  # the innermost function reached
    layers: list[str] = field(default_factory=list)  # outermost first: ['jacfwd', 'partial']

    @property
    def name(self) -> str:
        """'step'; a method named like `__call__` with its class: 'MLP.__call__'."""
        name = getattr(self.fun, "__name__", None) or type(self.fun).__name__
        if name.startswith("__"):
            qualname = getattr(self.fun, "__qualname__", "") or ""
            name = ".".join(qualname.split(".<locals>.")[-1].split(".")[-2:]) or name
        return name


def unwrap(fun: Any, outer: list[str] | None = None) -> Unwrapped:
    """`fun` peeled down to the user's function; `outer`: layers already peeled (a
    framework's, `viz.recorder.capture.frameworks`)."""
    layers: list[str] = list(outer or [])
    seen: set[int] = set()
    while len(layers) < MAX_LAYERS + len(outer or []) and id(fun) not in seen:
        seen.add(id(fun))
        inner = _inner(fun)
        if inner is None:
            break
        name = layer_name(fun)
        if name and not hasattr(fun, "__func__"):  # nor is a bound method a user's layer
            layers.append(name)
        fun = inner
    return Unwrapped(fun, layers)


def _inner(fun: Any) -> Any:
    """The function `fun` wraps, or None."""
    if isinstance(fun, functools.partial):
        return fun.func
    try:
        for attribute in ("__wrapped__", "__func__", "fun"):
            inner = getattr(fun, attribute, None)
            if callable(inner) and (attribute != "fun" or _is_custom_derivative(fun)):
                return inner
    except Exception:  # a user object's __getattr__ may do anything
        return None
    return None


def _is_custom_derivative(fun: Any) -> bool:
    return type(fun).__name__ in ("custom_jvp", "custom_vjp")


_TYPE_LAYERS = {"PjitFunction": "jit", "partial": "partial"}


def layer_name(fun: Any) -> str:
    """'jacfwd', 'grad', 'vmap', 'checkpoint', 'partial', 'custom_jvp', or the decorator's
    name: the function that made the wrapper, read from its code (`co_qualname`), since
    `functools.wraps` copied the wrapped function's own name onto it. '' for a wrapper
    that a framework puts around every method."""
    if isinstance(fun, functools.partial):
        return "partial"
    framework = frameworks.layer_name(fun)
    if framework is not None:
        return framework
    code = getattr(fun, "__code__", None)
    if code is None:
        name = type(fun).__name__
        return _TYPE_LAYERS.get(name, name)
    qualname = getattr(code, "co_qualname", code.co_name)
    if qualname.startswith("api_boundary."):  # JAX's traceback filter around a transform
        inner = _closure_function(fun)
        if inner is not None:
            qualname = getattr(inner.__code__, "co_qualname", inner.__code__.co_name)
    return qualname.split(".<locals>")[0]


def _closure_function(fun: Any) -> Any:
    """The first function in `fun`'s closure whose code is not `fun`'s own."""
    for cell in getattr(fun, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if getattr(value, "__code__", None) is not None:
            return value
    return None


def defined_at(fun: Any) -> str:
    """'path:line' of the function's source, or, for one without Python source (a
    builtin, a C extension), words that say so: never '?'."""
    code = getattr(fun, "__code__", None)
    if code is None:
        call = type(fun).__dict__.get("__call__")  # a callable object: its __call__
        code = getattr(call, "__code__", None)
    if code is not None:
        return f"{os.path.abspath(code.co_filename)}:{code.co_firstlineno}"
    module = getattr(fun, "__module__", None) or type(fun).__module__
    name = getattr(fun, "__qualname__", None) or type(fun).__qualname__
    return f"{module}.{name} (built in, no Python source)"
