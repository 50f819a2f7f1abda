"""The Memory tab on a real TPU v5e's reports (tests/fixtures/tpu_v5e/reports/) in a
real browser (Debian's headless Chromium): a saved report shown as Explore shows it
(tests/pages/saved_report.py), its error card and Memory tab, nothing run. The sort and
cumsum's peak with VMEM apart, the narrow array's padding, and the out-of-memory refusal
with the estimate. Screenshots (1440×2400) land in screenshots/ and /tmp.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from serving import browser_marks, running_server
from test_browser import browser, page  # noqa: F401
from test_browser_specialization import TALL, table_text, tall_shot

pytestmark = [*browser_marks(), pytest.mark.slow]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("streamlit") / "server.log"
    with running_server(log, script="tests/pages/saved_report.py") as url:
        yield url


def saved(page, name: str) -> None:  # noqa: F811
    page.set_viewport_size(TALL)
    page.goto(f"{page.base_url}/?report={name}")
    page.get_by_role("heading", name="on tpu").wait_for(timeout=60_000)
    chart = page.locator(".js-plotly-plot").first
    chart.locator("g.scatterlayer").first.wait_for()


def metric(page, label: str) -> str:  # noqa: F811
    found = page.locator("[data-testid=stMetric]", has_text=label).first
    return found.locator("[data-testid=stMetricValue]").inner_text()


def test_the_chips_peak_with_vmem_apart(page) -> None:  # noqa: F811
    saved(page, "peak")
    page.get_by_text("Live at the peak").first.wait_for()
    rows = table_text(page, "f32[2048,8192]")
    assert "sort.6" in rows and "padding" not in rows  # 508 B of scalars' tiles: unsaid
    page.get_by_text("65.1 MiB in VMEM, the core's on-chip vector memory").wait_for()
    page.get_by_text("10.0 KiB in memory space 6").wait_for()
    tall_shot(page, "tpu_memory_peak", None)


def test_the_narrow_arrays_padding(page) -> None:  # noqa: F811
    saved(page, "narrow")
    page.get_by_text("padding: 512.0 KiB of the 2.0 MiB peak").wait_for()
    said = page.get_by_text("padding: 512.0 KiB").inner_text()
    assert "(1.3× its size)" in said and "long axis last" not in said
    assert "+256.0 KiB (1.3×)" in table_text(page, "f32[65536,3]")
    tall_shot(page, "tpu_memory_narrow", None)


def test_the_out_of_memory_refusal_and_its_estimate(page) -> None:  # noqa: F811
    saved(page, "oom")
    page.get_by_text("The program does not fit in the device's memory").first.wait_for()
    assert metric(page, "peak (estimated)") == "22.9 GiB"
    assert metric(page, "XLA's figure (HLO temporaries)") == "30.5 GiB"
    alert = page.locator("[data-testid=stAlert]", has_text="Running needs 22.9 GiB").first
    assert "it does not fit" in alert.inner_text() and "estimated:" not in alert.inner_text()
    page.get_by_text(
        "XLA's own figure, 30.5 GiB for HLO temporaries, is 2.0× the estimate's 15.3 GiB"
    ).wait_for()
    page.get_by_text("How: estimated: XLA gave no figures").wait_for()
    tall_shot(page, "tpu_memory_oom", None)
