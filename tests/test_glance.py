"""The Overview's graph at a glance (`viz.graph.glance`): a 24-layer model in the small
frame beside the code reads (its labels at 10 px or more), named box by box, with no
node or edge lost to the naming; a small program is drawn whole."""

from __future__ import annotations

import importlib
from itertools import pairwise

import pytest
from test_graph import layered

import viz.graph
from viz.graph.dot import to_svg
from viz.graph.glance import TOOLS, coarser, short_label
from viz.graph.render import dot_program, svg_size

FRAME = (540, 240)  # pages/explore.py: GRAPH_WIDTH × GRAPH_HEIGHT

pytestmark = pytest.mark.skipif(dot_program() is None, reason="needs a Graphviz renderer")


def fitted_scale(dot: str, frame: tuple[float, float]) -> float:
    width, height = svg_size(viz.graph.to_svg(dot))
    return min(frame[0] / width, (frame[1] - TOOLS) / height)


def test_a_24_layer_model_reads_in_the_overviews_frame() -> None:
    graph = layered(24)
    before = viz.graph.to_dot(viz.graph.framed_view(graph, FRAME))  # what it drew before
    assert fitted_scale(before, FRAME) < viz.graph.GLANCE_SCALE
    seen = viz.graph.glance(graph, FRAME)
    assert seen.scale >= viz.graph.GLANCE_SCALE
    assert fitted_scale(seen.dot, FRAME) == pytest.approx(seen.scale)
    assert "layer0" in seen.dot and "items" not in seen.dot  # named; counts in tooltips
    assert seen.shown >= 4  # inputs, the first layer, the fold of the others, the output


def test_each_coarser_view_closes_the_deepest_groups_and_keeps_every_node() -> None:
    graph = layered(24)
    views = coarser(viz.graph.default_view(graph))
    assert not views[-1].expanded and views[0].expanded
    for finer, folded in pairwise(views):
        assert folded.expanded < finer.expanded
        deepest = max(len(p) for p in finer.expanded)
        assert all(len(p) < deepest for p in folded.expanded)
        drawn = sum(item.op_count for item in viz.graph.visible(folded)[0])
        assert drawn == sum(item.op_count for item in viz.graph.visible(finer)[0])


def test_a_box_is_named_by_its_first_line_without_its_counts() -> None:
    view = viz.graph.default_view(layered(24), 24)
    names = {short_label(item) for item in viz.graph.visible(view)[0]}
    assert not any("items" in name or "\n" in name for name in names), names


def test_a_small_program_is_drawn_whole_at_its_own_size() -> None:
    graph = layered(1)
    seen = viz.graph.glance(graph, (2000, 2000))
    assert seen.shown == len(viz.graph.visible(viz.graph.default_view(graph))[0])
    assert seen.scale >= 1


def test_a_glance_is_worked_out_once_per_graph_frame_and_marks(monkeypatch) -> None:
    """The page asks on every rerun: the second ask renders nothing."""
    module = importlib.import_module("viz.graph.glance")
    graph = layered(24)
    seen = viz.graph.glance(graph, FRAME)
    rendered: list[str] = []
    monkeypatch.setattr(module, "to_svg", lambda dot: rendered.append(dot) or to_svg(dot))
    assert viz.graph.glance(graph, FRAME) is seen and rendered == []
    marked = frozenset({next(n.id for n in graph.nodes if n.kind == "op")})
    assert viz.graph.glance(graph, FRAME, highlight=marked) is not seen and rendered
