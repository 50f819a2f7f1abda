"""The Recordings page in a real browser: a recorded training loop (5 functions, 22
compiles), its timeline, functions, compiles with reasons, call sites, and Open in
Explore ending in an analyzed result; a program whose jit a library builds
(tests/programs/library_jits.py, recorded first), its table cells read as text.
Screenshots (1440×900) land in screenshots/."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from serving import ROOT, browser_marks, running_server
from test_browser import SHOTS, browser, page, pick, shot  # noqa: F401

pytestmark = [*browser_marks(), pytest.mark.slow]

PROGRAM = ROOT / "tests" / "programs" / "train_loop.py"
LIBRARY_PROGRAM = ROOT / "tests" / "programs" / "library_jits.py"  # recording #1
INSTALLED = ROOT / "tests" / "programs" / "site-packages"  # its library, fakelib


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("recordings-home")
    html = str(home / "rec.html")
    library = subprocess.run(  # from a folder outside the program's, as a user runs it
        [sys.executable, "-m", "viz", "record", "--", str(LIBRARY_PROGRAM)],
        cwd=home,
        env={
            **os.environ,
            "JITSCOPE_HOME": str(home),
            "PYTHONPATH": f"{ROOT}{os.pathsep}{INSTALLED}",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert library.returncode == 0, library.stderr
    done = subprocess.run(
        [sys.executable, "-m", "viz", "record", "--html", html, "--", str(PROGRAM), "8"],
        cwd=ROOT,
        env={**os.environ, "JITSCOPE_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "22 compiles of 5 functions" in done.stderr, done.stderr
    return home


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[str]:
    with running_server(home / "server.log", {"JITSCOPE_HOME": str(home)}) as url:
        yield url


def test_a_recording_shows_its_compiles_and_opens_one_in_explore(page) -> None:  # noqa: F811
    page.goto(f"{page.base_url}/recordings")
    page.get_by_role("heading", name="Recordings", level=1).wait_for()
    page.locator("[data-testid=stMetricValue]", has_text="22").first.wait_for()
    # one bar per compile (plotly draws the bars after the chart's frame: wait for them)
    page.locator(".js-plotly-plot").first.locator("g.bars path").nth(21).wait_for()
    shot(page, "recordings_overview")
    page.get_by_role("heading", name="Functions, by compile time").wait_for()
    advice = page.locator("[data-testid=stAlert]", has_text="x dim 0 took 5 values")
    advice.get_by_text("(32, 48, 64, 80, 96) → pad to a few bucket sizes").wait_for()
    compiles = page.get_by_role("heading", name="Compiles of train_step")
    compiles.scroll_into_view_if_needed()
    shot(page, "recordings_compiles", compiles)
    page.get_by_role("heading", name="Call sites").scroll_into_view_if_needed()
    page.locator(".js-plotly-plot").nth(1).locator("g.slice").first.wait_for()
    shot(page, "recordings_call_sites")

    page.get_by_role("button", name="Open in Explore").click()
    page.get_by_text("From recording #2, compile #").wait_for()
    page.get_by_role("button", name="Analyze").click()
    page.locator("[data-testid=stMetricLabel]", has_text="jaxpr equations").first.wait_for(
        timeout=180_000
    )
    assert page.locator("[data-testid=stAlertContentError]").count() == 0
    shot(page, "recordings_opened_in_explore")


def test_the_recordings_html_file_opens_offline_in_chromium(browser, home: Path) -> None:  # noqa: F811
    """`record --html OUT`: one file, opened from disk with every network request refused."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    asked: list[str] = []

    def refuse(route) -> None:
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            asked.append(route.request.url)
            route.abort()

    context.route("**/*", refuse)
    tab = context.new_page()
    tab.goto((home / "rec.html").as_uri())
    tab.get_by_role("heading", name="Functions, by compile time").wait_for()
    assert tab.locator("svg rect").count() >= 22  # a bar per compile on the timeline
    assert "22" in tab.locator(".metric").first.inner_text()
    tab.get_by_text("train_step", exact=False).first.wait_for()
    tab.locator("details summary", has_text="train_step").first.click()
    tab.get_by_text("x dim 0 took 5 values").first.wait_for()
    shot(tab, "recording_html_file")
    assert asked == []
    context.close()


def test_profile_this_compile_opens_explore_on_its_compile_time(page) -> None:  # noqa: F811
    page.goto(f"{page.base_url}/recordings")
    page.get_by_role("button", name="Profile this compile").click()
    page.get_by_text("From recording #2, compile #").wait_for()
    page.get_by_role("tab", name="Compile time", selected=True).wait_for(timeout=180_000)
    page.get_by_role("heading", name="Trace · by line of your code").wait_for(timeout=180_000)
    page.get_by_role("heading", name="XLA compile · its own spans").wait_for()
    assert page.locator("[data-testid=stAlertContentError]").count() == 0
    shot(
        page,
        "recordings_profiled_in_explore",
        page.get_by_role("tab", name="Compile time", selected=True).first,
    )


LOCATION = re.compile(r"[\w.\-/<>…]*\.py\b(:\d+)?")  # a file name, with its line when shown


SCROLL_TO = """(grid, left) => {
    const scroller = [grid, ...grid.querySelectorAll("*")].find(
        (n) => n.scrollWidth > n.clientWidth + 4 && getComputedStyle(n).overflowX !== "visible"
    );
    if (!scroller) return [0, 1];
    scroller.scrollLeft = left;
    return [scroller.scrollWidth, scroller.clientWidth];
}"""


def cells(tab, holding: str) -> list[str]:
    """The cells of the table holding `holding`, every column: the grid draws on a
    canvas and fills its (hidden) accessibility table with the columns in view, so it
    is scrolled across, as a reader would, and read at each step."""
    tab.locator("[data-testid=stDataFrame] td", has_text=holding).first.wait_for(state="attached")
    grid = (  # held as the element: the cell it was found by scrolls out of the table
        tab.locator("[data-testid=stDataFrame]")
        .filter(has=tab.locator("td", has_text=holding))
        .element_handle()
    )
    width, view = grid.evaluate(SCROLL_TO, 0)
    found: dict[str, None] = {}
    for left in [*range(0, width, max(view // 2, 1)), width]:
        grid.evaluate(SCROLL_TO, left)
        tab.wait_for_timeout(300)
        found.update(
            dict.fromkeys(td.text_content().strip() for td in grid.query_selector_all("td"))
        )
    grid.evaluate(SCROLL_TO, 0)
    return list(found)


def unclean(texts: list[str]) -> list[str]:
    """Cells with raw markdown, a file named without its line, a cut file name, or the
    full path of a file in the program's folder."""
    bad = []
    for text in texts:
        names = list(LOCATION.finditer(text))
        cut = any(m.group(1) is None or "…" in m.group(0) for m in names)
        if cut or "`" in text or str(ROOT) in text:
            bad.append(text)
    return bad


def test_a_library_made_jit_reads_cleanly_in_the_recordings_tables(page) -> None:  # noqa: F811
    page.goto(f"{page.base_url}/recordings")
    page.get_by_role("heading", name="Recordings", level=1).wait_for()
    pick(page, "Recording", "#1 ·")
    page.get_by_text("7 compiles: 5 needed, 2 avoidable").first.wait_for()
    functions = cells(page, "fakelib/__init__.py:30")
    assert "fakelib/__init__.py:30" in functions and "library_jits.py:14" in functions
    assert "first compile, static value ×2" in functions
    advice = next(text for text in functions if text.startswith("fakelib builds"))
    assert advice.endswith("it is not in your code") and "`" not in advice
    assert not unclean(functions), unclean(functions)
    page.get_by_role("heading", name="Functions, by compile time").scroll_into_view_if_needed()
    shot(page, "recordings_library_functions")
    pick(page, "Function", "_loop · 3 compiles")
    heading = page.get_by_role("heading", name="Compiles of _loop")
    compiles = cells(page, "avoidable: body: a new jit wrapper")
    assert "needed: new data in the closure: body.data f32[200,3] → f32[500,3]" in compiles
    assert "jit(_loop) made at fakelib/__init__.py:37 (from library_jits.py:19)" in compiles
    assert not unclean(compiles), unclean(compiles)
    heading.scroll_into_view_if_needed()
    shot(page, "recordings_library_compiles")
    page.get_by_role("heading", name="Call sites").scroll_into_view_if_needed()
    page.locator(".js-plotly-plot").nth(1).locator("g.slice").first.wait_for()
    shot(page, "recordings_library_call_sites")
    for name in ("functions", "compiles", "call_sites"):
        shutil.copy(SHOTS / f"recordings_library_{name}.png", f"/tmp/recordings_library_{name}.png")
