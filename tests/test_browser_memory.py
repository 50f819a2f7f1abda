"""Explore's Memory tab in a real browser (Debian's headless Chromium), on the 24-layer
transformer sample at a batch whose activations outgrow its weights: the peak and
XLA's own figure, whether a run fits, memory over program order with the peak marked,
the buffers live at the peak, and a row's kernel opened in the fusion map.
Screenshots (1440×2400) land in screenshots/ and /tmp for a person to look at.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from serving import browser_marks
from test_browser import browser, open_first_rows_kernel, open_tab, page, server  # noqa: F401
from test_browser_history import results
from test_browser_specialization import TALL, table_text, tall_shot

pytestmark = [*browser_marks(), pytest.mark.slow]

ARGS = "params, f32[8,512,256]"  # the attention scores, [8,4,512,512], fill the peak


def memory_tab(page) -> None:  # noqa: F811
    link = {"sample": "transformer_24", "args": ARGS}
    page.goto(f"{page.base_url}/?{urlencode(link)}")  # a sample's link runs at once
    results(page)
    open_tab(page, "Memory")
    page.get_by_role("heading", name="Live at the peak").wait_for(timeout=120_000)


def test_the_memory_tab_shows_the_peak_its_buffers_and_whether_it_fits(page) -> None:  # noqa: F811
    page.set_viewport_size(TALL)
    memory_tab(page)
    metric = page.locator("[data-testid=stMetric]", has_text="XLA's peak")
    assert metric.locator("[data-testid=stMetricValue]").inner_text().endswith("MiB")
    fits = page.locator("[data-testid=stAlert]", has_text="Running needs").first
    assert "at its peak" in fits.inner_text() and "it fits" in fits.inner_text()
    chart = page.locator(".js-plotly-plot").first
    chart.locator("g.scatterlayer").first.wait_for()
    assert "Memory over program order" in chart.inner_text()
    assert "peak" in chart.inner_text()  # the peak's annotation
    rows = table_text(page, "f32[8,4,512,512]")  # the attention scores, at the peak
    assert "argument params" in rows  # the weights are live too
    page.get_by_text("What would lower it").wait_for()
    page.get_by_text("Memory-first schedule").first.wait_for()
    tall_shot(page, "memory_tab", page.get_by_role("heading", name="Live at the peak"))
    page.get_by_role("heading", name="Live at the peak").evaluate(
        "e => e.scrollIntoView({block: 'start'})"
    )
    page.wait_for_timeout(800)
    tall_shot(page, "memory_tab_buffers", None)


def test_a_buffer_at_the_peak_opens_its_kernel_in_the_fusion_map(page) -> None:  # noqa: F811
    page.set_viewport_size(TALL)
    memory_tab(page)
    table = page.locator("[data-testid=stDataFrame]").first
    table.locator("td", has_text="f32[8,4,512,512]").first.wait_for(state="attached")
    kernel = open_first_rows_kernel(page, table)
    page.get_by_text(f"kernel {kernel} lit").nth(1).wait_for(timeout=120_000)
    tall_shot(
        page,
        "memory_kernel_in_fusion_map",
        page.get_by_role("tab", name="Fusion", selected=True).first,
    )


def test_donating_from_the_quick_variants_shows_what_it_saved_at_the_peak(page) -> None:  # noqa: F811
    page.set_viewport_size(TALL)
    page.goto(
        f"{page.base_url}/?{urlencode({'sample': 'elementwise_chain', 'args': 'f32[1024,1024]'})}"
    )
    results(page)
    page.get_by_role("button", name="Donate the arrays").click()
    page.get_by_role("heading", name="Diff").wait_for()
    said = page.get_by_text("Donation saved 4.0 MiB at the peak (8.0 MiB → 4.0 MiB)")
    said.wait_for()
    open_tab(page, "Timings, cost, memory")
    page.get_by_text("live at the peak, largest first").first.wait_for()
    assert "argument x" in table_text(page, "argument x", nth=3)  # A's buffers: x lives on
    tall_shot(page, "memory_diff_donation", page.get_by_role("heading", name="Diff"))
