"""An analysis as it goes (issue #36): the pipeline tells each stage as it starts with a
glimpse of the report so far, the worker sends each as a `Progress` frame, and the
finished report is the one a plain analysis makes."""

from __future__ import annotations

import time
from collections.abc import Iterator

import jax.numpy as jnp
import pytest

from viz.pipeline import analyze_target
from viz.progress import STAGES, glimpse
from viz.report import Report
from viz.settings import Settings
from viz.target import Target
from viz.worker import Worker
from viz.worker.protocol import Analyze, Progress


def chain(x):
    for _ in range(4):
        x = jnp.tanh(x) * 1.5 + 0.25
    return x


def streamed(fn, spec: str, runs: int = 0) -> tuple[list[tuple[str, Report]], Report]:
    heard: list[tuple[str, Report]] = []
    report = analyze_target(
        Target.from_settings(Settings(), fn),
        spec,
        runs,
        on_stage=lambda stage, known: heard.append((stage, known)),
    )
    return heard, report


def test_each_stage_is_told_in_order_and_the_jaxpr_comes_before_the_compile_ends(
    worker_process: None,
):
    """In the worker, which reads the IRs beside XLA's compile."""
    heard, report = streamed(chain, "f32[64,64]", runs=3)
    stages = [stage for stage, _ in heard]
    assert stages == ["trace", "lower", "compile", "compile", "compile", "run"]
    assert [s for s in STAGES if s in stages] == sorted(set(stages), key=STAGES.index)
    jaxpr_seen = next(known for _, known in heard if known.jaxpr is not None)
    assert jaxpr_seen.timings.compile_s is None  # read beside XLA's compile, told at once
    assert jaxpr_seen.jaxpr.eqn_count == report.jaxpr.eqn_count
    assert jaxpr_seen.graphs["jaxpr"] == report.graphs["jaxpr"]  # the view to draw
    last = heard[-1][1]  # the run starts: everything compiled is known, no timing yet
    assert last.compiled.kernel_count == report.compiled.kernel_count
    assert last.timings.compile_s == report.timings.compile_s
    assert last.timings.run_median_s is None and report.timings.run_median_s is not None


def test_what_is_known_grows_stage_by_stage():
    heard, _ = streamed(chain, "f32[8,8]")
    timed = [
        (k.timings.trace_s is not None, k.timings.lower_s is not None, k.compiled is not None)
        for _, k in heard
    ]
    assert timed[0] == (False, False, False)  # the trace starts
    assert timed[1] == (True, False, False)  # the lowering starts
    assert timed[2] == (True, True, False)  # the compile starts
    assert timed == sorted(timed)  # nothing known is ever forgotten


def test_a_glimpse_carries_counts_and_views_but_no_texts_or_graph_models():
    heard, report = streamed(chain, "f32[8,8]")
    for _, known in heard:
        assert not known.graph_models and not known.fusion_map and not known.kernels
        for section in (known.jaxpr, known.stablehlo, known.compiled):
            assert section is None or section.text == ""
    assert report.jaxpr.text and report.graph_models  # the finished report keeps them
    small = glimpse(report)
    assert small.compiled.op_count == report.compiled.op_count and small.compiled.text == ""
    assert set(small.graphs) == {"jaxpr", "stablehlo", "compiled"}


def test_a_streamed_analysis_finds_what_a_plain_one_does():
    _, streamed_report = streamed(chain, "f32[16,16]")
    plain = analyze_target(Target.from_settings(Settings(), chain), "f32[16,16]", 0)
    for ir in ("jaxpr", "stablehlo", "compiled"):
        assert streamed_report.to_dict()[ir] == plain.to_dict()[ir]
    assert streamed_report.to_dict()["graphs"] == plain.to_dict()["graphs"]


def test_a_listener_that_fails_is_dropped_and_the_analysis_goes_on():
    calls = []

    def broken(stage: str, known: Report) -> None:
        calls.append(stage)
        raise OSError("the pipe is gone")

    report = analyze_target(Target.from_settings(Settings(), chain), "f32[8,8]", 0, on_stage=broken)
    assert report.ok and report.compiled.kernel_count
    assert calls == ["trace"]  # told once, then left alone


def test_a_trace_that_fails_tells_the_trace_and_then_the_error_comes():
    def bad(x):
        return x[:, None] @ x  # rank error at trace time

    heard, report = streamed(bad, "f32[3]")
    assert [stage for stage, _ in heard] == ["trace"]
    assert not report.ok and report.error.stage == "trace"


# -- through the worker ------------------------------------------------------------
CODE = (
    "import time\nimport jax.numpy as jnp\n\n\ndef f(x):\n"
    "    time.sleep(0.6)  # a slow trace: the page's clock ticks meanwhile\n"
    "    return jnp.tanh(x) @ x\n"
)


@pytest.fixture(scope="module")
def worker() -> Iterator[Worker]:
    w = Worker("cpu", timeout_s=60)
    yield w
    w.close()


def test_the_worker_sends_a_streamed_analysis_as_progress_frames(worker):
    frames: list[tuple[float, Progress]] = []
    ticks: list[float] = []
    start = time.monotonic()
    reply = worker.ask(
        Analyze(Settings(code=CODE, function="f", args="f32[32,32]"), runs=2, stream=True),
        on_progress=lambda p: frames.append((time.monotonic() - start, p)),
        on_tick=lambda: ticks.append(time.monotonic() - start),
    )
    assert reply.ok, reply.error
    labels = [p.label for _, p in frames]
    assert labels[:4] == ["load", "trace", "lower", "compile"] and labels[-1] == "run"
    assert all(p.total == len(STAGES) and p.done == STAGES.index(p.label) for _, p in frames)
    known = [p.report for _, p in frames]
    assert all(isinstance(r, Report) and r.function == "f" for r in known)
    with_jaxpr = next(r for r in known if r.jaxpr is not None)
    assert with_jaxpr.jaxpr.eqn_count == reply.report.jaxpr.eqn_count
    assert len([t for t in ticks if t < frames[2][0]]) >= 2  # the 0.6 s trace ticked
    assert reply.report.graph_models and reply.report.jaxpr.text  # the whole report after


def test_a_plain_analysis_sends_no_stage_frames(worker):
    frames: list[Progress] = []
    request = Analyze(Settings(code=CODE, function="f", args="f32[4,4]"), runs=0)
    reply = worker.ask(request, on_progress=frames.append)
    assert reply.ok and frames == []
