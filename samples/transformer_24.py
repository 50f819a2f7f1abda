"""A 24-layer transformer forward pass: a big program from a small Python loop.

The layer loop is ordinary Python, so tracing unrolls it: 24 copies of the
block end up in the jaxpr, StableHLO and compiled HLO, and compile time grows
accordingly (a few seconds on CPU). Each layer runs inside
jax.named_scope(f"layer{i}") with nested "attention" and "mlp" scopes, so ops
carry names like "layer7/attention/dot_general" and the graph views can fold
each layer into one box.

(To keep the program small you would stack the layer params and run the block
under lax.scan: one copy of the body, looped 24 times.)

Params are made with numpy's fast generator and moved to JAX with jnp.asarray,
so importing this file stays quick despite ~19M parameters.
"""

TITLE = "24-layer transformer"
DESCRIPTION = "24 unrolled pre-LN blocks under nested jax.named_scope: a big, structured program."
FUNCTION = "forward"
ARGS = "params, f32[2,128,256]"
STATIC = []
ORDER = 14

import jax
import jax.numpy as jnp
import numpy as np

N_LAYERS = 24
D_MODEL = 256
N_HEADS = 4
D_MLP = 1024


def init_params(seed=0, n_layers=N_LAYERS, d_model=D_MODEL, d_mlp=D_MLP):
    rng = np.random.default_rng(seed)

    def dense(n_in, n_out):
        w = rng.standard_normal((n_in, n_out), dtype=np.float32) / np.float32(np.sqrt(n_in))
        return jnp.asarray(w)

    def const(n, value):
        return jnp.asarray(np.full(n, value, np.float32))

    def norm():
        return {"scale": const(d_model, 1.0), "bias": const(d_model, 0.0)}

    layers = []
    for _ in range(n_layers):
        layers.append(
            {
                "ln1": norm(),
                "w_qkv": dense(d_model, 3 * d_model),
                "w_out": dense(d_model, d_model),
                "ln2": norm(),
                "w_up": dense(d_model, d_mlp),
                "b_up": const(d_mlp, 0.0),
                "w_down": dense(d_mlp, d_model),
                "b_down": const(d_model, 0.0),
            }
        )
    return {"layers": layers, "ln_final": norm()}


params = init_params()


def layernorm(p, x, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * p["scale"] + p["bias"]


def attention(p, x, n_heads=N_HEADS):
    batch, seq, d_model = x.shape
    head_dim = d_model // n_heads
    q, k, v = jnp.split(x @ p["w_qkv"], 3, axis=-1)
    q, k, v = (t.reshape(batch, seq, n_heads, head_dim).transpose(0, 2, 1, 3) for t in (q, k, v))
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(jnp.float32(head_dim))
    causal = jnp.tril(jnp.ones((seq, seq), dtype=bool))
    scores = jnp.where(causal, scores, -jnp.inf)
    out = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)
    return out.transpose(0, 2, 1, 3).reshape(batch, seq, d_model) @ p["w_out"]


def mlp(p, x):
    return jax.nn.gelu(x @ p["w_up"] + p["b_up"]) @ p["w_down"] + p["b_down"]


def forward(params, x):
    # x: [batch, seq, d_model]
    for i, layer in enumerate(params["layers"]):  # unrolled at trace time
        with jax.named_scope(f"layer{i}"):
            with jax.named_scope("attention"):
                x = x + attention(layer, layernorm(layer["ln1"], x))
            with jax.named_scope("mlp"):
                x = x + mlp(layer, layernorm(layer["ln2"], x))
    return layernorm(params["ln_final"], x)


if __name__ == "__main__":
    print(jax.jit(forward)(params, jnp.ones((2, 128, 256))).shape)
