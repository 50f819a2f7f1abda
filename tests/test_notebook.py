"""jitscope in a notebook (#38): a Report's cell HTML, `viz.show`, and the example
notebook executed through a real Jupyter kernel."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import pytest

from viz import analyze
from viz.graph import render
from viz.notebook import FRAME_PX, jitscope_line, report_html, repr_html
from viz.samples import get_sample
from viz.source import load_module

# anything a browser would fetch: the SVG's xmlns/xlink namespaces are names, not fetches
NEEDS_DOT = pytest.mark.skipif(
    render.dot_program() is None, reason="the inline SVG needs a DOT renderer (graphviz-pure)"
)
FETCHES = re.compile(r"<script|<link|<iframe|<img|\bsrc=|@import|url\(|href=\"(?!#)", re.I)


def check_self_contained(markup: str) -> None:
    assert not FETCHES.search(markup), FETCHES.search(markup)
    assert f"max-height:{FRAME_PX}px" in markup  # Colab's frame: scroll inside instead
    assert len(markup.encode()) < 2_000_000


@pytest.mark.dot
@NEEDS_DOT
def test_a_report_displays_its_counts_graph_and_stage_times():
    def mlp(w, x):
        return jnp.maximum(x @ w, 0.0).sum()

    report = analyze(mlp, "f32[64,32], f32[8,64]", runs=2)
    markup = report._repr_html_()
    check_self_contained(markup)
    assert "<svg" in markup and 'class="node"' in markup  # the compiled graph, inline
    assert f"<b>{report.jaxpr.eqn_count}</b> jaxpr equations" in markup
    assert f"<b>{report.compiled.kernel_count}</b> compiled kernels" in markup
    assert "compile " in markup and "before the first result" in markup
    assert "<summary>jaxpr graph</summary>" in markup


def test_a_report_that_failed_to_trace_shows_the_apps_error_card(tmp_path: Path):
    source = tmp_path / "branchy.py"
    source.write_text("def relu(x):\n    if x > 0:\n        return x\n    return -x\n")
    relu = load_module(source.read_text(), str(source)).relu
    report = analyze(relu, "f32[]", runs=0)
    assert not report.ok
    markup = report_html(report)
    check_self_contained(markup)
    assert 'class="error"' in markup
    assert "line 2: if x &gt; 0:" in markup  # the user's own line, read back
    assert report.error.hint and report.error.hint[:30] in markup.replace("&#x27;", "'")


def test_a_report_repr_is_one_line_not_every_ir():
    report = analyze(lambda x: x * 2, "f32[4]", runs=0)
    assert repr(report).startswith("<Report <lambda>(f32[4]) on cpu: ok; ")
    assert "\n" not in repr(report)


def test_outside_a_kernel_a_report_always_draws():
    report = analyze(lambda x: x + 1, "f32[4]", runs=0)
    assert repr_html(report) == report_html(report)


@pytest.mark.slow
def test_the_24_layer_sample_fits_colabs_display_limits():
    sample = get_sample("transformer_24")
    module = load_module(sample.code, str(sample.path))
    report = analyze(getattr(module, sample.function), sample.args, runs=0)
    markup = report_html(report)
    check_self_contained(markup)
    assert "layer" in markup and "×" in markup  # the folded layers, not 24 copies


def test_the_line_magic_names_a_missing_function():
    with pytest.raises(NameError, match="no function named 'nope'"):
        jitscope_line('nope "f32[4]"', {})
    with pytest.raises(ValueError, match="Usage: %jitscope"):
        jitscope_line('f "f32[4]" --bogus', {"f": lambda x: x})


def test_the_line_magic_reads_the_specs_names_in_the_notebook(monkeypatch):
    """`w` defined in a cell, `dense` imported from a module: the spec's names are the
    notebook's (the magic read them in dense's module: "name 'w' is not defined")."""
    import viz.notebook

    shown: list[str] = []
    monkeypatch.setattr(viz.notebook, "_display_html", lambda markup, text: shown.append(text))
    module = load_module("import jax.numpy as jnp\n\n\ndef dense(w, x):\n    return x @ w\n")
    cells = {"dense": module.dense, "w": jnp.ones((16, 4))}
    jitscope_line('dense "w, f32[8,16]" --runs 0 --no-history', cells)
    assert shown and ": ok;" in shown[0], shown


W_CELL = jnp.ones((16, 4))  # a name a notebook's cell defines


def test_show_reads_the_specs_names_where_it_is_called(monkeypatch):
    """viz.show(dense, "W_CELL, …") in a notebook, dense imported: W_CELL is the
    notebook's (it was looked up in dense's module alone)."""
    import viz.notebook

    monkeypatch.setattr(viz.notebook, "_display_html", lambda markup, text: None)
    module = load_module("import jax.numpy as jnp\n\n\ndef dense(w, x):\n    return x @ w\n")
    report = viz.notebook.show(module.dense, "W_CELL, f32[8,16]", runs=0, history=False)
    assert report.ok, report.error


def test_analyze_reads_the_specs_names_where_it_is_called_then_in_the_functions_module():
    """viz.analyze(dense, "W_CELL, …") with dense imported reads W_CELL where it is called
    (a notebook cell, a script), and a name only dense's module has there."""
    import viz

    code = (
        "import jax.numpy as jnp\nB = jnp.zeros(4)\n\n\ndef dense(w, x, b):\n    return x @ w + b\n"
    )
    module = load_module(code)
    report = viz.analyze(module.dense, "W_CELL, f32[8,16], B", runs=0)
    assert report.ok, report.error
    assert report.args == "W_CELL, f32[8,16], B"  # W_CELL read here, B in dense's module


# --------------------------------------------------------------------- a real kernel


def outputs_of(notebook: Any, first_line: str) -> list[dict]:
    cells = notebook.cells
    (cell,) = [c for c in cells if c.cell_type == "code" and c.source.startswith(first_line)]
    assert not [o for o in cell.outputs if o.output_type == "error"], cell.outputs
    return cell.outputs


def shown_html(outputs: list[dict]) -> list[str]:
    return [o["data"]["text/html"] for o in outputs if o.get("data", {}).get("text/html")]


@pytest.mark.slow
@pytest.mark.dot
@NEEDS_DOT
def test_the_notebook_displays_a_report_as_its_overview(executed: Any):
    (markup,) = shown_html(outputs_of(executed, "report = viz.analyze("))
    check_self_contained(markup)
    assert "<svg" in markup and "mlp(params, f32[32,784])" in markup
    assert re.search(r"<b>\d+</b> jaxpr equations → <b>\d+</b> StableHLO ops", markup)


@pytest.mark.slow
def test_show_displays_once_though_it_is_the_cells_value(executed: Any):
    outputs = outputs_of(executed, "viz.show(")
    (markup,) = shown_html(outputs)  # drawn once, by show
    check_self_contained(markup)
    assert "run #" in markup and "in History" in markup  # show keeps the run
    assert "<Report mlp(params, f32[8,784]) on cpu: ok" in str(outputs)  # its text form
    assert [o.output_type for o in outputs] == ["display_data"]  # no empty Out[n]: prompt


@pytest.mark.slow
@pytest.mark.dot
@NEEDS_DOT
def test_the_line_magic_is_show(executed: Any):
    (markup,) = shown_html(outputs_of(executed, "%jitscope mlp"))
    check_self_contained(markup)
    assert "mlp(params, f32[16,784])" in markup and "<svg" in markup


@pytest.mark.slow
def test_a_recording_displays_its_compiles_and_the_advice(executed: Any):
    (markup,) = shown_html(outputs_of(executed, "step = jax.jit("))
    check_self_contained(markup)
    assert 'class="jitscope-rec"' in markup  # the --html page's own section
    assert "compiles<b>3</b>" in markup and "<svg" in markup  # the timeline, inline
    assert "took 3 values (8, 16, 32)" in markup  # the bucket advice, from the summary


@pytest.mark.slow
def test_the_cell_magic_records_the_cell(executed: Any):
    (markup,) = shown_html(outputs_of(executed, "%%jitscope_record"))
    check_self_contained(markup)
    assert "compiles<b>2</b>" in markup


@pytest.mark.slow
def test_a_recording_in_a_notebook_is_named_by_its_cell_not_the_kernels_command(executed: Any):
    for first_line in ("step = jax.jit(", "%%jitscope_record"):
        (cell,) = [c for c in executed.cells if c.source.startswith(first_line)]
        (markup,) = shown_html(outputs_of(executed, first_line))
        title = re.search(r"<h1>jitscope recording: (.*?)</h1>", markup).group(1)
        assert title == f"notebook, cell In [{cell.execution_count}]"
        assert "ipykernel_launcher" not in markup and "kernel-" not in markup


@pytest.mark.slow
def test_the_cell_magics_own_line_is_no_call_site(executed: Any):
    (markup,) = shown_html(outputs_of(executed, "%%jitscope_record"))
    tree = markup.split("Where compiles came from")[1]
    assert "run_cell_magic" not in markup
    assert tree.count(" in &lt;module&gt;") == 1  # the recorded cell's line, not the magic's


def test_without_ipython_the_package_and_a_reports_html_still_work():
    import subprocess
    import sys

    script = (
        "import sys; sys.modules['IPython'] = None  # as if not installed\n"
        "import viz\n"
        "report = viz.analyze(lambda x: x + 1, 'f32[4]', runs=0)\n"
        "assert 'jaxpr equations' in report._repr_html_()\n"
        "import viz.cli\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_the_cost_line_says_xla_counts_a_loops_body_once():
    """A 20-step lax.scan RNN: XLA's 12.4 kFLOP are one step's (a fori_loop of 1, 10
    or 100 trips has the same count); the line said so nowhere."""
    import jax

    def rnn(w, xs):
        return jax.lax.scan(lambda h, x: (jnp.tanh(x @ w + h), None), jnp.zeros(8), xs)[0]

    looped = report_html(analyze(rnn, "f32[8,8], f32[20,8]", runs=0))
    assert "XLA counts a loop's body once, whatever its trip count (1 while loop)" in looped
    straight = report_html(analyze(lambda x: x * 2, "f32[8]", runs=0))
    assert "loop's body once" not in straight
