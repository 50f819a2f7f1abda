"""One training step of a small CNN with Adam: the function people jit most.

train_step runs the forward pass, the loss, the backward pass (jax.value_and_grad)
and an Adam update of every parameter, all in one program. The model is under
jax.named_scope("CNN"), so JAX names the forward ops jvp(CNN)/... and the backward
ops transpose(jvp(CNN))/...; the graph views show those phases as boxes. Adam
updates each parameter with the same few ops (jax.tree.map over the params), so
the views fold the eight identical per-parameter chains into one group ×8.

The optimizer is written out (as optax.adam computes it) to keep the sample free of
dependencies; with flax and optax installed, the same step reads the same way.
"""

TITLE = "Training step: CNN + Adam"
DESCRIPTION = "Forward, loss, backward and an Adam update in one jit: phases and ×8 folded chains."
FUNCTION = "train_step"
ARGS = "params, opt_state, f32[32,28,28,1], i32[32]"
STATIC = []
ORDER = 16

import jax
import jax.numpy as jnp
import numpy as np

LEARNING_RATE, B1, B2, EPS = 1e-3, 0.9, 0.999, 1e-8


def init_params(seed=0):
    rng = np.random.default_rng(seed)

    def weights(*shape):
        fan_in = int(np.prod(shape[:-1]))
        w = rng.standard_normal(shape, dtype=np.float32) / np.float32(np.sqrt(fan_in))
        return jnp.asarray(w)

    def zeros(n):
        return jnp.asarray(np.zeros(n, np.float32))

    return {
        "conv1": {"w": weights(3, 3, 1, 16), "b": zeros(16)},
        "conv2": {"w": weights(3, 3, 16, 32), "b": zeros(32)},
        "dense1": {"w": weights(7 * 7 * 32, 128), "b": zeros(128)},
        "dense2": {"w": weights(128, 10), "b": zeros(10)},
    }


params = init_params()
opt_state = {
    "count": jnp.zeros((), jnp.int32),
    "mu": jax.tree.map(jnp.zeros_like, params),
    "nu": jax.tree.map(jnp.zeros_like, params),
}


LAYOUT = ("NHWC", "HWIO", "NHWC")  # images, kernels, outputs: channels last


def conv(p, x):
    y = jax.lax.conv_general_dilated(x, p["w"], (1, 1), "SAME", dimension_numbers=LAYOUT)
    return jax.nn.relu(y + p["b"])


def pool(x):
    return jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4


def cnn(params, x):
    with jax.named_scope("CNN"):
        x = pool(conv(params["conv1"], x))
        x = pool(conv(params["conv2"], x))
        x = x.reshape(x.shape[0], -1)
        x = jax.nn.relu(x @ params["dense1"]["w"] + params["dense1"]["b"])
        return x @ params["dense2"]["w"] + params["dense2"]["b"]


def loss_fn(params, x, y):
    logits = cnn(params, x)
    return -jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1).mean()


def adam(grads, state):
    count = state["count"] + 1
    mu = jax.tree.map(lambda m, g: B1 * m + (1 - B1) * g, state["mu"], grads)
    nu = jax.tree.map(lambda v, g: B2 * v + (1 - B2) * g * g, state["nu"], grads)
    mu_hat_scale = 1 / (1 - B1 ** count.astype(jnp.float32))
    nu_hat_scale = 1 / (1 - B2 ** count.astype(jnp.float32))
    updates = jax.tree.map(
        lambda m, v: -LEARNING_RATE * (m * mu_hat_scale) / (jnp.sqrt(v * nu_hat_scale) + EPS),
        mu,
        nu,
    )
    return updates, {"count": count, "mu": mu, "nu": nu}


def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = adam(grads, opt_state)
    params = jax.tree.map(lambda p, u: p + u, params, updates)
    return params, opt_state, loss


if __name__ == "__main__":
    x, y = jnp.ones((32, 28, 28, 1)), jnp.zeros(32, jnp.int32)
    print(jax.jit(train_step)(params, opt_state, x, y)[2])
