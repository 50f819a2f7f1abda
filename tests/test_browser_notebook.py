"""The example notebook, executed by a real kernel, exported by nbconvert to HTML as
a person would share it, and opened in Chromium: the cells' graphs are drawn, in the
light and the dark JupyterLab theme. Screenshots land in screenshots/."""

from __future__ import annotations

from typing import Any

import pytest
from serving import CHROMIUM, CHROMIUM_ARGS, ROOT, browser_marks

pytestmark = [*browser_marks(), pytest.mark.slow]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_exported_notebook_draws_each_cells_graph(executed: Any, theme: str, tmp_path):
    nbconvert = pytest.importorskip("nbconvert")
    from playwright.sync_api import sync_playwright

    exporter = nbconvert.HTMLExporter(template_name="lab", theme=theme)
    markup, _ = exporter.from_notebook_node(executed)
    page_file = tmp_path / f"notebook-{theme}.html"
    page_file.write_text(markup)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(page_file.as_uri(), wait_until="domcontentloaded")
        cells = page.locator(".jitscope")
        assert cells.count() >= 3  # analyze's Report, viz.show, %jitscope
        first = cells.first
        assert first.locator("svg g.node").count() > 3  # the compiled graph, drawn
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        text = first.evaluate("e => getComputedStyle(e).color")
        assert (background == "rgb(255, 255, 255)") == (theme == "light"), background
        assert text != background  # the theme's own ink: readable on its own paper
        recording = page.locator(".jitscope-rec").first
        assert recording.locator("svg rect").count() == 3  # one bar per compile
        (ROOT / "screenshots").mkdir(exist_ok=True)
        first.scroll_into_view_if_needed()
        page.screenshot(path=str(ROOT / "screenshots" / f"notebook-{theme}.png"))
        recording.scroll_into_view_if_needed()
        page.screenshot(path=str(ROOT / "screenshots" / f"notebook-recording-{theme}.png"))
        browser.close()
