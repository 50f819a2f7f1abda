"""`jitscope job [REC ...] [--json OUT]`: the processes of one multi-process job side
by side (`viz.recorder.display.job`).

REC is a recording JSON file (`record --json 'out/p{process}.json'`) or a history id
(`rec:12`). One history id stands for its whole job: every process of that job found
in history. Without REC: the newest job in history. `--json OUT` writes the Job JSON
(`-`: to stdout, and nothing else is printed there). Exit status 2 when the recordings
cannot be read or do not make one job.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from viz.history import HistoryError
from viz.locations import command_name, invoked_name
from viz.recorder.display.divergence import Member, processes_text
from viz.recorder.display.job import JobError, JobView, from_history, job_view
from viz.recorder.display.job_views import ended_first_text
from viz.recorder.model import Recording
from viz.recorder.storage.recordings import Recordings, recording_id
from viz.units import plural, seconds

USAGE = "%(prog)s [REC ...] [--json OUT]   (REC: a recording JSON file or rec:N)"


def add_command(sub: argparse._SubParsersAction) -> None:
    """For `python -m viz --help` only: `main` parses job's own arguments."""
    sub.add_parser(
        "job", help="the processes of a multi-process job: divergences, stragglers", usage=USAGE
    )


def _options() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{invoked_name()} job", usage=USAGE, description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "recordings",
        nargs="*",
        metavar="REC",
        help="recording JSON files or history ids (rec:N); one id: its whole job; "
        "none: the newest job in history",
    )
    parser.add_argument("--json", metavar="OUT", help="write the Job JSON here (- = stdout)")
    return parser


def main(argv: list[str]) -> int:
    args = _options().parse_args(argv)
    try:
        view = job_view(members(args.recordings))
    except (JobError, HistoryError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    data = json.dumps(view.to_dict(), indent=2, default=str)
    if args.json == "-":
        print(data)
        return 0
    print(job_text(view))
    if args.json:
        try:
            Path(args.json).write_text(data)
        except OSError as exc:
            print(f"error: cannot write {args.json}: {exc}", file=sys.stderr)
            return 2
    return 0


def members(refs: list[str], recordings: Recordings | None = None) -> list[Member]:
    """The recordings REC... name (see the module's docstring). Raises JobError."""
    recordings = recordings or Recordings()
    if not refs:
        job = recordings.newest_job()
        if job is None:
            raise JobError(
                "no multi-process job in history: record each process with "
                f"`{command_name()} record -- SCRIPT` (its program calls jax.distributed)"
            )
        return from_history(recordings, job)
    loaded = [load(ref, recordings) for ref in refs]
    if len(loaded) == 1 and recording_id(refs[0]) is not None:
        process = loaded[0].recording.program.process
        if process is not None and process.job:
            return from_history(recordings, process.job)
    return loaded


def load(ref: str, recordings: Recordings) -> Member:
    """One recording, from history (`rec:12`) or a Recording JSON file."""
    number = recording_id(ref)
    if number is not None and not Path(ref).exists():
        recording = recordings.get(number)
        if recording is None:
            raise JobError(f"no recording {ref} in history (the Recordings page lists them)")
        return Member(ref, recording)
    try:
        data = json.loads(Path(ref).read_text())
    except (OSError, ValueError) as exc:
        raise JobError(f"cannot read a recording from {ref}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("program"), dict):
        raise JobError(f"{ref} is not a recording (`{command_name()} record --json` writes one)")
    try:
        return Member(ref, Recording.from_dict(data))
    except (TypeError, ValueError, KeyError) as exc:
        raise JobError(f"{ref} is not a recording: {exc}") from None


MAX_STRAGGLERS = 5  # rows of the straggler table in the text


def job_text(view: JobView) -> str:
    """The job in a few lines: its processes, its divergences, its stragglers."""
    absent = f" (no recording of {processes_text(view.absent)})" if view.absent else ""
    lines = [
        f"job {view.job or '(no id)'}: {len(view.processes)} of {view.count} processes{absent}"
    ]
    for p in view.processes:
        flag = f"  ← ended early: {p.ending}" if p.ended_early else ""
        lines.append(
            f"  process {p.index} on {p.host}: {p.compiles} compiles, {seconds(p.compile_s)} "
            f"of {seconds(p.wall_s)} wall · {p.recording}{flag}"
        )
    ended = ended_first_text(view)
    if ended:
        lines.append(ended)
    if view.divergences:
        lines.append(f"{plural(len(view.divergences), 'divergence')}, the earliest first:")
    else:
        lines.append("no divergence: every process compiled the same programs in the same order")
    for d in view.divergences:
        lines.append(f"  {d.kind:<9} {d.function} [{', '.join(map(str, d.processes))}]: {d.detail}")
        for site in d.call_sites:
            lines.append(f"{'':12}process {site.process} at {site.call_site}: {site.note}")
    lagging = [s for s in view.stragglers if s.wait_s > 0][:MAX_STRAGGLERS]
    if lagging:
        lines.append("stragglers (compile time: the slowest process against the median):")
        width = max(len(s.function) for s in lagging)
        for s in lagging:
            lines.append(
                f"  {s.function:<{width}}  process {s.slowest} {seconds(s.slowest_s):>8}, "
                f"median {seconds(s.median_s):>8} ({seconds(s.wait_s, signed=True)})"
            )
    return "\n".join(lines)
