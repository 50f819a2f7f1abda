"""Where the compiles of a multi-process job's processes part ways. Stdlib only.

A function is the same function in every process when its name and its definition
site, relative to each process's working folder, agree. Only jitted functions count;
JAX's own op-by-op compiles do not.

Kinds, each naming the processes that differ from the majority (a tie goes to the side
of the lowest process index, the coordinator's):
- `missing`: some processes compiled the function and the others did not (in a tie,
  the ones that compiled it differ, unless the others ended early);
- `signature`: they compiled it for different signatures (another local batch, another
  static value), so the programs they run no longer match;
- `count`: the same signatures, compiled a different number of times;
- `order`: the same compiles of the programs that run across processes (an argument
  sharded over a mesh), in another order. Collectives run in the order the programs
  first run, which is the order they were compiled in.

Each divergence carries the call sites where the processes parted: what one side
compiled there and what the other side compiled at the same point of the program.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from typing import Any

from viz.recorder.model import Compile, FunctionStats, Recording, short_path

KINDS = ("missing", "signature", "count", "order")
MAX_SITES = 4  # processes whose call sites a divergence shows (the reference, outliers)


@dataclass(frozen=True)
class Member:
    """One process's recording, where it came from (`rec:12` or a file), and when it
    started after the job's first process."""

    source: str
    recording: Recording
    offset_s: float = 0.0

    @property
    def index(self) -> int:
        process = self.recording.program.process
        assert process is not None, "a member of a job has program.process"
        return process.index


@dataclass
class CallSite:
    """Where one process was in its program when the processes parted."""

    process: int
    function: str  # the function that process compiled there ('' for none)
    call_site: str  # 'path:line', relative to the process's working folder
    stack: list[str] = field(default_factory=list)  # outermost first
    seq: int | None = None  # the compile's number in that process's recording
    t_s: float | None = None  # when it compiled there, after the job's first process started
    note: str = ""  # 'compiled it with x: f32[12,16]', 'went on to compile evaluate'


@dataclass
class Divergence:
    function: str
    defined_at: str  # relative to the working folder of the processes
    kind: str  # one of KINDS
    processes: list[int]  # the processes that differ from the majority
    detail: str
    call_sites: list[CallSite] = field(default_factory=list)

    @property
    def at_s(self) -> float | None:
        """When the processes parted here, after the job's first process started."""
        times = [s.t_s for s in self.call_sites if s.t_s is not None]
        return min(times) if times else None


# A function across processes: (name, definition site relative to each one's folder).
FunctionId = tuple[str, str]
Token = tuple[FunctionId, str]  # one compile: its function and signature


@dataclass
class JobFunction:
    """One function as every process compiled it: exact totals and the kept compiles."""

    name: str
    defined_at: str
    stats: dict[int, FunctionStats] = field(default_factory=dict)  # process → totals
    compiles: dict[int, list[Compile]] = field(default_factory=dict)  # process → kept


def function_id(recording: Recording, name: str, defined_at: str) -> FunctionId:
    return name, short_path(defined_at, recording.program.folders)


def job_functions(members: list[Member]) -> dict[FunctionId, JobFunction]:
    functions: dict[FunctionId, JobFunction] = {}
    for m in members:
        rec = m.recording
        for stats in rec.functions:
            if stats.eager or stats.compiles == 0:
                continue
            fid = function_id(rec, stats.name, stats.defined_at)
            entry = functions.setdefault(fid, JobFunction(*fid))
            entry.stats[m.index] = stats
            entry.compiles[m.index] = rec.compiles_of(stats.key)
    return functions


def signature_text(compile: Compile) -> str:
    """How the jit cache keyed the call: every argument leaf, with its sharding."""
    return ", ".join(leaf.text for leaf in compile.signature) or "(no arguments seen)"


def majority(groups: dict[Any, list[int]]) -> tuple[Any, list[int]]:
    """The value most processes share (a tie: the group of the lowest index), and the
    processes that differ from it."""
    value = max(groups, key=lambda v: (len(groups[v]), -min(groups[v])))
    return value, sorted(i for v, ids in groups.items() if v != value for i in ids)


def divergences(
    members: list[Member], functions: dict[FunctionId, JobFunction], early: dict[int, str]
) -> list[Divergence]:
    """Every divergence, the earliest parting first. `early`: how each process that
    ended early ended ('exit status 137 (SIGKILL)')."""
    indexes = [m.index for m in members]
    by_index = {m.index: m for m in members}
    found: list[Divergence] = []
    for function in functions.values():
        if len(function.stats) < len(indexes):
            found.append(_missing(function, indexes, by_index, early))
        if len(function.stats) > 1:
            found += _signature_or_count(function, by_index)
    found += _order(members, functions)
    rank = {kind: i for i, kind in enumerate(KINDS)}
    return sorted(
        found,
        key=lambda d: (d.at_s is None, d.at_s or 0.0, rank[d.kind], d.processes, d.function),
    )


def processes_text(indexes: list[int]) -> str:
    """'process 1', 'processes 0, 2 and 3'."""
    if len(indexes) == 1:
        return f"process {indexes[0]}"
    *rest, last = map(str, indexes)
    return f"processes {', '.join(rest)} and {last}"


def _missing(
    function: JobFunction,
    indexes: list[int],
    by_index: dict[int, Member],
    early: dict[int, str],
) -> Divergence:
    have = sorted(function.stats)
    lack = [i for i in indexes if i not in function.stats]
    if len(have) == len(lack):  # a tie: the side that did what the other did not
        outliers = lack if any(i in early for i in lack) else have
    else:
        outliers = majority({True: have, False: lack})[1]
    if outliers == lack:
        detail = f"not compiled by {processes_text(lack)} (compiled by {processes_text(have)})"
    else:
        detail = f"compiled by {processes_text(have)} only (not by {processes_text(lack)})"
    ended = [f"process {i} ended early, {early[i]}" for i in lack if i in early]
    if ended:
        detail += "; " + "; ".join(ended)
    sites = _parting_sites(function, have, lack, by_index)
    return Divergence(function.name, function.defined_at, "missing", outliers, detail, sites)


def _signature_or_count(function: JobFunction, by_index: dict[int, Member]) -> list[Divergence]:
    """Another set of signatures; failing that, another number of compiles."""
    groups: dict[Any, list[int]] = {}
    for i, compiles in function.compiles.items():
        if compiles:  # details kept
            groups.setdefault(frozenset(map(signature_text, compiles)), []).append(i)
    if len(groups) > 1:
        usual, outliers = majority(groups)
        return [_signature(function, usual, groups[usual], outliers, by_index)]
    counts: dict[Any, list[int]] = {}
    for i, stats in function.stats.items():
        counts.setdefault(stats.compiles, []).append(i)
    if len(counts) > 1:
        usual, outliers = majority(counts)
        return [_count(function, usual, counts[usual], outliers, by_index)]
    return []


def _signature(
    function: JobFunction,
    usual: frozenset[str],
    agreeing: list[int],
    outliers: list[int],
    by_index: dict[int, Member],
) -> Divergence:
    reference = function.compiles[agreeing[0]]
    sites: list[CallSite] = []
    parts = []
    for i in outliers:
        mine = function.compiles.get(i, [])
        odd = next((k for k, c in enumerate(mine) if signature_text(c) not in usual), None)
        if odd is None:  # it lacks one of the usual signatures instead
            missing = sorted(usual - set(map(signature_text, mine)))[0]
            parts.append(f"process {i} never compiled it with {missing}")
            continue
        usual_compile = reference[min(odd, len(reference) - 1)]  # the same point, or near
        changes = _leaf_changes(mine[odd], usual_compile)
        parts.append(
            f"process {i}: " + "; ".join(f"{a} where the others had {b}" for a, b in changes)
        )
        if not sites:
            theirs = ", ".join(f"{a.split(': ', 1)[0]}: {b}" for a, b in changes)
            sites.append(_site(by_index[agreeing[0]], usual_compile, f"compiled it with {theirs}"))
        if len(sites) < MAX_SITES:
            ours = ", ".join(a for a, _ in changes)
            sites.append(_site(by_index[i], mine[odd], f"compiled it with {ours}"))
    return Divergence(
        function.name, function.defined_at, "signature", outliers, "; ".join(parts), sites
    )


def _leaf_changes(odd: Compile, usual: Compile) -> list[tuple[str, str]]:
    """The argument leaves that differ: ('x: f32[12,16]', 'f32[8,16]'); a sharding both
    share is left out."""
    before = {leaf.arg: leaf for leaf in usual.signature}
    changes = []
    for leaf in odd.signature:
        other = before.pop(leaf.arg, None)
        if other is not None and other.text == leaf.text:
            continue
        if other is not None and other.sharding == leaf.sharding:
            leaf, other = replace(leaf, sharding=None), replace(other, sharding=None)
        was = other.text.split(": ", 1)[-1] if other else "no such argument"
        changes.append((leaf.text, was))
    changes += [(f"{arg}: (none)", leaf.text.split(": ", 1)[-1]) for arg, leaf in before.items()]
    return changes[:4] or [(signature_text(odd), signature_text(usual))]


def _count(
    function: JobFunction,
    usual: int,
    agreeing: list[int],
    outliers: list[int],
    by_index: dict[int, Member],
) -> Divergence:
    counts = ", ".join(f"process {i} compiled it {function.stats[i].compiles}×" for i in outliers)
    detail = f"{counts}; the others {usual}× (with the same signatures)"
    sites = []
    kept = function.compiles.get(agreeing[0], [])
    if kept:
        sites.append(_site(by_index[agreeing[0]], kept[-1], f"its last compile of it ({usual}×)"))
    for i in outliers[: MAX_SITES - 1]:
        kept = function.compiles.get(i, [])
        if kept:  # its first compile past the usual count (or its last kept one)
            k = min(usual, len(kept) - 1)
            sites.append(_site(by_index[i], kept[k], f"compiled it again (compile {k + 1})"))
    return Divergence(function.name, function.defined_at, "count", outliers, detail, sites)


def _sequence(member: Member, common: set[Token] | None = None) -> list[tuple[Token, Compile]]:
    """The compiles of programs sharded over a mesh, in order, each signature once."""
    rec = member.recording
    seen: set[Token] = set()
    out = []
    for c in rec.compiles:
        if c.eager or not any(leaf.sharding for leaf in c.signature):
            continue
        token = (function_id(rec, c.function, c.defined_at), signature_text(c))
        if token in seen or (common is not None and token not in common):
            continue
        seen.add(token)
        out.append((token, c))
    return out


def _order(members: list[Member], functions: dict[FunctionId, JobFunction]) -> list[Divergence]:
    """The compiles every process made of programs run across processes, in an order
    that differs from the majority's."""
    if len(members) < 2:
        return []
    common = set.intersection(*({t for t, _ in _sequence(m)} for m in members))
    sequences = {m.index: _sequence(m, common) for m in members}
    groups: dict[Any, list[int]] = {}
    for i, seq in sequences.items():
        groups.setdefault(tuple(t for t, _ in seq), []).append(i)
    if len(groups) < 2:
        return []
    usual, outliers = majority(groups)
    reference = sequences[groups[usual][0]]
    odd = sequences[outliers[0]]  # the same compiles as the reference, in another order
    at = next(k for k in range(len(reference)) if reference[k][0] != odd[k][0])
    first, instead = reference[at][0][0][0], odd[at][0][0][0]
    detail = (
        f"{processes_text(outliers)} compiled {instead} before {first}; "
        f"the others compiled {first} first"
    )
    by_index = {m.index: m for m in members}
    sites = [_site(by_index[groups[usual][0]], reference[at][1], f"compiled {first} here")]
    for i in outliers[: MAX_SITES - 1]:
        compile = sequences[i][at][1]
        sites.append(_site(by_index[i], compile, f"compiled {compile.function} here instead"))
    function = functions[reference[at][0][0]]
    return [Divergence(function.name, function.defined_at, "order", outliers, detail, sites)]


def _parting_sites(
    function: JobFunction, have: list[int], lack: list[int], by_index: dict[int, Member]
) -> list[CallSite]:
    """For a function only some processes compiled: where the first of those did, and
    what the others compiled at that point of the program instead."""
    model = by_index[have[0]]
    kept = function.compiles.get(have[0], [])
    if not kept:
        return []
    sites = [_site(model, kept[0], "compiled it here")]
    sites += [_instead(model, kept[0], by_index[i]) for i in lack[: MAX_SITES - 1]]
    return sites


def _instead(model: Member, at: Compile, other: Member) -> CallSite:
    """What `other` compiled where `model` compiled `at`: its next compile after the
    last function both compiled in step (the sequences aligned by function)."""
    mine = [c for c in model.recording.compiles if not c.eager]
    theirs = [c for c in other.recording.compiles if not c.eager]

    def functions(member: Member, compiles: list[Compile]) -> list[FunctionId]:
        return [function_id(member.recording, c.function, c.defined_at) for c in compiles]

    matcher = difflib.SequenceMatcher(
        a=functions(model, mine), b=functions(other, theirs), autojunk=False
    )
    position = next(k for k, c in enumerate(mine) if c is at)
    for tag, a1, a2, b1, _ in matcher.get_opcodes():
        if tag != "equal" and a1 <= position < a2:
            if b1 < len(theirs):
                return _site(other, theirs[b1], f"went on to compile {theirs[b1].function}")
            break
    if theirs:
        return _site(other, theirs[-1], "compiled nothing more after this")
    return CallSite(other.index, "", "?", note="compiled nothing")


def _site(member: Member, compile: Compile, note: str) -> CallSite:
    cwd = member.recording.program.folders
    return CallSite(
        process=member.index,
        function=compile.function,
        call_site=short_path(compile.call_site, cwd),
        stack=[_frame(frame, cwd) for frame in compile.stack],
        seq=compile.seq,
        t_s=member.offset_s + compile.t_s,
        note=note,
    )


def _frame(frame: str, cwd: str) -> str:
    location, sep, function = frame.partition(" in ")
    return f"{short_path(location, cwd)}{sep}{function}"
