"""Graph panels: find, expand/collapse, neighbourhood, node details, DOT/SVG, and
the pan-and-zoom frame they are drawn in."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st

import viz.graph
from ui.tables import table
from viz.graph.render import svg_size
from viz.ir.model import IR, Graph
from viz.units import listed, plural

IR_TITLES = {IR.JAXPR: "jaxpr", IR.STABLEHLO: "StableHLO", IR.COMPILED: "Compiled HLO"}
PANEL_WIDTH, PANEL_HEIGHT = 540, 680  # a graph panel's frame beside the code, CSS pixels


def graph_panel(
    ir: IR,
    graph: Graph,
    key: str,
    title: str = "",
    highlight: frozenset[str] = frozenset(),
    drawn: str = "",
    on_pick: Callable[[str | None], None] | None = None,
) -> None:
    """A graph with find, expand/collapse, neighbourhood and DOT/SVG export; `highlight`:
    node ids marked until a search replaces them (a sharded program's collectives, a
    followed line's nodes); `drawn`: the default view's DOT as the worker wrote it
    (`report.graphs[ir].dot`), drawn as it is, titled, while the panel shows that view
    unmarked; `on_pick`: called back with the node (or a group's name) picked in Node
    details, None when unpicked."""
    # folded to read in the frame (a 24-layer model's layers stacked would not)
    budget = viz.graph.framed_budget(graph, (PANEL_WIDTH, PANEL_HEIGHT), drawn)
    view = viz.graph.default_view(graph, budget)
    view.highlight = highlight
    # the default view as the worker drew it
    untouched = not highlight and budget == viz.graph.DEFAULT_NODES
    labels = viz.graph.expandable(graph, view)
    c1, c2, c3 = st.columns([2, 2, 1])
    query = c1.text_input(
        "Find",
        key=f"{key}_find",
        placeholder="dot, f32[8,128], :12",
        help="an op (dot), a shape (f32[8,128]) or a line of your code (:12)",
    )
    opened = c2.multiselect(
        "Expand groups", list(labels), key=f"{key}_open", placeholder=f"{len(labels)} groups"
    )
    depth = c3.number_input(
        "Expand depth", 0, 12, value=None, key=f"{key}_depth", placeholder="auto"
    )
    if depth is not None:
        view = viz.graph.expand_to_depth(graph, int(depth))
    for name in opened:
        view = viz.graph.expand(view, labels[name])
    untouched = untouched and depth is None and not opened and not query
    if query:
        found = viz.graph.find(graph, query)
        view.highlight = frozenset(found)  # boxes and folds say how many they hold
        where = listed((f"{label}: {n}" for label, n in viz.graph.match_summary(view)), 4, " · ")
        st.caption(f"{len(found)} matches for “{query}”" + (f" · {where}" if where else ""))
        if found and st.button("Show the first match's neighbourhood", key=f"{key}_first"):
            st.session_state[f"{key}_focus"] = found[0]
            st.rerun()
    focus = st.session_state.get(f"{key}_focus")
    if focus in graph.node_map():
        view, untouched = viz.graph.neighbourhood(graph, focus, radius=2), False
        if st.button(
            f"Show the whole graph (now: the neighbourhood of {focus})", key=f"{key}_unfocus"
        ):
            del st.session_state[f"{key}_focus"]
            st.rerun()
    visible, _ = viz.graph.visible(view)
    if len(visible) > viz.graph.MAX_NODES:  # laying out thousands of boxes takes dot minutes
        st.warning(
            f"That view has {len(visible)} nodes; jitscope draws at most {viz.graph.MAX_NODES}. "
            "Expand fewer groups, or use Find to focus on a neighbourhood."
        )
        view, untouched = viz.graph.default_view(graph, budget), budget == viz.graph.DEFAULT_NODES
        visible, _ = viz.graph.visible(view)
    dot = _titled(drawn, title, view) if untouched and drawn else viz.graph.to_dot(view, title)
    st.caption(
        f"Showing {len(visible)} of {len(graph.nodes)} nodes · expand a group above, "
        "or search to focus on a neighbourhood"
    )
    show_graph(dot, len(visible), height=PANEL_HEIGHT)
    node_details(graph, visible, key, on_pick)
    d1, d2, _ = st.columns([1, 1, 4])
    d1.download_button("DOT", dot, f"{ir}.dot", "text/vnd.graphviz", key=f"{key}_dot")
    # rendered only when clicked: dot can take seconds on a large view
    d2.download_button(
        "SVG",
        lambda: viz.graph.to_svg(dot),
        f"{ir}.svg",
        "image/svg+xml",
        key=f"{key}_svg",
        on_click="ignore",
    )


def _titled(drawn: str, title: str, view: viz.graph.View) -> str:
    """The worker's DOT of the default view under `title`; built again from `view` only
    if it is not a DOT this version writes."""
    try:
        return viz.graph.titled(drawn, title)
    except ValueError:
        return viz.graph.to_dot(view, title)


def fusion_compare(before: Graph, after: Graph, key: str) -> None:
    """One name-scope region before fusion (StableHLO) and after (compiled HLO)."""
    graphs = before, after
    found_after = set(viz.graph.regions(after))  # once: 4 ms on a 24-layer model's HLO
    common = [r for r in viz.graph.regions(before) if r in found_after]
    st.markdown("**Before and after fusion** · the same region of your program in both IRs")
    if not common:
        st.caption(
            "No name scope appears in both IRs: wrap parts of your function in "
            "`jax.named_scope('…')` to compare them here."
        )
        return
    region = st.selectbox("Region (name scope)", common, key=f"{key}_region")
    titles = ("before fusion: StableHLO", "after fusion: compiled HLO")
    views = [viz.graph.region_view(graph, region) for graph in graphs]
    dots = [
        viz.graph.to_dot(view, f"{region} · {t}") for view, t in zip(views, titles, strict=True)
    ]
    box = shared_box(dots)
    for column, view, dot, title in zip(st.columns(2), views, dots, titles, strict=True):
        shown, _ = viz.graph.visible(view)
        column.caption(f"{title} · {len(shown)} nodes")
        with column:
            show_graph(dot, len(shown), height=560, box=box)


PAN_ZOOM = Path(__file__).resolve().parent.parent / "assets" / "pan_zoom.html"
Box = tuple[float, float]  # width and height, CSS pixels


def show_graph(dot: str, nodes: int, height: int = 680, box: Box | None = None) -> None:
    """The graph as SVG (Graphviz's `dot`, or pip's graphviz-pure: viz.graph.render) in a
    pan-and-zoom frame: wheel zooms, drag pans, double-click fits. `box`: what the first
    view fits in the frame (default: the graph itself); graphs side by side pass their
    `shared_box`, to read at one scale. Without a renderer, Streamlit's own chart."""
    try:
        svg = viz.graph.to_svg(dot)
    except RuntimeError:
        st.graphviz_chart(dot, width="stretch" if nodes > 24 else "content")
        return
    svg = svg[svg.index("<svg") :]  # drop the XML prologue and doctype
    # the SVG is Graphviz's output (labels XML-escaped), never raw user HTML
    frame = PAN_ZOOM.read_text().replace("__BOX__", json.dumps(box)).replace("__SVG__", svg)
    st.iframe(frame.replace("__THEME__", _theme()), height=height)


def _theme() -> str:
    """'dark' where the viewer's page is dark (the frame then draws the graph in dark
    colours, as the page around it), else 'light'."""
    try:
        return "dark" if st.context.theme.type == "dark" else "light"
    except AttributeError:  # a Streamlit without st.context.theme
        return "light"


def shared_box(dots: list[str]) -> Box | None:
    """The box that fits each of `dots`' SVGs: frames of one size that fit it draw their
    graphs at one scale, their labels at one size (a wider graph does not shrink its
    own). None without a renderer."""
    try:
        sizes = [svg_size(viz.graph.to_svg(dot)) for dot in dots]
    except RuntimeError:
        return None
    known = [size for size in sizes if size]
    if not known:
        return None
    return max(w for w, _ in known), max(h for _, h in known)


def node_details(
    graph: Graph,
    visible: list[Any],
    key: str,
    on_pick: Callable[[str | None], None] | None = None,
) -> None:
    """Op, types, attributes and source line of one node of the current view; `on_pick`
    hears the node's id (a group's: its name) when one is picked."""
    items = {
        f"{v.label.splitlines()[0]} · {v.type or v.kind}"
        + (f" · line {v.source.line}" if v.source else ""): v
        for v in visible
    }
    names = {label: v.path[-1] if v.kind == "group" else v.id for label, v in items.items()}
    choice = st.selectbox(
        "Node details",
        list(items),
        index=None,
        key=f"{key}_node",
        placeholder=f"{plural(len(items), 'node')} shown",
        on_change=None
        if on_pick is None
        else lambda: on_pick(names.get(st.session_state[f"{key}_node"])),
    )
    if choice is None:
        return
    item = items[choice]
    node = graph.node_map().get(item.id)
    rows = {
        "op": item.op or item.kind,
        "type": item.type,
        "group": "/".join(item.path) or "(top level)",
    }
    if item.kind == "group":
        rows["ops inside"] = ", ".join(f"{op} ×{n}" for op, n in item.top_ops)
    if node is not None:
        rows.update({k: str(v) for k, v in node.attrs.items()})
    source = item.source or (node.source if node else None)
    if source:
        rows["source"] = str(source)
    table([{"field": k, "value": v} for k, v in rows.items()])
    if node is not None and st.button("Show its neighbourhood", key=f"{key}_hood"):
        st.session_state[f"{key}_focus"] = node.id  # read before drawing, on the rerun
        st.rerun()
