"""Scaled dot-product attention, with an optional causal mask.

softmax(q @ k^T / sqrt(d)) @ v, written with jnp.einsum. `causal` is a Python
bool with a default, so it is fixed at trace time: the masked and unmasked
versions are different programs (pass it via static_argnames to switch).
"""

TITLE = "Scaled dot-product attention"
DESCRIPTION = "Two batched matmuls around a softmax: the dots, the reductions, what XLA fuses."
FUNCTION = "attention"
ARGS = "f32[4,128,64], f32[4,128,64], f32[4,128,64]"
STATIC = []
ORDER = 7

import jax
import jax.numpy as jnp


def attention(q, k, v, causal=True):
    # q, k, v: [batch, seq, head_dim]
    d = q.shape[-1]
    scores = jnp.einsum("bqd,bkd->bqk", q, k) / jnp.sqrt(jnp.float32(d))
    if causal:  # a Python bool, decided while tracing: no lax.cond needed
        seq = q.shape[1]
        allowed = jnp.tril(jnp.ones((seq, seq), dtype=bool))
        scores = jnp.where(allowed, scores, -jnp.inf)
    weights = jax.nn.softmax(scores, axis=-1)
    return jnp.einsum("bqk,bkd->bqd", weights, v)


if __name__ == "__main__":
    q = jnp.ones((4, 128, 64))
    print(jax.jit(attention)(q, q, q).shape)
