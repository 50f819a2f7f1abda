"""The memory profile (issue #54): the bytes live along the schedule, the peak and the
buffers that fill it, checked against XLA's own live ranges and against the process's
measured high-water mark; donation, jax.checkpoint, the memory check before a run, and
the profile's words in the CLI, the diff and the recordings.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from conftest import TESTED_JAX
from live_range_dump import read_live_ranges

import viz.stages
from viz import analyze
from viz.cli import summarize_report
from viz.diff import diff_reports
from viz.memory.display import (
    buffer_rows,
    describe,
    device_memory_text,
    donation_text,
    fit_text,
    line_text,
    padding_text,
    peak_line,
    spaces_text,
    where_text,
)
from viz.memory.live import flatten, live_ranges
from viz.memory.model import Memory, PeakBuffer
from viz.memory.padding import (
    layout_text,
    logical_bytes,
    padded_bytes,
    parse_array,
    times_its_size,
)
from viz.memory.profile import OTHER, memory_profile
from viz.memory.schema import parse
from viz.memory.xla import read_assignment, read_module, read_shape
from viz.report import Report
from viz.settings import Settings
from viz.units import nbytes
from viz.worker import Worker, protocol

# XLA's exact figures for these programs: another jax's XLA fuses and schedules otherwise
XLA_FIGURES = pytest.mark.skipif(
    jax.__version__ != TESTED_JAX, reason=f"XLA's figures here are jax {TESTED_JAX}'s"
)

ROOT = Path(__file__).resolve().parent.parent
SOURCE = Path(__file__).read_text().splitlines()
MiB = 1 << 20


def line_of(text: str) -> int:
    return next(i + 1 for i, line in enumerate(SOURCE) if text in line)


# ----------------------------------------------------------------- test programs


def sort_then_scan(x):
    y = jnp.sort(x * 2.0, axis=1)  # the large sorted intermediate
    z = jnp.cumsum(y, axis=0)
    return (z * y).sum(axis=1)


def sort_and_cumsum(x):
    y = jnp.sort(x, axis=-1)  # each row sorted
    return jnp.cumsum(y, axis=0)  # summed down the columns


def scaled(x, y):
    return x * 2.0 + y


def layer(w, x):
    h = jnp.tanh(x @ w)
    return jnp.sin(h @ w)


def checkpointed(w, x):
    block = jax.checkpoint(layer)
    return block(w, block(w, x)).sum()


def training_step(w, x):
    return jax.grad(checkpointed)(w, x)


def loop(x):
    def body(i, carry):
        return jnp.sin(carry) * 0.5 + i

    return jax.lax.fori_loop(0, 4, body, x)


def scan_and_cond(ws, x, flag):
    def body(c, w):
        c = jnp.tanh(c @ w)
        return c, c.sum()

    out, sums = jax.lax.scan(body, x, ws)
    return jax.lax.cond(flag, lambda o: o.T, lambda o: o * 2.0, out), sums


def rnn(w, xs):
    def cell(h, x):
        h = jnp.tanh(x @ w + h)
        return h, h

    return jax.lax.scan(cell, jnp.zeros((4, 32)), xs)  # the stacked states


@pytest.fixture(scope="module")
def sorted_report() -> Report:
    return analyze(sort_then_scan, "f32[2048,8192]", runs=0)


# --------------------------------------------------------------- the schema


def test_the_schema_reads_the_fields_it_declares_and_skips_the_rest():
    record = bytes([0x08, 0x07, 0x10, 0x40])  # id 7, size 64
    record += bytes([0x1A, 0x05, 0x1A, 0x01, 0x01, 0x20, 0x03])  # at{index [1], instruction 3}
    record += bytes([0x20, 0x05])  # color 5: a field XLA writes that the schema leaves out
    buffer = parse("Buffer", record)
    assert (buffer.id, buffer.size, buffer.at.instruction, list(buffer.at.index)) == (7, 64, 3, [1])


def _sort_protos() -> tuple[bytes, bytes]:
    compiled = jax.jit(sort_then_scan).lower(S((256, 512), F32)).compile()
    module = compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()
    return module, compiled.memory_analysis().serialized_buffer_assignment_proto


def test_only_the_devices_memory_space_counts_the_others_are_shown_apart():
    """A TPU colours each allocation with its memory space (0 HBM, 1 VMEM, 2 the chip's
    own): a crafted assignment that puts the temporaries' block in VMEM."""
    module, assignment = _sort_protos()
    message = parse("Assignment", assignment)
    (block,) = [
        a
        for a in message.allocations
        if not (a.parameter or a.live_out or a.constant) and not a.thread_local and a.size > MiB
    ]
    block.color = 1
    before = memory_profile(module, assignment)
    after = memory_profile(module, message.SerializeToString())
    assert after.other_spaces == {"1": block.size}
    assert after.by_kind_at_peak["temporary"] == 0 < before.by_kind_at_peak["temporary"]
    assert after.peak_bytes < before.peak_bytes
    memory = Memory(peak_bytes=after.peak_bytes, other_spaces=after.other_spaces)
    assert spaces_text(memory, "tpu") == (
        f"also in other memory spaces, not in the peak: {nbytes(block.size)} in VMEM, the "
        "core's on-chip vector memory"
    )
    assert spaces_text(memory, "cpu") == (  # the CPU names no space of its own
        f"also in other memory spaces, not in the peak: {nbytes(block.size)} in memory space 1"
    )


# ------------------------------------------------------------------- padding


@pytest.mark.parametrize(
    ("text", "padded", "times"),
    [
        ("f32[65536,3]{1,0:T(8,128)}", 65536 * 128 * 4, "43× its size"),
        ("f32[1024,8192]{1,0:T(8,128)}", 1024 * 8192 * 4, ""),  # whole tiles: none
        ("f32[3,65536]{1,0:T(8,128)}", 8 * 65536 * 4, "2.7× its size"),  # the long axis last
        ("f32[65536,3]{0,1:T(8,128)}", 8 * 65536 * 4, "2.7× its size"),  # laid out transposed
        ("f32[65536,3]{0,1:T(4,128)}", 4 * 65536 * 4, "1.3× its size"),  # as a TPU v5e did
        ("bf16[7,100]{1,0:T(8,128)(2,1)}", 8 * 128 * 2, "1.5× its size"),
        ("f32[5]{0:T(256)}", 256 * 4, "51× its size"),
        ("f32[1000000,2048]{1,0:T(8,128)}", 8192000000, ""),
        ("f32[1000001,2048]{1,0:T(8,128)}", 1000008 * 2048 * 4, "0.0007 % over its size"),
        ("pred[4,4]{1,0}", 16, ""),
        ("s32[9]{0}", 36, ""),
    ],
)
def test_a_layouts_tiles_pad_its_array(text, padded, times):
    dtype, dims, layout = parse_array(text)
    assert padded_bytes(dtype, dims, layout) == padded
    assert times_its_size(padded, logical_bytes(dtype, dims)) == times


def test_the_padding_at_the_peak_is_named_and_the_cpu_says_nothing(sorted_report):
    assert padding_text(sorted_report.memory) is None  # the CPU tiles nothing
    dtype, dims, layout = parse_array("f32[65536,3]{1,0:T(8,128)}")
    narrow = PeakBuffer(
        instruction="concatenate.3",
        op="concatenate",
        shape=list(dims),
        dtype=dtype,
        bytes=padded_bytes(dtype, dims, layout),
        kind="temporary",
        where="/home/me/model.py:7",
        logical_bytes=logical_bytes(dtype, dims),
        padded_bytes=padded_bytes(dtype, dims, layout),
        layout=layout_text(layout),
    )
    wide = replace(
        narrow,
        instruction="dot.1",
        shape=[1024, 8192],
        where="/home/me/model.py:9",
        bytes=32 * MiB,
        logical_bytes=32 * MiB,
        padded_bytes=32 * MiB,
        layout="{1,0:T(8,128)}",
    )
    memory = Memory(peak_bytes=narrow.bytes + wide.bytes, at_peak=[narrow, wide])
    assert padding_text(memory) == (
        f"padding: {nbytes(narrow.bytes - narrow.logical_bytes)} of the 64.0 MiB peak, most "
        "from f32[65536,3] at model.py:7 (43× its size, laid out {1,0:T(8,128)}): axis 1's 3 "
        "fills 3 of the 128 lanes "
        "of its 8×128 tiles: put the long axis last, or make it a multiple of 128"
    )
    assert [r["padding"] for r in buffer_rows(memory.at_peak)] == [
        f"+{nbytes(narrow.bytes - narrow.logical_bytes)} (43×)",
        "",
    ]
    tiny = Memory(peak_bytes=200 * narrow.bytes, at_peak=[narrow])  # under 1 % of the peak
    assert padding_text(tiny) is None


def test_a_shape_read_from_the_module_proto_carries_its_tiles():
    shape = parse("Shape", b"")
    shape.element_type, shape.dimensions[:] = 11, [65536, 3]
    shape.layout.minor_to_major[:] = [1, 0]
    shape.layout.tiles.add().dimensions[:] = [8, 128]
    read = read_shape(parse("Shape", shape.SerializeToString()))
    assert (read.logical_bytes, read.padded_bytes) == (65536 * 3 * 4, 65536 * 128 * 4)


# ------------------------------------------------ live ranges: XLA's own, exactly


def _dumped_live_ranges(folder: Path) -> tuple[list[str], dict[tuple[str, str], tuple[int, int]]]:
    """XLA's `*-live-range.txt`: the flattened sequence and each buffer's range."""
    found = list(folder.glob("*-live-range.txt"))
    if not found:
        pytest.skip(f"this jax's XLA ({jax.__version__}) dumps no live-range file")
    (path,) = found
    return read_live_ranges(path.read_text())


S = jax.ShapeDtypeStruct
F32 = jnp.float32
PROGRAMS = {
    "sort": (jax.jit(sort_then_scan), (S((256, 512), F32),)),
    "loop": (jax.jit(loop), (S((128, 128), F32),)),
    "scan and cond": (
        jax.jit(scan_and_cond),
        (S((4, 64, 64), F32), S((64, 64), F32), S((), jnp.bool_)),
    ),
    "donated": (jax.jit(scaled, donate_argnums=0), (S((256, 256), F32), S((256, 256), F32))),
    "checkpoint's gradient": (jax.jit(training_step), (S((64, 64), F32), S((32, 64), F32))),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_each_buffers_live_range_is_xlas_own(name, tmp_path):
    jitted, args = PROGRAMS[name]
    compiled = jitted.lower(*args).compile(
        compiler_options={"xla_dump_to": str(tmp_path), "xla_dump_hlo_as_text": True}
    )
    executable = compiled.runtime_executable()
    module = read_module(executable.hlo_modules()[0].as_serialized_hlo_module_proto())
    assignment = read_assignment(compiled.memory_analysis().serialized_buffer_assignment_proto)
    schedule = flatten(module)
    ranges = live_ranges(module, assignment, schedule)
    ours = {}
    for bid, (start, end) in ranges.items():
        buffer = assignment.buffers[bid]
        index = "{" + ",".join(map(str, buffer.index)) + "}"
        ours[(module.instructions[buffer.instruction].name, index)] = (start, end)
    sequence, theirs = _dumped_live_ranges(tmp_path)
    assert [module.instructions[i].name for i in schedule.order] == sequence
    assert ours == theirs


# ------------------------------------------------------------------- the profile


def test_the_sorted_intermediate_is_among_the_largest_buffers_with_its_shape_and_line(
    sorted_report,
):
    memory = sorted_report.memory
    top = memory.at_peak[:4]
    (sort,) = [r for r in top if r.op == "sort"]
    assert (sort.dtype, sort.shape, sort.bytes) == ("f32", [2048, 8192], 64 * MiB)
    assert sort.where == f"{__file__}:{line_of('the large sorted intermediate')}"
    assert sort.kind == "temporary" and sort.live[0] < memory.peak_at.position <= sort.live[1]


def test_the_timelines_largest_value_is_the_peak_and_the_rows_add_up_to_it(sorted_report):
    memory = sorted_report.memory
    assert max(p.bytes for p in memory.timeline) == memory.peak_bytes
    assert memory.timeline[memory.peak_at.position].bytes == memory.peak_bytes
    assert sum(r.bytes for r in memory.at_peak) == memory.peak_bytes
    assert sum(memory.by_kind_at_peak.values()) == memory.peak_bytes
    for point in memory.timeline:
        assert point.bytes == point.parameter + point.output + point.temporary + point.constant
    sizes = [r.bytes for r in memory.at_peak if r.instruction != OTHER]
    assert sizes == sorted(sizes, reverse=True)


def test_xlas_own_peak_leaves_the_temporaries_out_and_ours_counts_them(sorted_report):
    m = sorted_report.memory
    assert m.xla_peak_bytes < m.argument_bytes + m.temp_bytes  # XLA's: arguments and outputs
    # every temporary is live at once here (the output, 8 KiB, is made one step later):
    # the peak is the argument and XLA's one block of temporaries, and a 4-byte constant
    assert m.peak_bytes == m.argument_bytes + m.temp_bytes + 4
    assert m.by_kind_at_peak["parameter"] == m.argument_bytes


def test_donation_lowers_the_peak():
    spec = "f32[2048,2048], f32[2048,2048]"
    kept, donated = (analyze(scaled, spec, runs=0, donate=d) for d in ((), ("x",)))
    assert kept.memory.peak_bytes == 3 * 16 * MiB  # x, y and the output
    assert donated.memory.peak_bytes == 2 * 16 * MiB  # the output written over x
    diff = diff_reports(kept, donated)
    assert diff.peak.said.startswith("donation saved 16.0 MiB at the peak")


def test_donation_is_offered_only_for_an_argument_shaped_like_an_output():
    # scaled's x and y are both f32[64,64] like its output: XLA can alias one of them
    aliasable = analyze(scaled, "f32[64,64], f32[64,64]", runs=0)
    said, helps = donation_text(aliasable.memory, aliasable.graph_models["compiled"])
    assert helps and said.count("f32[64,64]") == 1  # one output: one argument can take it
    assert "`x` (f32[64,64])" in said and "deleted by the call" in said
    # a classifier's head (the mlp sample's): f32[32,10] out, no argument of that type
    other = analyze(lambda w, x: x @ w, "f32[256,10], f32[32,256]", runs=0)
    said, helps = donation_text(other.memory, other.graph_models["compiled"])
    assert not helps and said.startswith("**Donation** would not help here")
    assert "(f32[32,10])" in said and "deleted all the same" in said


@pytest.mark.parametrize(
    "where, shown",
    [("your code, line 41", "line 41"), ("/home/me/model.py:12", "model.py:12"), ("", "")],
)
def test_a_buffers_line_is_short_enough_for_its_column(where, shown):
    row = PeakBuffer("dot.1", "dot", [32, 512], "f32", 65536, "temporary", where=where)
    assert line_text(row) == shown


def test_checkpointed_residuals_are_listed_with_their_lines():
    report = analyze(checkpointed, "f32[256,256], f32[128,256]", runs=0)
    residuals = report.memory.residuals
    sources = [r.source for r in residuals]
    assert "from the argument w" in sources and "from the argument x" in sources
    (saved,) = [r for r in residuals if r.source == "output of sin"]
    assert (saved.dtype, saved.shape, saved.bytes) == ("f32", [128, 256], 128 * 256 * 4)
    assert saved.where == f"{__file__}:{line_of('return jnp.sin(h @ w)')}"


def test_a_step_that_takes_its_own_gradient_names_the_recomputed_kernels():
    report = analyze(training_step, "f32[256,256], f32[128,256]", runs=0)
    memory = report.memory
    assert memory.residuals == [] and "Analyze the function under jax.grad" in memory.residuals_note
    assert memory.recomputed, "no kernel marked as recomputed under jax.checkpoint"
    assert not report.warnings


def test_a_function_without_checkpoint_lists_no_residuals(sorted_report):
    assert sorted_report.memory.residuals == [] and not sorted_report.memory.residuals_note


# ------------------------------------------------- every buffer: a line, or a reason


def test_every_buffer_at_the_peak_has_a_file_and_line_or_a_reason():
    report = analyze(sort_and_cumsum, "f32[2048,1024]", runs=0)
    rows = [r for r in report.memory.at_peak if r.bytes > MiB]
    assert len(rows) >= 3
    for row in rows:
        assert row.where or row.note or row.argument, row
        if row.where:
            assert re.fullmatch(r".*\.py:\d+", row.where), row.where
    file = Path(__file__).name
    summed = f"{file}:{line_of('summed down the columns')}"
    (window,) = [r for r in rows if r.instruction == "wrapped_reduce-window"]
    assert where_text(window.where) == summed and "no line" in window.note
    assert peak_line(report.memory).startswith(
        f"peak {nbytes(report.memory.peak_bytes)} at {report.memory.peak_at.instruction} ({summed})"
    )


def test_a_loops_state_is_named_by_the_loops_output_and_its_line():
    """A scan's stacked states live, at the peak, in its loop body's parameter: that
    row read `arg_tuple.1`, no line, "XLA kept no line for this kernel" (no kernel)."""
    report = analyze(rnn, "f32[32,32], f32[20,4,32]", runs=0)
    largest = report.memory.at_peak[0]
    assert (largest.shape, largest.op) == ([20, 4, 32], "get-tuple-element")
    assert largest.instruction in {n.id for n in report.graph_models["compiled"].nodes}
    assert where_text(largest.where) == f"test_memory.py:{line_of('the stacked states')}"


def test_a_layout_copy_names_the_buffer_it_copies_and_its_line():
    from viz.ir.hlo import read_hlo_text
    from viz.memory.lines import Kernels, line_or_reason
    from viz.memory.profile import where

    compiled = jax.jit(sort_and_cumsum).lower(S((2048, 1024), F32)).compile()
    kernels = Kernels(read_hlo_text(compiled.as_text()), lambda node: where(node.source))
    copies = [k for k in kernels.members if kernels.is_layout_copy(k)]
    assert copies, "XLA inserted no layout copy here"
    found = line_or_reason(kernels, copies[0])
    assert found.note.startswith("a copy XLA inserted for layout, of sort")
    assert found.where == f"{__file__}:{line_of('each row sorted')}"
    row = PeakBuffer(copies[0], "fusion", [8], "f32", 32, "temporary", found.where, note=found.note)
    assert describe(row) == (
        f"the fusion {copies[0]} at test_memory.py:{line_of('each row sorted')} "
        f"({found.note}), f32[8] 32 B"
    )


# ------------------------------------------ out of memory at compile: the estimate


REFUSED_ABOVE = 1024  # the simulated device: a batch over this does not fit


def _refusing(real):
    def compile(self, *args, **kwargs):
        (x, *_), _ = self.args_info
        if x.shape[0] > REFUSED_ABOVE:
            raise jax.errors.JaxRuntimeError(
                "RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required "
                "for HLO temporaries (20.00G) exceeds available HBM (15.75G)."
            )
        return real(self, *args, **kwargs)

    return compile


def test_out_of_memory_at_compile_names_the_buffers_that_would_fill_it(monkeypatch):
    """XLA refuses the compile (simulated: libtpu's message above a batch of 1024): the
    same program compiled at 1024, 512 and 256, sizes taken back to 4096, comes within
    VALIDATED_PCT of the real profile of the program that fits on this CPU."""
    from viz.cli import summarize_report
    from viz.memory.estimate import VALIDATED_PCT

    real = analyze(sort_and_cumsum, "f32[4096,1024]", runs=0).memory
    monkeypatch.setattr(jax.stages.Lowered, "compile", _refusing(jax.stages.Lowered.compile))
    report = analyze(sort_and_cumsum, "f32[4096,1024]", runs=0)
    error, memory = report.error, report.memory
    assert error.kind == "out_of_memory" and error.stage == "compile"
    assert "donate" in error.hint and "jax.checkpoint" in error.hint and "shard" in error.hint
    assert memory.estimate.compiled_at == [1024, 512, 256]
    off = abs(memory.peak_bytes - real.peak_bytes) / real.peak_bytes * 100
    assert off <= VALIDATED_PCT, off
    print(f"estimated peak {memory.peak_bytes}, real {real.peak_bytes}: {off:.3f} % off")
    assert memory.estimate.checked_pct < 1  # the smallest batch: 0.13 % off the line
    assert max(p.bytes for p in memory.timeline) == memory.peak_bytes
    assert [p.bytes for p in memory.timeline] == [p.bytes for p in real.timeline]
    assert memory.peak_at.instruction == real.peak_at.instruction
    estimated = {(r.instruction, r.type): r.bytes for r in memory.at_peak}
    assert estimated == {(r.instruction, r.type): r.bytes for r in real.at_peak}
    assert f"{nbytes(memory.peak_bytes)} at its peak" in error.message
    assert (
        f"at test_memory.py:{line_of('summed down the columns')}, f32[4096,1024]" in error.message
    )
    assert memory.limit_bytes == round(15.75 * (1 << 30))  # as XLA's message gives it
    said = fit_text(memory)  # the Memory tab's: with the method and how close it is
    assert f"it fits ({memory.estimate.said})." in said and "estimated: XLA gave no" in said
    assert "compiled at batch 1,024, 512, 256, scaled to 4,096" in error.message
    # XLA's own figure (its temporaries, in the simulated message) is far from ours: said
    assert memory.estimate.xla_required_bytes == 20 << 30
    temporaries = nbytes(memory.by_kind_at_peak["temporary"])
    assert "XLA's own figure, 20.0 GiB for HLO temporaries, is " in error.message
    assert f"the estimate's {temporaries}: XLA's is the program as it would be" in error.message
    text = summarize_report(report)
    assert "None" not in text and "compiled kernels –" in text


def test_no_estimate_where_no_smaller_batch_compiles_or_another_error_stops_it():
    from viz.memory.estimate import estimate

    tried: list[int] = []

    def refused(target, abstract):
        tried.append(abstract[0].shape[0])
        raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Ran out of memory on HBM")

    def broken(target, abstract):
        raise TypeError("the function needs a batch of 8")

    args = [S((8, 4), F32)]
    assert estimate(None, args, compile_at=refused) is None
    assert tried == [4, 2, 1]  # halved to a single row
    assert estimate(None, args, compile_at=broken) is None
    assert estimate(None, [S((), F32)], compile_at=broken) is None  # no batch to scale


# ---------------------------------------------------------- the truth: measured


MEASURE = """
import gc, json, sys
import jax, jax.numpy as jnp
sys.path.insert(0, {root!r})
sys.path.insert(0, {tests!r})
from test_memory import {name} as fn
from viz import analyze
from viz.spec import concrete_args, parse_spec


def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024


report = analyze(fn, {spec!r}, runs=0)
args = concrete_args(parse_spec({spec!r}, {{}}), 0)
compiled = jax.jit(fn).lower(*args).compile()
jax.block_until_ready(compiled(*args))  # the runtime's one-time allocations first
gc.collect()
with open("/proc/self/clear_refs", "w") as reset:
    reset.write("5")  # the high-water mark back to what is resident now
before = status("VmRSS")
out = jax.block_until_ready(compiled(*args))
grown = status("VmHWM") - before
m = report.memory
print(json.dumps({{"grown": grown, "peak": m.peak_bytes, "arguments": m.argument_bytes}}))
"""


def concatenated_sort(x, y):
    return jnp.sort(jnp.concatenate([x, y], axis=0) ** 2, axis=0)[::2]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux /proc only")
@pytest.mark.parametrize(
    ("name", "spec"),
    [("sort_then_scan", "f32[2048,8192]"), ("concatenated_sort", "f32[4096,2048], f32[4096,2048]")],
)
def test_the_peak_less_the_arguments_is_what_one_call_grows_the_process_by(name, spec):
    script = MEASURE.format(root=str(ROOT), tests=str(ROOT / "tests"), name=name, spec=spec)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=240, check=True
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    needed = found["peak"] - found["arguments"]
    assert found["grown"] > 64 * MiB  # the call allocates: the measurement means something
    assert needed == pytest.approx(found["grown"], rel=0.15), found


# ----------------------------------------------------- before a run: the memory check


FAT = textwrap.dedent(
    """
    import jax.numpy as jnp


    def f(x):
        y = jnp.sort(x * 2.0, axis=1)
        return (jnp.cumsum(y, axis=0) * y).sum(axis=1)
    """
)


@pytest.fixture
def small_worker():
    worker = Worker("cpu", timeout_s=120, memory_limit_bytes=1 << 30)
    yield worker
    worker.close()


@XLA_FIGURES
@pytest.mark.slow  # a worker of its own
def test_a_peak_over_the_workers_limit_is_refused_before_running_naming_its_buffers(
    small_worker,
):
    settings = Settings(code=FAT, function="f", args="f32[8192,16384]")  # 512 MiB in
    reply = small_worker.ask(protocol.Analyze(settings, runs=3))
    error = reply.report.error
    assert error is not None and error.kind == "memory" and error.stage == "run"
    assert error.message.startswith(
        "Running needs 2.0 GiB at its peak: the sort at your code, line 6"
    )
    assert "f32[8192,16384] 512.0 MiB" in error.message
    assert "the pool's memory budget is 1.0 GiB" in error.message
    assert reply.report.timings.runs == 0  # nothing ran
    assert small_worker.alive()
    ok = small_worker.ask(protocol.Analyze(Settings(code=FAT, function="f", args="f32[64,64]")))
    assert ok.report.ok and small_worker.alive()


@XLA_FIGURES
def test_a_run_over_the_limit_says_nothing_ran_and_keeps_the_compile_only_results():
    """The app draws the error card above the result's tabs, the CLI prints it after
    them: the message names no place ('the compile-only results above' read wrong in
    the app)."""
    report = analyze(sort_then_scan, "f32[2048,8192]", runs=3, memory_limit_bytes=128 * MiB)
    error = report.error
    assert error is not None and error.kind == "memory" and error.stage == "run"
    assert error.message.endswith(
        "analyze's memory_limit_bytes is 128.0 MiB. Nothing ran: the compile-only results "
        "are complete."
    ), error.message
    assert report.compiled is not None and report.timings.runs == 0


@XLA_FIGURES
def test_a_compile_only_analysis_says_whether_a_run_would_fit():
    report = analyze(sort_then_scan, "f32[2048,8192]", runs=0, memory_limit_bytes=128 * MiB)
    said = fit_text(report.memory)
    assert report.ok and report.memory.limit_of == "analyze's memory_limit_bytes"
    sort = f"test_memory.py:{line_of('the large sorted')}"
    assert said.startswith(f"Running needs 260.3 MiB at its peak: the sort at {sort}")
    assert said.endswith("analyze's memory_limit_bytes is 128.0 MiB: it does not fit.")


# ------------------------------------------------------------- where a report goes


@XLA_FIGURES
def test_the_cli_line_names_the_peak_and_its_buffers(sorted_report):
    line = peak_line(sorted_report.memory)
    assert re.match(r"peak 260\.3 MiB at \S+ .*: f32\[2048,8192\] 64\.0 MiB", line), line
    assert "(x)" in line or "…" in line
    # two peaks apart: what XLA's counts, lest they read as a contradiction
    assert line.endswith(
        "XLA's peak_memory_in_bytes 64.0 MiB (the arguments and outputs, not the temporaries)"
    )


def test_the_report_json_carries_the_profile_and_reads_back(sorted_report):
    data = json.loads(json.dumps(sorted_report.public_dict()))
    memory = data["memory"]
    for key in ("peak_bytes", "peak_at", "timeline", "at_peak", "by_kind_at_peak"):
        assert memory[key], key
    assert set(memory["peak_at"]) >= {"position", "instruction", "op", "where"}
    assert set(memory["at_peak"][0]) >= {
        *("instruction", "op", "shape", "dtype", "bytes", "kind", "where", "live"),
    }
    assert set(memory["timeline"][0]) >= {"position", "bytes"}
    back = Report.from_dict(data).memory
    assert back.at_peak == sorted_report.memory.at_peak and back.peak_at.position >= 0


def test_the_history_keeps_the_peak(sorted_report):
    from viz.diff import numbers

    kept = numbers(sorted_report)["memory"]
    assert kept["peak_bytes"] == sorted_report.memory.peak_bytes
    assert "timeline" not in kept and "limit_bytes" not in kept


@pytest.mark.slow  # a recorded program of its own
def test_a_recording_keeps_each_compiles_peak_and_the_largest(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text(
        textwrap.dedent(
            """
            import jax, jax.numpy as jnp

            @jax.jit
            def big(x):
                return jnp.sort(x * 2, axis=1).sum()

            @jax.jit
            def small(x):
                return x + 1

            big(jnp.ones((512, 1024)))
            small(jnp.ones(8))
            """
        )
    )
    out = tmp_path / "rec.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "viz",
            "record",
            "--json",
            str(out),
            "--no-history",
            "--",
            str(program),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=240,
    )
    recording = json.loads(out.read_text())
    peaks = {c["function"]: c["peak_bytes"] for c in recording["compiles"]}
    assert peaks["big"] >= 2 * 512 * 1024 * 4  # its argument and its sorted copy
    assert 0 < peaks["small"] < 1024
    assert recording["summary"]["largest_peak"]["function"] == "big"
    assert {f["name"]: f["peak_bytes"] for f in recording["functions"]} == peaks


# -- the device's own count after the runs (#59) -----------------------------------------


class CountingDevice:
    """A device that keeps a count of its memory, as an accelerator does: the CPU's
    `memory_stats()` is None."""

    def __init__(self, device):
        self.device = device

    def __getattr__(self, name):
        return getattr(self.device, name)

    def memory_stats(self):
        return {"peak_bytes_in_use": 3 << 20, "bytes_in_use": 1 << 20, "bytes_limit": 16 << 30}


def test_the_devices_own_count_after_the_runs_is_shown_beside_xlas(monkeypatch):
    real = viz.stages.resolve_device
    monkeypatch.setattr(viz.stages, "resolve_device", lambda d: CountingDevice(real(d)))
    report = analyze(scaled, "f32[64,64], f32[64,64]", runs=2)
    assert report.memory.device.to_dict() == {
        "peak_bytes_in_use": 3 << 20, "bytes_in_use": 1 << 20, "bytes_limit": 16 << 30,
    }  # fmt: skip
    said = device_memory_text(report.memory)
    assert said.startswith("device memory after the runs (memory_stats): peak 3.0 MiB in use")
    assert "1.0 MiB now of 16.0 GiB" in said
    assert f"XLA's peak ({nbytes(report.memory.xla_peak_bytes)}) is the compile's plan" in said
    assert said in summarize_report(report)
    assert Report.from_dict(json.loads(json.dumps(report.to_dict()))).memory.device is not None


def test_the_cpu_keeps_no_count_so_none_is_shown():
    report = analyze(scaled, "f32[64,64], f32[64,64]", runs=2)
    assert report.memory.device is None and device_memory_text(report.memory) is None
    assert analyze(scaled, "f32[64,64], f32[64,64]", runs=0).memory.device is None


def test_a_device_whose_count_fails_still_gives_its_runs(monkeypatch):
    class Failing(CountingDevice):
        def memory_stats(self):
            raise RuntimeError("UNIMPLEMENTED: memory_stats")

    real = viz.stages.resolve_device
    monkeypatch.setattr(viz.stages, "resolve_device", lambda d: Failing(real(d)))
    report = analyze(scaled, "f32[64,64], f32[64,64]", runs=2)
    assert report.memory.device is None and report.run is not None
