"""Where a caller's `viz.analyze(...).to_dict()` spends its time beyond JAX and XLA, one
reader at a time (issue #60).

The transformer of bench/overhead.py at `--layers` depths, compile only, in this (a
caller's) process: each round a fresh function object, JAX's caches cleared, then
`analyze()` and `to_dict()`, every reader wrapped to add up its CPU time (the
calling thread's: `time.thread_time`, which another engineer's load on the machine
moves far less than the wall). Printed per depth: each reader's minimum over the
rounds in ms (a reader called inside another is counted in both), the stages' own
time, and what all of jitscope's reading added beyond them (wall, median of the
rounds). A reader made faster shows here first; bench/callers_process.py gives the
figure against bare jit.

    python bench/reader_costs.py [--rounds 3] [--layers 12 96]
"""

from __future__ import annotations

import argparse
import functools
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from anywhere: this checkout's viz
sys.path.insert(0, str(HERE))

SPEC = "params, f32[2,128,256]"


def readers() -> list[tuple[Any, str, str]]:
    """(owner, attribute, label) of every reader timed."""
    import viz.fusion.map as fusion
    import viz.graph
    import viz.readers as pipeline_readers
    import viz.stages as stages
    from viz.fusion import report
    from viz.ir.jaxpr import JaxprReading
    from viz.ir.stablehlo import StableHLOReading

    return [
        (JaxprReading, "graph", "jaxpr graph"),
        (JaxprReading, "text", "jaxpr text"),
        (StableHLOReading, "graph", "stablehlo graph"),
        (StableHLOReading, "text", "stablehlo text"),
        (pipeline_readers, "read_hlo_text", "compiled graph (HLO text parse)"),
        (stages.Compiled, "text", "compiled text (XLA)"),
        (viz.graph, "summary", "views (all IRs)"),
        (fusion, "prepare", "fusion map: sides"),
        (pipeline_readers, "fusion_map", "fusion map: all (sides too)"),
        (report, "fusion_map", "fusion map: all, after the compile"),
        (stages.Compiled, "cost", "XLA cost analysis"),
        (stages.Compiled, "memory", "XLA memory analysis"),
        (stages.Compiled, "memory_layout", "memory profile: layout"),
        (stages.Compiled, "memory_profile", "memory profile: lines"),
        (pipeline_readers, "_traced_specialization", "specialization (traced)"),
        (pipeline_readers, "specialization_of", "specialization (finish)"),
        (pipeline_readers, "residuals_of", "residuals"),
        (pipeline_readers, "sharding_of", "sharding"),
    ]


def wrapped(make: Callable, label: str, spent: dict[str, float]) -> Callable:
    @functools.wraps(make)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return make(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.thread_time() - start

    return timed


def one_round(make: Callable, spent: dict[str, float]) -> tuple[float, float]:
    """One analysis: its wall time, and the stages' (trace + lower + compile)."""
    import jax

    import viz

    fn, namespace = make()
    jax.clear_caches()
    gc.collect()
    spent.clear()
    start = time.perf_counter()
    report = viz.analyze(fn, SPEC, runs=0, namespace=namespace)
    report.to_dict()
    wall = time.perf_counter() - start
    assert report.ok, report.error
    t = report.timings
    return wall, (t.trace_s or 0) + (t.lower_s or 0) + (t.compile_s or 0)


def measure(layers: int, rounds: int) -> None:
    from overhead import transformer

    spent: dict[str, float] = {}
    for owner, name, label in readers():
        setattr(owner, name, wrapped(getattr(owner, name), label, spent))
    make = transformer(layers)
    one_round(make, spent)  # warm up
    found: dict[str, list[float]] = {}
    beyond: list[float] = []
    stages: list[float] = []
    for _ in range(rounds):
        wall, staged = one_round(make, spent)
        beyond.append(wall - staged)
        stages.append(staged)
        for label, seconds in spent.items():
            found.setdefault(label, []).append(seconds)
    print(f"\n{layers} layers, {rounds} rounds: each reader's CPU time, min (ms)")
    for label, seconds in sorted(found.items(), key=lambda kv: -min(kv[1])):
        print(f"  {label:<34} {min(seconds) * 1000:8.1f}")
    print(f"  {'trace + lower + compile (wall)':<34} {statistics.median(stages) * 1000:8.1f}")
    print(f"  {'all beyond them (wall, median)':<34} {statistics.median(beyond) * 1000:8.1f}")
    for owner, name, _ in readers():  # unwrapped for the next depth
        setattr(owner, name, getattr(owner, name).__wrapped__)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--layers", type=int, nargs="+", default=[12, 96])
    args = parser.parse_args()
    for layers in args.layers:
        measure(layers, args.rounds)


if __name__ == "__main__":
    main()
