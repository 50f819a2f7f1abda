"""Kernels timed on the device (issue #58): the one reader of a profiler trace and each
platform's reading of it, the compile profile on a trace with threads busy outside the
compile, custom calls and Pallas kernels as kernels, the roofline, the program's device
time beside the wall time, and the CLI's missing counts.

The TPU readers run on real artifacts recorded on a TPU v5e (tests/fixtures/tpu_v5e:
the 24-layer sample, whose attention is a Pallas kernel, and a Pallas program); the
expected values are read from the recorded trace itself where they can be, so a test
checks the reader, not a copied number. The compile's spans on the chip's recorded
compile traces: tests/test_tpu_compile_spans.py."""

from __future__ import annotations

import dataclasses
import gzip
import importlib.util
import json
import re
import shutil
from collections import defaultdict
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from jax import lax
from jax.experimental import pallas as pl
from jax.interpreters.mlir import make_ir_context
from jaxlib.mlir import ir

from viz import analyze
from viz.cli import summarize_report
from viz.compile_profile.model import CompileProfileSection
from viz.compile_profile.run import _read_xla
from viz.compile_profile.spans import WINDOW, spans_of
from viz.device_time import device_time_words
from viz.fusion.map import fusion_map
from viz.fusion.model import FusionEntry
from viz.fusion.profile import KernelTime, Profile, profile_of
from viz.fusion.roofline import (
    ASYNC,
    NO_TIME,
    NOTHING,
    NUMBERED,
    PALLAS_FIX,
    attainable,
    named_groups,
    past_hbm_words,
    point,
    roofline,
    undrawn_words,
    unplaced_words,
)
from viz.fusion.view import kernel_irs
from viz.ir.hlo import read_hlo_text
from viz.ir.jaxpr import read_jaxpr
from viz.ir.kernels import kernel_count, kernel_names, kernels
from viz.ir.stablehlo import StableHLOReading, module_bytecode, module_copy, read_stablehlo
from viz.platforms import platform_of, tpu
from viz.platforms.base import Peaks
from viz.platforms.mosaic import kernel_text
from viz.platforms.trace import (
    ASYNC_HALVES,
    MODULES_THREAD,
    PALLAS,
    PALLAS_TARGET,
    TraceEvent,
    instruction_name,
    read_trace,
)
from viz.report import Timings

FIXTURES = Path(__file__).parent / "fixtures"
TPU_V5E = FIXTURES / "tpu_v5e"  # recorded on a chip (its README.md)
LAYERS_24 = TPU_V5E / "transformer_24"
PALLAS_FORWARD = TPU_V5E / "pallas_forward"
RUNS = 5  # the recording's profiled calls (bench/tpu_check.py --record)
NS = 1e-9  # the reader keeps a trace's times in whole ns (its ps and µs rounded)


def manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def compiled_text(folder: Path) -> str:
    packed = folder / "compiled.hlo.txt.gz"
    if packed.is_file():
        with gzip.open(packed, "rt") as f:
            return f.read()
    return (folder / "compiled.hlo.txt").read_text()


def program_name(folder: Path) -> str:
    """The HLO module's name (`jit_forward`): the trace's runs of it are the program's."""
    return re.match(r"HloModule (\S+?),", compiled_text(folder)).group(1)


def recorded_profile(folder: Path) -> Profile:
    """The kernel profile jitscope reads from a recorded trace, as on the chip."""
    names = set(kernel_names(read_hlo_text(compiled_text(folder))))
    recorded = manifest(folder)
    profile = profile_of(read_trace(folder / "trace.json.gz"), names, RUNS, step_s=1e-3,
                         device=recorded["device"], program=program_name(folder))  # fmt: skip
    profile.device_kind = recorded["device_kind"]
    return profile


def raw_events(folder: Path) -> list[dict]:
    """The trace's own JSON events, read without jitscope's reader."""
    with gzip.open(folder / "trace.json.gz", "rt") as f:
        return json.load(f)["traceEvents"]


def raw_ops(folder: Path) -> dict[str, list[dict]]:
    """Each instruction's `XLA Ops` events' args, by the name its `long_name` gives it."""
    found = defaultdict(list)
    for e in raw_events(folder):
        long_name = (e.get("args") or {}).get("long_name", "")
        if e.get("ph") == "X" and long_name.startswith("%"):
            found[long_name[1:].split(" = ", 1)[0]].append(e["args"])
    return found


def per_run(ops: list[dict], key: str) -> float:
    return sum(float(op[key]) for op in ops) / RUNS


@pytest.fixture(scope="module")
def layers_24() -> Profile:
    return recorded_profile(LAYERS_24)


@pytest.fixture(scope="module")
def pallas_profile() -> Profile:
    return recorded_profile(PALLAS_FORWARD)


# -- the trace reader -------------------------------------------------------------------


def test_the_reader_names_each_events_process_and_thread() -> None:
    raw = raw_events(LAYERS_24)
    events = read_trace(LAYERS_24 / "trace.json.gz")
    assert len(events) == sum(e.get("ph") == "X" for e in raw)
    named = {e["args"].get("name") for e in raw if e.get("ph") == "M"}
    assert {e.process for e in events} | {e.thread for e in events} <= named
    ops = [e for e in events if (e.process, e.thread) == ("/device:TPU:0", "XLA Ops")]
    assert ops and all(e.on_device for e in ops)
    runs = [e for e in events if e.thread == MODULES_THREAD]
    assert len(runs) == RUNS and {e.name.split("(")[0] for e in runs} == {"jit_forward"}
    # a run's span is its device time (`device_duration_ps`), to the ns
    for run in runs:
        assert run.seconds == pytest.approx(float(run.args["device_duration_ps"]) / 1e12, abs=NS)


def test_a_plain_json_trace_reads_as_the_gzipped_one(tmp_path: Path) -> None:
    plain = tmp_path / "perfetto_trace.json"
    with gzip.open(PALLAS_FORWARD / "trace.json.gz", "rb") as src, plain.open("wb") as out:
        shutil.copyfileobj(src, out)
    assert read_trace(plain) == read_trace(PALLAS_FORWARD / "trace.json.gz")


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("%fusion.3 = f32[8,8]{1,0:T(8,128)} fusion(%a), kind=kOutput", "fusion.3"),
        ("ROOT %custom-call.1 = f32[8] custom-call(%x)", "custom-call.1"),
        ("copy-start.2", "copy-start.2"),
        (
            "%online-softmax.3 = f32[2,4,128,64]{3,2,1,0:T(8,128)S(1)} custom-call(",
            "online-softmax.3",
        ),
    ],
)
def test_an_instruction_is_named_by_its_text(text: str, name: str) -> None:
    assert instruction_name(text) == name


def test_a_device_configuration_reads_as_its_platform() -> None:
    tpu_rules, cpu_8 = platform_of("tpu").trace_rules, platform_of("cpu:8").trace_rules
    assert tpu_rules.device_clock and not cpu_8.device_clock
    assert cpu_8 is platform_of("cpu").trace_rules


# -- the TPU's kernels, from its XLA Ops (the 24-layer sample, recorded) ---------------


def test_the_24_layer_samples_kernels_are_timed_with_their_flops_and_bytes(layers_24) -> None:
    costed = [k for k in layers_24.kernels if k.flops is not None and k.bytes_accessed is not None]
    assert len(costed) >= 100
    # the program's device time: its `XLA Modules` runs, about 0.25 ms per call
    modules = [e for e in raw_events(LAYERS_24) if e.get("name", "").startswith("jit_forward(")]
    assert layers_24.device_step_s == pytest.approx(sum(e["dur"] for e in modules) / 1e6 / RUNS)
    assert layers_24.device_step_s == pytest.approx(0.25e-3, rel=0.02)
    named = sum(k.mean_s for k in layers_24.kernels)
    assert named / layers_24.device_step_s >= 0.90
    assert layers_24.unattributed_s == pytest.approx(layers_24.device_step_s - named)


def test_a_kernels_time_flops_and_bytes_are_its_events_per_run(layers_24) -> None:
    ops = raw_ops(LAYERS_24)
    matmul = max(
        (k for k in layers_24.kernels if k.category == "convolution fusion"), key=lambda k: k.mean_s
    )
    mine = ops[matmul.name]
    assert matmul.calls == len(mine) == RUNS
    assert matmul.mean_s == pytest.approx(per_run(mine, "device_duration_ps") / 1e12, abs=NS)
    assert matmul.flops == pytest.approx(per_run(mine, "model_flops")) and matmul.flops > 0
    assert matmul.bytes_accessed == pytest.approx(per_run(mine, "bytes_accessed"))
    assert matmul.share == pytest.approx(matmul.mean_s / layers_24.device_step_s)


def test_a_kernel_xla_has_no_cost_for_is_unknown_not_zero(layers_24) -> None:
    ops = raw_ops(LAYERS_24)
    by_name = {k.name: k for k in layers_24.kernels}
    uncosted = {
        name for name, args in ops.items()
        if name in by_name and all(a["model_flops"] == a["bytes_accessed"] == "0" for a in args)
    }  # fmt: skip
    # on the chip, every instruction with neither FLOPs nor bytes is a custom call
    assert uncosted and {by_name[n].category for n in uncosted} == {"custom-call"}
    assert all(by_name[n].flops is None and by_name[n].bytes_accessed is None for n in uncosted)
    # the attention of each layer: a kernel XLA's TPU compiler wrote itself (a
    # tpu_custom_call like a Pallas kernel's, but no `pallas_call` of the user's)
    xla_kernels = {n for n in uncosted if by_name[n].no_cost == PALLAS_TARGET}
    assert xla_kernels == {n for n in uncosted if n.startswith("online-softmax")}
    assert len(xla_kernels) == 24
    assert {by_name[n].no_cost for n in uncosted - xla_kernels} == {"ConcatBitcast"}
    # a copy does no FLOPs but moves bytes: a cost XLA knows, 0 FLOPs kept as 0
    copy = by_name["copy-start"]
    assert copy.flops == 0.0 and copy.bytes_accessed == pytest.approx(
        per_run(ops["copy-start"], "bytes_accessed")
    )
    assert copy.no_cost == ""


def test_another_programs_ops_are_not_counted() -> None:
    """The ops of a run of another program (here the recording's own, renamed and moved
    a second later) are not counted for jit_forward."""
    events = read_trace(PALLAS_FORWARD / "trace.json.gz")
    later = [
        dataclasses.replace(
            e,
            name="jit_other(1)" if e.thread == MODULES_THREAD else e.name,
            start_ns=e.start_ns + 10**9,
            end_ns=e.end_ns + 10**9,
        )
        for e in events
        if e.on_device
    ]
    names = set(kernel_names(read_hlo_text(compiled_text(PALLAS_FORWARD))))
    alone = profile_of(events, names, RUNS, 1e-3, "tpu", "jit_forward")
    beside = profile_of(events + later, names, RUNS, 1e-3, "tpu", "jit_forward")
    assert beside.kernels == alone.kernels and beside.device_step_s == alone.device_step_s


def test_the_cpu_reading_of_a_tpu_trace_has_neither_cost_nor_device_clock() -> None:
    """The TPU's own rules give the costs and the program's device time: the CPU's find
    the same kernels by name, and nothing more."""
    names = set(kernel_names(read_hlo_text(compiled_text(PALLAS_FORWARD))))
    profile = profile_of(read_trace(PALLAS_FORWARD / "trace.json.gz"), names, RUNS, 1e-3, "cpu")
    assert {k.name for k in profile.kernels} == {"forward.1", "convolution_tanh_fusion"}
    assert all(k.flops is None and k.no_cost == "" for k in profile.kernels)
    assert profile.device_step_s is None


# -- the compile profile ---------------------------------------------------------------


def span(thread: str, name: str, start: int, end: int) -> TraceEvent:
    return TraceEvent("/host:CPU", thread, hash(thread) % 1000, name, start, end)


def test_a_thread_busy_only_outside_the_compile_is_left_out() -> None:
    # the `max() arg is an empty sequence` of a TPU's `main/…` and `Grpc*` threads
    events = [
        span("python", WINDOW, 1000, 2000),
        span("compiler", "PjRtCpuClient::Compile", 1010, 1990),
        span("main/1", "poll", 0, 500),
        span("Grpc_worker", "poll", 2500, 3000),
    ]
    tree = spans_of(events, compile_s=1e-6)
    assert [s.path for s in tree.spans] == [["PjRtCpuClient::Compile"]]
    assert tree.count == 1


def test_a_trace_without_the_compile_window_is_said_in_words(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": []}))
    profile = CompileProfileSection(compile_s=1.0)
    _read_xla(profile, trace, 1.0, "tpu")
    assert profile.error is not None
    assert "ValueError" not in profile.error.message and WINDOW in profile.error.message
    assert "ValueError" in profile.error.detail


def test_a_compile_with_no_xla_spans_says_what_the_platform_did_not_emit(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    window = {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "name": WINDOW}
    named = {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}}
    trace.write_text(json.dumps({"traceEvents": [named, window]}))
    profile = CompileProfileSection(compile_s=1e-5)
    _read_xla(profile, trace, 1e-5, "tpu")
    assert profile.error is None and profile.xla == []
    assert any("emitted no spans" in w for w in profile.warnings)


# -- custom calls and Pallas kernels ----------------------------------------------------


def test_a_custom_call_is_listed_as_a_kernel() -> None:
    graph = read_hlo_text(compiled_text(PALLAS_FORWARD))
    listed = {k["name"]: k for k in kernels(graph)}
    assert set(listed) == {"forward.1", "convolution_tanh_fusion"}
    pallas_line = next(n.source.line for n in recorded_jaxpr().nodes if n.op == "pallas_call")
    assert listed["forward.1"]["colour"] == "custom"
    assert listed["forward.1"]["lines"] == [pallas_line]
    assert kernel_count(graph) == len(listed)


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + y_ref[...]


def forward(x, y):
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    z = pl.pallas_call(add_kernel, out_shape=out, interpret=True)(x, y)
    return jnp.tanh(z @ y.T)


XY = (jnp.ones((8, 128)), jnp.ones((8, 128)))


def test_a_pallas_call_is_a_kernel_group_named_by_its_function() -> None:
    graph = read_jaxpr(jax.make_jaxpr(forward)(*XY))
    (path,) = [p for p, g in graph.groups.items() if g.kind == "kernel"]
    assert graph.groups[path].attrs["kernel"] == "add_kernel"
    call = next(n for n in graph.nodes if n.op == "pallas_call")
    assert call.scope == path and call.source.function == "forward"
    body = [n.op for n in graph.nodes if n.scope == path and n is not call]
    assert "mul" in body and "add" in body
    # the kernel's output is what its body writes: the dot reads it
    swap = next(n.id for n in graph.nodes if n.op == "swap")
    dot = next(n.id for n in graph.nodes if n.op == "dot_general")
    assert any(e.src == swap and e.dst == dot for e in graph.edges)


def test_a_reducer_and_a_scatter_update_are_ops_not_containers() -> None:
    def f(x, i, y):
        return x.at[i].add(y), lax.reduce(x, 0.0, lambda a, b: a + jnp.sin(b), (0,))

    graph = read_jaxpr(jax.make_jaxpr(f)(XY[0], jnp.array([1, 2]), jnp.ones((2, 128))))
    assert graph.groups == {}
    assert {"scatter-add", "reduce"} <= {n.op for n in graph.nodes}
    assert "sin" not in {n.op for n in graph.nodes}


def test_pallas_interpreted_on_cpu_maps_its_body() -> None:
    report = analyze(forward, "f32[8,128], f32[8,128]", runs=0)
    assert report.fusion_map_coverage.jaxpr == 1.0
    found = {e["primitive"] for entry in report.fusion_map for e in entry.jaxpr_eqns}
    assert {"pallas_call", "mul", "add", "swap"} <= found


def recorded_jaxpr():
    """The jaxpr of the recorded Pallas program, made as the recording made it: its code
    given to jitscope as a user's (`<your code>`, the file the compiled HLO's locations
    name), its kernel not interpreted, at the recorded shapes."""
    from viz.settings import Settings
    from viz.stages import trace
    from viz.target import Target

    code = (LOWERED / "pallas_forward.py").read_text()  # bench/tpu_check.py's PALLAS_CODE
    target = Target.from_settings(Settings(code=code, function="forward"))
    return read_jaxpr(trace(target, target.args(manifest(PALLAS_FORWARD)["args"])).jaxpr)


def test_a_pallas_kernel_on_tpu_holds_its_body_and_is_titled_by_its_function() -> None:
    jaxpr = recorded_jaxpr()
    compiled = read_hlo_text(compiled_text(PALLAS_FORWARD))
    fmap = fusion_map({"jaxpr": jaxpr, "compiled": compiled})
    assert fmap.coverage["jaxpr"] == 1.0
    kernel = next(e for e in fmap.entries if e.kernel == "forward.1")
    assert kernel.title == "add_kernel"
    vias = {e["primitive"]: e["via"] for e in kernel.jaxpr_eqns}
    assert vias["pallas_call"] == "metadata"
    assert {vias[p] for p in ("get", "mul", "add", "swap")} == {"kernel"}
    call_line = next(n.source.line for n in jaxpr.nodes if n.op == "pallas_call")
    assert call_line in kernel.lines


def test_the_pallas_kernel_is_timed_on_the_chip_and_its_cost_unknown(pallas_profile) -> None:
    ops = raw_ops(PALLAS_FORWARD)
    by_name = {k.name: k for k in pallas_profile.kernels}
    assert set(by_name) == set(ops) == {"forward.1", "convolution_tanh_fusion"}
    kernel = by_name["forward.1"]
    assert kernel.calls == RUNS
    assert kernel.mean_s == pytest.approx(
        per_run(ops["forward.1"], "device_duration_ps") / 1e12, abs=NS
    )
    assert kernel.flops is None and kernel.bytes_accessed is None and kernel.no_cost == PALLAS
    fused = by_name["convolution_tanh_fusion"]
    assert fused.flops == pytest.approx(per_run(ops["convolution_tanh_fusion"], "model_flops"))
    assert fused.no_cost == ""


# -- a Pallas kernel as JAX lowers it for a TPU (a real artifact) -----------------------

LOWERED = Path(__file__).parent / "fixtures" / "tpu_v5e_lowered" / "pallas_forward"


def lowered_program():
    """The fixture's program (its Pallas kernel not interpreted), imported from the file
    its StableHLO's locations name."""
    spec = importlib.util.spec_from_file_location("pallas_forward", LOWERED / "pallas_forward.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lowered_stablehlo(where: str = str(LOWERED / "pallas_forward.py")):
    """The recorded StableHLO, its locations moved to `where` (default: where this clone
    keeps the program)."""
    text = (LOWERED / "stablehlo.mlir").read_text()
    recorded = re.search(r'loc\("([^"]*/pallas_forward\.py)"', text).group(1)
    text = text.replace(recorded, where)
    return read_stablehlo(ir.Module.parse(text, context=make_ir_context()))


def test_the_lowered_fixture_is_jaxs_own_tpu_lowering() -> None:
    manifest = json.loads((LOWERED / "manifest.json").read_text())
    assert manifest["lowered_for"] == "tpu" and manifest["versions"]["jax"]
    assert "stablehlo.custom_call @tpu_custom_call" in (LOWERED / "stablehlo.mlir").read_text()


def test_a_tpu_lowered_pallas_call_is_one_op_named_by_its_kernel() -> None:
    graph = lowered_stablehlo()
    (call,) = [n for n in graph.nodes if n.op == "stablehlo.custom_call"]
    assert call.label == "custom_call: add_kernel" and call.attrs["kernel"] == "add_kernel"
    assert call.source.line == 12 and call.source.function == "forward"
    assert [n.op for n in graph.nodes if n.kind == "op"] == [
        "stablehlo.custom_call", "stablehlo.transpose", "stablehlo.dot_general", "stablehlo.tanh",
    ]  # fmt: skip


def test_the_kernels_mosaic_module_reads_as_mlir_text() -> None:
    graph = lowered_stablehlo()
    (text,) = graph.kernel_irs.values()
    assert "func.func @add_kernel(%arg0: memref<256x512xf32, #tpu.memory_space<vmem>>" in text
    # the kernel body's ops, named back from the versioned `stable_mosaic.` namespace
    assert {"arith.mulf", "arith.addf", "vector.load", "tpu.vector_store"} <= set(
        re.findall(r"\b(?:arith|vector|tpu)\.\w+", text)
    )
    assert "stable_mosaic.arith" not in text


NO_MODULE = ["", "{}", '{"custom_call_config": {"body": "not base64!"}}']
NOT_MOSAIC = '{"custom_call_config": {"body": "TUxJUgA="}}'  # bytes that parse as no module


def test_the_pipelines_copy_of_the_module_keeps_the_kernels_ir() -> None:
    """The pipeline reads a bytecode copy of the module beside XLA's compile."""
    module = ir.Module.parse((LOWERED / "stablehlo.mlir").read_text(), context=make_ir_context())
    graph = StableHLOReading(module_copy(module_bytecode(module))).graph()
    assert list(graph.kernel_irs.values()) == list(lowered_stablehlo().kernel_irs.values())


@pytest.mark.parametrize("config", [*NO_MODULE, NOT_MOSAIC])
def test_a_custom_call_without_a_readable_module_has_no_kernel_ir(config: str) -> None:
    assert kernel_text(config) is None


def test_a_tpu_pallas_kernel_holds_its_mosaic_text_in_the_fusion_map() -> None:
    # the chip's StableHLO text has no locations: JAX's own TPU lowering has them, of
    # the same program, at the file the recording's code is (`<your code>`)
    graphs = {"jaxpr": recorded_jaxpr(), "stablehlo": lowered_stablehlo("<your code>")}
    graphs["compiled"] = read_hlo_text(compiled_text(PALLAS_FORWARD))
    fmap = fusion_map(graphs)
    assert fmap.coverage["jaxpr"] == 1.0 and fmap.coverage["stablehlo"] == 1.0
    kernel = next(e for e in fmap.entries if e.kernel == "forward.1")
    assert kernel.title == "add_kernel"
    assert [op["name"] for op in kernel.stablehlo_ops] == ["stablehlo.custom_call"]
    assert "func.func @add_kernel" in kernel.kernel_ir
    assert [e.kernel for e in fmap.entries if e.kernel_ir] == ["forward.1"]
    ((title, text),) = kernel_irs(fmap.entries)
    assert (
        title.startswith("add_kernel (forward.1): the kernel's own IR") and text == kernel.kernel_ir
    )
    assert FusionEntry.from_dict(kernel.to_dict()).kernel_ir == kernel.kernel_ir


# -- the roofline -----------------------------------------------------------------------


def test_the_v5e_peaks_are_the_tpu_platforms_by_the_kind_jax_reports() -> None:
    kind = manifest(LAYERS_24)["device_kind"]  # "TPU v5 lite": how JAX names a v5e
    peaks = platform_of("tpu").peaks(kind)
    assert peaks is tpu.V5E and peaks.source.startswith("https://cloud.google.com/tpu")
    assert platform_of("tpu").peaks("TPU v4") is None and platform_of("cpu").peaks("cpu") is None
    assert peaks.ridge == pytest.approx(197e12 / 819e9)  # about 240.5 FLOP/B
    assert attainable(10.0, peaks) == pytest.approx(10 * 819e9)
    assert attainable(1000.0, peaks) == pytest.approx(197e12)


def kernel_time(flops: float | None, moved: float | None, seconds: float, name="k") -> KernelTime:
    return KernelTime(name, 1, seconds, seconds, 1.0, flops, moved)


def test_a_kernel_below_the_ridge_is_memory_bound_and_above_it_compute_bound() -> None:
    peaks = Peaks("chip", flops_per_s=100.0, bytes_per_s=10.0)  # ridge 10 FLOP/B
    low = point(kernel_time(flops=50, moved=10, seconds=1.0), peaks)
    assert low.intensity == 5 and low.bound == "memory"
    assert low.of_roof == pytest.approx(50 / 50)  # 5 FLOP/B × 10 B/s = 50 FLOP/s roof
    high = point(kernel_time(flops=400, moved=10, seconds=8.0), peaks)
    assert high.bound == "compute" and high.of_roof == pytest.approx(50 / 100)


def test_every_costed_timed_kernel_is_placed_the_rest_named_with_why(layers_24) -> None:
    line = roofline(layers_24)
    assert line.peaks is tpu.V5E and line.note == ""
    placed = {p.kernel for p in line.points}
    unplaced = {k.name for ks in line.unplaced.values() for k in ks}
    assert len(placed) >= 100 and not placed & unplaced
    assert placed | unplaced == {k.name for k in layers_24.kernels}
    costed = {k.name for k in layers_24.kernels if k.flops is not None and k.mean_s > 0}
    halves = {k.name for k in layers_24.kernels if k.category in ASYNC_HALVES}
    assert placed == costed - halves and {k.name for k in line.unplaced[ASYNC]} == halves
    attention, xla_own = line.unplaced[PALLAS_TARGET], line.unplaced["ConcatBitcast"]
    assert {NUMBERED.sub("", k.name) for k in attention} == {"online-softmax"}
    assert PALLAS not in line.unplaced  # the sample has no Pallas kernel of the user's
    said = unplaced_words(line)
    share = sum(k.mean_s for k in attention) / layers_24.device_step_s
    assert said[PALLAS_TARGET] == (
        f"24 kernels that XLA's TPU compiler wrote itself (online-softmax ×24, {share:.1%} of "
        "the device time) have no cost in the trace: not placed"
    )
    assert said["ConcatBitcast"].startswith(f"{len(xla_own)} kernels of XLA's own (ConcatBitcast: ")
    assert f"custom-call ×{len(xla_own)}" in said["ConcatBitcast"]
    copies = sum(k.name.startswith("copy-start") for k in layers_24.kernels)
    assert f"copy-start ×{copies}" in said[ASYNC] and "asynchronous copies" in said[ASYNC]


def test_kernels_faster_than_the_hbm_are_said_to_count_on_chip_bytes(layers_24) -> None:
    line = roofline(layers_24)
    past = [p for p in line.points if p.bytes_per_s > tpu.V5E.bytes_per_s]
    assert past and past_hbm_words(line).startswith(f"{len(past)} kernels (")
    assert "count more than HBM traffic" in past_hbm_words(line)


def test_a_kernel_with_no_flops_is_memory_bound_and_said_off_the_log_chart(layers_24) -> None:
    line = roofline(layers_24)
    # a copy (a layout change): bytes moved, no FLOPs
    copy = next(p for p in line.points if NUMBERED.sub("", p.kernel) == "copy")
    assert copy.flops_per_s == 0 and copy.bytes_per_s > 0 and copy.bound == "memory"
    flopless = [p for p in line.points if p.flops == 0]
    assert undrawn_words(line).startswith(f"{len(flopless):,} kernels do no FLOPs (")


def test_a_kernel_timed_at_0_s_is_named_not_placed() -> None:
    timed, untimed = kernel_time(100, 10, 1e-6), kernel_time(0.0, 64.0, 0.0, "custom-call.61")
    profile = Profile("jax.profiler", 1, 1e-3, [timed, untimed], platform="tpu",
                      device_kind="TPU v5 lite", device_step_s=2e-6)  # fmt: skip
    line = roofline(profile)
    assert [p.kernel for p in line.points] == ["k"]
    assert line.unplaced == {NO_TIME: [untimed]}
    assert unplaced_words(line) == {
        NO_TIME: "1 kernel (custom-call.61) took no device time the trace could measure: not placed"
    }


def test_kernels_of_one_name_are_counted_and_one_alone_is_titled() -> None:
    names = ["online-softmax", "online-softmax.1", "online-softmax.2", "forward.1"]
    assert named_groups(names, {"forward.1": "add_kernel"}) == (
        "online-softmax ×3, forward.1 (add_kernel)"
    )


def test_no_peaks_and_no_flops_are_said_not_invented(pallas_profile) -> None:
    unknown = dataclasses.replace(pallas_profile, device_kind="a chip nobody published")
    line = roofline(unknown)
    assert line.peaks is None and line.points and "no published peaks" in line.note
    assert all(p.bound == "" and p.of_roof is None for p in line.points)
    cpu = Profile("jax.profiler", 1, 1.0, [KernelTime("k", 1, 0.5, 0.5, 0.5)], platform="cpu")
    assert roofline(cpu).points == [] and "no FLOPs" in roofline(cpu).note
    assert roofline(cpu).unplaced == {}


# -- device time beside wall time --------------------------------------------------------


def test_device_time_beside_the_wall_median() -> None:
    t = Timings(run_median_s=1.2e-3, device_s=0.25e-3, device_clock="device")
    assert device_time_words(t, "tpu") == (
        "device time on the tpu: 250 µs per call · host and dispatch: 950 µs of the 1.2 ms "
        "wall median"
    )
    unmeasured = Timings(run_median_s=1.2e-3, device_clock="device")
    assert "not measured" in device_time_words(unmeasured, "tpu")


def sort_then_sin(x):
    return jnp.sin(jnp.sort(x))


def test_on_cpu_the_device_and_wall_times_are_one_clock() -> None:
    report = analyze(sort_then_sin, "f32[4096]", runs=3, profile=True)
    assert report.timings.device_clock == "host" and report.timings.device_s is None
    assert report.profile.platform == "cpu" and report.profile.device_step_s is None
    assert all(k.flops is None for k in report.profile.kernels)
    summary = summarize_report(report)
    assert "the same clock as the wall time" in summary
    assert "roofline: the cpu trace carries no FLOPs or bytes per kernel" in summary


# -- the CLI's missing counts -----------------------------------------------------------


def test_a_failed_compile_prints_a_dash_for_its_kernel_count() -> None:
    report = analyze(jnp.sin, "f32[8]", runs=0, compiler_options={"xla_no_such_option": True})
    assert report.error is not None and report.compiled is None
    summary = summarize_report(report)
    assert "compiled kernels –" in summary and "None" not in summary


def test_the_roofline_chart_draws_the_roof_and_each_costed_kernel(pallas_profile) -> None:
    from viz.charts import roofline_chart

    fig = roofline_chart(roofline(pallas_profile))
    roof, *drawn = fig.data
    assert list(roof.x)[1] == pytest.approx(tpu.V5E.ridge)
    assert max(roof.y) == pytest.approx(tpu.V5E.flops_per_s)
    assert [name for trace in drawn for name in trace.text] == ["convolution_tanh_fusion"]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert fig.layout.yaxis.title.text == "achieved FLOP/s (log scale)"
    assert fig.layout.yaxis.ticktext[:3] == ("1 T", "2 T", "5 T")  # the v5e's FLOP/s, in full


def test_the_clis_top_kernels_sit_on_the_tpu_roofline_and_name_the_pallas_kernel(
    pallas_profile,
) -> None:
    from viz.report import Report, Subject
    from viz.units import seconds, si

    timings = Timings(run_median_s=100e-6, device_s=pallas_profile.device_step_s,
                      device_clock="device")  # fmt: skip
    titled = FusionEntry("forward.1", "custom-call", title="add_kernel")
    report = Report(profile=pallas_profile, fusion_map=[titled], timings=timings,
                    subject=Subject(device="tpu"))  # fmt: skip
    summary = summarize_report(report)
    assert "roofline on TPU v5e: 197.00 TFLOP/s bf16, 819.00 GB/s HBM, ridge 241 FLOP/B" in summary
    fused = next(k for k in pallas_profile.kernels if k.name == "convolution_tanh_fusion")
    rate = si(fused.flops / fused.mean_s)
    assert f"  convolution_tanh_fusion {seconds(fused.mean_s)}: {rate}FLOP/s" in summary
    pallas = next(k for k in pallas_profile.kernels if k.name == "forward.1")
    share = pallas.mean_s / pallas_profile.device_step_s
    assert (
        f"  1 kernel (forward.1 (add_kernel), {share:.1%} of the device time) has no cost XLA "
        f"knows, so not placed: {PALLAS_FIX}"
    ) in summary
    assert "host and dispatch" in summary


# -- the Fusion view of the chip's own report --------------------------------------------


def chip_report(profile: Profile):
    """jitscope's report of the Pallas program from the chip (tests/fixtures/tpu_v5e/
    reports/pallas.json), its profile read by this reader from the trace recorded there,
    its graphs read back from its IR text as the app keeps them."""
    from viz.ir.model import IR
    from viz.report import Report

    report = Report.from_dict(json.loads((TPU_V5E / "reports" / "pallas.json").read_text()))
    module = ir.Module.parse(report.stablehlo.text, context=make_ir_context())
    models = {
        IR.COMPILED: read_hlo_text(report.compiled.text),
        IR.STABLEHLO: read_stablehlo(module),
    }
    return dataclasses.replace(report, profile=profile, graph_models=models)


def test_the_fusion_view_says_why_the_pallas_kernel_is_off_the_roofline(
    pallas_profile, navigation_mode, plain_editor
) -> None:
    from streamlit.testing.v1 import AppTest

    from ui.results import Result
    from viz.program import Program
    from viz.settings import Settings
    from viz.worker.protocol import Analyze

    report = chip_report(pallas_profile)
    code = (LOWERED / "pallas_forward.py").read_text()
    settings = Settings(code=code, function="forward", args=report.args, device="tpu")
    at = AppTest.from_file(str(Path(__file__).parent.parent / "app.py"), default_timeout=120)
    at.session_state["program"] = Program(settings)
    at.session_state["results"] = [Result(Analyze(settings, runs=5), report, recorded=True)]
    at.session_state["query_applied"] = True
    at.session_state["result_tab"] = "Fusion"
    at.run()
    assert not at.exception, at.exception
    (warning,) = [w.value for w in at.warning if w.value.startswith("Roofline")]
    assert warning.startswith("Roofline: 1 kernel (forward.1 (add_kernel), ")
    assert warning.endswith(f"{PALLAS_FIX}.")
    assert any(c.value.startswith("Peaks of the TPU v5e: 197.00 TFLOP/s") for c in at.caption)


def test_a_report_read_before_no_cost_leaves_its_zero_cost_kernel_off_the_roofline() -> None:
    """The chip's report as an older reader wrote it (the Pallas kernel's "0"s kept as
    0, no `no_cost`): nothing to place, and said."""
    from viz.report import Report

    data = json.loads((TPU_V5E / "reports" / "pallas.json").read_text())
    for kernel in data["profile"]["kernels"]:
        if kernel.pop("no_cost", ""):
            kernel["flops"] = kernel["bytes_accessed"] = 0.0
    report = Report.from_dict(data)
    kernel = next(k for k in report.profile.kernels if k.name == "forward.1")
    assert kernel.flops == 0 and kernel.bytes_accessed == 0 and kernel.no_cost == ""
    line = roofline(report.profile)
    assert [p.kernel for p in line.points] == ["convolution_tanh_fusion"]
    assert unplaced_words(line) == {
        NOTHING: "1 kernel (forward.1) has neither FLOPs nor bytes in the trace: not placed"
    }


def test_a_rate_of_nothing_reads_with_its_unit_spaced() -> None:
    """On the chip, the flash attention's broadcasts read `0FLOP/s`."""
    from viz.fusion.roofline import RooflinePoint, point_words

    rates = 0.0, 1.24e12, 0.0  # FLOP/s, B/s, FLOP/B
    broadcast = RooflinePoint("broadcast_in_dim.3", 7e-6, 0.0, 8.7e6, *rates, "memory", 1.5)
    assert point_words(broadcast).startswith("0 FLOP/s · 1.24 TB/s · 0.0 FLOP/B")
