"""Which buffers would fill the device, when XLA refuses to compile for lack of memory.

The TPU runtime aborts the compile at the first sign (`RESOURCE_EXHAUSTED: Ran out of memory on
HBM, the total memory required for HLO temporaries (20.00G) exceeds available HBM
(15.75G)`), before it lists any allocation; XProf needs a program that ran. So the same
program is compiled at a smaller batch: the arguments' leading dimension (the largest
one they share) halved until XLA compiles it, then halved twice more. Each buffer's
bytes, each dimension and the peak are taken as linear in the batch (a weight's stay
put, an activation's grow with it): the line through the two largest sizes that fit
gives the full size's, and the third size, checked against that line, says how close the
method is on this program. Lines come from each compiled module, as for any profile.

Imports jax (it compiles): the pipeline's, never the reports'.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import jax

from viz.errors import ErrorInfo, limit_in, out_of_memory, required_in
from viz.hlo_dump import OptimizedHloDump
from viz.ir.hlo import read_hlo_text
from viz.memory.display import peak_fillers, xla_disagrees_text
from viz.memory.model import Memory, OomEstimate, PeakBuffer, TimelinePoint
from viz.memory.profile import (
    OTHER,
    MemoryProfile,
    assignment_from_dump,
    executable_profile,
    with_origins,
    with_reasons,
)
from viz.memory.xla import KINDS
from viz.units import nbytes

HALVINGS = 24  # at most 2**24 times smaller: past that, the batch is not what fills it
# On the validation program of tests/test_memory.py (a sort and a cumsum, compiled at
# a quarter of its batch), the estimated peak came within this share of the real one
VALIDATED_PCT = 0.1


@dataclass(frozen=True)
class Sized:
    """The profile of the program compiled with batch `batch`."""

    batch: int
    profile: MemoryProfile


def batch_of(abstract: list[Any]) -> int | None:
    """The batch: the largest leading dimension among the argument arrays (None: no
    argument has a dimension)."""
    leading = [leaf.shape[0] for leaf in jax.tree.leaves(abstract) if getattr(leaf, "shape", ())]
    return max(leading) if leading else None


def at_batch(abstract: list[Any], full: int, batch: int) -> list[Any]:
    """The arguments with their leading dimension `full` made `batch`."""

    def scaled(leaf: Any) -> Any:
        shape = getattr(leaf, "shape", ())
        if not shape or shape[0] != full:
            return leaf
        return jax.ShapeDtypeStruct((batch, *shape[1:]), leaf.dtype, sharding=leaf.sharding)

    return [jax.tree.map(scaled, a) for a in abstract]


def compile_profile(target: Any, abstract: list[Any]) -> MemoryProfile:
    """The profile, lines given, of `target`'s function compiled on `abstract`."""
    proto = assignment_from_dump(target.device)
    dump = OptimizedHloDump(target.compiler_options, wanted=proto, proto=proto)
    try:
        options = {**target.compiler_options, **dump.options}
        compiled = target.jitted.trace(*abstract).lower().compile(compiler_options=options or None)
        dumped = dump.hlo_proto()
    finally:
        dump.close()
    found = executable_profile(compiled.runtime_executable(), compiled.memory_analysis(), dumped)
    graph = read_hlo_text(compiled.as_text())
    return with_reasons(with_origins(found, graph), graph)


def estimate(
    target: Any,
    abstract: list[Any],
    compile_at: Callable[[Any, list[Any]], MemoryProfile] = compile_profile,
) -> tuple[MemoryProfile, OomEstimate] | None:
    """The profile at full size, estimated from the program compiled at smaller
    batches (None: no batch to scale, or no smaller batch compiles)."""
    full = batch_of(abstract)
    if full is None or full < 2:
        return None
    sizes = _fitting(target, abstract, full, compile_at)
    if len(sizes) < 2:
        return None
    first, second = sizes[0], sizes[1]
    profile = _extrapolated(first, second, full)
    checked = _checked_pct(first, second, sizes[2]) if len(sizes) > 2 else None
    said = _said(full, [s.batch for s in sizes], checked)
    return profile, OomEstimate(
        method="scaled-down compile",
        batch=full,
        compiled_at=[s.batch for s in sizes],
        checked_pct=checked,
        validated_pct=VALIDATED_PCT,
        said=said,
    )


def _fitting(
    target: Any,
    abstract: list[Any],
    full: int,
    compile_at: Callable[[Any, list[Any]], MemoryProfile],
) -> list[Sized]:
    """The profiles at the largest batch that compiles (halving from `full`), and at
    half and a quarter of it."""
    batch = full
    for _ in range(HALVINGS):
        batch //= 2
        if batch < 1:
            return []
        try:
            first = compile_at(target, at_batch(abstract, full, batch))
        except Exception as exc:
            if out_of_memory(str(exc)):
                continue
            return []
        break
    else:
        return []
    sizes = [Sized(batch, first)]
    for smaller in (batch // 2, batch // 4):
        if smaller < 1:
            break
        try:
            sizes.append(Sized(smaller, compile_at(target, at_batch(abstract, full, smaller))))
        except Exception:
            break
    return sizes


def _line(at_first: float, at_second: float, first: int, second: int, full: int) -> float:
    """The value at `full` on the line through (first, at_first), (second, at_second)."""
    return at_first + (at_first - at_second) * (full - first) / (first - second)


def _extrapolated(first: Sized, second: Sized, full: int) -> MemoryProfile:
    """The first profile's peak and buffers at the peak, each taken to `full` on the
    line through the two sizes (a buffer not found at the second size: in proportion)."""
    b1, b2 = first.batch, second.batch
    before = {(r.instruction, tuple(r.index)): r for r in second.profile.at_peak}

    def on_line(v: int, w: int) -> int:
        return round(_line(v, w, b1, b2, full))

    def grown(row: PeakBuffer) -> PeakBuffer:
        other = before.get((row.instruction, tuple(row.index)))
        if other is None or len(other.shape) != len(row.shape):
            return _scaled(row, row, lambda v, _: round(v * full / b1))
        return _scaled(row, other, on_line)

    rows = [grown(r) for r in first.profile.at_peak]
    rows.sort(key=lambda r: (r.instruction == OTHER, -r.bytes))
    kinds = {
        kind: on_line(v, second.profile.by_kind_at_peak.get(kind, 0))
        for kind, v in first.profile.by_kind_at_peak.items()
    }
    peak = on_line(first.profile.peak_bytes, second.profile.peak_bytes)
    timeline = _timeline(first.profile.timeline, second.profile.timeline, on_line, full / b1)
    return replace(
        first.profile, peak_bytes=peak, at_peak=rows, by_kind_at_peak=kinds, timeline=timeline
    )


def _timeline(
    first: list[TimelinePoint],
    second: list[TimelinePoint],
    on_line: Callable[[int, int], int],
    factor: float,
) -> list[TimelinePoint]:
    """The bytes at each step taken to the full size: on the line where both sizes ran
    the same schedule, else in proportion."""
    same = len(first) == len(second) and all(
        a.instruction == b.instruction for a, b in zip(first, second, strict=True)
    )
    pairs = zip(first, second if same else first, strict=True)
    value = on_line if same else (lambda v, _: round(v * factor))
    fields = ("bytes", *KINDS)  # the total and its split by kind
    return [
        replace(a, **{k: value(getattr(a, k), getattr(b, k)) for k in fields}) for a, b in pairs
    ]


def _scaled(row: PeakBuffer, other: PeakBuffer, value: Callable[[int, int], int]) -> PeakBuffer:
    """The row with its bytes and its dimensions that changed between the two sizes
    taken to the full size by `value(at the first, at the second)`."""
    changed = other is not row
    return replace(
        row,
        bytes=value(row.bytes, other.bytes),
        shape=[
            value(v, w) if changed and v != w else v
            for v, w in zip(row.shape, other.shape, strict=True)
        ],
        logical_bytes=value(row.logical_bytes, other.logical_bytes),
        padded_bytes=value(row.padded_bytes, other.padded_bytes),
    )


def _checked_pct(first: Sized, second: Sized, third: Sized) -> float:
    """How far the third size's peak lies off the line through the first two, in % of it."""
    b1, b2, b3 = first.batch, second.batch, third.batch
    predicted = _line(first.profile.peak_bytes, second.profile.peak_bytes, b1, b2, b3)
    real = third.profile.peak_bytes
    return abs(predicted - real) / real * 100 if real else math.inf


def _said(full: int, batches: list[int], checked: float | None) -> str:
    """How the figures were found, and how close they are."""
    sizes = ", ".join(f"{b:,}" for b in batches)
    head = (
        f"estimated: XLA gave no figures for a program that does not fit, so the same "
        f"program was compiled at batch {sizes} (of {full:,}) and each buffer, each "
        f"dimension and the peak taken back to {full:,} on the line through the first two"
    )
    third = (
        f"; the third size lay within {checked:.1f} % of that line" if checked is not None else ""
    )
    return f"{head}{third} (on a program that fits, within {VALIDATED_PCT} % of its real peak)"


def out_of_memory_section(
    target: Any, abstract: list[Any], error: ErrorInfo
) -> tuple[Memory, ErrorInfo]:
    """The report's memory for a compile XLA refused for lack of memory (the estimate,
    where one can be made), and the error naming the buffers that would fill it."""
    try:
        found = estimate(target, abstract)
    except Exception:  # the estimate is a bonus: the error stands without it
        found = None
    if found is None:
        note = "no smaller batch of this program compiled, so nothing estimates its buffers"
        return Memory(profile_warning=note), error
    profile, how = found
    limit = limit_in(error.message)
    xla = required_in(error.message)
    if xla is not None:
        how = replace(how, xla_required_bytes=xla[0], xla_required_for=xla[1])
    memory = Memory(
        peak_bytes=profile.peak_bytes,
        peak_at=profile.peak_at,
        timeline=profile.timeline,
        at_peak=profile.at_peak,
        by_kind_at_peak=profile.by_kind_at_peak,
        other_spaces=profile.other_spaces,
        limit_bytes=limit,
        limit_of="the device's memory (XLA's message)" if limit else "",
        estimate=how,
    )
    fillers = peak_fillers(profile).removesuffix(", …")
    said = f"At full size it needs about {nbytes(profile.peak_bytes)} at its peak: {fillers}."
    sizes = ", ".join(f"{b:,}" for b in how.compiled_at)
    method = f"(Estimated: the same program compiled at batch {sizes}, scaled to {how.batch:,}.)"
    versus = xla_disagrees_text(memory)
    message = " ".join(filter(None, (error.message, said, versus, method)))
    return memory, replace(error, message=message)
