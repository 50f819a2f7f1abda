"""`diff_reports(a, b)`: the whole diff of report A → report B, from its parts.

The numbers and the op histograms come from `viz.diff.deltas`, the kernels from
`viz.diff.kernels`, each IR's text diff from `viz.diff.text`; `side` is what each
side ran, for headers. A side whose `Origin` says its full report is not kept is
numbers only: its kernels and texts are said to be gone, never compared empty. A
side whose run failed has no more than it measured before failing: its op
histograms, kernels and timed runs are unknown (None), not zeros.
"""

from __future__ import annotations

from typing import Any

from viz.diff.deltas import (
    COST_KEYS,
    COUNT_PATHS,
    MEMORY_KEYS,
    TIMING_KEYS,
    donated_names,
    histogram_deltas,
    key_deltas,
    numbers,
)
from viz.diff.kernels import NOT_KEPT_KERNELS, diff_kernels
from viz.diff.model import Diff, DiffSide, KernelDiff, Origin
from viz.diff.peak import diff_peak
from viz.diff.sharding import diff_sharding
from viz.diff.text import diff_text, gone_note
from viz.ir.model import IRS
from viz.report import Report
from viz.settings import Settings


def side(report: Report, origin: Origin | None = None) -> DiffSide:
    """What one side ran, for headers: function, args, options, history id."""
    origin = origin or Origin()
    ran = Settings(
        function=report.function,
        args=report.args,
        static=list(report.static),
        donate=donated_names(report),
        device=report.device,
        compiler_options=dict(report.compiler_options),
    )
    return DiffSide(id=origin.id, when=origin.when, full=origin.full, ok=report.ok, settings=ran)


def _measured(report: Report) -> dict[str, Any]:
    """`numbers(report)`, where a failed run's unmeasured ones are None, not zeros: its
    timed runs, and the op histograms of the programs it never made."""
    n = numbers(report)
    if report.ok:
        return n
    n["timings"]["runs"] = n["timings"]["runs"] or None
    for hist, count in (("ops", "compiled.op_count"), ("stablehlo_ops", "stablehlo.op_count")):
        n[hist] = n[hist] if n["counts"][count] is not None else None
    return n


def _kernels(a: Report, b: Report, oa: Origin, ob: Origin) -> KernelDiff:
    """The kernels matched across the runs, or why a side's are not known."""
    known = [r.kernels if o.full and (r.ok or r.kernels) else None for r, o in ((a, oa), (b, ob))]
    unknown = tuple(
        (r, o, name)
        for r, o, name, k in zip((a, b), (oa, ob), "AB", known, strict=True)
        if k is None
    )
    return diff_kernels(*known, gone=gone_note(unknown, "kernels", NOT_KEPT_KERNELS))


def diff_reports(
    a: Report,
    b: Report,
    context: int = 3,
    *,
    origins: tuple[Origin | None, Origin | None] = (None, None),
) -> Diff:
    """Report `a` → report `b` (delta = b − a); `origins`: where each came from, when
    from the history (a pruned run's texts and kernels are gone)."""
    oa, ob = (o or Origin() for o in origins)
    sa, sb = side(a, oa), side(b, ob)
    na, nb = _measured(a), _measured(b)
    timing_keys = [
        k for k in TIMING_KEYS if na["timings"][k] is not None or nb["timings"][k] is not None
    ]
    return Diff(
        a=sa,
        b=sb,
        counts=key_deltas(na["counts"], nb["counts"], list(COUNT_PATHS)),
        timings=key_deltas(na["timings"], nb["timings"], timing_keys),
        cost=key_deltas(na["cost"], nb["cost"], COST_KEYS),
        memory=key_deltas(na["memory"], nb["memory"], MEMORY_KEYS),
        kernels=_kernels(a, b, oa, ob),
        ops=histogram_deltas(na["ops"], nb["ops"]),
        stablehlo_ops=histogram_deltas(na["stablehlo_ops"], nb["stablehlo_ops"]),
        ir={ir: diff_text(a, b, ir, context, origins=(oa, ob)) for ir in IRS},
        sharding=diff_sharding(a, b),
        peak=diff_peak(a, b, sa.settings, sb.settings),
    )
