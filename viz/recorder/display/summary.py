"""The recording in a few lines, for stderr at the program's exit (stdlib only)."""

from __future__ import annotations

from collections import Counter

from viz.recorder.model import (
    Compile,
    FunctionStats,
    Recording,
    Summary,
    change_text,
    short_path,
)
from viz.units import nbytes, plural, seconds

MAX_FUNCTIONS = 12  # rows of the ranking
MAX_ERRORS = 5  # distinct recorder errors printed
# op-by-op compiles worth a word of advice: on a TPU, mnist_classifier.py from JAX's
# examples spent 12.0 s of its 32.5 s in 47 of them (each op outside jit, ~0.25 s)
EAGER_ADVICE_SHARE = 0.10
EAGER = "op-by-op compile"  # JAX compiling one op run outside jit (jnp.ones, x.sum())
HEADER = ("function", "compiles", "compile", "defined at")


def summary_text(recording: Recording) -> str:
    s, program = recording.summary, recording.program
    wall = program.wall_s or 0.0
    share = f" ({s.compile_s / wall:.0%})" if wall > 0 else ""
    lines = [
        f"jitscope: {plural(s.compiles, 'compile')} of {plural(s.functions, 'function')} took "
        f"{seconds(s.compile_s)} of {seconds(wall)} wall time{share}",
        *_need_lines(s),
    ]
    kept_eager = [f for f in recording.functions if f.eager]
    if s.eager_compiles:
        lines += _eager_lines(s, wall, "listed below" if kept_eager else "--eager lists them")
    lines += _persistent_lines(recording)
    if s.largest_peak:
        top = s.largest_peak
        where = short_path(top["defined_at"], program.folders)
        lines.append(f"  largest memory peak: {top['function']} ({where}) {nbytes(top['bytes'])}")
    if s.details_dropped:
        lines.append(
            f"  {plural(s.details_dropped, 'compile')} kept in the counts only (--details N)"
        )
    lines += _error_lines(recording)
    jitted = [f for f in recording.functions if not f.eager]
    lines += _table(jitted[:MAX_FUNCTIONS], program.folders)
    lines += _more_line(jitted[MAX_FUNCTIONS:])
    if kept_eager:
        lines.append("  op-by-op compiles, of ops run outside jit (--eager):")
        lines += _table(kept_eager[:MAX_FUNCTIONS], program.folders, advice=False)
        lines += _more_line(kept_eager[MAX_FUNCTIONS:])
    return "\n".join(lines)


def _eager_lines(s: Summary, wall: float, listed: str) -> list[str]:
    said, advice = eager_words(s, wall, listed)
    return [f"  plus {said}"] + ([f"    ↳ {advice}"] if advice else [])


def eager_words(s: Summary, wall: float, listed: str) -> tuple[str, str]:
    """(`47 op-by-op compiles of ops run outside jit (12.0 s, 37%; …)`, and where they
    take a tenth of the run or more, what to do about them, else '')."""
    share = s.eager_compile_s / wall if wall > 0 else 0.0
    took = f"{seconds(s.eager_compile_s)}" + (f", {share:.0%}" if share >= 0.01 else "")
    said = f"{plural(s.eager_compiles, EAGER)} of ops run outside jit ({took}; {listed})"
    if share < EAGER_ADVICE_SHARE:
        return said, ""
    return said, _eager_advice(s)


EAGER_FIX = (
    "each op and shape run outside jit compiles once: jit the code that calls them "
    "(an evaluation loop, the data preparation)"
)


def _eager_advice(s: Summary) -> str:
    """The fix, and how many of the ops a library's own code ran ('97 of the 126 ran in
    numpyro's own code, not in yours'): jitting the user's code does not reach them."""
    ran = sum(s.eager_libraries.values())
    if not ran:
        return EAGER_FIX
    ranked = sorted(s.eager_libraries, key=lambda name: -s.eager_libraries[name])
    names = [f"{name}'s" for name in ranked[:3]] + (["other libraries'"] if ranked[3:] else [])
    where = f"{', '.join(names[:-1])} and {names[-1]}" if len(names) > 1 else names[0]
    where += " own code"
    if ran >= s.eager_compiles:
        return (
            f"each op and shape run outside jit compiles once: all ran in {where}, "
            "called from yours: not in your code"
        )
    return f"{EAGER_FIX}; {ran} of the {s.eager_compiles} ran in {where}, not in yours"


def need_text(s: Summary) -> str:
    """'3 compiles: 2 needed, 1 avoidable (1.2 s)': needed ones had new inputs (or were
    the first), avoidable ones the inputs of an earlier compile (a Python scalar where an
    array of its dtype and shape was counts as the same: only the weak type differs)."""
    text = f"{plural(s.compiles, 'compile')}: {s.needed} needed, {s.avoidable} avoidable"
    return text + (f" ({seconds(s.avoidable_s)})" if s.avoidable else "")


def _need_lines(s: Summary) -> list[str]:
    return [f"  {need_text(s)}"] if s.compiles > s.functions else []


def _more_line(cut: list[FunctionStats]) -> list[str]:
    """'… and 27 more (83 compiles)' under a list that was cut."""
    if not cut:
        return []
    return [f"  … and {len(cut)} more ({plural(sum(f.compiles for f in cut), 'compile')})"]


def _table(functions: list[FunctionStats], cwd: str, advice: bool = True) -> list[str]:
    """Rows under a header; the name column as wide as its widest name or the header's."""
    if not functions:
        return []
    width = max(len(HEADER[0]), *(len(f.name) for f in functions))
    lines = [f"  {HEADER[0]:<{width}}  {HEADER[1]:>8}  {HEADER[2]:>8}  {HEADER[3]}"]
    for f in functions:
        lines.append(
            f"  {f.name:<{width}}  {f.compiles:>8}  {seconds(f.compile_s):>8}  "
            f"{short_path(f.defined_at, cwd)}"
        )
        if advice:
            lines += [f"  {'':<{width}}  ↳ {line}" for line in f.advice.splitlines()]
    return lines


def _error_lines(recording: Recording) -> list[str]:
    s = recording.summary
    if not s.recorder_errors:
        return []
    lines = [
        f"  {plural(s.recorder_errors, 'compile')} the recorder failed to describe (counted, "
        "without details): a jitscope bug, please report it with these lines:"
    ]
    for error in s.errors[:MAX_ERRORS]:
        lines.append(f"    ×{error['count']} {error['message']}")
    return lines


def _persistent_lines(recording: Recording) -> list[str]:
    """'12 of 14 compiles came from disk (saved 9.8 s); 2 missed: XLA flags (`…` added)'."""
    s = recording.summary
    looked = s.persistent_hits + s.persistent_misses
    if not looked:
        return []
    text = f"  persistent cache: {s.persistent_hits} of {looked} compiles came from disk"
    if s.persistent_hits:
        text += f" (saved {seconds(s.persistent_saved_s)})"
    misses = [c for c in recording.compiles if not c.eager and c.persistent.state == "miss"]
    if misses:
        text += f"; {s.persistent_misses} missed: {_miss_reasons(misses)}"
    return [text]


def _miss_reasons(misses: list[Compile]) -> str:
    """The commonest reasons among the misses, with their counts."""
    reasons: Counter[str] = Counter()
    for c in misses:
        if c.persistent.changed:
            reasons["key changed: " + ", ".join(map(change_text, c.persistent.changed))] += 1
        else:
            reasons[c.persistent.why.split("; ")[0]] += 1
    stored = sum(1 for c in misses if c.persistent.written)
    shown = "; ".join(f"{why} (×{n})" for why, n in reasons.most_common(3))
    return f"{shown}; {stored} of {len(misses)} stored"
