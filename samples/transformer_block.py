"""One pre-LayerNorm transformer block in plain JAX.

x + attention(layernorm(x)), then x + mlp(layernorm(x)). jax.named_scope
labels the parts: the names travel into the jaxpr's source info and the HLO op
metadata (op_name), so you can find "attention" and "mlp" in every IR.
"""

TITLE = "Transformer block"
DESCRIPTION = "Pre-LN block: layernorm, attention, MLP and residuals, with jax.named_scope."
FUNCTION = "block"
ARGS = "params, f32[2,128,256]"
STATIC = []
ORDER = 9

import jax
import jax.numpy as jnp
import numpy as np

D_MODEL = 256
N_HEADS = 4
D_MLP = 1024


def init_params(seed=0, d_model=D_MODEL, d_mlp=D_MLP):
    # Fixed seed, numpy generator: fast to import (see the MLP sample for why).
    rng = np.random.default_rng(seed)

    def dense(n_in, n_out):
        w = rng.standard_normal((n_in, n_out), dtype=np.float32) / np.float32(np.sqrt(n_in))
        return jnp.asarray(w)

    def const(n, value):
        return jnp.asarray(np.full(n, value, np.float32))

    return {
        "ln1": {"scale": const(d_model, 1.0), "bias": const(d_model, 0.0)},
        "attn": {"w_qkv": dense(d_model, 3 * d_model), "w_out": dense(d_model, d_model)},
        "ln2": {"scale": const(d_model, 1.0), "bias": const(d_model, 0.0)},
        "mlp": {
            "w_up": dense(d_model, d_mlp),
            "b_up": const(d_mlp, 0.0),
            "w_down": dense(d_mlp, d_model),
            "b_down": const(d_model, 0.0),
        },
    }


params = init_params()


def layernorm(p, x, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * p["scale"] + p["bias"]


def multi_head_attention(p, x, n_heads=N_HEADS):
    batch, seq, d_model = x.shape
    head_dim = d_model // n_heads
    qkv = x @ p["w_qkv"]  # [batch, seq, 3 * d_model]
    q, k, v = jnp.split(qkv, 3, axis=-1)
    # [batch, seq, d_model] -> [batch, heads, seq, head_dim]
    q, k, v = (t.reshape(batch, seq, n_heads, head_dim).transpose(0, 2, 1, 3) for t in (q, k, v))
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(jnp.float32(head_dim))
    causal = jnp.tril(jnp.ones((seq, seq), dtype=bool))
    scores = jnp.where(causal, scores, -jnp.inf)
    out = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)
    out = out.transpose(0, 2, 1, 3).reshape(batch, seq, d_model)
    return out @ p["w_out"]


def mlp(p, x):
    h = jax.nn.gelu(x @ p["w_up"] + p["b_up"])
    return h @ p["w_down"] + p["b_down"]


def block(params, x):
    with jax.named_scope("attention"):
        x = x + multi_head_attention(params["attn"], layernorm(params["ln1"], x))
    with jax.named_scope("mlp"):
        x = x + mlp(params["mlp"], layernorm(params["ln2"], x))
    return x


if __name__ == "__main__":
    print(jax.jit(block)(params, jnp.ones((2, 128, 256))).shape)
