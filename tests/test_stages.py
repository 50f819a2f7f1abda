"""One staged pipeline under every path: Explore's analyze, the cache lab, each lesson,
pass-by-pass and the CLI all treat a 64-bit spec as 64-bit and a malformed spec as a
`spec_error` naming the item."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import REPO

from viz.errors import UserCodeError
from viz.settings import Settings
from viz.stages import ArgLeaf, Lowered, Traced, trace
from viz.target import Target
from viz.worker import Worker, protocol

# Each function fails unless it is traced with 64-bit floats.
WIDE = """\
import jax.numpy as jnp

def f(x):
    assert x.dtype == jnp.float64, f"traced as {x.dtype}"
    return x * 2.0

def inner(x):
    assert x.dtype == jnp.float64, f"traced as {x.dtype}"
    return jnp.sin(x)

def outer(x):
    return inner(x) + inner(x * 2.0)
"""
BAD_SPEC = "f32[3,,4]"


@pytest.fixture(scope="module")
def lessons() -> Iterator[Worker]:
    w = Worker("cpu", timeout_s=120)
    yield w
    w.close()


def lesson_requests(spec: str) -> dict[str, protocol.Request]:
    return {
        "placement": protocol.Placement(Settings(code=WIDE, args=spec), "outer", "inner"),
        "scaling": protocol.Scaling(Settings(code=WIDE, function="inner", args=spec), [1, 2]),
        "shape_sweep": protocol.ShapeSweep(
            Settings(code=WIDE, function="f", args=spec), param="x", axis=0, sizes=[2, 4]
        ),
        "bucket_costs": protocol.BucketCosts(
            Settings(code=WIDE, function="f", args=spec), batch_arg="x", buckets=[2, 4]
        ),
    }


# --------------------------------------------------------------------------- the API


def test_target_turns_x64_on_exactly_when_the_spec_asks_for_it():
    target = Target.from_settings(Settings(), lambda x: x)
    assert target.args("f64[2]").x64 and not target.args("f32[2]").x64
    assert not target.args("f64[2]", x64=False).x64


def test_a_target_without_expressions_takes_the_spec_language_and_its_modules_names(
    monkeypatch,
):
    monkeypatch.delenv("JITSCOPE_DEMO", raising=False)  # the target decides, not the env
    target = Target.from_settings(
        Settings(), lambda w, x: x, namespace={"params": 3}, expressions=False
    )
    assert target.args("params, f32[2]").items[0].value == 3
    with pytest.raises(UserCodeError) as refused:
        target.args("params, jnp.ones(2)")
    assert "only the spec language" in refused.value.info.message


def test_each_stage_carries_its_own_time():
    target = Target.from_settings(Settings(), lambda x: x * 2)
    traced = trace(target, target.args("f32[4]"))
    lowered = traced.lower()
    compiled = lowered.compile()
    assert min(traced.seconds, lowered.seconds, compiled.seconds) > 0
    assert "f32[4]" in compiled.text()


def test_the_compiled_stage_knows_its_named_arguments_without_reaching_back():
    target = Target.from_settings(Settings(donate=["x"]), lambda params, x: params["w"] * x)
    compiled = trace(target, target.args("{'w': f32[3]}, f32[3]")).lower().compile()
    assert compiled.args_info() == [
        ArgLeaf("params['w']", (3,), "float32", False),
        ArgLeaf("x", (3,), "float32", True),
    ]
    assert compiled.out_info() == [((3,), "float32")]
    assert not any(isinstance(v, Traced | Lowered) for v in vars(compiled).values())


def test_explore_compiles_an_f64_spec_as_64_bit():
    from viz import analyze

    report = analyze(lambda x: x * 2.0, "f64[4]", runs=1)
    assert report.ok and report.x64
    assert "f64[4]" in report.jaxpr.text and "f64[4]" in report.compiled.text


def test_explore_names_the_bad_item_of_a_malformed_spec():
    from viz import analyze

    report = analyze(lambda x: x, BAD_SPEC, runs=0)
    assert report.error.kind == "spec_error"
    assert "item 1" in report.error.message and "empty dimension" in report.error.message


# --------------------------------------------------------------------------- the cache lab


def test_cache_lab_compiles_an_f64_spec_as_64_bit_and_misses_on_the_x64_setting():
    from viz.cache.session import CacheSession

    session = CacheSession(lambda x: x * 2.0)
    first, second = session.call("f32[4]"), session.call("f64[4]")
    assert not second.hit and "f64[4]" in second.signature
    kinds = {(r["arg"], r["kind"]) for r in second.reasons}
    assert kinds == {("x", "dtype"), ("jax_enable_x64", "config")}
    assert first.notes == second.notes == []


def test_cache_lab_with_x64_off_canonicalizes_f64_and_says_why_it_hit():
    from viz.cache.session import CacheSession

    session = CacheSession(lambda x: x * 2.0)
    session.call("f32[4]", x64=False)
    event = session.call("f64[4]", x64=False)
    assert event.hit and event.type == "hit"
    assert event.notes == ["f64 canonicalized to f32: x64 is off"]


def test_cache_lab_flipping_x64_alone_is_a_config_miss():
    from viz.cache.session import CacheSession

    session = CacheSession(lambda x: x + 1)
    session.call("f32[4]", x64=False)
    event = session.call("f32[4]", x64=True)
    assert not event.hit
    assert [(r["arg"], r["kind"], r["before"], r["after"]) for r in event.reasons] == [
        ("jax_enable_x64", "config", "off", "on")
    ]


def test_cache_lab_names_the_bad_item_of_a_malformed_spec(worker):
    result = worker.ask(protocol.CacheCall(Settings(code=WIDE, function="f", args=BAD_SPEC)))
    event = result["event"]
    assert event["type"] == "failed" and event["error"]["kind"] == "spec_error"
    assert "item 1" in event["error"]["message"]


# --------------------------------------------------------------------------- lessons


@pytest.mark.slow
@pytest.mark.parametrize("op", ["placement", "scaling", "shape_sweep", "bucket_costs"])
def test_each_lesson_compiles_an_f64_spec_as_64_bit(lessons, op):
    result = lessons.ask(lesson_requests("f64[4]")[op])
    assert result["ok"], result.get("error")


@pytest.mark.parametrize("op", ["placement", "scaling", "shape_sweep", "bucket_costs"])
def test_each_lesson_names_the_bad_item_of_a_malformed_spec(lessons, op):
    result = lessons.ask(lesson_requests(BAD_SPEC)[op])
    assert not result["ok"]
    assert result["error"]["kind"] == "spec_error", result["error"]
    assert "item 1" in result["error"]["message"]


# --------------------------------------------------------------------------- pass by pass


def test_pass_by_pass_compiles_an_f64_spec_as_64_bit(worker):
    result = worker.ask(protocol.Passes(Settings(code=WIDE, function="f", args="f64[4]")))
    assert result["ok"], result.get("error")
    assert result["steps"][-1]["op_count"] >= 1


def test_pass_by_pass_names_the_bad_item_of_a_malformed_spec(worker):
    result = worker.ask(protocol.Passes(Settings(code=WIDE, function="f", args=BAD_SPEC)))
    assert result["error"]["kind"] == "spec_error"
    assert "item 1" in result["error"]["message"]


# --------------------------------------------------------------------------- the CLI


def cli(*argv: str, tmp_path: Any) -> dict[str, Any]:
    source = tmp_path / "wide.py"
    source.write_text(WIDE)
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, "-m", "viz", argv[0], f"{source}::f", *argv[1:], "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def test_cli_analyze_compiles_an_f64_spec_as_64_bit(tmp_path):
    report = cli("analyze", "--args", "f64[4]", "--runs", "0", tmp_path=tmp_path)
    assert report["ok"] and "f64[4]" in report["compiled"]["text"]


def test_cli_analyze_names_the_bad_item_of_a_malformed_spec(tmp_path):
    report = cli("analyze", "--args", BAD_SPEC, "--runs", "0", tmp_path=tmp_path)
    assert report["error"]["kind"] == "spec_error" and "item 1" in report["error"]["message"]


def test_cli_cache_treats_f64_as_64_bit(tmp_path):
    events = cli("cache", "--call", "f32[4]", "--call", "f64[4]", tmp_path=tmp_path)["events"]
    assert [e["type"] for e in events] == ["failed", "miss"]  # f asserts f64
    assert "f64[4]" in events[1]["signature"]


def test_the_cache_labs_disk_cache_never_reaches_explore_or_pass_by_pass(tmp_path, monkeypatch):
    from viz.worker import handlers, protocol

    monkeypatch.setenv("JITSCOPE_HOME", str(tmp_path))
    lab = "import jax.numpy as jnp\ndef f(x):\n    return jnp.cos(x) * 7 - 3\n"
    other = "import jax.numpy as jnp\ndef g(x):\n    return jnp.sin(x) * 5 - 2\n"
    quiet = lambda *_: None  # noqa: E731

    def call(spec: str, persistent_cache: bool) -> protocol.CacheReply:
        settings = Settings(code=lab, function="f", args=spec)
        request = protocol.CacheCall(settings, persistent_cache=persistent_cache)
        return handlers.cache_calls(quiet, request)

    call("f32[13]", persistent_cache=False)
    assert call("f32[14]", persistent_cache=True).event.type == "miss"
    assert (tmp_path / "compilation_cache").is_dir()  # on, although the first call had it off
    analyze = protocol.Analyze(Settings(code=other, function="g", args="f32[5]"), runs=0)
    report = handlers.analyze(quiet, analyze).report
    again = handlers.analyze(quiet, analyze).report  # the same program again
    assert not report.timings.compile_from_disk and not again.timings.compile_from_disk
    passes = protocol.Passes(Settings(code=other, function="g", args="f32[5]"))
    assert len(handlers.passes(quiet, passes).steps) > 3


def test_values_the_spec_evaluates_are_made_in_the_targets_x64_mode():
    from viz import analyze

    report = analyze(lambda a: a * 2, "jnp.ones(3, dtype=jnp.float64)", x64=True, runs=0)
    assert report.ok and "a:f64[3]" in report.jaxpr.text


def test_a_malformed_device_is_an_error_result_not_an_exception():
    from viz import analyze

    report = analyze(lambda a: a, "f32[3]", device="cpu:x", runs=0)
    assert report.error.kind == "device_unavailable"


def test_the_scaling_lesson_points_errors_at_the_users_step(lessons):
    code = "import jax.numpy as jnp\n\ndef step(x):\n    return x @ jnp.ones((3, 5))\n"
    result = lessons.ask(
        protocol.Scaling(Settings(code=code, function="step", args="f32[4]"), sizes=[2])
    )
    assert not result["ok"] and result["error"]["line"] == 4, result["error"]
