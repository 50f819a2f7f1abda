"""A user's program for the recorder's tests: a library (fakelib, installed in
site-packages/) builds a jit on each run, and the user's lambdas run under lax loops."""

import fakelib
import jax.numpy as jnp
from jax import lax


def step(state, data):
    return state + jnp.sum(data)


def accumulate(x0):
    return lax.fori_loop(0, 10, lambda i, x: x + i * 2.0, x0)


small = jnp.ones((200, 3))
large = jnp.ones((500, 3))
fakelib.run(step, 0.0, small)  # first run: compiles
fakelib.run(step, 0.0, large)  # new data in the closure: must compile
fakelib.run(step, 0.0, small)  # the first run's body and data: a new wrapper only
accumulate(jnp.float32(0))  # the lambda's first compile
accumulate(jnp.zeros(3))  # new data: f32[] → f32[3]
accumulate(jnp.float32(1))  # a new lambda object, the first call's inputs
print(float(lax.while_loop(lambda c: c < 5, lambda c: c + 1, 0)))
