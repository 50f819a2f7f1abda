"""The fusion map and the kernel profile, added to a Report by the pipeline.

The pipeline calls `add_fusion_map` once XLA has compiled, and `add_profile` after
timing when asked to profile. The work itself lives in
`viz.fusion.map` and `viz.fusion.profile`. Never raise: a failure becomes a warning and
the other results stay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from viz.fusion.map import FusionMap, Side, fusion_map
from viz.ir.kernels import kernel_names
from viz.report import FusionCoverage, Report

PROFILE_RUNS = 5


def add_fusion_map(report: Report, sides: dict[str, Side] | None = None) -> Report:
    """`fusion_map` and `fusion_map_coverage` from the report's graph models (lines
    of `report.source_file` only), once; returns the report. Every report JSON
    carries it, so the pipeline builds it (bench/fusion_map_cost.py: a few percent
    of the compile on the 24-layer transformer). `sides`: the jaxpr's and StableHLO's
    `viz.fusion.map.prepare`, where the pipeline made them while XLA compiled."""
    if report.fusion_map_coverage is not None or "compiled" not in report.graph_models:
        return report
    try:
        found = fusion_map(report.graph_models, report.source_file, sides)
    except Exception as exc:  # a bug here must not hide the other results
        report.warnings.append(f"could not build the fusion map: {type(exc).__name__}: {exc}")
        return report
    return put_fusion_map(report, found)


def put_fusion_map(report: Report, found: FusionMap) -> Report:
    """A fusion map made already (by the pipeline, while XLA generated code) into the report."""
    report.fusion_map = found.entries
    report.fusion_map_coverage = FusionCoverage(**found.coverage)
    return report


def add_profile(
    report: Report, call: Callable[[], Any], block: Callable[[Any], Any], runs: int
) -> None:
    """`profile`: per-kernel time of `runs` (at most PROFILE_RUNS) profiled calls."""
    if runs <= 0:
        report.warnings.append(
            "profile: nothing to profile with runs=0 (compile only); analyze with runs > 0"
        )
        return
    compiled = report.graph_models.get("compiled")
    if compiled is None or not report.ok:
        return
    from viz.fusion.profile import profile_kernels

    try:
        result = profile_kernels(call, block, kernel_names(compiled), min(runs, PROFILE_RUNS))
    except Exception as exc:  # e.g. another profiler session is running
        report.warnings.append(f"profile failed: {type(exc).__name__}: {exc}")
        return
    report.profile = result
    if not result.per_kernel_events:
        report.warnings.append(
            f"profile: this platform ({report.device}) emitted no per-kernel trace events"
        )
    elif result.concurrent:
        report.warnings.append(
            "profile: kernels ran at the same time, so their shares add up to more than 1"
        )
