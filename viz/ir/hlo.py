"""Read optimized HLO (`jax.stages.Compiled`, or XLA's dumps) into the graph model.

The reader needs nothing but the module's text (the executable's `as_text()`, which
the report shows anyway, or the `*after_optimizations.txt` XLA dumps while it still
generates code): one pass splits it into computations, each instruction's line
gives its result type, operands, called computations, fusion kind and metadata,
and the text's `FileNames` / `FunctionNames` / `FileLocations` / `StackFrames`
tables (parsed once per module) resolve `stack_frame_id`s to source lines. The
walk starts at the ENTRY computation; instructions come in the text's order (a
scheduled module's: the order XLA runs them in).

Structure:
- a `fusion` is a group (kind 'fusion', op 'fusion', opaque) holding one node
  per instruction of its fused computation; the fused computation's parameters
  are not nodes: the fusion's operands connect straight to the fused ops that
  read them, and the fused root feeds the fusion's users;
- `while` (groups 'condition' and 'body'), `conditional` ('branch i') and `call`
  are groups of kind 'loop' / 'branch' / 'call' (op = the opcode), bound to
  their operands and results the same way;
- every other instruction is a node (op = HLO opcode, 'get-tuple-element',
  'custom-call', ...); ENTRY parameters are 'input' nodes, the ENTRY root feeds
  one 'output' node; which parameter's buffer an output may reuse (the module's
  `input_output_alias`) is `graph.output_aliases`. Computations applied by
  reduce/sort/scatter/... (`to_apply` scalar reducers) are not walked.

Scope is the group path (fusion / while / ...); the op's `op_name` metadata and
its name-scope path are kept in `node.attrs['op_name']` / `['name_scope']`.

What the counts count: `model.op_histogram(graph)`: instructions that run as
separate ops: each fusion once (its fused ops are opaque), each
while/conditional/call once, every other non-parameter instruction of the walked
computations. Kernel counts and tables (`fusion_count`, `kernel_count`,
`kernels`) live in `viz.ir.kernels`, which reads the graph only.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from viz.ir.kernels import fusion_colour
from viz.ir.model import (
    Graph,
    Node,
    Path,
    Producers,
    SourceLoc,
    connect,
    name_parts,
    register_scopes,
    source_loc,
)

_PRED = re.compile(r"\bpred\[")
_SIGNED = re.compile(r"\bs(\d+)\[")
_INDEX = re.compile(r"^(\d+)\)")
_TARGET = re.compile(r'\bcustom_call_target="([^"]*)"')
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
_SRC_LINE = re.compile(r"\bsource_line=(\d+)")
_TABLE_ROW = re.compile(r'^(\d+) (?:"((?:[^"\\]|\\.)*)"|\{([^}]*)\})$')
_ESCAPED = re.compile(r"\\(.)")
_ALIAS = re.compile(r"\{([\d,\s]*)\}:\s*\((\d+),")


@dataclass(slots=True)
class _Inst:
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
class _Module:
    """One module's text, split into computations: each one's instruction lines in the
    text's order (`%name = TYPE opcode(...), attrs`, the indent and `ROOT ` dropped),
    and its ROOT instruction's name."""

    computations: dict[str, list[str]] = field(default_factory=dict)
    roots: dict[str, str] = field(default_factory=dict)
    entry: str | None = None


@dataclass
class _Reader:
    module: _Module
    frames: dict[int, SourceLoc]
    graph: Graph
    ids: set[str] = field(default_factory=set)

    def new_id(self, name: str) -> str:
        id_, n = name, 1
        while id_ in self.ids:
            n += 1
            id_ = f"{name}#{n}"
        self.ids.add(id_)
        return id_


def read_hlo(compiled: Any) -> Graph:
    """The graph of a compiled executable's optimized HLO (`jax.stages.Compiled`)."""
    return read_hlo_text(compiled.as_text())


def read_hlo_text(text: str) -> Graph:
    """The graph of HLO module text: an executable's `as_text()` (its modules one after
    another) or one of XLA's dumps, every module's ENTRY, in the text's order (for a
    scheduled module, the order XLA runs the instructions in)."""
    graph = Graph("compiled")
    for i, module_text in enumerate(_module_texts(text)):
        if i == 0:  # the program's own parameters: a later module's are not the function's
            graph.output_aliases = output_aliases(module_text)
        _read_module(module_text, graph)
    return register_scopes(graph)


def _module_texts(text: str) -> list[str]:
    """Each module's text (`as_text()` joins modules, each opening with `HloModule`)."""
    starts = [0]
    while (at := text.find("\nHloModule ", starts[-1] + 1)) >= 0:
        starts.append(at + 1)
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]


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


def _read_module(text: str, graph: Graph) -> None:
    module = split_module(text)
    entry = module.entry
    if entry is None:
        entry = next((n for n in module.computations if n.startswith("main")), None)
    if entry is None:
        return
    reader = _Reader(module, parse_stack_frames(text), graph)
    reader.ids.update(n.id for n in graph.nodes)  # an earlier module's names stay its own
    reader.ids.update(path[-1] for path in graph.groups)
    root, _ = _read_comp(reader, entry, (), None)
    out = Node(reader.new_id("out"), "output", "out", root[1], kind="output")
    graph.nodes.append(out)
    connect(graph, [root], out.id)


def split_module(text: str) -> _Module:
    """A module text's computations and their ROOTs, in one pass over its lines: a
    computation opens with an unindented `%name (...) -> ... {` or `ENTRY %name ...`
    line, its instructions are the indented `%` and `ROOT %` lines under it."""
    module = _Module()
    lines: list[str] = []
    name = ""
    for line in text.split("\n"):
        if line.startswith("  %"):
            lines.append(line[2:])
        elif line.startswith("  ROOT %"):
            body = line[7:]
            lines.append(body)
            module.roots.setdefault(name, body[1 : body.find(" ")])
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
    frames = {}
    for i, raw in tables.get("StackFrames", {}).items():
        loc = locations.get(int(_fields(raw).get("file_location_id", 0)))
        if loc is not None:
            frames[i] = loc
    return frames


def _header(text: str) -> str:
    """The text before the first computation (the lines parse_stack_frames reads)."""
    if text.startswith(("%", "ENTRY")):
        return ""
    ends = [i for i in (text.find("\n%"), text.find("\nENTRY")) if i >= 0]
    return text[: min(ends)] if ends else text


def _fields(raw: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in raw.split() if "=" in part)


def _parse(line: str, frames: dict[int, SourceLoc]) -> _Inst:
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
        return _Inst(name, opcode, render_type(type_), [], {}, "", "", None, int(rest[:-1]), "")
    at = rest.find('op_name="')
    op_name = _OP_NAME.search(rest, at) if at >= 0 else None
    at = rest.find("kind=")
    kind = _KIND.search(rest, at) if at >= 0 else None
    return _Inst(
        name,
        opcode,
        render_type(type_),
        _operands(rest, opcode),
        _called(rest) if "=%" in rest or opcode == "conditional" else {},
        kind.group(1) if kind else "",
        op_name.group(1) if op_name else "",
        _source(rest, frames),
        int(_first(_INDEX, rest) or 0) if opcode == "parameter" else 0,
        _first(_TARGET, rest) if opcode == "custom-call" else "",
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
        return source_loc(file.group(1), int(line.group(1)))
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


def _read_comp(
    reader: _Reader, name: str, path: Path, params: list[Producers] | None
) -> tuple[Producers, list[_Inst]]:
    """Add a computation's instructions under `path`; returns its root's producers.

    `params`: the producers bound to its parameters (None for ENTRY, whose
    parameters become input nodes).
    """
    frames = reader.frames
    insts = _topological(
        [_parse(line, frames) for line in reader.module.computations.get(name, ())]
    )
    root_name = reader.module.roots.get(name) or (insts[-1].name if insts else "")
    env: dict[str, Producers] = {}
    for inst in insts:
        if inst.opcode == "parameter" and params is not None:
            index = inst.index
            env[inst.name] = params[index] if index < len(params) else ((), inst.type)
        else:
            operands = [env.get(o, ((), "")) for o in inst.operands]
            env[inst.name] = _read_inst(reader, inst, operands, path)
    return env.get(root_name, ((), "")), insts


def _topological(insts: list[_Inst]) -> list[_Inst]:
    """Instructions ordered so that operands come before their users.

    A depth-first walk from each instruction in turn, operands last-first, so an
    instruction whose operands are all placed is placed at once.
    """
    if _in_order(insts):  # as XLA prints them
        return insts
    by_name = {i.name: i for i in insts}
    done: set[str] = set()
    order: list[_Inst] = []
    for inst in insts:
        if inst.name in done:
            continue
        waiting = [o for o in inst.operands if o in by_name and o not in done]
        if not waiting:
            done.add(inst.name)
            order.append(inst)
            continue
        stack = [(inst, True)]
        stack.extend((by_name[o], False) for o in waiting)
        while stack:
            item, expanded = stack.pop()
            if item.name in done:
                continue
            if expanded:
                done.add(item.name)
                order.append(item)
                continue
            stack.append((item, True))
            stack.extend(
                (by_name[o], False) for o in item.operands if o in by_name and o not in done
            )
    return order


def _in_order(insts: list[_Inst]) -> bool:
    """Whether every instruction comes after its operands (and once)."""
    seen: set[str] = set()
    for inst in insts:
        if inst.name in seen or not seen.issuperset(inst.operands):
            return False
        seen.add(inst.name)
    return True


def _read_inst(reader: _Reader, inst: _Inst, operands: list[Producers], path: Path) -> Producers:
    if inst.opcode == "fusion" and "calls" in inst.called:
        return _read_fusion(reader, inst, operands, path)
    if inst.opcode in ("while", "conditional", "call") and inst.called:
        return _read_control(reader, inst, operands, path)
    return _add_node(reader, inst, operands, path)


def _unescape(text: str) -> str:
    """An HLO text string's value (`params[\\'w\\']` → `params['w']`). A function, not
    the template `\\1`, which `re` parses again on every call (two thirds of the time)."""
    return _ESCAPED.sub(_escaped_char, text) if "\\" in text else text


def _escaped_char(match: re.Match[str]) -> str:
    return match.group(1)


def _add_node(reader: _Reader, inst: _Inst, operands: list[Producers], path: Path) -> Producers:
    if inst.opcode == "parameter":
        # the argument's path as the user wrote it: op_name is an escaped HLO string
        label, kind, attrs = _unescape(inst.op_name) or inst.name, "input", {}
    else:
        label, kind = inst.target, "op"
        attrs = (
            {"op_name": inst.op_name, "name_scope": name_scope(inst.op_name)}
            if inst.op_name
            else {}
        )
    id_ = reader.new_id(inst.name)
    node = Node(id_, inst.opcode, label, inst.type, path, inst.source, kind, attrs)
    reader.graph.nodes.append(node)
    connect(reader.graph, operands, node.id)
    return (node.id,), inst.type


def _read_fusion(reader: _Reader, inst: _Inst, operands: list[Producers], path: Path) -> Producers:
    group = (*path, reader.new_id(inst.name))
    label = f"{inst.name} ({inst.kind})" if inst.kind else inst.name
    reader.graph.add_group(group, "fusion", "fusion", label=label, opaque=True)
    root, fused = _read_comp(reader, inst.called["calls"][0], group, operands)
    reader.graph.groups[group].attrs = {
        "kind": inst.kind,
        "colour": fusion_colour(inst.kind, [f.opcode for f in fused]),
        "op_name": inst.op_name,
        "name_scope": name_scope(inst.op_name),
    }
    return root[0], inst.type


def _read_control(reader: _Reader, inst: _Inst, operands: list[Producers], path: Path) -> Producers:
    """while / conditional / call: a group with one sub-group per called computation."""
    kind = {"while": "loop", "conditional": "branch", "call": "call"}[inst.opcode]
    group = (*path, reader.new_id(inst.name))
    label = inst.name if inst.name.startswith(inst.opcode) else f"{inst.opcode} {inst.name}"
    reader.graph.add_group(group, kind, inst.opcode, label=label)
    if inst.op_name:
        reader.graph.groups[group].attrs = {"op_name": inst.op_name}
    results: list[Producers] = []
    for label, name, params in _sub_computations(inst, operands):
        sub = group
        if inst.opcode != "call":
            sub = reader.graph.add_group((*group, label), "region", label=label)
        root, _ = _read_comp(reader, name, sub, params)
        if label != "condition":
            results.append(root)
    ids = tuple(dict.fromkeys(x for r in results for x in r[0]))
    return ids, inst.type


def _sub_computations(
    inst: _Inst, operands: list[Producers]
) -> list[tuple[str, str, list[Producers]]]:
    called = inst.called
    if inst.opcode == "while":
        return [
            (label, called[key][0], operands[:1])
            for label, key in (("condition", "condition"), ("body", "body"))
            if key in called
        ]
    if inst.opcode == "conditional":
        return [
            (f"branch {i}", name, operands[i + 1 : i + 2])
            for i, name in enumerate(called.get("branches", []))
        ]
    return [("call", name, operands) for name in called.get("to_apply", [])]
