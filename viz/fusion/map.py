"""The fusion map: which StableHLO ops and jaxpr equations each kernel absorbed.

Built from XLA's own metadata, read once into the graph models by the IR readers:
- every compiled-HLO instruction, inside fusions and loop bodies too, carries
  `op_name` (the name stack jax gave the op: `jit(f)/layer0/attention/dot_general`,
  several joined by `;` when XLA merged ops) and a source location (`stack_frame_id`
  into the module's source tables: file, line and column);
- every StableHLO op carries the same name stack and location in its MLIR location;
- every jaxpr equation carries its name stack and primitive, and its user frame.

An op (or equation) is matched to the compiled instructions whose name ends with
its name (`jit(f)/while/body/closed_call/add` ends with a called function's
`add`) and whose location is its location; when XLA dropped a location, the name
alone decides. Among those, instructions of the same kind of op are preferred
(`stablehlo.dot_general` → `dot`), and when k ops share exactly k candidates (an
unrolled Python loop without name scopes) they pair up in program order. Each
matched instruction runs in one kernel: its outermost fusion, or itself.

A kernel the user wrote (a `pallas_call`: a 'kernel' group of the jaxpr's graph, its
call a node of its own) runs as one instruction (on TPU a custom call): its call is
matched as any op is, and its body's equations, which no instruction names, are found
in the kernel of their call (`via: kernel`); where the platform inlined the body
instead (Pallas's interpret mode on CPU), the body's equations are matched as any op
and the call is found where its body went. Where the platform lowered the kernel to an
IR of its own (Mosaic on TPU: the StableHLO's custom call holds it), the kernel's entry
keeps that IR's text (`kernel_ir`).

`fusion_map_coverage`: per IR, the share of ops found in the optimized program
(in a kernel or in a `no_kernel` instruction such as a bitcast). Constants,
`func.call` nodes of shared functions and jaxpr container equations (pjit, scan,
while, cond, custom_jvp/vjp: groups in the model, not nodes) are not counted;
the ops inside them are. StableHLO ops with regions (while, reduce, sort) are
groups too; their region ops count.

Pure functions over `viz.ir.model.Graph`; no jax, no streamlit.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from viz.fusion.model import FusionEntry
from viz.ir.kernels import KernelRef, kernel_names, kernel_refs
from viz.ir.model import Graph, Node, Path, name_parts

Parts = tuple[str, ...]
Loc = tuple[str, int, int]

# StableHLO / jaxpr op names → the HLO opcode they usually become (a preference
# among candidates, never a requirement).
_SAME_OP = {
    "dot_general": "dot",
    "broadcast_in_dim": "broadcast",
    "mul": "multiply",
    "sub": "subtract",
    "div": "divide",
    "max": "maximum",
    "min": "minimum",
    "neg": "negate",
    "exp": "exponential",
    "pow": "power",
    "integer_pow": "multiply",
    "select_n": "select",
    "convert_element_type": "convert",
    "reduce_sum": "reduce",
    "reduce_max": "reduce",
    "reduce_min": "reduce",
    "reduce_prod": "reduce",
    "argmax": "reduce",
    "argmin": "reduce",
    "squeeze": "reshape",
    "expand_dims": "reshape",
    "lt": "compare",
    "le": "compare",
    "gt": "compare",
    "ge": "compare",
    "eq": "compare",
    "ne": "compare",
    "cumsum": "reduce-window",
    "cumprod": "reduce-window",
    "cummax": "reduce-window",
    "custom_call": "custom-call",
    "reduce_window": "reduce-window",
    "select_and_scatter": "select-and-scatter",
}
# StableHLO ops whose regions XLA applies inside the op itself (a comparator, a
# reducer): the ops in those regions run in the op's kernel.
APPLIED_REGION_OPS = frozenset(
    {
        "stablehlo.sort",
        "stablehlo.reduce",
        "stablehlo.reduce_window",
        "stablehlo.scatter",
        "stablehlo.select_and_scatter",
        "stablehlo.all_reduce",
        "stablehlo.reduce_scatter",
    }
)
NOT_COUNTED = {
    "stablehlo": frozenset({"stablehlo.constant", "func.call"}),
    "jaxpr": frozenset(),
}


@dataclass
class FusionMap:
    entries: list[FusionEntry]
    # 'stablehlo' / 'jaxpr' → share found (None: no ops); 'counts' → per IR: ops,
    # by_metadata, by_dataflow, folded
    coverage: dict[str, Any]


@dataclass
class Side:
    """What one IR brings to the map before any compiled program exists (`prepare`): its
    counted ops, what each is matched on, which only compute constants, and the links
    the ops lost by XLA's metadata are found through. The pipeline prepares both sides
    while XLA compiles, so that only the matching waits for the compile."""

    ir: str
    ops: list[Node]  # counted_ops, program order
    keys: list[tuple[Parts, Loc | None, str, str | None]]  # name parts, loc, op, owner
    constant: list[str]  # ids of the ops whose value depends on constants only
    users: dict[str, list[str]]  # op id → the nodes reading its value, edge order
    producers: dict[str, list[str]]  # op id → the nodes producing its operands
    # a kernel's call node id → its body's op ids (jaxpr: `pallas_call`)
    kernel_bodies: dict[str, list[str]] = field(default_factory=dict)


def prepare(graph: Graph, ir: str) -> Side:
    """One IR's side of the map (`ir`: 'stablehlo' or 'jaxpr')."""
    ops = counted_ops(graph, ir)
    owners = _applied_owners(graph)
    keys = [(_node_parts(op, ir), _loc(op), op.op, owners.get(op.scope)) for op in ops]
    ids = {op.id for op in ops}
    users: dict[str, list[str]] = {}
    inputs: dict[str, list[str]] = {}  # every node's, for `producers` and `constant_only`
    for edge in graph.edges:  # one walk over the edges for all three
        src, dst = edge.src, edge.dst
        inputs.setdefault(dst, []).append(src)
        if src in ids:
            users.setdefault(src, []).append(dst)
    producers = {op.id: inputs[op.id] for op in ops if op.id in inputs}
    constant = _constant_only(graph, inputs)
    constants = [op.id for op in ops if constant.get(op.id)]
    return Side(ir, ops, keys, constants, users, producers, kernel_bodies(graph, ops))


def kernel_bodies(graph: Graph, ops: list[Node]) -> dict[str, list[str]]:
    """Each kernel group's call node → the ops of its body (the group's other ops)."""
    kernels = [path for path, group in graph.groups.items() if group.kind == "kernel"]
    bodies: dict[str, list[str]] = {}
    for path in kernels:
        inside = [op for op in ops if op.scope[: len(path)] == path]
        call = next((op for op in inside if op.scope == path), None)
        if call is not None:
            bodies[call.id] = [op.id for op in inside if op is not call]
    return bodies


def fusion_map(
    graphs: dict[str, Graph], user_file: str | None = None, sides: dict[str, Side] | None = None
) -> FusionMap:
    """The map from the three graph models (`jaxpr`, `stablehlo`, `compiled`).

    `user_file`: keep only source lines of this file in `lines` (None: every file).
    `sides`: `prepare` of the jaxpr and StableHLO graphs, where already made.
    Never raises on a missing IR: its ops are simply not mapped.
    """
    compiled = graphs.get("compiled")
    if compiled is None:
        return FusionMap([], {"stablehlo": None, "jaxpr": None})
    index = _Index(compiled)
    entries = {name: FusionEntry(name, "") for name in kernel_names(compiled)}
    coverage: dict[str, Any] = {}
    counts: dict[str, dict[str, int]] = {}
    for ir in ("stablehlo", "jaxpr"):
        graph = graphs.get(ir)
        side = (sides or {}).get(ir) or (prepare(graph, ir) if graph is not None else None)
        if side is None:
            side = Side(ir, [], [], [], {}, {})
        direct = _match(index, side)
        folded = {i for i in side.constant if not direct[i]}
        ops = [o for o in side.ops if o.id not in folded] if folded else side.ops
        seeded, in_kernel = _into_kernels(side, direct)
        found = _absorbed(side, ops, seeded)
        _calls_from_bodies(side, found)
        mapped = sum(1 for o in ops if found[o.id])
        by_metadata = sum(1 for o in ops if direct[o.id])
        counts[ir] = {
            "ops": len(ops),
            "by_metadata": by_metadata,
            "by_dataflow": mapped - by_metadata,
            "folded": len(folded),
        }
        coverage[ir] = mapped / len(ops) if ops else None
        _add_ops(entries, ir, ops, direct, found, user_file, in_kernel)
        _title_kernels(entries, side, direct)
        if graph is not None and graph.kernel_irs:
            _kernel_irs(entries, graph, direct)
    _fill_kernels(entries, compiled, index, user_file)
    coverage["counts"] = counts
    return FusionMap(list(entries.values()), coverage)


def _add_ops(
    entries: dict[str, FusionEntry],
    ir: str,
    ops: list[Node],
    direct: dict[str, list[KernelRef]],
    found: dict[str, list[KernelRef]],
    user_file: str | None,
    in_kernel: set[str],
) -> None:
    """Each op into the entry of every kernel it went into (thousands of ops on a big
    model: the loop keeps to plain look-ups)."""
    key = "name" if ir == "stablehlo" else "primitive"
    stablehlo = ir == "stablehlo"
    for op in ops:
        op_id = op.id
        refs = found[op_id]
        if not refs:  # not found: in no entry
            continue
        via = "metadata" if direct[op_id] else "kernel" if op_id in in_kernel else "dataflow"
        line = _user_line(op, user_file)
        for ref in refs:
            entry = entries.get(ref.name)
            if entry is None:
                entry = entries[ref.name] = FusionEntry(ref.name, ref.kind)
            else:
                entry.kind = ref.kind
            (entry.stablehlo_ops if stablehlo else entry.jaxpr_eqns).append(
                {"id": op_id, key: op.op, "via": via}
            )
            if line and line not in entry.lines:
                entry.lines.append(line)


def counted_ops(graph: Graph, ir: str) -> list[Node]:
    """The ops coverage counts, in program order (see the module docstring)."""
    skip = NOT_COUNTED.get(ir, frozenset())
    return [n for n in graph.nodes if n.kind == "op" and n.op not in skip]


def _user_line(node: Node, user_file: str | None) -> int:
    """The node's source line if it is one `lines` keeps (else 0)."""
    src = node.source
    if src is None or (user_file is not None and src.file != user_file):
        return 0
    return src.line


def _fill_kernels(
    entries: dict[str, FusionEntry], compiled: Graph, index: _Index, user_file: str | None
) -> None:
    """Each entry's kind, and the lines its own instructions name; lines sorted."""
    for node, ref in zip(index.nodes, index.refs, strict=True):
        entry = entries.get(ref.name)
        if entry is not None:
            entry.kind = entry.kind or ref.kind
            line = _user_line(node, user_file)
            if line and line not in entry.lines:
                entry.lines.append(line)
    for entry in entries.values():
        entry.lines.sort()


class _Index:
    """The compiled program's instructions, by (last name part, location) and by name,
    each with the kernel it runs in."""

    def __init__(self, compiled: Graph):
        self.nodes = [n for n in compiled.nodes if n.kind == "op"]
        self.ops = [n.op for n in self.nodes]
        self.refs = kernel_refs(compiled, self.nodes)
        self.by_loc: dict[tuple[str, Loc], list[tuple[int, Parts]]] = {}
        self.by_name: dict[str, list[tuple[int, Parts]]] = {}  # every instruction
        self.unplaced: dict[str, list[tuple[int, Parts]]] = {}  # those without a location
        self.by_parts: dict[Parts, list[int]] = {}
        self.exact: dict[tuple[Parts, Loc], list[int]] = {}
        self.at: dict[tuple[Loc, str], list[int]] = {}  # by location and opcode
        self.found: dict[tuple[Parts, Loc | None, str], tuple[int, ...]] = {}  # candidates
        self._add(self.nodes)

    def _add(self, nodes: list[Node]) -> None:
        """Each instruction into the look-ups (held in locals: thousands of nodes)."""
        at, by_name, by_parts = self.at, self.by_name, self.by_parts
        by_loc, exact, unplaced = self.by_loc, self.exact, self.unplaced
        for i, node in enumerate(nodes):
            loc = node.source.key if node.source is not None else None
            if loc is not None:
                at.setdefault((loc, node.op), []).append(i)
            for parts in _op_names(node.attrs.get("op_name", "")):
                last = parts[-1]
                by_name.setdefault(last, []).append((i, parts))
                by_parts.setdefault(parts, []).append(i)
                if loc is not None:
                    by_loc.setdefault((last, loc), []).append((i, parts))
                    exact.setdefault((parts, loc), []).append(i)
                else:
                    unplaced.setdefault(last, []).append((i, parts))

    def applied(self, region_op: str, loc: Loc | None) -> tuple[int, ...]:
        """Instructions at `loc` of the kind `region_op` becomes (sort, reduce...)."""
        if loc is None:
            return ()
        return tuple(self.at.get((loc, _hlo_op(region_op)), ()))

    def candidates(self, parts: Parts, loc: Loc | None, op: str) -> tuple[int, ...]:
        """Instructions an op with this name, location and kind may have become
        (remembered by the opcode it prefers: look-alike ops, and a jaxpr equation and
        the StableHLO op it lowered to, ask the same question)."""
        key = (parts, loc, _hlo_op(op))
        found = self.found.get(key)
        if found is None:
            found = self.found[key] = self._candidates(parts, loc, key[2])
        return found

    def _candidates(self, parts: Parts, loc: Loc | None, want: str) -> tuple[int, ...]:
        if not parts:
            return ()
        ops = self.ops
        exact = self.exact.get((parts, loc)) if loc is not None else None
        if exact:  # the common case: same name stack, same place
            if len(exact) == 1:  # most often one instruction: it, whatever its kind
                return (exact[0],)
            same = [i for i in exact if ops[i] == want]
            return tuple(dict.fromkeys(same or exact))
        found = list(self.by_loc.get((parts[-1], loc), ())) if loc is not None else []
        if not found:  # no location on one side: the name decides
            pool = self.by_name if loc is None else self.unplaced
            found = [(i, p) for i, p in pool.get(parts[-1], ()) if _ends_with(p, parts)]
        if not found and len(parts) > 1:
            # XLA merged it with an identical op elsewhere (CSE kept the other's
            # location): the same name stack and the same kind of instruction
            found = [(i, parts) for i in self.by_parts.get(parts, ()) if ops[i] == want]
        named = [(i, p) for i, p in found if _ends_with(p, parts)] or found
        same = [i for i, _ in named if ops[i] == want]
        return tuple(dict.fromkeys(same or [i for i, _ in named]))

    def kernels(self, insts: tuple[int, ...]) -> list[KernelRef]:
        """The kernels these instructions run in, each once, in their order."""
        if len(insts) == 1:
            return [self.refs[insts[0]]]
        refs = self.refs  # one object per kernel: telling them apart by identity is quick
        return list({id(refs[i]): refs[i] for i in insts}.values())


def _match(index: _Index, side: Side) -> dict[str, list[KernelRef]]:
    """op id → the kernels it went into (empty: not found in the optimized program).

    An op in the applied computation of an op with regions (the comparator of a sort,
    the adder of a reduce: its `owner`) runs inside that op.
    """
    chosen: dict[str, tuple[int, ...]] = {}
    groups: dict[tuple[tuple[int, ...], str], list[str]] = {}
    for op, (parts, loc, name, owner) in zip(side.ops, side.keys, strict=True):
        cands = index.applied(owner, loc) if owner else ()
        cands = cands or index.candidates(parts, loc, name)
        chosen[op.id] = cands
        if len(cands) > 1:
            groups.setdefault((cands, name), []).append(op.id)
    # k look-alike ops and exactly k look-alike instructions: pair them in order
    for (cands, _), ids in groups.items():
        if len(ids) == len(cands):
            for op_id, inst in zip(ids, cands, strict=True):
                chosen[op_id] = (inst,)
    return {op_id: index.kernels(insts) if insts else [] for op_id, insts in chosen.items()}


def _absorbed(
    side: Side, ops: list[Node], direct: dict[str, list[KernelRef]]
) -> dict[str, list[KernelRef]]:
    """Ops XLA rewrote without keeping their metadata (a broadcast folded into the
    add that reads it, a reshape that became its user's bitcast) take the kernels of
    the ops that read their result, else of the ops that produced their operands.
    An op whose result nothing reads (dead code XLA removed) stays not found."""
    found = dict(direct)
    missing = [o.id for o in ops if not direct[o.id]]
    if not missing:
        return found
    users = side.users
    for links in (users, side.producers):
        # program order backwards for users (a chain of lost ops feeds a found one)
        order = reversed(missing) if links is users else missing
        for op_id in order:
            if found.get(op_id) or op_id not in users:
                continue  # found, or dead code: XLA removed it, it is in no kernel
            refs = [r for other in links.get(op_id, ()) for r in found.get(other, ())]
            if refs:
                found[op_id] = list(dict.fromkeys(refs))
    return found


def _title_kernels(
    entries: dict[str, FusionEntry], side: Side, direct: dict[str, list[KernelRef]]
) -> None:
    """The kernel a user's kernel call became (matched by its own metadata: a custom
    call) is titled by the user's kernel function."""
    labels = {op.id: op.label for op in side.ops if op.id in side.kernel_bodies}
    for call, label in labels.items():
        refs = direct.get(call, ())
        title = label.partition(": ")[2]
        if len(refs) == 1 and title and refs[0].name in entries:
            entries[refs[0].name].title = title


def _kernel_irs(
    entries: dict[str, FusionEntry], graph: Graph, direct: dict[str, list[KernelRef]]
) -> None:
    """The kernel a user's kernel call became (one instruction, found by its metadata)
    holds the kernel's own IR, and is titled by the kernel where the jaxpr did not."""
    nodes = graph.node_map()
    for call, text in graph.kernel_irs.items():
        refs = direct.get(call, ())
        if len(refs) == 1 and refs[0].name in entries:
            entry = entries[refs[0].name]
            entry.kernel_ir = text
            entry.title = entry.title or nodes[call].attrs.get("kernel", "")


def _into_kernels(
    side: Side, direct: dict[str, list[KernelRef]]
) -> tuple[dict[str, list[KernelRef]], set[str]]:
    """The body ops of a kernel whose call was found by its metadata run in the call's
    kernel (before dataflow could place them by their neighbours); returns the ops
    found so far, and those found through their call."""
    seeded = dict(direct)
    through = set()
    for call, body in side.kernel_bodies.items():
        for op in body:
            if direct.get(call) and not direct.get(op):
                seeded[op] = direct[call]
                through.add(op)
    return seeded, through


def _calls_from_bodies(side: Side, found: dict[str, list[KernelRef]]) -> None:
    """A kernel call no instruction names (its body inlined: Pallas's interpret mode)
    is found where its body went."""
    for call, body in side.kernel_bodies.items():
        if not found.get(call):
            refs = [r for op in body for r in found.get(op, ())]
            found[call] = list({id(r): r for r in refs}.values())


def constant_only(graph: Graph) -> dict[str, bool]:
    """node id → whether its value depends on constants only (a `sqrt` of a literal,
    an `iota` mask): XLA computes such ops while compiling, so an op of them that is
    not found (`folded`) is a constant, not a miss."""
    return _constant_only(graph, _inputs(graph))


def _inputs(graph: Graph) -> dict[str, list[str]]:
    """node id → the nodes producing its operands, edge order."""
    inputs: dict[str, list[str]] = {}
    for edge in graph.edges:
        inputs.setdefault(edge.dst, []).append(edge.src)
    return inputs


def _constant_only(graph: Graph, inputs: dict[str, list[str]]) -> dict[str, bool]:
    # constant nodes known from the start: an operand that comes after its user is
    # constant if it is a constant node
    constant = {node.id: True for node in graph.nodes if node.kind == "constant"}
    known = constant.get  # None (false) for an operand not seen yet
    for node in graph.nodes:  # program order: operands first
        if node.kind in ("input", "output"):
            constant[node.id] = False
        elif node.kind == "constant" or node.op == "stablehlo.constant":
            constant[node.id] = True
        else:
            constant[node.id] = all(map(known, inputs.get(node.id, ())))
    return constant


def _applied_owners(graph: Graph) -> dict[Path, str]:
    """Scope → the op with an applied computation (sort, reduce...) it lies in."""
    applied = {p: g.op for p, g in graph.groups.items() if g.op in APPLIED_REGION_OPS}
    if not applied:  # most programs: no sort or reduce with a region
        return {}
    owners: dict[Path, str] = dict(applied)
    seen: set[Path] = set()  # scopes looked up (thousands of nodes share a few hundred)
    for node in graph.nodes:
        scope = node.scope
        if scope not in seen:
            seen.add(scope)
            owner = next(
                (applied[scope[:d]] for d in range(len(scope), 0, -1) if scope[:d] in applied),
                None,
            )
            if owner:
                owners[scope] = owner
    return owners


def _node_parts(node: Node, ir: str) -> Parts:
    if ir == "jaxpr":
        return _eqn_parts(node.attrs.get("name_stack", ""), node.op)
    names = _op_names(node.attrs.get("op_name", ""))
    return names[0] if names else ()


@functools.lru_cache(maxsize=16384)  # the equations of one scope share their name stack
def _eqn_parts(name_stack: str, primitive: str) -> Parts:
    return (*_strip_root(name_parts(name_stack)), primitive)


def _loc(node: Node) -> Loc | None:
    return node.source.key if node.source is not None else None


@functools.lru_cache(maxsize=16384)
def _op_names(op_name: str) -> list[Parts]:
    """The name stacks in an `op_name` (`;` joins those of merged ops), root dropped."""
    out = []
    for name in op_name.split(";"):
        parts = _strip_root(name_parts(name))
        if parts:
            out.append(parts)
    return out


def _strip_root(parts: Parts) -> Parts:
    if parts and parts[0].startswith(("jit(", "pjit(")) and len(parts) > 1:
        return parts[1:]
    return parts


def _ends_with(parts: Parts, suffix: Parts) -> bool:
    return len(parts) >= len(suffix) and parts[len(parts) - len(suffix) :] == suffix


@functools.lru_cache(maxsize=4096)  # a few hundred op names, asked about many times
def _hlo_op(op: str) -> str:
    """The HLO opcode a StableHLO op or jaxpr primitive usually becomes: instructions of
    that opcode are preferred among an op's candidates."""
    name = op.rsplit(".", 1)[-1]
    return _SAME_OP.get(name, name.replace("_", "-"))
