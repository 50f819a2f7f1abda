"""The memory profile as people read it: the CLI's line, the Memory tab's sentences
and table rows, the same words in the app, the notebook, the diff and the HTML
export. They only format a report's `memory`: every number comes from it. No jax.
"""

from __future__ import annotations

from typing import Any

from viz.memory.lines import LAYOUT_COPY
from viz.memory.model import Memory, PeakBuffer, Residual
from viz.memory.padding import times_its_size
from viz.memory.profile import OTHER, MemoryProfile
from viz.memory.xla import PARAMETER
from viz.units import nbytes
from viz.where import split_where

ON_LINE = 3  # buffers the one-line summary names
FILLERS = 3  # the buffers a sentence about the peak names

KIND_LABELS = {
    "parameter": "arguments",
    "output": "outputs",
    "temporary": "temporaries",
    "constant": "constants",
}


def where_text(where: str) -> str:
    """A line as the user knows its file: `model.py:12` (a path's last part), `your
    code, line 12`, `In [3], line 1`; '' where XLA names none. The user's own file is
    named like any other: a message read on its own must say which file."""
    shown, line = split_where(where)
    if line is None or "/" not in shown:
        return where
    return f"{shown.rsplit('/', 1)[-1]}:{line}"


def peak_line(memory: Memory) -> str | None:
    """`peak 217 MiB at sort (line 12): f32[2048,8192] 64 MiB, …` (None: no profile)."""
    if memory.peak_bytes is None or memory.peak_at is None:
        return None
    at = memory.peak_at
    line = where_text(at.where)
    head = f"peak {nbytes(memory.peak_bytes)} at {at.instruction}" + (f" ({line})" if line else "")
    rows = [r for r in memory.at_peak if r.instruction != OTHER][:ON_LINE]
    buffers = [f"{r.type} {nbytes(r.bytes)}{_named(r)}" for r in rows]
    more = ", …" if len(memory.at_peak) > len(rows) else ""
    xla = f" · XLA's peak_memory_in_bytes {nbytes(memory.xla_peak_bytes)}"
    return f"{head}: {', '.join(buffers)}{more}{xla if memory.xla_peak_bytes else ''}"


def _named(row: PeakBuffer) -> str:
    """` (params['w'])` for an argument, ` (line 12)` for what a line made, else ''."""
    name = row.argument or where_text(row.where)
    return f" ({name})" if name else ""


def fit_text(memory: Memory) -> str | None:
    """Whether a run fits, in one sentence: `Running needs 98.5 GiB at its peak: the
    sort at line 12, f32[…] 32 GiB, …; the worker's limit is 11.8 GiB.`"""
    if memory.peak_bytes is None:
        return None
    needs = f"Running needs {nbytes(memory.peak_bytes)} at its peak"
    if memory.at_peak:
        needs += f": {peak_fillers(memory)}"
    how = f" ({memory.estimate.said})" if memory.estimate else ""
    if memory.limit_bytes is None:
        return f"{needs}{how}."
    verdict = "it does not fit" if memory.peak_bytes > memory.limit_bytes else "it fits"
    limit = f"{memory.limit_of or 'the limit'} is {nbytes(memory.limit_bytes)}"
    return f"{needs}; {limit}: {verdict}{how}."


def buffer_rows(buffers: list[PeakBuffer]) -> list[dict[str, Any]]:
    """The buffers live at the peak, one table row each (largest first, as given; sizes
    in binary units, as every size jitscope shows)."""
    return [
        {
            "bytes": nbytes(r.bytes),
            "type": r.type or f"{r.buffers} buffers",
            "kind": r.kind,
            "made by": describe_made_by(r),
            "line": line_text(r),
            "live": f"{r.live[0]}–{r.live[1]}" if r.live else "",
            "recomputed": "yes" if r.recomputed else "",
        }
        for r in buffers
    ]


def line_text(row: PeakBuffer) -> str:
    """The buffer's line, and how it was found where XLA gave none: `memcase.py:4 (a
    copy XLA inserted for layout, of sort.0)`."""
    line = where_text(row.where)
    if not row.note:
        return line
    return f"{line} ({row.note})" if line else row.note


def describe_made_by(row: PeakBuffer) -> str:
    """The instruction (the kernel, for a fusion) that defines the buffer."""
    if row.instruction == OTHER:
        return f"{row.buffers} smaller buffers"
    if row.argument:
        return f"argument {row.argument}"
    index = f" {{{','.join(map(str, row.index))}}}" if row.index else ""
    return f"{row.instruction}{index} ({row.op})" if row.op else row.instruction


def residual_rows(residuals: list[Residual]) -> list[dict[str, Any]]:
    """`print_saved_residuals`' lines as rows: type, bytes, what saved it, the line."""
    return [
        {
            "type": f"{r.dtype}[{','.join(map(str, r.shape))}]",
            "bytes": nbytes(r.bytes),
            "saved": r.source,
            "line": where_text(r.where),
        }
        for r in residuals
    ]


def kinds_text(memory: Memory) -> str:
    """`temporaries 196 MiB · arguments 64 MiB` at the peak, largest first."""
    found = sorted(memory.by_kind_at_peak.items(), key=lambda kv: -kv[1])
    return " · ".join(f"{KIND_LABELS.get(k, k)} {nbytes(v)}" for k, v in found if v)


def peak_fillers(profile: MemoryProfile | Memory) -> str:
    """The largest buffers at the peak, in words: `the sort at line 12,
    f32[1048576,8192] 32 GiB, the argument x, f32[…] 4 GiB, …`."""
    rows = [r for r in profile.at_peak if r.instruction != OTHER]
    said = [describe(r) for r in rows[:FILLERS]]
    if len(profile.at_peak) > len(said):
        said.append("…")
    return ", ".join(said)


def describe(row: PeakBuffer) -> str:
    """One buffer in words: what made it, where, its type and bytes."""
    if row.instruction == OTHER:
        return f"{row.buffers} smaller buffers {nbytes(row.bytes)}"
    if row.kind == PARAMETER:
        what = f"the argument {row.argument or row.instruction}"
    elif row.instruction.startswith(row.op):
        what = f"the {row.op}"
    else:
        what = f"the {row.op} {row.instruction}"
    at = f" at {where_text(row.where)}" if row.where else ""
    if row.note and (not row.where or row.note.startswith(LAYOUT_COPY)):
        at += f" ({row.note})"  # the line is the copied buffer's: say so
    return f"{what}{at}, {row.type} {nbytes(row.bytes)}"


def padding_text(memory: Memory) -> str | None:
    """`padding: 1.2 GiB of the 3.0 GiB peak, most from f32[65536,3] at model.py:7 (43×
    its size): put the long axis last`; None where the layouts pad nothing (CPU)."""
    rows = [r for r in memory.at_peak if r.padded_bytes > r.logical_bytes]
    if memory.peak_bytes is None or not rows:
        return None
    padding = sum(_padding(r) for r in rows)
    worst = max(rows, key=_padding)
    named = worst.type or f"{worst.buffers} smaller buffers"
    at = f" at {where_text(worst.where)}" if worst.where else ""
    times = times_its_size(worst.padded_bytes, worst.logical_bytes)
    return (
        f"padding: {nbytes(padding)} of the {nbytes(memory.peak_bytes)} peak, most from "
        f"{named}{at} ({times} its size): put the long axis last"
    )


def _padding(row: PeakBuffer) -> int:
    """The padding of the bytes the row holds at the peak (all of its buffer's, but
    for a slot it shares)."""
    share = row.bytes / row.padded_bytes if row.padded_bytes else 0
    return round((row.padded_bytes - row.logical_bytes) * min(share, 1.0))


def spaces_text(memory: Memory) -> str | None:
    """The memory spaces other than the device's memory, apart from the peak: `also
    in other memory spaces, not in the peak: 4.0 MiB in space 1 (VMEM, on a TPU)`."""
    if not memory.other_spaces:
        return None
    said = [
        f"{nbytes(size)} in space {space}{SPACE_NAMES.get(space, '')}"
        for space, size in sorted(memory.other_spaces.items())
    ]
    return "also in other memory spaces, not in the peak: " + ", ".join(said)


def device_memory_text(memory: Memory) -> str | None:
    """The device's own count after the runs beside XLA's compile-time figure, and what
    each counts; None where the device keeps no count (the CPU)."""
    device = memory.device
    if device is None:
        return None
    limit = f" of {nbytes(device.bytes_limit)}" if device.bytes_limit else ""
    xla = memory.xla_peak_bytes if memory.xla_peak_bytes is not None else memory.peak_bytes
    plan = f" ({nbytes(xla)})" if xla is not None else ""
    return (
        f"device memory after the runs (memory_stats): peak "
        f"{nbytes(device.peak_bytes_in_use)} in use, {nbytes(device.bytes_in_use)} now"
        f"{limit}. It counts every buffer the runtime held in this process since it began "
        f"(arguments, outputs, temporaries, other programs'); XLA's peak{plan} is the "
        "compile's plan for this one program"
    )


SPACE_NAMES = {"1": " (VMEM, on a TPU)", "2": " (the chip's own memory, on a TPU)"}
