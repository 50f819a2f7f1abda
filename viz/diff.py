"""The diff of two analyses: what changed between report A and report B.

`diff_reports(a, b)` takes two report dicts (`Report.to_dict()`, a worker result, a
JSON file or `History.report(id)`) and returns DESIGN.md's diff JSON, every number
as `{a, b, delta}` with `delta = b − a` (None when either side lacks it):

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
- `a`, `b`: what each side ran (function, args, static, device, options, history id).

Plain data in, plain data out; no jax.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from viz import format as fmt
from viz.report import Cost, Memory, Timings

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


def _section(report: dict[str, Any], name: str) -> dict[str, Any]:
    return report.get(name) or {}


def numbers(report: dict[str, Any]) -> dict[str, Any]:
    """The summary numbers of one report (what history keeps for every run)."""
    return {
        "counts": {
            name: _number(_section(report, ir).get(key)) for name, (ir, key) in COUNT_PATHS.items()
        },
        "timings": {k: _number(_section(report, "timings").get(k)) for k in TIMING_KEYS},
        "cost": {k: _number(_section(report, "cost").get(k)) for k in COST_KEYS},
        "memory": {k: _number(_section(report, "memory").get(k)) for k in MEMORY_KEYS},
        "ops": dict(_section(report, "compiled").get("ops") or {}),
        "stablehlo_ops": dict(_section(report, "stablehlo").get("ops") or {}),
    }


def delta(a: Number | None, b: Number | None) -> dict[str, Number | None]:
    return {"a": a, "b": b, "delta": b - a if a is not None and b is not None else None}


def _deltas(
    a: dict[str, Any], b: dict[str, Any], keys: list[str] | tuple[str, ...]
) -> dict[str, Any]:
    return {k: delta(_number(a.get(k)), _number(b.get(k))) for k in keys}


def _histogram_deltas(a: dict[str, int], b: dict[str, int]) -> dict[str, Any]:
    """Every op of either side, biggest change first; an op missing on one side is 0."""
    ops = sorted(set(a) | set(b), key=lambda op: (-abs(b.get(op, 0) - a.get(op, 0)), op))
    return {op: delta(a.get(op, 0), b.get(op, 0)) for op in ops}


def side(report: dict[str, Any]) -> dict[str, Any]:
    """What one side ran, for headers: function, args, options, history id."""
    hist = report.get("history") or {}
    return {
        "id": hist.get("id"),
        "when": hist.get("when"),
        "full": hist.get("full", True),
        "function": report.get("function"),
        "args": report.get("args"),
        "static": report.get("static") or [],
        "device": report.get("device"),
        "ok": report.get("ok"),
        "compiler_options": report.get("compiler_options") or {},
        "donate": [
            a.get("name")
            for a in (report.get("donation") or {}).get("args") or []
            if a.get("donated")
        ],
    }


def label(report: dict[str, Any], fallback: str) -> str:
    """`#12 f(f32[8])`, or `A f(f32[8])` for a report outside the history."""
    hist_id = (report.get("history") or {}).get("id")
    prefix = f"#{hist_id}" if hist_id is not None else fallback
    return f"{prefix} {report.get('function') or '?'}({report.get('args') or ''})"


def diff_reports(a: dict[str, Any], b: dict[str, Any], context: int = 3) -> dict[str, Any]:
    """DESIGN.md's diff JSON for report `a` → report `b` (delta = b − a)."""
    na, nb = numbers(a), numbers(b)
    timing_keys = [
        k for k in TIMING_KEYS if na["timings"][k] is not None or nb["timings"][k] is not None
    ]
    return {
        "a": side(a),
        "b": side(b),
        "counts": _deltas(na["counts"], nb["counts"], list(COUNT_PATHS)),
        "timings": _deltas(na["timings"], nb["timings"], timing_keys),
        "cost": _deltas(na["cost"], nb["cost"], COST_KEYS),
        "memory": _deltas(na["memory"], nb["memory"], MEMORY_KEYS),
        "kernels": diff_kernels(a.get("kernels"), b.get("kernels")),
        "ops": _histogram_deltas(na["ops"], nb["ops"]),
        "stablehlo_ops": _histogram_deltas(na["stablehlo_ops"], nb["stablehlo_ops"]),
        "ir": {ir: diff_text(a, b, ir, context) for ir in IRS},
    }


# -- kernels -------------------------------------------------------------------
def _brief(kernel: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": kernel.get("name"),
        "kind": kernel.get("kind"),
        "ops": dict(kernel.get("ops") or {}),
        "lines": list(kernel.get("lines") or []),
    }


def _ops_key(k: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((k.get("ops") or {}).items()))


def _lines_key(k: dict[str, Any]) -> tuple[int, ...]:
    return tuple(k.get("lines") or [])


# Matching passes, strictest first. A pass pairs kernels with equal keys; a key of
# None never pairs (a kernel without source lines cannot match by lines alone).
_PASSES: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("same", lambda k: (k.get("kind"), _ops_key(k), _lines_key(k))),
    ("ops", lambda k: (k.get("kind"), _lines_key(k)) if _lines_key(k) else None),
    ("lines", lambda k: (k.get("kind"), _ops_key(k))),
    ("kind", lambda k: _lines_key(k) or None),
]
SIMILAR = 0.5  # last pass: same kind and at least this share of ops and lines in common


def _overlap(x: Counter[Any], y: Counter[Any]) -> float:
    union = sum((x | y).values())
    return sum((x & y).values()) / union if union else 1.0


def _similarity(ka: dict[str, Any], kb: dict[str, Any]) -> float:
    """How alike two kernels of the same kind are: ops and source lines in common."""
    if ka.get("kind") != kb.get("kind"):
        return 0.0
    ops = _overlap(Counter(ka.get("ops") or {}), Counter(kb.get("ops") or {}))
    lines = _overlap(Counter(_lines_key(ka)), Counter(_lines_key(kb)))
    return (ops + lines) / 2


def _pair_similar(
    left: list[dict[str, Any]], right: list[dict[str, Any]]
) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], list[dict[str, Any]], list[dict[str, Any]]]:
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


def _pair(
    left: list[dict[str, Any]], right: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any]
) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Pair kernels with equal keys, in order; return the pairs and both leftovers."""
    waiting: dict[Any, list[dict[str, Any]]] = {}
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


def diff_kernels(a: list[dict[str, Any]] | None, b: list[dict[str, Any]] | None) -> dict[str, Any]:
    """Kernels added, removed and changed from `a` to `b`, matched by content."""
    if a is None or b is None:
        return {
            "added": [],
            "removed": [],
            "changed": [],
            "unchanged": None,
            "same": [],
            "note": "the full report was not kept, so its kernels are not known",
        }
    left, right = list(a), list(b)
    same, changed = [], []
    for name, key in _PASSES:
        pairs, left, right = _pair(left, right, key)
        if name == "same":
            same = [{**_brief(kb), "a": ka.get("name"), "b": kb.get("name")} for ka, kb in pairs]
        else:
            changed += [_change(ka, kb) for ka, kb in pairs]
    pairs, left, right = _pair_similar(left, right)
    changed += [_change(ka, kb) for ka, kb in pairs]
    return {
        "added": [_brief(k) for k in right],
        "removed": [_brief(k) for k in left],
        "changed": changed,
        "unchanged": len(same),
        "same": same,
        "note": "",
    }


def _change(ka: dict[str, Any], kb: dict[str, Any]) -> dict[str, Any]:
    ops_a, ops_b = Counter(ka.get("ops") or {}), Counter(kb.get("ops") or {})
    return {
        "a": _brief(ka),
        "b": _brief(kb),
        "ops": {
            op: d for op, d in _histogram_deltas(dict(ops_a), dict(ops_b)).items() if d["delta"]
        },
        "lines": {"a": _lines_key(ka), "b": _lines_key(kb)}
        if _lines_key(ka) != _lines_key(kb)
        else {},
        "kind": {"a": ka.get("kind"), "b": kb.get("kind")}
        if ka.get("kind") != kb.get("kind")
        else {},
    }


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


def diff_text(a: dict[str, Any], b: dict[str, Any], ir: str, context: int = 3) -> dict[str, Any]:
    """A unified diff of one IR's text; says so when a side's full report is gone."""
    ta, tb = _section(a, ir).get("text"), _section(b, ir).get("text")
    if ta is None or tb is None:
        gone = [label(r, name) for r, name, t in ((a, "A", ta), (b, "B", tb)) if t is None]
        return {
            "kept": False,
            "diff": None,
            "added": None,
            "removed": None,
            "note": f"the full report of {' and '.join(gone)} was not kept, so its "
            f"{ir} text is gone (history keeps the newest full reports only)",
        }
    lines = list(
        difflib.unified_diff(
            comparable(ir, ta),
            comparable(ir, tb),
            fromfile=label(a, "A"),
            tofile=label(b, "B"),
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
    return {
        "kept": True,
        "diff": "\n".join(lines),
        "added": added,
        "removed": removed,
        "note": note,
    }


def summarize(diff: dict[str, Any]) -> str:
    """A few lines for the terminal: each count and timing with its delta."""
    a, b = diff["a"], diff["b"]
    out = [
        f"A: {_who(a)}",
        f"B: {_who(b)}",
    ]
    for group in ("counts", "timings", "cost", "memory"):
        for name, d in diff[group].items():
            if d["a"] is None and d["b"] is None:
                continue
            a_, b_, delta = (human(group, name, d[k], k == "delta") for k in ("a", "b", "delta"))
            out.append(f"  {name:<24} {a_:>12} → {b_:>12}  Δ {delta}")
    k = diff["kernels"]
    if k["note"]:
        out.append(f"kernels: {k['note']}")
    else:
        out.append(
            f"kernels: {len(k['added'])} added, {len(k['removed'])} removed, "
            f"{len(k['changed'])} changed, {k['unchanged']} unchanged"
        )
    moved = [f"{op} {d['delta']:+d}" for op, d in diff["ops"].items() if d["delta"]]
    if moved:
        out.append("compiled ops: " + ", ".join(moved[:12]))
    return "\n".join(out)


def _who(s: dict[str, Any]) -> str:
    ident = f"#{s['id']} " if s.get("id") is not None else ""
    opts = " ".join(f"{k}={v}" for k, v in (s.get("compiler_options") or {}).items())
    return f"{ident}{s['function']}({s['args']}) on {s['device']}" + (f" [{opts}]" if opts else "")


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


def rows(diff: dict[str, Any], group: str) -> list[dict[str, str]]:
    """One display row per number of a group: A, B, Δ and the ratio B / A."""
    out = []
    for key, d in diff[group].items():
        a, b = d["a"], d["b"]
        ratio = f"{b / a:.2f}×" if a and b is not None else "–"
        out.append(
            {
                "": LABELS.get(key, key),
                "A": human(group, key, a),
                "B": human(group, key, b),
                "Δ (B − A)": human(group, key, d["delta"], signed=True),
                "B / A": ratio,
            }
        )
    return out
