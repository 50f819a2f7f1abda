"""The history commands of the CLI: `python -m viz history` and `python -m viz diff A B`,
and the recording of every `python -m viz analyze` (unless `--no-history`).

`--json OUT` writes JSON to a file, or to standard output when OUT is `-` (then
nothing else is printed there). A and B of `diff` are history ids (`12` or `#12`)
or report JSON files, or two recordings (`rec:N` or Recording JSON files: then the
diff is `viz.recorder.display.compare`'s). Exit status 2 for an unknown id or an unreadable file.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from viz import units
from viz.diff import Origin, diff_reports, summarize
from viz.history import History, HistoryError, Run, sample_of
from viz.locations import command_name
from viz.recorder import REF_PREFIX, Recording, Recordings, diff_recordings, diff_text, recording_id
from viz.report import Report


class CliError(Exception):
    """Misuse the user can fix: printed, exit status 2."""


def add_commands(sub: Any) -> None:
    history = sub.add_parser("history", help="list the runs recorded in history.sqlite")
    history.add_argument("--function", metavar="NAME", help="only runs of this function")
    history.add_argument("--limit", type=int, default=50, help="newest runs to list")
    history.add_argument("--json", metavar="OUT", help="write the runs as JSON (- = stdout)")
    diff = sub.add_parser("diff", help="what changed between two runs or two recordings")
    diff.add_argument("a", help="history id (12 or #12), report JSON, rec:N or recording JSON")
    diff.add_argument("b", help="history id (12 or #12), report JSON, rec:N or recording JSON")
    diff.add_argument("--json", metavar="OUT", help="write the diff as JSON (- = stdout)")


def main(args: argparse.Namespace) -> int:
    try:
        if args.command == "history":
            runs = History().runs(function=args.function, limit=args.limit)
            _emit([r.to_dict() for r in runs], args.json, lambda: history_table(runs))
        elif _recording(args.a) or _recording(args.b):
            diff_of_recordings(args.a, args.b, args.json)
        else:
            (a, origin_a), (b, origin_b) = load(args.a), load(args.b)
            diff = diff_reports(a, b, origins=(origin_a, origin_b))
            _emit(diff.to_dict(), args.json, lambda: summarize(diff))
    except (CliError, HistoryError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def record(report: Report, code: str) -> None:
    """Record a CLI analysis; a history that cannot be written is a warning only."""
    try:
        run_id = History().record(report, code=code, sample=sample_of(code), source="cli")
    except HistoryError as exc:
        print(f"warning: not recorded in history: {exc}", file=sys.stderr)
        return
    print(f"recorded as #{run_id} ({command_name()} history)", file=sys.stderr)


def load(ref: str) -> tuple[Report, Origin | None]:
    """A report by history id (`12`, `#12`), with its run as a diff side, or from a
    report JSON file (decoded once; no origin)."""
    if re.fullmatch(r"#?\d+", ref) and not Path(ref).exists():
        recorded = History().recorded(int(ref.lstrip("#")))
        if recorded is None:
            raise CliError(f"no run #{ref.lstrip('#')} in history ({command_name()} history)")
        return recorded.report, recorded.origin
    try:
        data = json.loads(Path(ref).read_text())
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read a report from {ref}: {exc}") from None
    if not isinstance(data, dict):
        raise CliError(f"{ref} is not a report (a JSON object)")
    try:
        return Report.from_dict(data), None
    except (ValueError, TypeError) as exc:
        raise CliError(f"{ref} is not a report: {exc}") from None


def _recording(ref: str) -> bool:
    """`rec:N`, or a JSON file holding a recording (a program and its compiles)."""
    if ref.startswith(REF_PREFIX):
        return True
    try:
        head = Path(ref).read_text()[:4096] if Path(ref).is_file() else ""
    except (OSError, UnicodeDecodeError):
        return False
    return '"program"' in head and '"compiles"' in head


def load_recording(ref: str) -> Recording:
    if ref.startswith(REF_PREFIX):
        number = recording_id(ref)
        found = Recordings().get(number) if number is not None else None
        if found is None:
            raise CliError(f"no recording {ref} in history (python -m viz record --help)")
        return found
    try:
        data = json.loads(Path(ref).read_text())
        if not isinstance(data, dict) or "program" not in data:
            raise ValueError("not a Recording JSON (no `program`)")
        return Recording.from_dict(data)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise CliError(f"cannot read a recording from {ref}: {exc}") from None


def diff_of_recordings(a: str, b: str, out: str | None) -> None:
    if not (_recording(a) and _recording(b)):
        raise CliError("compare a recording with a recording (rec:N or its JSON), not a run")
    diff = diff_recordings(load_recording(a), load_recording(b), (a, b))
    _emit(diff.to_dict(), out, lambda: diff_text(diff))


def _emit(data: Any, out: str | None, text: Any) -> None:
    if out == "-":
        print(json.dumps(data, indent=2, default=str))
        return
    print(text())
    if out:
        Path(out).write_text(json.dumps(data, indent=2, default=str))
        wrote("the JSON", Path(out))


def wrote(what: str, path: Path) -> None:
    """`wrote the JSON report: out.json (12.3 KiB)`: every file the CLI writes is said on
    stderr, beside `recorded as #N`."""
    print(f"wrote {what}: {path} ({units.nbytes(path.stat().st_size)})", file=sys.stderr)


def history_table(runs: list[Run]) -> str:
    if not runs:
        return "no runs recorded yet"
    head = f"{'id':>5}  {'when':<19}  {'function(args)':<40} counts          trace → compile    run"
    rows = [f"{head}       peak"]
    for r in runs:
        n = r.numbers
        counts = (n.jaxpr.eqn_count, n.stablehlo.op_count, n.compiled.kernel_count)
        chain = "→".join("-" if c is None else str(c) for c in counts)
        call = f"{r.settings.function}({r.settings.args})"
        compiled = n.compile_total_s if n.timings.compile_s is not None else None  # as the app
        line = f"#{r.id:>4}  {r.when}  {call[:40]:<40} {chain:<15} {_s(compiled):>15} "
        peak = n.memory.peak_bytes if n.memory else None
        line += f"{_s(n.timings.run_median_s):>9} {units.nbytes(peak):>10}  {r.settings.device}"
        if r.options_text:
            line += f"  [{r.options_text}]"
        if not r.ok:
            line += f"  error: {r.error_kind}"
        rows.append(line)
    return "\n".join(rows)


def _s(seconds: float | None) -> str:
    return units.seconds(seconds or None)  # 0: nothing was timed
