"""Views on the graph model: what to draw, collapsed how, and the DOT to draw it.

A `View` is a graph plus the set of expanded group paths. Groups that are not
expanded are drawn as one box; every edge of the model is drawn between the
visible representatives of its two ends (a leaf node, or the outermost
collapsed group holding it), deduplicated, self-loops dropped, so collapsing
never loses a connection (`visible` returns them all; the DOT leaves out the
edges of "fans", below).

Counts in a view follow `model.op_histogram`: a collapsed group's `op_count`
is the number of histogram ops at or under it (its own container op, if any,
included), so the `op_count`s of the visible items plus the container ops of
the expanded groups add up to the model's op count. A box's label shows the
ops inside it (for a fusion: the fused ops) and the three most common.

How much is drawn:
- DEFAULT_NODES (80) is the default view's budget, and what `summary` (the
  report's DOT) uses: a 24-layer transformer shows as 24 layer clusters with
  their attention / mlp boxes, which Graphviz lays out in a fraction of a second
  (300 items took it 5-10 s, and the browser's wasm Graphviz gave up).
- MAX_NODES (300) caps any default view, whatever budget is asked for. Views
  the user asks for (`expand`, `expand_to_depth`, `neighbourhood`) show what
  they ask for.
- In the DOT, an item linked to items in more than HUB_DEGREE expanded
  top-level groups (the folded inputs box, a scalar constant, a mask function
  every layer calls) is a fan: its edges are not drawn, its label says how many
  items it is linked to; other items with more than HUB_DEGREE neighbours are
  drawn with edges that do not constrain the layout.

This module imports neither jax nor streamlit.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from viz.graph.fold import NUMBER, fold_top_level, group_kind, synthetic_kind
from viz.graph.index import (
    GraphIndex,
    box_of,
    default_views,
    graph_index,
    index_if_made,
    moved_index,
    remember_index,
)
from viz.graph.repeats import fold_chains, fold_groups
from viz.ir.model import Graph, Group, Node, Path, SourceLoc
from viz.overlap import gc_paused

DEFAULT_NODES = 80  # the default view's budget: readable, and quick for dot to lay out
MAX_NODES = 300  # the most items a default view shows, whatever budget is asked for


@dataclass
class View:
    graph: Graph
    expanded: frozenset[Path]  # expanded group paths; the others are drawn as one box
    highlight: frozenset[str] = frozenset()  # node ids to highlight (search results)
    focus: frozenset[str] | None = None  # when set, only these node ids are shown


@dataclass
class VisibleNode:
    """One thing drawn: a leaf node or a collapsed group."""

    id: str
    label: str
    kind: str  # 'op' | 'input' | 'output' | 'constant' | 'group'
    path: Path  # the group path (groups) or the node's scope (leaves)
    op: str = ""
    type: str = ""
    source: SourceLoc | None = None
    op_count: int = 0  # histogram ops it stands for (leaf op: 1; fused op: 0)
    inner_ops: int = 0  # ops inside a group (for a fusion: the fused ops)
    top_ops: list[tuple[str, int]] = field(default_factory=list)
    group_kind: str = ""
    colour: str = ""  # fusion colour class
    highlighted: bool = False
    tooltip: str = ""
    matches: int = 0  # highlighted nodes it stands for (search results inside a box)


# ---------------------------------------------------------------- views


def expand(view: View, path: Path) -> View:
    """`path` (and every group above it) expanded.

    A path of the reader's graph also works on a default view that moved it
    under a synthetic chunk group.
    """
    path = _resolve(view.graph, path)
    prefixes = {path[:d] for d in range(1, len(path) + 1)}
    return replace(view, expanded=view.expanded | prefixes)


def collapse(view: View, path: Path) -> View:
    """`path` and every group under it collapsed."""
    path = _resolve(view.graph, path)
    n = len(path)
    return replace(view, expanded=frozenset(p for p in view.expanded if p[:n] != path))


def _resolve(graph: Graph, path: Path) -> Path:
    """`path` as `graph` spells it: possibly under synthetic groups (a chunk, its part, a
    fold, the box of a fold's other members)."""
    if path in graph.groups or not path:
        return path
    return graph_index(graph).reader_paths().get(path, path)


def expand_to_depth(graph: Graph, depth: int) -> View:
    """Every group up to `depth` levels deep expanded (0: all collapsed)."""
    return View(graph, frozenset(p for p in graph.groups if len(p) <= depth))


def default_view(graph: Graph, max_nodes: int = DEFAULT_NODES) -> View:
    """The default view of `graph` (see `_default_view`), worked out once per graph and
    budget: the app asks for it on every rerun. A copy, so that a caller setting its
    highlight does not change another session's."""
    views = default_views(graph)
    found = views.get(max_nodes)
    if found is None:
        with gc_paused(callers_too=True):  # copies of the graph's nodes: see `viz.overlap`
            found = _default_view(graph, max_nodes)
        if found.graph is not graph:  # a view of the graph itself would keep it alive
            views[max_nodes] = found
    return replace(found)


def _default_view(graph: Graph, max_nodes: int) -> View:
    """Groups expanded breadth-first (shallowest, then largest first) within `max_nodes`.

    `max_nodes` is capped at MAX_NODES. Groups that look alike (the same kind,
    op, label up to its numbers, and size: the 24 `layerN` scopes of a
    transformer, or their `attention` scopes) are expanded together or not at
    all, so repeated structure is drawn the same way everywhere.

    A graph that fits is shown fully expanded. A graph with more than `max_nodes`
    nodes is drawn from a copy with synthetic groups (they have no op, so counts
    do not change): repeated structure folded (`viz.graph.repeats`: `layer0` …
    `layer95` as one group ×96), many top-level inputs (constants, outputs) in one
    box, and an oversized or mixed top level chunked into its runs (`_chunks`: a
    training step's forward, loss, backward and update). Of that copy, groups that
    show structure open first (`_shows_structure`), then groups of loose ops as the
    budget allows (see below).
    """
    max_nodes = min(max_nodes, MAX_NODES)
    structure_only = len(graph.nodes) > max_nodes
    if structure_only:  # a graph that fits is shown whole
        folded = fold_groups(fold_chains(graph), kernels=False)
        graph = fold_top_level(folded, max_nodes)
        if graph is not folded and (made := index_if_made(folded)) is not None:
            remember_index(graph, moved_index(graph, made))  # not a walk over every node
        if graph is not folded:  # the chunks of a flat top level (compiled layers) repeat too
            graph = fold_groups(graph, chunks_only=True)
            if _top_size(graph) > max_nodes:  # look-alike runs that did not fold after all
                graph = fold_top_level(folded, max_nodes, trust_folds=False)
    index = graph_index(graph)
    visible = _top_size(graph)
    expanded: set[Path] = set()
    order = {path: i for i, path in enumerate(index.children)}
    # Structure first (the layers of a model), breadth-first, look-alikes together; a
    # group that would show mostly loose ops waits. Then, in a graph up to twice the
    # budget (one transformer block), waiting groups open largest first while they
    # fit. A bigger one (a training step, 96 layers) shows its structure only: its
    # forward, loss, backward and update stay boxes side by side, rather than the one
    # or two that happened to fit spilling their ops between them.
    detail = len(graph.nodes) <= 2 * max_nodes
    waiting: list[list[Path]] = []
    level = [p for p in index.children[()] if _may_open(graph, p)]
    while level:
        # a fold and its box of the others are not a level of the program: opened
        # where they fit, their members join this level (layer0 beside layer1 …)
        while folds := [p for p in level if _synthetic(graph, p) in ("fold", "rest")]:
            level = [p for p in level if p not in folds]
            siblings: dict[Path, list[Path]] = {}  # the boxes of one long fold: all or none
            for fold in folds:
                siblings.setdefault(fold[:-1], []).append(fold)
            # layers before one-op look-alikes (a relu call between every two layers)
            for boxes in sorted(siblings.values(), key=lambda b: -_ops_per_member(index, b)):
                grow = sum(_size(index, box) - 1 for box in boxes)
                if visible + grow <= max_nodes:
                    visible += grow
                    expanded.update(boxes)
                    level.extend(c for b in boxes for c in index.children[b] if _may_open(graph, c))
        flat = [
            p
            for p in level
            if structure_only
            and not _shows_structure(graph, index, p)
            and not _first_of_fold(graph, p)  # a fold's first member shows what one is
        ]
        waiting.append(flat)
        opened = []
        for alike in _alike(graph, index, [p for p in level if p not in flat], order):
            grow = sum(_size(index, path) - 1 for path in alike)
            if visible + grow > max_nodes:
                continue
            visible += grow
            expanded.update(alike)
            opened.extend(alike)
        opened.sort(key=order.__getitem__)
        level = [c for p in opened for c in index.children[p] if _may_open(graph, c)]
    for flat in waiting if detail else []:
        for alike in _alike(graph, index, flat, order):
            grow = sum(_size(index, path) - 1 for path in alike)
            if visible + grow <= max_nodes:
                visible += grow
                expanded.update(alike)
    return View(graph, frozenset(expanded))


def _alike(
    graph: Graph, index: GraphIndex, paths: list[Path], order: dict[Path, int]
) -> list[list[Path]]:
    """`paths` in classes of look-alike groups, the classes largest (most items shown) first."""
    classes: dict[tuple[object, ...], list[Path]] = {}
    for path in paths:
        group = graph.groups.get(path) or Group(path, path[-1])
        name = NUMBER.sub("#", group.label.split(" (", 1)[0])
        classes.setdefault((group.kind, group.op, name, _size(index, path)), []).append(path)
    return sorted(
        classes.values(),
        key=lambda alike: (-sum(_size(index, p) for p in alike), min(order[p] for p in alike)),
    )


FEW_LOOSE = 2  # a group with no more loose ops than this, or than sub-groups, shows structure


def _may_open(graph: Graph, path: Path) -> bool:
    """Whether a default view may open `path` at all: not the inputs box, a fold's box of
    other chains or a chain (the fold's label says what they are)."""
    return _synthetic(graph, path) not in ("leaves", "chains", "chain")


def _shows_structure(graph: Graph, index: GraphIndex, path: Path) -> bool:
    """Whether opening `path` shows structure (sub-groups: a layer's attention and mlp,
    the list of a fold's other layers) rather than mostly loose ops."""
    if _synthetic(graph, path) == "rest":
        return True
    if _kind(graph, path) == "fusion":  # one kernel: its fused ops are loose ops
        return False
    kids = index.children[path]
    folds = [  # folds of layers (their other members a "rest"), not of kernels or chains
        k
        for k in kids
        if _synthetic(graph, k) == "fold"
        and any(_synthetic(graph, c) == "rest" for c in index.children[k])
    ]
    if folds and 2 * sum(box_of(index, k).inner_ops for k in folds) > box_of(index, path).inner_ops:
        return True  # mostly repeated structure: `Transformer`, its layers ×96
    # a fusion is one kernel and a chunk's part a run of ops: neither is structure
    flat = sum(1 for k in kids if _synthetic(graph, k) == "chunk" or _kind(graph, k) == "fusion")
    loose = len(index.members[path]) + flat
    return loose <= max(FEW_LOOSE, len(kids) - flat)


def _first_of_fold(graph: Graph, path: Path) -> bool:
    """The member a fold holds as it is (`layer0` of `layer0–layer95 ×96`)."""
    return len(path) > 1 and _synthetic(graph, path[:-1]) == "fold" and not _synthetic(graph, path)


def _ops_per_member(index: GraphIndex, boxes: list[Path]) -> float:
    members = sum(len(index.children[b]) + len(index.members[b]) for b in boxes)
    return sum(box_of(index, b).inner_ops for b in boxes) / max(1, members)


def _top_size(graph: Graph) -> int:
    index = graph_index(graph)
    return len(index.children[()]) + len(index.members[()])


def _synthetic(graph: Graph, path: Path) -> str:
    return synthetic_kind(graph.groups, path)


def _kind(graph: Graph, path: Path) -> str:
    return group_kind(graph.groups, path)


def _size(index: GraphIndex, path: Path) -> int:
    """How many items expanding `path` shows in its place."""
    return len(index.children[path]) + len(index.members[path])


def visible(view: View) -> tuple[list[VisibleNode], list[tuple[str, str]]]:
    """What a view draws: leaf nodes and collapsed groups, and the edges between them."""
    graph, index = view.graph, graph_index(view.graph)
    rep, boxes = _representatives(view, index)
    shown: dict[str, VisibleNode] = {}
    highlighted = Counter(rep[n] for n in view.highlight if n in rep)
    for node in graph.nodes:
        key = rep.get(node.id)
        if key is not None and key not in shown:
            box = boxes[node.scope] if key != node.id else None
            shown[key] = _visible_item(view, index, node, box, highlighted[key])
    if view.focus is None:
        for path in graph.groups:
            key = _group_id(path)
            if key not in shown and _is_box(path, view.expanded):
                shown[key] = _group_item(graph.groups[path], index, highlighted[key])
    edges = _edges(graph, rep)
    return list(shown.values()), edges


def expandable(graph: Graph, view: View) -> dict[str, Path]:
    """Groups a user may open by name, label → path: the folds `view` made (`[layer0–
    layer95 ×96]`, `[95 more like layer0]`), then the reader's own groups of `graph`,
    shallowest first (`expand` finds those under the view's synthetic groups)."""
    folds: dict[str, Path] = {}
    synthetic = [
        (p, g)
        for p, g in view.graph.groups.items()
        if synthetic_kind(view.graph.groups, p) in ("fold", "rest", "chains")
    ]
    # folds of layers first, then of kernels; two folds alike (an encoder's and a
    # decoder's layers) are told apart by where they are
    for p, g in sorted(synthetic, key=lambda pg: _kernel_fold(view.graph, pg[0])):
        name = f"[{g.label}]"
        if name in folds:
            where = "/".join(c for c in graph_index(view.graph).reader_paths_of(p) if c)
            name = f"{where}/[{g.label}]" if where else f"{name} ({len(folds)})"
        folds[name] = p
    own = {"/".join(p): p for p in sorted(graph.groups, key=lambda p: (len(p), p))}
    return {**folds, **own}


def _kernel_fold(graph: Graph, path: Path) -> bool:
    """A fold of kernels (or its box of the others): after the folds of layers."""
    fold = path if _synthetic(graph, path) == "fold" else path[:-1]
    return any(_synthetic(graph, c) == "chains" for c in graph_index(graph).children.get(fold, ()))


def match_summary(view: View) -> list[tuple[str, int]]:
    """Where a search's matches are, by top-level group of the view (`layer0–layer95
    ×96`, `loss_fn (11 items)`), most first; matches outside any group as "top level"."""
    counts = match_counts(view)
    groups = view.graph.groups
    tops = [(groups[p].label if p in groups else p[0], n) for p, n in counts.items() if len(p) == 1]
    nodes = graph_index(view.graph).nodes
    loose = sum(1 for i in view.highlight if i in nodes and not nodes[i].scope)
    return sorted([*tops, *([("top level", loose)] if loose else [])], key=lambda t: -t[1])


def match_counts(view: View) -> Counter[Path]:
    """How many highlighted nodes (search results) each group of the view's graph holds,
    folds and the boxes of their other members included."""
    nodes = graph_index(view.graph).nodes
    counts: Counter[Path] = Counter()
    for node_id in view.highlight:
        node = nodes.get(node_id)
        if node is not None:
            counts.update(node.scope[:d] for d in range(1, len(node.scope) + 1))
    return counts


def _representatives(
    view: View, index: GraphIndex
) -> tuple[dict[str, str], dict[Path, Path | None]]:
    """node id → id of what stands for it: the node, or its outermost collapsed group.

    Also: each scope → its outermost collapsed prefix (None when all are expanded).
    """
    rep: dict[str, str] = {}
    boxes: dict[Path, Path | None] = {(): None}
    box_ids: dict[Path, str] = {}
    expanded, focus = view.expanded, view.focus
    # scope by scope (a few thousand), each scope's nodes in one step (tens of thousands)
    for scope, ids in index.members.items():
        if focus is not None:
            ids = [i for i in ids if i in focus]
        if not ids:
            continue
        box = _outermost_box(scope, expanded, boxes)
        if box is None:  # drawn as themselves
            rep.update({i: i for i in ids})
        else:
            box_id = box_ids.get(box) or box_ids.setdefault(box, _group_id(box))
            rep.update(dict.fromkeys(ids, box_id))
    return rep, boxes


def _outermost_box(
    scope: Path, expanded: frozenset[Path], boxes: dict[Path, Path | None]
) -> Path | None:
    """The outermost collapsed prefix of `scope` (None: all expanded), remembered in `boxes`
    for every prefix asked about (the scopes of a layer share theirs)."""
    if scope in boxes:
        return boxes[scope]
    above = _outermost_box(scope[:-1], expanded, boxes)
    found = boxes[scope] = above if above is not None or scope in expanded else scope
    return found


def _is_box(path: Path, expanded: frozenset[Path]) -> bool:
    return path not in expanded and all(path[:d] in expanded for d in range(1, len(path)))


def _group_id(path: Path) -> str:
    return "g:" + "/".join(path)


def _visible_item(
    view: View, index: GraphIndex, node: Node, box: Path | None, matches: int
) -> VisibleNode:
    if box is not None:
        group = view.graph.groups.get(box) or Group(box, box[-1])
        return _group_item(group, index, matches)
    tooltip = "\n".join(
        t for t in (str(node.source or ""), node.attrs.get("op_name", ""), node.type) if t
    )
    return VisibleNode(
        node.id,
        node.label or node.op,
        node.kind,
        node.scope,
        node.op,
        node.type,
        node.source,
        op_count=1 if index.counts(node) else 0,
        highlighted=matches > 0,
        tooltip=tooltip,
        matches=matches,
    )


def _group_item(group: Group, index: GraphIndex, matches: int) -> VisibleNode:
    box = box_of(index, group.path)
    return VisibleNode(
        _group_id(group.path),
        group.label,
        "group",
        group.path,
        group.op or "",
        op_count=box.op_count,
        inner_ops=box.inner_ops,
        top_ops=list(box.top_ops),
        group_kind=group.kind,
        colour=group.attrs.get("colour", ""),
        highlighted=matches > 0,
        tooltip=group.attrs.get("op_name", "") or "/".join(group.path),
        matches=matches,
    )


def _edges(graph: Graph, rep: dict[str, str]) -> list[tuple[str, str]]:
    seen: dict[tuple[str, str], None] = {}
    for edge in graph.edges:
        a, b = rep.get(edge.src), rep.get(edge.dst)
        if a is not None and b is not None and a != b:
            seen[(a, b)] = None
    return list(seen)


def neighbourhood(graph: Graph, node_id: str, radius: int = 2) -> View:
    """The nodes within `radius` edges (either direction) of `node_id`, highlighted.

    Only those nodes are shown (`focus`), with every group on their paths expanded.
    """
    adjacent: dict[str, set[str]] = {}
    for edge in graph.edges:
        adjacent.setdefault(edge.src, set()).add(edge.dst)
        adjacent.setdefault(edge.dst, set()).add(edge.src)
    found = {node_id: 0}
    todo = deque([node_id])
    while todo:
        current = todo.popleft()
        if found[current] == radius:
            continue
        for other in adjacent.get(current, ()):
            if other not in found:
                found[other] = found[current] + 1
                todo.append(other)
    nodes = graph_index(graph).nodes
    expanded = {
        n.scope[:d] for i in found if (n := nodes.get(i)) for d in range(1, len(n.scope) + 1)
    }
    return View(graph, frozenset(expanded), frozenset({node_id}), frozenset(found))


def visible_ids(view: View) -> Iterable[str]:
    """Ids of what a view draws (for tests and the app)."""
    return (item.id for item in visible(view)[0])


# ---------------------------------------------------------------- regions


def name_scope_of(node: Node) -> str:
    """The node's name scope (`layer3/attention`): the compiled reader keeps it in
    attrs (its groups are fusions), the others in the scope path."""
    if "name_scope" in node.attrs:
        return node.attrs["name_scope"]
    return "/".join(node.scope)


def regions(graph: Graph, depth: int = 2) -> list[str]:
    """Name scopes down to `depth` levels, for picking one region of the program."""
    found = set()
    for node in graph.nodes:
        parts = [p for p in name_scope_of(node).split("/") if p]
        found.update("/".join(parts[:d]) for d in range(1, min(depth, len(parts)) + 1))
    return sorted(
        found, key=lambda r: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", r)]
    )


def region_view(graph: Graph, region: str) -> View:
    """Only the ops under name scope `region`, every group on their paths expanded: the
    same region in two IRs (before and after fusion) side by side."""
    ids = {
        n.id
        for n in graph.nodes
        if (scope := name_scope_of(n)) == region or scope.startswith(region + "/")
    }
    nodes = graph_index(graph).nodes
    expanded = {n.scope[:d] for i in ids if (n := nodes.get(i)) for d in range(1, len(n.scope) + 1)}
    return View(graph, frozenset(expanded), frozenset(), frozenset(ids))
