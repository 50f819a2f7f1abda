"""A report's summary numbers, and one number on both sides of a diff.

`numbers(report)` is what the history keeps for every run: the counts (by
`COUNT_PATHS` name), timings, cost, memory and the two op histograms, None for a
number the report lacks. A `Delta` is one number in A and in B, `delta = b − a`
(None when either side lacks it). Never raises; no jax.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from viz.ir.model import IR
from viz.plain import Plain
from viz.report import Cost, Memory, Report, Timings

COUNT_PATHS = {
    "jaxpr.eqn_count": (IR.JAXPR, "eqn_count"),
    "stablehlo.op_count": (IR.STABLEHLO, "op_count"),
    "compiled.op_count": (IR.COMPILED, "op_count"),
    "compiled.kernel_count": (IR.COMPILED, "kernel_count"),
    "compiled.fusion_count": (IR.COMPILED, "fusion_count"),
}


def _numbers(section: type, leave_out: tuple[str, ...] = ()) -> tuple[str, ...]:
    """A report section's numeric fields, in its order (a flag, a list or a record is
    not a number)."""
    numeric = ("int", "float", "int | None", "float | None")
    return tuple(f.name for f in fields(section) if f.type in numeric and f.name not in leave_out)


TIMING_KEYS = _numbers(Timings)
COST_KEYS = _numbers(Cost)
# the memory limit is the worker's or the device's, not the program's
MEMORY_KEYS = _numbers(Memory, leave_out=("limit_bytes",))

Number = int | float


def _number(value: Any) -> Number | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _value(section: Any, key: str) -> Number | None:
    """A number of a report section (None when the section or the number is missing)."""
    return None if section is None else _number(getattr(section, key))


def numbers(report: Report) -> dict[str, Any]:
    """The summary numbers of one report (what history keeps for every run)."""
    compiled, stablehlo = report.compiled, report.stablehlo
    return {
        "counts": {
            name: _value(report.section(ir), key) for name, (ir, key) in COUNT_PATHS.items()
        },
        "timings": {k: _value(report.timings, k) for k in TIMING_KEYS},
        "cost": {k: _value(report.cost, k) for k in COST_KEYS},
        "memory": {k: _value(report.memory, k) for k in MEMORY_KEYS},
        "ops": dict(compiled.ops) if compiled else {},
        "stablehlo_ops": dict(stablehlo.ops) if stablehlo else {},
    }


def donated_names(report: Report) -> list[str]:
    """Names of the arguments XLA was asked to donate (DESIGN.md's `donation.args`)."""
    donation = report.donation
    return [a.name for a in donation.args if a.donated] if donation else []


@dataclass
class Delta(Plain):
    """One number on both sides; delta = b − a (None when either side lacks it)."""

    a: Number | None
    b: Number | None
    delta: Number | None


def delta(a: Number | None, b: Number | None) -> Delta:
    return Delta(a, b, b - a if a is not None and b is not None else None)


def key_deltas(
    a: dict[str, Any], b: dict[str, Any], keys: list[str] | tuple[str, ...]
) -> dict[str, Delta]:
    """The `Delta` of each of `keys`, in that order."""
    return {k: delta(a[k], b[k]) for k in keys}


def histogram_deltas(a: dict[str, int] | None, b: dict[str, int] | None) -> dict[str, Delta]:
    """Every op of either side, biggest change first; an op missing on one side is 0,
    on a side whose histogram is not known (None: a failed run's) None."""
    ops = sorted(
        set(a or {}) | set(b or {}),
        key=lambda op: (-abs((b or {}).get(op, 0) - (a or {}).get(op, 0)), op),
    )
    return {
        op: delta(None if a is None else a.get(op, 0), None if b is None else b.get(op, 0))
        for op in ops
    }
