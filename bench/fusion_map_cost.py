"""What does the fusion map add to `analyze(runs=0)`?

For the 24-layer transformer (samples/transformer_24.py) and a 24-op elementwise
chain (samples/elementwise_chain.py), prints the bare
`jax.jit(fn).trace(...).lower().compile()` time, the whole `analyze(runs=0)`, and
the CPU time `viz.fusion.map.fusion_map` takes on that analysis' graph models (the
only work the map adds: the readers keep a name stack and a column per node at
no measurable cost). Medians; every compile on a fresh function with JAX's
caches cleared. The map is computed eagerly while it stays within a few percent
of the bare compile.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere
from viz import analyze
from viz.fusion.map import fusion_map
from viz.samples import get_sample
from viz.source import find_function, load_module
from viz.spec import abstract_args, parse_spec


def fresh(name: str) -> tuple:
    sample = get_sample(name)
    module = load_module(sample.code)
    return find_function(module, sample.code, sample.function), vars(module), sample.args


def bare(name: str) -> float:
    fn, namespace, spec = fresh(name)
    args = abstract_args(parse_spec(spec, namespace))
    jax.clear_caches()
    start = time.perf_counter()
    jax.jit(fn).trace(*args).lower().compile()
    return time.perf_counter() - start


def with_jitscope(name: str) -> tuple[float, float]:
    """(analyze(runs=0) seconds, fusion_map seconds on its models)."""
    fn, namespace, spec = fresh(name)
    jax.clear_caches()
    start = time.perf_counter()
    report = analyze(fn, spec, runs=0, namespace=namespace)
    elapsed = time.perf_counter() - start
    assert report.ok, report.error
    start = time.process_time()  # pure Python on one thread: CPU time is less noisy
    fusion_map(report.graph_models)
    return elapsed, time.process_time() - start


def main(rounds: int = 3) -> None:
    for name in ("transformer_24", "elementwise_chain"):
        bare(name), with_jitscope(name)  # warm up
        runs = [(bare(name), *with_jitscope(name)) for _ in range(rounds)]
        base, ours, fmap = (statistics.median(r[i] for r in runs) for i in range(3))
        print(f"{name}, {rounds} rounds, medians")
        print(f"  trace+lower+compile  {base * 1e3:9.1f} ms")
        print(f"  analyze(runs=0)      {ours * 1e3:9.1f} ms   ({ours / base:.2f}x)")
        print(
            f"  fusion map           {fmap * 1e3:9.1f} ms   ({fmap / base:.1%} of the compile, "
            f"{fmap / ours:.1%} of analyze)"
        )


if __name__ == "__main__":
    main()
