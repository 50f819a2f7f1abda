"""A unified text diff of one IR (`jaxpr`, `stablehlo`, `compiled`) of two reports.

The compiled HLO is compared without its `metadata={…}` and stack-frame tables
(`comparable`): they hold file paths and jitscope's own frames, which differ between
any two runs. A side whose run failed, or whose full report the history no longer
keeps, has no text: the `TextDiff` says which and why instead of comparing empty ones.
At most `MAX_DIFF_LINES` lines.
"""

from __future__ import annotations

import difflib
import re

from viz.diff.model import Origin, TextDiff
from viz.ir.model import IR
from viz.report import Report

MAX_DIFF_LINES = 3000  # a diff of two 24-layer programs can be tens of thousands of lines

_FRAME_TABLES = {"FileNames", "FunctionNames", "FileLocations", "StackFrames"}
_METADATA = re.compile(r",? metadata=\{[^{}]*\}")


def label(report: Report, origin: Origin | None, fallback: str) -> str:
    """`#12 f(f32[8])`, or `A f(f32[8])` for a report outside the history."""
    hist_id = origin.id if origin else None
    prefix = f"#{hist_id}" if hist_id is not None else fallback
    return f"{prefix} {report.function or '?'}({report.args})"


def failure(report: Report, origin: Origin | None, fallback: str) -> str | None:
    """`run #4 relu(f32[]) failed (control flow at line 4)`, None for a run that did not
    fail: why a side has no texts, kernels or graph."""
    if report.ok:
        return None
    error = report.error
    why = error.kind.value.replace("_", " ") if error else "an error"
    where = f" at line {error.line}" if error and error.line else ""
    stage = f", while {error.stage}" if error and error.stage and not where else ""
    return f"run {label(report, origin, fallback)} failed ({why}{where}{stage})"


def gone_note(
    sides: tuple[tuple[Report, Origin | None, str], ...], what: str, kept_note: str
) -> str:
    """Why the sides `(report, origin, 'A')` have no `what`: a failed run says it failed
    (and how); else `kept_note`, a pruned run's reason."""
    failed = [f for r, o, name in sides if (f := failure(r, o, name))]
    return f"{' and '.join(failed)}: it has no {what}" if failed else kept_note


def comparable(ir: IR, text: str) -> list[str]:
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


def _text(report: Report, ir: IR, origin: Origin) -> str | None:
    """One IR's text, None when the report has no such section, is numbers only or
    failed before it (a run failing in XLA's compile still has its jaxpr)."""
    section = report.section(ir)
    if section is None or not origin.full or not (report.ok or section.text):
        return None
    return section.text


def diff_text(
    a: Report,
    b: Report,
    ir: IR,
    context: int = 3,
    *,
    origins: tuple[Origin | None, Origin | None] = (None, None),
) -> TextDiff:
    """A unified diff of one IR's text; says so when a side's full report is gone."""
    oa, ob = (o or Origin() for o in origins)
    ta, tb = _text(a, ir, oa), _text(b, ir, ob)
    if ta is None or tb is None:
        gone = [(r, o, name) for r, o, name, t in ((a, oa, "A", ta), (b, ob, "B", tb)) if t is None]
        pruned = " and ".join(label(*side) for side in gone)
        note = gone_note(
            tuple(gone),
            f"{ir} text",
            f"the full report of {pruned} was not kept, so its {ir} text is gone "
            "(history keeps the newest full reports only)",
        )
        return TextDiff(kept=False, diff=None, added=None, removed=None, note=note)
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
