"""Every page in a real browser (Debian's headless Chromium) at 1280×800 and 1440×900,
in the light and the dark theme, the theme switched without a reload: nothing wider
than its column, no text over text, no label cut without a tooltip to read it whole
(measured from the DOM's boxes: `layout.problems`). Explore is walked tab by tab on the
24-layer transformer, the Cache lab after its one-click story. Screenshots of each page
land in $JITSCOPE_SHOTS (default: screenshots/), for a person to look at.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from layout import problems
from serving import browser_marks
from test_browser import SHOTS, browser, server  # noqa: F401

pytestmark = [*browser_marks(), pytest.mark.slow]

SIZES = [(1440, 900), (1280, 800)]
RESULT_TABS = (
    "Overview",
    "Specialization",
    "jaxpr",
    "StableHLO",
    "Compiled HLO",
    "Fusion",
    "Timing",
    "Compile time",
    "Cost",
    "Memory",
    "Export",
)
PAGES = {  # the other pages, by their path, and their title
    "cache": "Cache lab",
    "history": "History",
    "diff": "Diff",
    "recordings": "Recordings",
    "placement": "Where to put jit",
    "scaling": "Compile time vs program size",
    "shapes": "Shape sweep",
    "buckets": "Batch-size buckets",
}
OTHER = {"light": "dark", "dark": "light"}


def shots() -> Path:
    folder = Path(os.environ.get("JITSCOPE_SHOTS", SHOTS))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def window(browser, server, request):  # noqa: F811
    width, height, theme = request.param
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=theme)
    tab = context.new_page()
    tab.set_default_timeout(180_000)
    tab.base_url, tab.theme, tab.size = server, theme, f"{width}x{height}"
    yield tab
    context.close()


def settle(tab) -> None:
    """No run in progress, no tooltip, the last layout pass done."""
    tab.locator("[data-testid=stStatusWidget]").wait_for(state="hidden")
    tab.evaluate("document.activeElement && document.activeElement.blur()")
    tab.mouse.move(tab.viewport_size["width"] - 4, 4)
    tab.wait_for_timeout(1200)


def look(tab, name: str, found: dict[str, list[str]]) -> None:
    """What `problems` finds on the page as drawn now, and its screenshot."""
    settle(tab)
    said = problems(tab)
    if said:
        found[name] = said
    tab.screenshot(path=str(shots() / f"layout_{name}_{tab.size}_{tab.theme}.png"))


@pytest.mark.parametrize(
    "window",
    [(w, h, theme) for w, h in SIZES for theme in ("light", "dark")],
    indirect=True,
    ids=lambda p: f"{p[0]}x{p[1]}-{p[2]}",
)
def test_every_page_fits_its_columns_with_no_text_over_text_or_cut_label(window) -> None:
    tab, found = window, {}
    tab.goto(f"{tab.base_url}/?sample=transformer_24")
    tab.get_by_role("tab", name="Memory").first.wait_for()
    for name in RESULT_TABS:
        tab.get_by_role("tab", name=name, exact=True).first.click()
        tab.get_by_role("tab", name=name, selected=True).first.wait_for()
        look(tab, f"explore_{name.replace(' ', '_')}", found)
    tab.get_by_role("tab", name="Overview", exact=True).first.click()
    tab.frame_locator("[data-testid=stIFrame]").first.locator("svg g.node").first.wait_for()
    theme, tab.theme = tab.theme, OTHER[tab.theme]
    tab.emulate_media(color_scheme=tab.theme)  # switched without a reload
    tab.wait_for_function(  # the graph's frame follows the page
        "t => [...document.querySelectorAll('[data-testid=stIFrame]')].every(f => "
        "f.contentDocument.querySelector('#stage').classList.contains(t))",
        arg=tab.theme,
    )
    look(tab, "explore_Overview_switched", found)
    tab.emulate_media(color_scheme=theme)
    tab.theme = theme
    for path, title in PAGES.items():
        tab.goto(f"{tab.base_url}/{path}")
        tab.get_by_role("heading", name=title).first.wait_for()
        if path == "cache":
            tab.get_by_role("button", name="Show the cache at work").click()
            tab.get_by_text("2 compiled entries").first.wait_for()
        look(tab, path, found)
    assert not found, "\n".join(f"{page}: {said}" for page, said in found.items())
