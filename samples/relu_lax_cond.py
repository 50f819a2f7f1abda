"""The fix for Python control flow: lax.cond (or jnp.where).

lax.cond(pred, true_fun, false_fun, operand) traces *both* branches and puts a
`cond` primitive into the jaxpr; the choice happens at run time on the device.

For an elementwise ReLU, jnp.where(x > 0, x, 0.0) (or jnp.maximum(x, 0.0)) is
simpler and works on whole arrays: lax.cond needs a scalar predicate.
"""

TITLE = "ReLU with lax.cond"
DESCRIPTION = "Replace a Python `if` on a traced value with lax.cond: both branches are compiled."
FUNCTION = "relu"
ARGS = "f32[]"
STATIC = []
ORDER = 4

import jax
import jax.numpy as jnp
from jax import lax


def relu(x):
    # Both branches take the same operand and return the same shape/dtype.
    return lax.cond(x > 0, lambda v: v, lambda v: jnp.zeros_like(v), x)


def relu_where(x):
    # The array-friendly alternative: select elementwise, no branching at all.
    return jnp.where(x > 0, x, 0.0)


if __name__ == "__main__":
    print(jax.jit(relu)(jnp.float32(-3.0)), jax.jit(relu_where)(jnp.arange(-2.0, 3.0)))
