"""A model applied to a batch: every new batch size is a new compile.

predict(params, x) maps a batch of 128-feature rows to 10 scores. jit
specializes on x's shape, so batch sizes 32, 33, 34, ... each trigger a fresh
trace and compile. Padding batches up to a few fixed "bucket" sizes (say 32,
64, 128) bounds the number of compiles at the cost of some wasted rows.
"""

TITLE = "Batched model (shape bucketing)"
DESCRIPTION = "A small MLP over a batch: each new batch size recompiles, so pad into buckets."
FUNCTION = "predict"
ARGS = "params, f32[32,128]"
STATIC = []
ORDER = 13
BATCH_ARG = "x"

import jax
import jax.numpy as jnp
import numpy as np

_rng = np.random.default_rng(42)  # fixed seed: the same weights on every import
params = {
    "w1": jnp.asarray(_rng.standard_normal((128, 256), dtype=np.float32) / np.float32(128**0.5)),
    "b1": jnp.asarray(np.zeros(256, np.float32)),
    "w2": jnp.asarray(_rng.standard_normal((256, 10), dtype=np.float32) / np.float32(256**0.5)),
    "b2": jnp.asarray(np.zeros(10, np.float32)),
}


def predict(params, x):
    # x: [batch, 128]; rows are independent, so padding rows do not affect real ones.
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return jax.nn.log_softmax(h @ params["w2"] + params["b2"], axis=-1)


def pad_to_bucket(x, buckets=(32, 64, 128, 256)):
    """Pad the batch dimension up to the next bucket size (done outside jit)."""
    n = x.shape[0]
    size = next((b for b in buckets if b >= n), n)
    return jnp.pad(x, ((0, size - n), (0, 0))), n


if __name__ == "__main__":
    fast = jax.jit(predict)
    for n in (5, 20, 32, 40):
        xp, real = pad_to_bucket(jnp.ones((n, 128)))
        print(n, "->", xp.shape[0], fast(params, xp)[:real].shape)
