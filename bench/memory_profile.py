"""What does reading the memory profile cost an analysis? (issue #54's number)

On the 96-layer transformer (samples/transformer_24.py at 96 layers, as in
bench/overhead.py), interleaved rounds of `analyze(runs=0).to_dict()` as in the worker:

- with the profile, each of its steps timed (CPU time of the thread it runs on): the
  buffer assignment and scheduled module decoded and each buffer's live range, the
  timeline and the peak (`Compiled.memory_layout`, on the thread beside the reading
  where XLA's memory analysis runs), the lines from the compiled graph and the fusion map
  (`Compiled.memory_profile`, on the calling thread), the jax.checkpoint residuals
  check (`readers.residuals_of`) and the memory section's share of `to_dict`;
- without it (those steps patched out), the same analysis otherwise.

Prints the profile's own steps as a share of the analysis (the number the issue
bounds: at most 5 %), median and range over the rounds, and the end-to-end difference
(each round's pair, and the minimums), which the machine's noise blurs. Take the lock
while measuring: `flock /tmp/bench.lock python bench/memory_profile.py [ROUNDS] [LAYERS]`.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
from overhead import collected, patched, transformer

import viz.overlap
import viz.pipeline
import viz.readers
import viz.stages
from viz.found import Found
from viz.memory.model import Memory

TARGET = 0.05
STEPS: dict[str, float] = defaultdict(float)
PROFILE_STEPS = {  # step → (owner, attribute) the pipeline calls it through
    "decode, live ranges, timeline (beside the reading)": (viz.stages.Compiled, "memory_layout"),
    "lines from the graph and the fusion map": (viz.stages.Compiled, "memory_profile"),
    "jax.checkpoint residuals check": (viz.readers, "residuals_of"),
    "memory section to JSON": (Memory, "to_dict"),
}


def _timed(name: str, fn: Callable) -> Callable:
    """`fn`, its CPU time on the thread that runs it added to STEPS[name] (its wall time
    would count the waits for the GIL while the thread beside it reads)."""

    def run(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            STEPS[name] += time.thread_time() - start

    return run


def analysis(make: Callable, spec: str) -> tuple[float, dict[str, float]]:
    """Seconds of analyze(runs=0).to_dict() with the profile, and its steps."""
    fn, namespace = make()
    jax.clear_caches()
    STEPS.clear()
    timers = {(o, a): _timed(n, getattr(o, a)) for n, (o, a) in PROFILE_STEPS.items()}
    with patched(timers):
        start = time.perf_counter()
        report = viz.pipeline.analyze(fn, spec, runs=0, namespace=namespace)
        report.to_dict()
        total = time.perf_counter() - start
    assert report.ok and report.memory.peak_bytes, report.error
    return total, dict(STEPS)


def _no_profile(compiled: viz.stages.Compiled) -> viz.readers.MemoryRead:
    return compiled.memory(), Found()


def _unread(*args: Any, **kwargs: Any) -> Any:
    raise ValueError("the memory profile is not read in this round")


def without_profile(make: Callable, spec: str) -> float:
    """Seconds of the same analysis with the memory profile not read."""
    fn, namespace = make()
    jax.clear_caches()
    skipped = {
        (viz.readers, "read_memory"): _no_profile,
        (viz.stages.Compiled, "memory_profile"): _unread,
        (viz.readers, "residuals_of"): lambda traced: None,
    }
    with patched(skipped):
        start = time.perf_counter()
        report = viz.pipeline.analyze(fn, spec, runs=0, namespace=namespace)
        report.to_dict()
        total = time.perf_counter() - start
    assert report.ok and report.memory.peak_bytes is None, report.error
    return total


def spread(values: list[float]) -> str:
    return (
        f"median {statistics.median(values):6.1%}  (min {min(values):6.1%}, max {max(values):6.1%})"
    )


def main(rounds: int = 9, layers: int = 96) -> None:
    viz.overlap.own_process()  # as in the worker
    make, spec = transformer(layers), "params, f32[2,128,256]"
    analysis(make, spec), without_profile(make, spec)  # warm up imports and one-time setup
    withs: list[float] = []
    withouts: list[float] = []
    steps: list[dict[str, float]] = []
    for i in range(rounds):  # which goes first alternates: a drift favours neither
        if i % 2:
            withouts.append(collected(without_profile, make, spec))
        total, found = collected(analysis, make, spec)
        withs.append(total)
        steps.append(found)
        if not i % 2:
            withouts.append(collected(without_profile, make, spec))
    print(f"{layers}-layer transformer, {rounds} interleaved rounds")
    for label, totals in (("with the profile", withs), ("without it", withouts)):
        low, mid = min(totals), statistics.median(totals)
        print(f"  analysis {label:<20} min {low:7.3f} s  median {mid:7.3f} s")
    print("  the profile's steps, share of each round's analysis:")
    for name in PROFILE_STEPS:
        shares = [s.get(name, 0.0) / t for s, t in zip(steps, withs, strict=True)]
        seconds = statistics.median(s.get(name, 0.0) for s in steps)
        print(f"    {name:<52} {seconds * 1e3:7.1f} ms  {spread(shares)}")
    waited = [
        sum(v for k, v in s.items() if "beside" not in k) / t
        for s, t in zip(steps, withs, strict=True)
    ]
    every = [sum(s.values()) / t for s, t in zip(steps, withs, strict=True)]
    print(f"  on the calling thread (waited for)  {spread(waited)}")
    print(f"  all steps, both threads             {spread(every)}   target <= {TARGET:.0%}")
    paired = [w / o - 1 for w, o in zip(withs, withouts, strict=True)]
    print(f"  end to end, each round's pair       {spread(paired)}")
    print(f"  end to end, minimums                {min(withs) / min(withouts) - 1:+7.1%}")
    verdict = "OK" if statistics.median(every) <= TARGET else "MISSED"
    print(f"  verdict (all steps, median): {verdict}")


if __name__ == "__main__":
    arguments = [int(a) for a in sys.argv[1:3]]
    main(*arguments)
