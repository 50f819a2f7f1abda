"""The jit cache key of concrete arguments, as `viz.cache.signature` describes it.

Shared by the cache lab's session (values it made) and the recorder (values a user's
program passed): per leaf, shape, dtype, weak type, Python-scalar-ness, sharding and
committed device; per static argument, its repr.
"""

from __future__ import annotations

from typing import Any

import jax
from jax.sharding import NamedSharding

from viz.cache.signature import ArgSig, LeafSig, Signature
from viz.spec import dtype_name


def spec_text(spec: Any) -> str:
    """A PartitionSpec as jax >= 0.10 prints it, `P('data',)`, on every jax (0.8 and
    0.9 print `PartitionSpec('data',)`)."""
    text = str(spec)
    return "P(" + text.removeprefix("PartitionSpec(") if text.startswith("PartitionSpec(") else text


def _sharding_text(x: Any) -> tuple[str, str]:
    """(sharding, device) of a leaf as the cache sees them."""
    sharding = getattr(x, "sharding", None)
    if isinstance(sharding, NamedSharding):
        axes = ",".join(f"{k}={v}" for k, v in sharding.mesh.shape.items())
        return f"{spec_text(sharding.spec)} over mesh({axes})", "default"
    if getattr(x, "committed", False) and sharding is not None:
        (device,) = sharding.device_set
        return "default", f"{device.platform}:{device.id}"
    return "default", "default"


def leaf_signature(path: str, x: Any) -> LeafSig:
    python_scalar = isinstance(x, bool | int | float | complex)
    aval = jax.typeof(x)
    sharding, device = _sharding_text(x) if isinstance(x, jax.Array) else ("default", "default")
    return LeafSig(
        path,
        tuple(aval.shape),
        dtype_name(aval.dtype),
        bool(aval.weak_type),
        python_scalar,
        sharding,
        device,
    )


def call_signature(
    names: list[str], values: list[Any], static: tuple[int, ...], x64: bool
) -> Signature:
    """The call as the jit cache keys it: each argument, and the x64 setting."""
    args = []
    for i, (name, value) in enumerate(zip(names, values, strict=True)):
        if i in static:
            args.append(ArgSig(name, True, value=repr(value)))
            continue
        leaves, tree = jax.tree_util.tree_flatten_with_path(value)
        sigs = tuple(
            leaf_signature(name + jax.tree_util.keystr(path), leaf) for path, leaf in leaves
        )
        args.append(ArgSig(name, False, tree=_tree_text(tree), leaves=sigs))
    return Signature(tuple(args), (("jax_enable_x64", "on" if x64 else "off"),))


def _tree_text(tree: Any) -> str:
    text = str(tree)
    return text.removeprefix("PyTreeDef(").removesuffix(")")
