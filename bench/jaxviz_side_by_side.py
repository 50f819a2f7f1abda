"""jitscope against jaxviz's global view on a flax (linen) 24-layer transformer (issue #60).

In one process, interleaved rounds (the order turns each round), JAX's caches cleared
before each:

- bare: `jax.jit(forward).trace(params, x).lower().compile()`;
- jitscope: `viz.analyze(forward, "params, f32[2,128,256]", runs=0)` in this (a
  caller's) process: until it returned, and with `to_dict()`, every part made;
- jaxviz: `jaxviz.trace_model(lambda x: model.apply(params, x), x, return_html=True)`,
  its default global view (`jax.make_jaxpr`, its graph, its HTML), which compiles
  nothing.

Printed: each one's median and range in seconds, and against the bare trace + lower +
compile of the same round (median and range of the ratios). jaxviz is no dependency of
jitscope: where it is not importable, the bench says so and times the rest
(`pip download jaxviz==0.1.4`, unzip the wheel and put it on PYTHONPATH: it needs only
jax and IPython).

    python bench/jaxviz_side_by_side.py [--rounds 5] [--layers 24]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

import flax.linen as nn
import jax
import jax.numpy as jnp

import viz

SPEC = "params, f32[2,128,256]"


class Block(nn.Module):
    heads: int = 4

    @nn.compact
    def __call__(self, x):
        y = nn.SelfAttention(num_heads=self.heads)(nn.LayerNorm()(x))
        x = x + y
        y = nn.Dense(4 * x.shape[-1])(nn.LayerNorm()(x))
        return x + nn.Dense(x.shape[-1])(nn.gelu(y))


class Transformer(nn.Module):
    layers: int = 24

    @nn.compact
    def __call__(self, x):
        for _ in range(self.layers):
            x = Block()(x)
        return nn.LayerNorm()(x)


def model_of(layers: int) -> tuple[Transformer, dict, jax.Array]:
    model = Transformer(layers)
    x = jnp.ones((2, 128, 256), jnp.float32)
    return model, model.init(jax.random.key(0), x), x


def bare(model: Transformer, params: dict, x: jax.Array) -> dict[str, float]:
    def forward(params, x):
        return model.apply(params, x)

    start = time.perf_counter()
    jax.jit(forward).trace(params, x).lower().compile()
    return {"bare": time.perf_counter() - start}


def jitscope(model: Transformer, params: dict, x: jax.Array) -> dict[str, float]:
    def forward(params, x):
        return model.apply(params, x)

    start = time.perf_counter()
    report = viz.analyze(forward, SPEC, runs=0, namespace={"params": params})
    returned = time.perf_counter()
    report.to_dict()
    end = time.perf_counter()
    assert report.ok, report.error
    return {"jitscope: analyze() returned": returned - start, "jitscope: to_dict()": end - start}


def with_jaxviz(model: Transformer, params: dict, x: jax.Array) -> dict[str, float]:
    import jaxviz

    start = time.perf_counter()
    jaxviz.trace_model(lambda x: model.apply(params, x), x, return_html=True)
    return {"jaxviz: global view": time.perf_counter() - start}


def jaxviz_version() -> str | None:
    try:
        import jaxviz  # noqa: F401
    except ImportError:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jaxviz")
    except PackageNotFoundError:  # on PYTHONPATH, not installed
        return "(from PYTHONPATH)"


def spread(values: list[float], unit: str) -> str:
    ordered = sorted(values)
    return f"{statistics.median(ordered):.3f}{unit} ({ordered[0]:.3f}-{ordered[-1]:.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--layers", type=int, default=24)
    args = parser.parse_args()
    found_jaxviz = jaxviz_version()
    measures: list[Callable] = [bare, jitscope] + ([with_jaxviz] if found_jaxviz else [])
    model, params, x = model_of(args.layers)
    for measure in measures:  # warm up imports and one-time setup
        measure(model, params, x)
    times: dict[str, list[float]] = {}
    for i in range(args.rounds):
        for measure in measures[i % len(measures) :] + measures[: i % len(measures)]:
            jax.clear_caches()
            gc.collect()
            for name, seconds in measure(model, params, x).items():
                times.setdefault(name, []).append(seconds)
    print(f"flax linen transformer, {args.layers} layers, f32[2,128,256]: {args.rounds} rounds")
    print(f"jax {jax.__version__}; jaxviz {found_jaxviz or 'not importable: not timed'}")
    base = times["bare"]
    for name, values in times.items():
        ratios = [v / b for v, b in zip(values, base, strict=True)]
        print(f"  {name:<30} {spread(values, ' s')}   / bare: {spread(ratios, 'x')}")


if __name__ == "__main__":
    main()
