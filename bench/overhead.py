"""How much does jitscope add on top of jax.jit's own work?

For a 12-layer transformer forward and a 24-op elementwise chain, prints two ratios,
each the minimum over interleaved rounds (default 7), every measurement on a fresh
function object with JAX's caches cleared:

- overhead: `analyze(fn, spec, runs=0)` (trace, lower, compile, and reading all three
  IRs into graphs, counts, cost and memory) / bare `jit(f).trace(...).lower().compile()`;
- compile: the `compile_s` the report states / the bare `Lowered.compile()` time.

Targets on a quiet machine: overhead <= 1.15, compile <= 1.05.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax

from viz import analyze
from viz.source import find_function, load_module
from viz.spec import abstract_args, parse_spec

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
CHAIN = """
import jax.numpy as jnp

def chain(x):
    for _ in range(8):
        x = jnp.tanh(x) * 1.5 + 0.25
    return x
"""


def transformer() -> tuple[Callable, dict]:
    """A new module (so a new function object) with 12 layers of params."""
    code = (SAMPLES / "transformer_24.py").read_text()
    module = load_module(code)
    module.params = module.init_params(n_layers=12)
    return find_function(module, code, "forward"), vars(module)


def chain() -> tuple[Callable, dict]:
    module = load_module(CHAIN)
    return find_function(module, CHAIN, "chain"), vars(module)


CASES = {
    "12-layer transformer": (transformer, "params, f32[2,128,256]"),
    "24-op elementwise chain": (chain, "f32[512,512]"),
}


def bare(make: Callable, spec: str) -> tuple[float, float]:
    """(total, compile) seconds of jax.jit's own trace → lower → compile."""
    fn, namespace = make()
    args = abstract_args(parse_spec(spec, namespace))
    jax.clear_caches()
    start = time.perf_counter()
    lowered = jax.jit(fn).trace(*args).lower()
    compile_start = time.perf_counter()
    lowered.compile()
    end = time.perf_counter()
    return end - start, end - compile_start


def with_jitscope(make: Callable, spec: str) -> tuple[float, float]:
    """(total, reported compile_s) of analyze(runs=0)."""
    fn, namespace = make()
    jax.clear_caches()
    start = time.perf_counter()
    report = analyze(fn, spec, runs=0, namespace=namespace)
    elapsed = time.perf_counter() - start
    assert report.ok, report.error
    return elapsed, report.timings.compile_s


def main(rounds: int = 7) -> None:
    for name, (make, spec) in CASES.items():
        bare(make, spec), with_jitscope(make, spec)  # warm up imports and one-time setup
        pairs = [(bare(make, spec), with_jitscope(make, spec)) for _ in range(rounds)]
        overhead = min(ours[0] / base[0] for base, ours in pairs)
        compile_ratio = min(ours[1] / base[1] for base, ours in pairs)
        base = min(p[0][0] for p in pairs)
        print(f"{name}: {rounds} interleaved rounds, min ratios (bare total {base:.3f} s)")
        verdict = "OK" if overhead <= 1.15 else "MISSED"
        print(
            f"  overhead  analyze(runs=0) / bare trace+lower+compile: {overhead:.3f}"
            f"   target <= 1.15  {verdict}"
        )
        verdict = "OK" if compile_ratio <= 1.05 else "MISSED"
        print(
            f"  compile   reported compile_s / bare compile:          {compile_ratio:.3f}"
            f"   target <= 1.05  {verdict}"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
