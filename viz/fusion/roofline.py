"""Each profiled kernel on the roofline of its chip: the FLOP/s and bytes/s it
achieved against the chip's peaks, and whether it is compute-bound or memory-bound.

A kernel's arithmetic intensity is its FLOPs per byte of memory it moves. The chip
reaches its compute peak only at an intensity above the ridge point (peak FLOP/s ÷
peak bytes/s); below it the memory bandwidth caps it at intensity × peak bytes/s. So a
kernel whose intensity is below the ridge is memory-bound, above it compute-bound, and
its share of the roof is what it achieved against min(peak FLOP/s, intensity × peak
bytes/s).

The peaks are the chip maker's published figures, by the device kind JAX reports; the
compute roof is the bf16 matrix peak (an int8 kernel may reach the int8 one, listed
beside it). A device kind with no known peaks gets the achieved rates alone; a trace
with no FLOPs or bytes per kernel (the CPU's) gets no roofline, and says so.

No jax: it reads a `viz.fusion.profile.Profile`.
"""

from __future__ import annotations

from dataclasses import dataclass

from viz.fusion.profile import KernelTime, Profile
from viz.units import nbytes, seconds, si


@dataclass(frozen=True)
class Peaks:
    """A chip's published peaks."""

    chip: str
    flops_per_s: float  # the bf16 matrix peak
    bytes_per_s: float  # the HBM bandwidth
    int8_ops_per_s: float | None = None
    source: str = ""

    @property
    def ridge(self) -> float:
        """The ridge point, in FLOPs per byte."""
        return self.flops_per_s / self.bytes_per_s


# Google's published TPU v5e figures (per chip): 197 TFLOP/s bf16, 394 TOP/s int8,
# 819 GB/s HBM bandwidth. Source: https://cloud.google.com/tpu/docs/v5e
TPU_V5E = Peaks("TPU v5e", 197e12, 819e9, 394e12, "https://cloud.google.com/tpu/docs/v5e")
PEAKS = {"tpu v5 lite": TPU_V5E, "tpu v5e": TPU_V5E}  # JAX's device_kind, lower case


def peaks_for(device_kind: str) -> Peaks | None:
    """The published peaks of a device kind (`TPU v5 lite`), None where none are known."""
    return PEAKS.get(device_kind.strip().lower())


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


def roofline(profile: Profile) -> Roofline:
    """The profile's kernels on the roofline of its device kind."""
    peaks = peaks_for(profile.device_kind)
    points = [p for k in profile.kernels if (p := point(k, peaks)) is not None]
    if not points:
        where = profile.platform or "this platform"
        return Roofline(
            peaks, [], f"the {where} trace carries no FLOPs or bytes per kernel: none is placed"
        )
    if peaks is None:
        kind = profile.device_kind or profile.platform or "this device"
        note = f"no published peaks known for {kind}: the achieved rates alone"
        return Roofline(None, points, note)
    return Roofline(peaks, points, "")


def point(kernel: KernelTime, peaks: Peaks | None) -> RooflinePoint | None:
    """The kernel's point, None where its FLOPs or bytes are unknown or it took no time."""
    if kernel.flops is None or kernel.bytes_accessed is None or kernel.mean_s <= 0:
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
    said = f"{si(p.flops_per_s)}FLOP/s · {si(p.bytes_per_s)}B/s"
    if p.intensity is not None:
        said += f" · {p.intensity:.1f} FLOP/B"
    if p.bound:
        said += f" · {p.bound}-bound"
    if p.of_roof is not None:
        said += f" ({p.of_roof:.0%} of the roof)"
    return said


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
