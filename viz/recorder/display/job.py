"""One multi-process job, from the recordings of its processes (`jitscope job`, the
Recordings page). Stdlib only: the app server builds job views too.

`job_view` puts the processes side by side: how each ran and ended (a process that
died, by a signal or a non-zero exit, ended early), where their compiles diverge
(`viz.recorder.display.divergence`), and the stragglers: each function's compile time (trace +
lower + XLA) per process, the slowest against the median. Every collective waits for
the slowest process, so the others wait about `wait_s` = slowest − median there.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from viz.recorder.display.divergence import (
    Divergence,
    FunctionId,
    JobFunction,
    Member,
    divergences,
    job_functions,
)

if TYPE_CHECKING:
    from viz.recorder.storage.recordings import Recordings


class JobError(ValueError):
    """The recordings do not make one job (the message says which and why)."""


@dataclass
class JobProcess:
    index: int
    host: str
    compiles: int
    compile_s: float
    wall_s: float | None
    exit_code: int | None
    signal: str | None
    ended_early: bool  # it died (a signal, a non-zero exit status)
    recording: str  # `rec:12`, or the JSON file it was read from
    started_s: float  # when it started, after the job's first process
    ended_s: float | None  # when it ended, after the job's first process started

    @property
    def ending(self) -> str:
        if self.exit_code is None:
            return "not seen to end"
        return f"exit status {self.exit_code}" + (f" ({self.signal})" if self.signal else "")


@dataclass
class Straggler:
    function: str
    defined_at: str
    compile_s: dict[int, float]  # process index → compile seconds of this function
    slowest: int
    slowest_s: float
    median_s: float

    @property
    def wait_s(self) -> float:
        return self.slowest_s - self.median_s


@dataclass
class JobView:
    job: str | None
    count: int  # processes in the job, as JAX numbered them
    processes: list[JobProcess]
    divergences: list[Divergence]
    stragglers: list[Straggler]
    members: list[Member] = field(default_factory=list, repr=False)

    @property
    def absent(self) -> list[int]:
        """Processes of the job without a recording here."""
        have = {p.index for p in self.processes}
        return [i for i in range(self.count) if i not in have]

    @property
    def first_ended(self) -> JobProcess | None:
        """The process that ended early before any other did: where to look first (the
        distributed runtime ends the others once one has died)."""
        early = [p for p in self.processes if p.ended_early and p.ended_s is not None]
        return min(early, key=lambda p: p.ended_s or 0.0) if early else None

    def to_dict(self) -> dict[str, Any]:
        """The Job JSON (DESIGN.md): `{job, processes, divergences}`, and additions."""
        return {
            "job": self.job,
            "count": self.count,
            "processes": [asdict(p) for p in self.processes],
            "absent": self.absent,
            "first_ended": self.first_ended.index if self.first_ended else None,
            "divergences": [{**asdict(d), "at_s": d.at_s} for d in self.divergences],
            "stragglers": [
                {
                    "function": s.function,
                    "defined_at": s.defined_at,
                    "compile_s": [{"process": i, "seconds": v} for i, v in s.compile_s.items()],
                    "slowest": s.slowest,
                    "slowest_s": s.slowest_s,
                    "median_s": s.median_s,
                    "wait_s": s.wait_s,
                }
                for s in self.stragglers
            ],
        }


def job_view(members: list[Member]) -> JobView:
    """The job of these recordings. Raises JobError unless they are processes of one
    job, each once."""
    members = _checked(members)
    start = min(m.recording.program.started for m in members)
    members = [replace(m, offset_s=m.recording.program.started - start) for m in members]
    first = members[0].recording.program.process
    assert first is not None
    job = next((j for m in members if (j := _job(m))), None)
    processes = [_process(m) for m in members]
    functions = job_functions(members)
    early = {p.index: p.ending for p in processes if p.ended_early}
    return JobView(
        job=job,
        count=max(first.count, members[-1].index + 1),
        processes=processes,
        divergences=divergences(members, functions, early),
        stragglers=_stragglers(functions),
        members=members,
    )


def from_history(recordings: Recordings, job: str) -> list[Member]:
    """Every process of `job` in history (the newest recording of each index)."""
    found: dict[int, Member] = {}
    for row in recordings.of_job(job):
        if row.process is None or row.process in found:
            continue
        recording = recordings.get(row.id)
        if recording is not None:
            found[row.process] = Member(f"rec:{row.id}", recording)
    return [found[i] for i in sorted(found)]


def _checked(members: list[Member]) -> list[Member]:
    if not members:
        raise JobError("no recordings: name recording JSON files or history ids (rec:N)")
    for m in members:
        if m.recording.program.process is None:
            raise JobError(
                f"{m.source} is not a process of a multi-process job: its program never "
                "initialized jax.distributed"
            )
    jobs = {_job(m) for m in members} - {None}  # a job id never learned joins the others
    if len(jobs) > 1:
        listed = ", ".join(f"{m.source}: {_job(m) or '(unknown)'}" for m in members)
        raise JobError(f"these recordings come from {len(jobs)} different jobs ({listed})")
    seen: dict[int, str] = {}
    for m in members:
        if m.index in seen:
            raise JobError(f"{seen[m.index]} and {m.source} are both process {m.index}")
        seen[m.index] = m.source
    return sorted(members, key=lambda m: m.index)


def _job(member: Member) -> str | None:
    process = member.recording.program.process
    return process.job if process else None


def _process(member: Member) -> JobProcess:
    program, summary = member.recording.program, member.recording.summary
    assert program.process is not None
    return JobProcess(
        index=member.index,
        host=program.process.host,
        compiles=summary.compiles,
        compile_s=summary.compile_s,
        wall_s=program.wall_s,
        exit_code=program.exit_code,
        signal=program.signal,
        ended_early=program.exit_code not in (None, 0),
        recording=member.source,
        started_s=member.offset_s,
        ended_s=None if program.wall_s is None else member.offset_s + program.wall_s,
    )


def _stragglers(functions: dict[FunctionId, JobFunction]) -> list[Straggler]:
    """The functions two or more processes compiled, the longest wait first."""
    rows = []
    for function in functions.values():
        if len(function.stats) < 2:
            continue
        times = {i: function.stats[i].compile_s for i in sorted(function.stats)}
        slowest = max(times, key=lambda i: (times[i], -i))
        median = statistics.median(times.values())
        rows.append(
            Straggler(function.name, function.defined_at, times, slowest, times[slowest], median)
        )
    return sorted(rows, key=lambda s: (-s.wait_s, s.function))
