"""Argument specs made into what a stage needs: abstract arguments for tracing, real
arrays for running (placed on a mesh when there is one), their sizes, and the spec
text they came from. The worker's side of `viz.spec`; `viz.spec.values` parses.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from viz.spec.text import X64_DTYPES
from viz.spec.values import (
    ArraySpec,
    KeySpec,
    LazyModule,
    ValueSpec,
    is_array,
    leaves,
    map_tree,
    named_sharding,
    put_on_mesh,
    value_leaves,
)

jax: Any = LazyModule("jax")


def _abstract_leaf(x: Any, sharding: Any = None) -> Any:
    if isinstance(x, jax.Array):
        weak = getattr(x, "weak_type", False)
        return jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=weak, sharding=sharding)
    if isinstance(x, np.ndarray | np.generic):
        dtype = jax.dtypes.canonicalize_dtype(x.dtype)
        return jax.ShapeDtypeStruct(x.shape, dtype, sharding=sharding)
    return x


def _abstract_value(value: Any, sharding: Any = None) -> Any:
    try:
        return jax.tree_util.tree_map(lambda x: _abstract_leaf(x, sharding), value)
    except Exception:
        return _abstract_leaf(value, sharding)


def _abstract_spec(leaf: Any, mesh: Any = None) -> Any:
    if isinstance(leaf, ArraySpec | KeySpec):
        return leaf.abstract(mesh)
    if isinstance(leaf, ValueSpec):
        return _abstract_value(leaf.value, named_sharding(mesh, leaf.sharding))
    return _abstract_value(leaf, named_sharding(mesh, None))


def abstract_args(items: list, mesh: Any = None) -> list:
    """Same trees with ShapeDtypeStruct for arrays and keys; values stay values, except
    that array leaves inside them become ShapeDtypeStruct (shape, dtype, weak_type). On
    a jax `mesh`, every array carries its sharding (replicated without `@`)."""
    return [map_tree(item, lambda leaf: _abstract_spec(leaf, mesh)) for item in items]


def concrete_args(items: list, seed: int = 0, mesh: Any = None) -> list:
    """Same trees with real arrays, drawn in order from ``np.random.default_rng(seed)``;
    on a jax `mesh`, each placed by its sharding (replicated without `@`)."""
    rng = np.random.default_rng(seed)

    def concrete(leaf: Any) -> Any:
        if isinstance(leaf, ArraySpec | KeySpec):
            return leaf.concrete(rng, mesh)
        if isinstance(leaf, ValueSpec):
            return put_on_mesh(leaf.value, mesh, leaf.sharding)
        return put_on_mesh(leaf, mesh, None)

    return [map_tree(item, concrete) for item in items]


def _leaf_bytes(leaf: Any) -> int:
    if isinstance(leaf, ArraySpec | KeySpec):
        return leaf.nbytes
    value = leaf.value if isinstance(leaf, ValueSpec) else leaf
    return sum(int(getattr(x, "nbytes", 0)) for x in value_leaves(value) if is_array(x))


def input_bytes(items: list) -> int:
    """Bytes of all array inputs (specs as written, plus arrays held by values)."""
    return sum(_leaf_bytes(leaf) for leaf in leaves(items))


def array_specs(items: list) -> list[ArraySpec]:
    """The ArraySpec leaves of parsed items, in order."""
    return [leaf for leaf in leaves(items) if isinstance(leaf, ArraySpec)]


def uses_x64(items: list) -> bool:
    """True if any ArraySpec is 64-bit (f64, i64, u64, c128): wrap in jax.enable_x64(True)."""
    return any(isinstance(x, ArraySpec) and x.dtype in X64_DTYPES for x in leaves(items))


def _format(tree: Any) -> str:
    if isinstance(tree, dict):
        return "{" + ", ".join(f"{k!r}: {_format(v)}" for k, v in tree.items()) + "}"
    if isinstance(tree, list):
        return "[" + ", ".join(_format(v) for v in tree) + "]"
    if isinstance(tree, tuple):
        inner = ", ".join(_format(v) for v in tree)
        return f"({inner},)" if len(tree) == 1 else f"({inner})"
    if isinstance(tree, ArraySpec | KeySpec | ValueSpec):
        return str(tree)
    return repr(tree)


def format_spec(items: list) -> str:
    """Spec text for ``items``; ``parse_spec(format_spec(x)) == x`` for parsed specs."""
    return ", ".join(_format(item) for item in items)
