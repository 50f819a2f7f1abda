"""What the page review found hard to read, measured in a real browser (Debian's
headless Chromium): the 24-layer model's graph on Explore's first screen draws its labels
at a readable size without zooming, beside the counts and charts; the fusion map's group
labels draw at their box's width, not squeezed into one kernel's stripe, and in the dark
theme each letter has a dark halo over the kernels' colours. Screenshots land in
screenshots/ for a person to look at."""

from __future__ import annotations

import pytest
from serving import browser_marks, overview_charts
from test_browser import SHOTS, browser, graph_nodes, server  # noqa: F401
from test_browser_first_screen import in_view
from test_browser_layout import window  # noqa: F401  (a tab of a size and theme)

from viz.graph import render

pytestmark = [
    *browser_marks(),
    pytest.mark.skipif(render.dot_program() is None, reason="needs a Graphviz renderer"),
]

READABLE_PX = 9  # a label's line box this tall or more: 10 px type, read without zooming

# each node's label lines: their drawn height, and any line squeezed narrower than its
# box (the box's widest shape: a striped box draws each kernel's stripe first)
LABELS_JS = """
() => [...document.querySelectorAll('#graph svg g.node')].map(node => {
  const shapes = [...node.querySelectorAll('polygon, path, ellipse')];
  const room = Math.max(...shapes.map(s => s.getBBox().width)) - 10;
  const texts = [...node.querySelectorAll('text')];
  return {
    label: texts.map(t => t.textContent).join(' / '),
    stripes: shapes.filter(s => s.getAttribute('fill') !== 'none').length,
    height: Math.min(...texts.map(t => t.getBoundingClientRect().height)),
    squeezed: texts.filter(t => t.hasAttribute('textLength')
      && +t.getAttribute('textLength') < room - 1).map(t => t.textContent),
    halo: texts.every(t => getComputedStyle(t).paintOrder.startsWith('stroke')
      && getComputedStyle(t).stroke !== 'none'),
  };
})
"""


def graph_frame(tab):
    """The first graph frame on the page, once the run is over (the Overview draws the
    report's own view first, then the graph models' view once they follow it)."""
    graph_nodes(tab).first.wait_for()
    tab.locator("[data-testid=stStatusWidget]").wait_for(state="hidden")
    graph_nodes(tab).first.wait_for()
    tab.mouse.move(tab.viewport_size["width"] - 4, 4)  # no tooltip
    tab.wait_for_timeout(1000)  # the frame's fit, the last layout pass
    return next(f for f in tab.frames if f.query_selector("#graph svg g.node"))


@pytest.mark.parametrize(
    "window", [(1440, 900, "light"), (1280, 800, "dark")], indirect=True, ids=str
)
def test_the_24_layer_models_graph_reads_on_the_first_screen(window) -> None:  # noqa: F811
    tab = window
    tab.goto(f"{tab.base_url}/?sample=transformer_24")
    overview_charts(tab).nth(1).wait_for()
    labels = graph_frame(tab).evaluate(LABELS_JS)
    SHOTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(SHOTS / f"readable_{tab.size}_{tab.theme}_overview.png"))
    small = [(n["label"], round(n["height"], 1)) for n in labels if n["height"] < READABLE_PX]
    assert len(labels) >= 4 and not small, small
    assert tab.evaluate("window.scrollY") == 0
    for box in (graph_nodes(tab).first, tab.locator("[data-testid=stVegaLiteChart]").first):
        assert in_view(tab, box.bounding_box())  # the graph and the charts, first screen


@pytest.mark.parametrize(
    "window", [(1440, 900, "light"), (1440, 900, "dark")], indirect=True, ids=str
)
def test_the_fusion_maps_group_labels_read_in_both_themes(window) -> None:  # noqa: F811
    tab = window
    tab.goto(f"{tab.base_url}/?sample=transformer_24")
    tab.get_by_role("tab", name="Fusion", exact=True).first.click()
    tab.get_by_role("tab", name="Fusion", selected=True).first.wait_for()
    frame = graph_frame(tab)
    tab.locator("[data-testid=stIFrame]").first.scroll_into_view_if_needed()
    tab.screenshot(path=str(SHOTS / f"readable_{tab.size}_{tab.theme}_fusion_map.png"))
    groups = [n for n in frame.evaluate(LABELS_JS) if n["stripes"] > 1]
    assert groups, "a group of several kernels, drawn in stripes"
    squeezed = [n["squeezed"] for n in groups if n["squeezed"]]
    assert not squeezed, squeezed
    haloed = [n["halo"] for n in groups]
    assert all(haloed) if tab.theme == "dark" else not any(haloed)
