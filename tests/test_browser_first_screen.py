"""Explore's first screen and following a line (issue #50), in a real browser (Debian's
headless Chromium): after the default analysis, and after another Analyze, the counts, a
node of the program's graph and a chart lie within the window, unscrolled, at 1440×900
and 1280×800 in the light and the dark theme; a line followed from the editor marks its
rows in the three IR tabs, and a kernel picked in the fusion map marks its lines in the
editor. Screenshots land in screenshots/ for a person to look at.
"""

from __future__ import annotations

import pytest
from serving import browser_marks, overview_charts, running_server
from test_browser import SHOTS, browser, editor, graph_nodes, page, server  # noqa: F401

from viz.graph import render

pytestmark = browser_marks()

SIZES = [(1440, 900), (1280, 800)]


@pytest.fixture
def window(browser, server, request):  # noqa: F811
    """A page of the given size and theme."""
    width, height, theme = request.param
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=theme)
    tab = context.new_page()
    tab.set_default_timeout(90_000)
    tab.base_url = server
    tab.name, tab.theme = f"first_screen_{width}x{height}_{theme}", theme
    yield tab
    context.close()


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("demo_home")
    env = {"JITSCOPE_HOME": str(home), "JITSCOPE_DEMO": "1"}
    with running_server(home / "server.log", env) as url:
        yield url


def graph_theme(tab) -> str:
    """The pan-and-zoom frame's theme: 'dark' draws the graph in dark colours."""
    if render.dot_program() is None:
        return tab.theme  # Streamlit's own chart follows the page
    stage = tab.frame_locator("[data-testid=stIFrame]").first.locator("#stage")
    return stage.get_attribute("class")


def in_view(tab, box: dict | None) -> bool:
    size = tab.viewport_size
    return (
        box is not None
        and box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= size["width"]
        and box["y"] + box["height"] <= size["height"]
    )


def first_screen(tab) -> dict[str, dict | None]:
    """Where the count, a graph node and a chart are, once all three are drawn."""
    count = tab.locator("[data-testid=stMetric]").filter(has_text="jaxpr equations").first
    count.wait_for()
    overview_charts(tab).nth(1).wait_for()
    graph_nodes(tab).first.wait_for()
    tab.mouse.move(1000, 40)  # no tooltip over the screenshot
    tab.wait_for_timeout(1000)  # the last layout pass
    return {
        "count": count.bounding_box(),
        "graph node": graph_nodes(tab).first.bounding_box(),
        "chart": tab.locator("[data-testid=stVegaLiteChart]").first.bounding_box(),
    }


@pytest.mark.parametrize(
    "window",
    [(w, h, theme) for w, h in SIZES for theme in ("light", "dark")],
    indirect=True,
    ids=lambda p: f"{p[0]}x{p[1]}-{p[2]}",
)
def test_the_count_a_graph_node_and_a_chart_are_on_the_first_screen(window) -> None:
    tab, name = window, window.name
    tab.goto(tab.base_url)
    where = first_screen(tab)
    assert tab.evaluate("window.scrollY") == 0
    SHOTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(SHOTS / f"{name}.png"))
    assert all(in_view(tab, box) for box in where.values()), where
    assert graph_theme(tab) == tab.theme  # a dark page draws its graph dark
    tab.get_by_role("button", name="Analyze").click()
    picker = tab.locator("[data-testid=stSelectbox]").filter(has_text="Result")
    picker.wait_for()  # a second result: the picker shows it
    assert "#2" in picker.locator("input").input_value()
    where = first_screen(tab)
    assert tab.evaluate("window.scrollY") == 0
    tab.screenshot(path=str(SHOTS / f"{name}_after_analyze.png"))
    assert all(in_view(tab, box) for box in where.values()), where


def follow_in_editor(tab, line: int) -> None:
    """Put the editor's cursor on `line` (as numbered in its gutter) and press Follow."""
    code = editor(tab)
    code.locator(".ace_editor").first.evaluate(
        "(e, line) => { const ed = e.env.editor; ed.focus();"
        " ed.gotoLine(line - ed.getOption('firstLineNumber') + 1, 0); }",
        line,
    )
    code.get_by_text("Follow this line").click()


def relu_line(tab) -> int:
    code = editor(tab).locator(".ace_editor").first
    text = code.evaluate("e => e.env.editor.getValue()")
    first = code.evaluate("e => e.env.editor.getOption('firstLineNumber')")
    return next(n for n, t in enumerate(text.splitlines(), first) if "jax.nn.relu" in t)


def test_a_followed_line_marks_its_rows_in_each_ir_and_a_kernel_marks_its_lines(page) -> None:  # noqa: F811
    page.goto(f"{page.base_url}/?sample=mlp")
    page.get_by_text("jaxpr equations").first.wait_for()
    line = relu_line(page)
    follow_in_editor(page, line)
    page.get_by_text(f"line {line} → 8 equations").first.wait_for()
    marked = editor(page).locator(".jitscope-mark")
    marked.first.wait_for()  # the followed line, in the editor
    page.get_by_text(f"line {line} marked").first.wait_for()  # on the Overview's graph
    for tab, word in (
        ("jaxpr", "dot_general"),
        ("StableHLO", "dot_general"),
        ("Compiled HLO", "dot("),
    ):
        page.get_by_role("tab", name=tab, exact=True).click()
        rows = page.locator(".jitscope-rows .marked")
        rows.first.wait_for()
        assert any(word in text for text in rows.all_inner_texts()), tab
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / f"follow_{tab.replace(' ', '_')}.png"))
    page.get_by_role("tab", name="Fusion", exact=True).click()
    page.get_by_text("found in the compiled program").first.wait_for()
    page.get_by_label("Kernel", exact=True).click()
    page.get_by_role("option").filter(has_text="broadcast_add_fusion").first.click()
    last = line + 2  # `return x @ last["w"] + last["b"]`
    gutter = editor(page).locator(".ace_gutter-cell.ace_info")
    page.wait_for_function(
        "([sel, n]) => [...document.querySelector(sel).contentDocument"
        ".querySelectorAll('.ace_gutter-cell.ace_info')].some(c => c.textContent.trim() == n)",
        arg=["[data-testid=stCustomComponentV1]", str(last)],
    )
    assert str(last) in [t.strip() for t in gutter.all_inner_texts()]
    gutter.last.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "follow_kernel_lines_marked.png"))


def test_a_line_that_made_nothing_says_so(page) -> None:  # noqa: F811
    page.goto(f"{page.base_url}/?sample=mlp")
    page.get_by_text("jaxpr equations").first.wait_for()
    line = relu_line(page) + 1  # a comment
    follow_in_editor(page, line)
    page.get_by_text(f"line {line} → no jaxpr equation").first.wait_for()


def test_demo_modes_note_leaves_the_first_screen_its_room(browser, demo_server) -> None:  # noqa: F811
    """For a team watching a shared screen: the note sits in the sidebar, the result in view."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    tab = context.new_page()
    tab.set_default_timeout(90_000)
    try:
        tab.goto(demo_server)
        where = first_screen(tab)
        SHOTS.mkdir(exist_ok=True)
        tab.screenshot(path=str(SHOTS / "first_screen_1280x800_demo.png"))
        assert all(in_view(tab, box) for box in where.values()), where
        tab.get_by_test_id("stSidebar").get_by_text("Demo mode").wait_for()
    finally:
        context.close()
