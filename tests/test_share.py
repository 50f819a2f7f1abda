"""Share links (viz.share), the program they open (viz.program) and the typed worker
protocol's edges (viz.worker.protocol): plain data, no worker needed."""

from __future__ import annotations

import pytest

from viz import share
from viz.errors import ErrorInfo, ErrorKind
from viz.program import Program, join_spec, spec_rows
from viz.samples import get_sample, list_samples
from viz.settings import Settings
from viz.worker import protocol

SAMPLES = {s.name for s in list_samples()}


def params(link: dict[str, str | list[str]]) -> dict[str, list[str]]:
    """What the page hands in: every value of each query parameter."""
    return {k: v if isinstance(v, list) else [v] for k, v in link.items()}


def test_a_sample_link_reopens_the_sample_with_its_settings_and_runs() -> None:
    program = Program.from_sample(get_sample("elementwise_chain"))
    program.settings.args, program.settings.donate = "f32[16,16]", ["x"]
    program.settings.compiler_options = {"xla_disable_hlo_passes": "fusion"}
    link = share.link(program, "cpu:8", demo=False)
    assert "code" not in link and link["sample"] == "elementwise_chain"
    assert link["device"] == "cpu:8" and link["option"] == ["xla_disable_hlo_passes=fusion"]
    opened = share.open_link(params(link), Program(Settings()), SAMPLES, demo=False)
    assert opened.run_now and opened.notices == []
    assert opened.program == program


def test_a_code_link_fills_the_program_waits_and_names_no_sample() -> None:
    program = Program(
        Settings(code="def g(x):\n    return x * 2\n", function="g", args="f32[3]", static=["n"])
    )
    link = share.link(program, "cpu", demo=False)
    assert "sample" not in link
    current = Program.from_sample(get_sample("dot_plus_one"))
    opened = share.open_link(params(link), current, SAMPLES, demo=False)
    assert not opened.run_now and "press Analyze" in opened.notices[0]
    assert opened.program is not None
    assert (
        opened.program.settings.code,
        opened.program.settings.sample,
        opened.program.settings.static,
    ) == (
        program.settings.code,
        None,
        ["n"],
    )
    assert (
        current.settings.sample == "dot_plus_one"
    )  # the session's program is not changed in place


def test_demo_links_carry_no_code_and_name_the_sample() -> None:
    opened = share.open_link({"code": ["import os"]}, Program(Settings()), SAMPLES, demo=True)
    assert opened.program is None and "Demo mode" in opened.notices[0]
    program = Program.from_sample(get_sample("mlp"))
    assert share.link(program, "cpu", demo=True)["sample"] == "mlp"


def test_a_link_with_a_bad_option_opens_without_it_and_says_so() -> None:
    link = {"sample": ["mlp"], "option": ["not an option"]}
    opened = share.open_link(link, Program(Settings()), SAMPLES, demo=False)
    assert opened.program is not None and opened.program.settings.compiler_options == {}
    assert "compiler options are ignored" in opened.notices[0]


def test_a_link_without_a_program_opens_nothing() -> None:
    assert (
        share.open_link({"device": ["cpu"]}, Program(Settings()), SAMPLES, demo=False).program
        is None
    )


def test_editing_the_code_leaves_the_sample_behind() -> None:
    program = Program.from_sample(get_sample("outer_inner"))
    assert program.hint("INNER")
    program.edit(program.settings.code)
    assert program.settings.sample == "outer_inner"
    program.edit(program.settings.code + "\n# mine\n")
    assert program.settings.sample is None and program.hint("INNER") == "f"  # the hint stays


def test_spec_rows_name_each_parameter_and_join_back() -> None:
    code = "def f(x, y, n=3):\n    return x\n"
    rows = spec_rows(code, "f", "f32[2], {'a': i32[]}")
    assert rows == [("x", "f32[2]"), ("y", "{'a': i32[]}"), ("n", "")]
    assert join_spec([item for _, item in rows]) == "f32[2], {'a': i32[]}"


def test_a_request_with_a_field_its_operation_does_not_take_is_refused() -> None:
    assert protocol.decode_request("analyze", {"code": "x", "runs": 3}).runs == 3
    with pytest.raises(protocol.BadRequest, match="takes no evil"):
        protocol.decode_request("analyze", {"code": "x", "evil": 1})
    with pytest.raises(protocol.BadRequest, match="unknown op"):
        protocol.decode_request("format_disk", {})


def test_a_failure_the_worker_saw_still_names_what_was_asked() -> None:
    asked = protocol.Analyze(
        Settings(code="...", function="f", args="f32[3]", static=["n"], device="cpu:8")
    )
    timeout = ErrorInfo(ErrorKind.TIMEOUT, "Stopped after 60 s", stage="worker")
    reply = protocol.decode_reply(asked, {"ok": False, "error": timeout.to_dict()})
    assert isinstance(reply, protocol.Analyzed) and not reply.ok
    assert reply.error == timeout and reply.report.error == timeout
    r = reply.report
    assert (r.function, r.args, r.static, r.device) == ("f", "f32[3]", ["n"], "cpu:8")


def test_replies_decode_their_nested_types_and_keep_stdout_beside_the_report() -> None:
    wire = {"ok": True, "jaxpr": {"text": "{ lambda }", "eqn_count": 1}, "stdout": "hi\n"}
    reply = protocol.decode_reply(protocol.Analyze(Settings()), wire)
    assert reply.stdout == "hi\n" and reply.report.jaxpr.eqn_count == 1
    assert "stdout" not in reply.report.to_dict()
    cache = protocol.decode_reply(
        protocol.CacheState(),
        {
            "ok": True,
            "events": [
                {
                    "type": "routed",
                    "call": 1,
                    "args": "",
                    "aot_bucket": 8,
                    "size": 5,
                    "padding": 3,
                    "run_s": 0.1,
                    "cache_size": 0,
                }
            ],
        },
    )
    assert type(cache.events[0]).__name__ == "RoutedEvent" and cache.events[0].padding == 3


def test_an_answer_that_does_not_decode_is_a_clear_internal_error() -> None:
    reply = protocol.decode_reply(protocol.Ping(), {"ok": True, "devices": 3, "error": "x"})
    assert not reply.ok and reply.error.kind == "internal_error"


def test_pass_names_survive_the_wire() -> None:
    reply = protocol.PassesReply(steps=[protocol.PassStep(3, "opt", "fusion", 7, 2)])
    wire = reply.to_dict()
    assert wire["steps"][0]["pass"] == "fusion" and "pass_" not in wire["steps"][0]
    back = protocol.decode_reply(protocol.Passes(), wire)
    assert back.steps[0].pass_ == "fusion"


def test_plain_fields_are_the_dataclass_fields_not_its_class_constants() -> None:
    request = protocol.Analyze(Settings(code="x"))
    assert "OP" not in list(request) and "REPLY" not in request.to_dict()
    with pytest.raises(KeyError):
        request["REPLY"]
