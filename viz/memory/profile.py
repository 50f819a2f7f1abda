"""The memory profile of a compiled program: the bytes live along its schedule, the
peak, and the buffers live there, from XLA's buffer assignment and scheduled module
(`viz.memory.xla`) and each buffer's live range (`viz.memory.live`).

The bytes at a step count each buffer live there once, and a slot XLA gave to two
buffers at that step once (an elementwise kernel writing its output over the input it
reads last, a loop's state handed from one iteration to the next): XLA places such
buffers at the same offset. So the peak is what XLA's placement needs at that step,
and the timeline's largest value is the peak. Measured on this machine's CPU, the
peak minus the arguments matches the process's growth during one call (docs/performance.md,
`tests/test_memory.py`), except for the working memory of library kernels
(YNNPACK fusions on CPU), which XLA does not assign: they are named, not counted.

Lines (`where`) and recomputation come from the compiled HLO's graph, whose nodes
carry each instruction's source line and op_name. No jax.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import Any

from viz.fusion.model import FusionEntry
from viz.ir.model import Graph, SourceLoc
from viz.memory.lines import Kernels, line_or_reason
from viz.memory.live import flatten, live_ranges
from viz.memory.model import PeakAt, PeakBuffer, TimelinePoint, XlaPeakParts
from viz.memory.padding import layout_text
from viz.memory.schema import parse
from viz.memory.xla import (
    CONSTANT,
    DEVICE_MEMORY,
    KINDS,
    OUTPUT,
    PARAMETER,
    TEMPORARY,
    Assignment,
    Buffer,
    Instruction,
    Module,
    ShapeIndex,
    read_assignment,
    read_module,
)
from viz.platforms import platform_of
from viz.units import natural
from viz.where import user_where

AT_PEAK_ROWS = 12  # buffers listed one by one at the peak; the rest merge into `other`
ROW_SHARE = 0.005  # a buffer under this share of the peak merges into `other` anyway
OTHER = "other"
REMAT_SCOPE = "rematted_computation"  # JAX's name scope for what jax.checkpoint recomputes


@dataclass(frozen=True)
class Origin:
    """What the compiled graph says of one instruction: its line, and for an argument
    its name as the user wrote it (params['w'])."""

    where: str = ""
    argument: str = ""


@dataclass
class MemoryProfile:
    """The profile's fields of the report's `memory` section (`viz.memory.model`)."""

    peak_bytes: int
    peak_at: PeakAt
    timeline: list[TimelinePoint]
    at_peak: list[PeakBuffer]
    by_kind_at_peak: dict[str, int]
    library_kernels: list[str] = field(default_factory=list)
    recomputed: list[str] = field(default_factory=list)
    schedule: list[str] = field(default_factory=list)  # instruction names, in order
    other_spaces: dict[str, int] = field(default_factory=dict)  # memory space → bytes
    xla_peak_parts: XlaPeakParts | None = None  # what XLA's own peak counts, where asked


def memory_profile(
    module_proto: bytes, assignment_proto: bytes, xla_space: str | None = None
) -> MemoryProfile:
    """The profile of one executable, from its scheduled module's and its buffer
    assignment's protos (no lines yet: `with_origins` adds them): the device memory's.
    `xla_space`: the other memory space XLA's own peak counts on this platform (a
    TPU's VMEM, '1'): its parts are recomputed (`xla_peak_parts`)."""
    module, assignment = read_module(module_proto), read_assignment(assignment_proto)
    schedule = flatten(module)
    if not schedule.order:
        raise ValueError("the executable's module has no schedule")
    ranges, elsewhere = _device_memory_apart(live_ranges(module, assignment, schedule), assignment)
    kinds = {
        bid: buffer_kind(assignment.buffers[bid], module, end == schedule.end)
        for bid, (_, end) in ranges.items()
    }
    shared = _shared(ranges, assignment)
    names = [module.instructions[i].name for i in schedule.order]
    timeline = _timeline(ranges, kinds, shared, assignment, names)
    peak = max(range(len(timeline)), key=lambda t: (timeline[t].bytes, -t))
    rows = _at_peak(
        peak, timeline[peak].bytes, ranges, kinds, shared.get(peak, {}), assignment, module
    )
    at = module.instructions[schedule.order[min(peak, schedule.end - 1)]]
    scheduled = [module.instructions[i] for i in schedule.order]
    return MemoryProfile(
        peak_bytes=timeline[peak].bytes,
        peak_at=PeakAt(peak, at.name, at.opcode),
        timeline=timeline,
        at_peak=rows,
        by_kind_at_peak={k: getattr(timeline[peak], k) for k in KINDS},
        library_kernels=[i.name for i in scheduled if i.library],
        schedule=names,
        other_spaces={str(space): size for space, size in assignment.other_spaces.items()},
        xla_peak_parts=None
        if xla_space is None
        else _xla_peak_parts(xla_space, elsewhere.get(int(xla_space), {}), assignment, names),
    )


Ranges = dict[int, list[int]]  # buffer id → [start, end]


def _device_memory_apart(
    ranges: Ranges, assignment: Assignment
) -> tuple[Ranges, dict[int, Ranges]]:
    """The live ranges of the device memory's buffers, and the other spaces' by space."""
    device: Ranges = {}
    elsewhere: dict[int, Ranges] = defaultdict(dict)
    for bid, found in ranges.items():
        space = assignment.buffers[bid].space
        (device if space == DEVICE_MEMORY else elsewhere[space])[bid] = found
    return device, elsewhere


def _xla_peak_parts(
    space: str, ranges: Ranges, assignment: Assignment, names: list[str]
) -> XlaPeakParts:
    """XLA's own peak as a TPU makes it: the device memory's arguments, outputs and
    constants (their allocations, for the whole run) and `space` at its own peak (its
    buffers' bytes live at one step, a shared slot once)."""
    held = sum(assignment.allocation_bytes[k] for k in (PARAMETER, OUTPUT, CONSTANT))
    temporary = dict.fromkeys(ranges, TEMPORARY)
    timeline = _timeline(ranges, temporary, _shared(ranges, assignment), assignment, names)
    peak = max(range(len(timeline)), key=lambda t: (timeline[t].bytes, -t))
    live = timeline[peak].bytes
    return XlaPeakParts(
        bytes=held + live,
        held_bytes=held,
        space=space,
        space_bytes=live,
        position=peak if live else 0,
        instruction=timeline[peak].instruction if live else "",
    )


def assignment_from_dump(device: str) -> bool:
    """Whether a compile for `device` (`cpu`, `cpu:8`, `tpu`) asks XLA to dump its buffer
    assignment (`viz.hlo_dump`), the memory profile's source where its platform's
    `memory_analysis()` holds none (a TPU's; read by `hlo_proto_profile`)."""
    return not platform_of(device).assignment_in_analysis


def hlo_proto_profile(data: bytes, xla_space: str | None = None) -> MemoryProfile:
    """The profile from XLA's dump of the optimized module (`*after_optimizations.hlo.pb`,
    written with `xla_dump_hlo_as_proto`): an HloProto, the scheduled module and its
    buffer assignment in one (what a TPU gives where `memory_analysis()` holds none).
    `xla_space`: as `memory_profile`'s."""
    hlo = parse("HloProto", data)
    if not hlo.module or not hlo.assignment:
        raise ValueError("XLA's dump holds no buffer assignment")
    return memory_profile(hlo.module, hlo.assignment, xla_space)


def executable_profile(
    executable: Any, analysis: Any = None, dumped: bytes | None = None, device: str = "cpu"
) -> MemoryProfile:
    """The profile of a loaded XLA executable (`Compiled.runtime_executable()`, or what
    jit's compiling frame holds), from its memory stats (`analysis`, where already
    asked for) and its first HLO module; where the stats hold no buffer assignment (a
    TPU's), from XLA's dump of the compile (`dumped`: the HloProto, `hlo_proto_profile`).
    The parts of XLA's own peak are recomputed where `device`'s platform says what it
    counts. ValueError where neither gives an assignment."""
    xla_space = platform_of(device).xla_peak_space
    stats = analysis if analysis is not None else executable.get_compiled_memory_stats()
    assignment = getattr(stats, "serialized_buffer_assignment_proto", b"")
    modules = executable.hlo_modules()
    if (not assignment or not modules) and dumped:
        return hlo_proto_profile(dumped, xla_space)
    if not assignment or not modules:
        raise ValueError("XLA gives no buffer assignment for this executable")
    return memory_profile(modules[0].as_serialized_hlo_module_proto(), assignment, xla_space)


def with_origins(profile: MemoryProfile, graph: Graph | None) -> MemoryProfile:
    """The profile with each instruction's line, argument name and recomputation, as
    the compiled graph tells them (unchanged without a graph)."""
    if graph is None:
        return profile
    at = profile.peak_at
    origins, recomputed = origins_of(
        graph, {at.instruction, *(r.instruction for r in profile.at_peak)}
    )

    def placed(row: PeakBuffer) -> PeakBuffer:
        origin = origins.get(row.instruction, Origin())
        return replace(
            row,
            where=origin.where,
            recomputed=row.instruction in recomputed,
            argument=origin.argument if row.kind == PARAMETER else "",
        )

    return replace(
        profile,
        peak_at=replace(at, where=origins.get(at.instruction, Origin()).where),
        at_peak=[placed(r) for r in profile.at_peak],
        recomputed=[n for n in profile.schedule if n in recomputed],
    )


def buffer_kind(buffer: Buffer, module: Module, handed_back: bool) -> str:
    """An argument's buffer is a `parameter`. A buffer in an output's slot, or in a
    donated argument's, is an `output` if it lives to the end (`handed_back`), else a
    `temporary` XLA placed there while the slot was free. Any other buffer is its
    allocation's kind."""
    inst = module.instructions[buffer.instruction]
    if inst.opcode == "parameter" and inst.computation == module.entry:
        return PARAMETER
    if buffer.kind in (OUTPUT, PARAMETER):
        return OUTPUT if handed_back else TEMPORARY
    return buffer.kind


Shared = dict[int, dict[int, int]]  # position → {buffer: its bytes another buffer holds too}


def _shared(ranges: dict[int, list[int]], assignment: Assignment) -> Shared:
    """Where XLA gave one slot to two buffers live at the same step (one ends as the
    next begins, at the same offset of the same allocation): for each such step, the
    bytes of the earlier buffer (or of a later one, among buffers starting together)
    that overlap a buffer starting there."""
    ends: dict[tuple[int, int], list[Buffer]] = defaultdict(list)
    starts: dict[tuple[int, int], list[Buffer]] = defaultdict(list)
    for bid, (start, end) in ranges.items():
        buffer = assignment.buffers[bid]
        starts[(buffer.allocation, start)].append(buffer)
        if end != start:
            ends[(buffer.allocation, end)].append(buffer)
    shared: Shared = defaultdict(dict)
    for key, starting in starts.items():
        ending = ends.get(key, [])
        if len(starting) + len(ending) < 2:
            continue
        held: list[tuple[int, int]] = []  # the slots of the buffers starting here, so far
        for buffer in sorted(starting, key=lambda b: b.id):
            _count(shared[key[1]], buffer, held)
            held.append((buffer.offset, buffer.offset + buffer.size))
        for buffer in ending:
            _count(shared[key[1]], buffer, held)
    return {t: found for t, found in shared.items() if found}


def _count(found: dict[int, int], buffer: Buffer, held: list[tuple[int, int]]) -> None:
    lo, hi = buffer.offset, buffer.offset + buffer.size
    overlap = _covered(lo, hi, held)
    if overlap:
        found[buffer.id] = overlap


def _covered(lo: int, hi: int, held: list[tuple[int, int]]) -> int:
    """The bytes of [lo, hi) that the slots `held` cover."""
    cuts = sorted((max(lo, a), min(hi, b)) for a, b in held if a < hi and b > lo)
    total, reach = 0, lo
    for a, b in cuts:
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


def _timeline(
    ranges: dict[int, list[int]],
    kinds: dict[int, str],
    shared: Shared,
    assignment: Assignment,
    names: list[str],
) -> list[TimelinePoint]:
    """The bytes live at each position 0 … end, by kind (a running sum of each
    buffer's arrival and departure, less the slots counted twice); the position past
    the last instruction holds what the program hands back."""
    end = len(names)
    change = {kind: [0] * (end + 1) for kind in KINDS}
    for bid, (start, stop) in ranges.items():
        size, kind = assignment.buffers[bid].size, kinds[bid]
        change[kind][start] += size
        if stop < end:
            change[kind][stop + 1] -= size
    live = {kind: list(accumulate(change[kind])) for kind in KINDS}
    for position, found in shared.items():
        for bid, overlap in found.items():
            live[kinds[bid]][position] -= overlap
    steps = zip(*(live[kind] for kind in KINDS), [*names, ""], strict=True)
    return [
        TimelinePoint(t, p + o + tmp + c, p, o, tmp, c, name)
        for t, (p, o, tmp, c, name) in enumerate(steps)
    ]


def _at_peak(
    peak: int,
    peak_bytes: int,
    ranges: dict[int, list[int]],
    kinds: dict[int, str],
    shared: dict[int, int],
    assignment: Assignment,
    module: Module,
) -> list[PeakBuffer]:
    """The buffers live at the peak, largest first, each counting the bytes it alone
    holds there (so the rows add up to the peak): the largest one by one, then one
    `other` row for the rest (a 96-layer model has a thousand: only their bytes are
    read, not made rows)."""
    live: list[tuple[int, Buffer, Instruction]] = []  # bytes it alone holds, buffer, its definer
    for bid, (start, end) in ranges.items():
        if start <= peak <= end:
            buffer = assignment.buffers[bid]
            size = buffer.size - shared.get(bid, 0)
            if size > 0:
                live.append((size, buffer, module.instructions[buffer.instruction]))
    live.sort(key=lambda b: (-b[0], natural(b[2].name), b[1].index))  # p2 before p10
    keep = sum(
        1
        for i, (size, *_) in enumerate(live)
        if i < AT_PEAK_ROWS and size >= ROW_SHARE * peak_bytes
    )
    if len(live) - keep < 2:
        keep = len(live)
    rows = [
        _peak_row(
            size, buffer, *_named(inst, buffer.index, module), kinds[buffer.id], ranges[buffer.id]
        )
        for size, buffer, inst in live[:keep]
    ]
    return rows + ([_other(live[keep:], kinds, ranges)] if keep < len(live) else [])


def _named(inst: Instruction, index: ShapeIndex, module: Module) -> tuple[Instruction, ShapeIndex]:
    """The instruction (and shape index) a buffer is named by: its own, but for a while
    loop's state (a scan's stacked outputs), which lives in the loop body's parameter,
    an instruction of no kernel and no line: the loop's output at that index
    (`get-tuple-element` of the while, at the loop's line), else the loop."""
    if inst.opcode != "parameter" or inst.computation == module.entry:
        return inst, index
    found = module.instructions.values()
    loop = next((i for i in found if i.opcode == "while" and inst.computation in i.called), None)
    if loop is None:
        return inst, index
    output = next(
        (
            i
            for i in found
            if i.opcode == "get-tuple-element"
            and i.operands == [loop.id]
            and tuple(index[:1]) == (i.tuple_index,)
        ),
        None,
    )
    return (output, index[1:]) if output is not None else (loop, index)


def _peak_row(
    size: int, buffer: Buffer, inst: Instruction, index: ShapeIndex, kind: str, live: list[int]
) -> PeakBuffer:
    shape = inst.shape.at(index)
    return PeakBuffer(
        instruction=inst.name,
        op=inst.opcode,
        shape=list(shape.dims),
        dtype=shape.dtype or "tuple",
        bytes=size,
        kind=kind,
        live=list(live),
        index=list(index),
        logical_bytes=shape.logical_bytes,
        padded_bytes=shape.padded_bytes,
        layout=layout_text(shape.layout),
    )


def _other(
    rest: list[tuple[int, Buffer, Instruction]], kinds: dict[int, str], ranges: Ranges
) -> PeakBuffer:
    """One row for the small buffers at the peak, merged."""
    found = {kinds[buffer.id] for _, buffer, _ in rest}
    shapes = [inst.shape.at(buffer.index) for _, buffer, inst in rest]
    return PeakBuffer(
        instruction=OTHER,
        op="",
        shape=[],
        dtype="",
        bytes=sum(size for size, *_ in rest),
        kind=found.pop() if len(found) == 1 else "mixed",
        live=[
            min(ranges[buffer.id][0] for _, buffer, _ in rest),
            max(ranges[buffer.id][1] for _, buffer, _ in rest),
        ],
        buffers=len(rest),
        logical_bytes=sum(shape.logical_bytes for shape in shapes),
        padded_bytes=sum(shape.padded_bytes for shape in shapes),
    )


def where(source: SourceLoc | None) -> str:
    """Where an instruction's source is (its metadata's innermost user frame), as the
    user names it (`viz.where.user_where`: `model.py:12`, `your code, line 12`)."""
    return user_where(source.file, source.line) if source is not None else ""


def origins_of(graph: Graph | None, wanted: set[str]) -> tuple[dict[str, Origin], set[str]]:
    """The line and argument of each instruction `wanted`, by name (a plain
    instruction's from its node, a kernel's, a fusion's or a loop's, from the last op
    inside it with a line: its root, which XLA names it after), and every instruction
    that jax.checkpoint recomputes (an op of its rematted region, or a kernel holding
    one). One pass over the graph's nodes."""
    if graph is None:
        return {}, set()
    found: dict[str, Origin] = {}
    recomputed = {path[-1] for path, group in graph.groups.items() if _recomputes(group.attrs)}
    for node in graph.nodes:
        again = _recomputes(node.attrs)
        if again:
            recomputed.update((node.id, *node.scope))
        if node.id in wanted:
            argument = node.label if node.kind == "input" else ""
            found[node.id] = Origin(where(node.source), argument)
        if node.source is not None:
            for kernel in node.scope:
                if kernel in wanted:
                    found[kernel] = Origin(where(node.source))
    return found, recomputed


def _recomputes(attrs: dict[str, str]) -> bool:
    return REMAT_SCOPE in attrs.get("op_name", "")


def with_reasons(profile: MemoryProfile, graph: Graph | None) -> MemoryProfile:
    """The profile with a line, or the reason for none, for each buffer still without
    one (but an argument's, named by its argument): `viz.memory.lines`' rules."""
    missing = [
        r for r in profile.at_peak if not r.where and r.kind != PARAMETER and r.instruction != OTHER
    ]
    at = profile.peak_at
    if graph is None or not (missing or not at.where):
        return profile
    kernels = Kernels(graph, lambda node: where(node.source))

    def reasoned(row: PeakBuffer) -> PeakBuffer:
        if row not in missing:
            return row
        found = line_or_reason(kernels, row.instruction)
        return replace(row, where=found.where, note=found.note)

    peak_at = at if at.where else replace(at, where=line_or_reason(kernels, at.instruction).where)
    return replace(profile, peak_at=peak_at, at_peak=[reasoned(r) for r in profile.at_peak])


def with_kernel_lines(
    profile: MemoryProfile, entries: list[FusionEntry], source_file: str | None
) -> MemoryProfile:
    """The profile with a line for the buffers whose instruction names none (XLA
    dropped the metadata of many a layout copy and reduce-window): the first line the
    fusion map traced into that kernel, in the user's file."""
    lines = {e.kernel: e.lines[0] for e in entries if e.lines}
    if source_file is None or not lines:
        return profile

    def lined(instruction: str, where: str) -> str:
        if where or instruction not in lines:
            return where
        return user_where(source_file, lines[instruction])

    def row_lined(row: PeakBuffer) -> PeakBuffer:
        if row.where or row.instruction not in lines:
            return row
        note = "XLA kept no line: the fusion map's, from the ops it fused"
        return replace(row, where=lined(row.instruction, ""), note=note)

    at = profile.peak_at
    return replace(
        profile,
        peak_at=replace(at, where=lined(at.instruction, at.where)),
        at_peak=[row_lined(r) for r in profile.at_peak],
    )
