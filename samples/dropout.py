"""Randomness under jit: pass the PRNG key in as an argument.

JAX has no hidden global random state. A key is an ordinary (traced) input, so
the same compiled program gives fresh randomness whenever you pass a new key
(split keys with jax.random.split). Closing over a fixed key would bake the
mask into the program as a constant.

rate is a Python float but not static: it becomes a weakly-typed f32[] input,
so changing it does not recompile.
"""

TITLE = "Dropout with a PRNG key"
DESCRIPTION = "Randomness under jit: pass the PRNG key as an argument; the mask is built on device."
FUNCTION = "dropout"
ARGS = "key, f32[128,256], 0.1"
STATIC = []
ORDER = 5

import jax
import jax.numpy as jnp


def dropout(key, x, rate):
    keep = 1.0 - rate
    # In the jaxpr this is a nested jit (_bernoulli) around a random_bits equation.
    mask = jax.random.bernoulli(key, keep, x.shape)
    # Scale kept units so the expected value is unchanged.
    return jnp.where(mask, x / keep, 0.0)


if __name__ == "__main__":
    key = jax.random.key(0)
    x = jnp.ones((128, 256))
    print(jax.jit(dropout)(key, x, 0.1).mean())
