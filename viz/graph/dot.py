"""The DOT (and SVG) of a view: clusters for expanded groups, one box per collapsed
group, fusion colours, and "fans" (items linked to many groups) drawn without edges.

A `DotStyle` adds attributes to what the writer draws (the fusion map's kernel
colours): the hook sees each drawn item and each open group, the writer keeps the
layout."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from viz.graph.fold import SYNTHETIC, synthetic_kind
from viz.graph.render import svg_size
from viz.graph.view import DEFAULT_NODES, View, VisibleNode, default_view, match_counts, visible
from viz.ir.model import Graph, Group, Path

HUB_DEGREE = 8  # a drawn node with more neighbours than this does not constrain the layout


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
KERNEL_GROUPS = ("fusion", "kernel")  # a compiled fusion; a kernel the user wrote (Pallas)
_HEAD = "digraph G {"
HIGHLIGHT = "#d7263d"


def _no_attrs(_: object) -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class DotStyle:
    """Extra DOT attributes: `node` for each drawn item (leaf or collapsed group),
    `cluster` for each open group's cluster, by its path, `layout` for the graph (its
    `rankdir`). An attribute the writer sets too takes the hook's value."""

    node: Callable[[VisibleNode], dict[str, str]] = _no_attrs
    cluster: Callable[[Path], dict[str, str]] = _no_attrs
    layout: Mapping[str, str] = field(default_factory=dict)


PLAIN = DotStyle()


# ---------------------------------------------------------------- DOT


def to_dot(view: View, title: str = "", style: DotStyle = PLAIN) -> str:
    """Graphviz DOT for a view: clusters for expanded groups, boxes for collapsed ones."""
    items, edges = visible(view)
    return _dot(view, items, edges, title, style)


def _dot(
    view: View,
    items: list[VisibleNode],
    edges: list[tuple[str, str]],
    title: str,
    style: DotStyle = PLAIN,
) -> str:
    lines = [
        _HEAD,
        _graph_attrs(title),
        f'  node [fontname="{FONT}", fontsize=10, height=0.3];',
        f'  edge [fontname="{FONT}", fontsize=8, color="#8a8a8a", arrowsize=0.6];',
    ]
    if style.layout:  # a later graph statement overrides the writer's attributes
        lines.append(f"  graph [{', '.join(f'{k}={_q(v)}' for k, v in style.layout.items())}];")
    # An item linked to items in more than HUB_DEGREE layers, open or listed (the
    # inputs box, a scalar constant, a shared mask function used by every layer)
    # does not get its edges drawn: routing hundreds of long edges into all the
    # layers made dot take seconds, and the browser give up, while showing
    # little. Its label says how many items it is linked to; expanding a box, or
    # focusing on the neighbourhood of a node, shows them.
    matches = match_counts(view) if view.highlight else Counter()
    fans = _fans(view, items, edges)
    if fans:
        items = [_quiet(item, fans[item.id]) if item.id in fans else item for item in items]
        edges = [(a, b) for a, b in edges if a not in fans and b not in fans]
    lines.extend(_clusters(view, items, style, matches))
    hubs = _hubs(edges)
    for a, b in edges:
        # Edges of a hub (the inputs box, a mask used by every layer) do not
        # constrain ranks: dot lays clusters side by side when one node feeds
        # (or is fed by) them all.
        quiet = ' [constraint=false, color="#cfcfcf"]' if a in hubs or b in hubs else ""
        lines.append(f"  {_q(a)} -> {_q(b)}{quiet};")
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
    """Items linked to items in more than HUB_DEGREE layers (`_drawn_layer`) → their
    number of neighbours.

    None in a neighbourhood (focus) view: there the edges are the point.
    """
    if view.focus is not None:
        return {}
    cluster = {item.id: layer for item in items if (layer := _drawn_layer(view, item))}
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


def _drawn_layer(view: View, item: VisibleNode) -> Path | None:
    """The layer an item is drawn in, for a fan's reach: its top-level group when that is
    open; or the item itself when it is a closed layer's box in an open fold (the list
    `95 more like layer0` expanded, whose every box the inputs and the mask feed: 190
    long edges, which took dot 2.3 s to route). None: in no layer."""
    top = _top_cluster(view.graph, item.path)
    if top and top in view.expanded:
        return top
    listed = item.kind == "group" and top == item.path and len(top) > 1
    if listed and synthetic_kind(view.graph.groups, top[:-1]) in ("fold", "rest"):
        return top
    return None


def _top_cluster(graph: Graph, path: Path) -> Path:
    """The outermost group of `path` that the program has (a layer), not one a view
    added around it (a fold of the layers, its box of the others)."""
    for depth in range(1, len(path) + 1):
        if synthetic_kind(graph.groups, path[:depth]) in ("", "chunk"):
            return path[:depth]
    return path


def _quiet(item: VisibleNode, neighbours: int) -> VisibleNode:
    note = f"linked to {neighbours} items (edges not drawn)"
    return replace(item, label=f"{item.label}\n{note}", tooltip=f"{note}\n{item.tooltip}")


def _clusters(
    view: View, items: list[VisibleNode], style: DotStyle, matches: Counter[Path]
) -> list[str]:
    """Node statements nested in `subgraph cluster_...` blocks for expanded groups."""
    by_parent: dict[Path, list[VisibleNode]] = {}
    for item in items:
        parent = item.path[:-1] if item.kind == "group" else item.path
        by_parent.setdefault(parent, []).append(item)
    used = {p[:d] for p in by_parent for d in range(1, len(p) + 1)}
    children: dict[Path, list[Path]] = {}
    for path in sorted(used, key=lambda p: (len(p), p)):
        children.setdefault(path[:-1], []).append(path)
    return _cluster_body(view, (), by_parent, children, 1, style, matches)


def _cluster_body(
    view: View,
    path: Path,
    by_parent: dict[Path, list[VisibleNode]],
    children: dict[Path, list[Path]],
    depth: int,
    style: DotStyle,
    matches: Counter[Path],
) -> list[str]:
    pad = "  " * depth
    out = [pad + _node_stmt(item, style) for item in by_parent.get(path, [])]
    for child in children.get(path, []):
        group = view.graph.groups.get(child)
        label = (group.label if group else child[-1]) + _matches(matches[child])
        attrs = {"label": label, **_cluster_attrs(group)}
        attrs.update(style.cluster(child))
        out.append(f"{pad}subgraph {_q('cluster_' + '/'.join(child))} {{")
        out.append(pad + "  " + " ".join(f"{k}={_q(v)};" for k, v in attrs.items()))
        out.extend(_cluster_body(view, child, by_parent, children, depth + 1, style, matches))
        out.append(pad + "}")
    return out


def _matches(count: int) -> str:
    return f" · {count} match{'es' if count != 1 else ''}" if count else ""


def _cluster_attrs(group: Group | None) -> dict[str, str]:
    if group is not None and group.kind in KERNEL_GROUPS:
        fill = COLOURS.get(group.attrs.get("colour", ""), COLOURS["loop"])
        return {"style": "rounded,filled", "fillcolor": fill, "color": "#7a7a7a"}
    if group is not None and group.attrs.get(SYNTHETIC):
        return {"style": "rounded,dashed", "color": "#9a9a9a"}
    return {"style": "rounded", "color": "#9a9a9a"}


def _node_stmt(item: VisibleNode, style: DotStyle) -> str:
    attrs = _group_attrs(item) if item.kind == "group" else _leaf_attrs(item)
    if item.tooltip:
        attrs["tooltip"] = item.tooltip
    if item.highlighted:
        attrs.update(color=HIGHLIGHT, penwidth="2.5", fontcolor=HIGHLIGHT)
    attrs.update(style.node(item))
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
    if not item.inner_ops:  # a box of inputs (or outputs): its label says what it holds
        label = item.label
    if item.matches:  # search results inside the box
        label += "\n" + _matches(item.matches).removeprefix(" · ")
    kernel = item.group_kind in KERNEL_GROUPS
    fill = COLOURS.get(item.colour, COLOURS["loop"]) if kernel else GROUP_FILL
    return {"label": label, "shape": "box", "style": "filled,bold", "fillcolor": fill}


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short_op(op: str) -> str:
    return op.split(".", 1)[1] if op.startswith("stablehlo.") else op


def _graph_attrs(title: str) -> str:
    """The graph's attribute line, the title in it (`titled` swaps it)."""
    # newrank: ranks over the whole graph, not cluster by cluster. With clusters
    # nested in a fold (`layer ×24` > its layers) and edges from outside into them,
    # dot's per-cluster ranking took 7 s where this takes 0.04 s.
    return (
        f'  graph [newrank=true, rankdir=TB, fontname="{FONT}", fontsize=12, labelloc=t, '
        f"label={_q(title)}, nodesep=0.25, ranksep=0.35];"
    )


def titled(dot: str, title: str) -> str:
    """`dot`, written here without a title (a report's default view: `summary`), with
    `title` over it: what `to_dot(view, title)` writes, without working the view's DOT
    out again. ValueError for a DOT this module did not write untitled."""
    head = f"{_HEAD}\n{_graph_attrs('')}\n"
    if not dot.startswith(head):
        raise ValueError("not an untitled DOT of viz.graph.dot")
    return f"{_HEAD}\n{_graph_attrs(title)}\n{dot[len(head) :]}"


def _q(text: str) -> str:
    """A DOT double-quoted string."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def to_svg(dot: str) -> str:
    """Render DOT to SVG with Graphviz's `dot` or pip's graphviz-pure (viz.graph.render);
    RuntimeError (viz.graph.render.DotNotFound) when neither is installed."""
    from viz.graph import render

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


FRAMED_BUDGETS = (DEFAULT_NODES, 40, 24)  # the default view's budgets a frame tries, in turn
MIN_SCALE = 0.45  # below this, a fitted drawing's labels are too small to read


def framed_budget(
    graph: Graph, frame: tuple[float, float], drawn: str = "", min_scale: float = MIN_SCALE
) -> int:
    """The default view's budget for a frame of `frame` (width, height, CSS pixels): the
    largest whose drawing, fitted into the frame, still reads (drawn at `min_scale` or
    more); else the most folded. A 24-layer model's 24 layer boxes stacked fit a small
    frame only at a tenth of their size: folded to `layer1–layer22 ×22` they read.
    `drawn`: the DOT of the default view, where the worker wrote it (`report.graphs`),
    measured instead of built again. Without a renderer, the default budget."""
    for budget in FRAMED_BUDGETS:
        first = budget == FRAMED_BUDGETS[0]
        try:
            dot = drawn if first and drawn else to_dot(default_view(graph, budget))
            size = svg_size(to_svg(dot))
        except RuntimeError:
            return FRAMED_BUDGETS[0]
        if size is None or min(frame[0] / size[0], frame[1] / size[1]) >= min_scale:
            return budget
    return FRAMED_BUDGETS[-1]


def framed_view(graph: Graph, frame: tuple[float, float], min_scale: float = MIN_SCALE) -> View:
    """The default view that reads in a frame of `frame` (see `framed_budget`)."""
    return default_view(graph, framed_budget(graph, frame, min_scale=min_scale))
