"""Two runs' memory peaks side by side: the peak on each side, its largest buffers, and
one sentence saying what the change did to it ("donation saved 64 MiB at the peak").

The change is named from the two sides' settings: more arguments donated, compiler
options, the arguments themselves; else "the change". No jax.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from viz.memory.model import PeakBuffer
from viz.plain import Plain
from viz.report import Report
from viz.settings import Settings
from viz.units import nbytes

TOP = 5  # buffers listed per side


@dataclass
class PeakDiff(Plain):
    """The peak of A and of B (bytes), the largest buffers there, and what changed it."""

    a: int | None  # A's peak, bytes (None: no memory profile)
    b: int | None  # B's
    a_buffers: list[PeakBuffer] = field(default_factory=list)  # the largest at A's peak
    b_buffers: list[PeakBuffer] = field(default_factory=list)  # at B's
    said: str = ""  # 'donation saved 64 MiB at the peak'


def diff_peak(a: Report, b: Report, ran_a: Settings, ran_b: Settings) -> PeakDiff | None:
    """None where neither report has a memory profile (an older report, a failed
    compile)."""
    pa, pb = (r.memory.peak_bytes if r.memory else None for r in (a, b))
    if pa is None and pb is None:
        return None
    return PeakDiff(
        pa,
        pb,
        _top(a),
        _top(b),
        said(pa, pb, cause(ran_a, ran_b)) if pa is not None and pb is not None else "",
    )


def _top(report: Report) -> list[PeakBuffer]:
    return list(report.memory.at_peak[:TOP]) if report.memory else []


def cause(a: Settings, b: Settings) -> str:
    """What B changed, in a few words: donation, a compiler option, the arguments."""
    if set(b.donate) > set(a.donate):
        return "donation"
    if set(a.donate) > set(b.donate):
        return "not donating"
    changed = {
        k: v for k, v in b.compiler_options.items() if a.compiler_options.get(k, object()) != v
    }
    if changed:
        return ", ".join(f"`{k}={v}`" for k, v in changed.items())
    dropped = [k for k in a.compiler_options if k not in b.compiler_options]
    if dropped:
        return "dropping " + ", ".join(f"`{k}`" for k in dropped)
    if a.args != b.args:
        return f"the arguments `{b.args}`"
    return "the change"


def said(a: int, b: int, what: str) -> str:
    """`donation saved 64 MiB at the peak` (A → B)."""
    if b < a:
        return f"{what} saved {nbytes(a - b)} at the peak ({nbytes(a)} → {nbytes(b)})"
    if b > a:
        return f"{what} added {nbytes(b - a)} at the peak ({nbytes(a)} → {nbytes(b)})"
    return f"{what} left the peak as it was ({nbytes(a)})"
