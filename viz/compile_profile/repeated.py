"""The repeated structure of a program, as the graph views fold it
(`viz.graph.repeats`: `layer0` … `layer95` as one group ×96, or identical chains of
loose ops), and each fold's share of the program's ops: what an unrolled loop costs
the compile, and what `lax.scan` would compile once."""

from __future__ import annotations

from viz.compile_profile.model import RepeatedGroup
from viz.graph.fold import FOLD_MIN, synthetic_kind
from viz.graph.repeats import FOLD, fold_chains, fold_groups
from viz.ir.model import Graph, Path

BOXES = ("rest", "chains")  # a fold's box of its other members (and its boxes of 100)


def repeated_groups(graph: Graph) -> list[RepeatedGroup]:
    """Every fold of FOLD_MIN or more members in `graph` (at any depth), the largest
    share of the ops first."""
    folded = fold_groups(fold_chains(graph))
    ops = [n.scope for n in folded.nodes if n.kind == "op"]
    if not ops:
        return []
    found = []
    for path, group in folded.groups.items():
        if synthetic_kind(folded.groups, path) != FOLD:
            continue
        count = _members(folded, path)
        if count < FOLD_MIN:
            continue
        inside = sum(1 for scope in ops if scope[: len(path)] == path)
        name = group.label.split(" ×", 1)[0]
        found.append(RepeatedGroup(name, count, inside / len(ops), inside))
    found.sort(key=lambda g: (-g.share, g.group))
    return found


def _members(graph: Graph, head: Path) -> int:
    """A fold's members: the groups right under it or under its boxes of the others."""
    depth = len(head)
    count = 0
    for path in graph.groups:
        if len(path) <= depth or path[:depth] != head:
            continue
        parent = path[:-1]
        in_fold = parent == head or synthetic_kind(graph.groups, parent) in BOXES
        if in_fold and synthetic_kind(graph.groups, path) not in BOXES:
            count += 1
    return count
