"""Sharding (issue #21, part 2): the spec suffix `@ P(...)`, the mesh, and the report's
`sharding` section read from the compiled executable: per-device shapes and bytes of
every argument and output, and the collectives XLA inserted, with their lines. The
acceptance runs in a `cpu:8` worker: a 2-layer MLP's gradient, data-parallel with
replicated weights (one all-reduce over the gradients), and with its weights split
over 'model' (other collectives), diffed."""

from __future__ import annotations

import math

import pytest

from viz.diff import collective_rows, diff_reports, summarize
from viz.ir.model import Edge, Graph, Node, SourceLoc
from viz.pipeline import analyze
from viz.report import Report
from viz.settings import Settings
from viz.sharding.collectives import collective_kind, collectives, result_arrays
from viz.spec import ArraySpec, SpecError, ValueSpec, format_spec, parse_spec, python_expression
from viz.spec.mesh import parse_mesh
from viz.spec.partition import Partition, split_sharding
from viz.worker.protocol import Analyze, Analyzed, CacheCalls, CacheReply, CacheState

MLP = """import jax
import jax.numpy as jnp


def loss(params, x, y):
    h = jax.nn.relu(x @ params[0]["w"] + params[0]["b"])
    out = h @ params[1]["w"] + params[1]["b"]
    return jnp.mean((out - y) ** 2)


def grads(params, x, y):
    return jax.grad(loss)(params, x, y)
"""
LAYER_LINES = {6, 7}  # the two layers' lines in MLP
PARAMS = "[{'w': f32[128,256]%s, 'b': f32[256]}, {'w': f32[256,16]%s, 'b': f32[16]}]"
BATCH = "f32[64,128] @ P('data', None), f32[64,16] @ P('data', None)"
DATA_PARALLEL = PARAMS % ("", "") + ", " + BATCH  # weights replicated (no suffix)
MODEL_SPLIT = PARAMS % ((" @ P(None, 'model')",) * 2) + ", " + BATCH
PARAM_BYTES = (128 * 256 + 256 + 256 * 16 + 16) * 4
MESH = parse_mesh("data=4, model=2")


# -- the spec language -----------------------------------------------------------------
def test_a_spec_without_a_suffix_parses_as_before() -> None:
    items = parse_spec("f32[64,128], {'w': f32[3]}, 3")
    assert items == [ArraySpec("f32", (64, 128)), {"w": ArraySpec("f32", (3,))}, ValueSpec("3", 3)]
    assert all(getattr(x, "sharding", None) is None for x in (items[0], items[1]["w"], items[2]))


def test_the_suffix_gives_an_array_its_partition_and_formats_back() -> None:
    text = "f32[64,128] @ P('data', None), [{'w': f32[8,4] @ P(None, 'model')}]"
    items = parse_spec(text, mesh=MESH)
    assert items[0] == ArraySpec("f32", (64, 128), Partition(("data", None)))
    assert items[1][0]["w"].sharding == Partition((None, "model"))
    assert format_spec(items) == text
    assert parse_spec(format_spec(items), mesh=MESH) == items


def test_a_suffix_on_a_container_shards_the_leaves_without_their_own() -> None:
    (tree,) = parse_spec("{'w': f32[8,4] @ P('data'), 'b': f32[4]} @ P()", mesh=MESH)
    assert tree["w"].sharding == Partition(("data",)) and tree["b"].sharding == Partition(())


def test_a_value_holding_arrays_can_be_sharded_and_matmul_stays_matmul() -> None:
    (value,) = parse_spec("jnp.ones((8, 4)) @ P('data')", mesh=MESH)
    assert value.sharding == Partition(("data",)) and value.text == "jnp.ones((8, 4))"
    (product,) = parse_spec("jnp.ones((2, 3)) @ jnp.ones((3, 4))")
    assert product.value.shape == (2, 4)


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("f32[8] @ P('data')", "needs a mesh"),
        ("f32[8] @ P('x')", "mesh axis 'x' is not in the mesh (data=4, model=2)"),
        ("f32[8] @ P('data', None)", "has 2 entries but f32[8] has 1 dimension"),
        ("f32[6,4] @ P('data')", "dimension 0 of f32[6,4] (6) does not split over 'data'"),
        ("f32[4,4] @ P(('data', 'model'))", "(8 devices): make it a multiple of 8"),
        ("f32[8] @ P('data', 'data')", "'data' is used twice"),
        ("f32[8] @ P(3)", "entry 3 is not a mesh axis"),
        ("key @ P()", "only arrays"),
    ],
)
def test_a_bad_suffix_is_a_spec_error_naming_the_item(spec: str, says: str) -> None:
    mesh = None if says == "needs a mesh" else MESH
    with pytest.raises(SpecError) as err:
        parse_spec("f32[2], " + spec, mesh=mesh)
    assert err.value.index == 2 and says in str(err.value)


def test_the_suffix_as_python_and_as_text() -> None:
    assert python_expression("f32[8,4] @ P('data', None)") == (
        "jax.ShapeDtypeStruct((8, 4), jnp.float32, "
        "sharding=jax.sharding.PartitionSpec('data', None))"
    )
    assert split_sharding("f32[8,4] @ P('data', None)") == ("f32[8,4]", "P('data', None)")
    assert split_sharding("{'w': f32[8] @ P('data')}") == ("{'w': f32[8] @ P('data')}", "")


def test_a_mesh_is_axes_with_sizes_and_types() -> None:
    mesh = parse_mesh("data=4, model=2:explicit")
    assert mesh is not None and mesh.sizes == {"data": 4, "model": 2} and mesh.devices == 8
    assert [a.explicit for a in mesh.axes] == [False, True]
    assert str(parse_mesh("data=4 model=2")) == "data=4, model=2"
    assert parse_mesh("  ") is None


@pytest.mark.parametrize(
    ("text", "says"),
    [("data", "is not NAME=SIZE"), ("data=0", "at least 1"), ("a=2, a=2", "named twice")],
)
def test_a_bad_mesh_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(SpecError, match=says):
        parse_mesh(text)


# -- collectives from a graph ----------------------------------------------------------
def test_collectives_are_read_from_the_compiled_graph_by_kind_and_dtype() -> None:
    loc = SourceLoc("user.py", 7)
    graph = Graph("compiled")
    graph.nodes = [
        Node("dot.1", "dot", type="f32[256,10]", source=SourceLoc("user.py", 6)),
        Node("all-reduce.4", "all-reduce", type="(f32[256], f32[256,10])", source=loc),
        Node("ag-start", "all-gather-start", type="(f32[8], f32[64])"),
        Node("ag-done", "all-gather-done", type="f32[64]"),
    ]
    graph.edges = [Edge("dot.1", "all-reduce.4")]
    rows = collectives(graph, user_file="user.py")
    assert [(c.kind, c.count, c.dtype) for c in rows] == [
        ("all-reduce", 1, "f32"),
        ("all-gather", 1, "f32"),
    ]
    assert rows[0].bytes_per_device == (256 + 2560) * 4 and rows[0].lines == [6, 7]
    assert rows[1].bytes_per_device == 64 * 4  # the gathered result, not the operand
    assert collective_kind("all-reduce-done") is None and collective_kind("add") is None
    assert result_arrays(graph.nodes[2]) == [("f32", (64,))]


# -- analyses ----------------------------------------------------------------------------
def test_an_unsharded_analysis_has_no_sharding_section() -> None:
    report = analyze(lambda x: x * 2, "f32[8]", runs=0)
    assert report.ok and report.sharding is None
    assert report.to_dict()["sharding"] is None


def test_a_suffix_without_a_mesh_is_a_spec_error() -> None:
    report = analyze(lambda x: x * 2, "f32[8] @ P('data')", runs=0)
    assert report.error is not None and report.error.kind == "spec_error"
    assert "needs a mesh" in report.error.message


def test_a_mesh_larger_than_the_devices_says_how_many_it_needs_and_there_are() -> None:
    report = analyze(lambda x: x * 2, "f32[8] @ P('data')", runs=0, mesh="data=8")
    assert report.error is not None and report.error.kind == "device_unavailable"
    assert "needs 8 devices" in report.error.message and "cpu has 1 device" in report.error.message
    assert "cpu:8" in report.error.hint


def ask(worker8, spec: str, mesh: str, code: str = MLP, function: str = "grads", **more) -> Report:
    reply = worker8.ask(
        Analyze(
            Settings(code=code, function=function, args=spec, device="cpu:8", mesh=mesh), **more
        )
    )
    assert isinstance(reply, Analyzed)
    return reply.report


@pytest.fixture(scope="module")
def data_parallel(worker8) -> Report:
    return ask(worker8, DATA_PARALLEL, "data=8", runs=3, profile=True)


@pytest.fixture(scope="module")
def model_split(worker8) -> Report:
    return ask(worker8, MODEL_SPLIT, "data=4, model=2", runs=0)


def test_data_parallel_inputs_hold_one_eighth_of_the_batch_per_device(data_parallel) -> None:
    s = data_parallel.sharding
    assert data_parallel.ok and s is not None and s.mesh == {"data": 8} and s.devices == 8
    x, y = (a for a in s.args if a.arg in ("x", "y"))
    assert (x.spec, x.per_device_shape, x.bytes_per_device) == ("P('data', None)", [8, 128], 4096)
    assert y.per_device_shape == [64 // 8, 16]
    weights = [a for a in s.args if a.arg.startswith("params")]
    assert {a.spec for a in weights} == {"replicated"}
    assert all(a.per_device_shape == a.shape for a in weights)
    assert [o.bytes_per_device for o in s.outputs] == [
        math.prod(a.shape) * 4 for a in weights
    ]  # the gradients come back whole on each device


def test_data_parallel_gradients_are_all_reduced_once_over_every_weight(data_parallel) -> None:
    s = data_parallel.sharding
    (reduce,) = [c for c in s.collectives if c.kind == "all-reduce"]
    assert reduce.count >= 1 and reduce.dtype == "f32"
    assert reduce.bytes_per_device == PARAM_BYTES  # every gradient, summed across devices
    assert set(reduce.lines) >= LAYER_LINES
    assert any(e.startswith("transpose(jvp())") for e in reduce.jaxpr_eqns)  # the backward pass
    assert set(reduce.nodes) <= set(data_parallel.graph_models["compiled"].node_map())
    assert {c.kind for c in s.collectives} == {"all-reduce"}


def test_collectives_join_the_kernel_profile(data_parallel) -> None:
    profile = data_parallel.profile
    (reduce,) = [c for c in data_parallel.sharding.collectives if c.kind == "all-reduce"]
    assert profile is not None and set(reduce.kernels) <= {k.name for k in profile.kernels}


def test_weights_split_over_model_bring_other_collectives_diffed(data_parallel, model_split):
    s = model_split.sharding
    assert model_split.ok and s is not None and s.mesh == {"data": 4, "model": 2}
    w = next(a for a in s.args if a.arg == "params[0]['w']")
    assert (w.spec, w.per_device_shape) == ("P(None, 'model')", [128, 128])
    assert next(a for a in s.args if a.arg == "x").per_device_shape == [16, 128]
    kinds = {c.kind for c in s.collectives}
    assert "all-gather" in kinds and kinds != {"all-reduce"}
    d = diff_reports(data_parallel, model_split).sharding
    assert d is not None and (d.mesh_a, d.mesh_b) == ({"data": 8}, {"data": 4, "model": 2})
    gather = next(c for c in d.collectives if c.kind == "all-gather")
    assert gather.count.a == 0 and gather.count.b == gather.count.delta > 0
    assert any(c.arg == "params[0]['w']" for c in d.args)
    assert any(r["collective"] == "all-gather (f32)" for r in collective_rows(d))
    assert "collectives: " in summarize(diff_reports(data_parallel, model_split))


def test_the_sharding_section_survives_the_report_json(data_parallel) -> None:
    again = Report.from_dict(data_parallel.to_dict())
    assert again.sharding == data_parallel.sharding


SHARDING_INSIDE = """import jax
from jax.sharding import PartitionSpec as P


def constrained(x):
    y = jax.lax.with_sharding_constraint(x * 2, P())  # gather the rows on every device
    return y.sum(axis=0)


def resharded(x):
    return jax.sharding.reshard(x * 2, P()).sum(axis=0)
"""


@pytest.mark.parametrize(
    ("function", "mesh", "line"),
    [("constrained", "data=8", 6), ("resharded", "data=8:explicit", 11)],
)
def test_sharding_inside_the_function_is_shown_without_more_input(worker8, function, mesh, line):
    report = ask(worker8, "f32[64,32] @ P('data', None)", mesh, SHARDING_INSIDE, function, runs=1)
    assert report.ok, report.error
    (gather,) = [c for c in report.sharding.collectives if c.kind == "all-gather"]
    assert gather.lines == [line] and gather.bytes_per_device == 64 * 32 * 4


def test_the_cli_takes_a_mesh_and_prints_the_split_and_the_collectives(tmp_path) -> None:
    import json
    import subprocess
    import sys

    program = tmp_path / "mlp.py"
    program.write_text(MLP)
    out = tmp_path / "report.json"
    command = [sys.executable, "-m", "viz", "analyze", f"{program}::grads"]
    command += ["--args", DATA_PARALLEL, "--mesh", "data=8", "--device", "cpu:8"]
    command += ["--runs", "0", "--no-history", "--json", str(out)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "sharded over data=8 (8 devices): x P('data', None) → [8, 128]" in proc.stdout
    assert "collectives: all-reduce ×1 f32 145.1 KiB/device (lines 6, 7)" in proc.stdout
    section = json.loads(out.read_text())["sharding"]
    assert section["mesh"] == {"data": 8} and section["collectives"][0]["kind"] == "all-reduce"


# -- how Explore shows it ------------------------------------------------------------------
def test_a_mesh_too_big_for_the_picked_device_is_said_before_sending() -> None:
    from viz.sharding.display import mesh_problem

    assert mesh_problem("data=4, model=2", "cpu") == (
        "The mesh data=4, model=2 needs 8 devices, and cpu has 1.",
        8,
    )
    assert mesh_problem("data=8", "cpu:8") == (None, 8)
    assert mesh_problem("", "cpu") == (None, None)
    assert mesh_problem("data", "cpu")[0].startswith("Mesh: mesh axis 'data' is not NAME=SIZE")


def test_the_collectives_filter_shows_them_with_their_neighbours_only(data_parallel) -> None:
    import viz.graph
    from viz.sharding.display import highlighted, leaf_rows, only_collectives

    graph, s = data_parallel.graph_models["compiled"], data_parallel.sharding
    view = only_collectives(graph, s)
    assert view is not None and view.highlight == s.collective_nodes
    shown = set(viz.graph.visible_ids(view))
    assert s.collective_nodes <= shown and len(shown) < len(graph.nodes)
    assert highlighted(graph, s).highlight == s.collective_nodes
    x = next(r for r in leaf_rows(s.args) if r["argument"] == "x")
    assert (x["per device"], x["split"], x["bytes/device"]) == ("f32[8, 128]", "÷8 · ÷1", "4.0 KiB")
    assert leaf_rows(s.outputs)[1]["output"] == "1: out[0]['w']"


# -- the cache lab's placement takes the spec's suffix -------------------------------------
CACHE_CODE = "import jax.numpy as jnp\n\n\ndef f(x):\n    return jnp.sin(x) * 2\n"


def cache_calls(worker8, placement: str, mesh: str = "", calls: int = 1) -> CacheReply:
    settings = Settings(code=CACHE_CODE, function="f", mesh=mesh)
    return worker8.ask(
        CacheCalls(settings, calls=["f32[16,8]"] * calls, placements={"x": placement})
    )


def test_the_cache_lab_places_an_argument_by_the_spec_suffix(worker8) -> None:
    worker8.ask(CacheState(Settings(code=CACHE_CODE, function="f"), clear=True))
    first = cache_calls(worker8, "P('x')", calls=2)
    assert [e["hit"] for e in first["new"]] == [False, True]
    assert "P('x',) over mesh(x=8)" in first["new"][0]["signature"]
    moved = cache_calls(worker8, "@ P(None, 'model')", mesh="data=4, model=2")
    (miss,) = moved["new"]
    assert not miss["hit"] and [r["kind"] for r in miss["reasons"]] == ["sharding"]
    assert "mesh(data=4,model=2)" in miss["reasons"][0]["after"]


def test_a_cache_lab_partition_over_an_unknown_axis_is_a_failed_call(worker8) -> None:
    reply = cache_calls(worker8, "P('data')")
    (event,) = reply["new"]
    assert event["type"] == "failed"
    assert "mesh axis 'data' is not in x=8" in event["error"]["message"]


def test_pass_by_pass_compiles_with_the_analysed_mesh(worker8) -> None:
    from viz.worker.protocol import Passes, PassesReply

    reply = worker8.ask(
        Passes(
            Settings(code=MLP, function="grads", args=DATA_PARALLEL, device="cpu:8", mesh="data=8")
        )
    )
    assert isinstance(reply, PassesReply) and reply.error is None and reply.steps
