"""A line, or a reason, for every buffer whose instruction XLA left without one.

XLA drops the metadata of many instructions it makes itself: on a sort then a cumsum
(CPU), the cumsum's transpose becomes `copy_bitcast_fusion` and its reduce-window
`wrapped_reduce-window`, neither with a line, though each holds 64 MiB at the peak.
For such a kernel, in this order:

1. a layout copy (a kernel of copies, transposes, bitcasts and reshapes) names the
   buffer it copies, and that buffer's line: "a copy XLA inserted for layout, of sort.0";
2. a kernel reading a constant with a line takes it: XLA keeps the metadata of the
   constants an op brings (a reduce-window's initial value, the cumsum's);
3. else the line of the first kernel downstream with one, which reads what it makes;
4. else no line, and the reason: XLA kept none.

Read from the compiled HLO's graph (`viz.ir.model.Graph`): each node's source line, its
kernel (the fusion it sits in), and the edges between them. No jax.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass

from viz.ir.model import Graph, Node

LAYOUT_OPS = frozenset(("copy", "transpose", "bitcast", "reshape", "parameter"))
NO_LINE = "XLA kept no line for this kernel"
LAYOUT_COPY = "a copy XLA inserted for layout"


@dataclass(frozen=True)
class Found:
    """A line (`where`, '' if none) and how it was found, or why there is none."""

    where: str
    note: str


class Kernels:
    """The compiled graph's nodes grouped by the instruction that runs them (a fusion's
    are its kernel's), with the edges between those instructions and each one's line."""

    def __init__(self, graph: Graph, where: Callable[[Node], str]):
        fusions = {path[-1] for path, group in graph.groups.items() if group.kind == "fusion"}
        self.kernel: dict[str, str] = {}
        self.members: dict[str, list[Node]] = defaultdict(list)
        self.line: dict[str, str] = {}
        for node in graph.nodes:
            inside = [name for name in node.scope if name in fusions]
            kernel = inside[-1] if inside else node.id
            self.kernel[node.id] = kernel
            self.members[kernel].append(node)
            if node.source is not None and where(node):  # the last: its root's, as XLA
                self.line[kernel] = where(node)  # names a fusion after its root
        self.inputs: dict[str, list[str]] = defaultdict(list)  # kernel → operand nodes
        self.users: dict[str, list[str]] = defaultdict(list)  # kernel → user kernels
        for edge in graph.edges:
            src, dst = self.kernel.get(edge.src), self.kernel.get(edge.dst)
            if src is None or dst is None or src == dst:
                continue
            self.inputs[dst].append(edge.src)
            self.users[src].append(dst)
        self.nodes = {node.id: node for node in graph.nodes}

    def is_layout_copy(self, kernel: str) -> bool:
        ops = {node.op for node in self.members.get(kernel, ())}
        return bool(ops) and ops <= LAYOUT_OPS and ops != {"parameter"}


def line_or_reason(kernels: Kernels, kernel: str) -> Found:
    """The line of a kernel XLA left without one, or why there is none (rules 1-4)."""
    if kernels.is_layout_copy(kernel):
        source = _copied(kernels, kernel)
        if source is not None:
            copied = f"{LAYOUT_COPY}, of {source}"
            return Found(kernels.line.get(source, ""), copied)
        return Found("", LAYOUT_COPY)
    for operand in kernels.inputs.get(kernel, ()):
        node = kernels.nodes[operand]
        line = kernels.line.get(kernels.kernel[operand], "")
        if node.op == "constant" and line:
            return Found(line, "XLA kept no line: that of the constant it reads")
    user = _first_lined_user(kernels, kernel)
    if user is not None:
        return Found(kernels.line[user], f"XLA kept no line: that of {user}, which reads it")
    return Found("", NO_LINE)


def _copied(kernels: Kernels, kernel: str) -> str | None:
    """The kernel whose buffer a layout copy copies (through further layout copies
    without a line)."""
    seen = {kernel}
    while True:
        operands = [kernels.kernel[o] for o in kernels.inputs.get(kernel, ())]
        data = [o for o in operands if o not in seen]
        if not data:
            return None
        kernel = data[0]
        if kernel in kernels.line or not kernels.is_layout_copy(kernel):
            return kernel
        seen.add(kernel)


def _first_lined_user(kernels: Kernels, kernel: str) -> str | None:
    """The nearest kernel downstream that has a line (breadth first)."""
    waiting, seen = deque(kernels.users.get(kernel, ())), {kernel}
    while waiting:
        user = waiting.popleft()
        if user in seen:
            continue
        seen.add(user)
        if user in kernels.line:
            return user
        waiting.extend(kernels.users.get(user, ()))
    return None
