"""A small MLP, imported by train_loop.py as a sibling module."""

import itertools

import jax
import jax.numpy as jnp


def init_params(key, sizes):
    params = {}
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        key, sub = jax.random.split(key)
        params[f"w{i}"] = jax.random.normal(sub, (n_in, n_out)) / jnp.sqrt(n_in)
        params[f"b{i}"] = jnp.zeros(n_out)
    return params


def forward(params, x):
    layers = len(params) // 2
    for i in range(layers):
        x = x @ params[f"w{i}"] + params[f"b{i}"]
        if i < layers - 1:
            x = jax.nn.relu(x)
    return x
