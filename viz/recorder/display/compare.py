"""What changed between two recordings of a program: `python -m viz diff A B` and the
Recordings page's "Compare with…" (stdlib only).

Functions are matched across the runs by name and defined-at line, then, for those
left, by name and file (an edit above a function moves its line), then by name alone
when that is unique on both sides. A function is `added`, `removed`, `changed` (its
compile count, its disk hits or its reasons differ; compile seconds alone are noise)
or `same`. Every number is `{a, b, delta}` with `delta = b − a`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from viz.recorder.model import FunctionStats, Recording, short_path
from viz.units import count, plural, seconds


def delta(a: float | None, b: float | None) -> dict[str, Any]:
    return {"a": a, "b": b, "delta": None if a is None or b is None else b - a}


@dataclass
class FunctionDiff:
    function: str
    defined_at: str  # B's, or A's for a removed function
    status: str  # added | removed | changed | same
    compiles: dict[str, Any]
    compile_s: dict[str, Any]
    persistent_hits: dict[str, Any]
    reasons: dict[str, dict[str, Any]]


@dataclass
class RecordingDiff:
    a: str  # what each side is: 'rec:12' or a file
    b: str
    functions: list[FunctionDiff] = field(default_factory=list)
    summary: dict[str, dict[str, Any]] = field(default_factory=dict)
    cwd: str = ""  # B's folder, for short paths in the text

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "functions": [f.__dict__ for f in self.functions],
            "summary": self.summary,
        }


def diff_recordings(
    a: Recording, b: Recording, names: tuple[str, str] = ("A", "B")
) -> RecordingDiff:
    pairs = _match([f for f in a.functions if not f.eager], [f for f in b.functions if not f.eager])
    functions = [_function_diff(fa, fb) for fa, fb in pairs]
    order = {"changed": 0, "added": 1, "removed": 2, "same": 3}
    functions.sort(key=lambda f: (order[f.status], -abs(f.compile_s["delta"] or 0.0)))
    sa, sb = a.summary, b.summary
    summary = {
        "compiles": delta(sa.compiles, sb.compiles),
        "compile_s": delta(sa.compile_s, sb.compile_s),
        "wall_s": delta(a.program.wall_s, b.program.wall_s),
        "eager_compiles": delta(sa.eager_compiles, sb.eager_compiles),
        "persistent_hits": delta(sa.persistent_hits, sb.persistent_hits),
    }
    return RecordingDiff(names[0], names[1], functions, summary, b.program.cwd)


def _match(
    a: list[FunctionStats], b: list[FunctionStats]
) -> list[tuple[FunctionStats | None, FunctionStats | None]]:
    pairs: list[tuple[FunctionStats | None, FunctionStats | None]] = []
    left_a, left_b = list(a), list(b)
    for key in (
        lambda f: (f.name, f.defined_at),
        lambda f: (f.name, f.defined_at.rpartition(":")[0]),
        lambda f: f.name,
    ):
        by_a = _unique(left_a, key)
        by_b = _unique(left_b, key)
        for k in [k for k in by_a if k in by_b]:
            pairs.append((by_a[k], by_b[k]))
            left_a.remove(by_a[k])
            left_b.remove(by_b[k])
    pairs += [(f, None) for f in left_a] + [(None, f) for f in left_b]
    return pairs


def _unique(functions: list[FunctionStats], key: Any) -> dict[Any, FunctionStats]:
    seen: dict[Any, list[FunctionStats]] = {}
    for f in functions:
        seen.setdefault(key(f), []).append(f)
    return {k: fs[0] for k, fs in seen.items() if len(fs) == 1}


def _function_diff(fa: FunctionStats | None, fb: FunctionStats | None) -> FunctionDiff:
    either = fb or fa
    assert either is not None
    kinds = sorted(set(fa.reasons if fa else {}) | set(fb.reasons if fb else {}))
    reasons = {
        k: delta((fa.reasons.get(k, 0) if fa else None), (fb.reasons.get(k, 0) if fb else None))
        for k in kinds
    }
    if fa is None or fb is None:
        status = "added" if fa is None else "removed"
    else:
        same = (fa.compiles, fa.persistent_hits, fa.reasons) == (
            fb.compiles,
            fb.persistent_hits,
            fb.reasons,
        )
        status = "same" if same else "changed"
    return FunctionDiff(
        function=either.name,
        defined_at=either.defined_at,
        status=status,
        compiles=delta(fa.compiles if fa else None, fb.compiles if fb else None),
        compile_s=delta(fa.compile_s if fa else None, fb.compile_s if fb else None),
        persistent_hits=delta(
            fa.persistent_hits if fa else None, fb.persistent_hits if fb else None
        ),
        reasons=reasons,
    )


def _show(value: float | None, time: bool) -> str:
    return seconds(value) if time else count(value)


def _number(d: dict[str, Any], time: bool = False) -> str:
    """'3 → 5 (+2)', '1.2 s → 0.8 s (−400 ms)', '– → 4'."""
    both = f"{_show(d['a'], time)} → {_show(d['b'], time)}"
    change = d["delta"]
    if change is None:
        return both
    sign = "+" if change > 0 else ("−" if change < 0 else "±")
    return f"{both} ({sign}{_show(abs(change), time)})"


def diff_text(diff: RecordingDiff) -> str:
    """The terminal summary: the totals, then each function that is not the same."""
    s = diff.summary
    lines = [
        f"recordings {diff.a} → {diff.b}",
        f"compiles {_number(s['compiles'])} · compile time {_number(s['compile_s'], True)} · "
        f"wall time {_number(s['wall_s'], True)}",
    ]
    changed = [f for f in diff.functions if f.status != "same"]
    for f in changed:
        why = ", ".join(
            f"{kind} {_number(d)}" for kind, d in f.reasons.items() if d["delta"] not in (0, None)
        )
        lines.append(
            f"  {f.status:<8} {f.function} ({short_path(f.defined_at, diff.cwd)}): compiles "
            f"{_number(f.compiles)}, {_number(f.compile_s, True)}" + (f"; {why}" if why else "")
        )
    same = len(diff.functions) - len(changed)
    if same:
        lines.append(f"  {plural(same, 'function')} the same")
    return "\n".join(lines)


def diff_rows(diff: RecordingDiff) -> list[dict[str, Any]]:
    """The Recordings page's table of the diff: one row per function."""
    return [
        {
            "function": f.function,
            "status": f.status,
            "compiles": _number(f.compiles),
            "compile time": _number(f.compile_s, time=True),
            "from disk": _number(f.persistent_hits),
            "defined at": short_path(f.defined_at, diff.cwd),
        }
        for f in diff.functions
    ]
