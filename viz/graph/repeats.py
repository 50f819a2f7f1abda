"""Repeated structure, folded, so that a 96-layer model shows its layers and a
training step its per-parameter optimizer update at a glance.

Two kinds of repeats become one synthetic group marked ×N:
- sibling groups with the same inside, consecutive (`layer0` … `layer95`: the
  same ops and the same sub-groups, their names equal up to numbers);
- identical chains of loose ops side by side (an optimizer's update of each
  parameter: `tree.map` emits every leaf's ops, unscoped). A chain is a
  connected piece of the loose ops once the scalars they all share (a step
  count, a bias correction) are set aside.

Shapes are not compared: an optimizer's chains, or a CNN's look-alike blocks,
differ only in the sizes of their parameters; a fold's label says when they do.

A fold keeps its first member as it is and the others in one box ("95 more like
layer0"), so a view that opens the fold shows one layer's structure beside the
count; opening that box lists the others, and each of them opens to its ops.
The model itself is never changed: a folded copy is returned, whose synthetic
groups have no op (counts do not change).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace

from viz.graph.fold import (
    FOLD_MIN,
    NUMBER,
    SPAN,
    group_kind,
    moved_group,
    moved_node,
    span,
    synthetic_group,
    synthetic_kind,
    user_function_name,
)
from viz.graph.index import GraphIndex, graph_index, moved_index, remember_index
from viz.ir.model import Graph, Group, Node, Path

REST_MAX = 100  # a fold's other members beyond this are listed in boxes of this many
HUB_NEIGHBOURS = 3  # a loose op linked to more loose ops than this is shared, not in a chain
FOLD = "fold"  # Group.attrs[SYNTHETIC] of a fold; "rest" or "chains": the box of the others


@dataclass
class _Fold:
    """One fold to make: under `parent`, the look-alike `members` (child group names,
    or the node ids of each chain), labelled for what they are."""

    parent: Path
    members: list[str] | list[list[str]]
    label: str
    rest_label: str
    member_labels: list[str]  # one per chain (groups keep their own label)
    rest: str = "chains"  # the other members' box: "rest" (a view may open it) or "chains"
    span: str = ""  # a group fold's `layer0–layer95`; a chain fold's whole label


def fold_groups(graph: Graph, kernels: bool = True, chunks_only: bool = False) -> Graph:
    """A copy with every run of FOLD_MIN or more consecutive look-alike sibling groups
    folded (at every depth), or the graph itself when there is none.

    `kernels=False` leaves fusions alone: a compiled program's top level is a flat
    list of kernels whose layers are found by chunking first; folding three look-alike
    kernels there would cut a layer's run in two. `chunks_only` folds only the chunks a
    view made and what is inside them (the second pass, after chunking)."""
    if not kernels and _outside_kernels(graph) < FOLD_MIN:
        return graph  # a compiled program's kernels, before chunking: nothing to do
    index = graph_index(graph)
    signature = _Signatures(graph, index)
    folds = [
        fold
        for parent, kids in index.children.items()
        if len(kids) >= FOLD_MIN  # most groups (a program's kernels) hold fewer
        and not _inside_fold(graph, parent)
        and (not chunks_only or _in_chunk(graph, parent))
        for fold in _group_folds(graph, parent, kids, signature, kernels, chunks_only)
    ]
    return _apply(graph, folds, index) if folds else graph


def _outside_kernels(graph: Graph) -> int:
    """How many groups are not kernels or inside one (a scope a producer forgot to
    describe counts: it may be a layer)."""
    kernels = {p for p, g in graph.groups.items() if g.kind == "fusion"}
    scopes = {n.scope for n in graph.nodes}  # a few hundred: each looked at once
    scopes.discard(())
    scopes.update(graph.groups)
    return sum(1 for p in scopes if not any(p[:d] in kernels for d in range(1, len(p) + 1)))


def _in_chunk(graph: Graph, parent: Path) -> bool:
    """The top level (where chunks are) or a path under a chunk."""
    return not parent or any(
        synthetic_kind(graph.groups, parent[:d]) == "chunk" for d in range(1, len(parent) + 1)
    )


def fold_chains(graph: Graph) -> Graph:
    """A copy with FOLD_MIN or more identical chains of top-level loose ops folded, or
    the graph itself when there are none."""
    # a compiled op with a name scope belongs to a layer: chunking finds it a home
    top = [
        n
        for n in graph.nodes
        if not n.scope and n.kind in ("op", "constant") and not n.attrs.get("name_scope")
    ]
    if len(top) < 2 * FOLD_MIN:
        return graph
    folds = list(_chain_folds(graph, top))
    return _apply(graph, folds) if folds else graph


# ---------------------------------------------------------------- look-alike groups


class _Signatures:
    """Each group's structure as a hash: its kind, op, name up to numbers, the ops of its
    members and its sub-groups' structures (orders ignored: XLA schedules the fusions
    of two identical layers in different orders). Worked out when first asked."""

    def __init__(self, graph: Graph, index: GraphIndex) -> None:
        self.graph, self.index = graph, index
        self.done: dict[Path, int] = {}

    def __call__(self, path: Path) -> int:
        found = self.done.get(path)
        if found is None:
            index, nodes = self.index, self.index.node_list
            group = self.graph.groups.get(path) or Group(path, path[-1])
            ops = sorted([nodes[i].op for i in index.positions[path]])
            kids = sorted([self(c) for c in index.children[path]])
            name = NUMBER.sub("#", group.label)
            found = self.done[path] = hash((group.kind, group.op, name, tuple(ops), tuple(kids)))
        return found

    def typed(self, path: Path) -> int:
        """The types of every node under `path`: what says whether look-alikes differ
        in shape."""
        index, nodes = self.index, self.index.node_list
        below, types = [path], []
        for sub in below:
            below.extend(index.children[sub])
            types.extend([nodes[i].type for i in index.positions[sub]])
        return hash(tuple(sorted(types)))


def _group_folds(
    graph: Graph,
    parent: Path,
    kids: list[Path],
    signature: _Signatures,
    kernels: bool,
    chunks_only: bool,
) -> Iterator[_Fold]:
    if len(kids) < FOLD_MIN:
        return
    run: list[Path] = []
    for kid in [*kids, None]:
        # after chunking, only the chunks are new at the top: anything else breaks a run
        candidate = kid is not None and (
            bool(parent) or not chunks_only or synthetic_kind(graph.groups, kid) == "chunk"
        )
        if candidate and run and signature(kid) == signature(run[0]):
            run.append(kid)
            continue
        if len(run) >= FOLD_MIN and _foldable(graph, run[0], kernels):
            yield _group_fold(graph, parent, run, signature)
        run = [kid] if candidate else []


def _inside_fold(graph: Graph, parent: Path) -> bool:
    """A fold's own levels are not folded again (a second pass over a folded copy)."""
    return synthetic_kind(graph.groups, parent) in (FOLD, "rest", "chains")


def _foldable(graph: Graph, path: Path, kernels: bool) -> bool:
    kernel = group_kind(graph.groups, path) == "fusion"
    return synthetic_kind(graph.groups, path) != "leaves" and (kernels or not kernel)


def _group_fold(graph: Graph, parent: Path, run: list[Path], signature: _Signatures) -> _Fold:
    # a member's name: `layer3`, not its chunk's count (`(10 items …)`) or fold's (`×3`)
    labels = [
        (graph.groups.get(p) or Group(p, p[-1])).label.split(" (", 1)[0].split(" ×", 1)[0]
        for p in run
    ]
    kernels = group_kind(graph.groups, run[0]) == "fusion"
    # kernels are named, not numbered in order (fusion.2, fusion.14, ...): no span
    what = NUMBER.sub("", labels[0]).rstrip(".") if kernels else span(labels[0], labels[-1])
    shapes = " · shapes differ" if len({signature.typed(p) for p in run}) > 1 else ""
    return _Fold(
        parent,
        [p[-1] for p in run],
        f"{what} ×{len(run)}{shapes}",
        f"{len(run) - 1} more like {labels[0].split('–')[0]}",
        [],
        "chains" if kernels else "rest",  # a list of kernels is not structure
        what,
    )


# ---------------------------------------------------------------- identical chains


def _chain_folds(graph: Graph, loose: list[Node]) -> Iterator[_Fold]:
    """Classes of FOLD_MIN or more chains with the same ops among `loose` (top level)."""
    ids = {n.id for n in loose}
    neighbours: dict[str, set[str]] = {i: set() for i in ids}
    for edge in graph.edges:
        if edge.src in ids and edge.dst in ids and edge.src != edge.dst:
            neighbours[edge.src].add(edge.dst)
            neighbours[edge.dst].add(edge.src)
    # a scalar many chains read (a step count, a bias correction) is shared; a big
    # value linked to many (a residual stream) is what makes the steps one program
    nodes = {n.id: n for n in loose}
    shared = {
        i
        for i, near in neighbours.items()
        if len(near) > HUB_NEIGHBOURS and _is_scalar(nodes[i].type)
    }
    classes: dict[tuple[object, ...], list[list[str]]] = {}
    for chain in _components(loose, neighbours, shared):
        if len(chain) >= 2:
            ops = tuple(sorted(Counter(nodes[i].op for i in chain).items()))
            classes.setdefault(ops, []).append(chain)
    for chains in classes.values():
        if len(chains) >= FOLD_MIN:
            yield _chain_fold(chains, nodes)


def _is_scalar(type_: str) -> bool:
    return all(t.strip().endswith("[]") for t in type_.split(",")) if type_ else False


def _components(
    loose: list[Node], neighbours: dict[str, set[str]], shared: set[str]
) -> Iterator[list[str]]:
    """Connected pieces of the loose ops without the shared ones, in program order."""
    seen: set[str] = set(shared)
    for node in loose:
        if node.id in seen:
            continue
        seen.add(node.id)
        piece, todo = [node.id], [node.id]
        while todo:
            for other in neighbours[todo.pop()]:
                if other not in seen:
                    seen.add(other)
                    piece.append(other)
                    todo.append(other)
        yield piece


def _chain_fold(chains: list[list[str]], nodes: dict[str, Node]) -> _Fold:
    order = {node_id: k for k, node_id in enumerate(nodes)}
    chains = [sorted(c, key=order.__getitem__) for c in chains]
    chains.sort(key=lambda c: order[c[0]])
    widest = [max((nodes[i].type for i in c), key=_elements) for c in chains]
    shapes = "" if len(set(widest)) == 1 else ", shapes differ"
    functions = Counter(  # a constant's location is often its caller's: not telling
        user_function_name(nodes[i].source.function)
        for i in chains[0]
        if nodes[i].source and not nodes[i].op.endswith("constant")
    )
    top = functions.most_common(2)
    what = ", ".join(f for f, n in top if n * 2 >= top[0][1]) if top else "chains"
    label = f"{what} ×{len(chains)} · identical chains of {len(chains[0])} ops{shapes}"
    return _Fold(
        (),
        chains,
        label,
        f"{len(chains) - 1} more chains like the first",
        [f"chain {k + 1} · {_short_type(t)}" for k, t in enumerate(widest)],
        span=label,  # a phase of its own, not merged with its function's other ops
    )


def _elements(type_: str) -> int:
    dims = re.findall(r"\d+", type_.split("[", 1)[-1].split("]", 1)[0]) if "[" in type_ else []
    total = 1
    for d in dims:
        total *= int(d)
    return total


def _short_type(type_: str) -> str:
    return type_ if len(type_) <= 32 else type_[:31] + "…"


# ---------------------------------------------------------------- the folded copy


def _apply(graph: Graph, folds: list[_Fold], index: GraphIndex | None = None) -> Graph:
    """A copy of `graph` with each fold's members moved under its synthetic groups.
    `index`: `graph`'s, where made: the copy's is then made from it."""
    inserted: dict[Path, Path] = {}  # reader group path → the fold levels put above it
    node_levels: dict[str, Path] = {}  # node id → the fold levels of its chain
    new_groups: list[tuple[Path, Path, Group]] = []  # (reader parent, levels, group)
    names = _fresh_names(graph)
    for fold in folds:
        name = next(names)
        head, rest = (name,), (name, "[rest]")
        group = synthetic_group(head, fold.label, FOLD)
        group.attrs[SPAN] = fold.span  # what chunking keys the fold on
        new_groups.append((fold.parent, head, group))
        new_groups.append((fold.parent, rest, synthetic_group(rest, fold.rest_label, fold.rest)))
        for j, member in enumerate(fold.members):
            levels = head if j == 0 else rest
            if len(fold.members) - 1 > REST_MAX and j > 0:  # 300 layers: boxes of REST_MAX
                k = (j - 1) // REST_MAX
                levels = (*rest, f"[rest {k + 1}]")
                if (j - 1) % REST_MAX == 0:
                    last = min(j + REST_MAX, len(fold.members)) - 1
                    what = f"{_name(graph, fold, j)}–{_name(graph, fold, last)}"
                    new_groups.append(
                        (fold.parent, levels, synthetic_group(levels, what, fold.rest))
                    )
            if isinstance(member, str):
                inserted[(*fold.parent, member)] = levels
                continue
            chain = (*levels, f"[chain {j + 1}]")
            new_groups.append(
                (fold.parent, chain, synthetic_group(chain, fold.member_labels[j], "chain"))
            )
            node_levels.update(dict.fromkeys(member, chain))
    moved = _Mover(inserted)
    known = moved.done  # the mover's memo, read here first: a call per node cost more
    nodes = []
    for n in graph.nodes:
        scope = known.get(n.scope) or moved(n.scope)
        if n.id in node_levels:
            scope += node_levels[n.id]
        nodes.append(n if scope is n.scope else moved_node(n, scope))
    groups: dict[Path, Group] = {}
    for parent, levels, group in new_groups:
        path = moved(parent) + levels
        groups[path] = replace(group, path=path)
    for path, group in graph.groups.items():
        new = moved(path)
        groups[new] = group if new == path else moved_group(group, new)
    folded = replace(graph, nodes=nodes, groups=groups)
    if index is not None:
        remember_index(folded, moved_index(folded, index))
    return folded


def _name(graph: Graph, fold: _Fold, j: int) -> str:
    """Member `j`'s name: a group's label (`layer37`), or the chain's."""
    member = fold.members[j]
    if isinstance(member, str):
        path = (*fold.parent, member)
        return (graph.groups.get(path) or Group(path, member)).label.split(" (", 1)[0]
    return fold.member_labels[j].split(" ·", 1)[0]


def _fresh_names(graph: Graph) -> Iterator[str]:
    """`[fold 1]`, `[fold 2]`, ... skipping those an earlier pass gave out."""
    taken = {c for path in graph.groups for c in path if c.startswith("[fold ")}
    k = 0
    while True:
        k += 1
        if f"[fold {k}]" not in taken:
            yield f"[fold {k}]"


class _Mover:
    """Reader path → its path in the folded copy (memoized: a big graph has a few
    hundred scopes and tens of thousands of nodes)."""

    def __init__(self, inserted: dict[Path, Path]) -> None:
        self.inserted = inserted
        self.done: dict[Path, Path] = {(): ()}

    def __call__(self, path: Path) -> Path:
        found = self.done.get(path)
        if found is None:
            found = self(path[:-1]) + self.inserted.get(path, ()) + path[-1:]
            # a path that does not move is itself: its nodes are kept, not copied
            found = self.done[path] = path if found == path else found
        return found
