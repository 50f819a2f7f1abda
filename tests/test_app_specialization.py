"""Explore's Specialization panel (issue #21), driven headless with AppTest; the real
worker traces, compiles and answers the what-would-recompile buttons from its jit
cache. Each test has its own history."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_app import button

from viz.samples import get_sample
from viz.worker.protocol import CacheReply

TIMEOUT = 180
APP = str(Path(__file__).resolve().parent.parent / "app.py")

pytestmark = pytest.mark.usefixtures("navigation_mode", "plain_editor")


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JITSCOPE_HOME", str(tmp_path))
    return tmp_path


def sample_app(name: str) -> AppTest:
    """Explore on a sample, analyzed once (compile only)."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["results"] = []  # no first-visit analysis of the default sample
    at.run()
    at.selectbox(key="sample_pick").select(get_sample(name).title).run()
    at.number_input(key="runs_w").set_value(0).run()
    button(at, "Analyze").click().run()
    assert not at.exception, at.exception
    return at


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_the_overview_says_what_is_static_and_opens_the_panel():
    at = sample_app("arange_static")
    assert "1 static value (`n`), 1 dynamic leaf (`x`)" in markdown(at)
    button(at, "Open the specialization").click().run()
    assert at.session_state["result_tab"] == "Specialization"
    (table, ops) = [d.value for d in at.dataframe]
    assert list(table["argument"]) == ["x", "n"]
    assert list(table["state"]) == ["dynamic, known shape", "static value"]
    assert list(table["baked in"]) == ["f32[16]", "the value 16"]
    assert list(ops["op"]) == ["iota"] and list(ops["equals"]) == ["n, x.shape[0]"]


def test_a_button_asks_the_real_cache_and_says_miss_and_why():
    at = sample_app("arange_static")
    at.session_state["result_tab"] = "Specialization"
    at.run()
    button(at, "dtype f32 → bf16").click().run()
    assert not at.exception, at.exception
    (answer,) = [w.value for w in at.warning]
    assert "miss: jit traces and compiles again" in answer
    assert "`x`: dtype f32 → bf16" in answer and "bf16[16], 16" in answer


def test_another_static_value_recompiles_and_here_fails_to_trace():
    at = sample_app("arange_static")
    at.session_state["result_tab"] = "Specialization"
    at.run()
    button(at, "another value: 16 → 17").click().run()
    (answer,) = [e.value for e in at.error]
    assert "jit traces again, and the new trace fails" in answer
    assert "incompatible shapes" in answer  # x is f32[16], arange(17) is not


def test_the_panels_cache_is_not_the_cache_labs():
    at = sample_app("arange_static")
    at.session_state["result_tab"] = "Specialization"
    at.run()
    button(at, "dtype f32 → bf16").click().run()
    at.switch_page("pages/cache.py").run()
    button(at, "Call").click().run()  # the analysed spec, which the panel just called
    assert not at.exception, at.exception
    (reply,) = [v for k in at.session_state if isinstance(v := at.session_state[k], CacheReply)]
    (call,) = reply.events  # the Cache lab's session saw none of the panel's calls
    assert not call.hit and call.reasons[0].kind == "new_function"


def test_an_untraceable_argument_points_at_the_error_card():
    at = sample_app("nonzero_dynamic")
    assert "value dependent shape" in at.error[0].value  # the error card
    (pointer,) = [w.value for w in at.warning]
    assert "`x` cannot be traced as an array" in pointer and "line 27" in pointer
    assert "size=" in pointer  # the card's fix
    (table,) = [d.value for d in at.dataframe]
    assert list(table["state"]) == ["untraceable"]
