"""Value-dependent output shapes cannot be compiled.

jnp.nonzero(x) returns as many indices as x has nonzero entries: the output
shape depends on the *values* of x, which jit does not know at trace time. It
fails with a ConcretizationTypeError.

The fix: promise a fixed size and a fill value, e.g.

    jnp.nonzero(x, size=x.shape[0], fill_value=-1)

so the output always has x.shape[0] entries, padded with -1.
"""

TITLE = "jnp.nonzero without size= (fails)"
DESCRIPTION = "An output shape that depends on the data cannot be traced: give nonzero a size=."
FUNCTION = "nonzero_indices"
ARGS = "f32[100]"
STATIC = []
ORDER = 15
EXPECT_ERROR = "value_dependent_shape"

import jax
import jax.numpy as jnp


def nonzero_indices(x):
    (idx,) = jnp.nonzero(x)  # shape unknown until x's values are known
    return idx


def nonzero_indices_fixed(x):
    (idx,) = jnp.nonzero(x, size=x.shape[0], fill_value=-1)  # always x.shape[0] long
    return idx


if __name__ == "__main__":
    x = jnp.array([0.0, 1.0, 0.0, 2.0])
    print(jax.jit(nonzero_indices_fixed)(x))
