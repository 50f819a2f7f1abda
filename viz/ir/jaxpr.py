"""Read a jaxpr (`jax.make_jaxpr(f)(...)`, `traced.jaxpr`) into the graph model.

Counts on the result (`model.op_histogram`) count equations the way the program
is written, at every nesting level: each plain equation is one 'op' node, and
each container equation (`jit`/`pjit`, `closed_call`, `scan`, `while`, `cond`,
`custom_jvp_call`, `custom_vjp_call`, `remat`, `shard_map`, ... — an equation
whose params hold a jaxpr it calls on its operands) is one group whose `op` is the
primitive name, with its sub-jaxprs' equations inside. So `sum(op_histogram(g).values())`
equals the number of equations found by recursing through every called sub-jaxpr, and
a jaxpr that jax shares between two call sites is counted at each site.

Not containers:
- an equation whose jaxpr is a computation it applies inside itself (`reduce` and
  `reduce_window` with a Python reducer, the `update_jaxpr` of a `scatter-add`): one
  op node, as its StableHLO op is one op with a region;
- a kernel (`pallas_call`): a group of kind 'kernel' labelled by its kernel function,
  holding one op node for the call itself (`op` pallas_call, the user's line, its
  name stack: what the compiled program's custom call is matched on) and the kernel's
  body inside. Its body reads and writes refs: the kernel's inputs are bound to its
  input refs, and its outputs are produced by the body's writes (`swap`, `addupdate`;
  a kernel with several outputs has each of them read from all its writes).

Inputs (`in0`, ... or the given argument names), outputs and closed-over
constants are nodes of kind 'input' / 'output' / 'constant' and are not ops.
Literals are not nodes. An op node keeps its equation's raw name stack in
`attrs['name_stack']` (when not empty) and its user source line and column in
`source` (an equation without one, e.g. inside a library's inner jit, takes its
container's). Edges run from the node that produces a value to each
node that reads it; a container's sub-jaxpr inputs are bound to the container's
operands and its outputs to the producers inside, so edges join leaf nodes
across group boundaries.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jax.extend import core

from viz.ir.model import (
    NO_PRODUCER,
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
from viz.jax_private import drop_var_type, jaxpr_text, user_frame, user_frames
from viz.where import is_installed

# Container primitives and the kind of group they become; any other primitive
# whose params hold a jaxpr becomes a 'call' group.
LOOP_PRIMITIVES = frozenset({"scan", "while"})
BRANCH_PRIMITIVES = frozenset({"cond"})
# Their jaxpr is a computation applied inside the op (a reducer, a scatter's update)
APPLIED_PRIMITIVES = frozenset({"reduce", "reduce_window", "select_and_scatter"})
APPLIED_PARAMS = frozenset({"update_jaxpr"})
# One kernel each: the body runs inside it, on refs
KERNEL_PRIMITIVES = frozenset({"pallas_call"})
REF_WRITES = frozenset({"swap", "addupdate"})

Env = dict[Any, Producers]
_DROPPED = drop_var_type()  # an output an equation drops (`_`): no value


@dataclass
class _Reader:
    graph: Graph = field(default_factory=lambda: Graph("jaxpr"))
    count: int = 0
    # id of an equation's traceback → the nodes of the equations that carry it (JAX's
    # printer says which traceback each row of the text writes: `JaxprReading.text`)
    tracebacks: dict[int, list[str]] = field(default_factory=dict)
    # What the equations share, read once each, by id: a 96-layer model's 8,000
    # equations share 400 name stacks, 16 avals and 5,600 tracebacks, and JAX hashes a
    # name stack or an aval in Python (longer than the lookup saves). The jaxpr keeps
    # each of them alive while it is read, so an id stays its own.
    stacks: dict[int, tuple[str, Path]] = field(default_factory=dict)
    sources: dict[int, SourceLoc | None] = field(default_factory=dict)
    avals: dict[int, str] = field(default_factory=dict)

    def new_id(self, prefix: str = "e") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def name_stack(self, eqn: Any) -> tuple[str, Path]:
        """The equation's raw name stack, and its scopes, outermost first: transforms
        wrap them (`jvp(layer0)`), and a transform around no scope (`jvp()`) is dropped."""
        stack = eqn.source_info.name_stack
        found = self.stacks.get(id(stack))
        if found is None:
            text = str(stack)
            found = self.stacks[id(stack)] = (text, name_parts(text))
        return found

    def source(self, eqn: Any) -> SourceLoc | None:
        """`_source(eqn)`, once per traceback."""
        traceback = eqn.source_info.traceback
        key = id(traceback)
        if key not in self.sources:
            self.sources[key] = _source(eqn)
        return self.sources[key]

    def aval_str(self, var: Any) -> str:
        """`_aval_str(var)`, once per aval."""
        key = id(var.aval)
        text = self.avals.get(key)
        if text is None:
            text = self.avals[key] = _aval_str(var)
        return text


def read_jaxpr(closed_jaxpr: Any, arg_names: Sequence[str] | None = None) -> Graph:
    """The graph of a `ClosedJaxpr` (or an open `Jaxpr`), sub-jaxprs as groups."""
    return JaxprReading(closed_jaxpr, arg_names).graph()


class JaxprReading:
    """One jaxpr read: its graph, then its text (as `str(jaxpr)` prints it), which notes
    in the graph the rows the text writes each equation on (`Graph.text_rows`). JAX's
    printer says which equation's traceback each row writes (its `source_map`);
    equations that one Python call made together (`x + b`: a broadcast, then the add)
    share a traceback, and so share their rows."""

    def __init__(self, closed_jaxpr: Any, arg_names: Sequence[str] | None = None) -> None:
        self.jaxpr = closed_jaxpr
        self.arg_names = arg_names
        self._reader = _Reader()

    def graph(self) -> Graph:
        return _read(self._reader, self.jaxpr, self.arg_names)

    def text(self) -> str:
        """The text, each equation's rows noted in the graph (none where JAX's printer
        gives no source map)."""
        text, source_map = jaxpr_text(self.jaxpr)
        if source_map is None:
            return text
        rows: dict[str, list[int]] = {}
        nodes = self._reader.tracebacks
        for row, spans in enumerate(source_map, 1):
            if len(spans) == 1:  # most rows: one equation's (a node holds one traceback)
                found = nodes.get(id(spans[0][2]), ())
            else:
                found = dict.fromkeys(i for *_, tb in spans for i in nodes.get(id(tb), ()))
            for node_id in found:
                rows.setdefault(node_id, []).append(row)
        self._reader.graph.text_rows = rows
        return text


def _read(reader: _Reader, closed_jaxpr: Any, arg_names: Sequence[str] | None) -> Graph:
    jaxpr, _ = _unclose(closed_jaxpr)
    env: Env = {}
    for i, var in enumerate(jaxpr.invars):
        label = arg_names[i] if arg_names and i < len(arg_names) else f"in{i}"
        env[var] = _leaf(reader, f"in{i}", "input", label, var, ())
    for i, var in enumerate(jaxpr.constvars):
        env[var] = _leaf(reader, f"const{i}", "constant", f"const{i}", var, ())
    outs = _read_eqns(reader, jaxpr, env, (), None)
    for i, (ids, type_) in enumerate(outs):
        node = Node(f"out{i}", "output", f"out{i}", type_, kind="output")
        reader.graph.nodes.append(node)
        connect(reader.graph, [(ids, type_)], node.id)
    return register_scopes(reader.graph)


def _unclose(jaxpr: Any) -> tuple[Any, Sequence[Any]]:
    if isinstance(jaxpr, core.ClosedJaxpr):
        return jaxpr.jaxpr, jaxpr.consts
    return jaxpr, ()


def _leaf(reader: _Reader, id_: str, kind: str, label: str, var: Any, scope: Path) -> Producers:
    type_ = _aval_str(var)
    reader.graph.nodes.append(Node(id_, kind, label, type_, scope, kind=kind))
    return (id_,), type_


def _aval_str(var: Any) -> str:
    aval = var.aval
    try:
        return _aval_text(aval)
    except TypeError:  # an aval that does not hash
        return _render_aval(aval)


@functools.lru_cache(maxsize=4096)
def _aval_text(aval: Any) -> str:
    """`_render_aval`, once per distinct aval: rendering one takes microseconds, and a
    model's thousands of values share a few dozen."""
    return _render_aval(aval)


def _render_aval(aval: Any) -> str:
    try:
        return aval.str_short(short_dtypes=True)
    except (AttributeError, TypeError):
        return str(aval)


def _read_eqns(
    reader: _Reader, jaxpr: Any, env: Env, path: Path, parent_src: SourceLoc | None
) -> list[Producers]:
    """Add `jaxpr`'s equations under `path`; returns the producers of its outvars."""
    # the last equation's name-stack scopes and its scope: the equations in a row with
    # one name stack share one scope tuple (which `register_scopes` then asks once)
    parts: Path | None = None
    scope = path
    for eqn in jaxpr.eqns:
        source = reader.source(eqn) or parent_src
        stack_parts = reader.name_stack(eqn)[1]
        if stack_parts is not parts:
            parts, scope = stack_parts, path + stack_parts
        subs = _sub_jaxprs(eqn.params)
        if eqn.primitive.name in KERNEL_PRIMITIVES and len(subs) == 1:
            outs = _read_kernel(reader, eqn, subs[0][1], env, scope, source)
        elif subs and eqn.primitive.name not in APPLIED_PRIMITIVES:
            outs = _read_container(reader, eqn, subs, env, scope, source)
        else:
            outs = _read_op(reader, eqn, env, scope, source)
        for var, producers in zip(eqn.outvars, outs, strict=False):
            if not isinstance(var, _DROPPED):
                env[var] = producers
    return [_lookup(env, v) for v in jaxpr.outvars]


def _read_op(
    reader: _Reader,
    eqn: Any,
    env: Env,
    scope: Path,
    source: SourceLoc | None,
    label: str = "",
) -> list[Producers]:
    types = [reader.aval_str(v) for v in eqn.outvars]
    node = Node(reader.new_id(), eqn.primitive.name, label, ", ".join(types), scope, source)
    stack = reader.name_stack(eqn)[0]
    if stack:  # the raw name stack (transforms kept): the fusion map matches on it
        node.attrs["name_stack"] = stack
    traceback = eqn.source_info.traceback
    if traceback is not None:
        reader.tracebacks.setdefault(id(traceback), []).append(node.id)
    reader.graph.nodes.append(node)
    connect(reader.graph, [_lookup(env, v) for v in eqn.invars], node.id)
    return [((node.id,), type_) for type_ in types]


def _read_container(
    reader: _Reader,
    eqn: Any,
    subs: list[tuple[str, Any]],
    env: Env,
    scope: Path,
    source: SourceLoc | None,
) -> list[Producers]:
    """A container equation: a group holding its sub-jaxprs; returns its outputs."""
    name = eqn.primitive.name
    label = _container_label(eqn)
    group = reader.graph.unique_path(scope, label)
    reader.graph.add_group(group, _container_kind(name), name, label=label)
    bindings = _bind_inputs(eqn, subs, env)
    results: list[list[Producers]] = []
    for (label, sub), inputs in zip(subs, bindings, strict=True):
        sub_path = group
        if len(subs) > 1:
            kind = "branch" if name in BRANCH_PRIMITIVES else "region"
            sub_path = reader.graph.add_group((*group, label), kind, label=label)
        results.append(_read_sub(reader, sub, inputs, sub_path, source))
    return _bind_outputs(eqn, subs, results)


def _read_kernel(
    reader: _Reader, eqn: Any, body: Any, env: Env, scope: Path, source: SourceLoc | None
) -> list[Producers]:
    """A kernel equation (`pallas_call`): a 'kernel' group holding the call's own node
    and the body; its outputs are what the body writes into its refs."""
    label = _container_label(eqn)
    group = reader.graph.unique_path(scope, label)
    reader.graph.add_group(group, "kernel", None, label=label)
    attrs = reader.graph.groups[group].attrs
    attrs["kernel"], attrs["colour"] = label.partition(": ")[2], "custom"  # as a custom call
    call = _read_op(reader, eqn, env, group, source, label)
    first = len(reader.graph.nodes)
    _read_sub(reader, body, [_lookup(env, v) for v in eqn.invars], group, source)
    writes = tuple(n.id for n in reader.graph.nodes[first:] if n.op in REF_WRITES)
    return [(writes, type_) for _, type_ in call] if writes else call


def _read_sub(
    reader: _Reader, sub: Any, inputs: list[Producers], path: Path, source: SourceLoc | None
) -> list[Producers]:
    jaxpr, _ = _unclose(sub)
    env: Env = {}
    for i, var in enumerate(jaxpr.constvars):
        env[var] = _leaf(reader, reader.new_id("c"), "constant", f"const{i}", var, path)
    for var, producers in zip(jaxpr.invars, inputs, strict=False):
        env[var] = producers
    return _read_eqns(reader, jaxpr, env, path, source)


def _bind_inputs(eqn: Any, subs: list[tuple[str, Any]], env: Env) -> list[list[Producers]]:
    """For each sub-jaxpr, the producers of its invars, from the eqn's operands."""
    operands = [_lookup(env, v) for v in eqn.invars]
    if eqn.primitive.name == "while":
        cn, bn = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
        carry = operands[cn + bn :]
        by_label = {"cond": operands[:cn] + carry, "body": operands[cn : cn + bn] + carry}
        return [by_label.get(label, operands) for label, _ in subs]
    bound = []
    for _, sub in subs:
        n = len(_unclose(sub)[0].invars)
        bound.append(operands[len(operands) - n :] if n <= len(operands) else operands)
    return bound


def _bind_outputs(
    eqn: Any, subs: list[tuple[str, Any]], results: list[list[Producers]]
) -> list[Producers]:
    """The eqn's outvars' producers: those of the sub-jaxprs' outvars, merged."""
    if eqn.primitive.name == "while":
        labels = [label for label, _ in subs]
        results = [results[labels.index("body")]] if "body" in labels else results
    outs = []
    for i, var in enumerate(eqn.outvars):
        ids: list[str] = []
        for result in results:
            if len(result) == len(eqn.outvars):
                ids.extend(x for x in result[i][0] if x not in ids)
        outs.append((tuple(ids), _aval_str(var)))
    return outs


def _sub_jaxprs(params: dict[str, Any]) -> list[tuple[str, Any]]:
    """(label, jaxpr) for every Jaxpr/ClosedJaxpr held in an eqn's params."""
    found = []
    for key, value in params.items():
        if key in APPLIED_PARAMS:
            continue
        if _is_jaxpr(value):
            found.append((_param_label(key), value))
        elif _jaxprs(value):
            stem = "branch" if key == "branches" else _param_label(key)
            found.extend((f"{stem} {i}", v) for i, v in enumerate(value))
    return found


def _jaxprs(value: Any) -> bool:
    """Whether `value` is a tuple or list of jaxprs (its first item is asked first: most
    params that are tuples hold numbers)."""
    return (
        isinstance(value, (tuple, list))
        and bool(value)
        and _is_jaxpr(value[0])
        and all(_is_jaxpr(v) for v in value)
    )


_JAXPRS = (core.ClosedJaxpr, core.Jaxpr)  # a tuple: `A | B` made a union object per call


def _is_jaxpr(value: Any) -> bool:
    return isinstance(value, _JAXPRS)


def _param_label(key: str) -> str:
    return key.removesuffix("_jaxpr") if key.endswith("_jaxpr") else key


def _container_kind(name: str) -> str:
    if name in LOOP_PRIMITIVES:
        return "loop"
    if name in BRANCH_PRIMITIVES:
        return "branch"
    return "call"


def _container_label(eqn: Any) -> str:
    name, params = eqn.primitive.name, eqn.params
    if name == "scan" and "length" in params:
        return f"scan ×{params['length']}"
    fn = params.get("name")
    if not (isinstance(fn, str) and fn) and name not in LOOP_PRIMITIVES | BRANCH_PRIMITIVES:
        fn = _func_name(_sub_jaxprs(params))
    return f"{name}: {fn}" if fn else name


def _func_name(subs: list[tuple[str, Any]]) -> str:
    """The traced function's name, from a single sub-jaxpr's debug info."""
    if len(subs) != 1:
        return ""
    info = getattr(_unclose(subs[0][1])[0], "debug_info", None)
    name = getattr(info, "func_name", "") or ""
    return "" if name.startswith("<") else name


def _source(eqn: Any) -> SourceLoc | None:
    """The innermost frame of the user's code (not a library's) that made `eqn`, else
    the innermost frame outside JAX: JAX's own pick (cached) where it is the user's."""
    traceback = eqn.source_info.traceback
    innermost = user_frame(traceback)
    if innermost is None or not is_installed(innermost.file_name):
        frames = [innermost] if innermost is not None else []
    else:
        frames = user_frames(traceback)
    return user_first(
        source_loc(frame.file_name, frame.start_line, frame.function_name, frame.start_column)
        for frame in frames
    )


def _lookup(env: Env, var: Any) -> Producers:
    if isinstance(var, core.Literal):
        return (), _aval_str(var)
    return env.get(var, NO_PRODUCER)
