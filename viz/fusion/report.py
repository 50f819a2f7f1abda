"""The fusion map and the kernel profile, as the report's sections.

The pipeline asks for `fusion_map_section` once XLA has compiled (where it did not make
the map while XLA generated code), and for `profile_section` after timing when asked to
profile. The work itself lives in `viz.fusion.map` and `viz.fusion.profile`. Never
raise: a failure is a warning (`viz.sections.Found`) and the other results stay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from viz.found import Found
from viz.fusion.map import FusionMap, Side, fusion_map
from viz.fusion.profile import Profile
from viz.ir.kernels import kernel_names
from viz.ir.model import Graph

PROFILE_RUNS = 5


def fusion_map_section(
    graphs: dict[str, Graph], source_file: str | None, sides: dict[str, Side] | None = None
) -> Found[FusionMap] | None:
    """The fusion map of the IRs' graphs (lines of `source_file` only); None without a
    compiled graph to map onto. Every report JSON carries it, so the pipeline builds it
    (bench/fusion_map_cost.py: a few percent of the compile on the 24-layer
    transformer). `sides`: the jaxpr's and StableHLO's `viz.fusion.map.prepare`, where
    the pipeline made them while XLA compiled."""
    if "compiled" not in graphs:
        return None
    try:
        return Found(fusion_map(graphs, source_file, sides))
    except Exception as exc:  # a bug here must not hide the other results
        return Found.failed("could not build the fusion map", exc)


def profile_section(
    compiled: Graph | None,
    call: Callable[[], Any],
    block: Callable[[Any], Any],
    runs: int,
    device: str,
    program: str | None = None,
) -> Found[Profile] | None:
    """`profile`: per-kernel time of `runs` (at most PROFILE_RUNS) profiled calls of the
    `compiled` graph's kernels on `device` (None: no compiled graph to profile);
    `program`: the HLO module's name (the trace's runs of it are picked by it)."""
    if runs <= 0:
        return Found(
            warning="profile: nothing to profile with runs=0 (compile only); analyze with runs > 0"
        )
    if compiled is None:
        return None
    from viz.fusion.profile import profile_kernels

    try:
        result = profile_kernels(
            call,
            block,
            kernel_names(compiled),
            min(runs, PROFILE_RUNS),
            device=device,
            program=program,
        )
    except Exception as exc:  # e.g. another profiler session is running
        return Found.failed("profile failed", exc)
    if not result.per_kernel_events:
        return Found(
            result, f"profile: this platform ({device}) emitted no per-kernel trace events"
        )
    if result.concurrent:
        return Found(
            result, "profile: kernels ran at the same time, so their shares add up to more than 1"
        )
    return Found(result)
