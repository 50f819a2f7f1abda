"""Small, jax-free arithmetic behind the lesson pages' verdicts."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from viz.lessons.rows import ScalingRow, ShapeRow, UnrollVerdict
from viz.units import listed, plural


def fit_exponent(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Slope of log(y) against log(x): y ∝ x^slope (None with fewer than 2 points)."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    return float(np.polyfit([p[0] for p in pts], [p[1] for p in pts], 1)[0])


def break_even(one_time_s: float, slow_s: float, fast_s: float) -> float | None:
    """Calls after which paying `one_time_s` once (a compile, an unroll) to run each call
    in `fast_s` instead of `slow_s` has paid off; None when it never does."""
    saved = slow_s - fast_s
    return max(one_time_s, 0.0) / saved if saved > 0 else None


def unroll_break_even(rows: Sequence[ScalingRow]) -> list[UnrollVerdict]:
    """Per N: extra one-time cost of unrolling over scan, time saved per call, and the
    number of calls after which unrolling pays off (None: it never does)."""
    by = {(r.variant, r.n): r for r in rows}
    verdicts = []
    for n in sorted({r.n for r in rows}):
        unrolled, scan = by.get(("unrolled", n)), by.get(("scan", n))
        if not unrolled or not scan:
            continue
        extra = unrolled.total_s - scan.total_s
        saved = scan.run_s - unrolled.run_s
        verdicts.append(
            UnrollVerdict(n, extra, saved, break_even(extra, scan.run_s, unrolled.run_s))
        )
    return verdicts


EVERY_SHAPE = (
    "Every new shape compiles again: jit pays for a shape called more often than its "
    "break-even, and costs for one called less."
)


def break_even_reading(rows: Sequence[ShapeRow]) -> str:
    """What the sweep's break-even column says: after how many calls of one shape jit's
    compile paid for itself (the fewest and the most), and at which sizes it never
    does (eager runs as fast)."""
    paying = [r for r in rows if r.break_even_calls is not None]
    never = [str(r.size) for r in rows if r.break_even_calls is None]
    said = []
    if paying:
        low = min(paying, key=lambda r: r.break_even_calls or 0.0)
        high = max(paying, key=lambda r: r.break_even_calls or 0.0)
        span = (
            f"after {_calls(low)} (size {low.size})"
            if low is high
            else f"after {_calls(low)} (size {low.size}) to {_calls(high)} (size {high.size})"
        )
        said.append(f"compiling a shape pays for itself {span} of that shape")
    if never:
        sizes = listed(never, 6)
        said.append(f"at {plural(len(never), 'size')} ({sizes}) eager ran as fast: jit never pays")
    reading = "; ".join(said)
    return f"{reading[:1].upper()}{reading[1:]}. {EVERY_SHAPE}"


def _calls(row: ShapeRow) -> str:
    return plural(round(row.break_even_calls or 0.0), "call")  # as the table rounds it
