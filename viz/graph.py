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

import math
import re
import weakref
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from viz.ir.model import Graph, Group, Node, Path, SourceLoc

DEFAULT_NODES = 80  # the default view's budget: readable, and quick for dot to lay out
MAX_NODES = 300  # the most items a default view shows, whatever budget is asked for
INPUT_GROUP_MIN = 12  # more top-level inputs (or constants) than this → one box
HUB_DEGREE = 8  # a drawn node with more neighbours than this does not constrain the layout
MIN_RUN = 3  # shorter runs of same-source top-level items are not chunked
FONT = "Helvetica"
COLOURS = {  # fusion colour classes → fill colours
    "loop": "#cfe3ff",
    "input": "#ffe2b8",
    "output": "#e3d7f7",
    "custom": "#f9d2e6",
    "collective": "#ffd0d0",
    "dot": "#c9efc9",
}
GROUP_FILL = "#eeeeee"
HIGHLIGHT = "#d7263d"
SYNTHETIC = "synthetic"  # Group.attrs key marking groups a view added


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


# ---------------------------------------------------------------- index


@dataclass
class _Index:
    """Per-graph lookups, built once per graph object.

    What a collapsed group's box says (`_box`) is worked out when it is first
    drawn: a default view draws a few dozen boxes of a graph with thousands of nodes.
    """

    nodes: dict[str, Node]
    children: dict[Path, list[Path]]  # parent path (() = top) → child group paths
    members: dict[Path, list[str]]  # group path (() = top) → direct member node ids
    counted: set[str]  # ids of nodes op_histogram counts
    # for `_box`: the graph's nodes and groups (not the graph: the cache must not
    # keep it alive), each scope's node positions, and which scopes op_histogram counts
    node_list: list[Node]
    groups: dict[Path, Group]
    positions: dict[Path, list[int]]
    counts_scope: dict[Path, bool]
    opaque: set[Path]
    group_order: dict[Path, int]  # position in graph.groups
    boxes: dict[Path, _Box] = field(default_factory=dict)


@dataclass
class _Box:
    """What a collapsed group stands for."""

    op_count: int  # histogram ops at or under it
    inner_ops: int  # ops strictly inside it
    top_ops: list[tuple[str, int]]  # the three most common of those


# id(graph) → (weak reference to it, its sizes when indexed, index). Weak, so that
# the cache does not keep big graphs (and the views' regrouped copies) alive: an
# entry goes when its graph does.
_CACHE: dict[int, tuple[weakref.ref[Graph], tuple[int, int, int], _Index]] = {}


def _index(graph: Graph) -> _Index:
    key = (len(graph.nodes), len(graph.edges), len(graph.groups))
    hit = _CACHE.get(id(graph))
    if hit and hit[0]() is graph and hit[1] == key:
        return hit[2]
    index = _build_index(graph)
    if len(_CACHE) > 16:
        _CACHE.clear()
    _CACHE[id(graph)] = (weakref.ref(graph, _forget(id(graph))), key, index)
    return index


def _forget(graph_id: int) -> Callable[[weakref.ref[Graph]], None]:
    def forget(ref: weakref.ref[Graph]) -> None:
        hit = _CACHE.get(graph_id)
        if hit is not None and hit[0] is ref:
            del _CACHE[graph_id]

    return forget


def _build_index(graph: Graph) -> _Index:
    opaque = {p for p, g in graph.groups.items() if g.opaque}
    paths = dict.fromkeys(graph.groups)
    for scope in dict.fromkeys(n.scope for n in graph.nodes):
        # scopes a producer forgot to describe are groups too
        paths.update(dict.fromkeys(scope[:d] for d in range(1, len(scope) + 1)))
    children: dict[Path, list[Path]] = {(): []}
    members: dict[Path, list[str]] = {(): []}
    positions: dict[Path, list[int]] = {(): []}
    for path in paths:
        children.setdefault(path[:-1], []).append(path)
        children.setdefault(path, [])
        members.setdefault(path, [])
        positions.setdefault(path, [])
    counts_scope: dict[Path, bool] = {}  # per scope: does op_histogram count its ops?
    counted: set[str] = set()
    for i, node in enumerate(graph.nodes):
        scope = node.scope
        members[scope].append(node.id)
        positions[scope].append(i)
        if node.kind != "op":
            continue
        if scope not in counts_scope:
            counts_scope[scope] = not _inside(scope, opaque)
        if counts_scope[scope]:
            counted.add(node.id)
    return _Index(
        graph.node_map(),
        children,
        members,
        counted,
        graph.nodes,
        graph.groups,
        positions,
        counts_scope,
        opaque,
        {p: k for k, p in enumerate(graph.groups)},
    )


def _box(index: _Index, path: Path) -> _Box:
    """Counts and top ops of `path`, as `model.op_histogram` counts them."""
    found = index.boxes.get(path)
    if found is not None:
        return found
    below = [path]  # path and every path under it
    for sub in below:
        below.extend(index.children.get(sub, ()))
    ops: Counter[str] = Counter()
    count = 0
    node_list, positions, counts_scope = index.node_list, index.positions, index.counts_scope
    for i in sorted(i for sub in below for i in positions.get(sub, ())):  # in graph order
        node = node_list[i]
        if node.kind == "op":
            ops[node.op] += 1
            count += counts_scope[node.scope]
    groups, order = index.groups, index.group_order
    for sub in sorted((p for p in below if p in order), key=order.__getitem__):
        op = groups[sub].op
        if op:
            if sub != path:
                ops[op] += 1
            if not _inside(sub[:-1], index.opaque):
                count += 1
    found = index.boxes[path] = _Box(count, sum(ops.values()), ops.most_common(3))
    return found


def _inside(scope: Path, paths: set[Path]) -> bool:
    return any(scope[:depth] in paths for depth in range(1, len(scope) + 1))


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
    """`path` as `graph` spells it: possibly under synthetic groups (a chunk, its part)."""
    if path in graph.groups or not path:
        return path
    for head, group in graph.groups.items():
        if group.attrs.get(SYNTHETIC) and (*head, *path) in graph.groups:
            return (*head, *path)
    return path


def expand_to_depth(graph: Graph, depth: int) -> View:
    """Every group up to `depth` levels deep expanded (0: all collapsed)."""
    return View(graph, frozenset(p for p in graph.groups if len(p) <= depth))


def default_view(graph: Graph, max_nodes: int = DEFAULT_NODES) -> View:
    """Groups expanded breadth-first (shallowest, then largest first) within `max_nodes`.

    `max_nodes` is capped at MAX_NODES. Groups that look alike (the same kind,
    op, label up to its numbers, and size: the 24 `layerN` scopes of a
    transformer, or their `attention` scopes) are expanded together or not at
    all, so repeated structure is drawn the same way everywhere.

    When the graph has more than `max_nodes` nodes, many top-level inputs (or
    constants) are folded into one box, and a top level that alone has more
    than `max_nodes` members is chunked into runs of consecutive nodes (see
    `_chunks`); both are synthetic groups on a copy of the graph (they have no
    op, so counts do not change). A graph that fits is shown fully expanded.
    """
    max_nodes = min(max_nodes, MAX_NODES)
    graph = _fold_top_level(graph, max_nodes)
    index = _index(graph)
    visible = len(index.children[()]) + len(index.members[()])
    expanded: set[Path] = set()
    order = {path: i for i, path in enumerate(index.children)}
    level = [p for p in index.children[()] if not _is_folded_leaves(graph, p)]
    while level:
        opened = []
        for alike in _alike(graph, index, level, order):
            grow = sum(_size(index, path) - 1 for path in alike)
            if visible + grow > max_nodes:
                continue
            visible += grow
            expanded.update(alike)
            opened.extend(alike)
        opened.sort(key=order.__getitem__)
        level = [c for p in opened for c in index.children[p] if not _is_folded_leaves(graph, c)]
    return View(graph, frozenset(expanded))


_NUMBER = re.compile(r"\d+")


def _alike(
    graph: Graph, index: _Index, paths: list[Path], order: dict[Path, int]
) -> list[list[Path]]:
    """`paths` in classes of look-alike groups, the classes largest (most items shown) first."""
    classes: dict[tuple[object, ...], list[Path]] = {}
    for path in paths:
        group = graph.groups.get(path) or Group(path, path[-1])
        name = _NUMBER.sub("#", group.label.split(" (", 1)[0])
        classes.setdefault((group.kind, group.op, name, _size(index, path)), []).append(path)
    return sorted(
        classes.values(),
        key=lambda alike: (-sum(_size(index, p) for p in alike), min(order[p] for p in alike)),
    )


def _is_folded_leaves(graph: Graph, path: Path) -> bool:
    group = graph.groups.get(path)
    return group is not None and group.attrs.get(SYNTHETIC) == "leaves"


def _size(index: _Index, path: Path) -> int:
    """How many items expanding `path` shows in its place."""
    return len(index.children[path]) + len(index.members[path])


def visible(view: View) -> tuple[list[VisibleNode], list[tuple[str, str]]]:
    """What a view draws: leaf nodes and collapsed groups, and the edges between them."""
    graph, index = view.graph, _index(view.graph)
    rep, boxes = _representatives(view, index)
    shown: dict[str, VisibleNode] = {}
    highlighted = {rep[n] for n in view.highlight if n in rep}
    for node in graph.nodes:
        key = rep.get(node.id)
        if key is not None and key not in shown:
            box = boxes[node.scope] if key != node.id else None
            shown[key] = _visible_item(view, index, node, box, key in highlighted)
    if view.focus is None:
        for path in graph.groups:
            key = _group_id(path)
            if key not in shown and _is_box(path, view.expanded):
                shown[key] = _group_item(graph.groups[path], index, key in highlighted)
    edges = _edges(graph, rep)
    return list(shown.values()), edges


def _representatives(view: View, index: _Index) -> tuple[dict[str, str], dict[Path, Path | None]]:
    """node id → id of what stands for it: the node, or its outermost collapsed group.

    Also: each scope → its outermost collapsed prefix (None when all are expanded).
    """
    rep: dict[str, str] = {}
    boxes: dict[Path, Path | None] = {}
    expanded, focus = view.expanded, view.focus
    for node_id, node in index.nodes.items():
        if focus is not None and node_id not in focus:
            continue
        scope = node.scope
        if scope not in boxes:
            boxes[scope] = next(
                (scope[:d] for d in range(1, len(scope) + 1) if scope[:d] not in expanded), None
            )
        box = boxes[scope]
        rep[node_id] = node_id if box is None else _group_id(box)
    return rep, boxes


def _is_box(path: Path, expanded: frozenset[Path]) -> bool:
    return path not in expanded and all(path[:d] in expanded for d in range(1, len(path)))


def _group_id(path: Path) -> str:
    return "g:" + "/".join(path)


def _visible_item(
    view: View, index: _Index, node: Node, box: Path | None, lit: bool
) -> VisibleNode:
    if box is not None:
        group = view.graph.groups.get(box) or Group(box, box[-1])
        return _group_item(group, index, lit)
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
        op_count=1 if node.id in index.counted else 0,
        highlighted=lit,
        tooltip=tooltip,
    )


def _group_item(group: Group, index: _Index, lit: bool) -> VisibleNode:
    box = _box(index, group.path)
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
        highlighted=lit,
        tooltip=group.attrs.get("op_name", "") or "/".join(group.path),
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
    nodes = _index(graph).nodes
    expanded = {
        n.scope[:d] for i in found if (n := nodes.get(i)) for d in range(1, len(n.scope) + 1)
    }
    return View(graph, frozenset(expanded), frozenset({node_id}), frozenset(found))


# ---------------------------------------------------------------- search

_LINE = re.compile(r"^(?:line\s*|l|:)(\d+)$")
_FILE_LINE = re.compile(r"^(.+):(\d+)$")
_DIMS = re.compile(r"^\[?\d+(?:\s*,\s*\d+)*\]?$")


def find(graph: Graph, query: str) -> list[str]:
    """Ids of nodes (in graph order) matching the query.

    The query is a source line ('line 12', ':12', 'model.py:12'), a shape
    ('f32[8,128]', '8,128') or else a substring of the op name or label ('dot').
    """
    q = query.strip().lower()
    if not q:
        return []
    return [n.id for n in graph.nodes if _matches(n, q)]


def _matches(node: Node, q: str) -> bool:
    line = _LINE.match(q)
    if line:
        return node.source is not None and node.source.line == int(line.group(1))
    file_line = _FILE_LINE.match(q)
    if file_line and node.source is not None and file_line.group(2).isdigit():
        file, number = file_line.groups()
        return node.source.line == int(number) and node.source.file.lower().endswith(file)
    if _DIMS.match(q):
        dims = q.strip("[]").replace(" ", "")
        return f"[{dims}]" in node.type.replace(" ", "")
    if "[" in q:
        return q.replace(" ", "") in node.type.lower().replace(" ", "")
    return q in node.op.lower() or q in node.label.lower()


# ---------------------------------------------------------------- synthetic groups


def _fold_top_level(graph: Graph, max_nodes: int) -> Graph:
    """A copy with many top-level inputs/constants boxed and an oversized top level chunked.

    A graph whose every node fits in `max_nodes` is returned as it is.
    """
    if len(graph.nodes) <= max_nodes:
        return graph
    top = [n for n in graph.nodes if not n.scope]
    moves: dict[str, Path] = {}
    new_groups: list[Group] = []
    for kind, name in (("input", "inputs"), ("constant", "constants")):
        ids = [n.id for n in top if _leaf_kind(n) == kind]
        if len(ids) > INPUT_GROUP_MIN:
            path = (_fresh(graph, f"[{name}]"),)
            new_groups.append(_synthetic(path, f"{name} ({len(ids)})", "leaves"))
            moves.update(dict.fromkeys(ids, path))
    items = _top_items(graph, moves)
    if len(items) + len(new_groups) > max_nodes:
        chunks = _chunks(graph, items, max_nodes - len(new_groups))
        for k, (label, members, parts) in enumerate(chunks):
            path = (_fresh(graph, f"[chunk {k + 1}]"),)
            new_groups.append(_synthetic(path, label, "chunk"))
            moves.update(dict.fromkeys(members, path))
            for j, (part_label, part) in enumerate(parts):
                sub = (*path, _fresh(graph, f"[part {j + 1}]"))
                new_groups.append(_synthetic(sub, part_label, "chunk"))
                moves.update(dict.fromkeys(part, sub))
    if not moves:
        return graph
    return _regroup(graph, moves, new_groups)


def _leaf_kind(node: Node) -> str:
    """'constant' for constant ops too (`stablehlo.constant`, HLO `constant`)."""
    return "constant" if node.op.rsplit(".", 1)[-1] == "constant" else node.kind


def _fresh(graph: Graph, name: str) -> str:
    while (name,) in graph.groups:
        name += "'"
    return name


def _synthetic(path: Path, label: str, what: str) -> Group:
    return Group(path, label, "scope", attrs={SYNTHETIC: what})


def _top_items(graph: Graph, moved: dict[str, Path]) -> list[str]:
    """Top-level members in program order: node ids and top-level group names."""
    items: dict[str, None] = {}
    for node in graph.nodes:
        if node.id in moved:
            continue
        items["g:" + node.scope[0] if node.scope else node.id] = None
    for path in graph.groups:
        items.setdefault("g:" + path[0], None)
    return list(items)


_Chunk = tuple[str, list[str], list[tuple[str, list[str]]]]  # label, items, parts


def _chunks(graph: Graph, items: list[str], max_nodes: int) -> list[_Chunk]:
    """Runs of consecutive items with the same key, at most max_nodes // 2 entries in all.

    The key is an item's first name scope (`layer3`), else its source function.
    Runs shorter than MIN_RUN stay at top level. A run is divided into parts by
    the next name-scope level (`layer3` into `attention` and `mlp`) when that
    gives it 2 to max_nodes // 4 entries; a run longer than max_nodes // 4 items
    that does not divide so is split into pieces of max_nodes // 4 items. When
    that still leaves more than max_nodes // 2 top-level entries, fixed-size
    chunks of all items are used (labelled with the keys they span).
    """
    info = _item_info(graph)
    target, cap = max(2, max_nodes // 2), max(MIN_RUN, max_nodes // 4)
    chunks: list[_Chunk] = []  # (key, items, parts), labelled below
    for key, members in _runs(items, info, 0):
        if len(members) < MIN_RUN:
            continue
        parts = _parts(members, info, cap)
        if parts or len(members) <= cap:
            chunks.append((key, members, parts))
        else:
            chunks.extend((key, members[i : i + cap], []) for i in range(0, len(members), cap))
    loose = len(items) - sum(len(members) for _, members, _ in chunks)
    if len(chunks) + loose > target:
        size = math.ceil(len(items) / target)
        fixed = [items[i : i + size] for i in range(0, len(items), size)]
        chunks = [(_key_span(members, info), members, []) for members in fixed]
    return [
        (
            _chunk_label(key, members, info),
            members,
            [(_chunk_label(k, part, info), part) for k, part in parts],
        )
        for key, members, parts in chunks
    ]


def _runs(items: list[str], info: dict[str, _ItemInfo], level: int) -> list[tuple[str, list[str]]]:
    """Runs of consecutive items with the same key at `level` (0: first name scope)."""
    runs: list[tuple[str, list[str]]] = []
    for item in items:
        keys = info[item].keys if item in info else ()
        key = keys[level] if level < len(keys) else ""
        if runs and runs[-1][0] == key:
            runs[-1][1].append(item)
        else:
            runs.append((key, [item]))
    return runs


def _parts(members: list[str], info: dict[str, _ItemInfo], cap: int) -> list[tuple[str, list[str]]]:
    """A chunk's parts by the next name-scope level, or [] when that does not divide it."""
    parts = [(k, part) for k, part in _runs(members, info, 1) if len(part) >= MIN_RUN]
    entries = len(parts) + len(members) - sum(len(part) for _, part in parts)
    return parts if parts and 2 <= entries <= cap else []


def _key_span(members: list[str], info: dict[str, _ItemInfo]) -> str:
    """`layer3`, or `layer3–layer4` for items whose keys run from one to the other."""
    keys = [info[m].keys[0] for m in members if m in info and info[m].keys[0]]
    if not keys:
        return ""
    return keys[0] if keys[0] == keys[-1] else f"{keys[0]}–{keys[-1]}"


@dataclass
class _ItemInfo:
    keys: tuple[str, ...]  # chunking keys: name-scope components, else (source function,)
    lines: set[int]


def _item_info(graph: Graph) -> dict[str, _ItemInfo]:
    """Each top-level item's chunking keys and source lines."""
    info: dict[str, _ItemInfo] = {}
    for node in graph.nodes:
        item = "g:" + node.scope[0] if node.scope else node.id
        found = info.get(item)
        if found is None:
            found = info[item] = _ItemInfo(_keys(node, graph.groups.get(node.scope[:1])), set())
        if node.source is not None:
            found.lines.add(node.source.line)
    return info


def _keys(node: Node, group: Group | None) -> tuple[str, ...]:
    scope = (group.attrs.get("name_scope") if group else None) or node.attrs.get("name_scope", "")
    if scope:
        return tuple(scope.split("/"))
    if node.source is not None:
        return (node.source.function or node.source.file,)
    return (node.kind if node.kind != "op" else "",)


def _chunk_label(key: str, members: list[str], info: dict[str, _ItemInfo]) -> str:
    lines = sorted(set().union(*(info[m].lines for m in members if m in info)))
    where = f", lines {lines[0]}–{lines[-1]}" if lines else ""
    return f"{key or 'ops'} ({len(members)} items{where})"


def _regroup(graph: Graph, moves: dict[str, Path], new_groups: list[Group]) -> Graph:
    """A copy of `graph` with moved top-level items under their synthetic group."""
    group_moves = {m[2:]: p for m, p in moves.items() if m.startswith("g:")}
    nodes = []
    for node in graph.nodes:
        head = moves.get(node.id) if not node.scope else group_moves.get(node.scope[0])
        nodes.append(_moved_node(node, head + node.scope) if head else node)
    groups = {g.path: g for g in new_groups}
    for path, group in graph.groups.items():
        head = group_moves.get(path[0], ())
        groups[head + path] = _moved_group(group, head + path) if head else group
    return Graph(graph.ir, nodes, graph.edges, groups)


# `dataclasses.replace(node, scope=...)` without its per-call field introspection,
# which dominated regrouping big graphs; every field is passed on.
def _moved_node(n: Node, scope: Path) -> Node:
    return Node(n.id, n.op, n.label, n.type, scope, n.source, n.kind, n.attrs)


def _moved_group(g: Group, path: Path) -> Group:
    return Group(path, g.label, g.kind, g.op, g.opaque, g.attrs)


# ---------------------------------------------------------------- DOT


def to_dot(view: View, title: str = "") -> str:
    """Graphviz DOT for a view: clusters for expanded groups, boxes for collapsed ones."""
    items, edges = visible(view)
    return _dot(view, items, edges, title)


def _dot(view: View, items: list[VisibleNode], edges: list[tuple[str, str]], title: str) -> str:
    lines = [
        "digraph G {",
        f'  graph [rankdir=TB, fontname="{FONT}", fontsize=12, labelloc=t, '
        f"label={_q(title)}, nodesep=0.25, ranksep=0.35];",
        f'  node [fontname="{FONT}", fontsize=10, height=0.3];',
        f'  edge [fontname="{FONT}", fontsize=8, color="#8a8a8a", arrowsize=0.6];',
    ]
    # An item linked to items in more than HUB_DEGREE top-level clusters (the
    # inputs box, a scalar constant, a shared mask function used by every layer)
    # does not get its edges drawn: routing hundreds of long edges into all the
    # layers made dot take seconds, and the browser give up, while showing
    # little. Its label says how many items it is linked to; expanding a box, or
    # focusing on the neighbourhood of a node, shows them.
    fans = _fans(view, items, edges)
    if fans:
        items = [_quiet(item, fans[item.id]) if item.id in fans else item for item in items]
        edges = [(a, b) for a, b in edges if a not in fans and b not in fans]
    lines.extend(_clusters(view, items))
    hubs = _hubs(edges)
    for a, b in edges:
        # Edges of a hub (the inputs box, a mask used by every layer) do not
        # constrain ranks: dot lays clusters side by side when one node feeds
        # (or is fed by) them all.
        style = ' [constraint=false, color="#cfcfcf"]' if a in hubs or b in hubs else ""
        lines.append(f"  {_q(a)} -> {_q(b)}{style};")
    lines.append("}")
    return "\n".join(lines)


def _hubs(edges: list[tuple[str, str]]) -> set[str]:
    """Ids with more than HUB_DEGREE distinct neighbours."""
    return {k for k, n in _degree(edges).items() if n > HUB_DEGREE}


def _degree(edges: list[tuple[str, str]]) -> Counter[str]:
    """Distinct neighbours of each id (the edges are deduplicated)."""
    degree: Counter[str] = Counter()
    for a, b in edges:
        degree[a] += 1
        degree[b] += 1
    return degree


def _fans(view: View, items: list[VisibleNode], edges: list[tuple[str, str]]) -> dict[str, int]:
    """Items linked to items in more than HUB_DEGREE expanded top-level groups → their
    number of neighbours.

    None in a neighbourhood (focus) view: there the edges are the point.
    """
    if view.focus is not None:
        return {}
    cluster = {item.id: item.path[0] for item in items if item.path[:1] in view.expanded}
    spread: dict[str, set[str]] = {}
    for a, b in edges:
        if b in cluster:
            spread.setdefault(a, set()).add(cluster[b])
        if a in cluster:
            spread.setdefault(b, set()).add(cluster[a])
    fans = {k for k, tops in spread.items() if len(tops) > HUB_DEGREE}
    if not fans:
        return {}
    degree = _degree(edges)
    return {k: degree[k] for k in fans}


def _quiet(item: VisibleNode, neighbours: int) -> VisibleNode:
    note = f"linked to {neighbours} items (edges not drawn)"
    return replace(item, label=f"{item.label}\n{note}", tooltip=f"{note}\n{item.tooltip}")


def _clusters(view: View, items: list[VisibleNode]) -> list[str]:
    """Node statements nested in `subgraph cluster_...` blocks for expanded groups."""
    by_parent: dict[Path, list[VisibleNode]] = {}
    for item in items:
        parent = item.path[:-1] if item.kind == "group" else item.path
        by_parent.setdefault(parent, []).append(item)
    used = {p[:d] for p in by_parent for d in range(1, len(p) + 1)}
    children: dict[Path, list[Path]] = {}
    for path in sorted(used, key=lambda p: (len(p), p)):
        children.setdefault(path[:-1], []).append(path)
    return _cluster_body(view, (), by_parent, children, 1)


def _cluster_body(
    view: View,
    path: Path,
    by_parent: dict[Path, list[VisibleNode]],
    children: dict[Path, list[Path]],
    depth: int,
) -> list[str]:
    pad = "  " * depth
    out = [pad + _node_stmt(item) for item in by_parent.get(path, [])]
    for child in children.get(path, []):
        group = view.graph.groups.get(child)
        label = group.label if group else child[-1]
        out.append(f"{pad}subgraph {_q('cluster_' + '/'.join(child))} {{")
        out.append(f"{pad}  label={_q(label)}; {_cluster_style(group)}")
        out.extend(_cluster_body(view, child, by_parent, children, depth + 1))
        out.append(pad + "}")
    return out


def _cluster_style(group: Group | None) -> str:
    if group is not None and group.kind == "fusion":
        fill = COLOURS.get(group.attrs.get("colour", ""), COLOURS["loop"])
        return f'style="rounded,filled"; fillcolor="{fill}"; color="#7a7a7a";'
    if group is not None and group.attrs.get(SYNTHETIC):
        return 'style="rounded,dashed"; color="#9a9a9a";'
    return 'style="rounded"; color="#9a9a9a";'


def _node_stmt(item: VisibleNode) -> str:
    attrs = _group_attrs(item) if item.kind == "group" else _leaf_attrs(item)
    if item.tooltip:
        attrs["tooltip"] = item.tooltip
    if item.highlighted:
        attrs.update(color=HIGHLIGHT, penwidth="2.5", fontcolor=HIGHLIGHT)
    body = ", ".join(f"{k}={_q(v)}" for k, v in attrs.items())
    return f"{_q(item.id)} [{body}];"


def _leaf_attrs(item: VisibleNode) -> dict[str, str]:
    text = item.label if not item.type else f"{item.label}\n{_short(item.type)}"
    shapes = {"input": "invhouse", "output": "house", "constant": "note"}
    fills = {"input": "#dff3e4", "output": "#fde7c8", "constant": "#f4f4f4"}
    return {
        "label": text,
        "shape": shapes.get(item.kind, "box"),
        "style": "rounded,filled" if item.kind == "op" else "filled",
        "fillcolor": fills.get(item.kind, "#ffffff"),
    }


def _group_attrs(item: VisibleNode) -> dict[str, str]:
    ops = ", ".join(f"{_short_op(op)} ×{n}" for op, n in item.top_ops)
    noun = "fused ops" if item.group_kind == "fusion" else "ops"
    label = f"{item.label}\n{item.inner_ops} {noun}" + (f": {ops}" if ops else "")
    fill = COLOURS.get(item.colour, COLOURS["loop"]) if item.group_kind == "fusion" else GROUP_FILL
    return {"label": label, "shape": "box", "style": "filled,bold", "fillcolor": fill}


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short_op(op: str) -> str:
    return op.split(".", 1)[1] if op.startswith("stablehlo.") else op


def _q(text: str) -> str:
    """A DOT double-quoted string."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def to_svg(dot: str) -> str:
    """Render DOT to SVG with Graphviz's `dot` or pip's graphviz-pure (viz.render);
    RuntimeError (viz.render.DotNotFound) when neither is installed."""
    from viz import render

    return render.svg(dot)


def summary(graph: Graph) -> dict[str, object]:
    """What the report stores per IR: node counts and the default view's DOT."""
    view = default_view(graph)
    items, edges = visible(view)
    return {
        "total_nodes": len(graph.nodes),
        "visible_nodes": len(items),
        "dot": _dot(view, items, edges, ""),
    }


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
    nodes = _index(graph).nodes
    expanded = {n.scope[:d] for i in ids if (n := nodes.get(i)) for d in range(1, len(n.scope) + 1)}
    return View(graph, frozenset(expanded), frozenset(), frozenset(ids))
