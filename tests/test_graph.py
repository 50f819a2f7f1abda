"""Graph views: collapse/expand, default view, search, neighbourhood, DOT."""

from __future__ import annotations

import gc
import inspect
import random
import re
import weakref
from collections import Counter
from dataclasses import fields, replace

import jax
import jax.numpy as jnp
import pytest

import viz.graph
from viz.graph import render
from viz.ir.hlo import read_hlo
from viz.ir.jaxpr import read_jaxpr
from viz.ir.model import Edge, Graph, Group, Node, SourceLoc, op_histogram, register_scopes
from viz.ir.stablehlo import read_stablehlo

D, SEQ, LAYERS = 32, 8, 4


def layernorm(x):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)


def tiny_transformer(params, x):
    for i, p in enumerate(params):
        with jax.named_scope(f"layer{i}"):
            with jax.named_scope("attention"):
                h = layernorm(x)
                scores = jax.nn.softmax(h @ p["wq"] @ (h @ p["wk"]).T / D**0.5)
                x = x + scores @ (h @ p["wv"])
            with jax.named_scope("mlp"):
                x = x + jax.nn.gelu(layernorm(x) @ p["up"]) @ p["down"]
    return layernorm(x)


DOT_LINE = inspect.getsourcelines(tiny_transformer)[1] + 5  # the `scores = ...` line


def flat(x):
    for _ in range(150):  # 300+ top-level ops, no scopes
        x = jnp.sin(x) * 1.01
    return x


def make_params():
    keys = jax.random.split(jax.random.key(0), LAYERS * 5)
    shapes = {"wq": (D, D), "wk": (D, D), "wv": (D, D), "up": (D, 4 * D), "down": (4 * D, D)}
    return [
        {
            name: jax.random.normal(keys[5 * i + j], shape)
            for j, (name, shape) in enumerate(shapes.items())
        }
        for i in range(LAYERS)
    ]


def read_all(fn, *args) -> list[Graph]:
    traced = jax.jit(fn).trace(*args)
    lowered = traced.lower()
    return [
        read_jaxpr(traced.jaxpr),
        read_stablehlo(lowered.compiler_ir("stablehlo")),
        read_hlo(lowered.compile()),
    ]


@pytest.fixture(scope="module")
def model_graphs() -> list[Graph]:
    return read_all(tiny_transformer, make_params(), jnp.ones((SEQ, D)))


@pytest.fixture(scope="module")
def flat_graphs() -> list[Graph]:
    return read_all(flat, jnp.ones((SEQ, D)))


# ------------------------------------------------------------ invariants


def representative(view: viz.graph.View, items: list[viz.graph.VisibleNode], node) -> str:
    """The visible item standing for `node`: itself, or a collapsed group holding it."""
    holders = [
        i.id
        for i in items
        if i.id == node.id or (i.kind == "group" and node.scope[: len(i.path)] == i.path)
    ]
    assert len(holders) == 1, (node.id, holders)
    return holders[0]


def assert_no_edge_lost(view: viz.graph.View) -> None:
    items, edges = viz.graph.visible(view)
    rep = {n.id: representative(view, items, n) for n in view.graph.nodes}
    drawn = set(edges)
    for edge in view.graph.edges:
        a, b = rep[edge.src], rep[edge.dst]
        if a != b:
            assert (a, b) in drawn, edge
    assert all(a != b for a, b in edges)
    assert len(drawn) == len(edges)


def assert_counts_add_up(view: viz.graph.View, graph: Graph) -> None:
    """Visible op counts plus the container ops of drawn clusters = the model's count."""
    items, _ = viz.graph.visible(view)
    opaque = [p for p, g in view.graph.groups.items() if g.opaque]

    def drawn_cluster(path):
        return all(path[:d] in view.expanded for d in range(1, len(path) + 1))

    clusters = sum(
        1
        for p, g in view.graph.groups.items()
        if g.op and drawn_cluster(p) and not any(p[: len(o)] == o for o in opaque if o != p)
    )
    total = sum(op_histogram(graph).values())
    assert sum(i.op_count for i in items) + clusters == total


def test_default_view_fits_and_keeps_everything(model_graphs):
    for graph in model_graphs:
        view = viz.graph.default_view(graph)
        items, _ = viz.graph.visible(view)
        assert 0 < len(items) <= 300, graph.ir
        assert_no_edge_lost(view)
        assert_counts_add_up(view, graph)


def test_small_budget_folds_and_chunks_without_changing_counts(model_graphs, flat_graphs):
    for graph in model_graphs + flat_graphs:
        for budget in (12, 40):
            view = viz.graph.default_view(graph, max_nodes=budget)
            assert len(viz.graph.visible(view)[0]) <= budget, (graph.ir, budget)
            assert op_histogram(view.graph) == op_histogram(graph)
            assert {n.id for n in view.graph.nodes} == {n.id for n in graph.nodes}
            assert_no_edge_lost(view)
            assert_counts_add_up(view, graph)


def test_flat_program_is_chunked(flat_graphs):
    graph = flat_graphs[0]
    assert sum(1 for n in graph.nodes if not n.scope) > 300
    view = viz.graph.default_view(graph)
    chunks = [
        g for g in view.graph.groups.values() if g.attrs.get(viz.graph.fold.SYNTHETIC) == "chunk"
    ]
    assert chunks and len(viz.graph.visible(view)[0]) <= 300
    # the reader's graph is untouched
    assert not any(g.attrs.get(viz.graph.fold.SYNTHETIC) for g in graph.groups.values())


def test_random_expand_collapse_keeps_invariants(model_graphs):
    rng = random.Random(0)
    for graph in model_graphs:
        paths = list(graph.groups)
        view = viz.graph.expand_to_depth(graph, 0)
        for _ in range(30):
            path = rng.choice(paths)
            view = (
                viz.graph.expand(view, path)
                if rng.random() < 0.6
                else viz.graph.collapse(view, path)
            )
            assert_no_edge_lost(view)
            assert_counts_add_up(view, graph)


def test_expand_shows_children_and_collapse_hides_them(model_graphs):
    graph = model_graphs[0]
    view = viz.graph.expand_to_depth(graph, 0)
    ids = set(viz.graph.visible_ids(view))
    assert "g:layer0" in ids and "g:layer0/attention" not in ids
    view = viz.graph.expand(view, ("layer0", "attention"))
    ids = set(viz.graph.visible_ids(view))
    assert "g:layer0" not in ids and "g:layer0/mlp" in ids and "g:layer0/attention" not in ids
    view = viz.graph.collapse(view, ("layer0",))
    assert set(viz.graph.visible_ids(view)) == set(
        viz.graph.visible_ids(viz.graph.expand_to_depth(graph, 0))
    )


def test_reader_paths_expand_inside_chunks(model_graphs):
    graph = model_graphs[2]  # compiled: top-level fusions get chunked at a small budget
    view = viz.graph.default_view(graph, max_nodes=12)
    fusion = next(p for p, g in graph.groups.items() if g.kind == "fusion")
    assert fusion not in view.graph.groups  # moved under a chunk
    opened = viz.graph.expand(view, fusion)
    (moved,) = [p for p in view.graph.groups if p[-1:] == fusion and reader_path(view, p) == fusion]
    assert all(moved[:d] in opened.expanded for d in range(1, len(moved) + 1))
    assert moved not in viz.graph.collapse(opened, fusion).expanded


def reader_path(view: viz.graph.View, path) -> tuple[str, ...]:
    """`path` without the synthetic groups a default view put above it."""
    groups = view.graph.groups
    synthetic = viz.graph.fold.SYNTHETIC
    return tuple(c for d, c in enumerate(path) if synthetic not in groups[path[: d + 1]].attrs)


def test_collapsed_group_summarises_its_ops(model_graphs):
    items, _ = viz.graph.visible(viz.graph.expand_to_depth(model_graphs[0], 1))
    (attention,) = [i for i in items if i.id == "g:layer1/attention"]
    assert attention.kind == "group" and attention.inner_ops > 10
    assert len(attention.top_ops) == 3 and dict(attention.top_ops).get("dot_general", 0) >= 1


# ------------------------------------------------------------ search and neighbourhood


def test_find_by_op_shape_and_line(model_graphs):
    graph = model_graphs[0]
    dots = viz.graph.find(graph, "dot")
    assert dots and all("dot" in graph.node_map()[i].op for i in dots)
    shaped = viz.graph.find(graph, f"f32[{SEQ},{D}]")
    assert shaped and set(shaped) == set(viz.graph.find(graph, f"{SEQ},{D}"))
    on_line = viz.graph.find(graph, f"line {DOT_LINE}")
    assert on_line and set(on_line) == set(viz.graph.find(graph, f":{DOT_LINE}"))
    assert {graph.node_map()[i].op for i in on_line} >= {"dot_general"}
    assert viz.graph.find(graph, "no-such-op") == []


def test_neighbourhood_shows_nodes_within_radius(model_graphs):
    graph = model_graphs[0]
    centre = viz.graph.find(graph, "rsqrt")[0]
    view = viz.graph.neighbourhood(graph, centre, radius=1)
    adjacent = {e.dst for e in graph.edges if e.src == centre}
    adjacent |= {e.src for e in graph.edges if e.dst == centre}
    assert view.focus == frozenset(adjacent | {centre})
    items, edges = viz.graph.visible(view)
    assert {i.id for i in items} == view.focus  # groups on their paths are expanded
    assert all(a in view.focus and b in view.focus for a, b in edges)
    assert [i.id for i in items if i.highlighted] == [centre]
    wider = viz.graph.neighbourhood(graph, centre, radius=3)
    assert view.focus < wider.focus


def test_highlight_marks_the_box_holding_a_match(model_graphs):
    graph = model_graphs[0]
    view = viz.graph.expand_to_depth(graph, 0)
    view = viz.graph.View(view.graph, view.expanded, frozenset(viz.graph.find(graph, "rsqrt")))
    lit = {i.id for i in viz.graph.visible(view)[0] if i.highlighted}
    assert {f"g:layer{i}" for i in range(LAYERS)} <= lit


# ------------------------------------------------------------ DOT


def test_dot_has_clusters_boxes_and_colours(model_graphs):
    compiled = model_graphs[2]
    view = viz.graph.default_view(compiled)
    dot = viz.graph.to_dot(view, title='tiny "model"')
    assert dot.startswith("digraph") and 'label="tiny \\"model\\""' in dot
    assert 'fontname="Helvetica"' in dot and "rankdir=TB" in dot
    kernels_dot = viz.graph.to_dot(viz.graph.expand_to_depth(compiled, 0))  # fusions shut
    assert any(colour in kernels_dot for colour in viz.graph.dot.COLOURS.values())
    jaxpr_dot = viz.graph.to_dot(viz.graph.expand_to_depth(model_graphs[0], 1))
    assert 'subgraph "cluster_layer0"' in jaxpr_dot and "ops: " in jaxpr_dot
    assert 'shape="invhouse"' in jaxpr_dot and 'shape="house"' in jaxpr_dot


def test_a_dot_style_sets_attributes_on_the_items_and_clusters_it_names():
    graph = Graph("compiled", [Node("a", "add"), Node("b", "add", scope=("fusion.1",))])
    graph.add_group(("fusion.1",), "fusion", "fusion", opaque=True)
    view = viz.graph.View(graph, frozenset(graph.groups))
    style = viz.graph.DotStyle(
        node=lambda item: {"fillcolor": "#123456"} if item.id == "a" else {},
        cluster=lambda path: {"fillcolor": "#abcdef", "penwidth": "2"},
    )
    plain, styled = viz.graph.to_dot(view), viz.graph.to_dot(view, style=style)
    a = next(line for line in styled.splitlines() if line.strip().startswith('"a"'))
    assert a.count("fillcolor=") == 1 and 'fillcolor="#123456"' in a
    assert 'fillcolor="#abcdef"; color="#7a7a7a"; penwidth="2";' in styled
    changed = [
        (p, s) for p, s in zip(plain.splitlines(), styled.splitlines(), strict=True) if p != s
    ]
    assert len(changed) == 2  # the named item's statement and the cluster's attributes


@pytest.mark.dot
@pytest.mark.skipif(
    render.dot_program() is None, reason="neither Graphviz's `dot` nor graphviz-pure installed"
)
def test_dot_renders_to_svg(model_graphs):
    for graph in model_graphs:
        view = viz.graph.default_view(graph)
        view = viz.graph.View(
            view.graph, view.expanded, frozenset(viz.graph.find(graph, "add")[:3])
        )
        svg = viz.graph.to_svg(viz.graph.to_dot(view, title=graph.ir))
        assert "<svg" in svg


def test_to_svg_without_dot_binary_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("JITSCOPE_DOT", "none")
    with pytest.raises(RuntimeError, match="Graphviz"):
        viz.graph.to_svg("digraph { a -> b }")


def test_summary_is_report_ready(model_graphs):
    for graph in model_graphs:
        summary = viz.graph.summary(graph)
        assert summary["total_nodes"] == len(graph.nodes)
        assert 0 < summary["visible_nodes"] <= 300
        assert summary["dot"].startswith("digraph")


def test_the_summarys_dot_titled_is_the_default_views_dot_with_that_title(model_graphs):
    """The app draws a report's default view from its DOT (`titled`), never building it
    again: it must read as `to_dot` would have written it, quotes and newlines too."""
    for graph in model_graphs:
        drawn = viz.graph.summary(graph)["dot"]
        for title in ("", "f · jaxpr", 'say "hi"\nback\\slash'):
            built = viz.graph.to_dot(viz.graph.default_view(graph), title)
            assert viz.graph.titled(drawn, title) == built


def test_titled_refuses_a_dot_that_already_has_a_title(model_graphs):
    titled = viz.graph.to_dot(viz.graph.default_view(model_graphs[0]), "mine")
    with pytest.raises(ValueError, match="untitled"):
        viz.graph.titled(titled, "another")
    with pytest.raises(ValueError, match="untitled"):
        viz.graph.titled("digraph { a -> b }", "another")


# ------------------------------------------------------------ readable default views


def layered(n_layers: int = 24) -> Graph:
    """A jaxpr-like stack of identical layers (`layerN/attention`, `layerN/mlp` scopes),
    two weights per layer and a mask that every layer's attention reads."""
    graph = Graph("jaxpr", [Node("x", "input", kind="input"), Node("mask", "iota")])
    prev = "x"
    for i in range(n_layers):
        for part, size in (("attention", 6), ("mlp", 4)):
            for j in range(size):
                node = Node(f"l{i}.{part}.{j}", "add", scope=(f"layer{i}", part))
                graph.nodes.append(node)
                graph.edges.append(Edge(prev, node.id))
                prev = node.id
        graph.edges.append(Edge("mask", f"l{i}.attention.1"))
        for k in range(2):
            graph.nodes.append(Node(f"w{i}.{k}", "input", kind="input"))
            graph.edges.append(Edge(f"w{i}.{k}", f"l{i}.attention.{k}"))
    graph.nodes.append(Node("out", "output", kind="output"))
    graph.edges.append(Edge(prev, "out"))
    return register_scopes(graph)


def compiled_like(n_layers: int = 24) -> Graph:
    """A compiled-HLO-like graph: every op at top level, named by `name_scope` attrs;
    the attention ops are fusions (groups) of two fused ops each."""
    graph = Graph("compiled", [Node("p", "parameter", kind="input")])
    prev = "p"
    for i in range(n_layers):
        for j in range(6):
            path = graph.add_group((f"fusion.{i}.{j}",), "fusion", "fusion", opaque=True)
            graph.groups[path].attrs = {"name_scope": f"layer{i}/attention"}
            for k in range(2):
                graph.nodes.append(Node(f"f{i}.{j}.{k}", "multiply", scope=path))
            graph.edges.append(Edge(prev, f"f{i}.{j}.0"))
            prev = f"f{i}.{j}.1"
        for j in range(4):
            node = Node(f"m{i}.{j}", "add", attrs={"name_scope": f"layer{i}/mlp"})
            graph.nodes.append(node)
            graph.edges.append(Edge(prev, node.id))
            prev = node.id
    graph.nodes.append(Node("out", "output", kind="output"))
    graph.edges.append(Edge(prev, "out"))
    return graph


def test_default_view_budget_and_cap(model_graphs, flat_graphs):
    assert viz.graph.DEFAULT_NODES < viz.graph.MAX_NODES
    for graph in [*model_graphs, *flat_graphs, layered(), compiled_like()]:
        assert (
            len(viz.graph.visible(viz.graph.default_view(graph))[0]) <= viz.graph.DEFAULT_NODES
        ), graph.ir
        assert viz.graph.summary(graph)["visible_nodes"] <= viz.graph.DEFAULT_NODES
    huge = viz.graph.default_view(flat_graphs[0], max_nodes=10_000)
    assert len(viz.graph.visible(huge)[0]) <= viz.graph.MAX_NODES


def test_look_alike_groups_expand_together():
    graph = layered()
    layers = {(f"layer{i}",) for i in range(24)}
    view = viz.graph.default_view(graph)  # folded ×24; every layer fits, no attention does
    assert {reader_path(view, p) for p in view.expanded} - {()} == layers
    assert_no_edge_lost(view)
    assert_counts_add_up(view, graph)
    everything = viz.graph.default_view(graph, max_nodes=300)  # the whole graph fits
    assert {reader_path(everything, p) for p in everything.expanded} >= set(graph.groups)
    view = viz.graph.default_view(graph, max_nodes=20)  # not all 24 layers fit: only the first
    assert {reader_path(view, p)[:1] for p in view.expanded} - {()} == {("layer0",)}
    (rest,) = [p for p, g in view.graph.groups.items() if g.label == "23 more like layer0"]
    assert rest not in view.expanded and rest[:1] in view.expanded


def test_top_level_runs_are_chunked_by_layer_with_parts():
    graph = compiled_like()
    view = viz.graph.default_view(graph)
    chunks = {
        p: g
        for p, g in view.graph.groups.items()
        if g.attrs.get(viz.graph.fold.SYNTHETIC) == "chunk"
    }
    tops = sorted(
        (g.label for g in chunks.values() if not g.label.startswith(("attention", "mlp"))),
        key=lambda s: int(s[5:7]),
    )
    assert len(tops) == 24 and tops[3].startswith("layer3 (10 items")
    names = {g.label.split(" (")[0] for g in chunks.values()}
    parts = sorted(names - {t.split(" (")[0] for t in tops})
    assert parts == ["attention", "mlp"]
    folds = Counter(
        re.sub(r"\d+", "#", g.label)
        for g in view.graph.groups.values()
        if g.attrs.get(viz.graph.fold.SYNTHETIC) == "fold"
    )
    # 24 look-alike chunks are one group; in each, six look-alike attention kernels too
    assert folds == {"layer#–layer# ×#": 1, "fusion ×#": 24}
    assert any(g.label == "layer0–layer23 ×24" for g in view.graph.groups.values())
    assert_no_edge_lost(view)
    assert_counts_add_up(view, graph)
    opened = viz.graph.expand(view, ("fusion.3.2",))  # a reader path, four synthetic levels down
    (moved,) = [p for p in view.graph.groups if p[-1:] == ("fusion.3.2",)]
    assert all(moved[:d] in opened.expanded for d in range(1, len(moved) + 1))
    assert "f3.2.0" in set(viz.graph.visible_ids(opened))
    assert moved not in viz.graph.collapse(opened, ("fusion.3.2",)).expanded


def test_fans_do_not_get_their_edges_drawn():
    graph = layered()
    view = viz.graph.default_view(graph)
    _, edges = viz.graph.visible(view)
    assert ("g:[inputs]", "g:[fold 1]/layer0/attention") in edges  # the view keeps every edge
    dot = viz.graph.to_dot(view)
    assert '"g:[inputs]" ->' not in dot and '"mask" ->' not in dot
    boxes = [
        line for line in dot.splitlines() if line.strip().startswith(('"g:[inputs]"', '"mask"'))
    ]
    assert len(boxes) == 2
    assert all("linked to 24 items (edges not drawn)" in line for line in boxes)
    # the main flow is drawn, from the fold's first layer into its box of the others
    assert '"g:[fold 1]/layer0/mlp" -> "g:[fold 1]/[rest]/layer1/attention";' in dot
    focus = viz.graph.neighbourhood(graph, "mask", radius=1)
    assert '"mask" -> "l0.attention.1"' in viz.graph.to_dot(focus)
    few = layered(n_layers=viz.graph.dot.HUB_DEGREE)  # a mask read by few layers keeps its edges
    assert '"mask" ->' in viz.graph.to_dot(viz.graph.default_view(few))


def test_a_fan_into_the_listed_layers_of_an_open_fold_has_no_edges_drawn():
    """The fold's box of the other layers, opened, lists them as closed boxes in one
    cluster: the inputs box and the mask feed every one of them, and routing those long
    edges took dot seconds on 96 layers."""
    view = viz.graph.default_view(layered(), max_nodes=20)  # the other layers in one box
    (rest,) = [p for p, g in view.graph.groups.items() if g.label == "23 more like layer0"]
    assert rest not in view.expanded
    dot = viz.graph.to_dot(viz.graph.expand(view, rest))
    assert f'"g:{"/".join(rest)}/layer5"' in dot  # the layers are listed as boxes
    assert '"g:[inputs]" ->' not in dot and '"mask" ->' not in dot
    assert f'"g:{"/".join(rest)}/layer5" -> "g:{"/".join(rest)}/layer6";' in dot


def test_regrouping_copies_every_field():
    node = Node("n", "add", "lbl", "f32[2]", ("a",), SourceLoc("f.py", 3, "g"), "op", {"k": "v"})
    group = Group(("a",), "A", "fusion", "fusion", True, {"colour": "dot"})
    assert len(fields(Node)) == 8 and len(fields(Group)) == 6  # a new field: pass it on
    assert viz.graph.fold.moved_node(node, ("c", "a")) == replace(node, scope=("c", "a"))
    assert viz.graph.fold.moved_group(group, ("c", "a")) == replace(group, path=("c", "a"))


def test_view_cache_does_not_keep_graphs_alive():
    graph = compiled_like(4)
    view = viz.graph.default_view(graph, max_nodes=12)
    viz.graph.visible(view)
    refs = [weakref.ref(graph), weakref.ref(view.graph)]
    assert view.graph is not graph and id(view.graph) in viz.graph.index._CACHE
    del graph, view
    gc.collect()
    assert all(ref() is None for ref in refs)
    assert not any(hit[0]() is None for hit in viz.graph.index._CACHE.values())
    small = layered(2)  # fits: its default view is of the graph itself
    assert viz.graph.default_view(small).graph is small
    ref = weakref.ref(small)
    del small
    gc.collect()
    assert ref() is None


def test_a_region_shows_only_its_ops_in_both_ir_graphs():
    import jax
    import jax.numpy as jnp

    from viz.ir.hlo import read_hlo
    from viz.ir.stablehlo import read_stablehlo

    def f(x):
        with jax.named_scope("pre"):
            x = jnp.sin(x) * 2.0
        with jax.named_scope("post"):
            return jnp.exp(x) + 1.0

    lowered = jax.jit(f).lower(jax.ShapeDtypeStruct((8, 8), jnp.float32))
    before, after = read_stablehlo(lowered.compiler_ir("stablehlo")), read_hlo(lowered.compile())
    for graph in (before, after):
        assert {"pre", "post"} <= set(viz.graph.regions(graph))
        shown = viz.graph.region_view(graph, "pre").focus
        assert shown and all(
            viz.graph.name_scope_of(graph.node_map()[i]).startswith("pre") for i in shown
        )
    ops = {before.node_map()[i].op for i in viz.graph.region_view(before, "pre").focus}
    assert "stablehlo.sine" in ops and "stablehlo.exponential" not in ops
