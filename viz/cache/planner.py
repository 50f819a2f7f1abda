"""Plan batch-size buckets for serving a jitted function.

A function under ``jax.jit`` compiles once per input shape, so a server that
sees many request batch sizes keeps recompiling. The cure: compile a few
batch-size *buckets* ahead of time and pad every request (with zero rows) up to
the smallest bucket that holds it. Fewer buckets mean fewer compiles but more
padding; this module plans the buckets and scores that trade-off.

Waste: compute grows with the number of batch rows, so a request of ``size``
rows run at ``bucket`` rows spends ``bucket - size`` rows on padding. Over a
list of requests, ``padded_rows`` sums that padding, ``useful_rows`` sums the
sizes, and ``waste_pct = 100 * padded_rows / (padded_rows + useful_rows)`` is
the share of all computed rows that was padding.

Pure planning logic (standard library and numpy only): timing a compile or a
run is done elsewhere and passed in as numbers or as a function.
"""

from __future__ import annotations

import bisect
import operator
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

DISTRIBUTIONS = ("uniform", "lognormal", "zipf")


@dataclass(frozen=True)
class BucketPlan:
    """One choice of buckets, scored against a list of request sizes."""

    name: str
    buckets: tuple[int, ...]  # sorted ascending, unique
    compiles: int  # == len(buckets): one compile per bucket
    padded_rows: int  # sum over requests of (bucket - size)
    useful_rows: int  # sum of request sizes
    waste_pct: float  # 100 * padded_rows / (padded_rows + useful_rows)
    assignment: dict[int, int] = field(hash=False)  # bucket -> requests routed to it

    def to_dict(self) -> dict:
        """Plain JSON-able data (lists and dicts, no tuples)."""
        data = asdict(self)
        data["buckets"] = list(self.buckets)
        return data


# ---------------------------------------------------------------- request sizes


def draw_sizes(distribution: str, n: int, max_size: int, seed: int = 0) -> list[int]:
    """Draw n request sizes in [1, max_size], the same list for the same seed.

    "uniform": every size equally likely. "lognormal": a bulk of mid-sized
    requests (median max_size / 8) with a long tail. "zipf": mostly tiny requests
    (P(size) ∝ size^-1.5). Draws past max_size are clipped to max_size.
    """
    if n < 0:
        raise ValueError(f"n must be at least 0, got {n}")
    if max_size < 1:
        raise ValueError(f"max_size must be at least 1, got {max_size}")
    rng = np.random.default_rng(seed)
    if distribution == "uniform":
        raw = rng.integers(1, max_size, size=n, endpoint=True)
    elif distribution == "lognormal":
        raw = np.ceil(rng.lognormal(mean=np.log(max(max_size / 8, 1.0)), sigma=1.0, size=n))
    elif distribution == "zipf":
        raw = rng.zipf(a=1.5, size=n)
    else:
        raise ValueError(f"unknown distribution {distribution!r}; choose one of {DISTRIBUTIONS}")
    return [int(s) for s in np.clip(raw, 1, max_size)]


# ---------------------------------------------------------------- routing and scoring


def route(size: int, buckets: Sequence[int]) -> int:
    """The smallest bucket ≥ size. Raises ValueError if size exceeds every bucket."""
    return _route_sorted(size, sorted(buckets))


def _route_sorted(size: int, ordered: Sequence[int]) -> int:
    index = bisect.bisect_left(ordered, size)
    if index == len(ordered):
        largest = f"the largest bucket {ordered[-1]}" if ordered else "an empty bucket list"
        raise ValueError(f"a request of {size} rows does not fit: it exceeds {largest}")
    return ordered[index]


def _checked_sizes(sizes: Sequence[int]) -> list[int]:
    checked = [operator.index(s) for s in sizes]
    if not checked:
        raise ValueError("no request sizes given")
    bad = [s for s in checked if s < 1]
    if bad:
        raise ValueError(f"request sizes must be at least 1, got {bad[0]}")
    return checked


def checked_buckets(buckets: Sequence[int]) -> tuple[int, ...]:
    ordered = tuple(sorted({operator.index(b) for b in buckets}))
    if ordered and ordered[0] < 1:
        raise ValueError(f"buckets must be at least 1, got {ordered[0]}")
    return ordered


def evaluate(sizes: Sequence[int], buckets: Sequence[int], name: str) -> BucketPlan:
    """Route every request to its bucket and score the padding."""
    checked = _checked_sizes(sizes)
    ordered = checked_buckets(buckets)
    assignment = dict.fromkeys(ordered, 0)
    padded = 0
    for size, count in Counter(checked).items():
        bucket = _route_sorted(size, ordered)
        assignment[bucket] += count
        padded += (bucket - size) * count
    useful = sum(checked)
    return BucketPlan(
        name=name,
        buckets=ordered,
        compiles=len(ordered),
        padded_rows=padded,
        useful_rows=useful,
        waste_pct=100.0 * padded / (padded + useful),
        assignment=assignment,
    )


# ---------------------------------------------------------------- the plans


def exact_plan(sizes: Sequence[int]) -> BucketPlan:
    """One bucket per distinct size: no padding, the most compiles."""
    return evaluate(sizes, set(_checked_sizes(sizes)), "exact shapes")


def _next_power_of_two(size: int) -> int:
    return 1 << (size - 1).bit_length()


def powers_of_two_plan(sizes: Sequence[int]) -> BucketPlan:
    """Buckets 1, 2, 4, 8, …, keeping only those some request is routed to."""
    used = {_next_power_of_two(s) for s in _checked_sizes(sizes)}
    return evaluate(sizes, used, "powers of two")


def user_plan(sizes: Sequence[int], buckets: Sequence[int]) -> BucketPlan:
    """The user's buckets, plus max(sizes) when the largest request would not fit."""
    largest = max(_checked_sizes(sizes))
    ordered = checked_buckets(buckets)
    if ordered and ordered[-1] >= largest:
        return evaluate(sizes, ordered, "your buckets")
    return evaluate(sizes, (*ordered, largest), f"your buckets + {largest}")


def best_plan(sizes: Sequence[int], k: int) -> BucketPlan:
    """The k buckets with the fewest padded rows (exact, by dynamic programming).

    k is capped at the number of distinct sizes; the name uses the capped k.
    An optimum can always use observed sizes as buckets (lowering a bucket to the
    largest size routed to it only removes padding), and the largest bucket must
    be max(sizes). So, over the sorted distinct sizes, the plan splits them into
    k consecutive groups, each padded up to its own largest size.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    counts = Counter(_checked_sizes(sizes))
    values = np.array(sorted(counts), dtype=np.int64)
    weights = np.array([counts[v] for v in values.tolist()], dtype=np.int64)
    k = min(k, len(values))
    buckets = _optimal_group_ends(values, weights, k)
    return evaluate(sizes, buckets, f"best {k} buckets")


_INFEASIBLE = np.iinfo(np.int64).max // 4


def _optimal_group_ends(values: np.ndarray, weights: np.ndarray, k: int) -> list[int]:
    """Split sorted distinct values into k consecutive groups minimising padding.

    step[i, j] is the padding of the group values[i+1..j] run at values[j].
    Group t (from 0) can only end at index t + p, p in [0, m - k], and cost[p]
    is the least padding covering values[0..t+p] with t+1 groups. Each layer is
    one (m-k+1)² numpy step over a view of step: O(k·(m-k+1)²) ≤ O(k·m²).
    """
    m = len(values)
    width = m - k + 1
    count_before = np.concatenate(([0], np.cumsum(weights)))  # requests among values[:i]
    rows_before = np.concatenate(([0], np.cumsum(weights * values)))  # their rows
    first, last = np.arange(1, m + 1)[:, None], np.arange(m)[None, :]
    requests = count_before[last + 1] - count_before[first]
    step = values[last] * requests - (rows_before[last + 1] - rows_before[first])
    step[np.tril_indices(m)] = _INFEASIBLE  # a group must hold at least one value
    ends = np.arange(width)
    cost = values[ends] * count_before[ends + 1] - rows_before[ends + 1]
    choices = []
    for t in range(1, k):
        total = cost[:, None] + step[t - 1 : t - 1 + width, t : t + width]
        best_prev = np.argmin(total, axis=0)
        cost = total[best_prev, ends]
        choices.append(best_prev)
    group_ends = [m - 1]
    position = width - 1  # group t ends at values[t + position]
    for t in range(k - 1, 0, -1):
        position = int(choices[t - 1][position])
        group_ends.append(t - 1 + position)
    return sorted(int(values[i]) for i in group_ends)


def compare_plans(
    sizes: Sequence[int], user_buckets: Sequence[int] | None, k: int | None
) -> list[BucketPlan]:
    """Exact shapes, powers of two, the user's buckets (if any) and the best k.

    k defaults to the number of power-of-two buckets, so the best plan and the
    powers of two compile equally often and their padding compares directly.
    """
    powers = powers_of_two_plan(sizes)
    plans = [exact_plan(sizes), powers]
    if user_buckets:
        plans.append(user_plan(sizes, user_buckets))
    plans.append(best_plan(sizes, powers.compiles if k is None else k))
    return plans


def expected_latency(plan: BucketPlan, run_time_s: Callable[[int], float]) -> float:
    """Mean seconds per request when each request runs at its bucket's size.

    run_time_s(bucket) is the caller's measured run time at that batch size; it
    is called once per bucket that receives requests.
    """
    total = sum(plan.assignment.values())
    if total == 0:
        raise ValueError("the plan has no requests routed to it")
    spent = sum(run_time_s(b) * n for b, n in plan.assignment.items() if n)
    return spent / total
