"""The memory profile on a real TPU v5e's recordings (tests/fixtures/tpu_v5e/, issue #59):
XLA's dumps read through the reader a TPU compile uses (`hlo_proto_profile`), checked
against XLA's own figures from the same chip; the padding of its tiled layouts; its
out-of-memory refusal; and the words the CLI and the Memory tab say about them. No
accelerator: the chip's files are read back on CPU.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from live_range_dump import read_live_ranges

from viz.cli import summarize_report
from viz.errors import limit_in, out_of_memory, required_in
from viz.memory.display import (
    buffer_rows,
    fit_text,
    padding_reason,
    padding_text,
    peak_line,
    spaces_text,
    two_peaks_text,
    xla_disagrees_text,
    xla_peak_text,
)
from viz.memory.live import flatten, live_ranges
from viz.memory.model import Memory, PeakBuffer
from viz.memory.padding import layout_text, logical_bytes, padded_bytes, parse_array
from viz.memory.profile import MemoryProfile, hlo_proto_profile
from viz.memory.schema import parse
from viz.memory.xla import read_assignment, read_module
from viz.platforms.tpu import XLA_PEAK_SPACE
from viz.report import Report
from viz.units import nbytes

CHIP = Path(__file__).resolve().parent / "fixtures" / "tpu_v5e"
GiB = 1 << 30


DUMPED = ["sort_cumsum", "narrow", "pallas_forward", "transformer_24"]


def dumped(program: str, suffix: str) -> bytes:
    """A file of `program`'s dump on the chip (gzipped where large: the transformer's)."""
    (path,) = (CHIP / program / "dump").glob(f"*{suffix}*")
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def dumped_profile(program: str) -> MemoryProfile:
    """The profile of `program` from its dump on the chip, as a TPU compile reads it."""
    return hlo_proto_profile(dumped(program, ".after_optimizations.hlo.pb"), XLA_PEAK_SPACE)


def xla_memory(program: str) -> dict:
    """XLA's `memory_analysis()` on the chip, as recorded beside the dump."""
    return json.loads((CHIP / program / "memory.json").read_text())["memory_analysis"]


def usage_report_total(program: str, space: str) -> int:
    """The bytes XLA's own memory-usage report gives a memory space (`default`: HBM)."""
    (path,) = (CHIP / program / "dump").glob("*memory-usage-report.txt")
    found = re.search(rf"Memory Space: {space} \(color=\d+\)\nTotal bytes: (\d+)", path.read_text())
    assert found, f"no {space} space in {path.name}"
    return int(found.group(1))


def chip_report(name: str) -> Report:
    return Report.from_dict(json.loads((CHIP / "reports" / f"{name}.json").read_text()))


# the chip's reports of the programs whose dump is recorded, by report
REPORTED = {"peak": "sort_cumsum", "narrow": "narrow", "pallas": "pallas_forward"}


def with_parts(name: str) -> Report:
    """The chip's report `name`, recorded before jitscope counted XLA's peak as XLA
    does, given the parts its program's dump on the chip makes (the same reader)."""
    report = chip_report(name)
    parts = dumped_profile(REPORTED[name]).xla_peak_parts
    return replace(report, memory=replace(report.memory, xla_peak_parts=parts))


# ------------------------------------------------------------ the HBM peak


def test_the_sort_and_cumsum_peak_is_within_5_percent_of_xlas_on_the_chip():
    profile = dumped_profile("sort_cumsum")
    xla = xla_memory("sort_cumsum")["xla_peak_bytes"]  # 202,443,264 on the chip
    off = abs(profile.peak_bytes - xla) / xla
    assert off <= 0.05, (profile.peak_bytes, xla)
    largest = [(r.instruction, r.type) for r in profile.at_peak[:3]]
    assert largest == [
        ("sort.6", "f32[2048,8192]"),
        ("sort.6", "i32[2048,8192]"),
        ("x.1", "f32[2048,8192]"),
    ]


@pytest.mark.parametrize("program", ["sort_cumsum", "narrow", "pallas_forward"])
def test_only_hbm_is_in_the_peak_vmem_and_the_other_spaces_apart(program):
    """The peak holds the buffers of space 0 alone: XLA's own report of HBM ('default')
    holds the bytes of every buffer live at it; VMEM's are counted apart."""
    profile = dumped_profile(program)
    hbm = usage_report_total(program, "default")
    assert profile.peak_bytes <= hbm
    vmem = usage_report_total(program, "vmem")
    assert int(profile.other_spaces.get("1", 0)) == vmem
    if vmem:  # counted in HBM, the peak would be off XLA's by it
        assert profile.peak_bytes + vmem > hbm


def test_the_pallas_kernels_vmem_output_is_not_in_the_hbm_peak():
    """The Pallas kernel's output lives in VMEM (`S(1)`): the HBM peak is the arguments
    and the result, 1.25 MiB, as XLA's report of HBM says."""
    profile = dumped_profile("pallas_forward")
    assert profile.other_spaces == {"1": 512 * 1024}
    assert profile.peak_bytes == usage_report_total("pallas_forward", "default") == 1310720
    assert "forward.1" not in {r.instruction for r in profile.at_peak}


# ------------------------------------------------ XLA's own peak, as XLA makes it


@pytest.mark.parametrize("program", DUMPED)
def test_each_buffers_live_range_on_the_chip_is_xlas_own(program):
    """The schedule flattened and every buffer's range, VMEM's included, equal XLA's
    `*-live-range.txt` (the transformer's async slices and prefetches to VMEM too)."""
    hlo = parse("HloProto", dumped(program, ".after_optimizations.hlo.pb"))
    module, assignment = read_module(hlo.module), read_assignment(hlo.assignment)
    schedule = flatten(module)
    ours = {}
    for bid, (start, end) in live_ranges(module, assignment, schedule).items():
        buffer = assignment.buffers[bid]
        index = "{" + ",".join(map(str, buffer.index)) + "}"
        ours[(module.instructions[buffer.instruction].name, index)] = (start, end)
    sequence, theirs = read_live_ranges(dumped(program, "-live-range.txt").decode())
    assert [module.instructions[i].name for i in schedule.order] == sequence
    assert ours == theirs


@pytest.mark.parametrize("program", DUMPED)
def test_xlas_peak_is_hbms_arguments_outputs_and_constants_plus_vmem_at_its_peak(program):
    """On every program recorded on the chip, XLA's peak_memory_in_bytes is, to the
    byte, HBM's arguments, outputs and constants (held the whole run) plus VMEM's bytes
    live at VMEM's own peak: HBM's temporaries are not in it."""
    profile = dumped_profile(program)
    xla = xla_memory(program)
    parts = profile.xla_peak_parts
    assert parts.bytes == parts.held_bytes + parts.space_bytes == xla["xla_peak_bytes"]
    assert parts.space == "1"
    constants = parts.held_bytes - xla["argument_bytes"] - xla["output_bytes"]
    assert 0 <= constants <= 4096  # a few scalars' 512-byte tiles
    assert parts.space_bytes <= profile.other_spaces["1"]
    if parts.space_bytes:  # the HBM peak alone falls short of XLA's
        assert profile.peak_bytes < xla["xla_peak_bytes"]
        assert profile.schedule[parts.position] == parts.instruction


def test_the_rule_on_the_chips_programs_in_numbers():
    """The figures the rule was found on (XLA's, from the chip's memory.json)."""
    found = {p: dumped_profile(p).xla_peak_parts for p in DUMPED}
    assert {p: (f.held_bytes, f.space_bytes, f.instruction) for p, f in found.items()} == {
        "sort_cumsum": (134_220_288, 68_222_976, "reduce-window.1"),
        "narrow": (2_097_152, 0, ""),
        "pallas_forward": (1_310_720, 524_288, "forward.1"),
        "transformer_24": (76_245_504, 3_680_256, "fusion.2035"),
    }
    sort = dumped_profile("sort_cumsum")
    # at HBM's peak (the sort) VMEM holds the sort's 64 MiB input: HBM + VMEM there is
    # 256 MiB, not XLA's 193.1 MiB; XLA counts VMEM at its own peak, HBM's temporaries not
    assert sort.peak_bytes == 201_327_616 and sort.peak_at.instruction == "sort.6"


def test_the_cli_and_the_tab_say_what_xlas_peak_counts():
    profile = dumped_profile("sort_cumsum")
    memory = Memory(
        peak_bytes=profile.peak_bytes,
        xla_peak_bytes=xla_memory("sort_cumsum")["xla_peak_bytes"],
        xla_peak_parts=profile.xla_peak_parts,
    )
    assert xla_peak_text(memory, "tpu") == (
        "XLA's peak_memory_in_bytes 193.1 MiB = 128.0 MiB HBM (arguments, outputs and "
        "constants, held the whole run) + 65.1 MiB VMEM at its own peak (step 9, "
        "reduce-window.1); HBM's temporaries are not in it"
    )
    assert two_peaks_text(memory, "tpu") == (
        "Two peaks, two counts: **peak** is what is live in HBM, where memory runs out, at "
        f"its fullest step; {xla_peak_text(memory, 'tpu')}. They differ by 1.1 MiB."
    )
    assert xla_peak_text(replace(memory, xla_peak_parts=None), "tpu") is None
    narrow = dumped_profile("narrow")
    assert xla_peak_text(Memory(xla_peak_parts=narrow.xla_peak_parts), "tpu") == (
        "XLA's peak_memory_in_bytes 2.0 MiB = 2.0 MiB HBM (arguments, outputs and constants, "
        "held the whole run), nothing in VMEM; HBM's temporaries are not in it"
    )
    moved = replace(memory, xla_peak_bytes=memory.xla_peak_bytes + 512)
    assert xla_peak_text(moved, "tpu").endswith(
        "(those parts make 202,443,264 B, XLA says 202,443,776 B)"
    )
    assert xla_peak_text(memory, "tpu") in summarize_report(with_parts("peak")).splitlines()


# ------------------------------------------------------------------ padding


def test_the_narrow_arrays_padding_is_read_from_its_real_layout():
    """XLA laid f32[65536,3] out `{0,1:T(4,128)}`: the long axis along the 128 lanes,
    the 3 padded to 4 rows, 1.3× its size, not the 43× of the textbook layout."""
    profile = dumped_profile("narrow")
    narrow = [r for r in profile.at_peak if r.type == "f32[65536,3]"]
    assert len(narrow) == 2  # the argument and the result
    for row in narrow:
        assert (row.logical_bytes, row.padded_bytes) == (786_432, 1_048_576)
        assert row.layout == "{0,1:T(4,128)}"
    memory = Memory(peak_bytes=profile.peak_bytes, at_peak=profile.at_peak)
    assert padding_text(memory) == (
        "padding: 512.0 KiB of the 2.0 MiB peak, most from f32[65536,3] (1.3× its size, laid "
        "out {0,1:T(4,128)}): "
        "axis 0 lies along the 128 lanes and axis 1's 3 is padded to 4 rows of its 4×128 "
        "tiles (small: nothing to change)"
    )
    assert {r["padding"] for r in buffer_rows(profile.at_peak)} == {"+256.0 KiB (1.3×)"}


def test_a_lane_padded_layout_from_the_chip_asks_for_the_long_axis_last():
    """The 24-layer transformer's attention heads, f32[2,4,128,64] in 8×128 tiles on the
    chip: the head dimension, 64, fills half of the 128 lanes."""
    dtype, dims, layout = parse_array("f32[2,4,128,64]{3,2,1,0:T(8,128)S(1)}")
    row = PeakBuffer(
        instruction="fusion.7",
        op="fusion",
        shape=list(dims),
        dtype=dtype,
        bytes=padded_bytes(dtype, dims, layout),
        kind="temporary",
        logical_bytes=logical_bytes(dtype, dims),
        padded_bytes=padded_bytes(dtype, dims, layout),
        layout=layout_text(layout),
    )
    assert row.padded_bytes == 2 * row.logical_bytes
    assert padding_reason(row) == (
        "axis 3's 64 fills 64 of the 128 lanes of its 8×128 tiles: put the long axis last, "
        "or make it a multiple of 128"
    )


def test_the_sorts_scalar_tiles_are_too_small_to_name():
    """The sort's scalars take a 128-element tile each (508 B of padding on a 192 MiB
    peak): not worth a line."""
    profile = dumped_profile("sort_cumsum")
    assert any(r.padded_bytes > r.logical_bytes for r in profile.at_peak)
    assert padding_text(Memory(peak_bytes=profile.peak_bytes, at_peak=profile.at_peak)) is None


# ------------------------------------------------------ the memory spaces' names


def test_the_chips_other_memory_spaces_are_named_by_the_platform():
    peak = chip_report("peak")
    assert peak.memory.other_spaces == {"1": 68222976, "6": 10240}
    assert spaces_text(peak.memory, peak.device) == (
        "also in other memory spaces, not in the peak: 65.1 MiB in VMEM, the core's on-chip vector "
        "memory; 10.0 KiB in memory space 6"
    )
    narrow = chip_report("narrow")  # VMEM's allocation there holds nothing
    assert narrow.memory.other_spaces == {"1": 0}
    assert spaces_text(narrow.memory, narrow.device) is None


# ------------------------------------------------------------ out of memory


def test_xlas_refusal_on_the_chip_gives_its_figure_and_the_limit():
    detail = chip_report("oom").error.detail
    assert out_of_memory(detail)
    assert required_in(detail) == (round(30.52 * GiB), "HLO temporaries")
    assert limit_in(detail) == round(15.75 * GiB)
    assert required_in(
        "RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. Used 20.00G of 15.75G hbm."
    ) == (20 * GiB, "")
    assert required_in("RESOURCE_EXHAUSTED: Ran out of memory on HBM") is None


def test_where_xlas_figure_and_the_estimate_disagree_it_is_said_which_to_trust():
    """On the chip, XLA's temporaries (30.52G) are twice the estimate's (15.3 GiB)."""
    report = chip_report("oom")
    kept = report.memory.estimate
    assert (kept.xla_required_bytes, kept.xla_required_for) == (32_770_600_468, "HLO temporaries")
    older = replace(kept, xla_required_bytes=None, xla_required_for="")  # before it was kept
    memory = replace(report.memory, estimate=older)
    assert xla_disagrees_text(memory) is None
    from_refusal = xla_disagrees_text(memory, report.error.detail)  # read from XLA's text
    figure, counts = required_in(report.error.detail)
    how = replace(memory.estimate, xla_required_bytes=figure, xla_required_for=counts)
    memory = replace(memory, estimate=how)
    temporaries = nbytes(memory.by_kind_at_peak["temporary"])
    said = xla_disagrees_text(memory)
    assert said.startswith(
        f"XLA's own figure, 30.5 GiB for HLO temporaries, is 2.0× the estimate's {temporaries}"
    )
    assert "trust it for whether it fits" in said and "which buffers and lines" in said
    assert from_refusal == said
    assert fit_text(memory).endswith(said)
    near = replace(how, xla_required_bytes=memory.by_kind_at_peak["temporary"] * 105 // 100)
    assert xla_disagrees_text(replace(memory, estimate=near)) is None  # within 10 %


def test_the_cli_reads_the_chips_out_of_memory_report_without_none():
    report = chip_report("oom")
    text = summarize_report(report)
    assert "None" not in text
    assert "compiled kernels –" in text and "run median – (eager –)" in text
    assert peak_line(report.memory).startswith("estimated peak 22.9 GiB at fusion")
