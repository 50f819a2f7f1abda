"""A training loop that recompiles more than it should: try it with
`python -m viz record -- tests/programs/train_loop.py` and open the Recordings page.

Ragged batches (a new shape each), a learning rate that is a Python float and then an
array (a weak-type change), a static k with three values, a bf16 batch (a dtype), and a
jit built inside a loop (a new function object each time).
"""

import sys
from functools import partial

import jax
import jax.numpy as jnp
from model import forward, init_params


def loss(params, x, y):
    return jnp.mean((forward(params, x) - y) ** 2)


@jax.jit
def train_step(params, x, y, lr):
    grads = jax.grad(loss)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)


@jax.jit
def normalize(x):
    return (x - x.mean(0)) / (x.std(0) + 1e-6)


@jax.jit
def evaluate(params, x, y):
    return loss(params.copy(), x.astype(jnp.float32), y)


@partial(jax.jit, static_argnames="k")
def top_k_error(params, x, y, k):
    errors = jnp.abs(forward(params, x) - y)[:, 0]
    return jax.lax.top_k(errors, k)[0].mean()


def batches(epochs):
    key = jax.random.key(1)
    for epoch in range(epochs):
        size = (32, 48, 64, 32, 80, 96)[epoch % 6]
        key, kx = jax.random.split(key)
        x = jax.random.normal(kx, (size, 16))
        yield epoch, x, x.sum(1, keepdims=True)


def main(epochs):
    params = init_params(jax.random.key(0), [16, 32, 1])
    for epoch, x, y in batches(epochs):
        lr = 0.05 if epoch < 3 else jnp.float32(0.05)
        params = train_step(params, normalize(x), y, lr)
    for k in (1, 3, 5):
        top_k_error(params, x, y, k)
    evaluate(params, x, y)
    evaluate(params, x[:33], y[:33])
    evaluate(params, x.astype(jnp.bfloat16), y)
    for _ in range(4):
        norms = jax.jit(lambda p: {k: jnp.linalg.norm(v) for k, v in p.items()})(params)
    print(
        f"trained {epochs} epochs, loss {float(evaluate(params, x, y)):.4f}, "
        f"|w0| {float(norms['w0']):.3f}"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
