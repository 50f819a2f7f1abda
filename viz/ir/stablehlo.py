"""Read a StableHLO module (`lowered.compiler_ir("stablehlo")`) into the graph model.

The module is walked with the MLIR Python bindings, op by op.

What the counts count (`model.op_histogram`): every operation inside every
function of the module, each function counted once however often it is called
(so the counts match the module text), constants included; `func.func` itself
and region terminators (`func.return`, `stablehlo.return`) are not ops. An op
that owns regions (`stablehlo.while`, `case`, `if`, `reduce`, `sort`, ...) is
one group (op = its name; kind 'loop' for while, 'branch' for case/if, else
'region') holding its regions' ops (one sub-group per region when there are
several), and is counted once. Ops of other dialects that jax emits (`sdy.*`, `chlo.*`) count
like any other; module-level ops (`sdy.mesh`) are skipped.

Calls (`func.call` to the private functions jax emits for inner jits,
`closed_call`, ...): a function called from exactly one place is drawn at that
place, as a group (kind 'call', op 'func.call') that stands for the call op, with
its arguments bound to the call's operands and the call's results bound to the
function's returned values, so edges run straight through. A function called
from several places is read once, as a top-level group `@name`; each call is
then a plain 'func.call' node with an edge into the function's ops that read
its arguments ("call @name" links there) and edges from the call node to the
users of its results.

A custom call that runs a kernel the user wrote (a Pallas kernel: its `kernel_name`
attribute) is one op labelled by the kernel (`custom_call: add_kernel`, `attrs['kernel']`);
where the platform lowered the kernel to an IR of its own (Mosaic on TPU), that IR's text
is `graph.kernel_irs[node id]` (`viz.platforms.mosaic`).

An op node keeps its location's name in `attrs['op_name']` (`jit(f)/layer0/add`;
inside a called function it is relative to the call: `add`) and its file, line
and column in `source`; an op without a file location takes its caller's.

`main`'s block arguments are 'input' nodes (labelled from `loc("x")`; the names,
'' for an unnamed one, are `graph.input_names` in parameter order), the operands
of its `return` feed 'output' nodes. Scopes come from op locations:
`"jit(f)/layer0/attention/dot_general"` puts an op under `layer0/attention`.
"""

from __future__ import annotations

import functools
import io
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from jax.interpreters.mlir import make_ir_context
from jaxlib.mlir import ir

from viz.ir.model import (
    NO_PRODUCER,
    Edge,
    Graph,
    Node,
    Path,
    Producers,
    SourceLoc,
    connect,
    name_parts,
    register_scopes,
    source_loc,
    user_first,
)
from viz.platforms import mosaic

CUSTOM_CALL = "stablehlo.custom_call"
NAME, CALLSITE, FILE, FUSED = "name", "callsite", "file", "fused"  # kinds of MLIR location
if hasattr(ir, "NameLoc"):  # jaxlib >= 0.10: a class for each kind
    _KINDS = {
        ir.NameLoc: NAME,
        ir.CallSiteLoc: CALLSITE,
        ir.FileLineColLoc: FILE,
        ir.FusedLoc: FUSED,
    }

    def location_kind(loc: Any) -> str:
        """NAME, CALLSITE, FILE, FUSED or '' (unknown)."""
        return _KINDS.get(type(loc), "")

else:  # jaxlib 0.8, 0.9: one `ir.Location`, asked what it is (same attributes)

    def location_kind(loc: Any) -> str:
        """NAME, CALLSITE, FILE, FUSED or '' (unknown)."""
        if loc.is_a_name():
            return NAME
        if loc.is_a_callsite():
            return CALLSITE
        if loc.is_a_file():
            return FILE
        return FUSED if loc.is_a_fused() else ""


TERMINATORS = frozenset({"func.return", "stablehlo.return"})
REGION_KINDS = {"stablehlo.while": "loop", "stablehlo.case": "branch", "stablehlo.if": "branch"}
_LINK = "\x00call:"  # producer id standing for "the callers of this shared function"
_UNSEEN = object()  # not looked up yet (a source found may be None)

_DTYPES = {
    "i1": "bool",
    "si8": "i8",
    "si16": "i16",
    "si32": "i32",
    "si64": "i64",
    "ui8": "u8",
    "ui16": "u16",
    "ui32": "u32",
    "ui64": "u64",
    "complex<f32>": "c64",
    "complex<f64>": "c128",
}
_TENSOR = re.compile(r"tensor<(?:([^<>]*?)x)?([^x<>]+(?:<[^<>]*>)?)>")


@dataclass
class _Reader:
    graph: Graph = field(default_factory=lambda: Graph("stablehlo"))
    funcs: dict[str, Any] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)
    env: dict[Any, Producers] = field(default_factory=dict)
    call_nodes: dict[str, list[str]] = field(default_factory=dict)
    count: int = 0
    # rendered result types: MLIR types are uniqued, and printing one is slow
    types: dict[Any, str] = field(default_factory=dict)
    # the source under each op's name: locations are uniqued too, and the ops of every
    # layer share their call sites (keyed by the call site's location attribute, one of
    # the module's own objects: never outlives it)
    sources: dict[Any, SourceLoc | None] = field(default_factory=dict)
    func: str = ""  # the function whose ops are being read (the text writes them under it)
    # node id → (its function, its first result): where its text writes it
    results: dict[str, tuple[str, Any]] = field(default_factory=dict)

    def new_id(self) -> str:
        self.count += 1
        return f"op{self.count}"

    def locate(self, loc: Any) -> tuple[str, SourceLoc | None]:
        """`parse_location(loc)`, the source under a name looked up once per call site:
        the ops of every layer share a few dozen. Keyed by the child's attribute, which
        hashes by what it says (a location object hashes by itself, and the bindings
        make a new one each time they are asked)."""
        name = loc.name_str if location_kind(loc) == NAME else ""
        if not name:
            return parse_location(loc)
        child = loc.child_loc
        key = child.attr
        source = self.sources.get(key, _UNSEEN)
        if source is _UNSEEN:
            source = self.sources[key] = _walk_location(child, named=True)[1]
        return name, source

    def render(self, type_: Any) -> str:
        text = self.types.get(type_)
        if text is None:
            text = self.types[type_] = render_type(type_)
        return text


def read_stablehlo(module: Any) -> Graph:
    """The graph of an MLIR module holding StableHLO (`jaxlib.mlir.ir.Module`)."""
    return StableHLOReading(module).graph()


class StableHLOReading:
    """One module read: its graph, then its text (`module_text`), which notes in the
    graph the row the text writes each op on (`Graph.text_rows`): the row that defines
    the op's first result, `%3 = stablehlo.add ...`, under its function's `func.func`
    line. The names are MLIR's own (`Value.get_name`), so they are the text's."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self._reader = _Reader()

    def graph(self) -> Graph:
        reader = self._reader
        for op in self.module.body.operations:
            if op.operation.name == "func.func":
                reader.funcs[ir.StringAttr(op.attributes["sym_name"]).value] = op
        for func in reader.funcs.values():
            _count_calls(func.operation, reader.calls)
        main = reader.funcs.get("main") or next(iter(reader.funcs.values()), None)
        if main is None:
            return reader.graph
        _read_main(reader, main)
        for name, func in reader.funcs.items():
            if func is not main and reader.calls[name] != 1:
                _read_shared(reader, name, func)
        _link_calls(reader)
        return register_scopes(reader.graph)

    def text(self) -> str:
        """The module's text, each op's row noted in the graph (none where that fails:
        the text is what matters)."""
        text = module_text(self.module)
        try:
            self._reader.graph.text_rows = _rows(text, self._names())
        except Exception:  # a bug here must not cost the report its text
            self._reader.graph.text_rows = {}
        return text

    def _names(self) -> dict[str, tuple[str, str]]:
        """node id → (its function, the name the text gives its results: `%3` of `%3#0`)."""
        state = ir.AsmState(self.module.operation)
        return {
            i: (func, value.get_name(state).partition("#")[0])
            for i, (func, value) in self._reader.results.items()
        }


_FUNC = re.compile(r"\s*func\.func (?:\w+ )?@([\w$.-]+)\(")


def _rows(text: str, names: dict[str, tuple[str, str]]) -> dict[str, list[int]]:
    """node id → [the row of the text that defines its result], from `_names`."""
    where: dict[tuple[str, str], int] = {}
    func = ""
    for row, line in enumerate(text.split("\n"), 1):
        stripped = line.lstrip()
        if stripped.startswith("%"):
            end = _name_end(stripped)
            if end:
                where.setdefault((func, stripped[:end]), row)
        elif stripped.startswith("func.func"):
            found = _FUNC.match(line)
            func = found.group(1) if found else ""
    return {i: [where[key]] for i, key in names.items() if key in where}


def _name_end(line: str) -> int:
    """Where the first result's name ends on a line that defines it (`%3 = ...`,
    `%3:2 = ...`): at its first space or colon, whichever comes first; 0 if neither."""
    space, colon = line.find(" "), line.find(":")
    if space > 0 and not 0 < colon < space:
        return space
    return colon if colon > 0 else 0


def _count_calls(func: Any, calls: Counter[str]) -> None:
    """Count the calls in `func` by callee, with MLIR's own walk: it hands Python each op
    as a plain `Operation`, where a loop over each block's ops wraps each one in its
    dialect's class (twice the time)."""

    def count(op: Any) -> Any:
        if op.name == "func.call":
            calls[_callee(op)] += 1
        return ir.WalkResult.ADVANCE

    func.walk(count)


def _callee(op: Any) -> str:
    return ir.FlatSymbolRefAttr(op.operation.attributes["callee"]).value


def _read_main(reader: _Reader, main: Any) -> None:
    reader.func = ir.StringAttr(main.attributes["sym_name"]).value
    block = main.regions[0].blocks[0]
    for i, arg in enumerate(block.arguments):
        name, _ = parse_location(arg.location)
        reader.graph.input_names.append(name)
        label = name or f"in{i}"
        node = Node(f"in{i}", "input", label, reader.render(arg.type), kind="input")
        reader.graph.nodes.append(node)
        reader.env[arg] = ((node.id,), node.type)
    outs = _read_block(reader, block, (), (), None)
    for i, (ids, type_) in enumerate(outs):
        node = Node(f"out{i}", "output", f"out{i}", type_, kind="output")
        reader.graph.nodes.append(node)
        connect(reader.graph, [(ids, type_)], node.id)


def _read_shared(reader: _Reader, name: str, func: Any) -> None:
    """A function read once as a top-level group; its args are link placeholders."""
    path = reader.graph.add_group((f"@{name}",), "call", label=f"@{name}")
    reader.func = name
    block = func.regions[0].blocks[0]
    for arg in block.arguments:
        reader.env[arg] = ((f"{_LINK}{name}",), reader.render(arg.type))
    _read_block(reader, block, path, (), None)


def _link_calls(reader: _Reader) -> None:
    """Edges from a link placeholder become edges from each call node of that function.

    Each node's edges in are added together (`connect` runs once per node), one per
    producer, so only a node that reads a link can be given one edge twice: only its
    edges are checked for repeats."""
    edges = reader.graph.edges
    linked = {edge.dst for edge in edges if edge.src.startswith(_LINK)}
    if not linked:
        return
    out: list[Edge] = []
    seen: set[tuple[str, str]] = set()
    for edge in edges:
        if edge.dst not in linked:
            out.append(edge)
        elif not edge.src.startswith(_LINK):
            _add_once(out, seen, edge)
        else:
            for call_id in reader.call_nodes.get(edge.src[len(_LINK) :], []):
                _add_once(out, seen, Edge(call_id, edge.dst, edge.type))
    reader.graph.edges = out


def _add_once(edges: list[Edge], seen: set[tuple[str, str]], edge: Edge) -> None:
    if (edge.src, edge.dst) not in seen:
        seen.add((edge.src, edge.dst))
        edges.append(edge)


def _read_block(
    reader: _Reader, block: Any, path: Path, prefixes: tuple[Path, ...], src: SourceLoc | None
) -> list[Producers]:
    """Add a block's ops under `path`; returns the producers of its terminator's operands.

    `prefixes`: name-scope paths the enclosing op already stands for (longest
    first); an op's location name is made relative to the first that matches.
    """
    outs: list[Producers] = []
    env = reader.env
    # location name → (its parts, the scope of an op so named): a block's thousands of
    # ops share a few hundred names, so each is split and made relative once
    scopes: dict[str, tuple[Path, Path]] = {}
    for op in block.operations:
        operation = op.operation
        name = operation.name
        if name in TERMINATORS:
            outs = [env.get(v, NO_PRODUCER) for v in operation.operands]
            continue
        loc_name, source = reader.locate(operation.location)
        named = scopes.get(loc_name)
        if named is None:
            parts = _name_parts(loc_name)
            named = scopes[loc_name] = (parts, path + _relative(parts, prefixes)[:-1])
        parts, scope = named
        source = source or src
        if len(operation.regions):
            results = _read_region_op(reader, operation, scope, parts, source)
        elif name == "func.call" and reader.calls[_callee(op)] == 1:
            results = _read_inline_call(reader, op, scope, parts, source)
        else:
            _read_op(reader, operation, name, scope, source, loc_name)
            continue
        for value, producers in zip(operation.results, results, strict=False):
            env[value] = producers
    return outs


def _read_op(
    reader: _Reader,
    operation: Any,
    name: str,
    scope: Path,
    source: SourceLoc | None,
    loc_name: str,
) -> None:
    """The op's node; every result of the op comes from it."""
    results = operation.results
    count = len(results)
    if count == 1:  # the common case, kept quick: its one result asked for once
        values = [operation.result]
        type_ = reader.render(values[0].type)
    else:
        values = list(results)
        type_ = ", ".join(reader.render(v.type) for v in values)
    node = Node(reader.new_id(), name, _short(name), type_, scope, source)
    if count:
        reader.results[node.id] = (reader.func, values[0])
    if loc_name:  # the op's name stack, as its location spells it (the fusion map reads it)
        node.attrs["op_name"] = loc_name
    if name == "func.call":
        callee = _callee(operation)
        node.label = f"call @{callee}"
        reader.call_nodes.setdefault(callee, []).append(node.id)
    elif name == CUSTOM_CALL:
        _read_kernel_call(reader.graph, operation, node)
    reader.graph.nodes.append(node)
    env = reader.env
    connect(reader.graph, [env.get(v, NO_PRODUCER) for v in operation.operands], node.id)
    producers = (node.id,), type_
    for value in values:
        env[value] = producers


def _read_kernel_call(graph: Graph, operation: Any, node: Node) -> None:
    """A custom call that runs a user's kernel: labelled by the kernel, with the kernel's
    own IR where the platform lowered it to one."""
    attributes = operation.attributes
    if "kernel_name" not in attributes:
        return
    kernel = ir.StringAttr(attributes["kernel_name"]).value
    node.label, node.attrs["kernel"] = f"{node.label}: {kernel}", kernel
    target = ir.StringAttr(attributes["call_target_name"]).value
    config = attributes.get("backend_config")
    if mosaic.is_kernel_call(target) and isinstance(config, ir.StringAttr):
        text = mosaic.kernel_text(config.value)
        if text:
            graph.kernel_irs[node.id] = text


def _read_region_op(
    reader: _Reader, operation: Any, scope: Path, parts: Path, source: SourceLoc | None
) -> list[Producers]:
    """An op with regions: a group holding each region's ops."""
    name = operation.name
    group = reader.graph.unique_path(scope, _short(name))
    kind = REGION_KINDS.get(name, "region")
    reader.graph.add_group(group, kind, name, label=_short(name))
    operands = [_lookup(reader, v) for v in operation.operands]
    regions = list(operation.regions)
    returns = []
    for i, region in enumerate(regions):
        sub = group
        if len(regions) > 1:
            label = _region_label(name, i)
            sub = reader.graph.add_group((*group, label), "region", label=label)
        prefixes = (*((*parts, alias) for alias in _region_aliases(name, i)), parts)
        for block in region.blocks:
            _bind_args(reader, block.arguments, operands)
            returns.append(_read_block(reader, block, sub, prefixes, source))
    return _merge_results(reader, operation, returns)


def _read_inline_call(
    reader: _Reader, op: Any, scope: Path, parts: Path, source: SourceLoc | None
) -> list[Producers]:
    """A function called once: read its body here, as the call's group."""
    callee = _callee(op)
    group = reader.graph.unique_path(scope, f"call @{callee}")
    reader.graph.add_group(group, "call", "func.call", label=f"call @{callee}")
    block = reader.funcs[callee].regions[0].blocks[0]
    operands = [_lookup(reader, v) for v in op.operation.operands]
    _bind_args(reader, block.arguments, operands)
    caller, reader.func = reader.func, callee
    returns = _read_block(reader, block, group, (parts,), source)
    reader.func = caller
    return _merge_results(reader, op.operation, [returns])


def _bind_args(reader: _Reader, args: Any, operands: list[Producers]) -> None:
    """Block arguments take the operands' producers (positionally when counts match)."""
    if len(args) == len(operands):
        for arg, producers in zip(args, operands, strict=True):
            reader.env[arg] = producers
        return
    ids = tuple(dict.fromkeys(x for ids, _ in operands for x in ids))
    for arg in args:
        reader.env[arg] = (ids, reader.render(arg.type))


def _merge_results(
    reader: _Reader, operation: Any, returns: list[list[Producers]]
) -> list[Producers]:
    """The op's results take the producers of every region's matching return."""
    n = len(operation.results)
    matching = [r for r in returns if len(r) == n] or returns
    outs = []
    for i, value in enumerate(operation.results):
        ids: dict[str, None] = {}
        for ret in matching:
            chosen = [ret[i]] if len(ret) == n else ret
            for producers, _ in chosen:
                ids.update(dict.fromkeys(producers))
        outs.append((tuple(ids), reader.render(value.type)))
    return outs


def _region_aliases(name: str, i: int) -> tuple[str, ...]:
    """The name-stack component jax gives region `i` of a region op, if any."""
    if name == "stablehlo.while":
        return ("cond", "body")[i : i + 1]
    if name in ("stablehlo.case", "stablehlo.if"):
        return (f"branch_{i}_fun",)
    return ()


def _region_label(name: str, i: int) -> str:
    if name == "stablehlo.while":
        return ("cond", "body")[i] if i < 2 else f"region {i}"
    if name in ("stablehlo.case", "stablehlo.if"):
        return f"branch {i}"
    return f"region {i}"


@functools.lru_cache(maxsize=1024)
def _short(name: str) -> str:
    """`stablehlo.add` → `add` (once per op name: a module has a few dozen)."""
    return name.split(".", 1)[1] if "." in name else name


def _name_parts(name: str) -> Path:
    """`jit(f)/layer0/attn/add` → ('layer0', 'attn', 'add'): drop the jit(...) root."""
    parts = name_parts(name)
    if parts and parts[0].startswith(("jit(", "pjit(")):
        return parts[1:]
    return parts


def _relative(parts: Path, prefixes: tuple[Path, ...]) -> Path:
    for prefix in prefixes:
        if parts[: len(prefix)] == prefix:
            return parts[len(prefix) :]
    return parts


def parse_location(loc: Any) -> tuple[str, SourceLoc | None]:
    """(name, source) of an MLIR location: the outermost name and the first file:line.

    `loc("jit(f)/layer0/add"(callsite("f"("model.py":12:4 to :9) at ...)))` gives
    ('jit(f)/layer0/add', SourceLoc('model.py', 12, 'f')).
    """
    return _walk_location(loc, named=False)


def _walk_location(loc: Any, named: bool) -> tuple[str, SourceLoc | None]:
    """`parse_location`; `named`: the name was found already (every name met is then
    the function's)."""
    name, function = "", ""
    todo = [loc]
    while todo:
        loc = todo.pop()
        kind = location_kind(loc)
        if kind == NAME:
            if name or named:
                function = loc.name_str
            else:
                name = loc.name_str
            todo.append(loc.child_loc)
        elif kind == CALLSITE:
            stack = _call_stack(loc, function)
            if stack:
                return name, user_first(stack)
            todo.append(loc.callee)
        elif kind == FILE:
            return name, source_loc(loc.filename, loc.start_line, function, loc.start_col)
        elif kind == FUSED:
            todo.extend(reversed(loc.locations))
    return name, None


def _call_stack(loc: Any, function: str) -> list[SourceLoc]:
    """A call site's frames, innermost first: `callsite("f"("model.py":12:4) at
    callsite(...))`, each frame a file location under its function's name."""
    stack = []
    while loc is not None:
        kind = location_kind(loc)
        frame, loc = (loc.callee, getattr(loc, "caller", None)) if kind == CALLSITE else (loc, None)
        if location_kind(frame) == NAME:
            function, frame = frame.name_str, frame.child_loc
        if location_kind(frame) == FILE:
            stack.append(source_loc(frame.filename, frame.start_line, function, frame.start_col))
        function = ""
    return stack


def module_bytecode(module: Any) -> bytes:
    """`module` as MLIR bytecode: a few milliseconds where its text takes tens of them."""
    out = io.BytesIO()
    module.operation.write_bytecode(file=out)
    return out.getvalue()


def module_copy(bytecode: bytes) -> Any:
    """The module of `module_bytecode`, parsed into an MLIR context of its own. The
    pipeline reads the copy on another thread while XLA compiles the original: MLIR
    objects of one context must not be shared between threads."""
    return ir.Module.parse(bytecode, context=make_ir_context())


def module_text(module: Any) -> str:
    """The module's text as `jax.stages.Lowered.as_text()` prints it (no locations)."""
    out = io.StringIO()
    module.operation.print(file=out, enable_debug_info=False)
    return out.getvalue()


def render_type(type_: Any) -> str:
    """An MLIR type in jaxpr spelling: tensor<8x128xf32> → f32[8,128], tensor<i1> → bool[]."""
    text = str(type_)
    match = _TENSOR.fullmatch(text)
    if not match:
        return _DTYPES.get(text, text)
    dims, dtype = match.group(1) or "", match.group(2)
    shape = ",".join(d if d != "?" else "?" for d in dims.split("x")) if dims else ""
    return f"{_DTYPES.get(dtype, dtype)}[{shape}]"


def _lookup(reader: _Reader, value: Any) -> Producers:
    return reader.env.get(value, NO_PRODUCER)
