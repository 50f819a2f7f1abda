"""A long chain of elementwise ops becomes one fused loop.

Eagerly, each of the 24 ops below is its own kernel that reads and writes a
full 512x512 array. Under jit, XLA's fusion pass merges the whole chain into a
single loop fusion: one read of x, one write of the result, and the
intermediates live only in registers.
"""

TITLE = "Elementwise chain (fusion)"
DESCRIPTION = "24 elementwise ops: 24 jaxpr equations, but a single fusion after compiling."
FUNCTION = "chain"
ARGS = "f32[512,512]"
STATIC = []
ORDER = 12

import jax
import jax.numpy as jnp


def chain(x):
    # Exactly 24 elementwise ops, each applied once to the running value.
    y = jnp.sin(x)  # 1
    y = y * 2.0  # 2
    y = jnp.cos(y)  # 3
    y = y + 1.0  # 4
    y = jnp.tanh(y)  # 5
    y = jnp.exp(y)  # 6
    y = y - 0.5  # 7
    y = jnp.abs(y)  # 8
    y = jnp.sqrt(y)  # 9
    y = y / 3.0  # 10
    y = jnp.log1p(y)  # 11
    y = -y  # 12
    y = jnp.maximum(y, -1.0)  # 13
    y = y * y  # 14
    y = jnp.sin(y)  # 15
    y = y + 0.25  # 16
    y = jnp.cos(y)  # 17
    y = jnp.minimum(y, 0.9)  # 18
    y = jnp.tanh(y)  # 19
    y = y * 1.5  # 20
    y = jnp.exp(y)  # 21
    y = y - 1.0  # 22
    y = jax.nn.sigmoid(y)  # 23
    y = y + 0.1  # 24
    return y


if __name__ == "__main__":
    x = jnp.ones((512, 512))
    print(jax.jit(chain)(x).mean())
    print(len(jax.make_jaxpr(chain)(x).eqns))
