"""The memory profile as people read it: the CLI's line, the Memory tab's sentences
and table rows, the same words in the app, the notebook, the diff and the HTML
export. They only format a report's `memory`: every number comes from it. No jax.
"""

from __future__ import annotations

from typing import Any

from viz.errors import required_in
from viz.ir.model import Graph
from viz.memory.lines import LAYOUT_COPY
from viz.memory.model import Memory, PeakBuffer, Residual
from viz.memory.padding import padded_dims, padding_ratio, parse_layout, times_its_size
from viz.memory.profile import OTHER, MemoryProfile
from viz.memory.xla import PARAMETER
from viz.platforms import memory_space_name
from viz.units import listed, natural, nbytes
from viz.where import YOUR_CODE, place, split_where

ON_LINE = 3  # buffers the one-line summary names
FILLERS = 3  # the buffers a sentence about the peak names
# a layout that makes a buffer this many times larger is worth changing the shape for
WORTH_CHANGING = 1.5
NEGLIGIBLE = 0.01  # padding under this share of the peak goes unsaid
DISAGREE = 0.1  # XLA's figure and the estimate further apart than this share: say so

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
    peak = "estimated peak" if memory.estimate else "peak"
    head = f"{peak} {nbytes(memory.peak_bytes)} at {at.instruction}"
    head += f" ({line})" if line else ""
    rows = [r for r in memory.at_peak if r.instruction != OTHER][:ON_LINE]
    buffers = [f"{r.type} {nbytes(r.bytes)}{_named(r)}" for r in rows]
    more = ", …" if len(memory.at_peak) > len(rows) else ""
    return f"{head}: {', '.join(buffers)}{more}{_xla_peak_words(memory)}"


def _xla_peak_words(memory: Memory) -> str:
    """' · XLA's peak_memory_in_bytes 1.3 MiB (the arguments and outputs, not the
    temporaries)': what XLA's figure counts where it is not the peak beside it, lest
    two peaks read as a contradiction ('' without XLA's figure)."""
    xla = memory.xla_peak_bytes
    if not xla:
        return ""
    differs = xla != memory.peak_bytes and not memory.xla_peak_parts
    what = f" ({xla_counts(memory, sized=False)})" if differs else ""
    return f" · XLA's peak_memory_in_bytes {nbytes(xla)}{what}"


def _named(row: PeakBuffer) -> str:
    """` (params['w'])` for an argument, ` (line 12)` for what a line made, else ''."""
    name = row.argument or where_text(row.where)
    return f" ({name})" if name else ""


def fit_text(memory: Memory, method: bool = True) -> str | None:
    """Whether a run fits, in one sentence: `Running needs 98.5 GiB at its peak: the
    sort at line 12, f32[…] 32 GiB, …; the pool's memory budget is 11.8 GiB.`"""
    if memory.peak_bytes is None:
        return None
    needs = f"Running needs {nbytes(memory.peak_bytes)} at its peak"
    if memory.at_peak:
        needs += f": {peak_fillers(memory)}"
    how = f" ({memory.estimate.said})" if memory.estimate and method else ""
    versus = xla_disagrees_text(memory) if method else None
    versus = f" {versus}" if versus else ""
    if memory.limit_bytes is None:
        return f"{needs}{how}.{versus}"
    verdict = "it does not fit" if memory.peak_bytes > memory.limit_bytes else "it fits"
    limit = f"{memory.limit_of or 'the limit'} is {nbytes(memory.limit_bytes)}"
    return f"{needs}; {limit}: {verdict}{how}.{versus}"


def xla_disagrees_text(memory: Memory, refusal: str = "") -> str | None:
    """Where XLA's own figure in its out-of-memory refusal and the estimate differ by
    more than `DISAGREE`, which to trust for what; None where they agree or XLA gives
    none. XLA's figure is the estimate's `xla_required_bytes`, else read from `refusal`
    (XLA's message, for a report kept before jitscope kept it). It counts
    `xla_required_for` (its temporaries, say): so does the compared share of the
    estimate."""
    how = memory.estimate
    if how is None or memory.peak_bytes is None:
        return None
    xla = (how.xla_required_bytes, how.xla_required_for) if how.xla_required_bytes else None
    xla = xla or required_in(refusal)
    if xla is None:
        return None
    figure, counts = xla
    ours = memory.by_kind_at_peak.get("temporary", 0) if "temporar" in counts else memory.peak_bytes
    if not ours or abs(figure / ours - 1) <= DISAGREE:
        return None
    what = f"for {counts}" if counts else "in all"
    ratio = figure / ours
    times = f"{ratio:.0f}×" if ratio >= 10 else f"{ratio:.1f}×"
    than = f"{times} the estimate's" if ratio > 1 else f"{ratio:.0%} of the estimate's"
    return (
        f"XLA's own figure, {nbytes(figure)} {what}, is {than} "
        f"{nbytes(ours)}: XLA's is the program as it would be laid out at full size, so "
        "trust it for whether it fits; the estimate comes from smaller compiles, so read "
        "it for which buffers and lines fill the memory."
    )


def buffer_rows(buffers: list[PeakBuffer]) -> list[dict[str, Any]]:
    """The buffers live at the peak, one table row each (largest first, as given; sizes
    in binary units, as every size jitscope shows); a `padding` column where a layout
    pads one (a TPU's tiles)."""
    rows = [
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
    held = sum(r.bytes for r in buffers)
    if sum(_padding(r) for r in buffers) >= NEGLIGIBLE * held > 0:
        for row, buffer in zip(rows, buffers, strict=True):
            row["padding"] = padding_cell(buffer)
    return rows


def padding_cell(row: PeakBuffer) -> str:
    """`+256.0 KiB (1.3×)`: what its layout adds ('' nothing), where the padding is
    worth a column (`NEGLIGIBLE` of the buffers' bytes or more)."""
    ratio = padding_ratio(row.padded_bytes, row.logical_bytes)
    return f"+{nbytes(_padding(row))} ({ratio})" if ratio else ""


def line_text(row: PeakBuffer) -> str:
    """The buffer's line, and how it was found where XLA gave none: `memcase.py:4 (a
    copy XLA inserted for layout, of sort.0)`; the app's own code's as `line 41`, which
    a table's narrow column shows whole."""
    line = place(row.where, YOUR_CODE)
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
    its size): axis 1's 3 fills 3 of the 128 lanes of its 8×128 tiles: put the long axis
    last, or make it a multiple of 128`, the advice from the dimension its layout pads;
    None where the layouts pad nothing (CPU) or under `NEGLIGIBLE` of the peak (a
    scalar's tile)."""
    rows = [r for r in memory.at_peak if r.padded_bytes > r.logical_bytes]
    if memory.peak_bytes is None or not rows:
        return None
    padding = sum(_padding(r) for r in rows)
    if padding < NEGLIGIBLE * memory.peak_bytes:
        return None
    worst = max(rows, key=_padding)
    named = worst.type or f"{worst.buffers} smaller buffers"
    at = f" at {where_text(worst.where)}" if worst.where else ""
    times = times_its_size(worst.padded_bytes, worst.logical_bytes)
    laid = f", laid out {worst.layout}" if worst.layout else ""
    why = padding_reason(worst)
    return (
        f"padding: {nbytes(padding)} of the {nbytes(memory.peak_bytes)} peak, most from "
        f"{named}{at} ({times}{laid})" + (f": {why}" if why else "")
    )


def padding_reason(row: PeakBuffer) -> str:
    """Which of the buffer's axes its tiles pad, and what would lower it where the
    padding is worth a change (`WORTH_CHANGING`); '' where its layout says nothing (a
    scalar in a whole tile, an `other` row)."""
    if not row.layout:
        return ""
    layout = parse_layout(row.layout)
    found = padded_dims(row.shape, layout)
    if not found:
        return ""
    worth = row.padded_bytes >= WORTH_CHANGING * row.logical_bytes
    first = found[0]
    shape = "×".join(map(str, first.tile))
    tiles = f"its {shape} tiles" if len(first.tile) > 1 else f"its {shape}-element tiles"
    if first.lanes:
        lanes = first.tile[-1]
        size = first.size
        said = f"axis {first.axis}'s {size} fills {size} of the {lanes} lanes of {tiles}"
        fix = f"make it a multiple of {lanes}"
        if len(row.shape) > 1:
            fix = f"put the long axis last, or {fix}"
    else:
        along = layout.minor_to_major[0] if layout.minor_to_major else len(row.shape) - 1
        said = (
            f"axis {along} lies along the {first.tile[-1]} lanes and axis {first.axis}'s "
            f"{first.size} is padded to {first.padded} rows of {tiles}"
        )
        fix = f"make axis {first.axis} a multiple of {first.tile[-2]}, or merge it into another"
    return f"{said}: {fix}" if worth else f"{said} (small: nothing to change)"


def _padding(row: PeakBuffer) -> int:
    """The padding of the bytes the row holds at the peak (all of its buffer's, but
    for a slot it shares)."""
    share = row.bytes / row.padded_bytes if row.padded_bytes else 0
    return round((row.padded_bytes - row.logical_bytes) * min(share, 1.0))


def spaces_text(memory: Memory, device: str) -> str | None:
    """The memory spaces other than the device's memory, apart from the peak, by the
    names `device`'s platform gives them: `also in other memory spaces, not in the
    peak: 65.1 MiB in VMEM, the core's vector memory; 10.0 KiB in memory space 6`."""
    said = [
        f"{nbytes(size)} in {memory_space_name(device, space)}"
        for space, size in sorted(memory.other_spaces.items(), key=lambda kv: natural(kv[0]))
        if size
    ]
    return "also in other memory spaces, not in the peak: " + "; ".join(said) if said else None


def xla_peak_text(memory: Memory, device: str) -> str | None:
    """What XLA's own peak counts where the platform makes it of parts (a TPU's): `XLA's
    peak_memory_in_bytes 193.1 MiB = 128.0 MiB HBM (arguments, outputs and constants,
    held the whole run) + 65.1 MiB VMEM at its own peak (step 9, reduce-window.1); HBM's
    temporaries are not in it`. None where the report has no parts (the CPU, a GPU)."""
    parts = memory.xla_peak_parts
    if parts is None:
        return None
    main, other = (_short_name(device, space) for space in ("0", parts.space))
    xla = memory.xla_peak_bytes
    at = f" (step {parts.position}, {parts.instruction})" if parts.instruction else ""
    space = (
        f" + {nbytes(parts.space_bytes)} {other} at its own peak{at}"
        if parts.space_bytes
        else f", nothing in {other}"
    )
    said = (
        f"XLA's peak_memory_in_bytes {nbytes(parts.bytes if xla is None else xla)} = "
        f"{nbytes(parts.held_bytes)} {main} (arguments, outputs and constants, held the whole "
        f"run){space}; {main}'s temporaries are not in it"
    )
    if xla is not None and xla != parts.bytes:  # a platform whose rule moved: say so
        said += f" (those parts make {parts.bytes:,} B, XLA says {xla:,} B)"
    return said


def _short_name(device: str, space: str) -> str:
    """A memory space's name alone (`VMEM`), as `device`'s platform gives it."""
    return memory_space_name(device, space).split(",")[0]


def two_peaks_text(memory: Memory, device: str) -> str:
    """Why the peak and XLA's differ, in words: what each counts (one fact, one number);
    '' where they agree or one is missing."""
    peak, xla = memory.peak_bytes, memory.xla_peak_bytes
    if peak is None or xla is None or peak == xla:
        return ""
    parts = xla_peak_text(memory, device)
    if parts is not None:
        main = _short_name(device, "0")
        return (
            f"Two peaks, two counts: **peak** is what is live in {main}, where memory runs "
            f"out, at its fullest step; {parts}. They differ by {nbytes(abs(peak - xla))}."
        )
    return (
        f"Two peaks, two counts: **peak** is what is live at the fullest step of the "
        f"schedule; XLA's **peak_memory_in_bytes** counts {xla_counts(memory)}. They "
        f"differ by {nbytes(abs(peak - xla))}."
    )


def xla_counts(memory: Memory, sized: bool = True) -> str:
    """What XLA's peak_memory_in_bytes counts where the platform makes it of no parts:
    'the arguments and outputs (1.3 MiB), not the temporaries' (a CPU's; `sized`: with
    their bytes), else 'its own total'."""
    xla = memory.xla_peak_bytes or 0
    edges = (memory.argument_bytes or 0) + (memory.output_bytes or 0)
    if abs(xla - edges) <= 1024:  # the constants' few bytes aside
        size = f" ({nbytes(edges)})" if sized else ""
        return f"the arguments and outputs{size}, not the temporaries"
    return "its own total"


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


def donatable(graph: Graph) -> list[tuple[str, str]]:
    """The argument leaves XLA could write an output into, with that output's type: an
    input of the compiled program whose shape and dtype are an output's (XLA aliases a
    donated buffer only to an output of its exact type, each output once)."""
    outputs = [n.type for n in graph.nodes if n.kind == "output"]
    found = []
    for node in graph.nodes:
        if node.kind == "input" and node.type in outputs:
            outputs.remove(node.type)
            found.append((node.label, node.type))
    return found


def donation_text(memory: Memory, graph: Graph) -> tuple[str, bool]:
    """What donating the arguments would do to this program, and whether it would lower
    anything: donated, an argument's buffer is reused only by an output of its shape and
    dtype, and the caller's array is deleted by the call either way."""
    matches = donatable(graph)
    if not matches:
        outputs = [n.type for n in graph.nodes if n.kind == "output"]
        return (
            f"**Donation** would not help here: no argument has the shape and dtype of an "
            f"output ({listed(outputs, 4)}), so XLA could reuse none of their buffers (JAX "
            "warns the donated buffers were not usable), and the caller's arrays would be "
            "deleted all the same.",
            False,
        )
    named = listed((f"`{name}` ({type_})" for name, type_ in matches), 4)
    return (
        f"**Donation**: {named} {'has' if len(matches) == 1 else 'have'} an output's shape "
        f"and dtype, so XLA can write that output into {'its' if len(matches) == 1 else 'their'} "
        f"buffer (the arguments hold {nbytes(memory.arguments_at_peak)} at the peak). A "
        "donated array is deleted by the call: the caller cannot use it after. This button "
        "donates every array argument and shows the two peaks in the diff; donate only "
        "what you no longer need (`donate_argnames`).",
        True,
    )
