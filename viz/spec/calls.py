"""A call's arguments written back as an args spec (`f32[8,128], 3, key`): the spec that
reproduces the call, or why the spec language cannot write it. The recorder writes one
for every compile it keeps (`viz.recorder.capture.describe`). Runs where the values are, beside
jax; `viz.spec` does not re-export it, so the app server never imports it.
"""

from __future__ import annotations

import ast
from typing import Any

import jax
import numpy as np

from viz.spec.arguments import format_spec
from viz.spec.text import dtype_name
from viz.spec.values import ArraySpec, KeySpec, ValueSpec
from viz.units import a_or_an


class _Inexpressible(Exception):
    """The spec language cannot write this argument (the message says which and why)."""


def call_spec(
    names: list[str],
    values: list[Any],
    static: tuple[int, ...],
    positional: list[str],
    n_positional: int,
) -> tuple[str | None, str | None]:
    """The args spec that reproduces the call, or (None, why not). `names` and `values`:
    the call's arguments, its `n_positional` positional ones first, then its keywords;
    `static`: the indices of static ones; `positional`: the function's positional
    parameters, in order."""
    by_position: dict[int, int] = dict(enumerate(range(n_positional)))
    for i in range(n_positional, len(names)):
        if names[i] not in positional:
            return None, f"keyword argument `{names[i]}` is not a positional parameter"
        by_position[positional.index(names[i])] = i
    if sorted(by_position) != list(range(len(by_position))):
        missing = next(p for p in range(len(by_position)) if p not in by_position)
        return None, f"parameter `{positional[missing]}` was left at its default"
    try:
        items = [
            _static_item(names[i], values[i]) if i in static else _dynamic_item(names[i], values[i])
            for i in (by_position[p] for p in range(len(by_position)))
        ]
    except _Inexpressible as exc:
        return None, str(exc)
    return format_spec(items), None


def _static_item(name: str, value: Any) -> Any:
    text = repr(value)
    try:
        same = ast.literal_eval(text) == value and type(ast.literal_eval(text)) is type(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        same = False
    if not same:
        raise _Inexpressible(
            f"static `{name}` is {a_or_an(type(value).__qualname__)}: the spec language writes "
            "static values as Python literals"
        )
    return ValueSpec(text, value)


def _dynamic_item(path: str, value: Any) -> Any:
    if value is None:
        return None
    if type(value) is dict:
        return {k: _dynamic_item(f"{path}[{k!r}]", v) for k, v in value.items()}
    if type(value) in (list, tuple):
        items = [_dynamic_item(f"{path}[{i}]", v) for i, v in enumerate(value)]
        return items if type(value) is list else tuple(items)
    if isinstance(value, bool | int | float | complex):
        return ValueSpec(repr(value), value)
    if isinstance(value, jax.Array | np.ndarray | np.generic):
        return _array_item(path, value)
    raise _Inexpressible(
        f"`{path}` is {a_or_an(type(value).__module__)}.{type(value).__qualname__} "
        "(a custom pytree node): the spec language writes dicts, lists and tuples"
    )


def _array_item(path: str, value: Any) -> Any:
    aval = jax.typeof(value)
    if jax.dtypes.issubdtype(aval.dtype, jax.dtypes.prng_key):
        if aval.shape == ():
            return KeySpec()
        raise _Inexpressible(f"`{path}` is an array of {aval.shape} PRNG keys: spec writes one")
    tracer = isinstance(value, jax.core.Tracer)  # under a transformation: no placement
    sharding = None if tracer else getattr(value, "sharding", None)
    if sharding is not None and len(getattr(sharding, "device_set", ())) > 1:
        raise _Inexpressible(f"`{path}` is spread over {len(sharding.device_set)} devices")
    if aval.weak_type:
        raise _Inexpressible(f"`{path}` is a weak-typed array: the spec writes Python scalars")
    name = dtype_name(aval.dtype)
    try:
        return ArraySpec(name, tuple(aval.shape))
    except ValueError:
        raise _Inexpressible(f"`{path}` has dtype {name}, which the spec language lacks") from None
