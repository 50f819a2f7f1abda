"""Follow a line (viz.follow): what each line of the user's code became in the jaxpr, the
StableHLO and the compiled HLO, the rows of each IR's text that write it, and the way
back from a kernel to its lines. Analyzed as the app analyzes: the code as text."""

from __future__ import annotations

import functools
import re
import textwrap

import jax
import pytest

from viz.follow import SourceLines
from viz.jax_private import JAXPR_ROWS_SINCE
from viz.pipeline import analyze_target
from viz.report import Report
from viz.samples import get_sample
from viz.target import Target

TWO_LAYER = textwrap.dedent(
    """\
    import jax.numpy as jnp


    def mlp(params, x):
        n = x.shape[0]
        h = x @ params["w1"]
        h = h + params["b1"]
        h = jnp.tanh(h)
        unused = jnp.sin(h)
        y = h @ params["w2"] + params["b2"]
        return y / n
    """
)
SPEC = "{'w1': f32[64,128], 'b1': f32[128], 'w2': f32[128,10], 'b2': f32[10]}, f32[32,64]"


# jax < 0.10's jaxpr printer keeps no source map: the jaxpr's rows are not known there
JAXPR_ROWS = tuple(int(x) for x in jax.__version__.split(".")[:2]) >= tuple(
    int(x) for x in JAXPR_ROWS_SINCE.split(".")
)
FOLLOWED_IRS = ("jaxpr", "stablehlo", "compiled") if JAXPR_ROWS else ("stablehlo", "compiled")


def line_of(fragment: str, code: str = TWO_LAYER) -> int:
    """The number of the line of `code` that holds `fragment`."""
    return next(n for n, text in enumerate(code.splitlines(), 1) if fragment in text)


DOT, ADD, TANH = line_of('x @ params["w1"]'), line_of('+ params["b1"]'), line_of("jnp.tanh")
PYTHON_ONLY, DEAD = line_of("x.shape[0]"), line_of("jnp.sin")


@functools.cache
def analyzed(code: str, function: str, spec: str) -> Report:
    report = analyze_target(Target.from_code(code, function), spec, runs=0)
    assert report.ok, report.error
    return report


def two_layer() -> SourceLines:
    return SourceLines(analyzed(TWO_LAYER, "mlp", SPEC))


def primitives(report: Report, ir: str, ids: tuple[str, ...]) -> list[str]:
    nodes = report.graph_models[ir].node_map()
    return sorted(nodes[i].op for i in ids)


def test_each_line_of_a_two_layer_mlp_maps_to_its_equations_ops_and_kernels() -> None:
    report = analyzed(TWO_LAYER, "mlp", SPEC)
    lines = SourceLines(report)
    dot, add, tanh = (lines.trace(line) for line in (DOT, ADD, TANH))
    assert primitives(report, "jaxpr", dot.eqns) == ["dot_general"]
    assert primitives(report, "stablehlo", dot.ops) == ["stablehlo.dot_general"]
    assert "add" in primitives(report, "jaxpr", add.eqns)
    assert "stablehlo.add" in primitives(report, "stablehlo", add.ops)
    assert primitives(report, "jaxpr", tanh.eqns) == ["tanh"]
    assert primitives(report, "stablehlo", tanh.ops) == ["stablehlo.tanh"]
    entries = {e.kernel: e for e in report.fusion_map}
    for trace in (dot, add, tanh):
        assert trace.kernels, trace.summary()
        held = {o["id"] for k in trace.kernels for o in entries[k].stablehlo_ops}
        assert set(trace.ops) <= held  # every op of the line is in one of its kernels
        assert trace.nodes["compiled"], trace.summary()  # instructions to mark in the graph
        assert trace.summary().startswith(f"line {trace.line} → ")


def test_the_summary_tells_the_chain_from_line_to_kernels() -> None:
    tanh = two_layer().trace(TANH)
    summary = tanh.summary()
    chain = rf"line {tanh.line} → 1 equation → 1 StableHLO op → 1 kernel"
    assert re.fullmatch(chain + r" \(`[\w.]+`(, with lines? .*)?\)", summary), summary


def test_a_fused_kernel_lists_every_line_it_came_from() -> None:
    lines = two_layer()
    add, tanh = ADD, TANH
    (kernel,) = lines.trace(tanh).kernels  # XLA fuses the bias add into the tanh's loop
    assert {add, tanh} <= set(lines.kernel_lines(kernel))
    assert add in lines.trace(tanh).others[kernel]
    assert kernel in lines.trace(add).kernels
    assert f"`{kernel}`, with line" in lines.trace(tanh).summary()


def test_a_line_that_made_nothing_says_why() -> None:
    lines = two_layer()
    python_only = lines.trace(PYTHON_ONLY)
    assert not python_only and python_only.summary() == (
        f"line {PYTHON_ONLY} → no jaxpr equation: Python ran it while tracing, "
        "or it is not code that ran"
    )
    dead = lines.trace(DEAD)
    assert dead.eqns and not dead.ops and not dead.kernels
    assert dead.summary().endswith(
        "→ 1 equation → no StableHLO op: nothing the function returns reads it "
        "(JAX dropped it before lowering)"
    )
    assert DEAD in lines.lines() and PYTHON_ONLY not in lines.lines()


def test_a_line_xla_computed_while_compiling_says_it_was_folded() -> None:
    code = "import jax.numpy as jnp\n\ndef f(x):\n    c = jnp.sqrt(2.0)\n    return x * c\n"
    trace = SourceLines(analyzed(code, "f", "f32[16]")).trace(4)
    assert trace.ops and not trace.kernels
    assert trace.summary().endswith(
        "no kernel: it computes constants only (XLA folded it into a constant)"
    )


def rows_say(report: Report, ir: str) -> list[tuple[str, str]]:
    """(node, the rows its text writes it on) for every op node that has rows."""
    text = getattr(report, ir).text.splitlines()
    graph = report.graph_models[ir]
    return [
        (
            n.op if ir != "compiled" else f"%{n.id} ",
            "\n".join(text[r - 1] for r in graph.text_rows[n.id]),
        )
        for n in graph.nodes
        if n.kind == "op" and n.id in graph.text_rows
    ]


@pytest.mark.parametrize("name", ["mlp", "outer_inner", "relu_lax_cond", "attention"])
@pytest.mark.parametrize("ir", FOLLOWED_IRS)
def test_each_ir_text_writes_each_op_on_the_rows_its_graph_notes(name: str, ir: str) -> None:
    sample = get_sample(name)
    report = analyzed(sample.code, sample.function, sample.args)
    graph = report.graph_models[ir]
    said = rows_say(report, ir)
    ops = [n for n in graph.nodes if n.kind == "op"]
    assert len(said) >= 0.9 * len(ops), (len(said), len(ops))
    for op, rows in said:
        assert op.rsplit(".", 1)[-1] in rows, (op, rows)  # stablehlo.add, func.call: call


def test_following_a_sample_line_marks_rows_in_all_three_texts() -> None:
    sample = get_sample("mlp")
    report = analyzed(sample.code, sample.function, sample.args)
    lines = SourceLines(report)
    layer = line_of("jax.nn.relu", sample.code)
    trace = lines.trace(layer)
    assert layer in lines.lines()
    assert {"dot_general", "add", "max"} <= set(primitives(report, "jaxpr", trace.eqns))
    for ir in FOLLOWED_IRS:
        text = getattr(report, ir).text.splitlines()
        assert trace.rows[ir], ir
        assert any("dot" in text[r - 1] for r in trace.rows[ir]), ir
    compiled = report.graph_models["compiled"].text_rows
    assert all(compiled[k][0] in trace.rows["compiled"] for k in trace.kernels)


def test_a_compiled_node_leads_back_to_its_kernels_lines() -> None:
    report = analyzed(TWO_LAYER, "mlp", SPEC)
    lines = SourceLines(report)
    tanh = lines.trace(TANH)
    kernel = tanh.kernels[0]
    inside = next(
        i
        for i in tanh.nodes["compiled"]
        if report.graph_models["compiled"].node_map()[i].op == "tanh"
    )
    assert lines.node_lines("compiled", inside) == lines.kernel_lines(kernel)
    assert lines.node_lines("compiled", kernel) == lines.kernel_lines(kernel)  # the fusion itself
    assert TANH in lines.node_lines("jaxpr", tanh.eqns[0])


def test_the_jaxprs_rows_say_which_jax_they_need_or_are_known() -> None:
    sample = get_sample("mlp")
    lines = SourceLines(analyzed(sample.code, sample.function, sample.args))
    assert lines.rows_unknown("stablehlo") == "" and lines.rows_unknown("compiled") == ""
    if JAXPR_ROWS:
        assert lines.rows_unknown("jaxpr") == ""
    else:
        assert f"needs jax ≥ {JAXPR_ROWS_SINCE}" in lines.rows_unknown("jaxpr")
