"""Variants of one compile: donated arguments and XLA compiler options (issue #13)."""

from __future__ import annotations

import jax.numpy as jnp

from viz import analyze


def step(x, y, unused):
    return x + 1.0, jnp.sum(y)


def test_a_donated_input_with_a_matching_output_is_aliased_to_it():
    report = analyze(step, "f32[64,64], f32[8], f32[3]", donate=["x"], runs=3)
    assert report.ok, report.error
    (x,) = [a for a in report.donation.args if a.name == "x"]
    assert x.donated and x.aliased_output == 0 and x.reason == ""
    assert report.donation.saved_bytes == 64 * 64 * 4
    assert report.memory["alias_bytes"] == 64 * 64 * 4
    assert report.timings["runs"] >= 1  # each call got a fresh x


def test_a_donated_input_without_a_matching_output_says_why():
    report = analyze(step, "f32[64,64], f32[8], f32[3]", donate=["y"], runs=0)
    (y,) = [a for a in report.donation.args if a.name == "y"]
    assert y.donated and y.aliased_output is None
    assert "no output has its shape and dtype (float32[8])" in y.reason
    assert any("not usable" in w for w in report.donation.warnings)


def test_an_unused_donated_input_was_pruned():
    report = analyze(step, "f32[64,64], f32[8], f32[3]", donate=["unused"], runs=0)
    (unused,) = [a for a in report.donation.args if a.name == "unused"]
    assert unused.aliased_output is None and "unused" in unused.reason


def test_donation_names_pytree_leaves_and_the_json_carries_it():
    def update(params, g):
        return {k: params[k] - 0.1 * g[k] for k in params}

    spec = "{'w': f32[4,4], 'b': f32[4]}, {'w': f32[4,4], 'b': f32[4]}"
    report = analyze(update, spec, donate=["params"], runs=2)
    aliased = {a.name: a.aliased_output for a in report.donation.args if a.donated}
    assert set(aliased) == {"params['b']", "params['w']"}
    assert sorted(aliased.values()) == [0, 1]
    data = report.to_dict()["donation"]
    assert set(data) >= {"args", "warnings"}
    assert set(data["args"][0]) >= {"name", "donated", "aliased_output", "reason"}


def test_static_and_donated_at_once_is_a_spec_error():
    report = analyze(step, "f32[4], f32[8], f32[3]", static=["x"], donate=["x"], runs=0)
    assert report.error.kind == "spec_error" and "both static and donated" in (report.error.message)


def chain(x):
    for _ in range(8):
        x = jnp.tanh(x) * 1.5 + 0.25
    return x


def test_disabling_fusion_multiplies_the_kernels_of_an_elementwise_chain():
    fused = analyze(chain, "f32[64,64]", runs=0)
    unfused = analyze(
        chain, "f32[64,64]", runs=2, compiler_options={"xla_disable_hlo_passes": "fusion"}
    )
    assert unfused.ok, unfused.error
    assert unfused.compiler_options == {"xla_disable_hlo_passes": "fusion"}
    assert fused.compiled["kernel_count"] <= 2
    assert unfused.compiled["kernel_count"] >= 10 * fused.compiled["kernel_count"]
    assert unfused.timings["run_median_s"] > 0  # the unfused executable is what ran


def test_an_option_xla_rejects_is_a_compile_error_naming_it():
    report = analyze(chain, "f32[4]", runs=0, compiler_options={"xla_no_such_flag": 1})
    assert report.error.kind == "compile_error"
    assert "xla_no_such_flag" in report.error.message
    assert report.jaxpr["eqn_count"] > 0  # what was learned before compiling stays


def test_cli_takes_donate_and_options(tmp_path):
    import json
    import subprocess
    import sys

    from conftest import REPO

    source = tmp_path / "chain.py"
    source.write_text(
        "import jax.numpy as jnp\n\ndef chain(x):\n"
        "    for _ in range(8):\n        x = jnp.tanh(x) * 1.5 + 0.25\n    return x\n"
    )
    out = tmp_path / "out.json"
    argv = [sys.executable, "-m", "viz", "analyze", f"{source}::chain", "--args", "f32[64,64]"]
    argv += ["--donate", "x", "--option", "xla_disable_hlo_passes=fusion", "--runs", "2"]
    proc = subprocess.run(
        [*argv, "--json", str(out)], cwd=REPO, capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["compiler_options"] == {"xla_disable_hlo_passes": "fusion"}
    assert report["compiled"]["kernel_count"] >= 10
    assert report["donation"]["args"] == [
        {"name": "x", "donated": True, "aliased_output": 0, "reason": ""}
    ]


def test_cli_option_values_are_python_literals_or_strings():
    from viz.cli import _option

    assert _option("a=True") == ("a", True)
    assert _option("b=3") == ("b", 3)
    assert _option("c=0.5") == ("c", 0.5)
    assert _option("xla_disable_hlo_passes=fusion,cse") == ("xla_disable_hlo_passes", "fusion,cse")


def test_donation_names_varargs_leaves_as_jax_does():
    def both(*xs):
        return xs[0] + 1.0, xs[1] * 2.0

    report = analyze(both, "f32[3], f32[3]", donate=[0, 1], runs=1)
    assert [(a.name, a.aliased_output) for a in report.donation.args] == [
        ("xs[0]", 0),
        ("xs[1]", 1),
    ]


def test_options_text_and_the_offered_set():
    from viz.options import FUSION_OFF, offered, parse_options

    text = "xla_disable_hlo_passes=fusion\n# a comment\n\nxla_backend_optimization_level = 0\n"
    assert parse_options(text) == {**FUSION_OFF, "xla_backend_optimization_level": 0}
    assert offered(FUSION_OFF) and not offered({"xla_dump_to": "/tmp/x"})
    assert not offered({"xla_backend_optimization_level": 7})
