"""What the fusion-map views draw: kernel colours on both graphs, collapsed groups
striped with their kernels' colours, tinted source, the kernel table, heat."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from streamlit.testing.v1 import AppTest

import viz.fusion.view
import viz.graph
from viz import analyze
from viz.fusion.profile import KernelTime, Profile
from viz.report import Report


def two_layers(x: jax.Array, w: jax.Array) -> jax.Array:
    for i in range(2):
        with jax.named_scope(f"layer{i}"):
            x = jnp.tanh(x @ w) + 1.0
    return x.sum()


@pytest.fixture(scope="module")
def report() -> Report:
    return analyze(two_layers, "f32[16,32], f32[32,32]", runs=0)


def fills(dot: str) -> dict[str, str]:
    """node id → the last fillcolor its statement sets."""
    out = {}
    for line in dot.splitlines():
        match = re.match(r'\s*"([^"]+)" \[(.*)\];$', line)
        if match:
            colours = re.findall(r'fillcolor="([^"]*)"', match.group(2))
            if colours:
                out[match.group(1)] = colours[-1]
    return out


def test_kernel_colours_differ() -> None:
    colours = viz.fusion.view.kernel_colours(f"k{i}" for i in range(40))
    assert len(set(colours.values())) == 40


def test_each_stablehlo_op_takes_its_kernels_colour(report: Report) -> None:
    colours = viz.fusion.view.kernel_colours(e["kernel"] for e in report.fusion_map)
    graph = report.graph_models["stablehlo"]
    by_op = viz.fusion.view.ops_by_kernel(report.fusion_map, "stablehlo")
    view = viz.graph.View(graph, frozenset(graph.groups))  # everything open: leaves only
    drawn = fills(viz.fusion.view.paint(view, by_op, colours))
    single = [i for i, ks in by_op.items() if len(ks) == 1]
    assert single
    for op_id in single:
        assert drawn[op_id] == colours[by_op[op_id][0]]


def test_a_collapsed_group_is_striped_with_its_kernels(report: Report) -> None:
    colours = viz.fusion.view.kernel_colours(e["kernel"] for e in report.fusion_map)
    graph = report.graph_models["stablehlo"]
    by_op = viz.fusion.view.ops_by_kernel(report.fusion_map, "stablehlo")
    view = viz.graph.View(graph, frozenset())  # every top-level group collapsed
    drawn = fills(viz.fusion.view.paint(view, by_op, colours))
    layer = drawn["g:layer0"]
    kernels = {k for n in graph.nodes if n.scope[:1] == ("layer0",) for k in by_op.get(n.id, [])}
    assert len(kernels) >= 2
    for kernel in kernels:
        assert colours[kernel] in layer
    assert ":" in layer  # graphviz stripes: colour;share:colour...


def test_compiled_nodes_take_their_fusions_colour(report: Report) -> None:
    compiled = report.graph_models["compiled"]
    node_kernels = viz.fusion.view.compiled_kernels(compiled)
    colours = viz.fusion.view.kernel_colours(e["kernel"] for e in report.fusion_map)
    view = viz.graph.View(compiled, frozenset(compiled.groups))
    dot = viz.fusion.view.paint(view, node_kernels, colours)
    drawn = fills(dot)
    inside = [n for n in compiled.nodes if n.scope and node_kernels[n.id]]
    assert inside
    for node in inside:
        assert drawn[node.id] == colours[node_kernels[node.id][0]]
    fusion = next(p for p, g in compiled.groups.items() if g.kind == "fusion")
    assert f'fillcolor="{colours[fusion[-1]]}"' in dot.split("cluster_" + "/".join(fusion))[1]


def test_source_lines_are_tinted_by_kernel(report: Report) -> None:
    code = Path(two_layers.__code__.co_filename).read_text()
    colours = viz.fusion.view.kernel_colours(e["kernel"] for e in report.fusion_map)
    html = viz.fusion.view.tinted_source(
        code, report.fusion_map, colours, {two_layers.__code__.co_firstlineno}
    )
    body = two_layers.__code__.co_firstlineno + 3  # the `x = jnp.tanh(x @ w) + 1.0` line
    row = next(r for r in html.split("<div") if f">{body:>4}</span>" in r)
    assert "background:#" in row
    assert "outline" in html and "&gt;" not in row.split("</span>")[0]


def profile_of(*kernels: tuple[str, float, float]) -> Profile:
    """A profile of (name, mean seconds, share) kernels, one call each."""
    timed = [KernelTime(name, 1, mean, mean, share) for name, mean, share in kernels]
    return Profile("test", 1, sum(k.mean_s for k in timed), timed)


def test_kernel_table_sorts_by_time_when_profiled(report: Report) -> None:
    names = [e.kernel for e in report.fusion_map if e.is_kernel]
    profile = profile_of((names[0], 1e-3, 0.2), (names[-1], 3e-3, 0.6))
    rows = viz.fusion.view.kernel_rows(report.fusion_map, profile)
    assert rows[0]["kernel"] == names[-1] and rows[0]["time / step (ms)"] == 3.0
    assert rows[1]["share"] == 0.2
    assert "time / step (ms)" not in viz.fusion.view.kernel_rows(report.fusion_map, None)[0]


def test_heat_is_deepest_on_the_slowest_kernel() -> None:
    heat = viz.fusion.view.heat_colours(profile_of(("a", 1.0, 0.99), ("b", 0.01, 0.01)))
    assert heat["a"] < heat["b"]  # less green/blue: a deeper red


def test_selection_view_shows_and_lights_the_ids(report: Report) -> None:
    graph = report.graph_models["stablehlo"]
    ids = [n.id for n in graph.nodes if n.op == "stablehlo.tanh"][:1]
    for focus in (False, True):
        view = viz.fusion.view.selection_view(graph, ids, focus)
        items, _ = viz.graph.visible(view)
        assert any(i.id == ids[0] and i.highlighted for i in items)


def test_the_kernel_table_opens_a_kernels_own_ir() -> None:
    def app() -> None:
        from ui.fusion import kernel_table
        from viz.fusion.model import FusionEntry

        mosaic = "module {\n  func.func @add_kernel() {\n    return\n  }\n}"
        titled = FusionEntry("custom-call.1", "custom-call", title="add_kernel", kernel_ir=mosaic)
        kernel_table(None, [titled, FusionEntry("fusion", "kLoop")], "tpu", 0)

    at = AppTest.from_function(app).run()
    assert not at.exception, at.exception
    (opened,) = at.expander  # XLA's fusion has no IR of its own: one expander
    assert opened.label.startswith("add_kernel (custom-call.1): the kernel's own IR")
    assert "func.func @add_kernel" in at.code[0].value and at.code[0].language == "mlir"


def relu_then_mask(x: jax.Array, w: jax.Array) -> jax.Array:
    h = jax.nn.relu(x @ w)  # a custom_jvp_call holding a jit: two wrapper equations
    return jnp.where(jnp.tril(jnp.ones((32, 32), bool)), h, 0.0)  # a mask XLA folds


def test_the_jaxpr_equations_the_map_leaves_out_are_named_and_add_up() -> None:
    r = analyze(relu_then_mask, "f32[32,32], f32[32,32]", runs=0)
    counts = r.fusion_map_coverage.counts["jaxpr"]
    said = viz.fusion.view.jaxpr_left_out_text(
        r.graph_models["jaxpr"], r.fusion_map_coverage, r.jaxpr.eqn_count
    )
    assert said.startswith(
        f"The map counts {counts['ops']} of the program's {r.jaxpr.eqn_count} jaxpr equations"
    )
    assert "custom_jvp_call ×1" in said and "the equations inside are counted" in said
    assert "folded into constants" in said and "other equation" not in said  # all explained
    wrappers = int(re.search(r"(\d+) wrapper equations", said).group(1))
    assert wrappers + counts["folded"] + counts["ops"] == r.jaxpr.eqn_count
    # the two counts agree: nothing to say
    assert not viz.fusion.view.jaxpr_left_out_text(
        r.graph_models["jaxpr"], r.fusion_map_coverage, counts["ops"]
    )
