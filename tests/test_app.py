"""The Streamlit pages, driven headless with AppTest (the real worker runs the code)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from streamlit import dataframe_util
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest

from ui.results import COST_MEANINGS
from ui.sidebar import counts_text
from viz import units
from viz.samples import get_sample, list_samples
from viz.settings import Settings
from viz.timing import MIN_EAGER_SAMPLES
from viz.worker.client import WorkerStatus

TIMEOUT = 180
APP = str(Path(__file__).resolve().parent.parent / "app.py")


pytestmark = pytest.mark.usefixtures("navigation_mode", "plain_editor")


@pytest.mark.legacy_pages
def test_the_pinned_streamlit_sets_the_legacy_pages_flag_we_clear() -> None:
    """ui.leave_legacy_pages clears this private flag: a Streamlit that renames it fails here."""
    PagesManager.uses_pages_directory = None
    PagesManager(APP)
    assert PagesManager.uses_pages_directory is True  # pages/ sits beside app.py
    PagesManager.uses_pages_directory = None


@pytest.mark.legacy_pages
def test_the_servers_start_up_leaves_legacy_pages_mode_before_any_session() -> None:
    import ui

    PagesManager.uses_pages_directory = None
    PagesManager(APP)  # what Streamlit's first session sets: pages/ sits beside app.py

    async def start_up() -> None:
        async with ui.start_with_server(None):
            assert PagesManager.uses_pages_directory is False

    asyncio.run(start_up())
    PagesManager.uses_pages_directory = None


@pytest.mark.legacy_pages
@pytest.mark.parametrize(("page", "title"), [("pages/cache.py", "Cache lab")])
def test_a_legacy_run_reruns_through_app_py(page: str, title: str) -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["results"] = []  # skip the explorer's first-visit analysis
    at.run()
    assert [t.value for t in at.title] == ["jitscope"]
    at.switch_page(page).run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == [title]
    assert PagesManager.uses_pages_directory is False


def open_app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    return at


def button(at: AppTest, label: str):
    return next(b for b in at.button if b.label == label)


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [e.value for e in at.error] + [i.value for i in at.info]
    return "\n".join(str(p) for p in parts)


def test_explore_opens_on_the_default_sample_already_analyzed() -> None:
    at = open_app()
    labels = {m.label: m.value for m in at.metric}
    assert labels["jaxpr equations"] == "2"
    assert labels["compiled kernels"] not in ("", "None")
    assert at.selectbox(key="sample_pick").value == "Dot product plus one"
    # the compiled program's graph on the Overview (the first screen has room for one)
    assert len(at.get("iframe") or at.get("graphviz_chart")) == 1
    assert any(m.value.startswith("**After fusion: compiled HLO**") for m in at.markdown)
    # its charts are Vega-Lite: the first screen never loads Plotly's 4.7 MB bundle
    assert len(at.get("vega_lite_chart")) == 2 and not at.get("plotly_chart")
    # the run's device time beside its wall time: on the CPU, one clock
    assert "device time: the same clock as the wall time" in texts(at)


def test_the_overview_says_each_count_once_under_one_name() -> None:
    """No two counts side by side that a user cannot tell apart: the chart's bars are the
    counts above it, named alike; the kernels say how many are fusions, no second count."""
    at = open_app()
    metrics = {m.label: m for m in at.metric}
    assert "fusions" not in metrics
    kernels = metrics["compiled kernels"]
    assert "are fusions" in kernels.help  # the kernels say how many of them are fusions
    chart = at.get("vega_lite_chart")[0].proto  # How the op count falls
    chain = dataframe_util.convert_arrow_bytes_to_pandas_df(chart.data.data)
    assert list(chain["stage"]) == ["jaxpr equations", "StableHLO ops", "compiled kernels"]
    for stage, count in zip(chain["stage"], chain["count"], strict=True):
        assert metrics[stage].value == f"{count:,}"
    said = re.search(r"the (\d+) kernels XLA runs", texts(at))
    assert said is None or said[1] == kernels.value
    # the memory is the Memory tab's peak, under its name: not a third figure beside
    # the tab's peak and XLA's
    memory = at.session_state["results"][-1].report.memory
    assert metrics["memory peak"].value == units.nbytes(memory.peak_bytes)
    assert "memory" not in metrics


@pytest.mark.parametrize(
    "sample",
    [
        pytest.param(
            s,
            id=s.name,
            marks=[pytest.mark.slow] if s.name in ("transformer_24", "transformer_block") else [],
        )
        for s in list_samples()
    ],
)
def test_every_sample_analyzes_or_shows_its_error_card(sample) -> None:
    at = open_app()
    at.selectbox(key="sample_pick").select(sample.title).run()
    button(at, "Analyze").click().run()
    assert not at.exception, at.exception
    if sample.expect_error:
        card = at.error[0].value
        assert sample.expect_error.replace("_", " ") in card
        assert any("Fix:" in i.value for i in at.info)
    else:
        assert not at.error, at.error[0].value
        assert {m.label for m in at.metric} >= {"jaxpr equations", "StableHLO ops"}


def open_tab(tab: str) -> AppTest:
    """Explore's result tab `tab`, on the default sample (Dot product plus one:
    `jnp.dot(x, y) + 1.0` with x f32[256,512], y f32[512,128])."""
    at = open_app()
    at.session_state["result_tab"] = tab
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.mark.parametrize("tab", ["jaxpr", "StableHLO", "Compiled HLO"])
def test_each_graph_tab_draws_its_graph(tab: str) -> None:
    at = open_tab(tab)
    # a pan-and-zoom frame around dot's SVG, or Streamlit's chart without dot
    assert at.get("iframe") or at.get("graphviz_chart"), "no graph drawn"
    assert any(c.value.startswith("Showing") for c in at.caption)


def test_a_graph_tab_draws_the_workers_default_view_and_builds_only_other_views(
    monkeypatch,
) -> None:
    """The worker wrote the default view's DOT (`report.graphs`): the tab draws that,
    under its title, and builds a DOT of its own only for a view the worker did not."""
    import viz.graph

    built: list[object] = []
    to_dot = viz.graph.to_dot
    monkeypatch.setattr(viz.graph, "to_dot", lambda *a, **k: built.append(a) or to_dot(*a, **k))
    at = open_tab("jaxpr")
    assert not built
    report = at.session_state["results"][-1].report
    drawn = viz.graph.titled(report.graphs["jaxpr"].dot, f"{report.function} · jaxpr")
    for chart in at.get("graphviz_chart"):  # without dot (JITSCOPE_DOT=none): the DOT itself
        assert chart.proto.spec == drawn
    key = next(k for k in at.session_state if str(k).endswith("_depth"))
    at.number_input(key=key).set_value(1).run()
    assert not at.exception, at.exception
    assert built


def test_the_fusion_tab_maps_each_kernel_to_the_ops_it_absorbed() -> None:
    at = open_tab("Fusion")
    kernels = next(d.value for d in at.dataframe if "kernel" in d.value.columns)
    absorbed = " ".join(kernels["jaxpr eqns"])
    assert "dot_general" in absorbed and "add" in absorbed  # the program's two equations
    assert any(m.value.startswith("Found in the compiled program") for m in at.markdown)
    assert at.get("plotly_chart"), "no op-count chart"
    assert at.session_state["results"][-1].report.fusion_map_coverage.stablehlo == 1
    assert not [e for e in at.expander if "not found" in e.label]  # no empty "0 ops" list


def test_the_overviews_link_opens_the_fusion_map() -> None:
    at = open_tab("Overview")
    at.button(key="ov_fusion").click().run()
    assert not at.exception, at.exception
    assert at.session_state["result_tab"] == "Fusion"
    assert any(m.value.startswith("Found in the compiled program") for m in at.markdown)


def test_the_timing_tab_shows_each_time_and_when_compiling_pays_off() -> None:
    at = open_tab("Timing")
    shown = {m.label: m.value for m in at.metric}
    for label in ("first call", "jit (median)", "eager (median)"):
        assert re.fullmatch(r"[\d.,]+ (ns|µs|ms|s)", shown[label]), (label, shown)
    assert re.fullmatch(r"[\d,]+ calls|never", shown["compile pays off after"]), shown
    counted = {m.label: m.delta for m in at.metric if m.delta}  # how many samples each median has
    assert set(counted) == {"jit (median)", "eager (median)"}, counted
    assert all(re.fullmatch(r"n = \d+", n) for n in counted.values()), counted
    assert int(counted["eager (median)"].removeprefix("n = ")) >= MIN_EAGER_SAMPLES
    assert len(at.get("plotly_chart")) == 2  # the stage waterfall, the run distribution


SLOW = """import jax.numpy as jnp


def slow(x):
    return x @ x @ x @ x @ x
"""


def _analyzed_on(settings: Settings, tab: str) -> AppTest:
    """Explore with `settings` in the editor, analyzed once (no first-visit analysis),
    the result open on `tab`."""
    from viz.program import Program

    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["program"] = Program(settings)  # before the first run: the editor's
    at.session_state["results"] = []
    at.session_state["query_applied"] = True
    at.session_state["result_tab"] = tab
    at.run()
    button(at, "Analyze").click().run()
    assert not at.exception, at.exception
    return at


def test_a_slow_call_timed_fewer_times_than_asked_says_how_many_and_why() -> None:
    """The inputs said '20 runs', the Timing tab 'n = 9' (the 24-layer model): the
    timing's budget cut them, and nothing said so."""
    at = _analyzed_on(Settings(code=SLOW, function="slow", args="f32[2048,2048]"), "Timing")
    n = next(m.delta for m in at.metric if m.label == "jit (median)")
    done = at.session_state["results"][-1].report.run.jit.samples
    assert 0 < done < 20 and n == f"n = {done} of 20", n
    assert f"{done} of the 20 timed runs asked for: the timing stops once its time" in texts(at)


def _quantity(text: str, units: dict[str, float]) -> float:
    number, unit = re.fullmatch(r"([\d.,]+)\s*(\S*)", text).groups()
    return float(number.replace(",", "")) * units[unit]


SIZE = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def test_the_cost_tab_shows_the_programs_flops() -> None:
    at = open_tab("Cost")
    shown = {m.label: m.value for m in at.metric}
    flops = _quantity(shown["FLOPs"], {"": 1, "k": 1e3, "M": 1e6, "G": 1e9})
    assert flops == pytest.approx(2 * 256 * 512 * 128, rel=0.01)  # the matmul; + 1.0 is tiny
    flop_per_byte = float(shown["FLOPs per byte"])  # in the label: the value fits its column
    assert flop_per_byte == pytest.approx(
        flops / _quantity(shown["bytes accessed"], SIZE), rel=0.05
    )
    assert shown["transcendentals"] == "0"  # XLA leaves a zero count out: 0, not unknown


def test_the_cost_tab_says_what_each_count_means_and_the_rates_they_give() -> None:
    at = open_tab("Cost")
    shown = {m.label: m.value for m in at.metric}
    captions = [c.value for c in at.caption]
    for label in ("FLOPs", "bytes accessed", "transcendentals", "FLOPs per byte"):
        assert label in shown and COST_MEANINGS[label] in captions  # each with its meaning
    report = at.session_state["results"][-1].report
    took = report.timings.run_median_s  # the CPU: no device clock apart from the wall
    assert shown["FLOP/s"] == units.si(report.cost.flops / took)
    assert shown["bytes/s"] == units.nbytes(report.cost.bytes_accessed / took)
    assert any(units.seconds(took) in m.value for m in at.markdown)


def test_the_cost_tab_says_a_loops_body_is_counted_once() -> None:
    """XLA's cost analysis counts a while loop's body once, whatever its trip count: a
    32-step scan's FLOPs are one step's, which the tab says (the default sample has no
    loop, and no such line)."""
    assert not any("loop" in c.value for c in open_tab("Cost").caption)
    sample = get_sample("unrolled_loop")
    settings = Settings(code=sample.code, function="scanned", args=sample.args, static=["n"])
    at = _analyzed_on(settings, "Cost")
    said = [c.value for c in at.caption if "loop" in c.value]
    assert said and "XLA counts a loop's body once" in said[0] and "1 while loop" in said[0]
    # one step's FLOPs over 32 steps' time would read 32 times too slow: no rate is made
    assert not {"FLOP/s", "bytes/s"} & {m.label for m in at.metric}
    at.session_state["result_tab"] = "Overview"
    at.run()
    assert "FLOPs, one loop pass" in {m.label for m in at.metric}  # the Overview says it too


def test_the_memory_tab_shows_the_peak_its_buffers_and_xlas_totals() -> None:
    at = open_tab("Memory")
    assert not at.exception, at.exception
    shown = {m.label: m.value for m in at.metric}
    arguments = (256 * 512 + 512 * 128) * 4
    assert _quantity(shown["arguments"], SIZE) == pytest.approx(arguments)
    assert _quantity(shown["outputs"], SIZE) == pytest.approx(256 * 128 * 4)
    # the arguments and the output are live together at the peak (at least)
    assert _quantity(shown["peak"], SIZE) >= arguments + 256 * 128 * 4
    assert any(s.value.startswith("Running needs") for s in at.success)  # it fits
    rows = at.dataframe[0].value
    assert rows["bytes"][0] == "512.0 KiB" and rows["made by"][0] == "argument x"  # the largest
    assert at.get("plotly_chart"), "no memory chart"
    said = texts(at)
    # x f32[256,512] and y f32[512,128]: neither is the output's f32[256,128]
    assert "**Donation** would not help here" in said and "(f32[256,128])" in said
    assert not any(b.label == "Donate the arrays" for b in at.button)
    assert "Temporaries (one block): XLA allocates" in said
    # the line column shows the app's code as `line N`, short enough to read whole
    lines = [str(cell) for cell in rows["line"].dropna()]
    assert any(cell.startswith("line ") for cell in lines), lines
    assert not any(cell.startswith("your code") for cell in lines), lines


def test_the_sidebar_counts_agree_with_their_nouns() -> None:
    status = WorkerStatus("cpu", True, 1, 2**20, 12 * 2**30, 1, 0, 1, queued=2)
    assert counts_text(status) == "pool budget 12.0 GiB · 1 request · 0 restarts · 2 waiting"
    at = open_app()
    shown = next(c.value for c in at.sidebar.caption if "pool budget" in c.value)
    assert re.search(r"· (1 request|\d+ requests) · (1 restart|\d+ restarts)\b", shown), shown
    assert not re.search(r"\b1 (requests|restarts)", shown), shown


def test_the_export_tab_offers_the_report_as_json_and_html(monkeypatch) -> None:
    saved: dict[str, tuple[bytes | str, str | None]] = {}
    store = MemoryMediaFileStorage.load_and_get_id

    def keep(self, data, mimetype, kind, filename=None):  # what a download would fetch
        saved[mimetype] = (data, filename)
        return store(self, data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", keep)
    at = open_tab("Export")
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["JSON report", "HTML report (offline)"]
    assert any("JSON: the whole report" in c.value for c in at.caption)
    data, filename = saved["application/json"]
    report = json.loads(data)
    assert filename == "f.json"
    assert report["ok"] is True and report["jaxpr"]["eqn_count"] == 2


def test_a_syntax_error_keeps_the_code_and_earlier_results() -> None:
    at = open_app()
    broken = "def f(x:\n    return x\n"
    at.text_area(key="code_w").set_value(broken).run()
    button(at, "Analyze").click().run()
    assert "syntax error" in at.error[0].value
    assert at.text_area(key="code_w").value == broken
    results = at.session_state["results"]
    assert len(results) == 2 and results[0].ok
    assert results[1].code == broken and results[1].report["error"]["kind"] == "syntax_error"


def test_static_toggle_and_spec_rows_drive_the_analysis() -> None:
    at = open_app()
    at.selectbox(key="sample_pick").select(_title("arange_static")).run()
    at.checkbox(key="in_static_f_n").uncheck().run()
    button(at, "Analyze").click().run()
    assert "value dependent shape" in at.error[0].value
    assert "static" in "\n".join(i.value for i in at.info)


def _title(name: str) -> str:
    return next(s.title for s in list_samples() if s.name == name)


def test_cache_lab_names_the_sample_as_explores_picker_does() -> None:
    at = open_app()
    at.switch_page("pages/cache.py").run()
    title = _title("dot_plus_one")  # 'Dot product plus one', not its file's name
    assert at.expander[0].label.startswith(f"Function: `f` from the sample *{title}* (")


def test_cache_lab_counts_hits_and_explains_a_shape_miss() -> None:
    at = open_app()
    at.switch_page("pages/cache.py").run()
    button(at, "Clear cache").click().run()  # the worker's session outlives an AppTest
    button(at, "Call").click().run()
    button(at, "Call").click().run()
    at.text_input(
        key=next(
            k for k in at.session_state if str(k).startswith("c_sh_") and str(k).endswith("_x")
        )
    ).set_value("128,512").run()
    button(at, "Call").click().run()
    assert not at.exception, at.exception
    page = texts(at)
    assert "2 compiled entries" in "\n".join(h.value for h in at.subheader)
    assert "shape f32[256,512] → f32[128,512]" in page
    frame = at.dataframe[0].value
    assert list(frame["hits"]) == [1, 0]


def test_cache_lab_sweep_fills_the_table() -> None:
    at = open_app()
    at.switch_page("pages/cache.py").run()
    button(at, "Clear cache").click().run()
    at.text_input(key="sweep_sizes").set_value("1, 2, 4, 2").run()
    button(at, "Run sweep").click().run()
    assert not at.exception, at.exception
    assert len(at.dataframe[0].value) == 3  # 1, 2, 4 compiled; the second 2 is a hit
    assert at.get("plotly_chart")


def test_the_cache_story_shows_a_compile_a_hit_and_an_explained_recompile_in_one_click() -> None:
    at = open_app()
    at.switch_page("pages/cache.py").run()
    button(at, "Call").click().run()  # a cache with a history: the story empties it first
    button(at, "Show the cache at work").click().run()
    assert not at.exception, at.exception
    assert "2 compiled entries" in "\n".join(h.value for h in at.subheader)
    frame = at.dataframe[0].value
    assert list(frame["hits"]) == [2, 0]  # calls 2 and 4 hit the first entry
    last_hit = frame["last hit at call"]
    assert str(last_hit.dtype) == "Int64" and last_hit.tolist()[0] == 4
    assert last_hit.isna().tolist() == [False, True]
    assert at.dataframe[0].proto.placeholder == "–"  # how the gap reads
    page = texts(at)
    assert "**Call 3** · miss" in page and "shape f32[256,512] → f32[128,512]" in page
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    drawn = {trace["name"]: trace.get("x") for trace in figure["data"]}
    assert drawn["hit: run time"] == [2, 4] and drawn["miss: compile time"] == [1, 3]
    assert "AOT bucket: run time" not in drawn  # no call routed: no such series listed
    assert "Oldest first." in page  # 'Why it recompiled' reads as the calls ran
    button(at, "Clear cache").click().run()
    assert "0 compiled entries" in "\n".join(h.value for h in at.subheader)
    assert not at.dataframe and not at.get("plotly_chart")  # Clear empties the table


def _lesson(page: str, sample: str) -> AppTest:
    from ui import program_from_sample

    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["program"] = program_from_sample(sample)
    at.session_state["results"] = []  # skip the explorer's first-visit analysis
    at.run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


@pytest.mark.slow
def test_a_link_to_a_lesson_page_loads_the_sample_it_names() -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["sample"] = "outer_inner"
    at.switch_page("pages/placement.py").run()
    assert not at.exception, at.exception
    assert at.session_state["program"].settings.sample == "outer_inner"
    chosen = {box.label: box.value for box in at.selectbox}
    assert chosen["outer function (g)"] == "g" and chosen["inner function (f)"] == "f"


def test_placement_page_measures_four_strategies() -> None:
    at = _lesson("pages/placement.py", "outer_inner")
    button(at, "Measure the four strategies").click().run()
    assert not at.exception, at.exception
    frame = at.dataframe[0].value
    assert list(frame["strategy"]) == ["jit(outer)", "jit(inner) only", "both", "none"]
    kernels = dict(zip(frame["strategy"], frame["kernels per call"], strict=True))
    assert kernels["jit(outer)"] < kernels["jit(inner) only"]


@pytest.mark.slow
def test_scaling_page_fits_exponents() -> None:
    at = _lesson("pages/scaling.py", "unrolled_loop")
    at.button_group[0].set_value([1, 4, 16, 64]).run()
    button(at, "Sweep N").click().run()
    assert not at.exception, at.exception
    assert at.metric[0].label.startswith("unrolled")
    assert len(at.get("plotly_chart")) == 3


def test_shape_sweep_page_reports_break_even() -> None:
    at = _lesson("pages/shapes.py", "batched_model")
    at.text_input[0].set_value("1, 16, 256").run()
    button(at, "Sweep shapes").click().run()
    assert not at.exception, at.exception
    frame = at.dataframe[0].value
    assert list(frame["size"]) == [1, 16, 256]
    # each row's break-even is its own compile overhead over the time jit saves a call
    rows = at.session_state["shapes"]["rows"]
    for row, shown in zip(rows, frame["break-even calls"], strict=True):
        saved = row["eager_s"] - row["run_s"]
        expected = f"{row['total_s'] / saved:,.0f}" if saved > 0 else "never (eager is as fast)"
        assert shown == expected, row


def test_buckets_page_plans_measures_and_writes_the_snippet() -> None:
    at = _lesson("pages/buckets.py", "batched_model")
    at.radio[0].set_value("type or paste").run()
    frame = at.dataframe[0].value
    assert list(frame["plan"])[:2] == ["exact shapes", "powers of two"]
    button(at, "Measure compile and run time per bucket").click().run()
    assert not at.exception, at.exception
    measured = at.dataframe[0].value
    assert measured["compile time"].notna().all()
    assert measured["latency"].notna().all()
    assert "lower(" in at.code[-1].value and "def serve" in at.code[-1].value


def test_the_bucket_plans_columns_fit_beside_each_other() -> None:
    """The default draw has ~95 distinct sizes: the exact-shapes plan lists a few of its
    buckets and counts the rest, where its cell once ran past the table's edge."""
    at = _lesson("pages/buckets.py", "batched_model")
    frame = at.dataframe[0].value
    exact = frame.set_index("plan").loc["exact shapes"]
    assert exact["compiles"] > 20
    assert exact["buckets"].endswith(f"and {exact['compiles'] - 10} more")
    assert max(frame["buckets"].str.len()) <= 60
    assert all(len(str(c)) <= 12 for c in frame.columns)  # headers that fit their columns
    config = json.loads(at.dataframe[0].proto.columns)  # column_config, as Streamlit sends it
    assert config["plan"]["width"] >= 8 * max(frame["plan"].str.len())  # a plan's whole name


def test_edited_code_is_no_samples_in_the_picker_or_the_cache_lab() -> None:
    """The picker kept 'Dot product plus one' over the user's edited code."""
    at = open_app()
    assert at.selectbox(key="sample_pick").value == _title("dot_plus_one")
    at.text_area(key="code_w").set_value(at.text_area(key="code_w").value + "\n# mine\n").run()
    assert at.selectbox(key="sample_pick").value is None  # its placeholder: your own code
    at.switch_page("pages/cache.py").run()
    assert "from your code" in at.expander[0].label


def test_code_and_results_survive_a_round_trip_through_another_page() -> None:
    at = open_app()
    edited = at.text_area(key="code_w").value + "\n# my edit\n"
    at.text_area(key="code_w").set_value(edited).run()
    at.switch_page("pages/cache.py").run()
    at.switch_page("pages/explore.py").run()
    assert not at.exception, at.exception
    assert at.text_area(key="code_w").value == edited
    assert len(at.session_state["results"]) == 1
    assert {m.label for m in at.metric} >= {"jaxpr equations"}


def test_node_details_and_its_neighbourhood() -> None:
    at = open_app()
    at.selectbox(key="sample_pick").select(_title("transformer_block")).run()
    button(at, "Analyze").click().run()
    at.session_state["result_tab"] = "jaxpr"
    at.run()
    key = next(k for k in at.session_state if str(k).endswith("_node"))
    # the panel's view folds to read in its frame (with a renderer to measure it): the
    # matmuls are in view once every group is open
    at.number_input(key=key.removesuffix("_node") + "_depth").set_value(12).run()
    details = at.selectbox(key=key)
    details.select(next(o for o in details.options if "dot_general" in o)).run()
    assert any("dot_general" in str(v) for v in at.dataframe[-1].value["value"])
    button(at, "Show its neighbourhood").click().run()
    assert not at.exception, at.exception
    shown = next(c.value for c in at.caption if c.value.startswith("Showing"))
    assert any(b.label.startswith("Show the whole graph") for b in at.button), shown


def test_a_worker_crash_stays_in_the_history_next_to_earlier_results() -> None:
    at = open_app()
    at.text_area(key="code_w").set_value("def f(x, y):\n    import os\n    os._exit(3)\n").run()
    button(at, "Analyze").click().run()
    assert not at.exception, at.exception
    assert "worker crash" in at.error[0].value
    history = at.session_state["results"]
    assert [h.ok for h in history] == [True, False] and history[1].function == "f"


def test_a_link_with_code_fills_the_editor_but_runs_nothing() -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["code"] = "def g(x):\n    return x * 2\n"
    at.query_params["args"] = "f32[3]"
    at.run()
    assert not at.exception, at.exception
    assert at.text_area(key="code_w").value.startswith("def g(x)")
    assert at.session_state["results"] == []
    assert at.selectbox(key="sample_pick").value is None  # the link's code is no sample's
    assert at.session_state["program"].settings.sample is None


def test_the_editor_component_holds_the_program_until_the_browser_sends_an_edit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("JITSCOPE_EDITOR")
    at = open_app()
    assert not [t for t in at.text_area if t.key == "code_w"], "the component, not the fallback"
    labels = {m.label: m.value for m in at.metric}
    assert labels["jaxpr equations"] == "2"
    assert at.session_state["program"].settings.sample == "dot_plus_one"
