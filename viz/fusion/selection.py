"""What a selection in the Fusion tab lights up (no jax, no streamlit).

The user picks one of three things: a kernel, a StableHLO op or a source line. Each
picks kernels, StableHLO ops, source lines and jaxpr equations out of the fusion map
and the graphs; the page only lays the result out."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from viz.fusion.model import FusionEntry
from viz.fusion.view import line_kernels, ops_by_kernel
from viz.ir.model import Graph, Node

HIDDEN_OPS = ("stablehlo.constant", "func.call")  # not worth a row: constants, call shells


class Picked(StrEnum):
    NOTHING = ""
    KERNEL = "kernel"
    OP = "op"
    LINE = "line"


@dataclass
class Selection:
    """The kernels, StableHLO op ids and source lines one pick lights up."""

    picked: Picked = Picked.NOTHING
    title: str = ""  # 'kernel fusion.3', 'op add (op12)', 'line 7'
    kernels: list[str] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    lines: set[int] = field(default_factory=set)

    def __bool__(self) -> bool:
        return self.picked is not Picked.NOTHING


def kernel_choices(fusion_map: list[FusionEntry]) -> dict[str, str]:
    """label → kernel, for the kernel picker (kernels, and instructions that hold ops)."""
    return {
        f"{e.kernel} · {e.kind} · {len(e.stablehlo_ops)} ops"
        + (f" · lines {', '.join(map(str, e.lines[:6]))}" if e.lines else ""): e.kernel
        for e in fusion_map
        if e.stablehlo_ops or e.is_kernel
    }


def op_choices(stablehlo: Graph) -> dict[str, str]:
    """label → StableHLO op id, for the op search (constants left out)."""
    return {
        f"{n.label or n.op} · {n.id}"
        + (f" · line {n.source.line}" if n.source else "")
        + (f" · {'/'.join(n.scope)}" if n.scope else ""): n.id
        for n in stablehlo.nodes
        if n.kind == "op" and n.op != "stablehlo.constant"
    }


def select(
    fusion_map: list[FusionEntry],
    stablehlo: Graph,
    kernel: str | None = None,
    op: str | None = None,
    line: int | None = None,
) -> Selection:
    """What the pick lights up; at most one of kernel, op and line is given."""
    if kernel:
        entry = next(e for e in fusion_map if e.kernel == kernel)
        ops = [o["id"] for o in entry.stablehlo_ops]
        return Selection(Picked.KERNEL, f"kernel {kernel}", [kernel], ops, set(entry.lines))
    if op:
        node = stablehlo.node_map()[op]
        lines = {node.source.line} if node.source else set()
        kernels = ops_by_kernel(fusion_map, "stablehlo").get(op, [])
        return Selection(Picked.OP, f"op {node.label or node.op} ({op})", kernels, [op], lines)
    if line is not None:
        ops = [n.id for n in stablehlo.nodes if n.source and n.source.line == line]
        kernels = line_kernels(fusion_map).get(line, [])
        return Selection(Picked.LINE, f"line {line}", kernels, ops, {line})
    return Selection()


def selected_eqns(selection: Selection, fusion_map: list[FusionEntry], jaxpr: Graph) -> list[Node]:
    """The jaxpr equations of the selection: the kernel's, or those on the line (an op
    pick names a StableHLO op, which maps to kernels, not to equations)."""
    nodes = jaxpr.node_map()
    if selection.picked is Picked.KERNEL:
        entry = next(e for e in fusion_map if e.kernel == selection.kernels[0])
        return [nodes[e["id"]] for e in entry.jaxpr_eqns if e["id"] in nodes]
    if selection.picked is Picked.LINE:
        return [
            n
            for n in jaxpr.nodes
            if n.kind == "op" and n.source and n.source.line in selection.lines
        ]
    return []


def missing_ops(fusion_map: list[FusionEntry], stablehlo: Graph) -> list[Node]:
    """StableHLO ops found in no kernel: XLA folded them into constants or removed them."""
    found = ops_by_kernel(fusion_map, "stablehlo")
    return [
        n
        for n in stablehlo.nodes
        if n.kind == "op" and n.op not in HIDDEN_OPS and n.id not in found
    ]
