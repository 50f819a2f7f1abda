"""A program's graph at a glance, in a small frame (the Overview's, beside the code):
the default view that reads there (`framed_budget`), folded further one level at a
time until its boxes read, each box named only (`layer0`, `mlp`, `21 more like
layer1`: the op counts and lines go to its tooltip), laid out top-down or left to
right, whichever the frame draws larger.

A 24-layer transformer's nine boxes stacked, each with two lines of op counts, drew
at a third of their size in a 540×240 frame; its six top-level boxes, named, read."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from viz.graph.dot import DotStyle, framed_budget, to_dot, to_svg
from viz.graph.index import glances
from viz.graph.render import svg_size
from viz.graph.view import View, VisibleNode, collapse, default_view, visible
from viz.ir.model import Graph, Path

GLANCE_SCALE = 0.75  # a fitted drawing at this scale or more shows its labels at 10 px
TOOLS = 36  # CSS pixels the pan-and-zoom frame keeps above the graph for its buttons
RANKDIRS = ("TB", "LR")
TIGHT = {"ranksep": "0.2", "nodesep": "0.15"}  # inches: short names need less room around
# what a group's first line adds to its name: " (30 items, lines 68–96)"
_ITEMS = re.compile(r" \(\d+ items?(, lines? [^)]*)?\)$")


@dataclass(frozen=True)
class Glance:
    """What the frame draws: the DOT, how many items it shows, and the scale its
    drawing fits the frame at (1: its own size)."""

    dot: str
    shown: int
    scale: float


def glance(
    graph: Graph,
    frame: tuple[float, float],
    drawn: str = "",
    highlight: frozenset[str] = frozenset(),
) -> Glance:
    """The most detailed view whose named drawing, in its better layout, fits `frame`
    (width, height: CSS pixels) at GLANCE_SCALE or more; else the one that fits largest.
    `drawn`: the default view's DOT, where the worker wrote it; `highlight`: node ids to
    mark (a followed line's). Worked out once per graph, frame and marks: the page asks
    on every rerun (a 96-layer model's took 0.2 s with its drawings cached). RuntimeError
    without a renderer."""
    found = glances(graph)
    key = (frame, highlight)  # `drawn` is the graph's own default view: no other answer
    if key not in found:
        found[key] = _glance(graph, frame, drawn, highlight)
    return found[key]


def _glance(
    graph: Graph, frame: tuple[float, float], drawn: str, highlight: frozenset[str]
) -> Glance:
    room = (frame[0], frame[1] - TOOLS)
    best: Glance | None = None
    for view in coarser(default_view(graph, framed_budget(graph, frame, drawn))):
        view.highlight = highlight
        items = len(visible(view)[0])
        dots = [to_dot(view, style=named(view, rankdir)) for rankdir in RANKDIRS]
        for dot, svg in zip(dots, _rendered(dots), strict=True):
            size = svg_size(svg) or room
            scale = min(room[0] / size[0], room[1] / size[1])
            if best is None or scale > best.scale:
                best = Glance(dot, items, scale)
        if best.scale >= GLANCE_SCALE:
            break
    assert best is not None  # a view, at least the one given
    return best


def _rendered(dots: list[str]) -> list[str]:
    """Each DOT's SVG, Graphviz laying them out at once (a process each); the threads
    that wait for it end here: nothing of jitscope's runs on in a caller's process."""
    with ThreadPoolExecutor(len(dots) - 1, thread_name_prefix="jitscope-glance") as pool:
        later = [pool.submit(to_svg, dot) for dot in dots[1:]]
        return [to_svg(dots[0]), *(svg.result() for svg in later)]


def coarser(view: View) -> list[View]:
    """`view`, then it with its deepest open groups closed, and so on to none open."""
    views = [view]
    while views[-1].expanded:
        deepest = max(len(p) for p in views[-1].expanded)
        folded = views[-1]
        for path in [p for p in folded.expanded if len(p) == deepest]:
            folded = collapse(folded, path)
        views.append(folded)
    return views


def named(view: View, rankdir: str) -> DotStyle:
    """Each box and cluster labelled by its name only (the writer's full label goes to
    the box's tooltip), laid out `rankdir`."""

    def node(item: VisibleNode) -> dict[str, str]:
        label = short_label(item)
        if item.matches:
            label += f"\n{item.matches} marked"
        return {"label": label, "tooltip": item.label + _tooltip_tail(item)}

    def cluster(path: Path) -> dict[str, str]:
        group = view.graph.groups.get(path)
        return {"label": _ITEMS.sub("", group.label if group else path[-1])}

    return DotStyle(node, cluster, layout={"rankdir": rankdir, **TIGHT})


def short_label(item: VisibleNode) -> str:
    """A box's name: a group's first line without its item count and lines, a leaf's
    op (its type goes to the tooltip)."""
    return _ITEMS.sub("", item.label.splitlines()[0]) if item.label else item.id


def _tooltip_tail(item: VisibleNode) -> str:
    if item.kind == "group" and item.inner_ops:
        ops = ", ".join(f"{op} ×{n}" for op, n in item.top_ops)
        return f"\n{item.inner_ops} ops" + (f": {ops}" if ops else "")
    return f"\n{item.type}" if item.type else ""
