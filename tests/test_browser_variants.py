"""Donation, compiler options and a quick variant in a real browser (Debian's headless
Chromium), on a server with an empty history of its own. Screenshots at 1440×900 and
1280×720 land in screenshots/ for a person to look at.
"""

from __future__ import annotations

from urllib.parse import urlencode

from serving import browser_marks
from test_browser import browser, open_inputs, page, shot  # noqa: F401
from test_browser_history import home, results, server  # noqa: F401

from viz.history import History

pytestmark = browser_marks()

SMALL = {"width": 1280, "height": 720}


def both_sizes(page, name: str, anchor) -> None:  # noqa: F811
    shot(page, name, anchor)
    page.set_viewport_size(SMALL)
    shot(page, f"{name}_1280", anchor)
    page.set_viewport_size({"width": 1440, "height": 900})


def unfold(page, label: str, inside: str) -> None:  # noqa: F811
    """Open the expander `label` until `inside` shows: a rerun that lands as it is
    clicked (the run's history record, just after the result) draws it folded again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(3):
        page.get_by_text(label).first.click()
        try:
            page.get_by_text(inside).first.wait_for(timeout=10_000)
            return
        except PlaywrightTimeout:
            continue
    page.get_by_text(inside).first.wait_for()


def test_donation_options_and_the_fusion_off_variant(page, home) -> None:  # noqa: F811
    link = urlencode({"sample": "elementwise_chain", "args": "f32[128,128]", "donate": "x"})
    page.goto(f"{page.base_url}/?{link}")  # a sample's link runs at once
    results(page)
    open_inputs(page)
    unfold(page, "Compiler options", "every op becomes its own kernel")
    both_sizes(page, "explore_options", page.get_by_text("Compiler options").first)

    page.get_by_role("tab", name="Memory", exact=True).click()
    panel = page.get_by_text("a donated input's buffer may become an output's").first
    panel.wait_for()
    page.get_by_text("reused in place").first.wait_for()
    both_sizes(page, "explore_donation", panel)

    page.get_by_role("tab", name="Overview", exact=True).click()  # the quick variants
    page.get_by_role("button", name="Fusion off").click()
    page.get_by_role("heading", name="Diff").wait_for()
    runs = History(home / "history.sqlite").runs()
    assert runs[0].settings.compiler_options == {"xla_disable_hlo_passes": "fusion"}
    assert runs[0].settings.donate == runs[1].settings.donate == ["x"]
    kernels = [r.summary["counts"]["compiled.kernel_count"] for r in (runs[1], runs[0])]
    page.get_by_text(f"{kernels[0]} → {kernels[1]}").first.wait_for()  # compiled kernels
    assert kernels[1] >= 10 * kernels[0]
    page.locator("[data-testid=stDataFrame]").nth(2).wait_for()
    both_sizes(page, "diff_variant_fusion_off", page.get_by_role("heading", name="Diff"))
