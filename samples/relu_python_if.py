"""Python control flow on a traced value fails under jit.

While tracing, x is an abstract tracer: jit knows its shape and dtype, not its
value. `if x > 0:` asks Python for a concrete True/False, so tracing stops with
a TracerBoolConversionError (a ConcretizationTypeError).

Fixes: jnp.where(x > 0, x, 0.0) for elementwise choices, lax.cond for choosing
between two computations (see the "ReLU with lax.cond" sample), or make the
argument static if it really is a configuration value.
"""

TITLE = "ReLU with a Python if (fails)"
DESCRIPTION = "A Python `if` on a traced value can't be decided while tracing: jit raises."
FUNCTION = "relu"
ARGS = "f32[]"
STATIC = []
ORDER = 3
EXPECT_ERROR = "control_flow"

import jax
import jax.numpy as jnp


def relu(x):
    # This works eagerly (x has a value) but not under jax.jit (x is a tracer).
    if x > 0:
        return x
    return jnp.zeros_like(x)


if __name__ == "__main__":
    print(relu(jnp.float32(2.0)))  # fine: eager
    try:
        jax.jit(relu)(jnp.float32(2.0))
    except jax.errors.ConcretizationTypeError as e:
        print(type(e).__name__)
