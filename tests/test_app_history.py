"""The History and Diff pages, driven headless with AppTest (the real worker runs the code).

Each test has its own JITSCOPE_HOME, so its history starts empty.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from viz import units
from viz.diff import diff_reports, kernel_rows
from viz.history import History
from viz.report import Report, Subject
from viz.samples import get_sample
from viz.units import seconds

TIMEOUT = 180
ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
CUSTOM = "import jax.numpy as jnp\n\n\ndef g(x, y):\n    return jnp.cos(x) * y\n"


pytestmark = pytest.mark.usefixtures("navigation_mode", "plain_editor")


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JITSCOPE_HOME", str(tmp_path))
    return tmp_path


def open_app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    return at


def button(at: AppTest, label: str):
    return next(b for b in at.button if b.label.startswith(label))


def analyze_custom(at: AppTest) -> None:
    at.text_area(key="code_w").set_value(CUSTOM).run()
    at.text_input(key="in_spec_g_x").set_value("f32[16]")
    at.text_input(key="in_spec_g_y").set_value("f32[16]").run()
    button(at, "Analyze").click().run()
    assert not at.exception, at.exception


def test_every_analysis_in_explore_is_recorded_and_listed(home):
    at = open_app()  # a first visit analyzes the default sample
    analyze_custom(at)
    runs = History().runs()
    assert [(r.settings.function, r.settings.args, r.source) for r in runs] == [
        ("g", "f32[16], f32[16]", "app"),
        ("f", get_sample("dot_plus_one").args, "app"),
    ]
    assert runs[1].settings.sample == "dot_plus_one" and runs[0].settings.sample is None
    assert History().code(runs[0].id) == CUSTOM
    at.switch_page("pages/history.py").run()
    assert not at.exception, at.exception
    listed = at.dataframe[0].value
    assert list(listed["run"]) == [f"#{runs[0].id}", f"#{runs[1].id}"]
    assert list(listed["kernels"]) == [r.summary["counts"]["compiled.kernel_count"] for r in runs]
    assert list(listed["trace → compile"]) == [
        seconds(History().report(r.id).compile_total_s) for r in runs
    ]
    at.selectbox(key="hist_function").select("g").run()
    assert list(at.dataframe[0].value["function"]) == ["g"]


def test_each_page_loads_result_points_at_the_one_row_its_run_is_kept_as(home):
    """A run kept once (issue #40) still diffs and reopens: its result names that row."""
    loads = [open_app() for _ in range(2)]
    (run,) = History().runs()
    for at in loads:  # each load analyzed the sample afresh
        (shown,) = at.session_state["results"]
        assert shown.report.ok and shown.history_id == run.id


def test_reopening_a_run_loads_code_and_args_and_runs_nothing(home):
    at = open_app()
    analyze_custom(at)
    custom = History().runs()[0]
    fresh = open_app()  # another session: analyzes the default sample on its first visit
    before = History().count()
    fresh.switch_page("pages/history.py").run()
    fresh.selectbox(key="hist_pick").select(custom.id).run()
    button(fresh, "Open in Explore").click().run()
    assert not fresh.exception, fresh.exception
    assert fresh.text_area(key="code_w").value == CUSTOM
    assert fresh.text_input(key="in_spec_g_x").value == "f32[16]"
    assert len(fresh.session_state["results"]) == 1  # only the first visit's result
    assert History().count() == before  # nothing ran
    fresh.switch_page("pages/explore.py").run()  # AppTest's own page follows st.switch_page
    assert History().count() == before and fresh.text_area(key="code_w").value == CUSTOM
    button(fresh, "Analyze").click().run()
    assert History().runs()[0].settings.function == "g" and History().count() == before + 1


def test_this_run_vs_the_previous_run_lands_in_the_diff_view(home):
    at = open_app()
    at.text_input(key="in_spec_f_x").set_value("f32[128,512]").run()
    button(at, "Analyze").click().run()
    first, second = History().runs()[::-1]
    button(at, "Diff with the previous run of f").click().run()
    assert not at.exception, at.exception
    assert (at.selectbox(key="diff_a").value, at.selectbox(key="diff_b").value) == (
        first.id,
        second.id,
    )
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["jaxpr equations"] == "2 → 2"
    flops = at.dataframe[2].value  # timings, cost, memory: the cost table
    assert flops["Δ (B − A)"].iloc[0].startswith("−")  # half the rows: fewer FLOPs
    at.session_state["diff_tab"] = "Kernels"
    at.run()
    a, b = (History().recorded(r.id) for r in (first, second))
    d = diff_reports(a.report, b.report, origins=(a.origin, b.origin))
    assert at.dataframe[0].value.to_dict("records") == units.table(kernel_rows(d.kernels))
    for tab in ("Ops by type", "IR text", "Compiled graphs"):
        at.session_state["diff_tab"] = tab
        at.run()
        assert not at.exception, (tab, at.exception)
    assert at.get("iframe") or at.get("graphviz_chart"), "no graph drawn"


def test_a_run_past_the_bound_says_its_full_report_was_not_kept(home, monkeypatch):
    monkeypatch.setenv("JITSCOPE_HISTORY_KEEP", "1")
    at = open_app()
    analyze_custom(at)
    old, new = History().runs()[::-1]
    assert not old.full and new.full
    at.switch_page("pages/diff.py").run()
    assert at.selectbox(key="diff_a").value == old.id
    assert any("full report was not kept" in c.value for c in at.caption)
    at.session_state["diff_tab"] = "IR text"
    at.run()
    assert any("was not kept" in i.value for i in at.info)


def test_demo_mode_lists_sample_runs_only_and_reopens_by_sample_name(home, monkeypatch):
    sample = get_sample("elementwise_chain")
    db = History()
    db.record(Report(subject=Subject(function="g", args="f32[3]")), code=CUSTOM)
    chain = Report(subject=Subject(function="chain", args="f32[8,8]"))
    db.record(chain, code=sample.code, sample=sample.name)
    monkeypatch.setenv("JITSCOPE_DEMO", "1")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.switch_page("pages/history.py").run()
    assert not at.exception, at.exception
    assert list(at.dataframe[0].value["function"]) == ["chain"]
    button(at, "Open in Explore").click().run()
    at.switch_page("pages/explore.py").run()  # AppTest's own page follows st.switch_page
    assert any(b.value.strip() == sample.code.strip() for b in at.code)  # demo: no code widget
    assert at.text_input(key="in_spec_chain_x").value == "f32[8,8]"


def test_two_reports_handed_over_show_in_the_diff_view(home):
    from viz import analyze  # in the test process only: the pages never import jax

    def double(x):
        return x * 2.0

    a = analyze(double, "f32[4]", runs=0)
    b = analyze(double, "f32[4,4]", runs=0)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["diff_pair"] = (a, b)  # what ui.open_diff(a, b) leaves behind
    at.switch_page("pages/diff.py").run()
    assert not at.exception, at.exception
    assert any("`double(f32[4,4])`" in c.value for c in at.caption)
    assert {m.label: m.value for m in at.metric}["jaxpr equations"] == "1 → 1"
    at.session_state["diff_tab"] = "Compiled graphs"
    at.session_state["diff_panels"] = True
    at.run()
    assert not at.exception, at.exception
    assert sum(c.value.startswith("Showing") for c in at.caption) == 2  # two graph panels
    button(at, "Pick two runs from the history instead").click().run()
    assert "diff_handed" not in at.session_state


def test_the_history_and_diff_modules_never_import_jax():
    check = (
        "import sys, viz.history, viz.diff, viz.cli_history; "
        "assert 'jax' not in sys.modules, 'history imported jax'"
    )
    assert subprocess.run([sys.executable, "-c", check], cwd=ROOT).returncode == 0


def test_a_history_run_and_a_report_handed_over_diff_side_by_side(home):
    at = open_app()  # a first visit analyzes (and records) the default sample
    run = History().runs()[0]
    at.session_state["diff_pair"] = (run.id, History().report(run.id))  # ui.open_diff(id, r)
    at.switch_page("pages/diff.py").run()
    assert not at.exception, at.exception
    call = f"`{run.settings.function}({run.settings.args})`"
    assert sum(call in c.value for c in at.caption) == 2
    assert all(m.value.split(" → ")[0] == m.value.split(" → ")[1] for m in at.metric)


def test_page_loads_do_not_repeat_the_first_visits_run_in_history(home):
    for _ in range(3):  # three fresh visits, each analyzing the default sample by itself
        open_app()
    assert len(History().runs()) == 1
    at = open_app()
    button(at, "Analyze").click().run()  # a click is the user's own run: it is kept
    assert len(History().runs()) == 2


def relu(x):
    if x > 0:  # a traced `if`: the run fails while tracing
        return x
    return x * 0.0


def record_two_doubles_and_a_failed_relu() -> list[int]:
    """#1 double(f32[4]), #2 double(f32[8]), then the newest: relu(f32[]), failed."""
    from viz import analyze  # in the test process only: the pages never import jax

    def double(x):
        return x * 2.0

    db = History()
    reports = [analyze(double, "f32[4]", runs=2), analyze(double, "f32[8]", runs=2)]
    return [db.record(r) for r in [*reports, analyze(relu, "f32[]", runs=2)]]


def test_a_failed_run_says_so_next_to_its_function_and_has_no_compile_time(home):
    ok, _, failed = record_two_doubles_and_a_failed_relu()
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.switch_page("pages/history.py").run()
    assert not at.exception, at.exception
    listed = at.dataframe[0].value
    # what ran, then what a regression shows in: in view at 1280 px, not past 11 columns
    assert list(listed.columns[:8]) == [
        "run",
        "when",
        "function",
        "result",
        "args",
        "trace → compile",
        "run time",
        "peak",
    ]
    rows = listed.set_index("run")
    assert rows.loc[f"#{failed}", "result"] == "failed: control flow"
    assert rows.isna().loc[f"#{failed}", "trace → compile"]  # it never compiled
    assert rows.loc[f"#{ok}", "trace → compile"] == seconds(History().report(ok).compile_total_s)


def test_the_diff_starts_on_two_runs_of_one_function_and_a_failed_side_says_it_failed(home):
    first, second, failed = record_two_doubles_and_a_failed_relu()
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.switch_page("pages/diff.py").run()
    assert not at.exception, at.exception
    assert (at.selectbox(key="diff_a").value, at.selectbox(key="diff_b").value) == (first, second)
    at.selectbox(key="diff_b").select(failed).run()
    assert {m.label: m.value for m in at.metric}["jaxpr equations"] == "1 → failed"
    line = relu.__code__.co_firstlineno + 1
    why = f"run #{failed} relu(f32[]) failed (control flow at line {line})"
    assert any(f"**{why}**" in c.value for c in at.caption)  # B's header: how it failed
    timings = at.dataframe[0].value.set_index("")
    assert timings.loc["timed runs", "B"] == "failed"
    notes = {}
    for tab in ("Kernels", "IR text", "Compiled graphs"):
        at.session_state["diff_tab"] = tab
        at.run()
        assert not at.exception, (tab, at.exception)
        notes[tab] = [i.value for i in at.info]
    assert notes["Kernels"] == [f"{why[0].upper()}{why[1:]}: it has no kernels."]
    assert f"{why[0].upper()}{why[1:]}: it has no jaxpr text." in notes["IR text"]
    assert notes["Compiled graphs"] == [f"B: {why}: it has no compiled graph."]
    assert not any("not kept" in n for texts in notes.values() for n in texts)
