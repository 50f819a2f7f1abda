"""Parse the args-spec language into pytrees of argument specs.

A spec is a comma-separated list with one item per positional argument
(see "Args spec language" in DESIGN.md)::

    f32[32,784], {'w': f32[3,3], 'b': f32[3]}, 3, key, params

Items:

- ``f32[8,128]``, ``bf16[4]``, ``i32[]`` (scalar), ``bool[3]``, ``u8[2,2]``: an array
  (:class:`ArraySpec`). Dtypes: f16 bf16 f32 f64 i8 i16 i32 i64 u8 u16 u32 u64 bool c64
  c128. A dimension is an int or any expression that evaluates to an int in the
  namespace (``f32[batch, 128]``).
- ``key`` (or ``key(7)``): a PRNG key, ``jax.random.key(seed)`` (:class:`KeySpec`), unless
  the namespace itself defines ``key``.
- dicts, lists and tuples of items, nested arbitrarily: real containers in the result.
- anything else (literals ``5``, ``-2.0``, ``True``, ``'relu'``, ``None``, and expressions
  such as ``params`` or ``jnp.ones((3, 3))``) is evaluated with the namespace as globals
  (:class:`ValueSpec`). ``jax``, ``jnp`` and ``np`` are available unless the namespace
  binds those names itself. Evaluation never writes into the caller's dict.

Contract:

- :func:`parse_spec` returns one pytree per argument, made of dict/list/tuple containers
  whose leaves are ArraySpec / KeySpec / ValueSpec. For *any* input string it either
  returns or raises :class:`SpecError`, whose message names the item:
  ``item 2 'f32[3,,4]': empty dimension``.
- Parsing and :func:`abstract_args` never allocate array data, whatever the shapes;
  :func:`input_bytes` says how much :func:`concrete_args` would allocate.
- :func:`format_spec` is the inverse of :func:`parse_spec` for specs of arrays, keys,
  literals and containers.

64-bit dtypes: JAX truncates f64/i64/u64/c128 to their 32-bit versions unless x64 is
enabled. :meth:`ArraySpec.abstract` and :meth:`ArraySpec.concrete` follow the x64 setting
in force *when they are called*, so a caller for which :func:`uses_x64` is true wraps
abstraction, concretization and tracing in ``with jax.enable_x64(True): ...``.
"""

from __future__ import annotations

import ast
import importlib
import math
import operator
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from viz.spec.mesh import MeshSpec, check_partition, check_split
from viz.spec.partition import Partition, partition_of, sharded_parts
from viz.spec.text import (
    DTYPES,
    ItemError,
    SpecError,
    SpecItem,
    describe_error,
    looks_like_dtype,
    parse_item_ast,
    rewrite_empty_subscripts,
    split_items,
    unknown_dtype_message,
    unknown_name_message,
)


class LazyModule:
    """Imports a module on first use: the app server splits specs (`split_spec`)
    without ever importing jax; everything else here runs in the worker."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


jax: Any = LazyModule("jax")
jnp: Any = LazyModule("jax.numpy")


def named_sharding(mesh: Any, partition: Partition | None) -> Any:
    """The NamedSharding of `partition` on the jax `mesh` (replicated when None); None
    without a mesh, which leaves JAX's default placement, as before meshes."""
    if mesh is None:
        return None
    entries = partition.entries if partition is not None else ()
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*entries))


def put_on_mesh(value: Any, mesh: Any, partition: Partition | None) -> Any:
    """Every array leaf of `value` placed by `partition` on `mesh` (as it is: no mesh)."""
    sharding = named_sharding(mesh, partition)
    if sharding is None:
        return value
    return jax.tree_util.tree_map(
        lambda x: jax.device_put(x, sharding) if is_array(x) else x, value
    )


# --------------------------------------------------------------------------- leaf specs


@dataclass(frozen=True)
class ArraySpec:
    """An array argument of a given dtype (short name, e.g. 'f32') and shape."""

    dtype: str
    shape: tuple[int, ...]
    sharding: Partition | None = None  # `@ P(...)`: how it is split over the mesh

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(unknown_dtype_message(str(self.dtype)))
        shape = tuple(operator.index(d) for d in self.shape)
        if any(d < 0 for d in shape):
            raise ValueError(f"negative dimension in shape {shape}")
        object.__setattr__(self, "shape", shape)

    @property
    def np_dtype(self) -> np.dtype:
        """The dtype as written (64-bit stays 64-bit)."""
        return DTYPES[self.dtype]

    @property
    def nbytes(self) -> int:
        """Bytes of the array as written (an upper bound when x64 is off)."""
        return math.prod(self.shape) * self.np_dtype.itemsize

    def abstract(self, mesh: Any = None) -> jax.ShapeDtypeStruct:
        """The ShapeDtypeStruct JAX would see (64-bit only under ``jax.enable_x64``);
        on a `mesh`, with its sharding (replicated without `@`)."""
        dtype = jax.dtypes.canonicalize_dtype(self.np_dtype)
        return jax.ShapeDtypeStruct(self.shape, dtype, sharding=named_sharding(mesh, self.sharding))

    def concrete(self, rng: np.random.Generator, mesh: Any = None) -> jax.Array:
        """Deterministic data: normal floats/complex, small ints, random bools; on a
        `mesh`, placed by its sharding."""
        dtype = jax.dtypes.canonicalize_dtype(self.np_dtype)
        data = jnp.asarray(np.asarray(_sample(self.np_dtype, self.shape, rng)).astype(dtype))
        return put_on_mesh(data, mesh, self.sharding)

    def __str__(self) -> str:
        text = f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"
        return text if self.sharding is None else f"{text} @ {self.sharding}"


def _sample(dtype: np.dtype, shape: tuple[int, ...], rng: np.random.Generator) -> Any:
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if jnp.issubdtype(dtype, jnp.complexfloating):
        return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    if jnp.issubdtype(dtype, jnp.floating):
        return rng.standard_normal(shape)
    if jnp.issubdtype(dtype, jnp.unsignedinteger):
        return rng.integers(0, 10, shape)
    return rng.integers(-5, 6, shape)


@dataclass(frozen=True)
class KeySpec:
    """A new-style PRNG key argument, ``jax.random.key(seed)``."""

    seed: int = 0

    def abstract(self, mesh: Any = None) -> jax.ShapeDtypeStruct:
        shape = jax.eval_shape(lambda: jax.random.key(0))
        if mesh is None:
            return shape
        return jax.ShapeDtypeStruct(shape.shape, shape.dtype, sharding=named_sharding(mesh, None))

    def concrete(self, rng: np.random.Generator | None = None, mesh: Any = None) -> jax.Array:
        return put_on_mesh(jax.random.key(self.seed), mesh, None)

    @property
    def nbytes(self) -> int:
        data = jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0)))
        return math.prod(data.shape) * np.dtype(data.dtype).itemsize

    def __str__(self) -> str:
        return "key" if self.seed == 0 else f"key({self.seed})"


@dataclass(frozen=True)
class ValueSpec:
    """A literal or evaluated expression: ``text`` as written, ``value`` as evaluated."""

    text: str
    value: Any
    sharding: Partition | None = None  # `@ P(...)`: how its arrays are split over the mesh

    def __str__(self) -> str:
        return self.text if self.sharding is None else f"{self.text} @ {self.sharding}"


@dataclass(frozen=True)
class _Ctx:
    ns: dict[str, Any]
    src: str
    expressions: bool = True  # False: literals and the namespace's own names only
    mesh: MeshSpec | None = None  # the mesh `@ P(...)` suffixes split over


def _parse_item(
    item: SpecItem, ns: dict[str, Any], expressions: bool = True, mesh: MeshSpec | None = None
) -> Any:
    if item.problem:
        raise ItemError(item.problem)
    src = "(\n" + rewrite_empty_subscripts(item.text, item.masked) + "\n)"
    ctx = _Ctx(ns, src, expressions, mesh)
    root = parse_item_ast(src, item).body
    if _is_value_node(root, ctx):
        return ValueSpec(item.text, _eval(root, ctx))
    return _build(root, ctx)


def _is_value_node(node: ast.expr, ctx: _Ctx) -> bool:
    """True when ``node`` is a plain Python value, not an array/key/container item."""
    if isinstance(node, ast.Subscript | ast.Name | ast.Call):
        return _special(node, ctx) is None
    if sharded_parts(node) is not None:
        return False
    if isinstance(node, ast.Dict):
        return None in node.keys
    if isinstance(node, ast.List | ast.Tuple):
        return any(isinstance(e, ast.Starred) for e in node.elts)
    return True


def _build(node: ast.expr, ctx: _Ctx) -> Any:
    if _is_value_node(node, ctx):
        return ValueSpec(_segment(node, ctx), _eval(node, ctx))
    sharded = sharded_parts(node)
    if sharded is not None:
        return _shard(_build(sharded[0], ctx), partition_of(sharded[1]), ctx.mesh)
    if isinstance(node, ast.Dict):
        pairs = zip(node.keys, node.values, strict=True)
        return {_dict_key(k, ctx): _build(v, ctx) for k, v in pairs}
    if isinstance(node, ast.List):
        return [_build(e, ctx) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_build(e, ctx) for e in node.elts)
    return _special(node, ctx)()


def _special(node: ast.expr, ctx: _Ctx) -> Callable[[], Any] | None:
    """A builder for an array or key item, or None when ``node`` is an ordinary value."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        return _array_builder(node, node.value.id, ctx)
    if isinstance(node, ast.Name) and node.id not in ctx.ns:
        if node.id == "key":
            return KeySpec
        if node.id in DTYPES:
            raise ItemError(f"'{node.id}' needs a shape: {node.id}[3], or {node.id}[] for a scalar")
    if _is_key_call(node, ctx):
        return lambda: _key_spec(node, ctx)
    return None


def _array_builder(node: ast.Subscript, name: str, ctx: _Ctx) -> Callable[[], Any] | None:
    if name in DTYPES:
        return lambda: ArraySpec(name, _shape(node.slice, ctx))
    if name not in ctx.ns and looks_like_dtype(name):
        raise ItemError(unknown_dtype_message(name))
    if name not in ctx.ns and _literal_shape(node.slice):
        raise ItemError(unknown_name_message(name))
    return None


def _literal_shape(node: ast.expr) -> bool:
    """`[3]`, `[8, 128]` or `[]`: a shape of numbers, as after a dtype."""
    dims = node.elts if isinstance(node, ast.Tuple) else [node]
    return all(isinstance(d, ast.Constant) and _is_int(d.value) for d in dims)


def _is_key_call(node: ast.expr, ctx: _Ctx) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "key"
        and "key" not in ctx.ns
    )


def _key_spec(node: ast.Call, ctx: _Ctx) -> KeySpec:
    if len(node.args) != 1 or node.keywords or isinstance(node.args[0], ast.Starred):
        raise ItemError("key takes one integer seed: key or key(0)")
    seed = _eval(node.args[0], ctx)
    if isinstance(seed, bool) or not _is_int(seed):
        raise ItemError(f"key seed {_label(_segment(node.args[0], ctx), seed)} is not an integer")
    return KeySpec(operator.index(seed))


def _shard(tree: Any, partition: Partition, mesh: MeshSpec | None) -> Any:
    """`tree @ partition`: each array leaf without a sharding of its own gets this one,
    checked against the mesh (its axes exist, each is used once, the dimensions divide)."""
    if mesh is None:
        raise ItemError(
            f"{partition} needs a mesh to split over: give one, e.g. mesh data=8 (Explore's "
            "Mesh field, --mesh data=8, analyze(..., mesh='data=8'))"
        )
    check_partition(partition, mesh)
    return map_tree(tree, lambda leaf: _shard_leaf(leaf, partition, mesh))


def _shard_leaf(leaf: Any, partition: Partition, mesh: MeshSpec) -> Any:
    if isinstance(leaf, ArraySpec):
        if leaf.sharding is None:
            check_split(leaf.shape, partition, mesh, str(leaf))
            return replace(leaf, sharding=partition)
        return leaf
    if isinstance(leaf, ValueSpec) and leaf.sharding is None:
        for x in value_leaves(leaf.value):
            if not is_array(x):
                raise ItemError(f"{leaf.text} holds a {type(x).__name__}: only arrays are sharded")
            check_split(tuple(np.shape(x)), partition, mesh, leaf.text)
        return replace(leaf, sharding=partition)
    if isinstance(leaf, ValueSpec):
        return leaf
    raise ItemError(f"{leaf} cannot be sharded: only arrays (and values holding arrays) are")


MAX_RANK = 64  # numpy's limit on dimensions, and so JAX's
MAX_ELEMENTS = 2**63 - 1  # XLA counts an array's elements in an int64


def _shape(node: ast.expr, ctx: _Ctx) -> tuple[int, ...]:
    dims = node.elts if isinstance(node, ast.Tuple) else [node]
    if len(dims) > MAX_RANK:
        raise ItemError(f"{len(dims)} dimensions: JAX arrays have at most {MAX_RANK}")
    shape = tuple(_dimension(d, ctx) for d in dims)
    if max(shape, default=0) > MAX_ELEMENTS or math.prod(shape) > MAX_ELEMENTS:
        raise ItemError(f"shape {list(shape)} has more elements than XLA can count (2**63 - 1)")
    return shape


def _dimension(node: ast.expr, ctx: _Ctx) -> int:
    text = _segment(node, ctx)
    if isinstance(node, ast.Slice | ast.Starred):
        raise ItemError(f"dimension {text} is not an integer")
    value = _eval(node, ctx)
    if isinstance(value, bool | np.bool_) or not _is_int(value):
        raise ItemError(f"dimension {_label(text, value)} is not an integer")
    if operator.index(value) < 0:
        raise ItemError(f"dimension {_label(text, value)} is negative")
    return operator.index(value)


def _is_int(value: Any) -> bool:
    try:
        operator.index(value)
    except Exception:
        return False
    return True


def _label(text: str, value: Any) -> str:
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return text if text == shown else f"{text} = {shown}"


def _dict_key(node: ast.expr | None, ctx: _Ctx) -> Any:
    assert node is not None  # ** unpacking is handled as a plain value
    key = _eval(node, ctx)
    try:
        hash(key)
    except TypeError:
        raise ItemError(f"dict key {_segment(node, ctx)} is not hashable") from None
    return key


def _segment(node: ast.expr, ctx: _Ctx) -> str:
    return ast.get_source_segment(ctx.src, node) or ast.unparse(node)


def _eval(node: ast.expr, ctx: _Ctx) -> Any:
    if not ctx.expressions and not _is_plain(node, ctx.ns):
        code = ast.unparse(node)
        raise ItemError(f"only the spec language and names the code defines, not `{code}`")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            code = compile(ast.Expression(body=node), "<spec>", "eval")
        return eval(code, ctx.ns)
    except NameError as err:
        raise ItemError(_name_error(err)) from None
    except (Exception, SystemExit) as err:
        raise ItemError(describe_error(err)) from None


def _is_plain(node: ast.expr, ns: dict[str, Any]) -> bool:
    """A literal, or a bare name bound in `ns` to a value (not a module or function)."""
    if isinstance(node, ast.Name):
        value = ns.get(node.id)
        return node.id in ns and not (callable(value) or isinstance(value, type(np)))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return isinstance(node.operand, ast.Constant)
    if isinstance(node, ast.Tuple | ast.List):
        return all(_is_plain(e, ns) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(e is not None and _is_plain(e, ns) for e in [*node.keys, *node.values])
    return isinstance(node, ast.Constant)


def _name_error(err: NameError) -> str:
    name = getattr(err, "name", None)
    if name in DTYPES:
        return f"{name}[...] is an argument, not a value: it cannot be used inside an expression"
    return str(err)


# --------------------------------------------------------------------------- public API


def parse_spec(
    text: str,
    namespace: dict[str, Any] | None = None,
    *,
    expressions: bool = True,
    mesh: MeshSpec | None = None,
) -> list[Any]:
    """Parse ``text`` into one pytree per positional argument. Raises SpecError only.

    ``expressions=False`` accepts only the spec language and bare names ``namespace``
    binds to values (never calls, attributes or operators): what demo mode allows, a
    choice the caller makes (the worker, from ``viz.demo``). ``mesh``: the mesh that
    `@ P(...)` suffixes split over (a suffix without one is a SpecError)."""
    if not isinstance(text, str):
        raise SpecError(f"spec must be a string, not {type(text).__name__}")
    defaults = {
        "jax": importlib.import_module("jax"),
        "np": np,
        "jnp": importlib.import_module("jax.numpy"),
    }
    ns = {**defaults, **(namespace or {})}
    try:
        items = split_items(text)
    except Exception as err:  # pragma: no cover - the splitter is total
        raise SpecError(f"cannot split spec: {describe_error(err)}") from err
    return [_parse_one(item, ns, expressions, mesh) for item in items]


def _parse_one(
    item: SpecItem, ns: dict[str, Any], expressions: bool = True, mesh: MeshSpec | None = None
) -> Any:
    try:
        return _parse_item(item, ns, expressions, mesh)
    except ItemError as err:
        raise SpecError(err.reason, item.index, item.text) from None
    except Exception as err:  # e.g. RecursionError on absurd nesting
        raise SpecError(f"cannot parse: {describe_error(err)}", item.index, item.text) from err


def map_tree(tree: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(tree, dict):
        return {k: map_tree(v, fn) for k, v in tree.items()}
    if isinstance(tree, list):
        return [map_tree(v, fn) for v in tree]
    if isinstance(tree, tuple):
        mapped = [map_tree(v, fn) for v in tree]
        return type(tree)(*mapped) if hasattr(tree, "_fields") else tuple(mapped)
    return fn(tree)


def leaves(tree: Any) -> Iterator[Any]:
    if isinstance(tree, dict):
        tree = list(tree.values())
    if isinstance(tree, list | tuple):
        for v in tree:
            yield from leaves(v)
    else:
        yield tree


def is_array(x: Any) -> bool:
    return isinstance(x, jax.Array | np.ndarray | np.generic)


def value_leaves(value: Any) -> list[Any]:
    try:
        return jax.tree_util.tree_leaves(value)
    except Exception:
        return [value]
