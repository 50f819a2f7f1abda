"""The IR readers: jaxpr, StableHLO and optimized HLO into the one graph model."""

from __future__ import annotations

import importlib.util
import inspect
import json
import pathlib
import re
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from viz.ir import hlo_text
from viz.ir.hlo import read_hlo, read_hlo_text
from viz.ir.jaxpr import read_jaxpr
from viz.ir.kernels import fusion_count, kernel_count, kernels
from viz.ir.model import Graph, SourceLoc, connect, op_histogram
from viz.ir.stablehlo import read_stablehlo

HERE = __file__


def sin_mul_add(x):
    return jnp.sin(x) * 2 + 1


SIN_LINE = inspect.getsourcelines(sin_mul_add)[1] + 1


def load_sample(name: str):
    path = pathlib.Path(__file__).parent.parent / "samples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"sample_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scan_in_cond(p, xs):
    def body(carry, x):
        return jnp.sin(carry) + x, carry * 2

    def yes(xs):
        carry, _ = lax.scan(body, xs[0], xs)
        return carry

    def no(xs):
        return xs[0] - 1

    return lax.cond(p > 0, yes, no, xs)


def with_key(key, x):
    return x + jax.random.normal(key, x.shape)


@jax.jit
def inner(x):
    return jnp.sin(x) * 2


def calls_inner_twice(x):
    return inner(inner(x) + 1)


@jax.custom_jvp
def soft(x):
    return jnp.log1p(jnp.exp(x))


soft.defjvp(lambda primals, tangents: (soft(primals[0]), tangents[0] * jax.nn.sigmoid(primals[0])))


def with_while_and_custom_jvp(x):
    def cond(c):
        return c[0] < 5

    def body(c):
        return c[0] + 1, c[1] * x

    _, y = lax.while_loop(cond, body, (0, x))
    return soft(y)


X8 = jnp.ones((8, 128), jnp.float32)
XS = jnp.ones((16, 8), jnp.float32)


def graphs(fn, *args):
    """(jaxpr, stablehlo, compiled) graphs of fn at args."""
    traced = jax.jit(fn).trace(*args)
    lowered = traced.lower()
    return (
        read_jaxpr(traced.jaxpr),
        read_stablehlo(lowered.compiler_ir("stablehlo")),
        read_hlo(lowered.compile()),
    )


# jax < 0.9 writes each op's file and line into its HLO metadata, without the function
OLD_HLO_METADATA = jax.__version_info__ < (0, 9)


@pytest.fixture(scope="module")
def sin_graphs():
    return graphs(sin_mul_add, X8)


@pytest.fixture(scope="module")
def nested_graphs():
    return graphs(scan_in_cond, 1.0, XS)


def count_eqns(jaxpr) -> int:
    """Equations at every nesting level, counted independently of the reader."""
    total = 0
    for eqn in jaxpr.eqns:
        total += 1
        for value in eqn.params.values():
            for sub in value if isinstance(value, tuple | list) else (value,):
                if isinstance(sub, jax.extend.core.ClosedJaxpr):
                    total += count_eqns(sub.jaxpr)
                elif isinstance(sub, jax.extend.core.Jaxpr):
                    total += count_eqns(sub)
    return total


def nodes_by_op(graph: Graph, op: str):
    return [n for n in graph.nodes if n.op == op]


# ------------------------------------------------------------ histograms


def test_jaxpr_histogram_counts_each_equation(sin_graphs):
    assert op_histogram(sin_graphs[0]) == {"sin": 1, "mul": 1, "add": 1}


def test_stablehlo_histogram_counts_each_op(sin_graphs):
    hist = op_histogram(sin_graphs[1])
    assert hist["stablehlo.sine"] == hist["stablehlo.multiply"] == hist["stablehlo.add"] == 1
    assert "func.return" not in hist and "stablehlo.return" not in hist


def test_compiled_sin_mul_add_is_one_fused_kernel(sin_graphs):
    graph = sin_graphs[2]
    assert op_histogram(graph) == {"fusion": 1}
    assert fusion_count(graph) == kernel_count(graph) == 1
    (kernel,) = kernels(graph)
    assert {"sine", "multiply", "add"} <= set(kernel["ops"])
    assert kernel["colour"] == "loop"


def test_inputs_and_outputs_are_nodes_not_ops(sin_graphs):
    for graph in sin_graphs:
        kinds = [n.kind for n in graph.nodes]
        assert kinds.count("input") == 1 and kinds.count("output") == 1


def two_outputs(x):
    return jnp.sin(x), x * 2


@pytest.mark.parametrize(
    ("fn", "names"), [(sin_mul_add, ["out0"]), (two_outputs, ["out0", "out1"])]
)
def test_every_ir_names_the_outputs_out0_out1_and_types_each(fn, names):
    typed = [
        [(n.label, n.type) for n in graph.nodes if n.kind == "output"] for graph in graphs(fn, X8)
    ]
    assert [label for label, _ in typed[2]] == names  # compiled: one per element of its tuple
    assert typed[0] == typed[1] == typed[2]


def test_edges_connect_input_to_output(sin_graphs):
    for graph in sin_graphs:
        out = {n.id for n in graph.nodes if n.kind == "output"}
        succ: dict[str, set[str]] = {}
        for e in graph.edges:
            succ.setdefault(e.src, set()).add(e.dst)
        (start,) = [n.id for n in graph.nodes if n.kind == "input"]
        seen, todo = {start}, [start]
        while todo:
            for nxt in succ.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        assert seen & out, graph.ir


def test_types_use_jaxpr_spelling(sin_graphs):
    for graph in sin_graphs:
        (inp,) = [n for n in graph.nodes if n.kind == "input"]
        assert inp.type == "f32[8,128]", graph.ir


# ------------------------------------------------------------ nested control flow


def test_jaxpr_scan_inside_cond_groups(nested_graphs):
    graph = nested_graphs[0]
    kinds = {g.label: (g.kind, g.op) for g in graph.groups.values()}
    assert kinds["cond"] == ("branch", "cond")
    assert kinds["branch 0"][0] == kinds["branch 1"][0] == "branch"
    assert kinds["scan ×16"] == ("loop", "scan")
    (scan_path,) = [p for p, g in graph.groups.items() if g.op == "scan"]
    assert scan_path[0] == "cond" and scan_path[1].startswith("branch")
    (sin,) = nodes_by_op(graph, "sin")
    assert sin.scope == scan_path


def test_jaxpr_loses_no_equation(nested_graphs):
    traced = jax.jit(scan_in_cond).trace(1.0, XS)
    assert sum(op_histogram(nested_graphs[0]).values()) == count_eqns(traced.jaxpr.jaxpr)


def test_jaxpr_edges_cross_group_boundaries(nested_graphs):
    graph = nested_graphs[0]
    nodes = graph.node_map()
    (xs,) = [n for n in graph.nodes if n.label == "in1"]
    readers = {nodes[e.dst].op for e in graph.edges if e.src == xs.id}
    assert {"slice", "add"} <= readers  # xs[0] in both branches, x in the scan body


def test_stablehlo_nested_regions(nested_graphs):
    graph = nested_graphs[1]
    ops = {p: g.op for p, g in graph.groups.items()}
    case = [p for p, op in ops.items() if op == "stablehlo.case"]
    loops = [p for p, op in ops.items() if op == "stablehlo.while"]
    assert len(case) == 1 and len(loops) == 1
    assert loops[0][: len(case[0])] == case[0]
    (sine,) = nodes_by_op(graph, "stablehlo.sine")
    assert sine.scope[: len(loops[0])] == loops[0]


def test_compiled_nested_control_flow(nested_graphs):
    graph = nested_graphs[2]
    ops = {p: g.op for p, g in graph.groups.items() if g.kind != "fusion"}
    (cond,) = [p for p, op in ops.items() if op == "conditional"]
    (loop,) = [p for p, op in ops.items() if op == "while"]
    assert loop[: len(cond)] == cond
    assert {g.label for p, g in graph.groups.items() if p[:-1] == loop} == {"condition", "body"}


def test_while_and_custom_jvp_groups():
    jaxpr_graph, stablehlo_graph, compiled = graphs(with_while_and_custom_jvp, XS)
    groups = {g.label: g for g in jaxpr_graph.groups.values()}
    assert groups["while"].kind == "loop"
    assert {"cond", "body"} <= set(groups)
    assert groups["custom_jvp_call: soft"].kind == "call"
    (mul,) = nodes_by_op(jaxpr_graph, "mul")
    (x,) = [n for n in jaxpr_graph.nodes if n.kind == "input"]
    assert any(e.src == x.id and e.dst == mul.id for e in jaxpr_graph.edges)  # body const
    assert sum(op_histogram(stablehlo_graph).values()) > 0
    assert kernel_count(compiled) >= 1


def test_inner_jit_called_twice():
    jaxpr_graph, stablehlo_graph, _ = graphs(calls_inner_twice, X8)
    assert op_histogram(jaxpr_graph)["jit"] == 2
    assert len(nodes_by_op(jaxpr_graph, "sin")) == 2  # read at each call site
    hist = op_histogram(stablehlo_graph)
    assert hist["func.call"] == 2 and hist["stablehlo.sine"] == 1  # the function once
    (sine,) = nodes_by_op(stablehlo_graph, "stablehlo.sine")
    calls = {n.id for n in nodes_by_op(stablehlo_graph, "func.call")}
    assert {e.src for e in stablehlo_graph.edges if e.dst == sine.id} == calls


# ------------------------------------------------------------ source locations


def test_source_points_at_this_file(sin_graphs):
    ops = {"jaxpr": "sin", "stablehlo": "stablehlo.sine", "compiled": "sine"}
    for graph in sin_graphs:
        (sin,) = nodes_by_op(graph, ops[graph.ir])
        assert sin.source is not None, graph.ir
        if graph.ir != "compiled" or not OLD_HLO_METADATA:
            assert sin.source.function == "sin_mul_add", graph.ir
        assert sin.source.file == HERE and sin.source.line == SIN_LINE, graph.ir


LAYER = """
import jax.numpy as jnp


def dense(w, x):
    return jnp.tanh(x @ w)


class Layer:
    def __call__(self, w, x):
        return dense(w, x)
"""


def test_an_op_a_library_makes_is_placed_at_the_users_line_that_called_it(tmp_path):
    """keras's layers ran their ops from `keras/src/backend/jax/numpy.py:182`, which JAX
    keeps as the op's frame (keras hides none of its own): the user's `model(x)` is the
    line they can act on, in every IR and the specialization's lines."""
    from viz.specialization.read import _line

    folder = tmp_path / "lib" / "python3.11" / "site-packages" / "layerlib"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(LAYER)
    spec = importlib.util.spec_from_file_location("layerlib", folder / "__init__.py")
    layerlib = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layerlib)

    def model(w, x):
        return layerlib.Layer()(w, x)

    line = inspect.getsourcelines(model)[1] + 1
    traced = jax.jit(model).trace(jnp.ones((4, 4)), jnp.ones((2, 4)))
    ops = {"jaxpr": "tanh", "stablehlo": "stablehlo.tanh", "compiled": "tanh"}
    # an older XLA writes the op's one frame, JAX's pick (the library's), and no stack
    stacks = "StackFrames" in traced.lower().compile().as_text()
    for graph in graphs(model, jnp.ones((4, 4)), jnp.ones((2, 4))):
        if graph.ir == "compiled" and not stacks:
            continue
        (tanh,) = nodes_by_op(graph, ops[graph.ir])
        assert (tanh.source.file, tanh.source.line) == (HERE, line), graph.ir
    (eqn,) = [e for e in traced.jaxpr.eqns if e.primitive.name == "tanh"]
    assert _line(eqn, HERE) == line  # the library's frames passed over


def test_scopes_come_from_named_scopes():
    def scoped(x):
        with jax.named_scope("layer0"), jax.named_scope("attention"):
            return jnp.tanh(x)

    jaxpr_graph, stablehlo_graph, compiled = graphs(scoped, X8)
    assert nodes_by_op(jaxpr_graph, "tanh")[0].scope == ("layer0", "attention")
    assert nodes_by_op(stablehlo_graph, "stablehlo.tanh")[0].scope == ("layer0", "attention")
    (tanh,) = nodes_by_op(compiled, "tanh")
    assert tanh.attrs["name_scope"] == "layer0/attention"
    assert tanh.attrs["op_name"].endswith("layer0/attention/tanh")


# ------------------------------------------------------------ fusion


def test_elementwise_chain_fuses_into_at_most_two_kernels():
    sample = load_sample("elementwise_chain")  # 24 elementwise ops on f32[512,512]
    x = jnp.ones((512, 512), jnp.float32)
    jaxpr_graph, stablehlo_graph, compiled = graphs(sample.chain, x)
    assert sum(op_histogram(jaxpr_graph).values()) == 24
    assert sum(op_histogram(stablehlo_graph).values()) >= 48  # + constants, broadcasts
    assert kernel_count(compiled) <= 2
    assert sum(sum(k["ops"].values()) for k in kernels(compiled)) >= 24
    first = inspect.getsourcelines(sample.chain)[1]
    lines = set().union(*(k["lines"] for k in kernels(compiled)))
    assert lines and all(first < line <= first + 26 for line in lines)


# ------------------------------------------------------------ PRNG keys


def test_prng_key_argument():
    key = jax.random.key(0)
    jaxpr_graph, stablehlo_graph, compiled = graphs(with_key, key, X8)
    key_in = next(n for n in jaxpr_graph.nodes if n.kind == "input")
    assert key_in.type.startswith("key<")
    assert any(e.src == key_in.id for e in jaxpr_graph.edges)
    stablehlo_in = next(n for n in stablehlo_graph.nodes if n.kind == "input")
    assert stablehlo_in.type == "u32[2]" and stablehlo_in.label == "key"
    assert kernel_count(compiled) >= 1
    assert any(n.kind == "input" for n in compiled.nodes)


# ------------------------------------------------------------ serialisation


def test_graph_round_trips_through_json(nested_graphs):
    for graph in nested_graphs:
        data = json.loads(json.dumps(graph.to_dict()))
        again = Graph.from_dict(data)
        assert again == graph
        assert op_histogram(again) == op_histogram(graph)


# ------------------------------------------------------------ the HLO reader's shortcuts
# read_hlo runs after XLA compiles, on every analysis, so its text parsing takes
# shortcuts (a regex search started at its literal's first occurrence, one scan
# for the ROOT lines, a cached ENTRY search). They must read exactly what plain
# whole-line regex scans read.

_FULL = {
    "op_name": re.compile(r'\bop_name="((?:[^"\\]|\\.)*)"'),
    "kind": re.compile(r"\bkind=(k\w+)"),
    "frame": re.compile(r"\bstack_frame_id=(\d+)"),
    "file": re.compile(r'\bsource_file="((?:[^"\\]|\\.)*)"'),
    "line": re.compile(r"\bsource_line=(\d+)"),
    "called": re.compile(
        r"\b(calls|to_apply|condition|body|true_computation|false_computation)=%([\w.\-]+)"
    ),
    "branches": re.compile(r"\bbranch_computations=\{([^}]*)\}"),
}


def _reference_parse(inst, frames) -> dict:
    """What _parse reads, by whole-line regex scans."""
    line = inst.to_string()
    start = line.index(" = ") + 3
    end = hlo_text._type_end(line, start)
    match = hlo_text._OPCODE.match(line, end)
    opcode = match.group(1) if match else str(inst.opcode)
    rest = line[match.end() if match else end :]

    def first(key):
        found = _FULL[key].search(rest)
        return found.group(1) if found else None

    called: dict[str, list[str]] = {}
    for key, name in _FULL["called"].findall(rest):
        called.setdefault(key, []).append(name)
    if first("branches") is not None:
        called["branches"] = [b.strip().lstrip("%") for b in first("branches").split(",")]
    elif "true_computation" in called:
        called["branches"] = called.pop("true_computation") + called.pop("false_computation", [])
    frame = first("frame")
    if frame is not None and int(frame) in frames:
        source = frames[int(frame)]
    elif first("file") is not None and first("line") is not None:
        source = SourceLoc(first("file"), int(first("line")))
    else:
        source = None
    return {
        "name": inst.name,
        "opcode": opcode,
        "type": hlo_text.render_type(line[start:end]),
        "operands": [o.name for o in inst.operands()],
        "called": called,
        "kind": first("kind") or "",
        "op_name": first("op_name") or "",
        "source": source,
        "index": int(re.match(r"(\d+)\)", rest).group(1)) if opcode == "parameter" else 0,
        "target": (re.search(r'\bcustom_call_target="([^"]*)"', rest) or ["", ""])[1]
        if opcode == "custom-call"
        else "",
    }


def _reference_roots(text: str) -> dict[str, str]:
    roots: dict[str, str] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith(("%", "ENTRY %")):
            current = line.removeprefix("ENTRY ").split(" ", 1)[0].lstrip("%")
        elif current and line.startswith("  ROOT %"):
            roots.setdefault(current, line[8:].split(" ", 1)[0])
    return roots


# programs whose compiled HLO has fusions, nested computations, calls and PRNG keys
HLO_PROGRAMS = pytest.mark.parametrize(
    ("fn", "args"),
    [
        (sin_mul_add, (X8,)),
        (scan_in_cond, (1.0, XS)),
        (with_while_and_custom_jvp, (XS,)),
        (calls_inner_twice, (X8,)),
        (with_key, (jax.random.key(0), X8)),
    ],
    ids=["fusion", "scan_in_cond", "while_custom_jvp", "call", "prng"],
)


@HLO_PROGRAMS
def test_the_text_reader_reads_what_xlas_own_objects_say(fn, args):
    compiled = jax.jit(fn).trace(*args).lower().compile()
    text = compiled.as_text()
    (module,) = compiled.runtime_executable().hlo_modules()
    if not hasattr(module.computations()[0], "instructions"):
        pytest.skip("XLA's HloComputation.instructions() is jaxlib 0.10's")
    split = hlo_text.split_module(text)
    assert split.roots == _reference_roots(text)
    assert split.entry == re.search(r"^ENTRY %?([^\s(]+)", text, re.M).group(1)
    frames = hlo_text.parse_stack_frames(text)
    assert frames or OLD_HLO_METADATA  # the tables were found
    lines = {line[1 : line.find(" ")]: line for c in split.computations.values() for line in c}
    assert set(split.computations) == {c.name for c in module.computations()}
    for comp in module.computations():
        instructions = comp.instructions()
        assert sorted(split.computations[comp.name]) == sorted(lines[i.name] for i in instructions)
        for inst in instructions:
            parsed = hlo_text.parse_instruction(lines[inst.name], frames)
            want = _reference_parse(inst, frames)
            assert {k: getattr(parsed, k) for k in want} == want, inst.to_string()


def test_an_executables_modules_are_read_one_after_another():
    compiled = jax.jit(scan_in_cond).trace(1.0, XS).lower().compile()
    one = read_hlo(compiled)
    two = read_hlo_text(compiled.as_text() + "\n\n" + compiled.as_text())  # as_text's join
    assert len(two.nodes) == 2 * len(one.nodes) and len(two.edges) == 2 * len(one.edges)
    assert op_histogram(two) == {op: 2 * n for op, n in op_histogram(one).items()}
    assert two.output_aliases == one.output_aliases


def test_operands_read_from_a_line_skip_xlas_index_comments():
    rest = "%a, %b.1, %c, %d, %e, /*index=5*/%f-2), index=0"
    assert hlo_text._operands(rest, "tuple") == ["a", "b.1", "c", "d", "e", "f-2"]
    assert hlo_text._operands("0), metadata={}", "parameter") == []
    assert hlo_text._operands("), dimensions={0}", "iota") == []
    assert hlo_text._operands("{ {1, 2} })", "constant") == []
    # operand shapes printed (another XLA's text), tuples among them
    assert hlo_text._operands("f32[2,3]{1,0} %a, s32[] %b), x=1", "add") == ["a", "b"]
    rest = "(f32[], (s32[], u8[])) %t, f32[] %u), calls=%c(x)"
    assert hlo_text._operands(rest, "custom-call") == ["t", "u"]


def test_attribute_search_finds_what_a_full_scan_finds_despite_decoys():
    frames = {7: SourceLoc("model.py", 3, "f")}

    class Inst:
        name, opcode = "fusion.1", "fusion"

        def __init__(self, line):
            self.line = line

        def to_string(self):
            return self.line

        def operands(self):
            return [SimpleNamespace(name="p")]

    line = (
        "%fusion.1 = (f32[2]{0}, s32[]) fusion(%p), xkind=kBad, kind=kLoop, calls=%fused.2, "
        'metadata={op_name="jit(f)/a\\"b/kind=kNo/add" stack_frame_id=7}, '
        'backend_config={"kind":"x", "calls=%decoy":1}'
    )
    no_frame = line.replace("stack_frame_id=7", 'source_line=9 source_file="m.py"')
    for text in (line, no_frame, line.replace("kind=kLoop, ", "")):
        parsed = hlo_text.parse_instruction(text, frames)
        want = _reference_parse(Inst(text), frames)
        assert {k: getattr(parsed, k) for k in want} == want, text
    parsed = hlo_text.parse_instruction(line, frames)
    assert parsed.type == "(f32[2], i32[])" and parsed.kind == "kLoop"
    assert parsed.op_name == 'jit(f)/a\\"b/kind=kNo/add' and parsed.source == frames[7]
    assert hlo_text.parse_instruction(no_frame, frames).source == SourceLoc("m.py", 9)


def test_nodes_of_one_line_share_their_source(sin_graphs):
    for graph in sin_graphs:
        sources = [n.source for n in graph.nodes if n.source is not None]
        assert sources
        by_value: dict[SourceLoc, SourceLoc] = {}
        for source in sources:
            assert by_value.setdefault(source, source) is source, graph.ir


def test_compiled_inputs_are_labelled_with_the_argument_path_as_written() -> None:
    def f(params, x):
        return x @ params["w"] + params["b"]

    params = {"w": jnp.ones((4, 4)), "b": jnp.ones(4)}
    _, _, compiled = graphs(f, params, jnp.ones((2, 4)))
    labels = {n.label for n in compiled.nodes if n.kind == "input"}
    assert {"params['w']", "params['b']"} <= labels, labels  # not HLO's escaped params[\'w\']


def test_stablehlo_names_the_parameters_that_reached_xla_in_order() -> None:
    def f(params, unused, x):
        return x @ params["w"] + params["b"]

    args = ({"w": jnp.ones((4, 4)), "b": jnp.ones(4)}, jnp.ones(3), jnp.ones((2, 4)))
    graph = read_stablehlo(jax.jit(f).lower(*args).compiler_ir("stablehlo"))
    # jit pruned `unused`; a dict's leaves come in key order
    assert graph.input_names == ["params['b']", "params['w']", "x"]


def test_the_compiled_graph_says_which_parameter_each_output_may_reuse() -> None:
    def f(x, y):
        return y * 2.0, x + 1.0

    jitted = jax.jit(f, donate_argnums=(0, 1))
    graph = read_hlo(jitted.lower(jnp.ones(3), jnp.ones(2)).compile())
    assert graph.output_aliases == {1: 0, 0: 1}
    assert read_hlo(jax.jit(f).lower(jnp.ones(3), jnp.ones(2)).compile()).output_aliases == {}
    again = Graph.from_dict(json.loads(json.dumps(graph.to_dict())))
    assert again.output_aliases == graph.output_aliases


def test_output_aliases_read_the_module_line() -> None:
    line = (
        "HloModule jit_f, input_output_alias={ {}: (2, {}, may-alias) }, "
        "entry_computation_layout={(f32[3]{0})->f32[3]{0}}\nENTRY %main {}"
    )
    assert hlo_text.output_aliases(line) == {2: 0}  # {} : the single (non-tuple) output
    assert hlo_text.output_aliases("HloModule m\nENTRY %main {}") == {}


def test_connect_draws_one_edge_per_producer_typed_by_its_first_operand() -> None:
    graph = Graph("jaxpr")
    connect(graph, [(("a",), "f32[2]"), (("a", "b"), "f32[3]"), ((), "i32[]")], "c")
    assert [(e.src, e.dst, e.type) for e in graph.edges] == [
        ("a", "c", "f32[2]"),
        ("b", "c", "f32[3]"),
    ]


@pytest.mark.parametrize(("fn", "args"), [(sin_mul_add, (X8,)), (scan_in_cond, (1.0, XS))])
def test_kernel_refs_are_kernel_of_each_node_one_object_per_kernel(fn, args):
    from viz.ir.kernels import kernel_of, kernel_refs

    compiled = graphs(fn, *args)[2]
    nodes = [n for n in compiled.nodes if n.kind == "op"]
    refs = kernel_refs(compiled, nodes)
    of = kernel_of(compiled)
    assert refs == [of(n) for n in nodes]
    by_value: dict = {}
    assert all(by_value.setdefault(ref, ref) is ref for ref in refs)
    assert any(ref.path for ref in refs)  # a fusion's nodes are among them
