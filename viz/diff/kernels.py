"""Fused kernels matched across two runs by content, never by name.

XLA renumbers `fusion.12` freely, so `diff_kernels(a, b)` pairs kernels by their kind,
the ops inside and their source lines, in passes from strictest to loosest: the same
in all three (unchanged), then the same kind and lines (its ops changed), the same
kind and ops (its lines moved), the same lines (its kind changed), and last the same
kind and at least `SIMILAR` of its ops and lines in common (an edited kernel). What
is left over is added (in B) or removed (in A).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from viz.diff.deltas import histogram_deltas
from viz.diff.model import KernelBrief, KernelChange, KernelDiff, SameKernel
from viz.report import Kernel


def _brief(kernel: Kernel) -> KernelBrief:
    return KernelBrief(kernel.name, kernel.kind, dict(kernel.ops), list(kernel.lines))


def _ops_key(k: Kernel) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(k.ops.items()))


def _lines_key(k: Kernel) -> tuple[int, ...]:
    return tuple(k.lines)


# Matching passes, strictest first. A pass pairs kernels with equal keys; a key of
# None never pairs (a kernel without source lines cannot match by lines alone).
_PASSES: list[tuple[str, Callable[[Kernel], Any]]] = [
    ("same", lambda k: (k.kind, _ops_key(k), _lines_key(k))),
    ("ops", lambda k: (k.kind, _lines_key(k)) if _lines_key(k) else None),
    ("lines", lambda k: (k.kind, _ops_key(k))),
    ("kind", lambda k: _lines_key(k) or None),
]
SIMILAR = 0.5  # last pass: same kind and at least this share of ops and lines in common

Pairs = tuple[list[tuple[Kernel, Kernel]], list[Kernel], list[Kernel]]


def _overlap(x: Counter[Any], y: Counter[Any]) -> float:
    union = sum((x | y).values())
    return sum((x & y).values()) / union if union else 1.0


def _similarity(ka: Kernel, kb: Kernel) -> float:
    """How alike two kernels of the same kind are: ops and source lines in common."""
    if ka.kind != kb.kind:
        return 0.0
    ops = _overlap(Counter(ka.ops), Counter(kb.ops))
    lines = _overlap(Counter(_lines_key(ka)), Counter(_lines_key(kb)))
    return (ops + lines) / 2


def _pair_similar(left: list[Kernel], right: list[Kernel]) -> Pairs:
    """An edited kernel (a line added above it, an op removed): pair it with the most
    alike kernel left on the other side, if alike enough."""
    pairs, rest_left, rest_right = [], [], list(right)
    for k in left:
        scored = [(_similarity(k, r), i) for i, r in enumerate(rest_right)]
        best = max(scored, default=(0.0, -1))
        if best[0] >= SIMILAR:
            pairs.append((k, rest_right.pop(best[1])))
        else:
            rest_left.append(k)
    return pairs, rest_left, rest_right


def _pair(left: list[Kernel], right: list[Kernel], key: Callable[[Kernel], Any]) -> Pairs:
    """Pair kernels with equal keys, in order; return the pairs and both leftovers."""
    waiting: dict[Any, list[Kernel]] = {}
    for k in right:
        waiting.setdefault(key(k), []).append(k)
    pairs, rest_left = [], []
    for k in left:
        kk = key(k)
        if kk is not None and waiting.get(kk):
            pairs.append((k, waiting[kk].pop(0)))
        else:
            rest_left.append(k)
    paired = {id(r) for _, r in pairs}
    return pairs, rest_left, [k for k in right if id(k) not in paired]


NOT_KEPT_KERNELS = "the full report was not kept, so its kernels are not known"


def diff_kernels(
    a: list[Kernel] | None, b: list[Kernel] | None, gone: str = NOT_KEPT_KERNELS
) -> KernelDiff:
    """Kernels added, removed and changed from `a` to `b`, matched by content (None: a
    side whose kernels are not known, for the reason `gone`)."""
    if a is None or b is None:
        return KernelDiff(note=gone)
    left, right = list(a), list(b)
    same: list[SameKernel] = []
    changed: list[KernelChange] = []
    for name, key in _PASSES:
        pairs, left, right = _pair(left, right, key)
        if name == "same":
            same = [SameKernel(**_brief(kb).to_dict(), a=ka.name, b=kb.name) for ka, kb in pairs]
        else:
            changed += [_change(ka, kb) for ka, kb in pairs]
    pairs, left, right = _pair_similar(left, right)
    changed += [_change(ka, kb) for ka, kb in pairs]
    return KernelDiff(
        added=[_brief(k) for k in right],
        removed=[_brief(k) for k in left],
        changed=changed,
        unchanged=len(same),
        same=same,
    )


def _change(ka: Kernel, kb: Kernel) -> KernelChange:
    ops = histogram_deltas(dict(ka.ops), dict(kb.ops))
    lines_a, lines_b = _lines_key(ka), _lines_key(kb)
    return KernelChange(
        a=_brief(ka),
        b=_brief(kb),
        ops={op: d for op, d in ops.items() if d.delta},
        lines={"a": lines_a, "b": lines_b} if lines_a != lines_b else {},
        kind={"a": ka.kind, "b": kb.kind} if ka.kind != kb.kind else {},
    )
