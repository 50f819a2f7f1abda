"""A multilayer perceptron whose parameters are a pytree.

params is a list of {"w", "b"} dicts. jit flattens the pytree into its leaves:
each weight and bias becomes a separate input of the compiled program, and the
Python loop over layers is unrolled into a straight line of dot + add + relu.
"""

TITLE = "MLP with a params pytree"
DESCRIPTION = "784→512→256→10: params are a pytree of arrays; the layer loop unrolls when traced."
FUNCTION = "mlp"
ARGS = "params, f32[32,784]"
STATIC = []
ORDER = 8

import jax
import jax.numpy as jnp
import numpy as np

SIZES = [784, 512, 256, 10]


def init_params(seed, sizes):
    # A fixed seed gives the same weights on every import. numpy's generator keeps
    # the import quick; jax.random.normal(key, shape) is the JAX-native equivalent,
    # but run eagerly it compiles a small kernel for every new shape.
    rng = np.random.default_rng(seed)
    params = []
    for i in range(len(sizes) - 1):
        n_in, n_out = sizes[i], sizes[i + 1]  # 784→512, then 512→256, then 256→10
        w = rng.standard_normal((n_in, n_out), dtype=np.float32) * np.float32(np.sqrt(2.0 / n_in))
        params.append({"w": jnp.asarray(w), "b": jnp.asarray(np.zeros(n_out, np.float32))})
    return params


params = init_params(0, SIZES)


def mlp(params, x):
    *hidden, last = params
    for layer in hidden:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    # Raw logits from the last layer.
    return x @ last["w"] + last["b"]


if __name__ == "__main__":
    print(jax.jit(mlp)(params, jnp.ones((32, 784))).shape)
