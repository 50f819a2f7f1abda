"""bench/load.py --headless: the protocol client's pure parts (reading ForwardMsgs,
building BackMsgs), the /proc readers, and one short run against a real server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from headless import load_samples, percentile  # noqa: E402
from proc_tree import descendants, parse_stat  # noqa: E402
from stream_client import ANALYZE, RESULT_MARKER, RunView, rerun_message, trigger  # noqa: E402

Status = ForwardMsg.ScriptFinishedStatus


def element_msg(kind: str, **fields: object) -> ForwardMsg:
    """A delta adding one element, as the server sends it."""
    msg = ForwardMsg()
    for name, value in fields.items():
        setattr(getattr(msg.delta.new_element, kind), name, value)
    return msg


def finished(status: int) -> ForwardMsg:
    msg = ForwardMsg()
    msg.script_finished = status
    return msg


def test_a_button_delta_gives_its_widget_id() -> None:
    view = RunView()
    widget = "$$ID-a5f7ba87babcb00812bc5b85a0dd2f15-None"
    view.read(element_msg("button", id=widget, label=ANALYZE), 0.1)
    view.read(element_msg("button", id="$$ID-x-ov_fusion", label="Open the fusion map"), 0.2)
    assert view.buttons[ANALYZE] == widget


def test_a_new_run_forgets_the_last_runs_buttons() -> None:
    view = RunView()
    view.read(element_msg("button", id="old", label=ANALYZE), 0.1)
    fresh = ForwardMsg()
    fresh.new_session.page_script_hash = "main"
    view.read(fresh, 0.2)
    assert view.buttons == {}


def test_the_result_is_timed_when_its_marker_first_arrives() -> None:
    view = RunView()
    view.read(element_msg("metric", label="memory"), 0.5)
    assert view.result_at is None
    view.read(element_msg("metric", label=RESULT_MARKER), 1.5)
    view.read(element_msg("metric", label=RESULT_MARKER), 2.5)  # drawn again
    assert view.result_at == 1.5


def test_exceptions_and_error_cards_count_once_and_warnings_not_at_all() -> None:
    view = RunView()
    for _ in range(2):  # the page drawn twice (a rerun) shows the same problems again
        view.read(element_msg("exception", type="KeyError", message="'x'"), 1.0)
        view.read(element_msg("alert", body="**timeout**", format=Alert.Format.ERROR), 1.0)
    view.read(element_msg("exception", type="Deprecation", message="m", is_warning=True), 1.0)
    view.read(element_msg("alert", body="Waiting for the worker", format=Alert.Format.INFO), 1.0)
    assert view.exceptions == ["KeyError: 'x'"]
    assert view.error_cards == ["**timeout**"]


def test_exceptions_in_transient_elements_count() -> None:
    msg = ForwardMsg()
    transient = msg.delta.new_transient.elements.add()
    transient.exception.type, transient.exception.message = "ValueError", "bad"
    view = RunView()
    view.read(msg, 0.1)
    assert view.exceptions == ["ValueError: bad"]


def test_only_runs_that_end_on_their_own_complete_a_page() -> None:
    view = RunView()
    view.read(finished(Status.FINISHED_EARLY_FOR_RERUN), 0.1)
    assert view.runs_complete == 0
    view.read(finished(Status.FINISHED_SUCCESSFULLY), 0.2)
    assert view.runs_complete == 1


def test_the_next_rerun_uses_the_page_and_query_the_server_last_set() -> None:
    view = RunView(query_string="sample=mlp")
    nav, info = ForwardMsg(), ForwardMsg()
    nav.navigation.page_script_hash = "explore-hash"
    info.page_info_changed.query_string = "function=mlp&sample=mlp"
    view.read(nav, 0.1)
    view.read(info, 0.2)
    assert (view.page_hash, view.query_string) == ("explore-hash", "function=mlp&sample=mlp")


def test_a_click_is_a_rerun_with_the_button_triggered() -> None:
    msg = BackMsg()
    msg.ParseFromString(rerun_message("sample=mlp", "explore-hash", [trigger("$$ID-b")]))
    state = msg.rerun_script
    assert msg.WhichOneof("type") == "rerun_script"
    assert (state.query_string, state.page_script_hash) == ("sample=mlp", "explore-hash")
    [widget] = state.widget_states.widgets
    assert widget.id == "$$ID-b" and widget.WhichOneof("value") == "trigger_value"
    assert widget.trigger_value


def test_the_first_message_names_no_page_and_no_widgets() -> None:
    msg = BackMsg()
    msg.ParseFromString(rerun_message("sample=dropout"))
    assert msg.rerun_script.page_script_hash == ""
    assert not msg.rerun_script.widget_states.widgets


def test_proc_stat_is_read_from_the_last_parenthesis() -> None:
    stat = "42 (a (odd) name) S 7 42 42 0 -1 4194560 1 0 0 0 30 12 5 3 20 0 1 0 9 1 1"
    proc = parse_stat(stat, "100 25 3 1 0 20 0")
    assert (proc.ppid, proc.comm, proc.ticks) == (7, "a (odd) name", 30 + 12 + 5 + 3)
    assert proc.rss == 25 * os.sysconf("SC_PAGE_SIZE")


def test_descendants_walk_the_whole_tree() -> None:
    procs = {
        1: parse_stat("1 (init) S 0 " + "0 " * 20),
        10: parse_stat("10 (server) S 1 " + "0 " * 20),
        11: parse_stat("11 (worker) S 10 " + "0 " * 20),
        12: parse_stat("12 (child) S 11 " + "0 " * 20),
        20: parse_stat("20 (other) S 1 " + "0 " * 20),
    }
    assert sorted(descendants(10, procs)) == [11, 12]


def test_sessions_take_different_samples_while_there_are_enough() -> None:
    eight = load_samples(8)
    assert len({s.name for s in eight}) == 8
    assert not any(s.expect_error for s in eight)
    assert [s.name for s in load_samples(3, ["mlp", "dropout"])] == ["mlp", "dropout", "mlp"]


def test_p95_of_eight_is_the_largest() -> None:
    assert percentile([float(i) for i in range(1, 9)], 0.95) == 8.0
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0


@pytest.mark.slow
def test_two_headless_sessions_against_a_real_server() -> None:
    """Two servers start (one for the single-session figures, one for the burst):
    about 10 s on a quiet 2-core machine."""
    out = subprocess.run(
        [sys.executable, "bench/load.py", "--headless", "2", "--samples", "dot_plus_one,mlp"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "2 sessions at once: p50" in text and "floor:" in text and "peak RSS:" in text
    assert "exceptions: 0 " in text, text
    assert text.count("\n  shared ") == 2 and "no result" not in text, text
