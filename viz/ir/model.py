"""The one graph model every IR reader produces.

Like Model Explorer's adapters, each reader (`viz.ir.jaxpr`, `viz.ir.stablehlo`,
`viz.ir.hlo`) turns its IR into this format and nothing downstream knows which
IR it came from. Hierarchy is data: a node's `scope` is its group path
(outermost first), and `Graph.groups` describes each path (its label, what
kind of group it is, and, for container ops such as `scan` or `fusion`, the op
it stands for). Collapse, search, counts and export work on this model only.

The readers add edges with `connect`, one edge per producer of a value.

This module imports neither jax nor streamlit: graphs travel from the worker as
plain dicts (`to_dict`) and are rebuilt in the app (`from_dict`), each where it is
first read (`Graphs`).
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from viz.overlap import gc_paused
from viz.where import is_installed, user_where

Path = tuple[str, ...]


class IR(StrEnum):
    """An IR jitscope reads, its value its name in the report's JSON (a section's key, a
    key of `Report.graphs` and `Report.graph_models`)."""

    JAXPR = "jaxpr"  # as traced
    STABLEHLO = "stablehlo"  # as lowered: what XLA is given
    COMPILED = "compiled"  # the optimized HLO XLA runs


IRS = tuple(IR)  # in the order JAX makes them
# A value's producers, as the readers track them: node ids (several for a value merged
# from regions or branches) and the value's type.
Producers = tuple[tuple[str, ...], str]
NO_PRODUCER: Producers = ((), "")  # a value read from no node: an unknown one


@dataclass(frozen=True)
class SourceLoc:
    """Where in the user's code an op came from."""

    file: str
    line: int
    function: str = ""
    column: int = 0  # as jax counts it (0-based); 0 also when unknown

    @property
    def key(self) -> tuple[str, int, int]:
        """(file, line, column): what the fusion map matches ops across IRs on."""
        return (self.file, self.line, self.column)

    def __str__(self) -> str:
        where = user_where(self.file, self.line)
        return f"{where} ({self.function})" if self.function else where


def user_first(frames: Iterable[SourceLoc]) -> SourceLoc | None:
    """Of an op's frames, innermost first, the innermost in the user's code, not in an
    installed library's (keras's `backend/jax/numpy.py:182` under the user's
    `model(x)`); the innermost where none is the user's."""
    innermost = None
    for frame in frames:
        if not is_installed(frame.file):
            return frame
        innermost = innermost or frame
    return innermost


@functools.lru_cache(maxsize=4096)
def source_loc(file: str, line: int, function: str = "", column: int = 0) -> SourceLoc:
    """A SourceLoc shared by every node of that spot: a big graph keeps (and the
    garbage collector walks) a few of them, not one per node."""
    return SourceLoc(file, line, function, column)


@dataclass
class Node:
    """One operation (or a graph input/output) of an IR."""

    id: str
    op: str  # primitive or op name as the IR spells it: 'dot_general', 'stablehlo.add', 'fusion'
    label: str = ""  # short display text; defaults to op
    type: str = ""  # result type(s), jaxpr spelling: 'f32[8,128]'
    scope: Path = ()  # group path, outermost first
    source: SourceLoc | None = None
    kind: str = "op"  # 'op' | 'input' | 'output' | 'constant'
    attrs: dict[str, str] = field(default_factory=dict)


@dataclass
class Edge:
    """A value flowing from the node that produces it to one that uses it."""

    src: str
    dst: str
    type: str = ""


@dataclass
class Group:
    """What one scope path stands for.

    kind: 'scope' (a name scope), 'call' (pjit / closed_call / func.call), 'loop'
    (scan / while), 'branch' (cond), 'region', or 'fusion'.
    op: the container op this group represents, counted once in op histograms
    (e.g. 'scan', 'pjit', 'fusion'); None for plain name scopes.
    opaque: the group's members are not separate ops at run time (a fusion's
    fused ops run inside one kernel), so they are left out of op histograms.
    """

    path: Path
    label: str
    kind: str = "scope"
    op: str | None = None
    opaque: bool = False
    attrs: dict[str, str] = field(default_factory=dict)


@dataclass
class Graph:
    """One IR's program. What the program says about its own parameters, beside the
    nodes: `input_names`, JAX's name of each parameter in order (`x`, `params['w']`;
    '' when unnamed), from StableHLO's `main` arguments; `output_aliases`, parameter
    number → the flat output that may reuse its buffer, from the compiled module's
    `input_output_alias`. Each is empty for the IRs that do not say it.

    `text_rows`: where the IR's text (the report's `text` of that IR) writes each node,
    node id → its rows (1-based); in the compiled HLO also each fusion, loop or call
    instruction, under its group's name (the last part of its path). A node the text
    does not write on a row of its own (an op of a region the text folds into its op's
    line) has none. The readers note them when they make the text (`JaxprReading`,
    `StableHLOReading`; the compiled HLO is read from its text).

    `kernel_irs`: a kernel's own IR text (a Pallas kernel's Mosaic module on TPU), by
    the id of the node that calls it. The fusion map gives it to the kernel's entry,
    which the report keeps; the graph's JSON leaves it out (it would be kept twice)."""

    ir: str  # 'jaxpr' | 'stablehlo' | 'compiled'
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    groups: dict[Path, Group] = field(default_factory=dict)
    input_names: list[str] = field(default_factory=list)
    output_aliases: dict[int, int] = field(default_factory=dict)
    text_rows: dict[str, list[int]] = field(default_factory=dict)
    kernel_irs: dict[str, str] = field(default_factory=dict)

    def add_group(self, path: Path, kind: str = "scope", op: str | None = None, **kw: Any) -> Path:
        """Register `path` (and any missing ancestors as plain scopes); returns it."""
        for depth in range(1, len(path)):
            prefix = path[:depth]
            if prefix not in self.groups:
                self.groups[prefix] = Group(prefix, prefix[-1])
        if path and path not in self.groups:
            self.groups[path] = Group(path, kw.pop("label", path[-1]), kind, op, **kw)
        return path

    def unique_path(self, scope: Path, label: str) -> Path:
        """`scope + (label,)`, numbered `label (2)`, `label (3)` … if already taken."""
        path, n = (*scope, label), 1
        while path in self.groups:
            n += 1
            path = (*scope, f"{label} ({n})")
        return path

    def node_map(self) -> dict[str, Node]:
        return {n.id: n for n in self.nodes}

    def to_dict(self) -> dict[str, Any]:
        # shallow on purpose: every field is immutable text, so asdict's deep copy of
        # ~10k nodes would only cost time
        return {
            "ir": self.ir,
            "nodes": [_shallow(n) | {"source": _shallow(n.source)} for n in self.nodes],
            "edges": [_shallow(e) for e in self.edges],
            "groups": [_shallow(g) for g in self.groups.values()],
            "input_names": list(self.input_names),
            # pairs, not a dict: JSON object keys would turn the numbers into text
            "output_aliases": [[p, o] for p, o in self.output_aliases.items()],
            "text_rows": self.text_rows,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Graph:
        nodes = []
        for raw in data["nodes"]:
            src = raw.get("source")
            nodes.append(
                Node(
                    **{
                        **raw,
                        "scope": tuple(raw["scope"]),
                        "source": SourceLoc(**src) if src else None,
                    }
                )
            )
        groups = {}
        for raw in data["groups"]:
            path = tuple(raw["path"])
            groups[path] = Group(**{**raw, "path": path})
        edges = [Edge(**e) for e in data["edges"]]
        # history rows written before these two fields lack them
        names = list(data.get("input_names", []))
        aliases = {int(p): int(o) for p, o in data.get("output_aliases", [])}
        rows = dict(data.get("text_rows", {}))
        return cls(data["ir"], nodes, edges, groups, names, aliases, rows)


def connect(graph: Graph, operands: Sequence[Producers], dst: str) -> None:
    """An edge into `dst` from each producer of `operands`, once per producer (typed
    by the first operand it produces)."""
    edges = graph.edges
    if len(operands) == 1 and len(operands[0][0]) == 1:  # the common case, kept quick
        edges.append(Edge(operands[0][0][0], dst, operands[0][1]))
        return
    seen: set[str] = set()
    for ids, type_ in operands:
        for src in ids:
            if src not in seen:
                seen.add(src)
                edges.append(Edge(src, dst, type_))


# A transform around no name scope (`jvp()`, `transpose(jvp())`) names nothing.
EMPTY_TRANSFORM = re.compile(r"(?:[\w.-]+\()+\)+")


def name_parts(name: str) -> Path:
    """The meaningful parts of a `/`-separated name stack. Every op of every IR asks,
    and the ops of one scope share all but their last part: that stem is split once."""
    stem, _, last = name.rpartition("/")
    return (*_stem_parts(stem), last) if _meaningful(last) else _stem_parts(stem)


@functools.lru_cache(maxsize=4096)
def _stem_parts(stem: str) -> Path:
    """`name_parts` of a name stack's stem."""
    return tuple(p for p in stem.split("/") if _meaningful(p))


def _meaningful(part: str) -> bool:
    """Not empty, nor an empty transform (only a part that ends with `)` can be one, so
    only those are matched)."""
    return bool(part) and (part[-1] != ")" or not EMPTY_TRANSFORM.fullmatch(part))


def _shallow(item: Any) -> Any:
    """A node's, edge's, group's or source's fields by name (its `__dict__`, which holds
    them in their order: copied in one step, where a lookup per field cost a 96-layer
    model's graphs 0.2 s on their way from the worker)."""
    return None if item is None else dict(vars(item))


def opaque_paths(graph: Graph) -> set[Path]:
    return {p for p, g in graph.groups.items() if g.opaque}


def _inside(scope: Path, containers: set[Path]) -> bool:
    """Whether `scope` is one of `containers` or lies below one."""
    return any(scope[:depth] in containers for depth in range(1, len(scope) + 1))


def op_histogram(graph: Graph) -> dict[str, int]:
    """How many times each op occurs, counted the way the program runs.

    Every 'op' node counts once, and so does every container group (a `scan`,
    a `pjit`, a `fusion`), except members of opaque groups: the ops fused into
    a kernel are not separate ops at run time.
    """
    opaque = opaque_paths(graph)
    counts = Counter(_visible_ops(graph, opaque))  # counted in C, in first-seen order
    for path, group in graph.groups.items():
        if group.op and not _inside(path[:-1], opaque):
            counts[group.op] += 1
    return dict(counts.most_common())


def _visible_ops(graph: Graph, opaque: set[Path]) -> list[str]:
    """The op of each 'op' node outside the `opaque` groups, in the nodes' order."""
    ops = []
    hidden: dict[Path, bool] = {}  # per scope: inside an opaque group?
    # the last node's scope, and whether it is hidden: the readers give a run of nodes
    # of one scope the same tuple, so a run asks once
    scope: Path | None = None
    inside = False
    for node in graph.nodes:
        if node.kind != "op":
            continue
        if node.scope is not scope:
            scope = node.scope
            if scope not in hidden:
                hidden[scope] = _inside(scope, opaque)
            inside = hidden[scope]
        if not inside:
            ops.append(node.op)
    return ops


def register_scopes(graph: Graph) -> Graph:
    """Describe every node scope path not yet in `graph.groups` as a plain 'scope' group."""
    last: Path | None = None  # a run of nodes shares one scope tuple: asked once
    for node in graph.nodes:
        scope = node.scope
        if scope is last:
            continue
        last = scope
        if scope and scope not in graph.groups:
            graph.add_group(scope)
    return graph


class Graphs(Mapping[str, Graph]):
    """A report's graph models by IR (`Report.graph_models`). Where the readers ran (the
    worker, a user's process) they are the readers' graphs. In the app they follow the
    report's head from the worker as JSON texts (`viz.worker.parts`), and each is
    decoded where it is first read: its name is known at once, its graph waits for its
    text (a 96-layer model's three graphs are 12 MB of JSON and 0.45 s to decode,
    which the first screen does not need). Thread-safe."""

    def __init__(
        self,
        graphs: Mapping[str, Graph] | None = None,
        names: Sequence[str] = (),
        text: Callable[[str], str | None] | None = None,
    ):
        self._graphs = dict(graphs or {})
        self._names = [*self._graphs, *(n for n in names if n not in self._graphs)]
        self._text = text  # a graph's JSON text, once it is in (None: it never came)
        self._texts: dict[str, str | None] = {}  # taken, not decoded yet
        self._lock = threading.Lock()

    def __getitem__(self, ir: str) -> Graph:
        if ir not in self._names:
            raise KeyError(ir)
        with self._lock:
            if ir not in self._graphs:
                self._graphs[ir] = _decoded(ir, self._text_of(ir))
                self._texts.pop(ir, None)  # decoded: no second copy kept
            return self._graphs[ir]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, ir: object) -> bool:
        return ir in self._names

    def json(self, ir: str) -> str:
        """Graph `ir`'s JSON: its text as it came where it was never decoded."""
        with self._lock:
            text = self._text_of(ir) if ir not in self._graphs else None
        if text is not None:
            return text
        return json.dumps(self[ir].to_dict(), separators=(",", ":"))

    def _text_of(self, ir: str) -> str | None:
        """Graph `ir`'s JSON text as it came (the lock held)."""
        if ir not in self._texts:
            self._texts[ir] = self._text(ir) if self._text else None
        return self._texts[ir]

    def to_dict(self) -> dict[str, Any]:
        return {ir: graph.to_dict() for ir, graph in self.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Graphs:
        return cls({ir: Graph.from_dict(graph) for ir, graph in data.items()})


def _decoded(ir: str, text: str | None) -> Graph:
    """A graph from its JSON text; an empty graph where none came or it is not one
    (the worker died sending it, or wrote garbage)."""
    if text is not None:
        try:
            # a 96-layer model's graphs are a million small objects: left to the
            # collector, the app's process walked all it holds again and again (a decode
            # 0.6-0.9 s, paused 0.27 s)
            with gc_paused(callers_too=True):
                return Graph.from_dict(json.loads(text))
        except (ValueError, TypeError, KeyError):
            pass
    return Graph(ir)
