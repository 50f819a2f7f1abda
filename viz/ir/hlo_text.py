"""HLO module text, lexed: its modules, computations and instruction lines, and the
stack-frame tables that resolve `stack_frame_id`s to source lines. No graph here:
`viz.ir.hlo` builds the graph from what this reads.

`split_module` splits a module into computations in one pass; `parse_instruction`
reads one instruction's line (result type, operands, called computations, fusion
kind, metadata); `parse_stack_frames` reads the `FileNames` / `FunctionNames` /
`FileLocations` / `StackFrames` tables once per module.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from viz.ir.model import SourceLoc, name_parts, source_loc, user_first
from viz.platforms.trace import CUSTOM_CALL_TARGET

_PRED = re.compile(r"\bpred\[")
_SIGNED = re.compile(r"\bs(\d+)\[")
_INDEX = re.compile(r"^(\d+)\)")
_LAYOUT = re.compile(r"\{[^{}]*\}|/\*[^*]*\*/")
_OPCODE = re.compile(r"\s*([\w\-]+)\(")
_OPERAND = re.compile(r"%([^\s,()]+)")
_HEAD = re.compile(r"%([^ ]+) = ([^ (][^ ]*) ([\w\-]+)\(")  # name, type, opcode; no tuple
_CALLED_KEYS = ("calls", "to_apply", "condition", "body", "true_computation", "false_computation")
_COMPUTATION = re.compile(r"[\w.\-]+")
_WORD_CHAR = re.compile(r"\w")
_BRANCHES = re.compile(r"\bbranch_computations=\{([^}]*)\}")
_KIND = re.compile(r"\bkind=(k\w+)")
_OP_NAME = re.compile(r'\bop_name="([^"\\]*(?:\\.[^"\\]*)*)"')
_FRAME_ID = re.compile(r"\bstack_frame_id=(\d+)")
_SRC_FILE = re.compile(r'\bsource_file="((?:[^"\\]|\\.)*)"')
_SRC_COLUMN = re.compile(r"\bsource_column=(\d+)")  # jax < 0.9 writes the location inline
_SRC_LINE = re.compile(r"\bsource_line=(\d+)")
_TABLE_ROW = re.compile(r'^(\d+) (?:"((?:[^"\\]|\\.)*)"|\{([^}]*)\})$')
_ESCAPED = re.compile(r"\\(.)")
_ALIAS = re.compile(r"\{([\d,\s]*)\}:\s*\((\d+),")


@dataclass(slots=True)
class Inst:
    """What one instruction's text line says."""

    name: str
    opcode: str
    type: str
    operands: list[str]
    called: dict[str, list[str]]
    kind: str
    op_name: str
    source: SourceLoc | None
    index: int  # parameter number, for 'parameter'
    target: str  # custom_call_target, for 'custom-call'


@dataclass
class ModuleText:
    """One module's text, split into computations: each one's instruction lines in the
    text's order (`%name = TYPE opcode(...), attrs`, the indent and `ROOT ` dropped),
    and its ROOT instruction's name; and the row each instruction is written on
    (0-based, in the module's text)."""

    computations: dict[str, list[str]] = field(default_factory=dict)
    roots: dict[str, str] = field(default_factory=dict)
    entry: str | None = None
    rows: dict[str, int] = field(default_factory=dict)


def module_texts(text: str) -> list[str]:
    """Each module's text (`as_text()` joins modules, each opening with `HloModule`)."""
    starts = [0]
    while (at := text.find("\nHloModule ", starts[-1] + 1)) >= 0:
        starts.append(at + 1)
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]


def module_name(text: str) -> str | None:
    """The name on a module text's `HloModule` line (`HloModule jit_f, ...` → `jit_f`)."""
    if not text.startswith("HloModule "):
        return None
    return text[len("HloModule ") :].split(None, 1)[0].rstrip(",") or None


def output_aliases(text: str) -> dict[int, int]:
    """parameter number → flat output index, from the `input_output_alias` of a module
    text's `HloModule` line: `{0}: (1, {}, may-alias)` says output 0 may reuse
    parameter 1's buffer."""
    end = text.find("\n")
    header = text[:end] if end >= 0 else text
    start = header.find("input_output_alias={")
    if start < 0:
        return {}
    body = header[start : header.find(" }", start) + 2]
    found = {}
    for index, param in _ALIAS.findall(body):
        found[int(param)] = int(index.split(",")[0]) if index.strip() else 0
    return found


def split_module(text: str) -> ModuleText:
    """A module text's computations and their ROOTs, in one pass over its lines: a
    computation opens with an unindented `%name (...) -> ... {` or `ENTRY %name ...`
    line, its instructions are the indented `%` and `ROOT %` lines under it."""
    module = ModuleText()
    lines: list[str] = []
    rows = module.rows
    name = ""
    for row, line in enumerate(text.split("\n")):
        if line.startswith("  %"):
            lines.append(line[2:])
            rows[line[3 : line.find(" ", 3)]] = row
        elif line.startswith("  ROOT %"):
            body = line[7:]
            lines.append(body)
            root = body[1 : body.find(" ")]
            module.roots.setdefault(name, root)
            rows[root] = row
        elif line.startswith(("%", "ENTRY %")):
            entry = line.startswith("ENTRY")
            head = line[7:] if entry else line[1:]
            name = head[: head.find(" ")] if " " in head else head
            lines = module.computations.setdefault(name, [])
            if entry:
                module.entry = name
    return module


def parse_stack_frames(text: str) -> dict[int, SourceLoc]:
    """stack_frame_id → SourceLoc, from the tables at the top of a module's text."""
    tables: dict[str, dict[int, str]] = {}
    section = ""
    for line in _header(text).splitlines():
        if line.startswith(("%", "ENTRY")):
            break
        row = _TABLE_ROW.match(line)
        if row:
            tables.setdefault(section, {})[int(row.group(1))] = row.group(2) or row.group(3)
        elif line.strip():
            section = line.strip()
    return _resolve_frames(tables)


def _resolve_frames(tables: dict[str, dict[int, str]]) -> dict[int, SourceLoc]:
    files, funcs = tables.get("FileNames", {}), tables.get("FunctionNames", {})
    locations = {}
    for i, raw in tables.get("FileLocations", {}).items():
        fields = _fields(raw)
        locations[i] = source_loc(
            files.get(int(fields.get("file_name_id", 0)), ""),
            int(fields.get("line", 0)),
            funcs.get(int(fields.get("function_name_id", 0)), ""),
            int(fields.get("column", 0)),
        )
    own, parents = {}, {}
    for i, raw in tables.get("StackFrames", {}).items():
        fields = _fields(raw)
        loc = locations.get(int(fields.get("file_location_id", 0)))
        if loc is not None:
            own[i] = loc
        parents[i] = int(fields.get("parent_frame_id", 0))
    if any(parent == i for i, parent in parents.items()):  # XLA writes the parent's id + 1
        parents = {i: parent - 1 for i, parent in parents.items()}
    return {i: found for i in own if (found := user_first(_stack(i, own, parents)))}


def _stack(frame: int, own: dict[int, SourceLoc], parents: dict[int, int]) -> list[SourceLoc]:
    """A stack frame's locations, innermost first, up its parents (0: none)."""
    stack, seen = [], set()
    while frame and frame not in seen:
        seen.add(frame)
        if frame in own:
            stack.append(own[frame])
        frame = parents.get(frame, 0)
    return stack


def _header(text: str) -> str:
    """The text before the first computation (the lines parse_stack_frames reads)."""
    if text.startswith(("%", "ENTRY")):
        return ""
    ends = [i for i in (text.find("\n%"), text.find("\nENTRY")) if i >= 0]
    return text[: min(ends)] if ends else text


def _fields(raw: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in raw.split() if "=" in part)


def parse_instruction(line: str, frames: dict[int, SourceLoc]) -> Inst:
    """Parse one instruction's line: `%name = TYPE opcode(operands), attrs`.

    This runs for every instruction, so it avoids regex scans where it can: one
    match reads the name, type and opcode of a line whose result is no tuple (nearly
    all), and each attribute pattern is searched from the first occurrence of a
    literal that every match starts with (`str.find` is much faster than a regex
    scan of the metadata and backend_config text), which finds the same first match.
    """
    head = _HEAD.match(line)
    if head:
        (name, type_, opcode), rest = head.groups(), line[head.end() :]
    else:
        name, type_, opcode, rest = _head(line)
    if opcode == "parameter" and rest[:-1].isdigit() and rest[-1] == ")":
        # a fused computation's parameter (a third of all lines): nothing else to read
        return Inst(name, opcode, render_type(type_), [], {}, "", "", None, int(rest[:-1]), "")
    at = rest.find('op_name="')
    op_name = _OP_NAME.search(rest, at) if at >= 0 else None
    at = rest.find("kind=")
    kind = _KIND.search(rest, at) if at >= 0 else None
    return Inst(
        name,
        opcode,
        render_type(type_),
        _operands(rest, opcode),
        _called(rest) if "=%" in rest or opcode == "conditional" else {},
        kind.group(1) if kind else "",
        op_name.group(1) if op_name else "",
        _source(rest, frames),
        int(_first(_INDEX, rest) or 0) if opcode == "parameter" else 0,
        _first(CUSTOM_CALL_TARGET, rest) if opcode == "custom-call" else "",
    )


def _head(line: str) -> tuple[str, str, str, str]:
    """`_HEAD`'s groups for any line: a tuple's type nests parentheses, and an opcode
    may come without its parenthesis."""
    name = line[1 : line.find(" ")]
    start = line.index(" = ") + 3
    end = line.index(" ", start) if line[start] != "(" else _type_end(line, start)
    match = _OPCODE.match(line, end)
    if match:
        return name, line[start:end], match.group(1), line[match.end() :]
    opcode, _, rest = line[end:].strip().partition("(")
    return name, line[start:end], opcode, rest


def _operands(rest: str, opcode: str) -> list[str]:
    """The operand names of a line's `opcode(%a, %b)` (`rest`: the text after the
    opening parenthesis), each written `%name` (a long list numbers every fifth:
    `/*index=5*/%name`; where operand shapes are printed, a tuple's nests parentheses).
    A constant has none: its parentheses hold its literal."""
    if opcode == "constant":
        return []
    close = rest.find(")")
    close = close if close >= 0 else len(rest) - 1  # (the list is always closed)
    if rest.find("(", 0, close) >= 0:  # shapes of tuples among the operands: find its end
        close = _closing(rest)
    return _OPERAND.findall(rest, 0, close) if rest.find("%", 0, close) >= 0 else []


def _closing(rest: str) -> int:
    """Where the parenthesis opened just before `rest` closes."""
    depth = 1
    for i, char in enumerate(rest):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i
    return len(rest)


def _search(pattern: re.Pattern[str], literal: str, text: str) -> re.Match[str] | None:
    """`pattern.search(text)` for a pattern whose every match starts with `literal`."""
    at = text.find(literal)
    return pattern.search(text, at) if at >= 0 else None


def _first(pattern: re.Pattern[str], text: str) -> str:
    match = pattern.search(text)
    return match.group(1) if match else ""


def _type_end(line: str, start: int) -> int:
    """End of the result type starting at `start` (a tuple type nests parentheses)."""
    if line[start] != "(":
        return line.index(" ", start)
    depth = 0
    for i in range(start, len(line)):
        if line[i] == "(":
            depth += 1
        elif line[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(line)


def _called(rest: str) -> dict[str, list[str]]:
    """The computations a line calls, by attribute (`calls`, `to_apply`, ..., and
    `branches` for a conditional's). Each `=%` is found with `str.find` and its key read
    backwards: a regex scan of the whole line for every key was most of a reduce's or a
    fusion's parse."""
    called: dict[str, list[str]] = {}
    at = rest.find("=%")
    while at >= 0:
        key = next((k for k in _CALLED_KEYS if _ends_key(rest, at, k)), None)
        name = _COMPUTATION.match(rest, at + 2) if key else None
        if key and name:
            called.setdefault(key, []).append(name.group())
        at = rest.find("=%", at + 2)
    branches = _search(_BRANCHES, "branch_computations={", rest)
    if branches:
        called["branches"] = [b.strip().lstrip("%") for b in branches.group(1).split(",")]
    elif "true_computation" in called:
        called["branches"] = called.pop("true_computation") + called.pop("false_computation", [])
    return called


def _ends_key(text: str, at: int, key: str) -> bool:
    """Whether the word that ends at `at` in `text` is `key`."""
    start = at - len(key)
    if start < 0 or not text.startswith(key, start):
        return False
    return start == 0 or not _WORD_CHAR.match(text, start - 1)


def _source(rest: str, frames: dict[int, SourceLoc]) -> SourceLoc | None:
    at = rest.find("stack_frame_id=")
    frame = _FRAME_ID.search(rest, at) if at >= 0 else None
    found = frames.get(int(frame.group(1))) if frame else None
    if found is not None or 'source_file="' not in rest:
        return found
    file = _search(_SRC_FILE, 'source_file="', rest)
    line = _search(_SRC_LINE, "source_line=", rest)
    if file and line:
        column = _search(_SRC_COLUMN, "source_column=", rest)
        return source_loc(
            file.group(1), int(line.group(1)), column=int(column.group(1)) if column else 0
        )
    return None


@functools.lru_cache(maxsize=4096)
def render_type(text: str) -> str:
    """An HLO shape in jaxpr spelling: `f32[8,128]{1,0}` → `f32[8,128]`, pred → bool."""
    text = _PRED.sub("bool[", _LAYOUT.sub("", text))
    return _SIGNED.sub(r"i\1[", text)


@functools.lru_cache(maxsize=4096)
def name_scope(op_name: str) -> str:
    """`jit(f)/layer0/attention/dot_general` → `layer0/attention`."""
    parts = list(name_parts(op_name))
    if parts and parts[0].startswith(("jit(", "pjit(")):
        parts = parts[1:]
    return "/".join(parts[:-1])


def unescape(text: str) -> str:
    """An HLO text string's value (`params[\\'w\\']` → `params['w']`). A function, not
    the template `\\1`, which `re` parses again on every call (two thirds of the time)."""
    return _ESCAPED.sub(_escaped_char, text) if "\\" in text else text


def _escaped_char(match: re.Match[str]) -> str:
    return match.group(1)
