"""How much does jitscope add on top of jax.jit's own work?

Prints the ratio of `analyze(fn, spec, runs=0)` (trace, lower, compile, and reading
all three IRs into graphs, counts, cost and memory) to the bare
`jax.jit(fn).trace(...).lower().compile()` for a 12-layer transformer forward, in
the same process, every measurement on a fresh function with JAX's caches cleared.
Target: ratio <= 1.25.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere
from viz import analyze
from viz.source import find_function, load_module
from viz.spec import abstract_args, parse_spec

SPEC = "params, f32[2,128,256]"
SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "transformer_24.py"


def fresh_forward() -> tuple:
    """A new module (so a new function object) with 12 layers of params."""
    code = SAMPLE.read_text()
    module = load_module(code)
    module.params = module.init_params(n_layers=12)
    return find_function(module, code, "forward"), vars(module)


def bare() -> float:
    fn, namespace = fresh_forward()
    args = abstract_args(parse_spec(SPEC, namespace))
    jax.clear_caches()
    start = time.perf_counter()
    jax.jit(fn).trace(*args).lower().compile()
    return time.perf_counter() - start


def with_jitscope() -> float:
    fn, namespace = fresh_forward()
    jax.clear_caches()
    start = time.perf_counter()
    report = analyze(fn, SPEC, runs=0, namespace=namespace)
    elapsed = time.perf_counter() - start
    assert report.ok, report.error
    return elapsed


def main(rounds: int = 5) -> None:
    bare(), with_jitscope()  # warm up imports and JAX's one-time setup
    pairs = [(bare(), with_jitscope()) for _ in range(rounds)]
    base = statistics.median(p[0] for p in pairs)
    ours = statistics.median(p[1] for p in pairs)
    print(f"12-layer transformer forward, {rounds} rounds, medians")
    print(f"  jax.jit(fn).trace().lower().compile(): {base:.3f} s")
    print(f"  analyze(fn, spec, runs=0):              {ours:.3f} s")
    print(
        f"  ratio {ours / base:.2f}   target <= 1.25   {'OK' if ours / base <= 1.25 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
