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


def deep_model_link(base_url: str) -> str:
    """A link carrying the sample's code at LAYERS layers (code from a link waits for
    Analyze)."""
    sample = get_sample("transformer_24")
    code = sample.code.replace("N_LAYERS = 24", f"N_LAYERS = {LAYERS}")
    assert f"N_LAYERS = {LAYERS}" in code
    return f"{base_url}/?{urlencode({'code': code, 'function': 'forward', 'args': sample.args})}"


# Runs in the page before Streamlit's code: every 20 ms, while the stage bar says the
# compile is under way, what the page shows. The stages change under the test's feet
# (a 96-layer compile lasts a few seconds), so the test reads this record afterwards
# instead of sampling the page at moments it cannot choose.
RECORD_JS = """
(() => {
  if (window.top !== window) return;
  const seen = window.__seen = {clocks: [], early: null, after: false};
  setInterval(() => {
    const text = (document.body && document.body.textContent) || "";
    const clock = /Under way: compile (\\d+\\.\\d) s/.exec(text);
    if (!clock) { seen.after = seen.clocks.length > 0; return; }
    seen.clocks.push(parseFloat(clock[1]));
    const frame = document.querySelector("[data-testid=stIFrame]");
    const drawn = frame && frame.contentDocument &&
      frame.contentDocument.querySelector("svg g.node");
    // The Overview draws the jaxpr's graph, then StableHLO's once the lowered part
    // arrives (both while XLA compiles): either one is a stage drawn early.
    const early = text.includes("As traced: jaxpr") || text.includes("Before fusion: StableHLO");
    if (seen.early === null && drawn && early && /jaxpr equations\\s*[0-9]/.test(text)) {
      const bar = [...document.querySelectorAll("[data-testid=stMarkdownContainer]")]
        .find(e => e.textContent.includes("Under way: compile"));
      seen.early = {bar: bar ? bar.innerText : "", text: text};
    }
  }, 20);
})();
"""


def test_an_earlier_stages_graph_shows_while_xla_still_compiles_a_96_layer_model(page) -> None:  # noqa: F811
    page.set_viewport_size(TALL)
    page.add_init_script(RECORD_JS)
    page.goto(deep_model_link(page.base_url))
    runs = page.get_by_label("Timed runs", exact=True).and_(page.locator("input"))
    runs.fill("0")  # compile only: the test is about the stages before the runs
    runs.press("Tab")
    page.get_by_role("button", name="Analyze").click()
    page.wait_for_function("() => window.__seen.early !== null", timeout=120_000, polling=50)
    shot(page, "explore_stages_96_layers")
    shutil.copy(SHOTS / "explore_stages_96_layers.png", "/tmp/explore_stages_96_layers.png")
    page.get_by_role("tab", name="Timing").wait_for(timeout=120_000)  # the whole result
    page.wait_for_function("() => window.__seen.after", timeout=5_000)
    seen = page.evaluate("window.__seen")
    bar, text = seen["early"]["bar"], seen["early"]["text"]
    assert "load" in bar and "trace" in bar and "lower" in bar  # done, with their seconds
    assert re.search(r"trace \d", bar) and re.search(r"lower \d", bar)
    assert "8,176" in text or "8176" in text  # the jaxpr's equations, counted early
    clocks = seen["clocks"]  # the clock of the stage under way ran while XLA compiled
    assert max(clocks) > clocks[0], clocks
    assert page.get_by_text("Under way").count() == 0
    page.get_by_text("After fusion: compiled HLO").first.wait_for()
