"""Static arguments: when a value decides a *shape*, it must be known at trace time.

jnp.arange(n) builds an array of length n, so n has to be a concrete Python int
while tracing. Marking n static (static_argnames=["n"]) makes jit treat it as a
compile-time constant: it becomes part of the cache key, and every new value of
n triggers a fresh trace and compile.

Without static_argnames, n would arrive as a tracer and jnp.arange(n) fails with
a ConcretizationTypeError ("shape must be concrete"), because the output shape
would depend on a runtime value.
"""

TITLE = "Static argument for a shape"
DESCRIPTION = "jnp.arange(n) needs a concrete n: mark it static, and each new n compiles again."
FUNCTION = "f"
ARGS = "f32[16], 16"
STATIC = ["n"]
ORDER = 2

import jax
import jax.numpy as jnp


def f(x, n):
    # n is a plain Python int here (static), so arange's length is known.
    return x + jnp.arange(n)


if __name__ == "__main__":
    g = jax.jit(f, static_argnames=["n"])
    print(g(jnp.zeros(16), 16))
