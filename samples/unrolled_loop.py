"""Python loops unroll; lax.scan does not.

A Python for-loop runs at trace time, so `unrolled(x, n)` records n copies of
the step body: the jaxpr, the HLO and the compile time all grow with n.
`scanned(x, n)` traces the body once into a `scan` primitive (a while loop in
HLO): the program size stays constant however large n gets.

n is static in both: it sets the loop length, which must be known to compile.
"""

TITLE = "Unrolled loop vs lax.scan"
DESCRIPTION = "A Python loop unrolls into n copies of its body; lax.scan keeps one copy."
FUNCTION = "unrolled"
ARGS = "f32[64,64], 32"
STATIC = ["n"]
ORDER = 11
LOOP_STEP = "step"

import jax
import jax.numpy as jnp
from jax import lax

W = jnp.full((64, 64), 1.0 / 64, dtype=jnp.float32)


def step(x):
    # One small body: a matmul and a few elementwise ops, same shape in and out.
    return jnp.sin(x @ W) * 0.5 + x


def unrolled(x, n):
    for _ in range(n):  # runs while tracing: n copies of step in the jaxpr
        x = step(x)
    return x


def scanned(x, n):
    def body(carry, _):
        return step(carry), None

    x, _ = lax.scan(body, x, None, length=n)  # one copy of step, looped on device
    return x


if __name__ == "__main__":
    x = jnp.ones((64, 64))
    a = jax.jit(unrolled, static_argnames=["n"])(x, 32)
    b = jax.jit(scanned, static_argnames=["n"])(x, 32)
    print(jnp.allclose(a, b, atol=1e-5))
