"""What does recording a program cost it? (issue #18's numbers)

- hot loop: 20,000 calls of a tiny jitted function that never recompiles, with and
  without `viz.recording()`, interleaved, min of 5 rounds. Target <= 1.05: the
  recorder wraps nothing, so hits stay on JAX's C++ fast path.
- per compile: 40 compiles of a small function (a new shape each), with and without
  recording, caches cleared before each round, min of 5 rounds; the added time per
  compile in ms and as a share of the compile. Target: <= max(5 ms, 5 %).
- bounded memory: a jit made anew in a loop (a new function object, so a compile per
  call) N times (default 10,000) under the recorder, with tracemalloc counting only the
  recorder's own allocations (viz/recorder, viz/cache); it must stop growing once each
  function's detail bound is reached, while the counts stay exact.

    python bench/record_overhead.py [--compiles 10000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from pathlib import Path

import jax
import jax.numpy as jnp

import viz
from viz.recorder.capture import listener

VIZ = str(Path(viz.__file__).resolve().parent)
_in_recorder = [0.0]  # seconds spent inside the recorder's JAX listeners


def _timed(callback):
    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return callback(*args, **kwargs)
        finally:
            _in_recorder[0] += time.perf_counter() - start

    return timed


# Before the first subscribe registers them: every listener call is timed.
listener._on_duration = _timed(listener._on_duration)
listener._on_event = _timed(listener._on_event)


@jax.jit
def tiny(x):
    return x + 1.0


def small(x):
    return jnp.tanh(x @ x.T).sum() * 2.0


def hot_loop(calls: int, recorded: bool) -> float:
    x = jnp.ones(4)
    tiny(x).block_until_ready()  # compiled before the clock starts
    start = time.perf_counter()
    if recorded:
        with viz.recording():
            for _ in range(calls):
                x = tiny(x)
    else:
        for _ in range(calls):
            x = tiny(x)
    x.block_until_ready()
    return time.perf_counter() - start


def compiles(n: int, recorded: bool) -> float:
    """Wall seconds for n compiles."""
    jax.clear_caches()
    f = jax.jit(small)
    shapes = [jnp.ones((8 + i, 16)) for i in range(n)]
    start = time.perf_counter()
    if recorded:
        with viz.recording():
            for x in shapes:
                f(x).block_until_ready()
    else:
        for x in shapes:
            f(x).block_until_ready()
    return time.perf_counter() - start


def memory(n: int) -> list[tuple[int, float]]:
    """(compiles so far, KiB the recorder holds) at a few points."""
    points = sorted({max(n // 10, 1), n // 4, n // 2, n})
    filters = [
        tracemalloc.Filter(True, VIZ + "/recorder/*"),
        tracemalloc.Filter(True, VIZ + "/cache/*"),
    ]
    seen = []
    x = jnp.ones(2)
    tracemalloc.start()
    with viz.recording() as rec:
        for i in range(1, n + 1):
            jax.jit(lambda v: v * 2)(x)
            if i in points:
                snap = tracemalloc.take_snapshot().filter_traces(filters)
                seen.append((i, sum(s.size for s in snap.statistics("filename")) / 1024))
    tracemalloc.stop()
    stats = [f for f in rec.recording().functions if f.name == "<lambda>"]
    assert stats and stats[0].compiles == n, "counts must stay exact"
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--compiles", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    plain, recorded = [], []
    for i in range(args.rounds):  # interleaved, and the order alternates
        for record in (i % 2 == 0, i % 2 == 1):
            (recorded if record else plain).append(hot_loop(args.calls, record))
    ratio = min(recorded) / min(plain)
    print(
        f"hot loop, {args.calls} calls: plain {min(plain) * 1e3:.1f} ms, recorded "
        f"{min(recorded) * 1e3:.1f} ms, ratio {ratio:.3f} (target <= 1.05)"
    )

    n = 40
    plain_c, recorded_c, inside = [], [], []
    for i in range(args.rounds):
        for record in (i % 2 == 0, i % 2 == 1):
            if record:
                _in_recorder[0] = 0.0
                recorded_c.append(compiles(n, True))
                inside.append(_in_recorder[0] / n)
            else:
                plain_c.append(compiles(n, False))
    per_compile_ms = min(plain_c) / n * 1e3
    own_ms = min(inside) * 1e3
    wall_ms = (min(recorded_c) - min(plain_c)) / n * 1e3
    print(
        f"per compile ({n} compiles of a small function): {per_compile_ms:.2f} ms each; "
        f"inside the recorder {own_ms:.3f} ms ({own_ms / per_compile_ms:.2%}); "
        f"wall difference {wall_ms:+.2f} ms (noise); target <= max(5 ms, 5 %)"
    )

    print(
        f"memory, {args.compiles} compiles of a jit made anew in a loop (details kept for "
        "the first 100):"
    )
    for count, kib in memory(args.compiles):
        print(f"  after {count:>6} compiles: the recorder holds {kib:8.1f} KiB")


if __name__ == "__main__":
    main()
