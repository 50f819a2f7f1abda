"""The History page and the diff view in a real browser (Debian's headless Chromium).

A server of its own with an empty JITSCOPE_HOME, so the history holds exactly the
runs made here. Screenshots (1440×900) land in screenshots/ for a person to look at.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from serving import browser_marks, running_server
from test_browser import browser, page, shot  # noqa: F401

from viz.history import History
from viz.samples import get_sample

pytestmark = browser_marks()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("history-home")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[str]:
    with running_server(home / "server.log", {"JITSCOPE_HOME": str(home)}) as url:
        yield url


def results(tab) -> None:
    """Wait for an analysis to be shown whole and kept in History: its result tabs (while
    it runs, the stage bar's glimpse already shows its metrics, but no tabs)."""
    tab.get_by_role("tab", name="Overview", exact=True).wait_for()
    tab.locator("[data-testid=stMetricLabel]", has_text="jaxpr equations").first.wait_for()


def kept_args(home: Path, runs: int, within_s: float = 60) -> list[str]:
    """The args of the runs History keeps, newest first, once it keeps `runs` of them."""
    deadline = time.monotonic() + within_s
    while True:
        kept = [r.settings.args for r in History(home / "history.sqlite").runs()]
        if len(kept) >= runs or time.monotonic() > deadline:
            return kept
        time.sleep(0.2)


def test_two_runs_diff_side_by_side_and_history_reopens_one(page, home) -> None:  # noqa: F811
    page.goto(page.base_url)  # the default sample, analyzed on a first visit: run #1
    results(page)
    page.goto(f"{page.base_url}/?sample=dot_plus_one&args=f32[64,512], f32[512,32]")
    results(page)  # (the first run's tabs may still be on screen: wait for the second run)
    expected = ["f32[64,512], f32[512,32]", "f32[256,512], f32[512,128]"]
    assert kept_args(home, len(expected)) == expected
    vs_previous = page.get_by_role("button", name="Diff with the previous run of f")
    shot(page, "explore_vs_previous", vs_previous)
    vs_previous.click()
    page.get_by_role("heading", name="Diff").wait_for()
    page.get_by_text("2 → 2").first.wait_for()  # jaxpr equations, A → B
    page.locator("[data-testid=stDataFrame]").nth(2).wait_for()  # timings, cost, memory
    shot(page, "diff_view")
    page.get_by_role("tab", name="Kernels", exact=True).click()
    page.get_by_text("2 unchanged").first.wait_for()
    page.locator("[data-testid=stDataFrame]").first.wait_for()
    shot(page, "diff_kernels")
    page.get_by_role("tab", name="IR text", exact=True).click()
    page.get_by_text("jaxpr · +").first.wait_for()
    page.locator("[data-testid=stCode]").first.wait_for()
    shot(page, "diff_ir_text")
    page.get_by_role("tab", name="Compiled graphs", exact=True).click()
    frames = page.frame_locator("[data-testid=stIFrame]")
    for frame in (0, 1):
        frames.nth(frame).locator("svg g.node").first.wait_for()
    shot(page, "diff_compiled_graphs", page.locator("iframe").first)

    page.get_by_role("link", name="History").click()
    page.get_by_role("heading", name="History").wait_for()
    page.locator("[data-testid=stDataFrame]").first.wait_for()
    page.get_by_role("button", name="Diff two runs").wait_for()
    shot(page, "history")
    before = History(home / "history.sqlite").count()
    page.get_by_role("button", name="Open in Explore").click()
    page.get_by_text("loaded: press Analyze to run it").wait_for()
    specs = [v.input_value() for v in page.locator("input[type=text]").all()]
    assert "f32[64,512]" in specs and "f32[512,32]" in specs  # the run's arguments
    page.wait_for_timeout(1500)
    assert History(home / "history.sqlite").count() == before  # nothing ran
    page.get_by_role("button", name="Analyze").click()
    page.get_by_role("button", name="Diff with the previous run of f (#2)").wait_for()
    assert History(home / "history.sqlite").count() == before + 1


def test_an_edited_chain_shows_its_changed_kernel(page, home) -> None:  # noqa: F811
    page.goto(f"{page.base_url}/?sample=elementwise_chain")
    results(page)  # not get_by_text: the chain's own docstring says "jaxpr equations"
    code = get_sample("elementwise_chain").code
    edited = code.replace("    y = -y  # 12\n", "    y = y  # 12: no negate\n")
    link = urlencode({"code": edited, "function": "chain", "args": "f32[512,512]"})
    page.goto(f"{page.base_url}/?{link}")  # a link with code waits for Analyze
    page.get_by_role("button", name="Analyze").click()
    results(page)
    page.get_by_role("button", name="Diff with the previous run of chain").click()
    page.get_by_role("heading", name="Diff").wait_for()
    page.get_by_text("24 → 23").first.wait_for()  # jaxpr equations, one op fewer
    page.get_by_role("tab", name="Kernels", exact=True).click()
    page.get_by_text("1 changed").first.wait_for()
    page.locator("[data-testid=stDataFrame]").first.wait_for()
    shot(page, "diff_kernel_changed")
    page.get_by_role("tab", name="Ops by type", exact=True).click()
    page.locator("[data-testid=stDataFrame]").first.wait_for()
    shot(page, "diff_ops")
