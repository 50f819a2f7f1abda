"""The Memory tab on a real TPU v5e's reports (tests/fixtures/tpu_v5e/reports/) in a
real browser (Debian's headless Chromium): a saved report shown as Explore shows it
(tests/pages/saved_report.py), its error card and Memory tab, nothing run. The sort and
cumsum's peak with VMEM apart, the narrow array's padding, and the out-of-memory refusal
with the estimate. Screenshots (1440×2400) land in screenshots/ and /tmp.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from serving import browser_marks, running_server
from test_browser import browser, page  # noqa: F401
from test_browser_specialization import TALL, table_text, tall_shot
from test_memory_tpu import CHIP, REPORTED, chip_report, with_parts

pytestmark = [*browser_marks(), pytest.mark.slow]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The chip's reports, those whose program's dump is recorded given the parts of
    XLA's peak it makes (`with_parts`)."""
    log = tmp_path_factory.mktemp("streamlit") / "server.log"
    reports = tmp_path_factory.mktemp("reports")
    for path in (CHIP / "reports").glob("*.json"):
        report = with_parts(path.stem) if path.stem in REPORTED else chip_report(path.stem)
        (reports / path.name).write_text(json.dumps(report.to_dict()))
    env = {"SAVED_REPORTS": str(reports)}
    with running_server(log, env, script="tests/pages/saved_report.py") as url:
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


def test_xlas_peak_with_what_it_counts(page) -> None:  # noqa: F811
    """XLA's figure beside the HBM peak, and what it counts: HBM's arguments, outputs
    and constants, and VMEM at its own peak (the Pallas kernel's output)."""
    saved(page, "pallas")
    assert (metric(page, "peak"), metric(page, "XLA's peak")) == ("1.2 MiB", "1.8 MiB")
    said = page.get_by_text("Two peaks, two counts").inner_text()
    assert "is what is live in HBM, where memory runs out, at its fullest step" in said
    assert (
        "XLA's peak_memory_in_bytes 1.8 MiB = 1.2 MiB HBM (arguments, outputs and constants, "
        "held the whole run) + 512.0 KiB VMEM at its own peak (step 2, forward.1); HBM's "
        "temporaries are not in it. They differ by 512.0 KiB."
    ) in said
    tall_shot(page, "tpu_memory_pallas", None)
    saved(page, "peak")
    said = page.get_by_text("Two peaks, two counts").inner_text()
    assert "193.1 MiB = 128.0 MiB HBM" in said and "65.1 MiB VMEM at its own peak" in said


def test_the_narrow_arrays_padding(page) -> None:  # noqa: F811
    saved(page, "narrow")
    page.get_by_text("padding: 512.0 KiB of the 2.0 MiB peak").wait_for()
    said = page.get_by_text("padding: 512.0 KiB").inner_text()
    assert "(1.3× its size, laid out {0,1:T(4,128)})" in said and "long axis last" not in said
    assert "axis 1's 3 is padded to 4 rows of its 4×128 tiles (small: nothing to change)" in said
    assert "+256.0 KiB (1.3×)" in table_text(page, "f32[65536,3]")
    tall_shot(page, "tpu_memory_narrow", None)


def test_the_out_of_memory_refusal_and_its_estimate(page) -> None:  # noqa: F811
    saved(page, "oom")
    page.get_by_text("The program does not fit in the device's memory").first.wait_for()
    assert metric(page, "peak (estimated)") == "22.9 GiB"
    assert metric(page, "XLA's figure (HLO temporaries)") == "30.5 GiB"
    alert = page.locator("[data-testid=stAlert]", has_text="Running needs 22.9 GiB").first
    assert "it does not fit" in alert.inner_text() and "estimated:" not in alert.inner_text()
    page.get_by_test_id("stAlertContentWarning").get_by_text(
        "XLA's own figure, 30.5 GiB for HLO temporaries, is 2.0× the estimate's 15.3 GiB"
    ).wait_for()
    page.get_by_text("How: estimated: XLA gave no figures").wait_for()
    tall_shot(page, "tpu_memory_oom", None)
