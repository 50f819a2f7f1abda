"""Views on the graph model: what to draw, collapsed how, and the DOT to draw it.

A `View` is a graph plus the set of expanded group paths. Groups that are not
expanded are drawn as one box; every edge of the model is drawn between the
visible representatives of its two ends (a leaf node, or the outermost
collapsed group holding it), deduplicated, self-loops dropped, so collapsing
never loses a connection.

Counts in a view follow `model.op_histogram`: a collapsed group's `op_count`
is the number of histogram ops at or under it (its own container op, if any,
included), so the `op_count`s of the visible items plus the container ops of
the expanded groups add up to the model's op count. A box's label shows the
ops inside it (for a fusion: the fused ops) and the three most common.

This module imports neither jax nor streamlit.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from viz.ir.model import Graph, Group, Node, Path, SourceLoc

MAX_NODES = 300
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
    """Per-graph lookups, built once per graph object."""

    nodes: dict[str, Node]
    order: dict[str, int]
    children: dict[Path, list[Path]]  # parent path (() = top) → child group paths
    members: dict[Path, list[str]]  # group path (() = top) → direct member node ids
    counts: Counter[Path]  # histogram ops at or under a group path
    ops: dict[Path, Counter[str]]  # ops strictly inside a group path
    counted: set[str]  # ids of nodes op_histogram counts


_CACHE: dict[int, tuple[Graph, tuple[int, int, int], _Index]] = {}


def _index(graph: Graph) -> _Index:
    key = (len(graph.nodes), len(graph.edges), len(graph.groups))
    hit = _CACHE.get(id(graph))
    if hit and hit[0] is graph and hit[1] == key:
        return hit[2]
    index = _build_index(graph)
    if len(_CACHE) > 16:
        _CACHE.clear()
    _CACHE[id(graph)] = (graph, key, index)
    return index


def _build_index(graph: Graph) -> _Index:
    opaque = {p for p, g in graph.groups.items() if g.opaque}
    index = _Index(graph.node_map(), {}, {(): []}, {(): []}, Counter(), {}, set())
    paths = dict.fromkeys(graph.groups)
    for node in graph.nodes:  # scopes a producer forgot to describe are groups too
        paths.update(dict.fromkeys(node.scope[:d] for d in range(1, len(node.scope) + 1)))
    for path in paths:
        index.children.setdefault(path[:-1], []).append(path)
        index.children.setdefault(path, [])
        index.members.setdefault(path, [])
        index.ops.setdefault(path, Counter())
    for i, node in enumerate(graph.nodes):
        index.order[node.id] = i
        index.members.setdefault(node.scope, []).append(node.id)
        if node.kind != "op":
            continue
        for depth in range(1, len(node.scope) + 1):
            index.ops.setdefault(node.scope[:depth], Counter())[node.op] += 1
        if not _inside(node.scope, opaque):
            index.counted.add(node.id)
            _count_up(index.counts, node.scope)
    for path, group in graph.groups.items():
        if group.op and not _inside(path[:-1], opaque):
            index.counts[path] += 1
            _count_up(index.counts, path[:-1])
        if group.op:
            for depth in range(1, len(path)):
                index.ops[path[:depth]][group.op] += 1
    return index


def _count_up(counts: Counter[Path], scope: Path) -> None:
    for depth in range(1, len(scope) + 1):
        counts[scope[:depth]] += 1


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
    """`path` as `graph` spells it: possibly under a synthetic top-level group."""
    if path in graph.groups or not path:
        return path
    for top, group in graph.groups.items():
        if len(top) == 1 and group.attrs.get(SYNTHETIC) and (top[0], *path) in graph.groups:
            return (top[0], *path)
    return path


def expand_to_depth(graph: Graph, depth: int) -> View:
    """Every group up to `depth` levels deep expanded (0: all collapsed)."""
    return View(graph, frozenset(p for p in graph.groups if len(p) <= depth))


def default_view(graph: Graph, max_nodes: int = MAX_NODES) -> View:
    """Groups expanded breadth-first (shallowest, then largest first) within `max_nodes`.

    When the graph has more than `max_nodes` nodes, many top-level inputs (or
    constants) are folded into one box, and a top level that alone has more
    than `max_nodes` members is chunked into runs of consecutive nodes; both are
    synthetic groups on a copy of the graph (they have no op, so counts do not
    change). A graph that fits is shown fully expanded.
    """
    graph = _fold_top_level(graph, max_nodes)
    index = _index(graph)
    visible = len(index.children[()]) + len(index.members[()])
    expanded: set[Path] = set()
    order = {path: i for i, path in enumerate(index.children)}
    queue: list[tuple[int, int, int, Path]] = []

    def push(paths: list[Path]) -> None:
        for path in paths:
            heapq.heappush(queue, (len(path), -_size(index, path), order[path], path))

    push(index.children[()])
    while queue:
        path = heapq.heappop(queue)[3]
        grow = _size(index, path) - 1
        if visible + grow > max_nodes or _is_folded_leaves(graph, path):
            continue
        visible += grow
        expanded.add(path)
        push(index.children[path])
    return View(graph, frozenset(expanded))


def _is_folded_leaves(graph: Graph, path: Path) -> bool:
    group = graph.groups.get(path)
    return group is not None and group.attrs.get(SYNTHETIC) == "leaves"


def _size(index: _Index, path: Path) -> int:
    """How many items expanding `path` shows in its place."""
    return len(index.children[path]) + len(index.members[path])


def visible(view: View) -> tuple[list[VisibleNode], list[tuple[str, str]]]:
    """What a view draws: leaf nodes and collapsed groups, and the edges between them."""
    graph, index = view.graph, _index(view.graph)
    rep = _representatives(view, index)
    shown: dict[str, VisibleNode] = {}
    highlighted = {rep[n] for n in view.highlight if n in rep}
    for node in graph.nodes:
        key = rep.get(node.id)
        if key is not None and key not in shown:
            shown[key] = _visible_item(view, index, node, key, key in highlighted)
    if view.focus is None:
        for path in graph.groups:
            key = _group_id(path)
            if key not in shown and _is_box(path, view.expanded):
                shown[key] = _group_item(graph.groups[path], index, key in highlighted)
    edges = _edges(graph, rep)
    return list(shown.values()), edges


def _representatives(view: View, index: _Index) -> dict[str, str]:
    """node id → id of what stands for it: the node, or its outermost collapsed group."""
    rep = {}
    for node_id, node in index.nodes.items():
        if view.focus is not None and node_id not in view.focus:
            continue
        rep[node_id] = node_id
        for depth in range(1, len(node.scope) + 1):
            if node.scope[:depth] not in view.expanded:
                rep[node_id] = _group_id(node.scope[:depth])
                break
    return rep


def _is_box(path: Path, expanded: frozenset[Path]) -> bool:
    return path not in expanded and all(path[:d] in expanded for d in range(1, len(path)))


def _group_id(path: Path) -> str:
    return "g:" + "/".join(path)


def _visible_item(view: View, index: _Index, node: Node, key: str, lit: bool) -> VisibleNode:
    if key != node.id:
        path = _path_of(key, node.scope)
        group = view.graph.groups.get(path) or Group(path, path[-1])
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


def _path_of(key: str, scope: Path) -> Path:
    for depth in range(1, len(scope) + 1):
        if _group_id(scope[:depth]) == key:
            return scope[:depth]
    raise KeyError(key)


def _group_item(group: Group, index: _Index, lit: bool) -> VisibleNode:
    ops = index.ops.get(group.path, Counter())
    return VisibleNode(
        _group_id(group.path),
        group.label,
        "group",
        group.path,
        group.op or "",
        op_count=index.counts[group.path],
        inner_ops=sum(ops.values()),
        top_ops=ops.most_common(3),
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
        for k, (label, members) in enumerate(chunks):
            path = (_fresh(graph, f"[chunk {k + 1}]"),)
            new_groups.append(_synthetic(path, label, "chunk"))
            moves.update(dict.fromkeys(members, path))
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


def _chunks(graph: Graph, items: list[str], max_nodes: int) -> list[tuple[str, list[str]]]:
    """Runs of consecutive items with the same source key, at most max_nodes // 2 in all.

    Runs shorter than MIN_RUN stay at top level and long runs are split into
    pieces of at most max_nodes // 4 items; when that still leaves more than
    max_nodes // 2 top-level entries, fixed-size chunks of all items are used.
    """
    info = _item_info(graph)
    runs: list[tuple[str, list[str]]] = []
    for item in items:
        key = info[item][0] if item in info else ""
        if runs and runs[-1][0] == key:
            runs[-1][1].append(item)
        else:
            runs.append((key, [item]))
    target, cap = max(2, max_nodes // 2), max(MIN_RUN, max_nodes // 4)
    pieces = [
        (key, members[i : i + cap])
        for key, members in runs
        if len(members) >= MIN_RUN
        for i in range(0, len(members), cap)
    ]
    loose = len(items) - sum(len(m) for _, m in pieces)
    if len(pieces) + loose > target:
        size = math.ceil(len(items) / target)
        pieces = [("", items[i : i + size]) for i in range(0, len(items), size)]
    return [(_chunk_label(key, members, info), members) for key, members in pieces]


def _item_info(graph: Graph) -> dict[str, tuple[str, set[int]]]:
    """Each top-level item's chunking key (first name scope, else source function) and lines."""
    info: dict[str, tuple[str, set[int]]] = {}
    for node in graph.nodes:
        item = "g:" + node.scope[0] if node.scope else node.id
        if item not in info:
            info[item] = (_key(node, graph.groups.get(node.scope[:1])), set())
        if node.source is not None:
            info[item][1].add(node.source.line)
    return info


def _key(node: Node, group: Group | None) -> str:
    scope = (group.attrs.get("name_scope") if group else None) or node.attrs.get("name_scope", "")
    if scope:
        return scope.split("/")[0]
    if node.source is not None:
        return node.source.function or node.source.file
    return node.kind if node.kind != "op" else ""


def _chunk_label(key: str, members: list[str], info: dict[str, tuple[str, set[int]]]) -> str:
    lines = sorted(set().union(*(info[m][1] for m in members if m in info)))
    where = f", lines {lines[0]}–{lines[-1]}" if lines else ""
    return f"{key or 'ops'} ({len(members)} items{where})"


def _regroup(graph: Graph, moves: dict[str, Path], new_groups: list[Group]) -> Graph:
    """A copy of `graph` with moved top-level items under their synthetic group."""
    group_moves = {m[2:]: p for m, p in moves.items() if m.startswith("g:")}
    nodes = []
    for node in graph.nodes:
        head = moves.get(node.id) if not node.scope else group_moves.get(node.scope[0])
        nodes.append(replace(node, scope=head + node.scope) if head else node)
    groups = {g.path: g for g in new_groups}
    for path, group in graph.groups.items():
        head = group_moves.get(path[0], ())
        groups[head + path] = replace(group, path=head + path) if head else group
    return Graph(graph.ir, nodes, graph.edges, groups)


# ---------------------------------------------------------------- DOT


def to_dot(view: View, title: str = "") -> str:
    """Graphviz DOT for a view: clusters for expanded groups, boxes for collapsed ones."""
    items, edges = visible(view)
    lines = [
        "digraph G {",
        f'  graph [rankdir=TB, fontname="{FONT}", fontsize=12, labelloc=t, '
        f"label={_q(title)}, nodesep=0.25, ranksep=0.35];",
        f'  node [fontname="{FONT}", fontsize=10, height=0.3];',
        f'  edge [fontname="{FONT}", fontsize=8, color="#8a8a8a", arrowsize=0.6];',
    ]
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
    degree: Counter[str] = Counter()
    for a, b in edges:
        degree[a] += 1
        degree[b] += 1
    return {k for k, n in degree.items() if n > HUB_DEGREE}


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
    """Render DOT to SVG with the graphviz `dot` binary."""
    import graphviz

    try:
        return graphviz.Source(dot).pipe(format="svg").decode("utf-8")
    except graphviz.ExecutableNotFound as exc:
        raise RuntimeError(
            "Graphviz's `dot` program was not found; install Graphviz "
            "(e.g. `apt-get install graphviz`) to draw graphs."
        ) from exc


def summary(graph: Graph) -> dict[str, object]:
    """What the report stores per IR: node counts and the default view's DOT."""
    view = default_view(graph)
    items, _ = visible(view)
    return {
        "total_nodes": len(graph.nodes),
        "visible_nodes": len(items),
        "dot": to_dot(view),
    }


def visible_ids(view: View) -> Iterable[str]:
    """Ids of what a view draws (for tests and the app)."""
    return (item.id for item in visible(view)[0])
