"""Find nodes by op (`dot`), shape (`f32[8,128]`, `8,128`) or source line (`:12`,
`line 12`, `file.py:12`)."""

from __future__ import annotations

import re

from viz.ir.model import Graph, Node

# ---------------------------------------------------------------- search

_LINE = re.compile(r"^(?:line\s*|l|:)(\d+)$")
_FILE_LINE = re.compile(r"^(.+):(\d+)$")
_DIMS = re.compile(r"^\[?\d+(?:\s*,\s*\d+)*\]?$")


def find(graph: Graph, query: str) -> list[str]:
    """Ids of nodes (in graph order) matching the query.

    The query is a source line ('line 12', ':12', 'model.py:12'), a shape
    ('f32[8,128]', '8,128') or else a substring of the op name or label ('dot').
    """
    q = query.strip().lower()
    if not q:
        return []
    return [n.id for n in graph.nodes if _matches(n, q)]


def _matches(node: Node, q: str) -> bool:
    line = _LINE.match(q)
    if line:
        return node.source is not None and node.source.line == int(line.group(1))
    file_line = _FILE_LINE.match(q)
    if file_line and node.source is not None and file_line.group(2).isdigit():
        file, number = file_line.groups()
        return node.source.line == int(number) and node.source.file.lower().endswith(file)
    if _DIMS.match(q):
        dims = q.strip("[]").replace(" ", "")
        return f"[{dims}]" in node.type.replace(" ", "")
    if "[" in q:
        return q.replace(" ", "") in node.type.lower().replace(" ", "")
    return q in node.op.lower() or q in node.label.lower()
