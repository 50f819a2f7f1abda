"""Variable-length data under jit: pad to a fixed shape and carry a mask.

jit compiles for one shape. Sequences of different lengths are padded to a
common length (64 here) and a boolean mask marks the real tokens. Reductions
then use the mask instead of slicing, so every batch has the same shape and
reuses the same compiled program.
"""

TITLE = "Padded sequences with a mask"
DESCRIPTION = "Pad to a fixed length and mask: a masked mean, one compile for all lengths."
FUNCTION = "masked_mean"
ARGS = "f32[8,64,32], bool[8,64]"
STATIC = []
ORDER = 6

import jax
import jax.numpy as jnp


def masked_mean(x, mask):
    # x: [batch, seq, features]; mask: [batch, seq], True for real tokens.
    m = mask[..., None].astype(x.dtype)
    total = jnp.sum(x * m, axis=1)
    # Guard against all-padding rows (count 0) without Python control flow.
    count = jnp.maximum(jnp.sum(m, axis=1), 1.0)
    return total / count


if __name__ == "__main__":
    lengths = jnp.array([64, 10, 3, 50, 64, 1, 0, 32])
    mask = jnp.arange(64)[None, :] < lengths[:, None]
    x = jnp.ones((8, 64, 32))
    print(jax.jit(masked_mean)(x, mask)[:, 0])
