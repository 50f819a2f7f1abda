"""Kernels of a compiled-HLO graph (`viz.ir.hlo.read_hlo`): which instructions
run as kernels, how many, and what each holds.

What the counts count:
- `fusion_count(graph)`: fusion instructions outside other fusions.
- `kernel_count(graph)`: executed kernels: fusions plus unfused ops that do work
  (not in `PLUMBING_OPS`; while/conditional/call themselves are not kernels,
  the kernels in their bodies are counted once each, not per iteration).

`kernel_of(graph)` says, for any node, the kernel it runs in (the outermost
fusion around it, or the node itself), which the fusion map builds on.

This module imports neither jax nor streamlit: it reads the graph model only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from viz.ir.model import Graph, Node, Path, opaque_paths

PLUMBING_OPS = frozenset(
    {
        "parameter",
        "constant",
        "tuple",
        "get-tuple-element",
        "bitcast",
        "after-all",
        "add-dependency",
        "opt-barrier",
        "domain",
        "partition-id",
        "replica-id",
    }
)
COLLECTIVE_OPS = frozenset(
    {
        "all-reduce",
        "all-gather",
        "all-to-all",
        "reduce-scatter",
        "collective-permute",
        "all-reduce-start",
        "all-gather-start",
        "collective-permute-start",
        "ragged-all-to-all",
    }
)
REDUCTION_OPS = frozenset({"reduce", "reduce-window", "scatter", "select-and-scatter", "sort"})
COLOUR_CLASSES = ("loop", "input", "output", "custom", "collective", "dot")


def fusion_colour(kind: str, fused_ops: list[str]) -> str:
    """The colour class of a fusion, from its kind and the ops fused into it."""
    ops = set(fused_ops)
    if not ops.isdisjoint(COLLECTIVE_OPS):
        return "collective"
    if "dot" in ops or "convolution" in ops:
        return "dot"
    if kind == "kCustom" or "custom-call" in ops:
        return "custom"
    if kind == "kInput" or not ops.isdisjoint(REDUCTION_OPS):
        return "input"
    if kind == "kOutput":
        return "output"
    return "loop"


def _enclosing(scope: Path, paths: set[Path]) -> Path | None:
    """The outermost of `paths` that `scope` is inside (or equal to), if any."""
    for depth in range(1, len(scope) + 1):
        if scope[:depth] in paths:
            return scope[:depth]
    return None


def _top_level_fusions(graph: Graph) -> list[Path]:
    opaque = set(opaque_paths(graph))
    return [
        p
        for p, g in graph.groups.items()
        if g.kind == "fusion" and _enclosing(p[:-1], opaque) is None
    ]


def fusion_count(graph: Graph) -> int:
    """Fusions that run as kernels (fusions nested in fusions are not counted)."""
    return len(_top_level_fusions(graph))


def kernel_count(graph: Graph) -> int:
    """Executed kernels: fusions plus unfused ops that are not plumbing."""
    outermost = _outermost(set(opaque_paths(graph)))
    unfused = sum(
        1
        for n in graph.nodes
        if n.kind == "op" and n.op not in PLUMBING_OPS and outermost(n.scope) is None
    )
    return fusion_count(graph) + unfused


CUSTOM_CALL = "custom-call"


def kernels(graph: Graph) -> list[dict[str, Any]]:
    """For each fusion, then each custom call outside fusions (a library's kernel, a
    Pallas kernel's): name, kind, colour, op histogram, source lines."""
    fusions = _top_level_fusions(graph)
    members: dict[Path, list[Node]] = {p: [] for p in fusions}
    outermost = _outermost(set(fusions))
    custom_calls = []
    for node in graph.nodes:
        if node.kind != "op":
            continue
        path = outermost(node.scope)
        if path is not None:
            members[path].append(node)
        elif node.op == CUSTOM_CALL:
            custom_calls.append(node)
    listed = [_kernel(graph.groups[p], members[p]) for p in fusions]
    return listed + [_custom_call(node) for node in custom_calls]


def _custom_call(node: Node) -> dict[str, Any]:
    """An unfused custom call as a kernel of its own."""
    source = node.source
    return {
        "name": node.id,
        "kind": CUSTOM_CALL,
        "colour": "custom",
        "ops": {CUSTOM_CALL: 1},
        "lines": [source.line] if source else [],
        "sources": [str(source)] if source else [],
    }


def _outermost(paths: set[Path]) -> Callable[[Path], Path | None]:
    """`_enclosing(scope, paths)`, remembered per scope (many nodes share one)."""
    found: dict[Path, Path | None] = {}

    def outermost(scope: Path) -> Path | None:
        if scope not in found:
            found[scope] = _enclosing(scope, paths)
        return found[scope]

    return outermost


def _kernel(group: Any, inside: list[Node]) -> dict[str, Any]:
    sources = {n.source for n in inside if n.source}
    return {
        "name": group.path[-1],
        "kind": group.attrs.get("kind", ""),
        "colour": group.attrs.get("colour", "loop"),
        "ops": dict(Counter(n.op for n in inside).most_common()),
        "lines": sorted({s.line for s in sources}),
        "sources": sorted(str(s) for s in sources),
    }


@dataclass(frozen=True)
class KernelRef:
    """The unit of the compiled program a node runs in.

    name: the fusion's group name, or the node id of an unfused instruction;
    kind: the fusion kind (kLoop, kInput, ...), the opcode of an unfused kernel, or
    'no_kernel' for plumbing (bitcast, copy-free tuple work, parameters...);
    path: the fusion's group path (() for an unfused instruction).
    """

    name: str
    kind: str
    path: Path = ()


def kernel_of(graph: Graph) -> Callable[[Node], KernelRef]:
    """node → the kernel it runs in (remembered per scope: many nodes share one)."""
    fusions = set(_top_level_fusions(graph))
    outermost = _outermost(fusions)
    known: dict[str, KernelRef] = {}  # the fusion map asks about a node many times

    def of(node: Node) -> KernelRef:
        if node.id not in known:
            known[node.id] = _kernel_ref(graph, node, outermost(node.scope))
        return known[node.id]

    return of


def kernel_refs(graph: Graph, nodes: Iterable[Node]) -> list[KernelRef]:
    """`kernel_of(graph)` of each node, one KernelRef object per kernel: a fusion's is
    made once for all its nodes (the fusion map's index asks for every instruction)."""
    outermost = _outermost(set(_top_level_fusions(graph)))
    by_fusion: dict[Path, KernelRef] = {}
    refs = []
    for node in nodes:
        fusion = outermost(node.scope)
        if fusion is None:  # a kernel of its own, or none: one node's
            refs.append(_kernel_ref(graph, node, None))
            continue
        ref = by_fusion.get(fusion)
        if ref is None:
            ref = by_fusion[fusion] = _kernel_ref(graph, node, fusion)
        refs.append(ref)
    return refs


def _kernel_ref(graph: Graph, node: Node, fusion: Path | None) -> KernelRef:
    if fusion is not None:
        return KernelRef(fusion[-1], graph.groups[fusion].attrs.get("kind") or "fusion", fusion)
    if node.op in PLUMBING_OPS or node.kind != "op":
        return KernelRef(node.id, "no_kernel")
    return KernelRef(node.id, node.op)


def kernel_names(graph: Graph) -> list[str]:
    """Every kernel of the program, in program order: fusions and unfused compute ops."""
    fusions = _top_level_fusions(graph)
    outermost = _outermost(set(fusions))
    names = [p[-1] for p in fusions]
    names.extend(
        n.id
        for n in graph.nodes
        if n.kind == "op" and n.op not in PLUMBING_OPS and outermost(n.scope) is None
    )
    return names
