"""Dot product plus one: the smallest interesting program for jax.jit.

jax.jit(f) works in stages you can look at one by one:

    traced = jax.jit(f).trace(x, y)   # Python runs once on abstract values -> jaxpr
    lowered = traced.lower()          # jaxpr -> StableHLO (the portable IR)
    compiled = lowered.compile()      # XLA optimizes it into a program for the device

Only the shapes and dtypes of x and y matter here, never their values.
"""

TITLE = "Dot product plus one"
DESCRIPTION = "The walk-through: trace to a jaxpr, lower to StableHLO, compile with XLA."
FUNCTION = "f"
ARGS = "f32[256,512], f32[512,128]"
STATIC = []
ORDER = 1

import jax
import jax.numpy as jnp


def f(x, y):
    # Two primitives in the jaxpr: dot_general and add.
    # In the optimized HLO, XLA may fuse the "+ 1.0" into the matmul's output.
    return jnp.dot(x, y) + 1.0


if __name__ == "__main__":
    x = jnp.ones((256, 512), jnp.float32)
    y = jnp.ones((512, 128), jnp.float32)
    print(jax.jit(f).trace(x, y).jaxpr)
    print(jax.jit(f).lower(x, y).as_text()[:400])
