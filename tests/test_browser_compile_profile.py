"""Explore's Compile time view in a real browser (Debian's headless Chromium), on the
96-layer transformer (samples/transformer_24.py at 96 layers, opened from a link):
analyzed, then "Where did the compile time go?": what drives the compile, the trace by
line, the icicle of XLA's spans; and on 8 layers, a kernel shown in the fusion map. Screenshots
(1440×2400) land in screenshots/ and /tmp for a person to look at.
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from serving import ROOT, browser_marks
from test_browser import (  # noqa: F401
    browser,
    open_first_rows_kernel,
    open_tab,
    page,
    server,
    shot,
)
from test_browser_history import results
from test_browser_specialization import TALL, table_text, tall_shot

pytestmark = [*browser_marks(), pytest.mark.slow]

LAYERS = 96
SAMPLE = (ROOT / "samples" / "transformer_24.py").read_text()
ATTENTION_LINE = next(
    i + 1 for i, line in enumerate(SAMPLE.splitlines()) if "x = x + attention(" in line
)


def profile(page, layers: int = LAYERS) -> None:  # noqa: F811
    code = SAMPLE.replace("N_LAYERS = 24", f"N_LAYERS = {layers}")
    link = {"code": code, "function": "forward", "args": "params, f32[2,128,256]"}
    page.goto(f"{page.base_url}/?{urlencode(link)}")
    page.get_by_role("button", name="Analyze", exact=True).click()  # code from a link waits
    results(page)
    open_tab(page, "Compile time")
    page.get_by_role("button", name="Where did the compile time go?").click()
    page.get_by_role("heading", name="What drives it").wait_for(timeout=240_000)


def test_the_compile_time_view_names_the_layers_the_loop_and_xlas_spans(page) -> None:  # noqa: F811
    page.set_viewport_size(TALL)
    profile(page)
    drivers = page.locator("[data-testid=stAlert]")
    assert drivers.filter(has_text=f"×{LAYERS}: 100% of the program").count() == 1
    assert drivers.filter(has_text=f"unrolled {LAYERS} times").count() == 1
    page.get_by_test_id("stPageLink-NavLink").filter(has_text="Compile vs program size").wait_for()
    trace = table_text(page, f"line {ATTENTION_LINE}")  # the hottest line by total
    assert "x = x + attention(" in trace and "layernorm" in trace
    icicle = page.locator(".js-plotly-plot").first
    icicle.locator("g.slice").first.wait_for()
    assert "PjRtCpuClient::Compile" in icicle.inner_text()
    metric = page.locator("[data-testid=stMetric]", has_text="in XLA's named steps")
    covered = int(metric.locator("[data-testid=stMetricValue]").inner_text().rstrip("%"))
    unspanned = drivers.filter(has_text="is in no XLA span")  # one fact, one number:
    if unspanned.count():  # the metric and the driver's share add up to the whole compile
        outside = int(re.search(r"\((\d+)%\) of", unspanned.first.inner_text()).group(1))
        assert 90 <= covered + outside <= 101
    else:
        assert 90 <= covered <= 100
    tall_shot(page, "compile_time_view", page.get_by_role("heading", name="What drives it"))
    heading = page.get_by_role("heading", name="XLA compile · its own spans")
    heading.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(800)
    shot(page, "compile_time_xla")


def test_a_kernel_of_the_profile_opens_in_the_fusion_map(page) -> None:  # noqa: F811
    page.set_viewport_size(TALL)
    profile(page, layers=8)  # the fusion map draws both graphs: a smaller model
    table = page.locator("[data-testid=stDataFrame]").filter(
        has=page.locator("td", has_text="_fusion")
    )
    kernel = open_first_rows_kernel(page, table)
    lit = page.get_by_text(f"kernel {kernel} lit")  # the map picked it: both graphs light it up
    lit.nth(1).wait_for()
    tall_shot(
        page,
        "compile_time_kernel_in_fusion_map",
        page.get_by_role("tab", name="Fusion", selected=True).first,
    )
