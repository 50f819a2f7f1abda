"""The Specialization panel in a real browser (Debian's headless Chromium): on the
`arange_static` sample, and on a function with a pytree argument and a static one,
reached from the Overview, its buttons answered by the worker's real jit cache.
Screenshots (1440×2400) land in screenshots/ for a person to look at.
"""

from __future__ import annotations

import shutil
from urllib.parse import urlencode

from serving import browser_marks
from test_browser import SHOTS, browser, page, shot  # noqa: F401
from test_browser_history import home, results, server  # noqa: F401

pytestmark = browser_marks()

TALL = {"width": 1440, "height": 2400}
STEP = """import jax.numpy as jnp


def step(params, x, n):
    h = x @ params["w"] + params["b"]
    return h.reshape(n, -1).sum(axis=0)  # n rows: n must be static
"""
STEP_ARGS = "{'w': f32[8,4], 'b': f32[4]}, f32[6,8], 3"


def open_panel(page) -> None:  # noqa: F811
    results(page)
    page.get_by_role("button", name="Open the specialization").click()
    page.get_by_text("the three-value rule").first.wait_for()


def answers(page):  # noqa: F811
    """The answers of the what-would-recompile buttons (each in an alert box)."""
    return page.locator("[data-testid=stAlert]", has_text="changed spec")


def table_text(page, cell: str, nth: int = 0) -> str:  # noqa: F811
    """The text of the `nth` table, once a cell holding `cell` is there: the grid draws
    on a canvas and fills its accessibility table (hidden) after drawing."""
    grid = page.locator("[data-testid=stDataFrame]").nth(nth)
    grid.locator("td", has_text=cell).first.wait_for(state="attached")
    return grid.text_content() or ""


def tall_shot(page, name: str, anchor) -> None:  # noqa: F811
    page.set_viewport_size(TALL)
    shot(page, name, anchor)
    shutil.copy(SHOTS / f"{name}.png", f"/tmp/{name}.png")


def test_the_panel_on_arange_static_says_n_is_static_and_asks_the_cache(page) -> None:  # noqa: F811
    page.goto(f"{page.base_url}/?sample=arange_static")  # a sample's link runs at once
    open_panel(page)
    text = table_text(page, "static value")
    assert "static value" in text and "dynamic, known shape" in text
    assert "the value 16" in text and "single device cpu:0" in text
    page.get_by_text("Sizes that came from arguments").first.wait_for()
    page.get_by_role("button", name="all", exact=True).click()  # x: dim 0 and dtype
    answers(page).nth(1).wait_for()
    said = " ".join(answers(page).all_inner_texts())
    assert "miss: jit traces and compiles again" in said and "x: dtype f32 → bf16" in said
    assert "the new trace fails" in said  # f32[17] + arange(16) does not broadcast
    tall_shot(page, "explore_specialization_arange", page.get_by_text("the three-value rule"))


def test_the_panel_on_a_pytree_and_a_static_argument(page) -> None:  # noqa: F811
    link = urlencode({"code": STEP, "function": "step", "args": STEP_ARGS, "static": "n"})
    page.goto(f"{page.base_url}/?{link}")  # a link with code waits for Analyze
    page.get_by_role("button", name="Analyze").click()
    open_panel(page)
    text = table_text(page, "the value 3")
    for leaf in ("params['b']", "params['w']", "x", "n"):
        assert leaf in text
    assert "f32[8,4]" in text and "the value 3" in text
    ops = table_text(page, "reshape", nth=1)  # reshape(n, -1): sized by n
    assert "n, x.shape[1]" in ops  # n's value first, then the dimensions equal to 8
    page.get_by_role("button", name="another value: 3 → 4").click()
    answers(page).first.wait_for()
    assert "n (static): 3 → 4" in answers(page).first.inner_text()
    page.get_by_role("button", name="dtype f32 → bf16").first.click()  # params['b']
    answers(page).nth(1).wait_for()
    assert "params['b']: dtype f32 → bf16" in answers(page).first.inner_text()  # newest first
    tall_shot(page, "explore_specialization_pytree", page.get_by_text("the three-value rule"))
