"""Explore draws each stage as it finishes (issue #36), in a real browser (Debian's
headless Chromium): on the 24-layer sample made 96 layers deep, the jaxpr's counts and
an earlier stage's graph (the jaxpr's, then StableHLO's when its part arrives) are on
screen while XLA still compiles, under a stage bar whose clock runs.
Screenshots (1440×1700) land in screenshots/ and /tmp for a person to look at.
"""

from __future__ import annotations

import re
import shutil
from urllib.parse import urlencode

import pytest
from serving import browser_marks
from test_browser import SHOTS, browser, page, server, shot  # noqa: F401

from viz.samples import get_sample

pytestmark = [*browser_marks(), pytest.mark.slow]

LAYERS = 96
TALL = {"width": 1440, "height": 1700}
COMPILING = re.compile(r"Under way: compile (\d+\.\d) s")


def deep_model_link(base_url: str) -> str:
    """A link carrying the sample's code at LAYERS layers (code from a link waits for
    Analyze)."""
    sample = get_sample("transformer_24")
    code = sample.code.replace("N_LAYERS = 24", f"N_LAYERS = {LAYERS}")
    assert f"N_LAYERS = {LAYERS}" in code
    return f"{base_url}/?{urlencode({'code': code, 'function': 'forward', 'args': sample.args})}"


def compiling_for(page) -> float | None:  # noqa: F811
    """The seconds the stage bar says the compile has been under way (None: it is not)."""
    found = COMPILING.search(page.evaluate("document.body.textContent") or "")
    return float(found.group(1)) if found else None


# The Overview draws the jaxpr's graph, then StableHLO's once the lowered part
# arrives (both while XLA compiles): either one is the stage drawn early.
GRAPH_WHILE_COMPILING = """() => {
  const text = document.body.textContent || "";
  const frame = document.querySelector("[data-testid=stIFrame]");
  const drawn = frame && frame.contentDocument &&
    frame.contentDocument.querySelector("svg g.node");
  const early = text.includes("As traced: jaxpr") || text.includes("Before fusion: StableHLO");
  return text.includes("Under way: compile") && early &&
    /jaxpr equations\\s*[0-9]/.test(text) && Boolean(drawn);
}"""


def test_an_earlier_stages_graph_shows_while_xla_still_compiles_a_96_layer_model(page) -> None:  # noqa: F811
    page.set_viewport_size(TALL)
    page.goto(deep_model_link(page.base_url))
    runs = page.get_by_label("Timed runs", exact=True).and_(page.locator("input"))
    runs.fill("0")  # compile only: the test is about the stages before the runs
    runs.press("Tab")
    page.get_by_role("button", name="Analyze").click()
    page.wait_for_function(GRAPH_WHILE_COMPILING, timeout=120_000, polling=50)
    bar = page.locator("[data-testid=stMarkdownContainer]", has_text="Under way: compile")
    bar = bar.first.inner_text()
    assert "load" in bar and "trace" in bar and "lower" in bar  # done, with their seconds
    assert re.search(r"trace \d", bar) and re.search(r"lower \d", bar)
    assert page.get_by_text("8,176").count() + page.get_by_text("8176").count() >= 1
    shot(page, "explore_stages_96_layers")
    shutil.copy(SHOTS / "explore_stages_96_layers.png", "/tmp/explore_stages_96_layers.png")
    first = compiling_for(page)
    assert first is not None
    page.wait_for_function(  # the clock of the stage under way runs while XLA compiles
        f"() => {{ const m = /Under way: compile (\\d+\\.\\d) s/.exec(document.body.textContent);"
        f" return m && parseFloat(m[1]) > {first}; }}",
        timeout=5_000,
    )
    page.get_by_role("tab", name="Timing").wait_for(timeout=120_000)  # the whole result
    assert compiling_for(page) is None and page.get_by_text("Under way").count() == 0
    page.get_by_text("After fusion: compiled HLO").first.wait_for()
