"""Recompiles a user can avoid, for the recorder's advice (tests/test_record_advice.py):
a learning rate passed as a Python float, then as an f32 array (a weak-type change
alone); jits made anew on each call, of a lambda that reads its maker's locals and of
one that reads none; a lambda under `lax.fori_loop` that reads its maker's locals."""

import jax
import jax.numpy as jnp
from jax import lax


@jax.jit
def step(x, lr):
    return x - lr * x


def project(w, xs):
    return [jax.jit(lambda v: v @ w)(x) for x in xs]  # reads `w`, a local of project


def double_all(xs):
    return [jax.jit(lambda v: v * 2.0)(x) for x in xs]  # reads no locals


def accumulate(x0, rate):
    return lax.fori_loop(0, 5, lambda i, x: x + i * rate, x0)  # reads `rate`


x = jnp.ones(4)
for lr in (0.1, jnp.float32(0.1), 0.1):  # the third call: the first's, cached
    x = step(x, lr)
project(jnp.eye(4), [x, x])
double_all([x, x])
for _ in range(2):
    accumulate(jnp.float32(0), 2.0)
print(float(x.sum()))
