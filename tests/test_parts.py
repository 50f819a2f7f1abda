"""A report in parts (issue #52): the worker sends what the first screen draws, and the
texts, the fusion map, the kernels and the graph models follow it, each decoded where
it is first read. Here the two sides run in this process (the child's `wire`, the
frames, the client's decoding), with the parts held back as long as a test likes; the
real pipe is tested at the end."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from viz.history import History
from viz.ir.model import Graph, _decoded
from viz.pipeline import analyze_target
from viz.plain import pending
from viz.program import Program
from viz.report import Report
from viz.samples import get_sample
from viz.settings import Settings
from viz.target import Target
from viz.worker import frames
from viz.worker.parts import Parts
from viz.worker.protocol import Analyze, Analyzed, decode_reply
from viz.worker.replies import PARTS

APP = str(Path(__file__).resolve().parent.parent / "app.py")
TABS = ("Overview", "jaxpr", "StableHLO", "Compiled HLO", "Fusion", "Timing", "Cost & memory")


@pytest.fixture(scope="module")
def whole() -> tuple[Analyze, Report]:
    """The mlp sample analysed here: the report as the worker has it, whole."""
    sample = get_sample("mlp")
    settings = Settings(
        code=sample.code, sample=sample.name, function=sample.function, args=sample.args
    )
    import viz.overlap

    viz.overlap.own_process()  # as in the worker: read whole (a caller's is made on read)
    try:
        report = analyze_target(Target.from_settings(settings), settings.args, 0, mlir=True)
    finally:
        viz.overlap.own_process(False)
    assert report.ok and report.fusion_map and report.kernels and report.mlir
    return Analyze(settings, runs=0), report


def through_frames(message: dict[str, Any], attached: str = "") -> dict[str, Any]:
    return frames.decode(frames.encode(message, attached)[8:])


def in_parts(request: Analyze, report: Report, delay_s: float = 0.0) -> tuple[Report, Parts]:
    """`report` as the page gets it from the worker: its head decoded at once, each of
    its parts as the child wrote it, `delay_s` later."""
    head, parts = Analyzed.of(report).wire()
    payload = through_frames({"kind": "result", "payload": head})["payload"]
    coming = Parts(payload.pop(PARTS))
    reply = decode_reply(request, payload).arriving(coming)
    sent = [through_frames({"kind": "part", "name": n}, text) for n, text in parts]

    def send() -> None:
        time.sleep(delay_s)
        for message in sent:
            coming.put(message["name"], message.get(frames.ATTACHED, ""))
        coming.close()

    threading.Thread(target=send, daemon=True).start()
    return reply.report, coming


def as_json(report: Report) -> str:
    return json.dumps(report.to_dict(include_models=True), sort_keys=True, default=str)


def test_the_head_holds_what_the_first_screen_draws_and_the_rest_follows(whole) -> None:
    _request, report = whole
    head, parts = Analyzed.of(report).wire()
    parts = list(parts)
    names = [name for name, _ in parts]
    assert names == head[PARTS]
    assert names[0] == "fusion_map"  # the Overview counts its kernels
    assert {"jaxpr.text", "stablehlo.text", "compiled.text", "mlir", "kernels"} <= set(names)
    assert next(n for n in names if n.startswith("graph_models.")) == "graph_models.compiled"
    # the graph the Overview folds comes before the texts, which only the IR tabs show
    assert names.index("graph_models.compiled") < names.index("jaxpr.text")
    assert head["jaxpr"]["eqn_count"] and head["graphs"] and "text" not in head["jaxpr"]
    # the parts grow with the program, the head with what is drawn first: on this small
    # model the drawn graphs make the head half the parts' size; on a 96-layer model it
    # is 0.4 MB of 23 (bench/round_trip.py)
    small, rest = len(json.dumps(head)), sum(len(text) for _, text in parts)
    assert small < rest * 0.75, (small, rest)


def test_a_report_in_parts_reads_as_the_whole_report(whole) -> None:
    request, report = whole
    arrived, _ = in_parts(request, report)
    assert as_json(arrived) == as_json(report)
    assert arrived.graph_models["compiled"] == report.graph_models["compiled"]


def test_xla_analyses_are_made_after_the_head_is_sent(whole) -> None:
    """The worker's report leaves its cost and memory to be made as their parts are
    sent: the head does not wait for XLA's analyses, and they arrive whole."""
    request, whole_report = whole
    target = Target.from_settings(request.settings)
    report = analyze_target(target, request.settings.args, 0, defer_analyses=True)
    assert pending(report, "cost") and pending(report, "memory")
    head, parts = Analyzed.of(report).wire()
    assert head["cost"] is None and head["memory"] is None
    assert head[PARTS][:2] == ["cost", "memory"]
    assert pending(report, "memory")  # the head is out, the analyses not made yet
    assert next(parts)[0] == "cost" and not pending(report, "cost")
    arrived, _ = in_parts(request, report)
    assert arrived.memory.peak_bytes == whole_report.memory.peak_bytes > 0
    assert arrived.memory.at_peak[0].where == whole_report.memory.at_peak[0].where
    assert arrived.cost == whole_report.cost and arrived.cost.flops


def test_the_irs_texts_are_made_after_the_head_is_sent(whole) -> None:
    """The worker's report leaves the jaxpr's and the StableHLO's texts to be made as
    their parts are sent (#60: on a busy machine they were read after the compile, on
    the way to the head): they arrive as the whole report has them, each row of the
    graph models' texts noted."""
    request, whole_report = whole
    target = Target.from_settings(request.settings)
    import viz.overlap

    viz.overlap.own_process()  # as in the worker
    try:
        report = analyze_target(target, request.settings.args, 0, mlir=True, defer_texts=True)
    finally:
        viz.overlap.own_process(False)
    assert pending(report.jaxpr, "text") and pending(report.stablehlo, "text")
    head, parts = Analyzed.of(report).wire()
    assert "text" not in head["jaxpr"] and "text" not in head["stablehlo"]
    assert {"jaxpr.text", "stablehlo.text"} <= set(head[PARTS])
    assert pending(report.jaxpr, "text")  # the head is out, the text not made yet
    sent = dict(parts)
    assert sent["jaxpr.text"] == whole_report.jaxpr.text
    assert sent["stablehlo.text"] == whole_report.stablehlo.text
    arrived, _ = in_parts(request, report)
    assert as_json(arrived) == as_json(report)
    for ir in ("jaxpr", "stablehlo"):
        rows = whole_report.graph_models[ir].text_rows
        assert arrived.graph_models[ir].text_rows == rows and rows


def test_a_field_read_before_its_part_came_waits_for_it(whole) -> None:
    request, report = whole
    arrived, coming = in_parts(request, report, delay_s=0.5)
    start = time.monotonic()
    assert arrived.jaxpr.eqn_count == report.jaxpr.eqn_count  # in the head: no wait
    assert time.monotonic() - start < 0.2 and coming.missing
    assert arrived.stablehlo.text == report.stablehlo.text  # waited for
    assert time.monotonic() - start >= 0.4


def test_parts_that_never_came_read_as_empty(whole) -> None:
    request, report = whole
    head, _ = Analyzed.of(report).wire()
    payload = json.loads(json.dumps(head))
    coming = Parts(payload.pop(PARTS))
    arrived = decode_reply(request, payload).arriving(coming).report
    coming.close("the worker stopped sending")
    assert arrived.compiled.text == "" and arrived.fusion_map == [] and arrived.mlir is None
    assert arrived.graph_models["jaxpr"] == Graph("jaxpr")
    assert arrived.compiled.kernel_count == report.compiled.kernel_count  # the head stands


def test_the_history_keeps_a_report_that_arrived_in_parts_whole(whole, tmp_path) -> None:
    request, report = whole
    arrived, _ = in_parts(request, report, delay_s=0.2)
    history = History(tmp_path / "history.sqlite")
    kept = history.report(history.record(arrived, code=request.settings.code))
    assert kept is not None
    assert kept.compiled.text == report.compiled.text and kept.fusion_map == report.fusion_map
    assert kept.graph_models["compiled"] == report.graph_models["compiled"]


# -- the page ------------------------------------------------------------------------
def drawn(at: AppTest) -> list[str]:
    """Every element the page drew (not the sidebar, which names the session's worker),
    as its message to the browser."""
    found: list[str] = []

    def walk(node: Any) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None:  # a download's file id is new on every run
            found.append(re.sub(r'file_id: "\w+"', "file_id", f"{type(node).__name__}: {proto}"))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at.main)
    return found


@pytest.fixture
def page(monkeypatch: pytest.MonkeyPatch, navigation_mode: None, plain_editor: None) -> Iterator:
    from ui.results import Result

    def open_with(request: Analyze, report: Report, tab: str) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=120)
        at.session_state["program"] = Program(request.settings)
        at.session_state["results"] = [Result(request, report, recorded=True)]
        at.session_state["query_applied"] = True
        at.session_state["result_tab"] = tab
        at.run()
        assert not at.exception, at.exception
        return at

    yield open_with


def test_a_report_in_parts_draws_the_same_page_as_a_whole_one(whole, page) -> None:
    request, report = whole
    for tab in TABS:
        arrived, _ = in_parts(request, report, delay_s=0.2)
        assert drawn(page(request, arrived, tab)) == drawn(page(request, report, tab)), tab


def test_a_tab_opened_before_its_text_came_shows_it_once_it_comes(whole, page) -> None:
    request, report = whole
    arrived, coming = in_parts(request, report, delay_s=1.0)
    at = page(request, arrived, "StableHLO")
    assert not coming.missing  # the page waited for it…
    assert report.stablehlo.text.strip() in [c.value.strip() for c in at.code]  # …shows it


# -- the real pipe ---------------------------------------------------------------------
def test_the_worker_sends_the_parts_after_the_report(worker, whole) -> None:
    request, report = whole
    reply = worker.ask(request)
    arrived = reply.report
    assert reply.ok and type(object.__getattribute__(arrived, "fusion_map")).__name__ == "Later"
    assert arrived.fusion_map == report.fusion_map  # the same program: the same map
    assert arrived.compiled.text and arrived.jaxpr.text == report.jaxpr.text
    assert len(arrived.graph_models["compiled"].nodes) == len(report.graph_models["compiled"].nodes)
    assert worker.ask(request).ok  # the next request waited for the parts, then ran


def test_a_frame_carries_a_text_after_its_json() -> None:
    text = 'a part: {"json": [1, 2]}\nover lines, "quoted"\n'
    message = through_frames({"kind": "part", "name": "x"}, text)
    assert message == {"kind": "part", "name": "x", frames.ATTACHED: text}
    assert frames.ATTACHED not in through_frames({"kind": "result", "payload": {"a": "b\nc"}})


@contextlib.contextmanager
def collections() -> Iterator[list[int]]:
    """The generations the collector walks inside the block, with thresholds so low
    that a few hundred allocations set off a full collection; the collector as it was
    after."""
    import gc

    walked: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            walked.append(info["generation"])

    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    gc.enable()
    gc.set_threshold(50, 2, 2)
    gc.callbacks.append(note)
    try:
        yield walked
    finally:
        gc.callbacks.remove(note)
        gc.set_threshold(*thresholds)
        (gc.enable if enabled else gc.disable)()


def test_the_app_decodes_graphs_views_and_keeps_history_without_the_collector(whole) -> None:
    """The app's process holds every session's reports: a collection set off while it
    decodes a graph, folds its view or encodes a report for the history walked all of
    them, again and again (a 96-layer model's decode 0.37-0.77 s of CPU, growing with
    what the process held; 0.22-0.28 s paused). The collector is as it was after."""
    import gc

    import viz.graph
    from viz.history.store import _payload

    request, report = whole
    arrived, parts = in_parts(request, report)
    parts.take("nothing")  # every part is in
    text = report.graph_models.json("compiled")
    unseen = Graph.from_dict(report.graph_models["compiled"].to_dict())  # no view made yet
    with collections() as walked:
        decoded = _decoded("compiled", text)
        viz.graph.default_view(unseen, 24)
        _payload(arrived)  # the history's copy
        paused = list(walked)
        allocated = [[] for _ in range(2000)]  # and it collects again after
        assert gc.isenabled() and gc.get_threshold() == (50, 2, 2)
    assert set(paused) <= {0} and len(walked) > len(paused) and allocated
    assert decoded.nodes and decoded.to_dict() == report.graph_models["compiled"].to_dict()
