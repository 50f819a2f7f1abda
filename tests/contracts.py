"""The dataclasses behind the public JSON contracts, walked from their roots: what
docs/contracts.md must document field by field (tests/test_docs.py), and what
writes its tables (`python tests/contracts.py` prints them)."""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from typing import Any

from viz.cache.events import BucketRow, CallEvent, EntryRow, FailedEvent, RoutedEvent
from viz.diff.model import Diff
from viz.plain import FLAT
from viz.recorder.display.job import JobView
from viz.recorder.model import Recording
from viz.report import Report

# (title, what writes it, roots); a root's nested dataclasses are documented with it
CONTRACTS: list[tuple[str, str, tuple[type, ...]]] = [
    ("Report", "`jitscope analyze --json OUT`, `report.to_dict()`", (Report,)),
    ("Recording", "`jitscope record --json OUT`, `rec.recording().to_dict()`", (Recording,)),
    (
        "Cache",
        "`jitscope cache --json OUT`: `{ok, error, events}`, an event per call",
        (CallEvent, RoutedEvent, FailedEvent, EntryRow, BucketRow),
    ),
    ("Diff", "`jitscope diff A B --json OUT`", (Diff,)),
    ("Job", "`jitscope job REC... --json OUT`", (JobView,)),
]
NOT_PUBLIC = {"graph_models"}  # the app's full graphs: never in a JSON file


def nested(hint: Any) -> list[type]:
    """The dataclasses a field's type names (through lists, dicts and unions)."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return [hint]
    found: list[type] = []
    for arg in typing.get_args(hint):
        found += nested(arg)
    return found


def classes(roots: tuple[type, ...]) -> list[type]:
    seen: list[type] = []

    def walk(cls: type) -> None:
        if cls in seen:
            return
        seen.append(cls)
        hints = _hints(cls)
        for f in public_fields(cls):
            for inner in nested(hints.get(f.name)):
                walk(inner)

    for root in roots:
        walk(root)
    return seen


def public_fields(cls: type) -> list[dataclasses.Field]:
    """Its JSON keys' fields: a flat field's own keys (`viz.plain.flat`) in its place."""
    found = []
    for f in dataclasses.fields(cls):
        if FLAT in f.metadata:
            inner = flat_class(cls, f)
            found += [g for g in public_fields(inner) if g.name not in f.metadata[FLAT]]
        elif f.name not in NOT_PUBLIC:
            found.append(f)
    return found


def flat_class(cls: type, f: dataclasses.Field) -> type:
    return typing.get_type_hints(cls)[f.name]


def _hints(cls: type) -> dict[str, Any]:
    """Type hints of its JSON keys, a flat field's own included."""
    hints = dict(typing.get_type_hints(cls))
    for f in dataclasses.fields(cls):
        if FLAT in f.metadata:
            hints.update(_hints(flat_class(cls, f)))
    return hints


def _type_name(hint: Any) -> str:
    text = str(hint) if not isinstance(hint, type) else hint.__name__
    text = re.sub(r"\b[\w.]+\.(\w+)", r"\1", text.replace("typing.", ""))
    return text.replace("NoneType", "None")


def comments(cls: type) -> dict[str, str]:
    """field → the comment written beside it in the class's source (or its flat
    field's class's)."""
    found = {}
    for f in dataclasses.fields(cls):
        if FLAT in f.metadata:
            found.update(comments(flat_class(cls, f)))
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return found
    for line in source.splitlines():
        match = re.match(r"\s+(\w+): [^#]*#\s*(.*)$", line)
        if match:
            found[match.group(1)] = match.group(2).strip()
    return found


def table(cls: type) -> str:
    hints = _hints(cls)
    said = comments(cls)
    doc = (inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " ")
    if doc.startswith(f"{cls.__name__}("):  # dataclass's generated signature
        doc = ""
    rows = [f"### {cls.__name__}", ""]
    if doc:
        rows += [doc, ""]
    rows += ["| key | type | what it holds |", "| --- | --- | --- |"]
    for f in public_fields(cls):
        kind = _type_name(hints.get(f.name)).replace("|", "\\|")
        meaning = said.get(f.name, "").replace("|", "\\|")
        rows.append(f"| `{f.name}` | `{kind}` | {meaning} |")
    return "\n".join(rows)


INTRO = """# The JSON contracts

Other tools read what jitscope writes: these keys are public. They only grow: a key is
added, never renamed or removed (`tests/test_golden.py` holds three reports byte for
byte). Each table is one dataclass of `viz/`, whose fields are the JSON keys, in order;
a nested type is a nested object (or a list of them). Times are seconds, sizes bytes,
`path:line` a place in a source file. The tables are written from the code
(`python tests/contracts.py > docs/contracts.md`), and `tests/test_docs.py` fails
when a field is missing here.
"""


def page() -> str:
    parts = [INTRO]
    for title, written_by, roots in CONTRACTS:
        parts.append(f"## {title}\n\nWritten by {written_by}.\n")
        parts.extend(table(cls) + "\n" for cls in classes(roots))
    return "\n".join(parts)


if __name__ == "__main__":
    print(page(), end="")
