"""Wall-clock timing of calls, the way `timeit` does it but within a time budget.

Each sample runs `number` back-to-back calls (each blocked until its result is
ready) and records the mean per call, so a 10 µs function is not drowned in
timer noise. `number` is picked so one sample lasts about `sample_s`.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from viz.overlap import gc_paused
from viz.plain import Plain

# the fewest eager samples a jit-vs-eager verdict rests on (eager's op-by-op compiles
# can use up its whole time budget, leaving one sample: noise)
MIN_EAGER_SAMPLES = 3


@dataclass
class RunStats(Plain):
    first_call_s: float
    median_s: float
    min_s: float
    p90_s: float
    samples: int  # how many timed samples
    number: int  # calls per sample
    per_call_s: list[float] = field(default_factory=list)  # one value per sample
    compiles: int = 0  # XLA compiles in the calls after the first (a jit inside, again)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[pos]


def time_calls(
    call: Callable[..., Any],
    block: Callable[[Any], Any],
    max_samples: int = 20,
    budget_s: float = 2.0,
    sample_s: float = 0.01,
    fresh: Callable[[], Any] | None = None,
    max_number: int | None = None,
    min_samples: int = 1,
) -> RunStats:
    """Time `block(call())`: one cold call, one warm-up, then up to `max_samples` samples.
    With `fresh`, each call is `call(fresh())` instead, the inputs made (and waited
    for) before the sample's clock starts: for calls that consume them (donation).
    `max_number` caps the calls per sample (and so the inputs made for one sample).
    At least `min_samples` samples are taken, however long they take."""

    def sample(count: int) -> float:
        inputs = [block(fresh()) for _ in range(count)] if fresh else []
        start = time.perf_counter()
        if fresh:
            for made in inputs:
                block(call(made))
        else:
            for _ in range(count):
                block(call())
        return (time.perf_counter() - start) / count

    first = sample(1)
    warm = sample(1)
    number = max(1, int(sample_s / max(warm, 1e-7)))
    if max_number is not None:
        number = min(number, max_number)
    deadline = time.perf_counter() + max(budget_s - first - warm, 0.0)
    per_call: list[float] = []
    with gc_paused(settle=False):  # in the worker: as timeit does
        while len(per_call) < max(1, max_samples):
            per_call.append(sample(number))
            if len(per_call) >= min_samples and time.perf_counter() > deadline:
                break
    return RunStats(
        first_call_s=first,
        median_s=statistics.median(per_call),
        min_s=min(per_call),
        p90_s=_percentile(per_call, 0.9),
        samples=len(per_call),
        number=number,
        per_call_s=per_call,
    )
