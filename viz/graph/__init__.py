"""Views on the graph model: what to draw, collapsed how, and the DOT to draw it.

- `view`: a `View` (a graph plus its expanded groups), the default view, expand,
  collapse, neighbourhood, regions, and what a view draws (`visible`);
- `index`: per-graph lookups, built once per Graph object;
- `fold`: synthetic groups that keep flat programs readable;
- `repeats`: repeated structure folded (`layer0` … `layer95` as one group ×96);
- `search`: find nodes by op, shape or source line;
- `dot`: the DOT and SVG of a view (`DotStyle` adds attributes), the report's
  graph summary, its DOT given a title (`titled`), and the default view that reads
  in a small frame (`framed_view`);
- `glance`: the Overview's graph, folded and named to read in its small frame.

This package imports neither jax nor streamlit.
"""

from viz.graph.dot import (
    DotStyle,
    framed_budget,
    framed_view,
    summary,
    titled,
    to_dot,
    to_svg,
)
from viz.graph.glance import GLANCE_SCALE, Glance, glance
from viz.graph.search import find
from viz.graph.view import (
    DEFAULT_NODES,
    MAX_NODES,
    View,
    VisibleNode,
    collapse,
    default_view,
    expand,
    expand_to_depth,
    expandable,
    match_counts,
    match_summary,
    name_scope_of,
    neighbourhood,
    region_view,
    regions,
    visible,
    visible_ids,
)

__all__ = [
    "DEFAULT_NODES",
    "GLANCE_SCALE",
    "MAX_NODES",
    "DotStyle",
    "Glance",
    "View",
    "VisibleNode",
    "collapse",
    "default_view",
    "expand",
    "expand_to_depth",
    "expandable",
    "find",
    "framed_budget",
    "framed_view",
    "glance",
    "match_counts",
    "match_summary",
    "name_scope_of",
    "neighbourhood",
    "region_view",
    "regions",
    "summary",
    "titled",
    "to_dot",
    "to_svg",
    "visible",
    "visible_ids",
]
