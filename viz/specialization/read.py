"""Read what an executable is specialized on, from the staged pipeline's own objects
(runs in the worker: it imports jax).

- each argument leaf's state: static (the value, from the parsed spec), dynamic (the
  traced jaxpr's input avals: shape, dtype, weak type) or untraceable (tracing failed
  with a value-dependent shape or branch, and JAX's message names the leaf: "depends
  on the value of the argument x");
- its sharding, from the compiled executable's `input_shardings`;
- the ops whose sizes equal an argument's value or dimension (`ShapeOp`, a heuristic
  on the jaxpr's numbers);
- each parameter in the spec language (`item`, `tree`), so that the app can build the
  spec with one leaf changed without jax (`viz.specialization.changes`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np
from jax.extend import core

from viz.cache.keys import spec_text
from viz.errors import ErrorInfo, ErrorKind
from viz.jax_private import user_frames
from viz.spec import (
    DTYPES,
    ArraySpec,
    KeySpec,
    ValueSpec,
    array_item,
    dtype_name,
    split_spec,
)
from viz.specialization.model import MAX_MATCHES, ShapeOp, SpecializedArg
from viz.stages import Compiled, Traced
from viz.target import Args, Target

# The equations whose params carry an output size, and which params (the heuristic).
SHAPE_PARAMS = {
    "iota": ("shape",),
    "broadcast_in_dim": ("shape",),
    "reshape": ("new_sizes",),
    "dynamic_slice": ("slice_sizes",),
    "slice": ("limit_indices",),
    "gather": ("slice_sizes",),
    "random_bits": ("shape",),
    "rng_bit_generator": ("shape",),
    "split": ("sizes",),
}
MIN_SIZE = 2  # sizes 0 and 1 equal half the dimensions of any program: not evidence
MAX_SHAPE_OPS = 200
UNTRACEABLE = {
    ErrorKind.VALUE_DEPENDENT_SHAPE: "its value decided a shape while tracing",
    ErrorKind.CONTROL_FLOW: "its value decided a Python branch while tracing",
}
# the rows (one per argument leaf) and the ops whose sizes come from arguments
Specialization = tuple[list[SpecializedArg], list[ShapeOp]]
_NAMED = re.compile(r"depends on the values? of the arguments? (.+?)\.(?:\s|$)")


def read_specialization(
    target: Target,
    args: Args | None,
    traced: Traced | None = None,
    compiled: Compiled | None = None,
    error: ErrorInfo | None = None,
) -> Specialization:
    """The rows and the shape ops of one analysis, from as far as it got: no rows
    without a parsed spec, no shape ops without a jaxpr, no sharding without an
    executable."""
    if args is None:
        return [], []
    rows, ops = read_traced(target, args, traced)
    return finish(rows, ops, compiled, error)


def read_traced(target: Target, args: Args, traced: Traced | None = None) -> Specialization:
    """What the spec and the trace alone say: the rows (no sharding yet) and the shape
    ops. The pipeline reads it while XLA compiles; `finish` adds what the executable
    and the error say."""
    with target.scope(args):
        rows = _rows(target, args, traced)
    ops = shape_ops(traced.jaxpr, rows, target.user_file) if traced is not None else []
    return rows, ops


def finish(
    rows: list[SpecializedArg],
    ops: list[ShapeOp],
    compiled: Compiled | None = None,
    error: ErrorInfo | None = None,
) -> Specialization:
    """`read_traced`'s rows with each leaf's sharding (from the executable) and the
    leaves a trace error names marked untraceable (the shape ops stay)."""
    if compiled is not None:
        _add_shardings(rows, compiled)
    if error is not None:
        _mark_untraceable(rows, error)
    return rows, ops


# -- rows ---------------------------------------------------------------------------
def _rows(target: Target, args: Args, traced: Traced | None) -> list[SpecializedArg]:
    names = target.param_names(len(args.items))
    texts = split_spec(args.spec)
    # the trace's own abstract arguments: built once (a big model has thousands of leaves)
    abstract = traced.abstract if traced is not None and traced.abstract else args.abstract()
    avals = list(traced.jaxpr.in_avals) if traced is not None else None
    rows: list[SpecializedArg] = []
    for i, (name, item) in enumerate(zip(names, args.items, strict=True)):
        text = texts[i] if i < len(texts) else ""
        if i in target.static_argnums:
            value = item.value if isinstance(item, ValueSpec) else item
            rows.append(
                SpecializedArg(
                    name, "static", value=_short_repr(value), param=name, position=i, item=text
                )
            )
            continue
        rows.extend(_leaf_rows(name, i, item, abstract[i], target.kept_static))
    dynamic = [r for r in rows if r.state == "dynamic"]
    if avals is not None and len(avals) == len(dynamic):  # the trace's avals are the truth
        for row, aval in zip(dynamic, avals, strict=True):
            _set_aval(row, aval)
    return rows


def _leaf_rows(
    name: str, position: int, item: Any, value: Any, kept: Callable[[Any], bool]
) -> list[SpecializedArg]:
    """A row per leaf: dynamic, or static where the jit keeps it so (`kept`:
    eqx.filter_jit's leaves that are not arrays)."""
    leaves = jax.tree_util.tree_flatten_with_path(value)[0]
    form = spec_form(item)
    rows = []
    for path, leaf in leaves:
        row = SpecializedArg(
            name + jax.tree_util.keystr(path), "dynamic", param=name, position=position
        )
        if kept(leaf):
            row.state, row.value = "static", _short_repr(leaf)
            rows.append(row)
            continue
        try:
            _set_aval(row, jax.typeof(leaf))  # a spec's array or a value
        except TypeError:  # a str or an object: jit refuses it when it traces
            row.note = f"a {type(leaf).__name__} is not a JAX type"
        rows.append(row)
    if form is not None and len(form[1]) == len(rows):
        tree, items = form
        for row, text in zip(rows, items, strict=True):
            row.item = text
        if rows and not (len(rows) == 1 and rows[0].arg == name):
            rows[0].tree = tree
    else:
        for row in rows:
            row.note = "its argument cannot be written in the spec language"
    return rows


def _set_aval(row: SpecializedArg, aval: Any) -> None:
    row.shape = [int(d) for d in getattr(aval, "shape", ())]
    row.dtype = dtype_name(aval.dtype)
    row.weak_type = bool(getattr(aval, "weak_type", False))


def _short_repr(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _add_shardings(rows: list[SpecializedArg], compiled: Compiled) -> None:
    positional, _ = compiled.compiled.input_shardings
    shardings = jax.tree_util.tree_leaves(positional, is_leaf=lambda s: s is None)
    dynamic = [r for r in rows if r.state == "dynamic"]
    if len(shardings) != len(dynamic):
        return
    for row, sharding in zip(dynamic, shardings, strict=True):
        row.sharding = describe_sharding(sharding)


def describe_sharding(sharding: Any) -> str:
    """A sharding in a few words: `single device cpu:0`, `P('x',) over
    mesh(x=8)`; `unused (pruned)` for an input jit dropped (None)."""
    if sharding is None:
        return "unused (pruned)"
    if isinstance(sharding, jax.sharding.SingleDeviceSharding):
        (device,) = sharding.device_set
        return f"single device {device.platform}:{device.id}"
    if isinstance(sharding, jax.sharding.NamedSharding):
        axes = ",".join(f"{k}={v}" for k, v in sharding.mesh.shape.items())
        return f"{spec_text(sharding.spec)} over mesh({axes})"
    return str(sharding)


def _mark_untraceable(rows: list[SpecializedArg], error: ErrorInfo) -> None:
    """The leaves JAX's message says a concrete value depended on."""
    why = UNTRACEABLE.get(error.kind)
    if why is None or error.stage != "trace":
        return
    named = named_arguments(error.detail or error.message)
    for row in rows:
        if row.state == "dynamic" and (row.arg in named or row.param in named):
            row.state, row.note = "untraceable", why


def named_arguments(message: str) -> set[str]:
    """The arguments in JAX's "depends on the value(s) of the argument(s) a, b, and c"."""
    found = _NAMED.search(message)
    if not found:
        return set()
    return {n.strip() for n in re.split(r",\s*(?:and\s+)?|\s+and\s+", found.group(1)) if n}


# -- the spec form of a parameter ------------------------------------------------------
class Unwritable(Exception):
    """A value the spec language cannot write (a custom pytree, a weak array)."""


def spec_form(item: Any) -> tuple[list[str], list[str]] | None:
    """(tree, items): a parameter in the spec language, its leaves apart in JAX's
    flattening order (dict keys sorted), so `tree[0] + items[0] + tree[1] + ...` is a
    spec item of the same pytree, shapes, dtypes and weak types. None when the value
    cannot be written (a custom pytree, a namedtuple, a weakly typed array)."""
    parts: list[str] = [""]
    items: list[str] = []
    try:
        for kind, text in _form(item):
            if kind == "leaf":
                items.append(text)
                parts.append("")
            else:
                parts[-1] += text
    except Unwritable:
        return None
    return parts, items


def _form(tree: Any) -> Iterator[tuple[str, str]]:
    if isinstance(tree, ValueSpec):
        yield from _form(tree.value)
    elif isinstance(tree, ArraySpec | KeySpec):
        yield "leaf", str(tree)
    elif type(tree) is dict:
        yield from _container("{", "}", [(f"{k!r}: ", tree[k]) for k in sorted(tree)])
    elif type(tree) is list:
        yield from _container("[", "]", [("", v) for v in tree])
    elif type(tree) is tuple:
        yield from _container("(", ",)" if len(tree) == 1 else ")", [("", v) for v in tree])
    elif tree is None:
        yield "text", "None"
    elif isinstance(tree, bool | int | float | complex):
        yield "leaf", repr(tree)
    else:
        yield "leaf", _array_text(tree)


def _container(opener: str, closer: str, entries: list[tuple[str, Any]]) -> Iterator:
    yield "text", opener
    for n, (prefix, value) in enumerate(entries):
        yield "text", (", " if n else "") + prefix
        yield from _form(value)
    yield "text", closer


def _array_text(value: Any) -> str:
    if not isinstance(value, jax.Array | np.ndarray | np.generic):
        raise Unwritable(type(value).__name__)
    if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
        if np.shape(value) != ():
            raise Unwritable("an array of keys")
        return "key"
    dtype = dtype_name(value.dtype)
    if dtype not in DTYPES or getattr(value, "weak_type", False):
        raise Unwritable(f"a {dtype} array")
    return array_item(dtype, tuple(np.shape(value)))


# -- ops whose sizes come from arguments ---------------------------------------------
def shape_ops(jaxpr: Any, rows: list[SpecializedArg], user_file: str | None) -> list[ShapeOp]:
    """Equations (sub-jaxprs included) whose size parameters hold a number equal to a
    static argument's value (ints, and ints in tuples) or to an input's dimension;
    sizes under MIN_SIZE are ignored. Static matches first, then by line; equal
    (primitive, sizes, line) are counted once."""
    sources = _size_sources(rows)
    found: dict[tuple[str, tuple[int, ...], int | None], ShapeOp] = {}
    for eqn, outer in _equations(jaxpr.jaxpr, user_file):
        for param in SHAPE_PARAMS.get(eqn.primitive.name, ()):
            sizes = _ints(eqn.params.get(param))
            if not any(s in sources for s in sizes):
                continue
            line = _line(eqn, user_file) or outer
            key = (eqn.primitive.name, tuple(sizes), line)
            if key in found:  # counted, its matches already listed (thousands, on a big model)
                found[key].count += 1
                continue
            matched = [m for s in dict.fromkeys(sizes) for m in sources.get(s, [])]
            matched.sort(key=lambda m: m[1])  # static values first, pytree leaves last
            found[key] = ShapeOp(
                eqn.primitive.name,
                param,
                list(sizes),
                line,
                [where for where, _ in matched[:MAX_MATCHES]],
                max(len(matched) - MAX_MATCHES, 0),
                static=matched[0][1] == 0,
            )
    ops = sorted(found.values(), key=lambda o: (not o.static, o.line is None, o.line or 0))
    return ops[:MAX_SHAPE_OPS]


def _size_sources(rows: list[SpecializedArg]) -> dict[int, list[tuple[str, int]]]:
    """Each size ≥ MIN_SIZE and where it occurs (`n`, `shape[1]`, `x.shape[0]`), ranked:
    0 a static value, 1 a parameter's own dimension, 2 a dimension of a pytree leaf."""
    sources: dict[int, list[tuple[str, int]]] = {}

    def add(size: int, where: str, rank: int) -> None:
        if size >= MIN_SIZE:
            sources.setdefault(size, []).append((where, rank))

    for row in rows:
        if row.state == "static":
            for where, size in _static_ints(row.arg, row.value or ""):
                add(size, where, 0)
        for axis, size in enumerate(row.shape or []):
            add(size, f"{row.arg}.shape[{axis}]", 1 if row.arg == row.param else 2)
    return sources


def _static_ints(name: str, text: str) -> list[tuple[str, int]]:
    """The ints of a static value (its repr, read back as a literal): `n`, or
    `shape[1]` in a tuple."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return []
    if isinstance(value, int) and not isinstance(value, bool):
        return [(name, value)]
    if isinstance(value, tuple | list):
        return [(f"{name}[{j}]", v) for j, v in enumerate(value) if type(v) is int]
    return []


def _equations(
    jaxpr: Any, user_file: str | None, outer: int | None = None
) -> Iterator[tuple[Any, int | None]]:
    """Every equation, sub-jaxprs included, with its container's line in the user's
    file (`outer`), the line an equation without one of its own takes (inside a
    library's own jit: `jnp.tril`, `jax.random`). An equation's own line is read where
    it is needed (`_line`), not from the traceback of each of a 96-layer model's 8,000
    equations."""
    for eqn in jaxpr.eqns:
        yield eqn, outer
        subs = _sub_jaxprs(eqn.params)
        if subs:
            line = _line(eqn, user_file) or outer
            for sub in subs:
                yield from _equations(sub, user_file, line)


_JAXPRS = (core.ClosedJaxpr, core.Jaxpr)


def _sub_jaxprs(params: dict[str, Any]) -> list[Any]:
    """The jaxprs an equation's params hold (a loop's body, a branch), in order."""
    found = []
    for value in params.values():
        for sub in value if isinstance(value, tuple | list) else (value,):
            if isinstance(sub, _JAXPRS):  # one test for the many values that are not
                found.append(sub.jaxpr if isinstance(sub, core.ClosedJaxpr) else sub)
    return found


def _ints(value: Any) -> list[int]:
    if not isinstance(value, tuple | list):
        return []
    return [int(v) for v in value if isinstance(v, int | np.integer) and not isinstance(v, bool)]


def _line(eqn: Any, user_file: str | None) -> int | None:
    """The line of `user_file` (else of the innermost frame outside JAX) that made `eqn`,
    under a library's frames too (keras's layers under the user's `model(x)`)."""
    frames = user_frames(eqn.source_info.traceback)
    frame = next((f for f in frames if not user_file or f.file_name == user_file), None)
    return frame.start_line if frame is not None else None
