"""The diff as people read it: display rows for the Diff page, a summary for the terminal.

`human` formats one number as the app shows it (seconds, bytes, SI or a count);
`rows`, `op_rows`, `kernel_rows` and `collective_rows` are the tables of a group of
numbers, of the op histograms, of the matched kernels and of the collectives;
`summarize` is `viz diff`'s few lines. They
only format a `Diff`: every number comes from it.
"""

from __future__ import annotations

from typing import Any

from viz import units
from viz.diff.deltas import Delta, Number
from viz.diff.model import Diff, DiffSide, KernelBrief, KernelChange, KernelDiff
from viz.diff.sharding import ShardingDiff
from viz.platforms import platform_of
from viz.report import LOOP_COST

LABELS = {
    "jaxpr.eqn_count": "jaxpr equations",
    "stablehlo.op_count": "StableHLO ops",
    "compiled.op_count": "compiled ops",
    "compiled.kernel_count": "compiled kernels",
    "compiled.fusion_count": "fusions",
    "trace_s": "trace",
    "lower_s": "lower",
    "compile_s": "compile",
    "first_call_s": "first call",
    "run_median_s": "run (median)",
    "run_min_s": "run (min)",
    "run_p90_s": "run (p90)",
    "eager_median_s": "eager (median)",
    "device_s": "device time per call",
    "runs": "timed runs",
    "flops": "FLOPs",
    "bytes_accessed": "bytes accessed",
    "transcendentals": "transcendentals",
    "argument_bytes": "arguments",
    "output_bytes": "outputs",
    "temp_bytes": "temporaries",
    "alias_bytes": "aliased",
    "generated_code_bytes": "generated code",
    "peak_bytes": "peak (live buffers)",
    "xla_peak_bytes": "XLA's peak_memory_in_bytes",
}


def human(group: str, key: str, value: Number | None, signed: bool = False) -> str:
    """A number as the app shows it: seconds, bytes, SI or a plain count."""
    if key.endswith("_s"):
        return units.seconds(value, signed)
    if group == "memory" or key == "bytes_accessed":
        return units.nbytes(value, signed)
    if group == "cost":
        return units.si(value, signed)
    return units.count(value, signed)


FAILED = "failed"  # a number a failed run never measured


def shown(group: str, key: str, value: Number | None, failed: bool = False) -> str:
    """`human`, where a number that a failed run never measured reads 'failed'."""
    return FAILED if failed and value is None else human(group, key, value)


def clock_note(diff: Diff) -> str | None:
    """Where the two device times per call are read on two clocks (a CPU's is the host's,
    the same as its wall time; an accelerator's is its own), the words that say so."""
    if "device_s" not in diff.timings:
        return None
    devices = [side.settings.device for side in (diff.a, diff.b)]
    own = [platform_of(device).trace_rules.device_clock for device in devices]
    if own[0] == own[1]:
        return None
    clocks = [
        f"{device}'s own clock" if by_device else f"the host's clock on {device} (its wall time)"
        for device, by_device in zip(devices, own, strict=True)
    ]
    return f"device time per call: A's is {clocks[0]}, B's {clocks[1]}"


def summarize(diff: Diff) -> str:
    """A few lines for the terminal: each count and timing with its delta."""
    out = [f"A: {_who(diff.a)}", f"B: {_who(diff.b)}"]
    for group, deltas in (
        ("counts", diff.counts),
        ("timings", diff.timings),
        ("cost", diff.cost),
        ("memory", diff.memory),
    ):
        for name, d in deltas.items():
            if d.a is None and d.b is None:
                continue
            a_, b_ = human(group, name, d.a), human(group, name, d.b)
            out.append(f"  {name:<24} {a_:>12} → {b_:>12}  Δ {human(group, name, d.delta, True)}")
    loops = diff.ops.get("while")
    if loops is not None and (loops.a or loops.b):
        out.append(f"cost: {LOOP_COST} (while loops: A {loops.a or 0}, B {loops.b or 0})")
    if diff.peak is not None and diff.peak.said:
        out.append(f"memory: {diff.peak.said}")
    k = diff.kernels
    if k.note:
        out.append(f"kernels: {k.note}")
    else:
        out.append(
            f"kernels: {len(k.added)} added, {len(k.removed)} removed, "
            f"{len(k.changed)} changed, {k.unchanged} unchanged"
        )
    moved = [f"{op} {units.count(d.delta, signed=True)}" for op, d in diff.ops.items() if d.delta]
    if moved:
        out.append("compiled ops: " + ", ".join(moved[:12]))
    if diff.sharding is not None:
        out.append(collectives_line(diff.sharding))
    return "\n".join(out)


def collectives_line(s: ShardingDiff) -> str:
    """`collectives: all-reduce f32 1 → 2 (+1), all-gather f32 0 → 2 (+2)`."""
    moved = [
        f"{c.kind} {c.dtype} {c.count.a} → {c.count.b} ({units.count(c.count.delta, True)})"
        for c in s.collectives
        if c.count.delta
    ]
    return "collectives: " + (", ".join(moved) if moved else "the same kinds and counts")


def _lines(lines: list[int]) -> str:
    return ", ".join(map(str, lines))


def arg_change_rows(s: ShardingDiff) -> list[dict[str, str]]:
    """One display row per argument leaf split differently: A and B."""
    return [{"argument": c.arg, "A": c.a, "B": c.b} for c in s.args]


def collective_rows(s: ShardingDiff) -> list[dict[str, Any]]:
    """One display row per kind of collective (and element type): count and bytes per
    device in A and B with their deltas, and the source lines on each side."""
    return [
        {
            "collective": f"{c.kind} ({c.dtype})",
            "A": c.count.a,
            "B": c.count.b,
            "Δ count": units.count(c.count.delta, True),
            "bytes/device A": units.nbytes(c.bytes_per_device.a),
            "bytes/device B": units.nbytes(c.bytes_per_device.b),
            "Δ bytes/device": units.nbytes(c.bytes_per_device.delta, True),
            "lines A": _lines(c.lines_a),
            "lines B": _lines(c.lines_b),
        }
        for c in s.collectives
    ]


def _who(side: DiffSide) -> str:
    ident = f"#{side.id} " if side.id is not None else ""
    s = side.settings
    opts = " ".join(f"{k}={v}" for k, v in s.compiler_options.items())
    return f"{ident}{s.function}({s.args}) on {s.device}" + (f" [{opts}]" if opts else "")


def rows(
    group: str, deltas: dict[str, Delta], failed: tuple[bool, bool] = (False, False)
) -> list[dict[str, str | None]]:
    """One display row per number of a group (`timings`, `cost`, `memory`): A, B, Δ and
    the ratio B / A (`failed`: whether run A, run B failed)."""
    out = []
    for key, d in deltas.items():
        ratio = f"{d.b / d.a:.2f}×" if d.a and d.b is not None else None
        out.append(
            {
                "": LABELS.get(key, key),
                "A": shown(group, key, d.a, failed[0]),
                "B": shown(group, key, d.b, failed[1]),
                "Δ (B − A)": human(group, key, d.delta, signed=True),
                "B / A": ratio,
            }
        )
    return out


def op_rows(
    deltas: dict[str, Delta], every: bool = False, failed: tuple[bool, bool] = (False, False)
) -> list[dict[str, Any]]:
    """One display row per op type whose count changed or is not known on a failed
    side (every op type with `every`)."""
    return [
        {
            "op": op,
            "A": d.a if d.a is not None else shown("ops", op, None, failed[0]),
            "B": d.b if d.b is not None else shown("ops", op, None, failed[1]),
            "Δ": units.count(d.delta, signed=True),
        }
        for op, d in deltas.items()
        if every or d.delta != 0
    ]


def _ops_text(kernel: KernelBrief) -> str:
    return ", ".join(f"{op} ×{n}" for op, n in kernel.ops.items())


def _what_changed(c: KernelChange) -> str:
    change = [f"{op} {units.count(d.delta, signed=True)}" for op, d in c.ops.items()]
    if c.lines:
        gone = sorted(set(c.lines["a"]) - set(c.lines["b"]))
        new = sorted(set(c.lines["b"]) - set(c.lines["a"]))
        change.append(
            "source lines " + ", ".join([*(f"−{x}" for x in gone), *(f"+{x}" for x in new)])
        )
    if c.kind:
        change.append(f"kind {c.kind['a']} → {c.kind['b']}")
    return "; ".join(change)


def kernel_rows(k: KernelDiff) -> list[dict[str, str]]:
    """One display row per kernel: changed ones first (what changed in each), then
    added, removed and unchanged ones, each with its name in A and B and its ops."""
    table = [
        {
            "": "changed",
            "A": c.a.name,
            "B": c.b.name,
            "kind": c.b.kind,
            "what changed": _what_changed(c),
            "ops inside": _ops_text(c.b),
        }
        for c in k.changed
    ]
    for status, kernels in (("added", k.added), ("removed", k.removed)):
        table += [
            {
                "": status,
                "A": kernel.name if status == "removed" else "",
                "B": kernel.name if status == "added" else "",
                "kind": kernel.kind,
                "what changed": "lines " + ", ".join(map(str, kernel.lines)),
                "ops inside": _ops_text(kernel),
            }
            for kernel in kernels
        ]
    table += [
        {
            "": "unchanged",
            "A": same.a,
            "B": same.b,
            "kind": same.kind,
            "what changed": "",
            "ops inside": _ops_text(same),
        }
        for same in k.same
    ]
    return table
