"""Small, jax-free arithmetic behind the lesson pages' verdicts."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from viz.lessons.rows import ScalingRow, UnrollVerdict


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
