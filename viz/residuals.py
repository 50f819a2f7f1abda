"""What `jax.checkpoint` leaves saved for the backward pass: the residuals of a
function that checkpoints part of itself, as `jax.ad_checkpoint.print_saved_residuals`
prints them (JAX's public API for it), one row a line. In the worker: imports jax.

A function that takes its own gradient (a training step: `jax.grad` inside) has its
residuals inside; asking for the residuals of the whole step would differentiate the
gradient again. There the note says so, and names the function to analyze instead.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import math
import re
from collections.abc import Iterator
from typing import Any

from jax.ad_checkpoint import print_saved_residuals

from viz.memory.model import Residual
from viz.spec.text import array_item_parts
from viz.stages import Traced
from viz.where import user_where

REMAT = ("remat2", "checkpoint", "remat")  # the primitive's names across JAX versions
DIFFERENTIATED = (
    "this function takes its own gradient: its jax.checkpoint regions are differentiated "
    "inside it. Analyze the function under jax.grad (the loss) to list what they save."
)
_FROM = re.compile(r" from (?P<file>.+?):(?P<line>\d+)(?::\d+)? \((?P<function>[^()]*)\)$")


def checkpoints(jaxpr: Any) -> Iterator[Any]:
    """The jax.checkpoint equations of a jaxpr, nested jaxprs included."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in REMAT:
            yield eqn
        for value in eqn.params.values():
            for sub in value if isinstance(value, list | tuple) else (value,):
                inner = getattr(sub, "jaxpr", sub)  # a ClosedJaxpr's, or a Jaxpr
                if hasattr(inner, "eqns"):
                    yield from checkpoints(inner)


def saved_residuals(traced: Traced) -> tuple[list[Residual], str] | None:
    """(the residuals, a note) of the traced function where it checkpoints part of
    itself; None where it does not. Raises what JAX raises for a function it cannot
    differentiate (the pipeline makes that a warning)."""
    found = list(checkpoints(traced.jaxpr.jaxpr))
    if not found:
        return None
    if all(eqn.params.get("differentiated") for eqn in found):
        return [], DIFFERENTIATED
    printed = io.StringIO()
    with traced.target.scope(traced.args), contextlib.redirect_stdout(printed):
        fn, args, kwargs = _call(traced)
        print_saved_residuals(fn, *args, **kwargs)
    found, said = [], []
    for line in printed.getvalue().splitlines():
        row = residual(line)
        if row is not None:
            found.append(row)
        elif line.strip():  # the function's own print, as it traced again
            said.append(line)
    if said:
        print("\n".join(said))
    return found, ""


def _call(traced: Traced) -> tuple[Any, list[Any], dict[str, Any]]:
    """(function, arguments, keyword arguments) for print_saved_residuals: the static
    arguments bound, the others passed by their parameter's name, so that a residual
    `from the argument x` names the user's parameter."""
    target, values = traced.target, list(traced.abstract)
    static = set(target.static_argnums)
    try:
        params = list(inspect.signature(target.fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    named = len(params) >= len(values) and all(
        p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params[: len(values)]
    )
    if not named:  # a *args function: its residuals are named by position

        def dynamic_only(*dynamic: Any) -> Any:
            given = iter(dynamic)
            return target.fn(*(v if i in static else next(given) for i, v in enumerate(values)))

        return dynamic_only, target.dynamic(values), {}
    bound = {params[i].name: values[i] for i in static}
    fn = functools.partial(target.fn, **bound) if bound else target.fn
    dynamic = {params[i].name: v for i, v in enumerate(values) if i not in static}
    return fn, [], dynamic


def residual(line: str) -> Residual | None:
    """One printed line: `f32[256,512] output of sin from model.py:5:11 (layer)`
    (None: not such a line)."""
    aval, _, source = line.partition(" ")
    parts = array_item_parts(aval)
    if parts is None or not source:
        return None
    dtype, shape = parts
    where = ""
    found = _FROM.search(source)
    if found:
        where = user_where(found["file"], int(found["line"]))
        source = source[: found.start()]
    return Residual(list(shape), dtype, math.prod(shape) * _itemsize(dtype), source, where)


def _itemsize(dtype: str) -> int:
    """Bytes of one element of a jaxpr dtype name (f32: 4, bf16: 2, bool: 1, c64: 8)."""
    bits = re.search(r"\d+", dtype)
    return max(1, int(bits.group()) // 8) if bits else 1
