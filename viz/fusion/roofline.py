"""Each profiled kernel on the roofline of its chip: the FLOP/s and bytes/s it
achieved against the chip's peaks, and whether it is compute-bound or memory-bound.

A kernel's arithmetic intensity is its FLOPs per byte of memory it moves. The chip
reaches its compute peak only at an intensity above the ridge point (peak FLOP/s ÷
peak bytes/s); below it the memory bandwidth caps it at intensity × peak bytes/s. So a
kernel whose intensity is below the ridge is memory-bound, above it compute-bound, and
its share of the roof is what it achieved against min(peak FLOP/s, intensity × peak
bytes/s).

The peaks are the chip maker's published figures, kept by each platform by the device
kind JAX reports (`viz.platforms`, `Platform.peaks`); the compute roof is the bf16
matrix peak. A device kind with no known peaks gets the achieved rates alone; a trace
with no FLOPs or bytes per kernel (the CPU's) gets no roofline, and says so.

A kernel is placed only where its cost and its time are known. The others are named
with their reason (`unplaced_words`): a kernel XLA has no cost for (on a TPU a custom
call: a Pallas kernel given no `cost_estimate=`, or one of XLA's own), and a kernel the
trace timed at 0 s.

No jax: it reads a `viz.fusion.profile.Profile`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from viz.fusion.profile import KernelTime, Profile
from viz.platforms import platform_of
from viz.platforms.base import Peaks
from viz.platforms.trace import ASYNC_HALVES, PALLAS, PALLAS_TARGET
from viz.units import listed, nbytes, plural, seconds, si

PALLAS_FIX = (
    "a Pallas kernel counts its FLOPs and bytes only when given "
    "`pl.pallas_call(..., cost_estimate=pl.CostEstimate(...))`"
)
NO_TIME = "no time"  # an unplaced kernel's reason: the trace timed it at 0 s
ASYNC = "async"  # an unplaced kernel's reason: half of an asynchronous op (its time no rate)
NOTHING = "nothing"  # an unplaced kernel's reason: 0 FLOPs and 0 bytes (an older report's)


@dataclass(frozen=True)
class RooflinePoint:
    """One kernel per step: what it did, at what rate, and what bounds it."""

    kernel: str
    seconds: float
    flops: float
    bytes_accessed: float
    flops_per_s: float
    bytes_per_s: float
    intensity: float | None  # FLOPs per byte; None: it moved no bytes
    bound: str  # "compute" or "memory"; "" without the chip's peaks
    of_roof: float | None  # achieved ÷ what the roof allows at its intensity


@dataclass(frozen=True)
class Roofline:
    peaks: Peaks | None
    points: list[RooflinePoint]
    note: str  # what is missing, in words ("" when nothing is)
    # the kernels not placed, by reason: PALLAS, a custom call's target, NO_TIME
    unplaced: dict[str, list[KernelTime]] = field(default_factory=dict)
    step_s: float = 0.0  # the step the kernels' shares are of (the device's)


def peaks_of(profile: Profile) -> Peaks | None:
    """The published peaks of the profile's chip, from its platform."""
    return platform_of(profile.platform or "cpu").peaks(profile.device_kind)


def roofline(profile: Profile) -> Roofline:
    """The profile's kernels on the roofline of its device kind."""
    peaks = peaks_of(profile)
    points = [p for k in profile.kernels if (p := point(k, peaks)) is not None]
    unplaced = unplaced_kernels(profile.kernels)
    step = profile.busy_step_s
    if not points:
        where = profile.platform or "this platform"
        note = f"the {where} trace carries no FLOPs or bytes per kernel: none is placed"
        return Roofline(peaks, [], "" if unplaced else note, unplaced, step)
    if peaks is None:
        kind = profile.device_kind or profile.platform or "this device"
        note = f"no published peaks known for {kind}: the achieved rates alone"
        return Roofline(None, points, note, unplaced, step)
    return Roofline(peaks, points, "", unplaced, step)


def unplaced_kernels(kernels: list[KernelTime]) -> dict[str, list[KernelTime]]:
    """The kernels with no cost (by why: `KernelTime.no_cost`) and the costed ones the
    trace timed at 0 s (NO_TIME) or whose time is not their work's (ASYNC), the Pallas
    kernels first."""
    found: dict[str, list[KernelTime]] = {PALLAS: []}
    for k in kernels:
        if reason := unplaced_reason(k):
            found.setdefault(reason, []).append(k)
    return {reason: ks for reason, ks in found.items() if ks}


def unplaced_reason(k: KernelTime) -> str:
    """Why a kernel is not placed ("": it is, or the trace has no costs at all)."""
    if k.no_cost:
        return k.no_cost
    if k.flops is None:
        return ""
    if k.flops == 0 and not k.bytes_accessed:  # a report read before `no_cost` was
        return NOTHING
    if k.category in ASYNC_HALVES:
        return ASYNC
    return NO_TIME if k.mean_s <= 0 else ""


def point(kernel: KernelTime, peaks: Peaks | None) -> RooflinePoint | None:
    """The kernel's point, None where its FLOPs or bytes are unknown, it took no time or
    its time is not its work's (`unplaced_reason`)."""
    if kernel.flops is None or kernel.bytes_accessed is None or unplaced_reason(kernel):
        return None
    flops, moved, seconds = kernel.flops, kernel.bytes_accessed, kernel.mean_s
    intensity = flops / moved if moved > 0 else None
    bound, of_roof = "", None
    if peaks is not None:
        bound = "memory" if intensity is not None and intensity < peaks.ridge else "compute"
        roof = peaks.flops_per_s if intensity is None else attainable(intensity, peaks)
        of_roof = (flops / seconds) / roof if flops > 0 else (moved / seconds) / peaks.bytes_per_s
    return RooflinePoint(
        kernel.name,
        seconds,
        flops,
        moved,
        flops / seconds,
        moved / seconds,
        intensity,
        bound,
        of_roof,
    )


def attainable(intensity: float, peaks: Peaks) -> float:
    """The most FLOP/s the chip allows at this arithmetic intensity."""
    return min(peaks.flops_per_s, intensity * peaks.bytes_per_s)


def peaks_words(peaks: Peaks) -> str:
    """`TPU v5e: 197 TFLOP/s bf16, 819 GB/s HBM, ridge 241 FLOP/B`."""
    return (
        f"{peaks.chip}: {si(peaks.flops_per_s)}FLOP/s bf16, {si(peaks.bytes_per_s)}B/s HBM, "
        f"ridge {peaks.ridge:.0f} FLOP/B"
    )


def point_words(p: RooflinePoint) -> str:
    """`1.20 TFLOP/s · 400.00 GB/s · 3.0 FLOP/B · memory-bound (49% of the roof)`."""
    said = f"{_rate(p.flops_per_s, 'FLOP/s')} · {_rate(p.bytes_per_s, 'B/s')}"
    if p.intensity is not None:
        said += f" · {p.intensity:.1f} FLOP/B"
    if p.bound:
        said += f" · {p.bound}-bound"
    if p.of_roof is not None:
        said += f" ({p.of_roof:.0%} of the roof)"
    return said


def _rate(value: float, unit: str) -> str:
    """`3.21 TFLOP/s`, and `0 FLOP/s` (si's prefix, where it has one, joins the unit)."""
    scaled = si(value)
    return f"{scaled}{unit}" if scaled[-1].isalpha() else f"{scaled} {unit}"


def drawn(p: RooflinePoint) -> bool:
    """Whether a point has a place on the log-log chart: it did FLOPs and moved bytes."""
    return p.intensity is not None and p.flops_per_s > 0


def undrawn_words(line: Roofline) -> str:
    """The placed kernels a log-log chart cannot draw (no FLOPs: copies, transposes),
    in words; "" when there are none."""
    left = [p for p in line.points if not drawn(p)]
    if not left:
        return ""
    share = _share(sum(p.seconds for p in left), line.step_s)
    names = named_groups([p.kernel for p in left])
    return (
        f"{plural(len(left), 'kernel')} do no FLOPs ({names}; {share} of the device time): "
        "a log scale has no place for them, the table lists them with their bytes/s"
    )


def past_hbm_words(line: Roofline) -> str:
    """The placed kernels whose bytes/s pass the chip's HBM bandwidth, in words: XLA's
    bytes for them count more than the HBM's traffic; "" when none does."""
    peaks = line.peaks
    past = [p for p in line.points if peaks is not None and p.bytes_per_s > peaks.bytes_per_s]
    if peaks is None or not past:
        return ""
    most = max(p.bytes_per_s for p in past) / peaks.bytes_per_s
    return (
        f"{plural(len(past), 'kernel')} ({named_groups([p.kernel for p in past])}) move bytes "
        f"faster than the HBM's {_rate(peaks.bytes_per_s, 'B/s')} (up to {most:.1f}×), so "
        "above its roof: XLA's bytes for them count more than HBM traffic (operands it keeps in "
        "on-chip memory), and their intensity reads low"
    )


def _share(part_s: float, step_s: float) -> str:
    """`31.2%` of the step; `< 0.1%` for a sliver, never a `0.0%` that hides one."""
    share = part_s / step_s if step_s > 0 else 0.0
    return "< 0.1%" if 0 < share < 0.001 else f"{share:.1%}"


SHOWN_GROUPS = 4  # kernel names the words of an unplaced reason name
NUMBERED = re.compile(r"\.\d+$")  # `online-softmax.3`: XLA numbers each copy of a name


def named_groups(names: list[str], titles: dict[str, str] | None = None) -> str:
    """`online-softmax ×24` for the kernels XLA named `online-softmax`, `.1`, … `.23`;
    a kernel alone by its name (with its title: `forward.1 (add_kernel)`)."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(NUMBERED.sub("", name), []).append(name)
    said = [
        f"{stem} ×{len(names)}" if len(names) > 1 else _titled(names[0], titles or {})
        for stem, names in sorted(groups.items(), key=lambda g: -len(g[1]))
    ]
    return listed(said, SHOWN_GROUPS)


def _titled(name: str, titles: dict[str, str]) -> str:
    return f"{name} ({titles[name]})" if titles.get(name) else name


def unplaced_words(line: Roofline, titles: dict[str, str] | None = None) -> dict[str, str]:
    """reason → one sentence on the kernels the roofline leaves out for it, with their
    share of the step and, for a Pallas kernel, the fix."""
    return {why: _reason_words(why, ks, line.step_s, titles) for why, ks in line.unplaced.items()}


def _reason_words(
    reason: str, kernels: list[KernelTime], step_s: float, titles: dict[str, str] | None
) -> str:
    names = named_groups([k.name for k in kernels], titles)
    n, have = plural(len(kernels), "kernel"), "has" if len(kernels) == 1 else "have"
    if reason == NO_TIME:
        return f"{n} ({names}) took no device time the trace could measure: not placed"
    if reason == NOTHING:
        return f"{n} ({names}) {have} neither FLOPs nor bytes in the trace: not placed"
    if reason == ASYNC:
        share = _share(sum(k.mean_s for k in kernels), step_s)
        return (
            f"{n} ({names}; {share} of the device time) are halves of asynchronous copies: "
            "a half's time is the start of a transfer or the wait for it, while the "
            "transfer runs beside other kernels, so no rate is measured: not placed"
        )
    untimed = sum(k.mean_s <= 0 for k in kernels)
    what = f"{names}, {_share(sum(k.mean_s for k in kernels), step_s)} of the device time"
    what += f", {untimed} timed at 0 s" if untimed else ""
    if reason == PALLAS:
        return f"{n} ({what}) {have} no cost XLA knows, so not placed: {PALLAS_FIX}"
    if reason == PALLAS_TARGET:  # a kernel XLA's TPU compiler wrote from the user's ops
        return (
            f"{n} that XLA's TPU compiler wrote itself ({what}) {have} no cost in the "
            "trace: not placed"
        )
    return f"{n} of XLA's own ({reason}: {what}) {have} no cost in the trace: not placed"


def rows(line: Roofline) -> list[dict[str, object]]:
    """The roofline's table rows, the slowest kernel first."""
    return [
        {
            "kernel": p.kernel,
            "time per step": seconds(p.seconds),
            "FLOPs": si(p.flops),
            "bytes": nbytes(p.bytes_accessed),
            "FLOP/s": si(p.flops_per_s),
            "bytes/s": si(p.bytes_per_s),
            "FLOP/B": None if p.intensity is None else round(p.intensity, 2),
            "bound": p.bound or None,
            "of the roof": None if p.of_roof is None else f"{p.of_roof:.0%}",
        }
        for p in sorted(line.points, key=lambda p: -p.seconds)
    ]
