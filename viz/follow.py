"""Follow a line: what one line of the user's code became in every IR, and the way back
from a kernel to its lines.

Computed from the IRs' own source information, read once into the report: each graph
node's source line (a jaxpr equation's user frame, a StableHLO op's location, an HLO
instruction's metadata), the fusion map (the kernel each op and equation went into, and
each kernel's lines), and the rows each IR's text writes a node on (`Graph.text_rows`).
Nothing here parses IR text (`excerpt` only cuts rows out of it). Plain data in and
out: no jax, no streamlit.

What a line's trace holds:
- `nodes[ir]`: the ops of that IR whose source is the line (jaxpr equations, StableHLO
  ops but `func.call` shells, compiled HLO instructions inside kernels or not);
- `kernels`: the kernels that hold any of its ops or equations, or whose instructions
  name the line, the largest share first, each with the other lines it holds;
- `rows[ir]`: the rows of each IR's text that write those nodes (and, in the compiled
  HLO, the kernels' own instruction rows).
A line with no ops says why, from the graphs: no equation (Python ran it while tracing,
or it is not code that ran), equations that nothing returned reads (JAX drops them
before lowering), StableHLO ops that XLA folded into constants, or removed as unused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from viz.fusion.map import constant_only
from viz.ir.kernels import kernel_of
from viz.ir.model import IRS, Graph, Node
from viz.jax_private import JAXPR_ROWS_SINCE
from viz.report import FusionEntry, Report
from viz.units import plural

NOT_OPS = frozenset({"func.call"})  # a shared function's call shell: its ops count
NOUNS = {"jaxpr": "equation", "stablehlo": "StableHLO op"}
NONE = {"jaxpr": "no jaxpr equation", "stablehlo": "no StableHLO op"}
SHOWN_KERNELS = 3  # the summary names at most this many kernels


@dataclass(frozen=True)
class LineTrace:
    """What line `line` became. Empty tuples where an IR has nothing of it."""

    line: int
    nodes: dict[str, tuple[str, ...]]  # IR → ids of its nodes from this line
    kernels: tuple[str, ...] = ()  # the largest share first
    others: dict[str, tuple[int, ...]] = field(default_factory=dict)  # kernel → other lines
    rows: dict[str, tuple[int, ...]] = field(default_factory=dict)  # IR → rows of its text
    why_none: str = ""  # when it made no kernel: why, as far as the graphs say

    @property
    def eqns(self) -> tuple[str, ...]:
        return self.nodes.get("jaxpr", ())

    @property
    def ops(self) -> tuple[str, ...]:
        return self.nodes.get("stablehlo", ())

    def __bool__(self) -> bool:
        """Whether the line made anything at all."""
        return any(self.nodes.values())

    def summary(self) -> str:
        """`line 12 → 3 equations → 5 StableHLO ops → 1 kernel (`fusion.3`, with lines
        11 and 13)`, or where the chain stops, and why."""
        parts = [f"line {self.line}"]
        for ir in ("jaxpr", "stablehlo"):
            n = len(self.nodes.get(ir, ()))
            parts.append(plural(n, NOUNS[ir]) if n else NONE[ir])
            if not n and not self.kernels:  # (ops of a shared function may carry no line)
                break
        else:
            kernels = self.kernels
            parts.append(
                f"{plural(len(kernels), 'kernel')} ({self._kernel_text()})"
                if kernels
                else "no kernel"
            )
        chain = " → ".join(parts)
        return f"{chain}: {self.why_none}" if self.why_none else chain

    def _kernel_text(self) -> str:
        named = []
        for kernel in self.kernels[:SHOWN_KERNELS]:
            others = self.others.get(kernel, ())
            named.append(f"`{kernel}`" + (f", with {_lines(others)}" if others else ""))
        more = len(self.kernels) - SHOWN_KERNELS
        return "; ".join(named) + (f"; {more} more" if more > 0 else "")


class SourceLines:
    """One report's lines and what each became: built once per report (the app keeps it
    with the result, `Result.lines`), then each trace is a few lookups."""

    def __init__(self, report: Report) -> None:
        self.graphs = {ir: g for ir, g in report.graph_models.items() if ir in IRS}
        self.fusion_map = report.fusion_map
        self.file = report.source_file
        self.jax_version = report.jax_version
        self._by_line = {ir: self._lines_of(g) for ir, g in self.graphs.items()}
        self._kernels_of = _kernels_by_op(self.fusion_map)
        self._entries = {e.kernel: e for e in self.fusion_map}

    def lines(self) -> list[int]:
        """Every line that made an op in some IR, in order."""
        return sorted({line for by_line in self._by_line.values() for line in by_line})

    def trace(self, line: int) -> LineTrace:
        nodes = {ir: tuple(by_line.get(line, ())) for ir, by_line in self._by_line.items()}
        kernels = self._kernels(line, nodes)
        others = {k: tuple(x for x in self._entries[k].lines if x != line) for k in kernels}
        compiled = self._compiled_nodes(nodes.get("compiled", ()), kernels)
        nodes["compiled"] = compiled
        rows = {ir: self._rows(ir, nodes.get(ir, ())) for ir in self.graphs}
        if "compiled" in self.graphs:
            rows["compiled"] = self._rows("compiled", (*compiled, *kernels))
        why = "" if kernels else self._why_none(nodes)
        return LineTrace(line, nodes, tuple(kernels), others, rows, why)

    def kernel_lines(self, kernel: str) -> tuple[int, ...]:
        """The lines a kernel came from (the fusion map's), in order."""
        entry = self._entries.get(kernel)
        return tuple(sorted(entry.lines)) if entry else ()

    def node_lines(self, ir: str, node_id: str) -> tuple[int, ...]:
        """The lines behind one node of a graph: a compiled node's kernel's lines; an
        op's or equation's own line, with those of the kernels it went into."""
        graph = self.graphs.get(ir)
        node = graph.node_map().get(node_id) if graph else None
        if node is None:
            return self.kernel_lines(node_id)  # a fusion, by its group's name
        if ir == "compiled":
            return self.kernel_lines(kernel_of(graph)(node).name) or _own_line(node, self.file)
        lines = set(_own_line(node, self.file))
        for kernel in self._kernels_of[ir].get(node_id, ()):
            lines.update(self.kernel_lines(kernel))
        return tuple(sorted(lines))

    def rows_unknown(self, ir: str) -> str:
        """Why the rows `ir`'s text writes each node on are not known ('' where they are)."""
        graph = self.graphs.get(ir)
        if graph is None or graph.text_rows:
            return ""
        if ir == "jaxpr" and _older(self.jax_version, JAXPR_ROWS_SINCE):
            return (
                f"Marking the jaxpr's rows needs jax ≥ {JAXPR_ROWS_SINCE} (its printer's "
                f"source map); this result is jax {self.jax_version}'s. The graphs and the "
                "other IRs' texts are marked."
            )
        return "Which rows of this text write which node is not known for this result."

    # -- how a trace is made ------------------------------------------------------
    def _lines_of(self, graph: Graph) -> dict[int, list[str]]:
        by_line: dict[int, list[str]] = {}
        for node in graph.nodes:
            if node.kind == "op" and node.op not in NOT_OPS:
                for line in _own_line(node, self.file):
                    by_line.setdefault(line, []).append(node.id)
        return by_line

    def _kernels(self, line: int, nodes: dict[str, tuple[str, ...]]) -> list[str]:
        """Kernels holding the line's ops or equations, or naming the line; by share."""
        share: Counter[str] = Counter()
        for ir in ("stablehlo", "jaxpr"):
            for node_id in nodes.get(ir, ()):
                share.update(self._kernels_of[ir].get(node_id, ()))
        for entry in self.fusion_map:
            if line in entry.lines:  # its instructions' metadata names the line
                share.setdefault(entry.kernel, 0)
        return [k for k, _ in share.most_common() if self._entries[k].is_kernel]

    def _compiled_nodes(self, own: tuple[str, ...], kernels: list[str]) -> tuple[str, ...]:
        """The compiled instructions from the line; for a kernel that holds the line's
        ops but none of its instructions names the line (XLA dropped the metadata),
        the kernel's instructions."""
        graph = self.graphs.get("compiled")
        if graph is None:
            return own
        of = kernel_of(graph)
        nodes = graph.node_map()
        named = {of(nodes[i]).name for i in own if i in nodes}
        missing = set(kernels) - named
        extra = [n.id for n in graph.nodes if n.kind == "op" and of(n).name in missing]
        return (*own, *extra)

    def _rows(self, ir: str, ids: Iterable[str]) -> tuple[int, ...]:
        rows = self.graphs[ir].text_rows
        return tuple(sorted({row for i in ids for row in rows.get(i, ())}))

    def _why_none(self, nodes: dict[str, tuple[str, ...]]) -> str:
        """Why a line made no kernel, as far as the graphs say ('' where it made one)."""
        eqns, ops = nodes.get("jaxpr", ()), nodes.get("stablehlo", ())
        if not eqns and not ops:
            return "Python ran it while tracing, or it is not code that ran"
        if not ops:
            graph = self.graphs.get("jaxpr")
            if graph is not None and not set(eqns) & used(graph):
                return "nothing the function returns reads it (JAX dropped it before lowering)"
            return "it lowered to nothing"
        graph = self.graphs.get("stablehlo")
        if graph is None or "compiled" not in self.graphs:
            return "the program did not compile"
        if not set(ops) & used(graph):
            return "nothing the function returns reads it (XLA removed it)"
        constant = constant_only(graph)
        if all(constant.get(i) for i in ops):
            return "it computes constants only (XLA folded it into a constant)"
        return "its ops were not found in the compiled program"


def _older(version: str, than: str) -> bool:
    """Whether JAX `version` (e.g. "0.9.2") is older than `than` ("0.10"); an unknown one is not."""
    try:
        have = tuple(int(x) for x in version.split(".")[:2])
    except ValueError:
        return False
    return have < tuple(int(x) for x in than.split("."))


def _own_line(node: Node, file: str | None) -> tuple[int, ...]:
    """The node's source line, if it is in the user's file (any file when unknown)."""
    src = node.source
    if src is None or src.line <= 0 or (file is not None and src.file != file):
        return ()
    return (src.line,)


def _kernels_by_op(fusion_map: list[FusionEntry]) -> dict[str, dict[str, list[str]]]:
    """IR → op id → the kernels (and no_kernel instructions) it went into."""
    out: dict[str, dict[str, list[str]]] = {"stablehlo": {}, "jaxpr": {}}
    for entry in fusion_map:
        for op in entry.stablehlo_ops:
            out["stablehlo"].setdefault(op["id"], []).append(entry.kernel)
        for eqn in entry.jaxpr_eqns:
            out["jaxpr"].setdefault(eqn["id"], []).append(entry.kernel)
    return out


def used(graph: Graph) -> set[str]:
    """The nodes whose value an output depends on."""
    inputs: dict[str, list[str]] = {}
    for edge in graph.edges:
        inputs.setdefault(edge.dst, []).append(edge.src)
    todo = [n.id for n in graph.nodes if n.kind == "output"]
    reached = set(todo)
    while todo:
        for src in inputs.get(todo.pop(), ()):
            if src not in reached:
                reached.add(src)
                todo.append(src)
    return reached


def _lines(lines: tuple[int, ...]) -> str:
    """`line 11`, `lines 11 and 13`, `lines 3, 4 and 9`."""
    if len(lines) == 1:
        return f"line {lines[0]}"
    return "lines " + ", ".join(map(str, lines[:-1])) + f" and {lines[-1]}"


@dataclass(frozen=True)
class Excerpt:
    """Rows of a text around the marked ones: (row number, its text, marked), with
    `None` where rows are left out between them."""

    rows: list[tuple[int, str, bool] | None]
    left_out: int = 0  # marked rows past the limit, not shown


def excerpt(text: str, marked: Iterable[int], context: int = 1, limit: int = 80) -> Excerpt:
    """The marked rows of `text` (1-based), each with `context` rows either side, the
    first `limit` marked rows only."""
    lines = text.splitlines()
    wanted = sorted(r for r in set(marked) if 1 <= r <= len(lines))
    shown_marks, left_out = wanted[:limit], max(len(wanted) - limit, 0)
    keep = sorted(
        {
            r
            for m in shown_marks
            for r in range(max(m - context, 1), min(m + context, len(lines)) + 1)
        }
    )
    marks = set(shown_marks)
    rows: list[tuple[int, str, bool] | None] = []
    for i, row in enumerate(keep):
        if i and row != keep[i - 1] + 1:
            rows.append(None)
        rows.append((row, lines[row - 1], row in marks))
    return Excerpt(rows, left_out)
