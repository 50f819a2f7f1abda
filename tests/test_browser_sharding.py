"""Sharding in a real browser (Debian's headless Chromium): a 2-layer MLP's gradient
on cpu:8, opened from a link with its mesh, analyzed, its Sharding tab (per-device
shapes, the all-reduce of the gradients, the compiled graph with the collectives
highlighted and filtered), then another sharding of the same function analyzed and
diffed. Screenshots (1440×2400) land in screenshots/ and /tmp for a person to look at.
"""

from __future__ import annotations

from urllib.parse import urlencode

from serving import browser_marks
from test_browser import browser, page, shot  # noqa: F401
from test_browser_history import home, results, server  # noqa: F401
from test_browser_specialization import TALL, table_text, tall_shot
from test_sharding import DATA_PARALLEL, MLP, MODEL_SPLIT

pytestmark = browser_marks()


def open_sharding(page) -> None:  # noqa: F811
    link = {"code": MLP, "function": "grads", "args": DATA_PARALLEL, "mesh": "data=8"}
    page.goto(f"{page.base_url}/?{urlencode({**link, 'device': 'cpu:8'})}")
    page.get_by_role("button", name="Analyze", exact=True).click()  # code from a link waits
    results(page)
    page.get_by_role("button", name="Open the sharding").click()
    page.get_by_text("Collectives XLA inserted").first.wait_for()


def test_the_sharding_tab_shows_per_device_shapes_and_the_gradients_all_reduce(page) -> None:  # noqa: F811
    page.set_viewport_size(TALL)
    open_sharding(page)
    args = table_text(page, "P('data', None)", 0)
    assert "f32[8, 128]" in args and "replicated" in args  # 64 rows over 8 devices
    collectives = table_text(page, "all-reduce", 2)
    assert "145.1 KiB" in collectives  # every gradient, once
    page.get_by_role("button", name="Profile kernels").click()  # collectives join the profile
    page.get_by_text("Profiled with").first.wait_for()
    spent = page.locator("[data-testid=stMetric]", has_text="collective time / step")
    assert "–" not in spent.inner_text()
    tall_shot(page, "sharding_tab", page.get_by_text("read from the compiled executable").first)
    page.get_by_text("Only the collectives and the ops next to them").click()
    page.wait_for_timeout(1500)
    tall_shot(page, "sharding_collectives_only", page.get_by_text("Collectives XLA inserted").first)


def test_another_sharding_of_the_same_function_opens_the_diff(page) -> None:  # noqa: F811
    page.set_viewport_size(TALL)
    open_sharding(page)
    page.get_by_label("Args spec", exact=True).fill(MODEL_SPLIT)
    page.get_by_label("Mesh", exact=True).last.fill("data=4, model=2")
    page.keyboard.press("Tab")
    page.get_by_role("button", name="Analyze and diff").click()
    page.get_by_text("Arguments split differently").first.wait_for()
    text = table_text(page, "all-gather", 0)
    assert "all-reduce" in text
    tall_shot(page, "sharding_diff", page.get_by_role("heading", name="Diff").first)


def test_a_mesh_too_big_for_the_device_says_so_and_offers_a_bigger_one(page) -> None:  # noqa: F811
    link = {"code": MLP, "function": "grads", "args": DATA_PARALLEL, "mesh": "data=8"}
    page.goto(f"{page.base_url}/?{urlencode({**link, 'device': 'cpu'})}")
    page.get_by_text("The mesh data=8 needs 8 devices, and cpu has 1.").first.wait_for()
    page.get_by_role("button", name="Analyze", exact=True).click()
    card = page.locator("[data-testid=stAlert]", has_text="device unavailable")
    card.first.wait_for()
    assert "needs 8 devices, and cpu has 1 device" in card.first.inner_text()
    page.get_by_role("button", name="Use cpu:8").click()
    page.get_by_role("button", name="Use cpu:8").wait_for(state="detached")
    page.get_by_role("button", name="Analyze", exact=True).click()
    results(page)
    page.get_by_text("mesh data=8 over 8 devices").first.wait_for()  # the Overview's line
