"""What the Recordings page shows, as plain rows (stdlib only: the app server uses it).

- `function_rows` and `compile_rows`: the functions table and one function's compiles
  side by side with their reasons, in the cache lab's words (`reason_text`);
- `call_tree`: tlparse's stack trie: every code path that led to a compile, with the
  compiles and compile seconds under each frame;
- `explore_target`: what Open in Explore loads for one compile (the function's file,
  its function, the recorded spec and static arguments, the program's folder), or why
  it cannot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from viz.cache.signature import Reason, reason_text
from viz.recorder.model import (
    Compile,
    FunctionStats,
    ProcessRun,
    Recording,
    jitted,
    new_data_text,
    short_path,
)
from viz.settings import Settings
from viz.source import list_functions
from viz.units import nbytes, seconds

# what differed, by a reason's kind, in a function's totals ('shape ×2')
KIND_WORDS = {
    "new_function": "new function object",
    "static_value": "static value",
    "shape": "shape",
    "dtype": "dtype",
    "weak_type": "weak type",
    "pytree": "argument structure",
    "sharding": "sharding",
    "device": "device",
    "config": "setting or cache",
}


def function_rows(recording: Recording) -> list[dict[str, Any]]:
    cwd = recording.program.folders
    return [
        {
            "function": f.name,
            "defined at": short_path(f.defined_at, cwd),
            "compiles": f.compiles,
            "compile time": seconds(f.compile_s),
            "avoidable": avoidable_text(f.avoidable, f.avoidable_s),
            "from disk": f.persistent_hits,
            "largest peak": nbytes(f.peak_bytes),
            "why": why_text(f),  # the sentences last: the numbers stay in view
            "advice": advice_cell(f.advice),
        }
        for f in recording.functions
    ]


def avoidable_text(count: int, took: float) -> str:
    """'1 (54 ms)', or '0'."""
    return f"{count} ({seconds(took)})" if count else "0"


def why_text(f: FunctionStats) -> str:
    """'first compile, shape ×2': the reasons of its compiles in words (a first
    compile is counted as a new function object)."""
    kinds = dict(f.reasons)
    new = kinds.pop("new_function", 0)
    if new > 1:
        kinds["new_function"] = new - 1
    words = ["first compile"] if new else []
    words += [f"{KIND_WORDS.get(k, k.replace('_', ' '))} ×{n}" for k, n in sorted(kinds.items())]
    return ", ".join(words)


def advice_cell(advice: str) -> str:
    """A function's advice on one line of a table cell, a line per kind apart by ' · '."""
    return plain(" · ".join(advice.splitlines()))


def plain(text: str) -> str:
    """Markdown's code marks left out: a table cell shows text as it is."""
    return text.replace("`", "")


def compile_rows(compiles: list[Compile], cwd: str | tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        {
            "#": c.seq,
            "at": f"{c.t_s:.2f} s",
            "called from": short_path(c.call_site, cwd),
            "need": need_words(c),
            "why": plain("; ".join(reason_words(r) for r in c.reasons)),
            "signature": plain(c.signature_text),
            "trace": seconds(c.trace_s),
            "lower": seconds(c.lower_s),
            "compile": seconds(c.compile_s),
            "peak": nbytes(c.peak_bytes),
            "disk cache": disk_text(c),
            "jit": jit_text(c, cwd),
        }
        for c in compiles
    ]


def need_words(c: Compile) -> str:
    """'first', 'needed', 'needed: new data in the closure: …', 'avoidable: a new jit
    wrapper …': why it was needed only where its reasons (the "why" beside it) do not
    say so already."""
    said = {new_data_text(r) for r in c.reasons}
    why = "" if c.need_why in said else c.need_why
    return plain(f"{c.need}: {why}" if why else c.need)


def disk_text(c: Compile) -> str:
    """'hit', 'miss, stored: key changed: computation', 'miss, not stored: …', or ''
    (the disk cache was off)."""
    p = c.persistent
    if p.state == "hit" or (p.state == "off" and c.persistent_cache):
        return "hit"
    if p.state == "miss":
        return f"miss, {'stored' if p.written else 'not stored'}: {p.why}"
    return ""


def jit_text(c: Compile, cwd: str | tuple[str, ...]) -> str:
    """'jit(jacfwd(partial(safe_norm))) made at test.py:10', or what is known of it; a
    jit a library made, with the user's line that led there."""
    made = f" made at {short_path(c.created_at, cwd)}" if c.created_at else ""
    if c.called_from:
        made += f" (from {short_path(c.called_from, cwd)})"
    under = f", under {c.transform}" if c.transform else ""
    return f"{jitted(c.wraps, c.function)}{made}{under}"


def reason_words(reason: Reason) -> str:
    """The cache lab's words; a new function is a first compile or a new object."""
    if reason.kind == "new_function":
        return reason.after
    return reason_text(reason)


@dataclass(frozen=True)
class TreeNode:
    id: str  # the frames from the outermost down to this one, joined
    parent: str  # '' for a root
    label: str  # 'train.py:45 in main'
    compiles: int
    seconds: float


def call_tree(recording: Recording) -> list[TreeNode]:
    """Each frame of the stacks that led to compiles, outermost first; a node's totals
    include everything under it."""
    cwd = recording.program.folders
    totals: dict[tuple[str, ...], list[float]] = {}
    for c in recording.compiles:
        path: tuple[str, ...] = ()
        for frame in c.stack or [f"{c.call_site} in ?"]:
            path = (*path, frame)
            entry = totals.setdefault(path, [0, 0.0])
            entry[0] += 1
            entry[1] += c.total_s
    return [
        TreeNode(
            id=" ← ".join(path),
            parent=" ← ".join(path[:-1]),
            label=_frame_label(path[-1], cwd),
            compiles=int(n),
            seconds=s,
        )
        for path, (n, s) in totals.items()
    ]


def _frame_label(frame: str, cwd: str | tuple[str, ...]) -> str:
    location, _, function = frame.partition(" in ")
    return f"{short_path(location, cwd)} in {function}" if function else short_path(frame, cwd)


@dataclass(frozen=True)
class ExploreTarget:
    """What Open in Explore loads. `problem`: why it cannot (nothing else is set)."""

    settings: Settings = field(default_factory=Settings)  # folder: the program's sys.path[0]
    file: str = ""
    note: str = ""  # e.g. which argument the spec could not write
    problem: str = ""


def explore_target(compile: Compile, program: ProcessRun) -> ExploreTarget:
    """Read the function's file from disk (its code is never run here)."""
    path, _, _ = compile.defined_at.rpartition(":")
    if not path or compile.eager:
        return ExploreTarget(problem="this compile is JAX's own, not a function of the program")
    file = Path(path)
    try:
        code = file.read_text()
    except FileNotFoundError:
        return ExploreTarget(
            problem=f"Open in Explore reads the function's file, and {path} is gone: moved "
            "or deleted since the recording (the recorded compiles still hold)"
        )
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return ExploreTarget(problem=f"Open in Explore cannot read {path}: {why}")
    if compile.function not in {f.name for f in list_functions(code)}:
        return ExploreTarget(
            problem=f"`{compile.function}` is not a top-level function of {file.name} "
            "(a lambda or a nested function): Explore opens top-level functions"
        )
    note = ""
    if compile.spec is None:
        note = f"The args spec cannot express this call: {compile.spec_reason}. Fill it in."
    settings = Settings(
        code=code,
        folder=program.path or str(file.parent),  # the file's own imports look there
        function=compile.function,
        args=compile.spec or "",
        static=list(compile.static),
    )
    return ExploreTarget(settings, file=str(file), note=note)
