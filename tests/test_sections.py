"""A Report is assembled once from the sections the stages return (issue #41), and
nothing writes into it after."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import pytest

from viz.errors import ErrorInfo
from viz.pipeline import analyze
from viz.report import Report, Subject
from viz.sections import Found, IRRead, Sections, assemble
from viz.settings import Settings
from viz.worker import protocol


def chain(x):
    return jnp.tanh(x) * 2.0 + 1.0


def test_a_report_cannot_be_written_into_once_built():
    report = analyze(chain, "f32[8,8]", runs=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.ok = False  # type: ignore[misc]
    assert Report.from_dict(report.to_dict()).to_dict() == report.to_dict()


def test_nothing_found_assembles_the_bare_report_of_its_subject():
    subject = Subject(function="f", args="f32[3]", device="cpu:8")
    assert assemble(subject, Sections()) == Report(subject=subject)
    assert assemble(subject, Sections()).subject == subject


def test_a_failed_report_is_its_subject_and_the_error():
    error = ErrorInfo("spec_error", "no such dtype", "write f32")
    failed = Report.failed(Subject(function="f"), error)
    assert not failed.ok and failed.error == error and failed.function == "f"
    assert assemble(Subject(function="f"), Sections(error=error)) == failed


def test_warnings_come_in_the_order_the_stages_ran():
    found = Sections(
        jaxpr=IRRead("jaxpr", "", warning="jaxpr"),
        stablehlo=IRRead("stablehlo", "", warning="stablehlo"),
        fusion_map=Found(warning="fusion map"),
        sharding=Found(warning="sharding"),
        eager=Found(warning="eager"),
        profile=Found(warning="profile"),
        specialization=Found(warning="specialization"),
        compile_profile=Found(warning="compile profile"),
    )
    assert assemble(Subject(), found).warnings == [
        "jaxpr",
        "stablehlo",
        "fusion map",
        "sharding",
        "eager",
        "profile",
        "specialization",
        "compile profile",
    ]


def test_a_bare_failure_decoded_names_what_the_request_asked():
    asked = protocol.Analyze(Settings(function="f", args="f32[2]", donate=["x"]))
    wire = protocol.Analyzed.failure(ErrorInfo("timeout", "too slow")).to_dict()
    reply = protocol.decode_reply(asked, wire)
    assert (reply.report.function, reply.report.donate) == ("f", ["x"])
    assert reply.report == protocol.Analyzed.failure(ErrorInfo("timeout", "too slow"), asked).report


def test_a_history_that_cannot_be_written_warns_in_a_copy(monkeypatch: pytest.MonkeyPatch):
    from viz.history import HistoryError, record_api_run, store

    def unwritable(*_: object, **__: object) -> int:
        raise HistoryError("read-only")

    monkeypatch.setattr(store.History, "record", unwritable)
    report = analyze(chain, "f32[8,8]", runs=0)
    built = list(report.warnings)
    history_id, warned = record_api_run(report)
    said = "could not record the run in history: read-only"
    assert history_id is None and warned.warnings == [*built, said]
    assert report.warnings == built  # the report itself stays as it was built
