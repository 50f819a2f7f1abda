"""Repeated structure folded (issue #20): a deep layer stack as one group ×N, a training
step as its phases with the optimizer's per-parameter chains ×8, in all three IRs, and
search reaching inside the folds."""

from __future__ import annotations

import itertools
from dataclasses import replace

import jax.numpy as jnp
import pytest
from test_graph import (
    assert_counts_add_up,
    assert_no_edge_lost,
    compiled_like,
    layered,
    make_params,
    read_all,
    reader_path,
    tiny_transformer,
)

import viz.graph
from viz.graph.fold import SYNTHETIC
from viz.ir.model import Edge, Graph, Node, op_histogram, register_scopes
from viz.samples import SAMPLES_DIR
from viz.source import load_module

IRS = ("jaxpr", "stablehlo", "compiled")


def labels(view: viz.graph.View, what: str) -> list[str]:
    return [g.label for g in view.graph.groups.values() if g.attrs.get(SYNTHETIC) == what]


def test_96_layers_read_as_one_group_with_one_layer_open():
    graph = layered(96)
    view = viz.graph.default_view(graph)
    items, _ = viz.graph.visible(view)
    assert len(items) <= viz.graph.DEFAULT_NODES
    assert labels(view, "fold") == ["layer0–layer95 ×96"]
    opened = {reader_path(view, p) for p in view.expanded} - {()}
    assert opened == {("layer0",)}  # one layer's structure: attention, mlp
    shown = {i.label for i in items}
    assert {"attention", "mlp", "95 more like layer0"} <= shown
    assert_no_edge_lost(view)
    assert_counts_add_up(view, graph)
    assert op_histogram(view.graph) == op_histogram(graph)
    assert not any(SYNTHETIC in g.attrs for g in graph.groups.values())  # reader graph untouched


def test_a_fold_expands_to_its_layers_and_a_layer_to_its_ops():
    graph = layered(96)
    view = viz.graph.default_view(graph)
    names = viz.graph.expandable(graph, view)
    assert "[95 more like layer0]" in names and "layer37/attention" in names
    listed = viz.graph.expand(view, names["[95 more like layer0]"])
    items, _ = viz.graph.visible(listed)
    layers = {i.label for i in items if i.kind == "group" and i.label.startswith("layer")}
    assert layers == {f"layer{i}" for i in range(1, 96)}
    assert len(items) <= viz.graph.MAX_NODES
    one = viz.graph.expand(listed, ("layer37", "attention"))  # a reader path, inside the fold
    ids = set(viz.graph.visible_ids(one))
    assert {f"l37.attention.{j}" for j in range(6)} <= ids
    assert "l38.attention.0" not in ids
    assert_no_edge_lost(one)
    assert_counts_add_up(one, graph)


@pytest.fixture(scope="module")
def deep_graphs() -> list[Graph]:
    """A 12-layer transformer read in all three IRs."""
    params = make_params() * 3  # 4 layers of weights, repeated: 12 layers
    return read_all(tiny_transformer, params, jnp.ones((8, 32)))


def test_deep_models_fold_their_layers_in_every_ir(deep_graphs):
    for graph in deep_graphs:
        view = viz.graph.default_view(graph)
        folds = labels(view, "fold")
        assert any("×" in f and f.startswith("layer") for f in folds), (graph.ir, folds)
        assert len(viz.graph.visible(view)[0]) <= viz.graph.DEFAULT_NODES
        assert_no_edge_lost(view)
        assert_counts_add_up(view, graph)


def test_find_counts_the_matches_inside_each_fold(deep_graphs):
    graph = deep_graphs[0]  # jaxpr
    view = viz.graph.default_view(graph)
    found = viz.graph.find(graph, "dot_general")
    view.highlight = frozenset(found)
    (fold,) = [p for p, g in view.graph.groups.items() if g.attrs.get(SYNTHETIC) == "fold"]
    counts = viz.graph.match_counts(view)
    summary = dict(viz.graph.match_summary(view))
    inside = sum(1 for n in view.graph.nodes if n.id in view.highlight and n.scope[:1] == fold)
    assert counts[fold] == inside == summary[view.graph.groups[fold].label] > 0
    assert sum(summary.values()) == len(found)
    items, _ = viz.graph.visible(view)
    assert sum(i.matches for i in items) == len(found)  # every match is in some box
    dot = viz.graph.to_dot(view)
    assert f"{inside} matches" in dot  # the fold's cluster says how many it holds


@pytest.fixture(scope="module")
def train_step_graphs() -> list[Graph]:
    code = (SAMPLES_DIR / "train_step.py").read_text()
    module = load_module(code)
    x, y = jnp.ones((32, 28, 28, 1)), jnp.zeros((32,), jnp.int32)
    return read_all(module.train_step, module.params, module.opt_state, x, y)


def test_a_training_step_shows_its_phases(train_step_graphs):
    for graph in train_step_graphs:
        view = viz.graph.default_view(graph)
        items, _ = viz.graph.visible(view)
        assert len(items) <= 16, (graph.ir, [i.label for i in items])
        text = " ".join(i.label for i in items) + " ".join(
            view.graph.groups[p].label for p in view.expanded
        )
        assert "jvp(CNN)" in text and "transpose(jvp(CNN))" in text, graph.ir  # forward, backward
        assert "adam" in text, graph.ir  # the update
        # the loss: its function, or (compiled) the name scopes of the jits inside it
        assert "loss_fn" in text or "jvp(jit(log_softmax))" in text, graph.ir
        assert_no_edge_lost(view)
        assert_counts_add_up(view, graph)


def test_adams_per_parameter_chains_fold_into_one_group(train_step_graphs):
    for graph in train_step_graphs[:2]:  # XLA fuses each chain into kernels of its own
        view = viz.graph.default_view(graph)
        (fold,) = [f for f in labels(view, "fold") if f.startswith("adam")]
        assert "×8" in fold and "shapes differ" in fold, fold
        assert len(labels(view, "chain")) == 8
        (rest,) = [p for p, g in view.graph.groups.items() if g.attrs.get(SYNTHETIC) == "chains"]
        assert rest not in view.expanded  # the other seven stay one box


def test_identical_chains_fold_but_their_shared_scalars_stay_out():
    """Four parameters updated by the same three ops, all reading one step count."""
    graph = Graph(
        "jaxpr", [Node("count", "input", kind="input"), Node("scale", "div", type="f32[]")]
    )
    graph.edges.append(Edge("count", "scale"))
    for k in range(4):
        ids = [f"p{k}", f"m{k}", f"a{k}", f"s{k}"]
        graph.nodes.append(Node(ids[0], "input", kind="input", type=f"f32[{k + 1}]"))
        ops = zip(ids[1:], ("mul", "add", "sub"), strict=True)
        graph.nodes.extend(Node(i, op, type=f"f32[{k + 1}]") for i, op in ops)
        graph.edges.extend(Edge(a, b) for a, b in itertools.pairwise(ids))
        graph.edges.append(Edge("scale", f"m{k}"))
    graph.nodes.append(Node("n", "add"))  # a loner
    view = viz.graph.default_view(graph, max_nodes=12)  # a graph that fits is not folded
    assert labels(view, "fold") == ["chains ×4 · identical chains of 3 ops, shapes differ"]
    scale = next(n for n in view.graph.nodes if n.id == "scale")
    assert scale.scope == ()  # read by every chain: shared, not in one
    first = [n.id for n in view.graph.nodes if n.scope and n.scope[-1] == "[chain 1]"]
    assert first == ["m0", "a0", "s0"]
    assert_no_edge_lost(view)
    assert_counts_add_up(view, graph)


def test_unlike_siblings_and_pairs_are_not_folded():
    graph = layered(2)  # two layers: drawn side by side
    assert labels(viz.graph.default_view(graph, max_nodes=12), "fold") == []
    graph = layered(5)
    graph.nodes.append(Node("extra", "mul", scope=("layer2", "mlp")))  # layer2 differs
    view = viz.graph.default_view(graph, max_nodes=12)
    assert labels(view, "fold") == []  # runs of 2 on each side of layer2


def test_a_graph_that_fits_is_still_shown_whole():
    graph = layered(3)  # 30 ops: fits the default budget, folded or not
    view = viz.graph.default_view(graph)
    ids = set(viz.graph.visible_ids(view))
    assert {n.id for n in graph.nodes if n.kind == "op"} <= ids


def test_a_graph_up_to_twice_the_budget_also_shows_ops_a_bigger_one_its_structure():
    mid = layered(10)  # 120-odd nodes: one layer stack a bit over the budget
    assert viz.graph.DEFAULT_NODES < len(mid.nodes) <= 2 * viz.graph.DEFAULT_NODES
    opened = {reader_path(v, p) for v in [viz.graph.default_view(mid)] for p in v.expanded}
    assert ("layer0", "attention") in opened and ("layer9", "attention") in opened  # together
    big = layered(24)
    view = viz.graph.default_view(big)
    assert not any(len(reader_path(view, p)) > 1 for p in view.expanded)  # layers, no ops


def under(graph: Graph, scope: str) -> Graph:
    """`graph` with every scoped node one name scope deeper (`Transformer/layer3`), and a
    final layernorm's loose ops in that scope, as flax names a model's layers."""
    nodes = [replace(n, scope=(scope, *n.scope)) if n.scope else n for n in graph.nodes]
    nodes += [Node(f"ln{k}", "add", scope=(scope,)) for k in range(16)]
    edges = [*graph.edges, *(Edge(f"ln{k}", f"ln{k + 1}") for k in range(15))]
    return register_scopes(Graph(graph.ir, nodes, edges))


def test_layers_under_one_outer_scope_still_show_as_a_fold():
    view = viz.graph.default_view(under(layered(96), "Transformer"))
    shown = {i.label for i in viz.graph.visible(view)[0]}
    assert "95 more like layer0" in shown and {"attention", "mlp"} <= shown
    flat = compiled_like(96)  # compiled: a flat list of kernels, the scopes in attrs
    for node in flat.nodes:
        if "name_scope" in node.attrs:
            node.attrs = {**node.attrs, "name_scope": "Transformer/" + node.attrs["name_scope"]}
    for group in flat.groups.values():
        if "name_scope" in group.attrs:
            group.attrs = {**group.attrs, "name_scope": "Transformer/" + group.attrs["name_scope"]}
    labels_ = labels(viz.graph.default_view(flat), "fold")
    assert "layer0–layer95 ×96" in labels_, labels_  # not one `Transformer` run


def test_layers_that_differ_every_fourth_stay_within_the_budget():
    graph = compiled_like(96)
    for i in range(3, 96, 4):  # one more mlp op in every 4th layer: runs of look-alikes break
        graph.nodes.append(Node(f"x{i}", "mul", attrs={"name_scope": f"layer{i}/mlp"}))
        graph.edges.append(Edge(f"m{i}.3", f"x{i}"))
    view = viz.graph.default_view(graph)
    assert len(viz.graph.visible(view)[0]) <= viz.graph.DEFAULT_NODES
    assert_no_edge_lost(view)
    assert_counts_add_up(view, graph)


def test_steps_of_one_residual_stream_are_not_parallel_chains():
    code = (SAMPLES_DIR / "unrolled_loop.py").read_text()
    module = load_module(code)
    for graph in read_all(lambda x: module.unrolled(x, 32), jnp.ones((64, 64))):
        view = viz.graph.default_view(graph)
        assert not any("identical chains" in f for f in labels(view, "fold")), graph.ir


def test_two_alike_folds_can_both_be_opened_by_name():
    def stack(name: str, n: int = 30) -> list[Node]:
        return [
            Node(f"{name}{i}.{j}", "add", scope=(name, f"layer{i}"))
            for i in range(n)
            for j in range(3)
        ]

    graph = register_scopes(Graph("jaxpr", [*stack("encoder"), *stack("decoder")]))
    view = viz.graph.default_view(graph, max_nodes=20)
    names = viz.graph.expandable(graph, view)
    folds = [n for n in names if n.endswith("[layer0–layer29 ×30]")]
    assert len(folds) == 2 and len({names[n] for n in folds}) == 2, folds


def test_a_fold_of_300_layers_lists_the_others_in_boxes_of_100():
    graph = layered(320)
    view = viz.graph.default_view(graph)
    boxes = [g.label for p, g in view.graph.groups.items() if len(p) == 3 and "[rest " in p[-1]]
    assert boxes == [
        "layer1–layer100",
        "layer101–layer200",
        "layer201–layer300",
        "layer301–layer319",
    ]
    one = viz.graph.expand(view, ("layer137",))  # any one layer opens with its box of 100
    assert len(viz.graph.visible(one)[0]) <= viz.graph.MAX_NODES
    assert ("layer137",) in {reader_path(one, p) for p in one.expanded}
    assert_no_edge_lost(one)
    assert_counts_add_up(one, graph)


def test_a_folds_first_layer_opens_even_when_it_holds_loose_ops():
    """A flax block: five sub-modules and the loose ops between them (residual adds, gelu)."""
    nodes = []
    for i in range(96):
        modules = {"LayerNorm_0": 3, "SelfAttention_0": 6, "LayerNorm_1": 3, "Dense_0": 4}
        parts = [(f"Block_{i}", m) for m, size in modules.items() for _ in range(size)]
        for k, scope in enumerate([*parts, *[(f"Block_{i}",)] * 7]):
            nodes.append(Node(f"b{i}.{k}", "add", scope=scope))
    edges = [Edge(a.id, b.id) for a, b in itertools.pairwise(nodes)]
    view = viz.graph.default_view(register_scopes(Graph("jaxpr", nodes, edges)))
    shown = {i.label for i in viz.graph.visible(view)[0]}
    assert {"SelfAttention_0", "Dense_0", "95 more like Block_0"} <= shown, shown
    assert len(viz.graph.visible(view)[0]) <= viz.graph.DEFAULT_NODES


def test_a_small_frame_gets_the_layers_folded_to_read_and_a_big_one_the_default() -> None:
    """The Overview's and the Fusion tab's frames: 24 layer boxes stacked would draw at a
    tenth of their size; folded (`layer1–layer22 ×22`) they read."""
    from viz.graph.render import dot_program, svg_size

    if dot_program() is None:
        pytest.skip("needs a Graphviz renderer")
    graph = layered(24)
    frame = (540, 280)
    view = viz.graph.framed_view(graph, frame)
    width, height = svg_size(viz.graph.to_svg(viz.graph.to_dot(view)))
    assert min(frame[0] / width, frame[1] / height) >= viz.graph.dot.MIN_SCALE
    assert len(viz.graph.visible(view)[0]) < len(
        viz.graph.visible(viz.graph.default_view(graph))[0]
    )
    roomy = viz.graph.framed_view(graph, (100_000, 100_000))
    assert viz.graph.visible(roomy)[0] == viz.graph.visible(viz.graph.default_view(graph))[0]
