"""The diff of two analyses: what changed between report A and report B.

`diff_reports(a, b)` takes two `Report`s (an analysis, a report JSON file decoded with
`Report.from_dict`, `History.report(id)`) and returns a `Diff`, whose `to_dict()` is
DESIGN.md's diff JSON: every number as `{a, b, delta}` with `delta = b − a` (None when
either side lacks it):

- `counts{jaxpr.eqn_count, stablehlo.op_count, compiled.op_count,
  compiled.kernel_count, compiled.fusion_count}`, `timings{…}`, `cost{…}`, `memory{…}`;
- `kernels{added, removed, changed, unchanged, same}`: fused kernels matched across the
  runs by kind, the ops inside and their source lines, never by name (XLA renumbers
  `fusion.12` freely). A changed kernel kept its kind and lines but not its ops, its
  kind and ops but not its lines, or its kind and most of its ops and lines. `same`
  lists the unchanged ones (their names in A and in B), `unchanged` counts them;
- `ops{op: {a, b, delta}}` (the compiled program's ops by type) and
  `stablehlo_ops{…}`;
- `ir{jaxpr|stablehlo|compiled: {kept, diff, added, removed, note}}`: a unified text
  diff of each IR, when both reports still carry the text. The compiled HLO is
  compared without its `metadata={…}` and stack-frame tables: they hold file paths
  (user code is named by its hash) and jitscope's own frames, which differ between
  any two runs;
- `a`, `b`: what each side ran (function, args, static, device, options) and, for a
  run of the history, its `Origin` (id, when, whether its full report is kept).

A run whose full report the history no longer keeps is numbers only: pass its
`Origin` (`full=False`) and the diff says its texts and kernels are gone instead of
comparing empty ones. Typed data in, typed data out; no jax.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from viz import format as fmt
from viz.plain import Plain
from viz.report import Cost, Kernel, Memory, Report, Timings

COUNT_PATHS = {
    "jaxpr.eqn_count": ("jaxpr", "eqn_count"),
    "stablehlo.op_count": ("stablehlo", "op_count"),
    "compiled.op_count": ("compiled", "op_count"),
    "compiled.kernel_count": ("compiled", "kernel_count"),
    "compiled.fusion_count": ("compiled", "fusion_count"),
}


def _numbers(section: type) -> tuple[str, ...]:
    """A report section's numeric fields, in its order (a flag is not a number)."""
    return tuple(f.name for f in fields(section) if f.type != "bool")


TIMING_KEYS = _numbers(Timings)
COST_KEYS = _numbers(Cost)
MEMORY_KEYS = _numbers(Memory)
IRS = ("jaxpr", "stablehlo", "compiled")
MAX_DIFF_LINES = 3000  # a diff of two 24-layer programs can be tens of thousands of lines

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
            name: _value(getattr(report, ir), key) for name, (ir, key) in COUNT_PATHS.items()
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


# -- the diff, as data ---------------------------------------------------------
@dataclass(frozen=True)
class Origin:
    """Where one side of a diff comes from: its run in the history, and whether the
    history still keeps its full report (else it is numbers only: no texts, kernels or
    graphs). A report from elsewhere (a JSON file, this session) has the default."""

    id: int | None = None
    when: str | None = None
    full: bool = True


@dataclass
class Delta(Plain):
    """One number on both sides; delta = b − a (None when either side lacks it)."""

    a: Number | None
    b: Number | None
    delta: Number | None


def delta(a: Number | None, b: Number | None) -> Delta:
    return Delta(a, b, b - a if a is not None and b is not None else None)


@dataclass
class DiffSide(Plain):
    """What one side ran, for headers (`donate`: the arguments XLA was asked to donate)."""

    id: int | None
    when: str | None
    full: bool
    function: str
    args: str
    static: list[str]
    device: str
    ok: bool
    compiler_options: dict[str, Any]
    donate: list[str]


@dataclass
class KernelBrief(Plain):
    name: str
    kind: str
    ops: dict[str, int]
    lines: list[int]


@dataclass
class SameKernel(KernelBrief):
    """An unchanged kernel, with its name in A and in B."""

    a: str = ""
    b: str = ""


@dataclass
class KernelChange(Plain):
    """A kernel matched across the runs that changed: the ops that moved, and its
    source lines and kind on both sides when they differ (else `{}`)."""

    a: KernelBrief
    b: KernelBrief
    ops: dict[str, Delta]
    lines: dict[str, tuple[int, ...]]
    kind: dict[str, str]


@dataclass
class KernelDiff(Plain):
    added: list[KernelBrief] = field(default_factory=list)
    removed: list[KernelBrief] = field(default_factory=list)
    changed: list[KernelChange] = field(default_factory=list)
    unchanged: int | None = None  # None: a side's kernels are not known
    same: list[SameKernel] = field(default_factory=list)
    note: str = ""  # why the kernels are not known ('' when they are)


@dataclass
class TextDiff(Plain):
    """A unified diff of one IR's text; `kept` False (and `note`) when a side's is gone."""

    kept: bool
    diff: str | None
    added: int | None
    removed: int | None
    note: str


@dataclass
class Diff(Plain):
    """Report A → report B; `to_dict()` is DESIGN.md's diff JSON."""

    a: DiffSide
    b: DiffSide
    counts: dict[str, Delta]
    timings: dict[str, Delta]
    cost: dict[str, Delta]
    memory: dict[str, Delta]
    kernels: KernelDiff
    ops: dict[str, Delta]
    stablehlo_ops: dict[str, Delta]
    ir: dict[str, TextDiff]


def _deltas(
    a: dict[str, Any], b: dict[str, Any], keys: list[str] | tuple[str, ...]
) -> dict[str, Delta]:
    return {k: delta(a[k], b[k]) for k in keys}


def _histogram_deltas(a: dict[str, int], b: dict[str, int]) -> dict[str, Delta]:
    """Every op of either side, biggest change first; an op missing on one side is 0."""
    ops = sorted(set(a) | set(b), key=lambda op: (-abs(b.get(op, 0) - a.get(op, 0)), op))
    return {op: delta(a.get(op, 0), b.get(op, 0)) for op in ops}


def side(report: Report, origin: Origin | None = None) -> DiffSide:
    """What one side ran, for headers: function, args, options, history id."""
    origin = origin or Origin()
    return DiffSide(
        id=origin.id,
        when=origin.when,
        full=origin.full,
        function=report.function,
        args=report.args,
        static=list(report.static),
        device=report.device,
        ok=report.ok,
        compiler_options=dict(report.compiler_options),
        donate=donated_names(report),
    )


def label(report: Report, origin: Origin | None, fallback: str) -> str:
    """`#12 f(f32[8])`, or `A f(f32[8])` for a report outside the history."""
    hist_id = origin.id if origin else None
    prefix = f"#{hist_id}" if hist_id is not None else fallback
    return f"{prefix} {report.function or '?'}({report.args})"


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
    na, nb = numbers(a), numbers(b)
    timing_keys = [
        k for k in TIMING_KEYS if na["timings"][k] is not None or nb["timings"][k] is not None
    ]
    return Diff(
        a=side(a, oa),
        b=side(b, ob),
        counts=_deltas(na["counts"], nb["counts"], list(COUNT_PATHS)),
        timings=_deltas(na["timings"], nb["timings"], timing_keys),
        cost=_deltas(na["cost"], nb["cost"], COST_KEYS),
        memory=_deltas(na["memory"], nb["memory"], MEMORY_KEYS),
        kernels=diff_kernels(a.kernels if oa.full else None, b.kernels if ob.full else None),
        ops=_histogram_deltas(na["ops"], nb["ops"]),
        stablehlo_ops=_histogram_deltas(na["stablehlo_ops"], nb["stablehlo_ops"]),
        ir={ir: diff_text(a, b, ir, context, origins=(oa, ob)) for ir in IRS},
    )


# -- kernels -------------------------------------------------------------------
def _brief(kernel: Kernel) -> KernelBrief:
    return KernelBrief(kernel.name, kernel.kind, dict(kernel.ops), list(kernel.lines))


def _ops_key(k: Kernel) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(k.ops.items()))


def _lines_key(k: Kernel) -> tuple[int, ...]:
    return tuple(k.lines)


# Matching passes, strictest first. A pass pairs kernels with equal keys; a key of
# None never pairs (a kernel without source lines cannot match by lines alone).
_PASSES: list[tuple[str, Callable[[Kernel], Any]]] = [
    ("same", lambda k: (k.kind, _ops_key(k), _lines_key(k))),
    ("ops", lambda k: (k.kind, _lines_key(k)) if _lines_key(k) else None),
    ("lines", lambda k: (k.kind, _ops_key(k))),
    ("kind", lambda k: _lines_key(k) or None),
]
SIMILAR = 0.5  # last pass: same kind and at least this share of ops and lines in common

Pairs = tuple[list[tuple[Kernel, Kernel]], list[Kernel], list[Kernel]]


def _overlap(x: Counter[Any], y: Counter[Any]) -> float:
    union = sum((x | y).values())
    return sum((x & y).values()) / union if union else 1.0


def _similarity(ka: Kernel, kb: Kernel) -> float:
    """How alike two kernels of the same kind are: ops and source lines in common."""
    if ka.kind != kb.kind:
        return 0.0
    ops = _overlap(Counter(ka.ops), Counter(kb.ops))
    lines = _overlap(Counter(_lines_key(ka)), Counter(_lines_key(kb)))
    return (ops + lines) / 2


def _pair_similar(left: list[Kernel], right: list[Kernel]) -> Pairs:
    """An edited kernel (a line added above it, an op removed): pair it with the most
    alike kernel left on the other side, if alike enough."""
    pairs, rest_left, rest_right = [], [], list(right)
    for k in left:
        scored = [(_similarity(k, r), i) for i, r in enumerate(rest_right)]
        best = max(scored, default=(0.0, -1))
        if best[0] >= SIMILAR:
            pairs.append((k, rest_right.pop(best[1])))
        else:
            rest_left.append(k)
    return pairs, rest_left, rest_right


def _pair(left: list[Kernel], right: list[Kernel], key: Callable[[Kernel], Any]) -> Pairs:
    """Pair kernels with equal keys, in order; return the pairs and both leftovers."""
    waiting: dict[Any, list[Kernel]] = {}
    for k in right:
        waiting.setdefault(key(k), []).append(k)
    pairs, rest_left = [], []
    for k in left:
        kk = key(k)
        if kk is not None and waiting.get(kk):
            pairs.append((k, waiting[kk].pop(0)))
        else:
            rest_left.append(k)
    paired = {id(r) for _, r in pairs}
    return pairs, rest_left, [k for k in right if id(k) not in paired]


def diff_kernels(a: list[Kernel] | None, b: list[Kernel] | None) -> KernelDiff:
    """Kernels added, removed and changed from `a` to `b`, matched by content (None: a
    side whose kernels are not known)."""
    if a is None or b is None:
        return KernelDiff(note="the full report was not kept, so its kernels are not known")
    left, right = list(a), list(b)
    same: list[SameKernel] = []
    changed: list[KernelChange] = []
    for name, key in _PASSES:
        pairs, left, right = _pair(left, right, key)
        if name == "same":
            same = [SameKernel(**_brief(kb).to_dict(), a=ka.name, b=kb.name) for ka, kb in pairs]
        else:
            changed += [_change(ka, kb) for ka, kb in pairs]
    pairs, left, right = _pair_similar(left, right)
    changed += [_change(ka, kb) for ka, kb in pairs]
    return KernelDiff(
        added=[_brief(k) for k in right],
        removed=[_brief(k) for k in left],
        changed=changed,
        unchanged=len(same),
        same=same,
    )


def _change(ka: Kernel, kb: Kernel) -> KernelChange:
    ops = _histogram_deltas(dict(ka.ops), dict(kb.ops))
    lines_a, lines_b = _lines_key(ka), _lines_key(kb)
    return KernelChange(
        a=_brief(ka),
        b=_brief(kb),
        ops={op: d for op, d in ops.items() if d.delta},
        lines={"a": lines_a, "b": lines_b} if lines_a != lines_b else {},
        kind={"a": ka.kind, "b": kb.kind} if ka.kind != kb.kind else {},
    )


# -- IR text -------------------------------------------------------------------
_FRAME_TABLES = {"FileNames", "FunctionNames", "FileLocations", "StackFrames"}
_METADATA = re.compile(r",? metadata=\{[^{}]*\}")


def comparable(ir: str, text: str) -> list[str]:
    """The lines of an IR worth diffing: optimized HLO loses source metadata and the
    stack-frame tables (numbered rows under FileNames, FunctionNames, ...)."""
    if ir != "compiled":
        return text.splitlines()
    lines, in_table = [], False
    for line in text.splitlines():
        if line.strip() in _FRAME_TABLES:
            in_table = True
        elif in_table and (not line.strip() or line[:1].isdigit()):
            continue
        else:
            in_table = False
            lines.append(_METADATA.sub("", line))
    return lines


def _text(report: Report, ir: str, origin: Origin) -> str | None:
    """One IR's text, None when the report has no such section or is numbers only."""
    section = getattr(report, ir)
    return section.text if section is not None and origin.full else None


def diff_text(
    a: Report,
    b: Report,
    ir: str,
    context: int = 3,
    *,
    origins: tuple[Origin | None, Origin | None] = (None, None),
) -> TextDiff:
    """A unified diff of one IR's text; says so when a side's full report is gone."""
    oa, ob = (o or Origin() for o in origins)
    ta, tb = _text(a, ir, oa), _text(b, ir, ob)
    if ta is None or tb is None:
        gone = [
            label(r, o, name) for r, o, name, t in ((a, oa, "A", ta), (b, ob, "B", tb)) if t is None
        ]
        return TextDiff(
            kept=False,
            diff=None,
            added=None,
            removed=None,
            note=f"the full report of {' and '.join(gone)} was not kept, so its "
            f"{ir} text is gone (history keeps the newest full reports only)",
        )
    lines = list(
        difflib.unified_diff(
            comparable(ir, ta),
            comparable(ir, tb),
            fromfile=label(a, oa, "A"),
            tofile=label(b, ob, "B"),
            n=context,
            lineterm="",
        )
    )
    body = lines[2:]
    added = sum(1 for x in body if x.startswith("+"))
    removed = sum(1 for x in body if x.startswith("-"))
    note = "identical" if not lines else ""
    if len(lines) > MAX_DIFF_LINES:
        note = f"showing the first {MAX_DIFF_LINES} of {len(lines)} diff lines"
        lines = lines[:MAX_DIFF_LINES]
    return TextDiff(kept=True, diff="\n".join(lines), added=added, removed=removed, note=note)


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
    k = diff.kernels
    if k.note:
        out.append(f"kernels: {k.note}")
    else:
        out.append(
            f"kernels: {len(k.added)} added, {len(k.removed)} removed, "
            f"{len(k.changed)} changed, {k.unchanged} unchanged"
        )
    moved = [f"{op} {d.delta:+d}" for op, d in diff.ops.items() if d.delta]
    if moved:
        out.append("compiled ops: " + ", ".join(moved[:12]))
    return "\n".join(out)


def _who(s: DiffSide) -> str:
    ident = f"#{s.id} " if s.id is not None else ""
    opts = " ".join(f"{k}={v}" for k, v in s.compiler_options.items())
    return f"{ident}{s.function}({s.args}) on {s.device}" + (f" [{opts}]" if opts else "")


# -- display -------------------------------------------------------------------
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
    "runs": "timed runs",
    "flops": "FLOPs",
    "bytes_accessed": "bytes accessed",
    "transcendentals": "transcendentals",
    "argument_bytes": "arguments",
    "output_bytes": "outputs",
    "temp_bytes": "temporaries",
    "alias_bytes": "aliased",
    "generated_code_bytes": "generated code",
}


def human(group: str, key: str, value: Number | None, signed: bool = False) -> str:
    """A number as the app shows it: seconds, bytes, SI or a plain count."""
    if key.endswith("_s"):
        return fmt.seconds(value, signed)
    if group == "memory" or key == "bytes_accessed":
        return fmt.nbytes(value, signed)
    if group == "cost":
        return fmt.si(value, signed)
    return fmt.count(value, signed)


def rows(group: str, deltas: dict[str, Delta]) -> list[dict[str, str]]:
    """One display row per number of a group (`timings`, `cost`, `memory`): A, B, Δ and
    the ratio B / A."""
    out = []
    for key, d in deltas.items():
        ratio = f"{d.b / d.a:.2f}×" if d.a and d.b is not None else "–"
        out.append(
            {
                "": LABELS.get(key, key),
                "A": human(group, key, d.a),
                "B": human(group, key, d.b),
                "Δ (B − A)": human(group, key, d.delta, signed=True),
                "B / A": ratio,
            }
        )
    return out


def op_rows(deltas: dict[str, Delta], every: bool = False) -> list[dict[str, Any]]:
    """One display row per op type whose count changed (every op type with `every`)."""
    return [
        {"op": op, "A": d.a, "B": d.b, "Δ": d.delta} for op, d in deltas.items() if every or d.delta
    ]


def _ops_text(kernel: KernelBrief) -> str:
    return ", ".join(f"{op} ×{n}" for op, n in kernel.ops.items())


def _what_changed(c: KernelChange) -> str:
    change = [f"{op} {d.delta:+d}" for op, d in c.ops.items()]
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
