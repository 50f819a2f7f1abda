"""Does the reported run time match a careful timeit?

For three functions of about 10 µs, 1 ms and 50 ms per call, prints the median
per-call time `analyze(...)` reports next to `timeit` on the same jitted
function (autorange loop size, 7 repeats, median), and the difference; each side
is measured 3 times, interleaved, and the medians are compared.
Target: within ±10 %.
"""

from __future__ import annotations

import statistics
import timeit

import jax
import jax.numpy as jnp

from viz import analyze


def tiny(x):  # ~10 µs: dispatch-bound
    return jnp.sin(x) + 1.0


def medium(x):  # ~1 ms
    return jnp.tanh(x @ x) + x


def large(x):  # ~50 ms
    for _ in range(4):
        x = jnp.tanh(x @ x)
    return x


ROUNDS = 3
CASES = [
    ("~10 µs", tiny, "f32[256]"),
    ("~1 ms", medium, "f32[384,384]"),
    ("~50 ms", large, "f32[1024,1024]"),
]


def careful_timeit(fn, spec_shape: tuple[int, ...]) -> float:
    jitted = jax.jit(fn)
    x = jnp.asarray(jax.random.normal(jax.random.key(0), spec_shape))
    jitted(x).block_until_ready()
    timer = timeit.Timer(lambda: jitted(x).block_until_ready())
    number, _ = timer.autorange()
    return statistics.median(t / number for t in timer.repeat(repeat=7, number=number))


def main() -> None:
    print(f"{'function':>10} {'analyze median':>16} {'timeit median':>15} {'diff':>8}")
    worst = 0.0
    for label, fn, spec in CASES:
        shape = tuple(int(d) for d in spec[4:-1].split(","))
        ours_runs, theirs_runs = [], []
        for _ in range(ROUNDS):  # interleaved, so machine noise hits both alike
            ours_runs.append(analyze(fn, spec, runs=20, time_budget_s=2.0).timings["run_median_s"])
            theirs_runs.append(careful_timeit(fn, shape))
        ours, theirs = statistics.median(ours_runs), statistics.median(theirs_runs)
        diff = (ours - theirs) / theirs
        worst = max(worst, abs(diff))
        print(f"{label:>10} {ours * 1e3:>13.4f} ms {theirs * 1e3:>12.4f} ms {diff:>+7.1%}")
    print(f"worst |diff| {worst:.1%}   target <= 10%   {'OK' if worst <= 0.10 else 'MISSED'}")


if __name__ == "__main__":
    main()
