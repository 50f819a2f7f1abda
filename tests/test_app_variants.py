"""Explore's donate switch, compiler options and quick variants (issue #13), driven
headless with AppTest; the real worker compiles. Each test has its own history."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_app import button

from viz.history import History
from viz.options import MEMORY_SCHEDULE
from viz.samples import get_sample

TIMEOUT = 180
APP = str(Path(__file__).resolve().parent.parent / "app.py")
CHAIN = get_sample("elementwise_chain")

pytestmark = pytest.mark.usefixtures("navigation_mode", "plain_editor")


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JITSCOPE_HOME", str(tmp_path))
    return tmp_path


def chain_app(runs: int = 0) -> AppTest:
    """Explore on the elementwise chain at a small size, analyzed once."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["results"] = []  # no first-visit analysis of the default sample
    at.run()
    at.selectbox(key="sample_pick").select(CHAIN.title).run()
    at.text_input(key="in_spec_chain_x").set_value("f32[64,64]")
    at.number_input(key="runs_w").set_value(runs).run()
    button(at, "Analyze").click().run()
    assert not at.exception, at.exception
    return at


def shown(at: AppTest) -> dict:
    results = at.session_state["results"]
    return results[at.session_state["shown"]].report


def test_the_report_in_the_session_is_the_workers_alone():
    at = chain_app()
    (result,) = at.session_state["results"]
    assert result.ok and result.code == CHAIN.code and result.history_id == History().runs()[0].id
    assert not [k for k in result.report if k.startswith("_")], "UI data inside the report"


def test_the_donate_switch_sends_donate_and_the_report_says_what_was_reused():
    at = chain_app(runs=2)
    at.checkbox(key="in_donate_chain_x").check().run()
    assert "donate: x" in "\n".join(c.value for c in at.caption)
    button(at, "Analyze").click().run()
    report = shown(at)
    assert report["donate"] == ["x"]
    (x,) = report["donation"]["args"]
    assert x["donated"] and x["aliased_output"] == 0
    assert History().runs()[0].settings.donate == ["x"]
    at.session_state["result_tab"] = "Memory"
    at.run()
    assert not at.exception, at.exception
    table = next(d.value for d in at.dataframe if "argument" in d.value)
    assert list(table["argument"]) == ["x"] and list(table["aliased output"]) == ["#0"]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["reused in place"] == "16.0 KiB"  # 64 × 64 × 4 bytes
    assert at.query_params["donate"] in ("x", ["x"])  # the share link


def test_a_static_parameter_cannot_be_donated():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["results"] = []
    at.run()
    at.selectbox(key="sample_pick").select(get_sample("arange_static").title).run()
    assert at.checkbox(key="in_static_f_n").value
    assert at.checkbox(key="in_donate_f_n").disabled
    assert not at.checkbox(key="in_donate_f_x").disabled


def test_fusion_off_from_the_options_raises_the_kernel_count_many_times():
    at = chain_app()
    fused = shown(at)["compiled"]["kernel_count"]
    at.checkbox(key="in_opt_on_xla_disable_hlo_passes").check().run()
    assert at.selectbox(key="in_opt_val_xla_disable_hlo_passes").value == "fusion"
    button(at, "Analyze").click().run()
    report = shown(at)
    assert report["compiler_options"] == {"xla_disable_hlo_passes": "fusion"}
    assert report["compiled"]["kernel_count"] >= 10 * fused
    assert any("xla_disable_hlo_passes=fusion" in c.value for c in at.caption)  # the Overview


def test_a_free_form_option_line_is_sent_as_a_python_literal():
    at = chain_app()
    at.text_area(key="in_opt_free").set_value("xla_backend_optimization_level=0\n").run()
    button(at, "Analyze").click().run()
    assert shown(at)["compiler_options"] == {"xla_backend_optimization_level": 0}


def test_a_compile_that_failed_keeps_its_tabs_and_says_why():
    at = chain_app()
    at.text_area(key="in_opt_free").set_value("xla_no_such_flag=1\n").run()
    button(at, "Analyze").click().run()
    assert not at.exception, at.exception
    assert shown(at)["error"]["kind"] == "compile_error" and shown(at)["compiled"] is None
    for tab in ("jaxpr", "StableHLO", "Compiled HLO", "Fusion", "Timing", "Cost", "Memory"):
        at.session_state["result_tab"] = tab
        at.run()
        assert not at.exception, (tab, at.exception)
        assert any("compile error" in e.value for e in at.error), tab


def test_a_bad_free_form_line_shows_an_error_and_sends_nothing():
    at = chain_app()
    before = History().count()
    at.text_area(key="in_opt_free").set_value("xla_cpu_enable_fast_math True").run()
    assert any("KEY=VALUE" in e.value for e in at.error)
    button(at, "Analyze").click().run()
    assert not at.exception, at.exception
    assert any(e.value.startswith("Nothing was sent") for e in at.error)
    assert len(at.session_state["results"]) == 1 and History().count() == before


def test_demo_mode_offers_the_common_options_but_no_free_form_box(monkeypatch):
    monkeypatch.setenv("JITSCOPE_DEMO", "1")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["results"] = []
    at.run()
    assert not at.exception, at.exception
    assert at.checkbox(key="in_opt_on_xla_disable_hlo_passes")
    assert not [t for t in at.text_area if t.key == "in_opt_free"]


@pytest.mark.parametrize(
    ("label", "changed"),
    [
        ("Fusion off", lambda a, b: b["compiler_options"] == {"xla_disable_hlo_passes": "fusion"}),
        ("Donate the arrays", lambda a, b: b["donate"] == ["x"] and a["donate"] == []),
        (
            "Memory-first schedule",
            lambda a, b: b["compiler_options"] == MEMORY_SCHEDULE and a["compiler_options"] == {},
        ),
        ("Batch ×2", lambda a, b: (a["args"], b["args"]) == ("f32[64,64]", "f32[128,64]")),
    ],
)
def test_each_quick_variant_lands_in_the_diff_view_with_both_runs(label, changed):
    at = chain_app()
    original = at.session_state["results"][0]
    button(at, label).click().run()
    assert not at.exception, at.exception
    variant = at.session_state["results"][-1]
    assert len(at.session_state["results"]) == 2 and variant.ok
    assert changed(original.report, variant.report)
    assert History().runs()[0].id == variant.history_id  # recorded like any run
    assert (at.selectbox(key="diff_a").value, at.selectbox(key="diff_b").value) == (
        original.history_id,
        variant.history_id,
    )
    kernels = {m.label: m.value for m in at.metric}["compiled kernels"]
    a, b = (original.report, variant.report)
    assert kernels == f"{a['compiled']['kernel_count']} → {b['compiled']['kernel_count']}"


def test_a_variant_that_applies_already_is_offered_disabled():
    at = chain_app()
    button(at, "Donate the arrays").click().run()
    at.switch_page("pages/explore.py").run()
    assert button(at, "Donate the arrays").disabled  # the shown result donates x already
    assert not button(at, "Fusion off").disabled


def test_pass_by_pass_compiles_with_the_runs_options():
    at = chain_app()
    at.checkbox(key="in_opt_on_xla_disable_hlo_passes").check().run()
    button(at, "Analyze").click().run()
    at.session_state["result_tab"] = "Fusion"
    at.run()
    button(at, "Show the op count after every XLA pass").click().run()
    assert not at.exception, at.exception
    result = at.session_state["results"][-1]
    assert result.passes["ok"], result.passes
    last, compiled = result.passes["steps"][-1], result.report["compiled"]
    # the last dump is the program the run compiled, not the default (fused) one
    assert (last["op_count"], last["fusion_count"]) == (
        compiled["op_count"],
        compiled["fusion_count"],
    )


def test_a_link_carries_donations_and_options():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["sample"] = "elementwise_chain"
    at.query_params["args"] = "f32[32,32]"
    at.query_params["donate"] = "x"
    at.query_params["option"] = "xla_disable_hlo_passes=fusion"
    at.run()
    assert not at.exception, at.exception
    report = shown(at)
    assert report["donate"] == ["x"]
    assert report["compiler_options"] == {"xla_disable_hlo_passes": "fusion"}
    assert at.checkbox(key="in_donate_chain_x").value
    assert at.checkbox(key="in_opt_on_xla_disable_hlo_passes").value


def test_reopening_a_run_from_history_restores_its_donations_and_options():
    at = chain_app()
    at.checkbox(key="in_donate_chain_x").check()
    at.checkbox(key="in_opt_on_xla_disable_hlo_passes").check().run()
    button(at, "Analyze").click().run()
    run = History().runs()[0]
    fresh = AppTest.from_file(APP, default_timeout=TIMEOUT)
    fresh.session_state["results"] = []
    fresh.run()
    fresh.switch_page("pages/history.py").run()
    fresh.selectbox(key="hist_pick").select(run.id).run()
    next(b for b in fresh.button if b.label == "Open in Explore").click().run()
    assert not fresh.exception, fresh.exception
    assert fresh.checkbox(key="in_donate_chain_x").value
    assert fresh.checkbox(key="in_opt_on_xla_disable_hlo_passes").value
    assert fresh.session_state["results"] == []  # nothing ran


def test_profile_kernels_keeps_its_answer_beside_the_report():
    at = chain_app()
    at.session_state["result_tab"] = "Fusion"
    at.run()
    button(at, "Profile kernels").click().run()
    assert not at.exception, at.exception
    (result,) = at.session_state["results"]
    assert result.profile and result.profile["runs"] >= 1
    assert result.report.get("profile") is None  # the first report stays as it came
    # the profile's roofline says why the CPU has none (its trace has no FLOPs)
    assert any("Roofline: the cpu trace carries no FLOPs" in c.value for c in at.caption)


def test_the_memory_tabs_advice_has_its_variants_button_beside_it():
    """'What would lower it' names Donate the arrays: its button is there, not on another
    tab, and lands in the diff like the Overview's."""
    at = chain_app()
    at.session_state["result_tab"] = "Memory"
    at.run()
    assert not at.exception, at.exception
    donate = next(b for b in at.button if b.key == "mem_variant_Donate the arrays")
    donate.click().run()
    assert not at.exception, at.exception
    original, variant = at.session_state["results"]
    assert (original.report["donate"], variant.report["donate"]) == ([], ["x"])
    assert at.selectbox(key="diff_b").value == variant.history_id
