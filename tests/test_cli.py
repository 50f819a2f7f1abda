"""The command line, `python -m viz analyze|cache`, run as a user would run it.

Exit status 0 whenever the analysis ran (a failing function is a result in
`error`), 2 for misuse of the CLI itself.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, check_error_contract, check_report_contract, sample_params

from viz.cache.events import CallEvent, FailedEvent
from viz.cache.signature import Reason
from viz.cli import main, summarize_cache
from viz.errors import ErrorInfo
from viz.export import html_report
from viz.report import Report, Subject
from viz.samples import Sample, get_sample, list_samples
from viz.units import nbytes


def cli(
    *args: str, timeout: float = 180, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "viz", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def analyze_sample(sample: Sample, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    static = ["--static", *sample.static] if sample.static else []
    target = f"samples/{sample.name}.py::{sample.function}"
    return cli(
        "analyze", target, "--args", sample.args, *static, "--runs", "2", "--json", str(out), *extra
    )


# --------------------------------------------------------------------------- every sample


@pytest.mark.parametrize("sample", sample_params())
def test_analyze_writes_every_design_key_for_every_sample(sample: Sample, tmp_path):
    out = tmp_path / "report.json"
    proc = analyze_sample(sample, out)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    if sample.expect_error:
        error = check_error_contract(report, sample.expect_error)
        assert f"error [{sample.expect_error}]" in proc.stdout
        assert error["line"] is not None
    else:
        check_report_contract(report)
        assert report["timings"]["run_median_s"] > 0
    assert report["function"] == sample.function
    assert proc.stdout.startswith(f"{sample.function}(")


def test_printed_summary_matches_the_json_counts(tmp_path):
    out = tmp_path / "report.json"
    proc = analyze_sample(get_sample("elementwise_chain"), out)
    report = json.loads(out.read_text())
    counts = (
        report["jaxpr"]["eqn_count"],
        report["stablehlo"]["op_count"],
        report["compiled"]["kernel_count"],
    )
    assert "jaxpr eqns {} → StableHLO ops {} → compiled kernels {}".format(*counts) in proc.stdout


# --------------------------------------------------------------------------- options


def test_html_report_is_standalone_with_the_function_and_its_graphs(tmp_path):
    page = tmp_path / "report.html"
    proc = analyze_sample(get_sample("dot_plus_one"), tmp_path / "r.json", "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    assert html.startswith("<!doctype html>")
    assert "jitscope · f" in html
    assert "<svg" in html or "digraph" in html
    assert 'src="http' not in html and "src='http" not in html  # nothing fetched online


def test_html_report_of_a_failing_function_shows_the_error(tmp_path):
    page = tmp_path / "report.html"
    sample = get_sample("relu_python_if")
    proc = analyze_sample(sample, tmp_path / "r.json", "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    assert "control_flow" in page.read_text()


def test_html_report_of_a_bare_failed_report_shows_the_error_and_no_graph():
    error = ErrorInfo("control_flow", "a Python `if` on a traced value", "use jnp.where")
    page = html_report(Report.failed(Subject(function="f"), error))
    assert "<b>control_flow</b>: a Python `if` on a traced value" in page
    assert "Fix: use jnp.where" in page
    assert page.count("<p>(no graph)</p>") == 3
    assert "&quot;mlir&quot;" not in page and "graph_models" not in page


def test_json_of_analyze_has_neither_stdout_nor_graph_models_nor_mlir(tmp_path):
    source = tmp_path / "code.py"
    source.write_text("def f(x):\n    print('tracing')\n    return x * 2.0\n")
    out, mlir = tmp_path / "report.json", tmp_path / "f.mlir"
    proc = cli(
        "analyze", f"{source}::f", "--args", "f32[2]", "--runs", "0", "--no-history",
        "--mlir", str(mlir), "--json", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["ok"], report["error"]
    assert not {"stdout", "graph_models", "mlir"} & set(report)
    assert "stablehlo" in mlir.read_text()  # the located StableHLO went to --mlir's file
    assert list(report) == [k for k in Report().to_dict() if k != "mlir"]  # in field order


def test_device_cpu8_analyzes_on_eight_simulated_devices(tmp_path):
    out = tmp_path / "report.json"
    proc = analyze_sample(get_sample("dot_plus_one"), out, "--device", "cpu:8")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    check_report_contract(report)
    assert report["device"] == "cpu:8"


def test_function_defaults_to_the_last_one_in_the_file(tmp_path):
    source = tmp_path / "code.py"
    source.write_text("def first(x):\n    return x\n\n\ndef second(x):\n    return x * 3.0\n")
    out = tmp_path / "report.json"
    proc = cli("analyze", str(source), "--args", "f32[4]", "--runs", "0", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["function"] == "second"
    assert report["timings"]["run_median_s"] is None


def test_static_names_are_passed_through(tmp_path):
    out = tmp_path / "report.json"
    proc = cli(
        "analyze",
        "samples/arange_static.py::f",
        "--args",
        "f32[16], 16",
        "--static",
        "n",
        "--runs",
        "0",
        "--json",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["ok"] and report["static"] == ["n"]


# --------------------------------------------------------------------------- exit status


def test_a_failing_function_still_exits_zero(tmp_path):
    source = tmp_path / "code.py"
    source.write_text("def f(x):\n    raise ValueError('no')\n")
    out = tmp_path / "report.json"
    proc = cli("analyze", f"{source}::f", "--args", "f32[2]", "--runs", "0", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["error"]["kind"] == "user_exception"
    assert "error [user_exception] (line 2)" in proc.stdout


def test_an_unknown_function_still_exits_zero(tmp_path):
    proc = cli("analyze", "samples/dot_plus_one.py::nope", "--args", "f32[2]", "--runs", "0")
    assert proc.returncode == 0, proc.stderr
    assert "function_not_found" in proc.stdout


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["analyze", "samples/no_such_file.py::f", "--args", "f32[2]"], "no such file"),
        (["analyze", "samples/dot_plus_one.py::f", "--bogus"], "unrecognized arguments"),
        (["analyze", "samples/dot_plus_one.py::f", "--runs", "many"], "invalid int value"),
        (["analyze"], "required"),
        (["cache", "samples/dot_plus_one.py::f"], "--call"),
        (["explain", "samples/dot_plus_one.py::f"], "invalid choice"),
        ([], "required"),
    ],
    ids=[
        "missing_file",
        "bad_flag",
        "bad_runs",
        "no_target",
        "cache_without_call",
        "bad_cmd",
        "no_cmd",
    ],
)
def test_misuse_exits_two_with_a_usage_message(argv, complaint):
    proc = cli(*argv, timeout=60)
    assert proc.returncode == 2
    assert complaint in proc.stderr
    assert "usage:" in proc.stderr


def test_help_exits_zero():
    proc = cli("analyze", "--help", timeout=60)
    assert proc.returncode == 0
    assert "--args" in proc.stdout and "--json" in proc.stdout


def test_cache_cli_reports_a_failing_call_as_an_event_and_exits_zero(tmp_path):
    source = tmp_path / "f.py"
    source.write_text("import jax.numpy as jnp\ndef f(x):\n    return jnp.sin(x)\n")
    out = tmp_path / "cache.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "viz",
            "cache",
            f"{source}::f",
            "--call",
            "f32[3]",
            "--call",
            "nosuchname",
            "--json",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    events = json.loads(out.read_text())["events"]
    assert events[0]["hit"] is False and events[1]["error"]["kind"] == "spec_error"


def test_the_cache_summary_tells_events_apart_by_their_type():
    miss = CallEvent(1, "f32[3]", "x: f32[3]", False, 0.02, 0.03, 0.001, 1, 0)
    miss.reasons = [Reason("x", "shape", "f32[2]", "f32[3]")]
    hit = CallEvent(2, "f32[3]", "x: f32[3]", True, 0.0, 0.001, 0.001, 1, 0)
    failed = FailedEvent(3, "nosuch", ErrorInfo("spec_error", "name 'nosuch'"), 1)
    assert summarize_cache([miss, hit, failed]).splitlines() == [
        "#1 MISS x: f32[3]  cache=1  compile 20.0 ms",
        "      `x`: shape f32[2] → f32[3]",
        "#2 hit  x: f32[3]  cache=1",
        "#3 error: name 'nosuch'",
    ]


def test_a_file_elsewhere_imports_its_sibling_modules(tmp_path):
    """As `python main.py` does: the file's folder is on sys.path, wherever we run from."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "helpers.py").write_text("def twice(x):\n    return x * 2\n")
    (project / "main.py").write_text(
        "from helpers import twice\n\ndef f(x):\n    return twice(x)\n"
    )
    out = tmp_path / "r.json"
    done = cli(
        "analyze",
        f"{project}/main.py::f",
        "--args",
        "f32[3]",
        "--runs",
        "0",
        "--no-history",
        "--json",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["ok"], report["error"]
    assert report["jaxpr"]["primitives"] == {"mul": 1}
    calls = cli("cache", f"{project}/main.py::f", "--call", "f32[3]", "--call", "f32[4]")
    assert calls.returncode == 0 and calls.stdout.count("MISS") == 2, calls.stdout


# --------------------------------------------------------------------------- samples by name (#40)


def test_a_sample_by_name_is_analyzed_with_its_own_args_from_any_folder(tmp_path):
    out = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "viz", "analyze", "sample:mlp", "--runs", "0", "--json", str(out)],
        cwd=tmp_path,  # nowhere near the clone's samples/
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["ok"] and report["function"] == "mlp"
    assert report["args"] == get_sample("mlp").args


def test_a_samples_static_parameters_are_the_default_and_can_be_overridden(tmp_path):
    sample = get_sample("arange_static")
    assert sample.static, "this test needs a sample with static parameters"
    out = tmp_path / "report.json"
    proc = cli("analyze", "sample:arange_static", "--runs", "0", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["static"] == list(sample.static)


def test_an_unknown_sample_lists_the_known_ones():
    proc = cli("analyze", "sample:nope")
    assert proc.returncode == 2
    assert "unknown sample 'nope'" in proc.stderr and "mlp" in proc.stderr


def test_a_samples_path_typed_outside_the_clone_points_to_its_name(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "viz", "analyze", "samples/mlp.py::mlp"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "no such file: samples/mlp.py (the samples ship with jitscope: sample:mlp)" in (
        proc.stderr
    )


MODEL = """import jax.numpy as jnp


def loss(w, x):
    y = jnp.tanh(x @ w)
    return jnp.mean(y * y)


def broken(x):
    return x.no_such_method()
"""


@pytest.mark.slow
def test_file_func_names_the_users_file_as_given_never_a_copy(tmp_path: Path) -> None:
    """Every location of `FILE::FUNC`'s JSON (fusion map, compile profile, graphs, the
    IR texts, an error) is the path the user typed, `model.py`, from the folder they
    typed it in."""
    (tmp_path / "model.py").write_text(MODEL)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = functools.partial(
        subprocess.run, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    args = ["--args", "f32[8,16], f32[4,8]", "--no-history", "--json"]
    done = run([sys.executable, "-m", "viz", "analyze", "model.py::loss", "--compile-profile",
                *args, "ok.json"])  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "ok.json").read_text())
    wheres = [row["where"] for row in report["compile_profile"]["trace_lines"]]
    assert sorted(wheres) == ["model.py:5", "model.py:6"]
    assert report["source_file"] == "model.py"
    assert "model.py:5" in report["graphs"]["compiled"]["dot"]
    done = run([sys.executable, "-m", "viz", "analyze", "model.py::broken", "--args", "f32[3]",
                "--no-history", "--json", "error.json"])  # fmt: skip
    error = json.loads((tmp_path / "error.json").read_text())["error"]
    assert error["line"] == 10
    for name in ("ok.json", "error.json"):
        text = (tmp_path / name).read_text()
        assert not re.search(r"user_[0-9a-f]{16}|/src/|<your code>", text), name


# --------------------------------------------------------------------------- what it says (#62)


def test_a_function_without_its_args_is_misuse_named_with_the_fix_and_not_recorded(tmp_path):
    source = tmp_path / "train.py"
    source.write_text("params = {'w': 1.0}\n\n\ndef step(params, x, lr=0.1):\n    return x\n")
    env = {"JITSCOPE_HOME": str(tmp_path / "home")}
    proc = cli("analyze", str(source), timeout=60, env=env)
    assert proc.returncode == 2, proc.stdout
    assert "step() needs values for params, x: no --args" in proc.stderr
    assert 'fix: --args "params, f32[8]"' in proc.stderr  # a name the module defines, kept
    part = cli("cache", f"{source}::step", "--call", "f32[3]", timeout=60, env=env)
    assert part.returncode == 2
    assert "needs a value for x: --call gives 1 of 2 (params, x)" in part.stderr
    history = cli("history", "--json", "-", timeout=60, env=env)
    assert json.loads(history.stdout) == []  # nothing ran, nothing was recorded


def test_each_command_names_itself_as_called_and_has_a_version():
    record = cli("record", "--help", timeout=60)
    assert record.returncode == 0
    assert record.stdout.startswith("usage: python -m viz record [--json OUT]")
    assert "python -m viz record --recover" in record.stdout
    assert cli("analyze", "--help", timeout=60).stdout.startswith("usage: python -m viz analyze")
    version = cli("--version", timeout=60)
    assert version.returncode == 0
    assert re.fullmatch(r"jitscope \S+ · jax \S+ · jaxlib \S+\n", version.stdout)


def test_the_console_script_names_itself_jitscope(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["/venv/bin/jitscope", "record", "--help"])
    with pytest.raises(SystemExit):
        main(["record", "--help"])
    assert capsys.readouterr().out.startswith("usage: jitscope record [--json OUT]")


def test_help_lists_the_samples():
    for argv in (["--help"], ["analyze", "--help"], ["cache", "--help"]):
        text = " ".join(cli(*argv, timeout=60).stdout.split())
        assert "samples (sample:NAME, with their own args):" in text
        assert all(s.name in text for s in list_samples())


def test_the_exports_say_what_they_wrote_and_the_html_is_small(tmp_path):
    """The mlp sample's --html under 1.5 MB: charts as HTML and inline SVG, no plotly.js."""
    out = {ext: tmp_path / f"mlp.{ext}" for ext in ("json", "html", "mlir", "json.gz")}
    proc = cli(
        "analyze", "sample:mlp", "--runs", "3", "--no-history", "--json", str(out["json"]),
        "--html", str(out["html"]), "--mlir", str(out["mlir"]), "--trace", str(out["json.gz"]),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for what, ext in [
        ("the JSON report", "json"),
        ("the HTML report", "html"),
        ("the StableHLO with locations", "mlir"),
        ("the kernel trace for Perfetto", "json.gz"),
    ]:
        size = nbytes(out[ext].stat().st_size)
        assert f"wrote {what}: {out[ext]} ({size})\n" in proc.stderr
    page = out["html"].read_text()
    assert out["html"].stat().st_size < 1_500_000
    assert "<script" not in page and "Memory over program order" in page
    assert "Kernel time per step" in page and "<svg" in page


def test_donation_is_in_the_printed_summary(tmp_path):
    proc = cli(
        "analyze", "sample:elementwise_chain", "--args", "f32[64,64]", "--donate", "x",
        "--runs", "0", "--no-history",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "donated: x → output #0 (aliased) · 16.0 KiB written in place" in proc.stdout


def test_kernel_time_is_the_kernels_own_beside_the_profiled_step():
    """optax's adamw step on CPU: 64 µs in kernels of a 233 µs profiled step; the line
    said 'kernel time per step 233 µs', more than the 126 µs run median."""
    from viz.cli import kernel_time_line
    from viz.fusion.profile import KernelTime, summarize

    kernels = [
        KernelTime("dot", 5, 40e-6, 200e-6, 0.0),
        KernelTime("ynn_fusion", 5, 24e-6, 120e-6, 0.0),
    ]
    prof = summarize({}, 5, 233e-6)
    prof.kernels, prof.unattributed_s = kernels, 233e-6 - 64e-6
    line = kernel_time_line(prof, {})
    assert line.startswith("kernel time per step 64 µs of a 233 µs profiled step")
    assert "(169 µs outside kernels)" in line
    assert line.endswith(": dot 40 µs (0%), ynn_fusion 24 µs (0%)")


CHECKED = """
import equinox as eqx


def negative(x):
    return eqx.error_if(x, x >= 0, "x must be negative")
"""


def test_a_check_that_fails_as_it_runs_is_said_once_by_its_message(tmp_path):
    """optimistix's Newton on the spec's random inputs: JAX's log of the callback's
    exception (its traceback and equinox's advice about filter_jit) came before the
    report on the terminal; the error line cut equinox's message after 'an'."""
    pytest.importorskip("equinox")
    source = tmp_path / "checked.py"
    source.write_text(CHECKED)
    done = cli("analyze", f"{source}::negative", "--args", "jnp.ones(3)", "--no-history")
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert "pure_callback failed" not in said and "Traceback" not in said
    assert "EquinoxRuntimeError: x must be negative" in said


REJITS = """
import jax


def rejits(x):
    return jax.jit(lambda v: v * 2.0)(x)  # a new lambda, a new jit: a compile each call


def plain(x):
    return x * 2.0
"""


def test_an_eager_time_spent_compiling_a_jit_inside_on_each_call_says_so(tmp_path):
    """diffrax's diffeqsolve given `ODETerm(lambda …)` compiled on every eager call:
    'run median 31 µs (eager 447.8 ms)' read as 14,000 times slower op by op."""
    from viz.cli import _eager_compiles

    source = tmp_path / "rejits.py"
    source.write_text(REJITS)
    reports = {}
    for name in ("rejits", "plain"):
        out = tmp_path / f"{name}.json"
        done = cli("analyze", f"{source}::{name}", "--args", "f32[3]", "--runs", "3",
                   "--no-history", "--json", str(out))  # fmt: skip
        assert done.returncode == 0, done.stderr
        reports[name] = Report.from_dict(json.loads(out.read_text()))
    eager = reports["rejits"].run.eager
    assert eager.compiles == eager.samples * eager.number + 1
    assert _eager_compiles(reports["rejits"]).startswith(", compiling again on each call")
    assert reports["plain"].run.eager.compiles == 0
    assert _eager_compiles(reports["plain"]) == ""


def test_the_summary_says_each_warning_as_the_app_does():
    """'(eager –)' with nothing beside it: the warning that said why was in the JSON alone."""
    from viz.cli import summarize_report

    why = "eager run failed: out of memory (95.4 GiB for one array) at model.py:5"
    report = Report.from_dict({"function": "f", "args": "f32[4]", "warnings": [why]})
    lines = summarize_report(report).splitlines()
    assert lines[-1] == f"warning: {why}"
