"""The report's `sharding` section, read from a compiled executable: its input and
output shardings (`compiled.input_shardings`, `output_shardings`), each leaf's shard
shape from the sharding itself (`shard_shape`), and the collectives from the
compiled graph (`viz.sharding.collectives`). Runs in the worker."""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np

from viz.fusion.model import FusionEntry
from viz.ir.model import Graph
from viz.sharding.collectives import collectives
from viz.sharding.model import ShardedArg, ShardedOutput, ShardingSection
from viz.spec.mesh import MeshSpec


def read_sharding(
    compiled: Any,
    arg_names: tuple[str, ...],
    mesh: MeshSpec | None,
    graph: Graph | None,
    fusion_map: list[FusionEntry],
    user_file: str | None,
) -> ShardingSection | None:
    """How `compiled` (a `jax.stages.Compiled`) is split over devices; None when it runs
    on one device and no mesh was asked for."""
    inputs = _leaves(compiled.input_shardings[0])
    outputs = _leaves(compiled.output_shardings)
    devices = max((len(s.device_set) for s in inputs + outputs if s is not None), default=1)
    if mesh is None and devices <= 1:
        return None
    infos = jax.tree_util.tree_leaves(compiled.args_info[0])
    args = [
        ShardedArg(name, *_shard(s, info.shape, info.dtype))
        for name, s, info in zip(arg_names, inputs, infos, strict=False)
    ]
    out_infos = jax.tree_util.tree_flatten_with_path(compiled.out_info)[0]
    outs = [
        ShardedOutput(i, *_shard(s, o.shape, o.dtype), jax.tree_util.keystr(path))
        for i, (s, (path, o)) in enumerate(zip(outputs, out_infos, strict=False))
    ]
    return ShardingSection(
        mesh=mesh.sizes if mesh is not None else _mesh_of(inputs + outputs),
        args=args,
        outputs=outs,
        collectives=collectives(graph, fusion_map, user_file) if graph is not None else [],
        devices=devices,
    )


def _leaves(tree: Any) -> list[Any]:
    return jax.tree_util.tree_leaves(tree, is_leaf=lambda s: s is None)


def _shard(sharding: Any, shape: tuple[int, ...], dtype: Any) -> tuple[Any, ...]:
    """(spec, per-device shape, bytes per device, shape, dtype) of one leaf."""
    shape = tuple(shape)
    local = tuple(sharding.shard_shape(shape)) if sharding is not None else shape
    itemsize = np.dtype(dtype).itemsize
    return (
        describe(sharding),
        list(local),
        math.prod(local) * itemsize,
        list(shape),
        _short_dtype(np.dtype(dtype)),
    )


def describe(sharding: Any) -> str:
    """`P('data', None)` for a named sharding, `replicated` when every device holds it
    all, `single device` on one device, else JAX's own text."""
    if sharding is None:
        return "unused (pruned)"
    if len(sharding.device_set) == 1:
        return "single device"
    if isinstance(sharding, jax.sharding.NamedSharding):
        spec = sharding.spec
        if all(entry is None for entry in spec):
            return "replicated"
        return "P(" + ", ".join(repr(entry) for entry in spec) + ")"
    if sharding.is_fully_replicated:
        return "replicated"
    return str(sharding)


def _mesh_of(shardings: list[Any]) -> dict[str, int]:
    """{axis: size} of the first named sharding's mesh (the function's own mesh)."""
    for s in shardings:
        if isinstance(s, jax.sharding.NamedSharding):
            return {str(k): int(v) for k, v in s.mesh.shape.items()}
    return {}


def _short_dtype(dtype: np.dtype) -> str:
    from viz.spec.text import DTYPES

    return next((name for name, d in DTYPES.items() if d == dtype), str(dtype))
