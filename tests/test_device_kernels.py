"""Kernels timed on the device (issue #58): the one reader of a profiler trace and each
platform's reading of it, the compile profile on a trace with threads busy outside the
compile, custom calls and Pallas kernels as kernels, the roofline, the program's device
time beside the wall time, and the CLI's missing counts.

The TPU readers run on a hand-written trace (tests/fixtures/tpu_v5e_handmade: written
from the documented format, not recorded; `bench/tpu_check.py --record` records real
ones), the rest on the CPU."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import shutil
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
from viz.compile_profile.spans import WINDOW, read_spans, spans_of
from viz.device_time import device_time_words
from viz.fusion.map import fusion_map
from viz.fusion.model import FusionEntry
from viz.fusion.profile import KernelTime, Profile, profile_of
from viz.fusion.roofline import TPU_V5E, Peaks, attainable, peaks_for, point, roofline
from viz.fusion.view import kernel_irs
from viz.ir.hlo import read_hlo_text
from viz.ir.jaxpr import read_jaxpr
from viz.ir.kernels import kernel_count, kernel_names, kernels
from viz.ir.stablehlo import StableHLOReading, module_bytecode, module_copy, read_stablehlo
from viz.platforms import platform_of
from viz.platforms.mosaic import kernel_text
from viz.platforms.trace import TraceEvent, instruction_name, read_trace
from viz.report import Timings

FIXTURE = Path(__file__).parent / "fixtures" / "tpu_v5e_handmade" / "pallas_forward"
TRACE = FIXTURE / "trace.json"


def tpu_compiled():
    return read_hlo_text((FIXTURE / "compiled.hlo.txt").read_text())


def tpu_profile() -> Profile:
    names = set(kernel_names(tpu_compiled()))
    profile = profile_of(read_trace(TRACE), names, runs=2, step_s=100e-6, device="tpu",
                         program="jit_forward")  # fmt: skip
    profile.device_kind = "TPU v5 lite"  # as JAX names a v5e
    return profile


# -- the trace reader -------------------------------------------------------------------


def test_the_reader_names_each_events_process_and_thread() -> None:
    events = read_trace(TRACE)
    threads = {(e.process, e.thread) for e in events}
    assert ("/device:TPU:0", "XLA Ops") in threads
    assert ("/device:TPU:0", "XLA Modules") in threads
    assert ("/host:CPU", "main/4242") in threads
    run = next(e for e in events if e.name == "jit_forward(4242)")
    assert (run.start_ns, run.end_ns) == (10_000_000, 10_020_000)
    assert run.on_device


def test_a_gzipped_trace_reads_the_same(tmp_path: Path) -> None:
    packed = tmp_path / "perfetto_trace.json.gz"
    with TRACE.open("rb") as src, gzip.open(packed, "wb") as out:
        shutil.copyfileobj(src, out)
    assert read_trace(packed) == read_trace(TRACE)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("%fusion.3 = f32[8,8]{1,0:T(8,128)} fusion(%a), kind=kOutput", "fusion.3"),
        ("ROOT %custom-call.1 = f32[8] custom-call(%x)", "custom-call.1"),
        ("copy-start.2", "copy-start.2"),
    ],
)
def test_an_instruction_is_named_by_its_text(text: str, name: str) -> None:
    assert instruction_name(text) == name


def test_a_device_configuration_reads_as_its_platform() -> None:
    tpu, cpu_8 = platform_of("tpu").trace_rules, platform_of("cpu:8").trace_rules
    assert tpu.device_clock and not cpu_8.device_clock
    assert cpu_8 is platform_of("cpu").trace_rules


# -- the TPU's kernels, from its XLA Ops -------------------------------------------------


def test_tpu_kernels_carry_their_device_time_flops_and_bytes() -> None:
    profile = tpu_profile()
    by_name = {k.name: k for k in profile.kernels}
    assert set(by_name) == {"fusion.3", "custom-call.1", "fusion"}
    dot = by_name["fusion.3"]
    assert dot.mean_s == pytest.approx(8e-6) and dot.calls == 2
    assert dot.flops == pytest.approx(16384) and dot.bytes_accessed == pytest.approx(8448)
    assert dot.category == "convolution fusion"
    # the share is of the program's device time, not of the host's wall time
    assert profile.device_step_s == pytest.approx(20e-6)
    assert dot.share == pytest.approx(0.4)
    assert profile.unattributed_s == pytest.approx(4e-6)


def test_another_programs_ops_are_not_counted() -> None:
    # jit_convert_element_type ran a `%fusion` too (3 µs): only jit_forward's count
    assert {k.name: k.mean_s for k in tpu_profile().kernels}["fusion"] == pytest.approx(2e-6)


def test_the_cpu_reading_of_a_tpu_trace_finds_no_kernel_by_name() -> None:
    names = set(kernel_names(tpu_compiled()))
    profile = profile_of(read_trace(TRACE), names, runs=2, step_s=1e-4, device="cpu")
    assert not profile.per_kernel_events and profile.device_step_s is None


# -- the compile profile ---------------------------------------------------------------


def test_tpu_compile_spans_name_the_kernels_they_emit() -> None:
    tree = read_spans(TRACE, compile_s=1e-3, platform="tpu")
    assert [k.kernel for k in tree.kernels] == ["fusion.3", "custom-call.1", "fusion"]
    assert tree.kernels[0].seconds == pytest.approx(200e-6)
    assert tree.covered == pytest.approx(0.99)


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
    graph = tpu_compiled()
    listed = {k["name"]: k for k in kernels(graph)}
    assert set(listed) == {"fusion.3", "fusion", "custom-call.1"}
    assert listed["custom-call.1"]["colour"] == "custom" and listed["custom-call.1"]["lines"] == [8]
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


def tpu_text(graph) -> str:
    """The optimized HLO a TPU makes of `forward`: the kernel one tpu_custom_call, at the
    places the jaxpr's equations name."""
    where = {n.op: n.source for n in graph.nodes if n.source is not None}

    def meta(op: str, name: str) -> str:
        s = where[op]
        return (
            f'metadata={{op_name="jit(forward)/{name}" source_file="{s.file}" '
            f"source_line={s.line} source_column={s.column}}}"
        )

    return f"""HloModule jit_forward, is_scheduled=true

%fused_computation (param_0: f32[8,128], param_1: f32[8,128]) -> f32[8,8] {{
  %param_0 = f32[8,128]{{1,0:T(8,128)}} parameter(0)
  %param_1 = f32[8,128]{{1,0:T(8,128)}} parameter(1)
  ROOT %convolution.1 = f32[8,8]{{1,0:T(8,128)}} convolution(%param_0, %param_1), dim_labels=bf_0b->bf, {meta("dot_general", "dot_general")}
}}

%fused_computation.1 (param_0.1: f32[8,8]) -> f32[8,8] {{
  %param_0.1 = f32[8,8]{{1,0:T(8,128)}} parameter(0)
  ROOT %tanh.1 = f32[8,8]{{1,0:T(8,128)}} tanh(%param_0.1), {meta("tanh", "tanh")}
}}

ENTRY %main.10 (x.1: f32[8,128], y.1: f32[8,128]) -> f32[8,8] {{
  %x.1 = f32[8,128]{{1,0:T(8,128)}} parameter(0), metadata={{op_name="x"}}
  %y.1 = f32[8,128]{{1,0:T(8,128)}} parameter(1), metadata={{op_name="y"}}
  %custom-call.1 = f32[8,128]{{1,0:T(8,128)}} custom-call(%x.1, %y.1), custom_call_target="tpu_custom_call", {meta("pallas_call", "pallas_call")}
  %fusion.3 = f32[8,8]{{1,0:T(8,128)}} fusion(%custom-call.1, %y.1), kind=kOutput, calls=%fused_computation, {meta("dot_general", "dot_general")}
  ROOT %fusion = f32[8,8]{{1,0:T(8,128)}} fusion(%fusion.3), kind=kLoop, calls=%fused_computation.1, {meta("tanh", "tanh")}
}}
"""  # noqa: E501


def test_a_pallas_kernel_on_tpu_holds_its_body_and_is_titled_by_its_function() -> None:
    jaxpr = read_jaxpr(jax.make_jaxpr(forward)(*XY))
    fmap = fusion_map({"jaxpr": jaxpr, "compiled": read_hlo_text(tpu_text(jaxpr))})
    assert fmap.coverage["jaxpr"] == 1.0
    kernel = next(e for e in fmap.entries if e.kernel == "custom-call.1")
    assert kernel.title == "add_kernel"
    vias = {e["primitive"]: e["via"] for e in kernel.jaxpr_eqns}
    assert vias["pallas_call"] == "metadata"
    assert {vias[p] for p in ("get", "mul", "add", "swap")} == {"kernel"}
    call_line = next(n.source.line for n in jaxpr.nodes if n.op == "pallas_call")
    assert call_line in kernel.lines


# -- a Pallas kernel as JAX lowers it for a TPU (a real artifact) -----------------------

LOWERED = Path(__file__).parent / "fixtures" / "tpu_v5e_lowered" / "pallas_forward"


def lowered_program():
    """The fixture's program (its Pallas kernel not interpreted), imported from the file
    its StableHLO's locations name."""
    spec = importlib.util.spec_from_file_location("pallas_forward", LOWERED / "pallas_forward.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lowered_stablehlo():
    """The recorded StableHLO, its locations moved to where this clone keeps the program."""
    text = (LOWERED / "stablehlo.mlir").read_text()
    recorded = re.search(r'loc\("([^"]*/pallas_forward\.py)"', text).group(1)
    text = text.replace(recorded, str(LOWERED / "pallas_forward.py"))
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
    program = lowered_program()
    args = [jax.ShapeDtypeStruct((256, 512), jnp.float32)] * 2
    jaxpr = read_jaxpr(jax.make_jaxpr(program.forward)(*args))
    graphs = {"jaxpr": jaxpr, "stablehlo": lowered_stablehlo()}
    graphs["compiled"] = read_hlo_text(tpu_text(jaxpr))
    fmap = fusion_map(graphs)
    assert fmap.coverage["jaxpr"] == 1.0 and fmap.coverage["stablehlo"] == 1.0
    kernel = next(e for e in fmap.entries if e.kernel == "custom-call.1")
    assert kernel.title == "add_kernel"
    assert [op["name"] for op in kernel.stablehlo_ops] == ["stablehlo.custom_call"]
    assert "func.func @add_kernel" in kernel.kernel_ir
    assert [e.kernel for e in fmap.entries if e.kernel_ir] == ["custom-call.1"]
    ((title, text),) = kernel_irs(fmap.entries)
    assert (
        title.startswith("add_kernel (custom-call.1): the kernel's own IR")
        and text == kernel.kernel_ir
    )
    assert FusionEntry.from_dict(kernel.to_dict()).kernel_ir == kernel.kernel_ir


# -- the roofline -----------------------------------------------------------------------


def test_the_v5e_ridge_point_and_the_roof() -> None:
    assert peaks_for("TPU v5 lite") is TPU_V5E
    assert TPU_V5E.ridge == pytest.approx(197e12 / 819e9)  # about 240.5 FLOP/B
    assert attainable(10.0, TPU_V5E) == pytest.approx(10 * 819e9)
    assert attainable(1000.0, TPU_V5E) == pytest.approx(197e12)


def kernel_time(flops: float, moved: float, seconds: float) -> KernelTime:
    return KernelTime("k", 1, seconds, seconds, 1.0, flops, moved)


def test_a_kernel_below_the_ridge_is_memory_bound_and_above_it_compute_bound() -> None:
    peaks = Peaks("chip", flops_per_s=100.0, bytes_per_s=10.0)  # ridge 10 FLOP/B
    low = point(kernel_time(flops=50, moved=10, seconds=1.0), peaks)
    assert low.intensity == 5 and low.bound == "memory"
    assert low.of_roof == pytest.approx(50 / 50)  # 5 FLOP/B × 10 B/s = 50 FLOP/s roof
    high = point(kernel_time(flops=400, moved=10, seconds=8.0), peaks)
    assert high.bound == "compute" and high.of_roof == pytest.approx(50 / 100)


def test_the_tpu_profile_on_the_v5e_roofline() -> None:
    line = roofline(tpu_profile())
    assert line.peaks is TPU_V5E and line.note == ""
    dot = next(p for p in line.points if p.kernel == "fusion.3")
    assert dot.flops_per_s == pytest.approx(16384 / 8e-6)
    assert dot.bytes_per_s == pytest.approx(8448 / 8e-6)
    assert dot.bound == "memory"


def test_no_peaks_and_no_flops_are_said_not_invented() -> None:
    profile = tpu_profile()
    profile.device_kind = "a chip nobody published"
    line = roofline(profile)
    assert line.peaks is None and line.points and "no published peaks" in line.note
    assert all(p.bound == "" and p.of_roof is None for p in line.points)
    cpu = Profile("jax.profiler", 1, 1.0, [KernelTime("k", 1, 0.5, 0.5, 0.5)], platform="cpu")
    assert roofline(cpu).points == [] and "no FLOPs" in roofline(cpu).note


# -- device time beside wall time --------------------------------------------------------


def test_device_time_beside_the_wall_median() -> None:
    t = Timings(run_median_s=1.2e-3, device_s=0.25e-3, device_clock="device")
    assert device_time_words(t, "tpu") == (
        "device 250 µs per call · host and dispatch: 950 µs of 1.2 ms"
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


def test_the_roofline_chart_draws_the_roof_and_each_kernel() -> None:
    from viz.charts import roofline_chart

    fig = roofline_chart(roofline(tpu_profile()))
    roof, *kernels = fig.data
    assert list(roof.x)[1] == pytest.approx(TPU_V5E.ridge)
    assert max(roof.y) == pytest.approx(TPU_V5E.flops_per_s)
    assert sorted(name for trace in kernels for name in trace.text) == [
        "custom-call.1",
        "fusion",
        "fusion.3",
    ]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"


def test_the_clis_top_kernels_sit_on_the_tpu_roofline_with_the_pallas_title() -> None:
    from viz.fusion.model import FusionEntry
    from viz.report import Report, Subject

    timings = Timings(run_median_s=100e-6, device_s=20e-6, device_clock="device")
    titled = FusionEntry("custom-call.1", "custom-call", title="add_kernel")
    report = Report(profile=tpu_profile(), fusion_map=[titled], timings=timings,
                    subject=Subject(device="tpu"))  # fmt: skip
    summary = summarize_report(report)
    assert "kernel time per step 20 µs: fusion.3 8 µs (40%)" in summary
    assert "roofline on TPU v5e: 197.00 TFLOP/s bf16, 819.00 GB/s HBM, ridge 241 FLOP/B" in summary
    assert "  custom-call.1 (add_kernel) 6 µs: 341.33 MFLOP/s · 2.05 GB/s" in summary
    assert "memory-bound" in summary
    assert "device 20 µs per call · host and dispatch: 80 µs of 100 µs" in summary
