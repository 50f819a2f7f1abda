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

from dataclasses import dataclass, field
from typing import Any

from viz.ir.hlo_text import (
    Inst,
    ModuleText,
    module_texts,
    name_scope,
    output_aliases,
    parse_instruction,
    parse_stack_frames,
    split_module,
    unescape,
)
from viz.ir.kernels import fusion_colour
from viz.ir.model import (
    NO_PRODUCER,
    Graph,
    Node,
    Path,
    Producers,
    SourceLoc,
    connect,
    register_scopes,
)


@dataclass
class _Reader:
    module: ModuleText
    frames: dict[int, SourceLoc]
    graph: Graph
    first_row: int  # the module's first row in the whole text (1-based)
    ids: set[str] = field(default_factory=set)

    def new_id(self, name: str) -> str:
        """A unique id for instruction `name`, noting the row of the text it is on."""
        id_ = name if name not in self.ids else self._numbered(name)
        self.ids.add(id_)
        row = self.module.rows.get(name)
        if row is not None:
            self.graph.text_rows[id_] = [self.first_row + row]
        return id_

    def _numbered(self, name: str) -> str:
        """`name#2`, `name#3`, …: the first not taken (another module has `name`)."""
        id_, n = name, 1
        while id_ in self.ids:
            n += 1
            id_ = f"{name}#{n}"
        return id_


def read_hlo(compiled: Any) -> Graph:
    """The graph of a compiled executable's optimized HLO (`jax.stages.Compiled`)."""
    return read_hlo_text(compiled.as_text())


def read_hlo_text(text: str) -> Graph:
    """The graph of HLO module text: an executable's `as_text()` (its modules one after
    another) or one of XLA's dumps, every module's ENTRY, in the text's order (for a
    scheduled module, the order XLA runs the instructions in)."""
    graph = Graph("compiled")
    first_row = 1  # of the module in `text`
    for i, module_text in enumerate(module_texts(text)):
        if i == 0:  # the program's own parameters: a later module's are not the function's
            graph.output_aliases = output_aliases(module_text)
        _read_module(module_text, graph, first_row)
        first_row += module_text.count("\n")
    return register_scopes(graph)


def _read_module(text: str, graph: Graph, first_row: int) -> None:
    module = split_module(text)
    entry = module.entry
    if entry is None:
        entry = next((n for n in module.computations if n.startswith("main")), None)
    if entry is None:
        return
    reader = _Reader(module, parse_stack_frames(text), graph, first_row)
    reader.ids.update(n.id for n in graph.nodes)  # an earlier module's names stay its own
    reader.ids.update(path[-1] for path in graph.groups)
    root, insts = _read_comp(reader, entry, (), None)
    for i, type_ in enumerate(_output_types(root[1], insts, module.roots.get(entry, ""))):
        out = Node(reader.new_id(f"out{i}"), "output", f"out{i}", type_, kind="output")
        graph.nodes.append(out)
        connect(graph, [(root[0], type_)], out.id)


def _output_types(root_type: str, insts: list[Inst], root_name: str) -> list[str]:
    """The program's outputs, named out0, out1, … as the jaxpr and StableHLO graphs name
    them: one per element of a root tuple (how XLA returns several), else the root."""
    by_name = {inst.name: inst for inst in insts}
    root = by_name.get(root_name) or (insts[-1] if insts else None)
    if root is None or root.opcode != "tuple":
        return [root_type]
    return [by_name[o].type if o in by_name else "" for o in root.operands]


def _read_comp(
    reader: _Reader, name: str, path: Path, params: list[Producers] | None
) -> tuple[Producers, list[Inst]]:
    """Add a computation's instructions under `path`; returns its root's producers.

    `params`: the producers bound to its parameters (None for ENTRY, whose
    parameters become input nodes).
    """
    frames = reader.frames
    insts = _topological(
        [parse_instruction(line, frames) for line in reader.module.computations.get(name, ())]
    )
    root_name = reader.module.roots.get(name) or (insts[-1].name if insts else "")
    env: dict[str, Producers] = {}
    for inst in insts:
        if inst.opcode == "parameter" and params is not None:
            index = inst.index
            env[inst.name] = params[index] if index < len(params) else ((), inst.type)
        else:
            operands = [env.get(o, NO_PRODUCER) for o in inst.operands]
            env[inst.name] = _read_inst(reader, inst, operands, path)
    return env.get(root_name, NO_PRODUCER), insts


def _topological(insts: list[Inst]) -> list[Inst]:
    """Instructions ordered so that operands come before their users.

    A depth-first walk from each instruction in turn, operands last-first, so an
    instruction whose operands are all placed is placed at once.
    """
    if _in_order(insts):  # as XLA prints them
        return insts
    by_name = {i.name: i for i in insts}
    done: set[str] = set()
    order: list[Inst] = []
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


def _in_order(insts: list[Inst]) -> bool:
    """Whether every instruction comes after its operands (and once)."""
    seen: set[str] = set()
    for inst in insts:
        if inst.name in seen or not seen.issuperset(inst.operands):
            return False
        seen.add(inst.name)
    return True


def _read_inst(reader: _Reader, inst: Inst, operands: list[Producers], path: Path) -> Producers:
    if inst.opcode == "fusion" and "calls" in inst.called:
        return _read_fusion(reader, inst, operands, path)
    if inst.opcode in ("while", "conditional", "call") and inst.called:
        return _read_control(reader, inst, operands, path)
    return _add_node(reader, inst, operands, path)


def _add_node(reader: _Reader, inst: Inst, operands: list[Producers], path: Path) -> Producers:
    if inst.opcode == "parameter":
        # the argument's path as the user wrote it: op_name is an escaped HLO string
        label, kind, attrs = unescape(inst.op_name) or inst.name, "input", {}
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


def _read_fusion(reader: _Reader, inst: Inst, operands: list[Producers], path: Path) -> Producers:
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


def _read_control(reader: _Reader, inst: Inst, operands: list[Producers], path: Path) -> Producers:
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
    inst: Inst, operands: list[Producers]
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
