"""Sharding in Explore (issue #21): how a compiled program is split over a device mesh.

- `model`: the report's `sharding` section as plain data (no jax);
- `collectives`: the collectives XLA inserted, from the compiled graph model (no jax);
- `build`: the jax `Mesh` of a mesh text, on the analysis's devices (worker);
- `read`: the section, read from a compiled executable (worker).

The mesh text (`data=4, model=2`) and the spec suffix (`f32[64,128] @ P('data', None)`)
are the spec language's: `viz.spec.mesh` and `viz.spec.partition`. Importing this package
imports no jax.
"""

from viz.sharding.model import Collective, ShardedArg, ShardedOutput, ShardingSection

__all__ = ["Collective", "ShardedArg", "ShardedOutput", "ShardingSection"]
