"""The collectives of a compiled (per-device) program, from its graph model.

Every instruction of `viz.ir.hlo`'s graph whose opcode is a collective (an async
`-start` counts as its collective, its `-done` not at all) is one collective.
Rows group them by kind and element type. Bytes are those of each instruction's
result on one device (the graph's types are per-device shapes): for an all-reduce
the reduced arrays, for an all-gather the gathered one, for a reduce-scatter one
device's part; an async start's result also holds its operand, so only its last
element counts. Lines and jaxpr equations say where the values it moves were made:
the source line and name stack (`transpose(jvp())/dot_general`) of the instruction
and of the instructions that produce its operands (XLA merges the all-reduces of
several gradients into one, which keeps only the first one's metadata), and the
fusion map's lines of its kernel. Reads the graph model only: no jax.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from viz.fusion.model import FusionEntry
from viz.ir.kernels import KernelRef, kernel_of
from viz.ir.model import Graph, Node
from viz.sharding.model import Collective
from viz.spec.text import DTYPES

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
OTHER_KINDS = ("ragged-all-to-all", "collective-broadcast")  # rarer opcodes, counted too
_ASYNC_PAIRS_OPERAND = ("all-gather-start", "collective-permute-start")
_ARRAY = re.compile(r"\b([a-z]+\d*)\[([\d,\s]*)\]")


def collective_kind(op: str) -> str | None:
    """The collective an HLO opcode is (`all-reduce-start` → all-reduce), else None."""
    if op.endswith("-done"):
        return None
    base = op.removesuffix("-start")
    return base if base in KINDS or base in OTHER_KINDS else None


def arrays(type_text: str) -> list[tuple[str, tuple[int, ...]]]:
    """(dtype, shape) of each array in a graph type: `(f32[256], f32[10,256])`."""
    return [
        (dtype, tuple(int(d) for d in dims.split(",") if d.strip()))
        for dtype, dims in _ARRAY.findall(type_text)
    ]


def result_arrays(node: Node) -> list[tuple[str, tuple[int, ...]]]:
    """The arrays a collective produces (an async start's operand left out)."""
    found = arrays(node.type)
    if node.op in _ASYNC_PAIRS_OPERAND and len(found) > 1:
        return found[-1:]
    return found


def nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    """Bytes of one array (0 for an element type the spec language does not name)."""
    item = DTYPES.get(dtype)
    return math.prod(shape) * item.itemsize if item is not None else 0


@dataclass
class _Row:
    kind: str
    dtype: str
    nodes: list[Node] = field(default_factory=list)
    bytes: int = 0


def collectives(
    graph: Graph, fusion_map: Iterable[FusionEntry] = (), user_file: str | None = None
) -> list[Collective]:
    """One row per (kind, element type), in the order they first appear."""
    rows: dict[tuple[str, str], _Row] = {}
    for node in graph.nodes:
        kind = collective_kind(node.op) if node.kind == "op" else None
        if kind is None:
            continue
        found = result_arrays(node)
        dtype = "+".join(dict.fromkeys(d for d, _ in found)) or "?"
        row = rows.setdefault((kind, dtype), _Row(kind, dtype))
        row.nodes.append(node)
        row.bytes += sum(nbytes(d, s) for d, s in found)
    entries = {e.kernel: e for e in fusion_map}
    kernel = kernel_of(graph)
    producers = _producers(graph, {n.id for row in rows.values() for n in row.nodes})
    return [_collective(row, entries, kernel, producers, user_file) for row in rows.values()]


def _producers(graph: Graph, ids: set[str]) -> dict[str, list[Node]]:
    """For each of `ids`, the nodes whose values it reads."""
    nodes = graph.node_map()
    found: dict[str, list[Node]] = {i: [] for i in ids}
    for edge in graph.edges:
        if edge.dst in found and edge.src in nodes:
            found[edge.dst].append(nodes[edge.src])
    return found


def _collective(
    row: _Row,
    entries: dict[str, FusionEntry],
    kernel: Callable[[Node], KernelRef],
    producers: dict[str, list[Node]],
    user_file: str | None,
) -> Collective:
    kernels = list(dict.fromkeys(kernel(n).name for n in row.nodes))
    feeding = [p for n in row.nodes for p in producers.get(n.id, ())]
    lines = {line for n in row.nodes + feeding if (line := _user_line(n, user_file))}
    for name in kernels:
        entry = entries.get(name)
        if entry is not None:
            lines.update(entry.lines)
    return Collective(
        kind=row.kind,
        count=len(row.nodes),
        dtype=row.dtype,
        bytes_per_device=row.bytes,
        lines=sorted(lines),
        kernels=kernels,
        nodes=[n.id for n in row.nodes],
        jaxpr_eqns=list(dict.fromkeys(e for n in row.nodes + feeding for e in _equations(n))),
    )


def _user_line(node: Node, user_file: str | None) -> int | None:
    src = node.source
    if src is None or not src.line or (user_file is not None and src.file != user_file):
        return None
    return src.line


def _equations(node: Node) -> list[str]:
    """The jaxpr equations an instruction came from, as name stacks without the
    `jit(f)` root: `transpose(jvp())/dot_general` is a gradient's matmul (XLA joins
    the names of merged instructions with `;`)."""
    found = []
    for name in node.attrs.get("op_name", "").split(";"):
        root, _, rest = name.strip().partition("/")
        found += [rest if root.startswith(("jit(", "pjit(")) and rest else name.strip()]
    return [f for f in found if f]
