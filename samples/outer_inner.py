"""Where to put jax.jit: around the whole computation, or around each piece?

g calls f six times in a chain. Jitting only f compiles one small program and
dispatches it six times from Python, with every intermediate going back through
the host-side dispatcher. Jitting g compiles one program that contains all six
calls: XLA sees across the call boundaries, fuses neighbouring ops, and there is
a single dispatch. (If f is itself jitted, inside jitted g it shows up as a
nested `jit` equation in the jaxpr and a `func.call` in StableHLO; XLA inlines
it when compiling.)
"""

TITLE = "Outer vs inner jit"
DESCRIPTION = "jit the outer g (one program) or the inner f (six dispatches)? Compare the two."
FUNCTION = "g"
ARGS = "f32[128,128]"
STATIC = []
ORDER = 10
INNER = "f"

import jax
import jax.numpy as jnp


def f(x):
    # A small piece of work: matmul, scale, bias, nonlinearity, residual mix.
    # (No closed-over weight array: a captured non-uniform array would be baked
    # into the program text as a large constant.)
    y = jnp.tanh(x @ x.T * (1.0 / x.shape[0]) + 0.1)
    return y * 0.9 + x * 0.1


def g(x):
    # Six calls in a chain, with a little glue between them. Under jit(g) the
    # glue fuses into f's kernels; with jit on f alone, every glue op is its
    # own eager dispatch.
    for _ in range(6):
        x = jax.nn.relu(f(x)) * 0.5 + x
    return x


if __name__ == "__main__":
    x = jnp.ones((128, 128))
    print(jax.jit(g)(x).sum(), jax.jit(f)(x).sum())
