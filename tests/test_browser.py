"""Every page in a real browser: Debian's headless Chromium driven by playwright.

Screenshots (1440×900) land in screenshots/ for a person to look at.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from serving import CHROMIUM, CHROMIUM_ARGS, ROOT, browser_marks, overview_charts, running_server

from viz.graph import render

SHOTS = ROOT / "screenshots"

pytestmark = browser_marks()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("streamlit") / "server.log"
    with running_server(log, {"JITSCOPE_HOME": str(ROOT / ".jitscope")}) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(90_000)
    page.base_url = server
    yield page
    context.close()


def shot(page, name: str, anchor=None) -> None:
    SHOTS.mkdir(exist_ok=True)
    if anchor is not None:
        anchor.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def open_tab(page, name: str) -> None:
    page.get_by_role("tab", name=name, exact=True).click()


def open_first_rows_kernel(page, table) -> str:
    """Picks the first row of `table` (a kernel's row), clicks the button that shows its
    kernel in the fusion map, waits for the Fusion tab; the kernel's name."""
    table.locator("td").first.wait_for(state="attached")
    table.scroll_into_view_if_needed()
    box = table.bounding_box()
    page.mouse.click(box["x"] + 12, box["y"] + 35 + 17)  # the first row's selection box
    button = page.get_by_role("button", name="in the fusion map")
    button.wait_for()
    kernel = button.inner_text().removeprefix("Show ").split(" in the fusion map")[0]
    button.click()
    switched_to(page, "Fusion")
    return kernel


def switched_to(page, tab: str) -> None:
    """After a button that opens the result tab `tab` (it sets the tab in Session State,
    and the browser follows the server's tab): wait until it is open. Streamlit's tabs
    on a loaded machine can miss the server's switch (seen in CI: the tab drawn, another
    one shown); then the test opens it as a user would. The switch itself is AppTest's."""
    from playwright.sync_api import TimeoutError as Timeout

    opened = page.get_by_role("tab", name=tab, selected=True)  # a layout change redraws
    try:  # the tabs: the old ones, unselected, stay until the run ends
        opened.first.wait_for(timeout=15_000)
    except Timeout:
        page.get_by_role("tab", name=tab).first.click()
        opened.first.wait_for()


def graph(page):
    return graph_nodes(page).first


def graph_nodes(page):
    """Nodes of the first graph: the renderer's SVG inside the pan-and-zoom frame, or
    Streamlit's own chart when there is no renderer (JITSCOPE_DOT=none)."""
    if render.dot_program() is None:
        return page.locator("[data-testid=stGraphVizChart] svg g.node")
    return page.frame_locator("[data-testid=stIFrame]").first.locator("svg g.node")


def test_explore_analyzes_the_default_sample_and_switches_tabs(page) -> None:
    page.goto(page.base_url)
    page.get_by_text("jaxpr equations").first.wait_for()
    overview_charts(page).nth(1).wait_for()
    graph(page).wait_for()  # the compiled program, on the first tab
    graph_nodes(page).nth(2).wait_for()  # at least 3 nodes, once the frame has drawn
    shot(page, "explore_overview", page.get_by_text("After fusion").first)
    open_tab(page, "Compiled HLO")
    graph_nodes(page).nth(2).wait_for()
    shot(page, "explore_compiled_graph", graph(page))
    open_tab(page, "Fusion")
    page.get_by_text("found in the compiled program").first.wait_for()
    shot(page, "explore_fusion", page.get_by_text("found in the compiled program").first)
    open_tab(page, "Timing")
    page.get_by_text("compile pays off after").wait_for()
    page.locator(".js-plotly-plot").nth(1).wait_for()
    shot(page, "explore_timing", page.locator(".js-plotly-plot").nth(1))


def open_inputs(page) -> None:
    """Unfold Explore's inputs (folded into one line once a result is shown)."""
    page.locator(".st-key-inputs_open summary").first.click()
    page.get_by_text("Timed runs").first.wait_for()


def editor(page):
    """The code editor: Ace inside the component's frame."""
    return page.frame_locator("[data-testid=stCustomComponentV1]").first


def test_an_error_sample_shows_its_card_and_fix(page) -> None:
    page.goto(f"{page.base_url}/?sample=relu_python_if")
    page.get_by_text("control flow").first.wait_for()
    page.get_by_text("Fix:").first.wait_for()
    assert "lax.cond" in page.locator("[data-testid=stAlert]").all_inner_texts().__str__()
    marked = editor(page).locator(".ace_gutter-cell.ace_error")
    marked.wait_for()  # the error's line, marked in the editor's gutter
    assert marked.inner_text().strip() == "26"
    assert editor(page).locator(".jitscope-error").count() == 1
    shot(page, "explore_error_card", page.get_by_text("Fix:").first)


def editor_text(page) -> str:
    return editor(page).locator(".ace_editor").first.evaluate("e => e.env.editor.getValue()")


def test_the_editor_highlights_numbers_lines_and_ctrl_enter_analyzes(page) -> None:
    page.goto(page.base_url)
    page.get_by_text("jaxpr equations").first.wait_for()
    code = editor(page)
    code.locator(".ace_keyword").first.wait_for()  # Python highlighting
    # the sample's docstring sits above the editor, which numbers the lines after it
    # as the file does
    page.get_by_text("Dot product plus one: the smallest interesting program").first.wait_for()
    ace = code.locator(".ace_editor").first
    first = ace.evaluate("e => e.env.editor.getOption('firstLineNumber')")
    assert first > 1 and code.locator(".ace_gutter-cell").first.inner_text().strip() == str(first)
    assert "def f(x, y):" in editor_text(page) and '"""' not in editor_text(page)[:3]
    code.locator(".ace_content").first.click()
    page.keyboard.press("Control+End")
    page.keyboard.type("\ndef g(a, b):\nreturn a @ b\n")
    page.keyboard.press("Control+Enter")
    result = page.locator("[data-testid=stSelectbox]").filter(has_text="Result")
    result.wait_for()  # a second result in the history
    assert "#2" in result.inner_text() or "#2" in result.locator("input").input_value()
    assert "def g(a, b):" in editor_text(page)
    # the edited code is no sample's: the picker says so (it kept the sample's title)
    picker = page.locator(".st-key-sample_pick input").first
    assert picker.get_attribute("placeholder") == "your own code"
    deadline = time.time() + 10
    while picker.input_value() and time.time() < deadline:
        page.wait_for_timeout(200)
    assert picker.input_value() == ""
    shot(page, "explore_editor")


def test_loading_a_sample_replaces_the_editors_code(page) -> None:
    page.goto(page.base_url)
    page.get_by_text("jaxpr equations").first.wait_for()
    page.locator("[data-testid=stSelectbox]").filter(has_text="Sample").click()
    page.get_by_role("option", name="ReLU with lax.cond").click()
    page.get_by_text("relu(f32[", exact=False).first.wait_for()  # the inputs' summary
    deadline = time.time() + 30
    while "def relu" not in editor_text(page) and time.time() < deadline:
        page.wait_for_timeout(200)
    assert "def relu" in editor_text(page)


@pytest.mark.slow
def test_the_24_layer_transformer_graph_renders_and_a_group_expands(page) -> None:
    page.goto(f"{page.base_url}/?sample=transformer_24")
    page.get_by_text("jaxpr equations").first.wait_for(timeout=120_000)
    open_tab(page, "Compiled HLO")
    # a renderer lays it out on the server in well under a second; without one,
    # Streamlit's chart lays it out in the browser (WebAssembly), slower
    limit = 10 if render.dot_program() else 30
    start = time.time()
    graph(page).wait_for(timeout=limit * 1000)
    assert time.time() - start < limit
    shot(page, "transformer24_compiled", graph(page))
    open_tab(page, "jaxpr")
    graph(page).wait_for()
    before = graph_nodes(page).count()
    page.locator("[data-testid=stMultiSelect]").first.click()  # "Expand groups"
    page.keyboard.type("layer3/attention")  # a long, virtualized list: filter it first
    page.get_by_role("option", name="layer3/attention", exact=True).click()
    page.keyboard.press("Escape")
    page.wait_for_timeout(1500)
    graph(page).wait_for()
    after = graph_nodes(page).count()
    assert after > before
    shot(page, "transformer24_jaxpr_expanded", graph(page))


def graph_text(page) -> str:
    """All the text of the first graph (labels of its boxes and clusters)."""
    if render.dot_program() is None:
        return page.locator("[data-testid=stGraphVizChart] svg").first.text_content()
    return page.frame_locator("[data-testid=stIFrame]").first.locator("svg").first.text_content()


def test_a_training_step_reads_as_its_phases_and_find_counts_inside_folds(page) -> None:
    page.goto(f"{page.base_url}/?sample=train_step")
    page.get_by_text("jaxpr equations").first.wait_for(timeout=120_000)
    open_tab(page, "jaxpr")
    graph(page).wait_for()
    assert graph_nodes(page).count() <= 12  # inputs, forward, loss, backward, update, outputs
    text = graph_text(page)
    for phase in ("jvp(CNN)", "transpose(jvp(CNN))", "loss_fn", "adam ×8"):
        assert phase in text, phase
    page.get_by_label("Find", exact=True).first.fill("sqrt")
    page.keyboard.press("Enter")
    page.get_by_text("8 matches for “sqrt”").wait_for()
    page.wait_for_timeout(1000)
    graph(page).wait_for()
    assert "7 matches" in graph_text(page)  # the box of the seven other chains holds 7
    shot(page, "train_step_jaxpr_find", graph(page))


def shot_from(page, name: str, anchor) -> None:
    """A screenshot with `anchor` at the top of the window."""
    anchor.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(500)
    shot(page, name)


def pick(page, label: str, text: str) -> None:
    """Choose the option containing `text` in the selectbox labelled `label`, until the
    box shows it: a choice made while a run redraws the box can be lost (seen in CI on
    a loaded machine), as a user would see and choose again."""
    from playwright.sync_api import expect

    box = page.get_by_label(label, exact=True)  # its input holds the chosen option
    for attempt in range(3):
        box.click()
        page.keyboard.type(text)
        page.get_by_role("option").filter(has_text=text).first.click()
        try:
            expect(box).to_have_value(re.compile(re.escape(text)), timeout=10_000)
            break
        except AssertionError:
            if attempt == 2:
                raise
            page.keyboard.press("Escape")
    page.wait_for_timeout(1500)


def wait_until_lit(page, what: str) -> None:
    """Wait for the StableHLO panel's caption to name the selection it lights up
    ("StableHLO (before fusion) · 12 of 40 nodes · kernel loop_add_fusion lit")."""
    caption = re.compile(rf"StableHLO \(before fusion\) · \d+ of \d+ nodes · {what} \S.* lit$")
    page.get_by_text(caption).first.wait_for()


def test_fusion_map_lights_up_a_kernel_and_profiles(page) -> None:
    page.goto(f"{page.base_url}/?sample=transformer_block")
    page.get_by_text("jaxpr equations").first.wait_for()
    page.get_by_role("button", name="Open the fusion map").click()  # Overview's link
    switched_to(page, "Fusion")
    page.get_by_text("found in the compiled program").first.wait_for()
    frames = page.frame_locator("[data-testid=stIFrame]")
    frames.first.locator("svg g.node").first.wait_for()
    shot_from(page, "fusion_block_map", page.get_by_text("Found in the compiled program").first)
    pick(page, "Kernel", "kLoop")
    wait_until_lit(page, "kernel")
    lit = frames.first.locator(
        'svg g.node path[stroke="#d7263d"], svg g.node polygon[stroke="#d7263d"]'
    )
    lit.first.wait_for()  # the kernel's ops, outlined in red on the StableHLO side
    shot_from(page, "fusion_block_kernel_selected", page.get_by_label("Kernel", exact=True))
    shot_from(page, "fusion_block_source", page.get_by_text("Your code").first)
    page.get_by_role("button", name="Profile kernels").click()
    page.get_by_text("Where the time goes").first.wait_for(timeout=120_000)
    shot_from(page, "fusion_block_profile", page.locator(".js-plotly-plot").first)
    page.get_by_label("Kernel", exact=True).evaluate("e => e.scrollIntoView({block: 'start'})")
    shot(page, "fusion_block_heat")


@pytest.mark.slow
def test_fusion_map_reads_on_the_24_layer_transformer(page) -> None:
    page.goto(f"{page.base_url}/?sample=transformer_24")
    page.get_by_text("jaxpr equations").first.wait_for(timeout=120_000)
    open_tab(page, "Fusion")
    page.get_by_text("found in the compiled program").first.wait_for(timeout=60_000)
    page.frame_locator("[data-testid=stIFrame]").first.locator("svg g.node").first.wait_for()
    shot_from(page, "fusion_t24_map", page.get_by_text("Found in the compiled program").first)
    pick(page, "StableHLO op", "layer7/mlp")
    wait_until_lit(page, "op")
    shot_from(page, "fusion_t24_op_selected", page.get_by_label("Kernel", exact=True))
    shot_from(page, "fusion_t24_source", page.get_by_text("Your code").first)


def test_cache_lab_sweep_fills_the_table_and_timeline(page) -> None:
    # a new browser session starts with an empty cache of its own: no Clear first (a
    # click that lands while Clear's rerun is still running can be dropped)
    page.goto(f"{page.base_url}/cache")
    page.get_by_text("Sweep: many calls").click()
    page.get_by_role("button", name="Run sweep").click()
    page.get_by_text("7 compiled entries").first.wait_for()
    page.locator(".js-plotly-plot").first.wait_for()
    shot(page, "cache_lab", page.get_by_text("Cache table").first)


def test_the_cache_story_fills_the_table_and_draws_each_hit(page) -> None:
    page.goto(f"{page.base_url}/cache")
    page.get_by_role("button", name="Show the cache at work").click()
    page.get_by_text("2 compiled entries").first.wait_for()
    page.get_by_text("shape f32[256,512] → f32[128,512]").first.wait_for()  # call 3's reason
    chart = page.locator(".js-plotly-plot").first
    chart.locator(".legendtext").nth(2).wait_for()  # drawn after the chart's frame
    legend = chart.locator(".legendtext").all_text_contents()
    # only what is drawn: no call was routed to an AOT bucket
    assert legend == ["miss: compile time", "hit: run time", "cumulative compile", "cumulative run"]
    hits = chart.locator(".scatterlayer .trace").nth(0).locator("path.point")
    hits.nth(1).wait_for()
    assert hits.count() == 2  # calls 2 and 4, as green markers
    page.evaluate("document.activeElement.blur()")  # no tooltip over the shot
    page.mouse.move(1400, 880)
    shot(page, "cache_story")
    chart.evaluate("e => e.scrollIntoView()")
    shot(page, "cache_story_table_and_chart")


@pytest.mark.skipif(render.dot_program() is None, reason="needs a DOT renderer")
def test_the_compiled_and_stablehlo_graphs_name_their_output_alike(page) -> None:
    """The Overview's compiled graph and the StableHLO tab's graph call the one output
    out0, as the jaxpr's does (graphs side by side read at one scale: ui.shared_box)."""
    page.goto(page.base_url)
    page.get_by_text("jaxpr equations").first.wait_for()
    graph(page).wait_for()
    outputs = {}
    for tab in ("Overview", "StableHLO"):
        open_tab(page, tab)
        frame = page.frame_locator("[data-testid=stIFrame]:visible").first
        frame.locator("svg g.node text", has_text=re.compile(r"^out")).first.wait_for()
        texts = frame.locator("svg g.node text").all_text_contents()
        outputs[tab] = [t for t in texts if t.startswith("out")]
    assert outputs == {"Overview": ["out0"], "StableHLO": ["out0"]}
    shot(page, "stablehlo_graph", graph(page))


@pytest.mark.parametrize(
    ("path", "button", "marker"),
    [
        ("placement?sample=outer_inner", "Measure the four strategies", "Fastest per call"),
        ("scaling?sample=unrolled_loop", "Sweep N", "Does unrolling pay off?"),
        ("shapes?sample=batched_model", "Sweep shapes", "Every new shape compiles again"),
        (
            "buckets?sample=batched_model",
            "Measure compile and run time per bucket",
            "ahead-of-time compile",
        ),
    ],
)
def test_lesson_pages_measure_and_draw(page, path: str, button: str, marker: str) -> None:
    name = path.split("?")[0]
    page.goto(f"{page.base_url}/?{path.split('?')[1]}")  # load the lesson's sample first
    page.get_by_text("jaxpr equations").first.wait_for()
    page.get_by_role(
        "link",
        name={
            "placement": "Where to jit",
            "scaling": "Compile vs program size",
            "shapes": "Shape sweep",
            "buckets": "Batch buckets",
        }[name],
    ).click()
    if name == "buckets":  # a short typed list keeps the measurement to a few compiles
        page.get_by_text("type or paste").click()
        page.get_by_text("distinct sizes").first.wait_for()
    page.get_by_role("button", name=button).click()
    page.get_by_text(marker).first.wait_for(timeout=180_000)
    page.locator(".js-plotly-plot").first.wait_for()
    shot(page, f"lesson_{name}", page.locator(".js-plotly-plot").first)


NAVIGATION = [
    "Explore",
    "Cache lab",
    "History",
    "Diff",
    "Recordings",
    "Where to jit",
    "Compile vs program size",
    "Shape sweep",
    "Batch buckets",
]


@pytest.mark.parametrize(
    ("path", "title"),
    [
        ("explore", "jitscope"),
        ("cache", "Cache lab"),
        ("placement", "Where to put jit"),
        ("scaling", "Compile time vs program size"),
        ("shapes", "Shape sweep"),
        ("buckets", "Batch-size buckets"),
    ],
)
def test_a_deep_link_as_a_fresh_servers_first_request_gets_our_navigation(
    browser, tmp_path: Path, path: str, title: str
) -> None:
    """With pages/ beside app.py, Streamlit's first run after a start is in its legacy
    pages/ mode: a file-name listing and the page without app.py, unless the page
    leaves that mode (ui.leave_legacy_pages)."""
    with running_server(tmp_path / "server.log") as url:
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        page = context.new_page()
        page.set_default_timeout(60_000)
        page.goto(f"{url}/{path}")
        page.get_by_role("heading", name=title, level=1).wait_for()
        page.get_by_role("link", name="Batch buckets").wait_for(timeout=15_000)
        links = page.locator("[data-testid=stSidebarNav] a").all_inner_texts()
        assert [text.split("\n")[-1].strip() for text in links] == NAVIGATION
        assert page.get_by_role("heading", level=1).all_inner_texts() == [title]
        context.close()
