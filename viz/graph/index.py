"""Per-graph lookups (children, members, counted scopes, what a collapsed box stands
for), built once per Graph object and shared by every view of it."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from viz.graph.fold import synthetic_kind
from viz.ir.model import Graph, Group, Node, Path

# ---------------------------------------------------------------- index


@dataclass
class GraphIndex:
    """Per-graph lookups, built once per graph object.

    What a collapsed group's box says (`box_of`) is worked out when it is first
    drawn: a default view draws a few dozen boxes of a graph with thousands of nodes.
    """

    children: dict[Path, list[Path]]  # parent path (() = top) → child group paths
    members: dict[Path, list[str]]  # group path (() = top) → direct member node ids
    # for `box_of`: the graph's nodes and groups (not the graph: the cache must not
    # keep it alive), each scope's node positions, and which scopes op_histogram counts
    node_list: list[Node]
    groups: dict[Path, Group]
    positions: dict[Path, list[int]]
    counts_scope: dict[Path, bool]
    opaque: set[Path]
    inside: dict[Path, bool]  # scope → whether in an opaque group (`_inside_memo`'s memo)
    group_order: dict[Path, int]  # position in graph.groups
    boxes: dict[Path, _Box] = field(default_factory=dict)
    tallies: dict[Path, tuple[int, dict[str, tuple[int, int]]]] = field(default_factory=dict)
    _reader_paths: dict[Path, Path] | None = None
    _nodes: dict[str, Node] | None = None

    @property
    def nodes(self) -> dict[str, Node]:
        """node id → node, made when first asked: a default view, made for every report,
        never asks (a search, a neighbourhood does)."""
        if self._nodes is None:
            self._nodes = {node.id: node for node in self.node_list}
        return self._nodes

    def counts(self, node: Node) -> bool:
        """Whether op_histogram counts `node` (an op outside any opaque group)."""
        return node.kind == "op" and self.counts_scope.get(node.scope, False)

    def reader_paths_of(self, path: Path) -> Path:
        """`path` without its synthetic components: the reader's groups above it."""
        return tuple(
            c for d, c in enumerate(path) if not synthetic_kind(self.groups, path[: d + 1])
        )

    def reader_paths(self) -> dict[Path, Path]:
        """A reader's group path → the path it has under synthetic groups (a chunk, a
        fold), for the groups a view moved; worked out when first asked."""
        if self._reader_paths is None:
            found: dict[Path, Path] = {}
            for path in self.groups:
                reader = self.reader_paths_of(path)
                if reader != path and reader:
                    found.setdefault(reader, path)
            self._reader_paths = found
        return self._reader_paths


@dataclass
class _Box:
    """What a collapsed group stands for."""

    op_count: int  # histogram ops at or under it
    inner_ops: int  # ops strictly inside it
    top_ops: list[tuple[str, int]]  # the three most common of those


# id(graph) → (weak reference to it, its sizes when seen, what was worked out for it:
# "index", "views"). Weak, so that the cache does not keep big graphs (and the views'
# regrouped copies) alive: an entry goes when its graph does.
_CACHE: dict[int, tuple[weakref.ref[Graph], tuple[int, int, int], dict[str, Any]]] = {}


_CACHE_LOCK = threading.RLock()  # sessions are threads; a GC callback may re-enter


def graph_index(graph: Graph) -> GraphIndex:
    slots = _slots(graph)
    found = slots.get("index")
    if found is None:
        found = slots["index"] = _build_index(graph)
    return found


def default_views(graph: Graph) -> dict[int, Any]:
    """The default views of `graph` worked out so far, budget → view.View (without
    indexing the graph: a compiled program's view indexes only its regrouped copies)."""
    return _slots(graph).setdefault("views", {})


def glances(graph: Graph) -> dict[Any, Any]:
    """The glances of `graph` worked out so far (`viz.graph.glance`), by frame and marks."""
    return _slots(graph).setdefault("glances", {})


def _slots(graph: Graph) -> dict[str, Any]:
    key = (len(graph.nodes), len(graph.edges), len(graph.groups))
    with _CACHE_LOCK:
        hit = _CACHE.get(id(graph))
        if hit and hit[0]() is graph and hit[1] == key:
            return hit[2]
        # entries go with their graphs (weak references); the cap only bounds a burst of
        # graphs nobody dropped yet: the oldest goes, not all (3 sessions × 3 IRs × a
        # folded copy each kept clearing everyone's cached views)
        while len(_CACHE) > 64:
            del _CACHE[next(iter(_CACHE))]
        slots: dict[str, Any] = {}
        _CACHE[id(graph)] = (weakref.ref(graph, _forget(id(graph))), key, slots)
        return slots


def _forget(graph_id: int) -> Callable[[weakref.ref[Graph]], None]:
    def forget(ref: weakref.ref[Graph]) -> None:
        with _CACHE_LOCK:
            hit = _CACHE.get(graph_id)
            if hit is not None and hit[0] is ref:
                del _CACHE[graph_id]

    return forget


def remember_index(graph: Graph, index: GraphIndex | None) -> None:
    """`index` as `graph`'s (`moved_index`; None: none, built when asked)."""
    if index is not None:
        _slots(graph)["index"] = index


def index_if_made(graph: Graph) -> GraphIndex | None:
    """`graph`'s index where made already (a copy's is made from it)."""
    return _slots(graph).get("index")


def _build_index(graph: Graph) -> GraphIndex:
    # One pass over the nodes (a 96-layer model has 13k): views build an index for
    # each copy they make, so this is on the worker's path after every compile.
    members: dict[Path, list[str]] = {(): []}
    positions: dict[Path, list[int]] = {(): []}
    for i, node in enumerate(graph.nodes):
        scope = node.scope
        ids = members.get(scope)
        if ids is None:
            ids = members[scope] = []
            positions[scope] = []
        ids.append(node.id)
        positions[scope].append(i)
    return _index_of(graph, members, positions)


def moved_index(graph: Graph, source: GraphIndex) -> GraphIndex | None:
    """The index of `graph`, a copy of the graph `source` indexes whose nodes kept their
    order and moved scope by scope, top-level nodes one by one (a fold's copy, or
    `fold_top_level`'s): `source`'s node lists under the scopes the copy gives them,
    without the walk over every node that `_build_index` takes. None where it is not
    such a copy."""
    nodes = graph.nodes
    if len(nodes) != len(source.node_list):
        return None
    found: dict[Path, tuple[list[str], list[int]]] = {}
    for scope, at in source.positions.items():
        if not at:  # a group without nodes of its own: `_index_of` adds it
            continue
        if scope:  # all its nodes moved together: where its first one went
            moved = nodes[at[0]].scope
            if moved in found:  # () comes first: a scope the copy merged with another
                return None
            found[moved] = (source.members[scope], at)
            continue
        for node_id, i in zip(source.members[()], at, strict=True):
            ids, places = found.setdefault(nodes[i].scope, ([], []))
            ids.append(node_id)
            places.append(i)
    # () first, then the scopes in the order the nodes first name them, as `_build_index`
    order = sorted(found, key=lambda scope: (scope != (), found[scope][1][0]))
    members: dict[Path, list[str]] = {(): []} | {scope: found[scope][0] for scope in order}
    positions: dict[Path, list[int]] = {(): []} | {scope: found[scope][1] for scope in order}
    return _index_of(graph, members, positions)


def _index_of(
    graph: Graph, members: dict[Path, list[str]], positions: dict[Path, list[int]]
) -> GraphIndex:
    """The index of `graph` from its nodes' scopes (`members`, `positions`: () first, then
    each scope of nodes in the order the nodes first name it)."""
    opaque = {p for p, g in graph.groups.items() if g.opaque}
    inside: dict[Path, bool] = {(): False}
    # per scope: does op_histogram count its ops?
    counts_scope = {scope: not _inside_memo(scope, opaque, inside) for scope in members}
    paths = dict.fromkeys(graph.groups)
    _add_prefixes(paths, list(members)[1:])  # scopes a producer forgot to describe are groups too
    children: dict[Path, list[Path]] = {(): []}
    for path in paths:
        children.setdefault(path[:-1], []).append(path)
        children.setdefault(path, [])
        members.setdefault(path, [])
        positions.setdefault(path, [])
    return GraphIndex(
        children,
        members,
        graph.nodes,
        graph.groups,
        positions,
        counts_scope,
        opaque,
        inside,
        {p: k for k, p in enumerate(graph.groups)},
    )


def _add_prefixes(paths: dict[Path, None], scopes: list[Path]) -> None:
    """Each of `scopes` and its prefixes into `paths`, shallowest first where new; each
    walk up a scope stops at a prefix seen before (a layer's scopes share theirs)."""
    seen: set[Path] = {()}
    for scope in scopes:
        new = []
        while scope not in seen:
            new.append(scope)
            scope = scope[:-1]
        for path in reversed(new):
            paths.setdefault(path, None)
            seen.add(path)


def box_of(index: GraphIndex, path: Path) -> _Box:
    """Counts and top ops of `path`, as `model.op_histogram` counts them."""
    found = index.boxes.get(path)
    if found is None:
        count, ops = _tally(index, path)
        # Counter.most_common's order: most first, then first seen (nodes in graph
        # order, then groups in theirs)
        top = sorted(ops.items(), key=lambda item: (-item[1][0], item[1][1]))[:3]
        inner = sum(n for n, _ in ops.values())
        found = index.boxes[path] = _Box(count, inner, [(op, n) for op, (n, _) in top])
    return found


_Ops = dict[str, tuple[int, int]]  # op → (how many, where first seen)


def _tally(index: GraphIndex, path: Path) -> tuple[int, _Ops]:
    """`path`'s histogram count and its inner ops (the ops of its nodes and of the groups
    strictly under it), each with where it was first seen: worked out once per path from
    its children's, since a view asks about nested boxes (a fold, its other members,
    each of them)."""
    found = index.tallies.get(path)
    if found is not None:
        return found
    ops: _Ops = {}
    node_list = index.node_list
    own = 0
    for i in index.positions.get(path, ()):  # ascending: an op's first position is kept
        node = node_list[i]
        if node.kind == "op":
            own += 1
            seen = ops.get(node.op)
            ops[node.op] = (1, i) if seen is None else (seen[0] + 1, seen[1])
    count = own if index.counts_scope.get(path, False) else 0
    groups, order, after = index.groups, index.group_order, len(node_list)
    for child in index.children.get(path, ()):
        sub_count, sub_ops = _tally(index, child)
        count += sub_count
        for op, (n, first) in sub_ops.items():  # `_add`, inlined: every op of every level
            seen = ops.get(op)
            ops[op] = (n, first) if seen is None else (seen[0] + n, min(seen[1], first))
        op = groups[child].op if child in order else None
        if op:  # a group's own op counts in the groups above it
            _add(ops, op, 1, after + order[child])
    inside = _inside_memo(path[:-1], index.opaque, index.inside)
    if path in order and groups[path].op and not inside:
        count += 1
    found = index.tallies[path] = (count, ops)
    return found


def _add(ops: _Ops, op: str, n: int, first: int) -> None:
    seen = ops.get(op)
    ops[op] = (n, first) if seen is None else (seen[0] + n, min(seen[1], first))


def _inside_memo(scope: Path, paths: set[Path], memo: dict[Path, bool]) -> bool:
    """Whether `scope` or a prefix of it is in `paths`, remembering each prefix's answer
    (a graph has thousands of scopes sharing their prefixes)."""
    found = memo.get(scope)
    if found is None:
        found = memo[scope] = scope in paths or _inside_memo(scope[:-1], paths, memo)
    return found
