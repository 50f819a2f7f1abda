"""Synthetic groups a default view adds so that a flat program stays readable: many
top-level inputs or constants become one box, and long runs of items from the same
source become chunks. The model itself is never changed: a folded copy is returned."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from viz.ir.model import Graph, Group, Node, Path

INPUT_GROUP_MIN = 12  # more top-level inputs (or constants) than this → one box


MIN_RUN = 3  # shorter runs of same-source top-level items are not chunked


FOLD_MIN = 3  # fewer look-alikes than this are drawn side by side (viz.graph.repeats)


PHASE_MIN = 12  # a top level with more items than this, some name-scoped, is cut into phases


SYNTHETIC = "synthetic"  # Group.attrs key marking groups a view added
NUMBER = re.compile(r"\d+")  # what look-alike names differ in (`layer3`, `fusion.12`)
SPAN = "span"  # Group.attrs key: what a fold is keyed on when chunked (`layer0–layer95`)


# ---------------------------------------------------------------- synthetic groups


def fold_top_level(graph: Graph, max_nodes: int, trust_folds: bool = True) -> Graph:
    """A copy with many top-level inputs/constants/outputs boxed, and a top level that is
    oversized, or mixes name-scoped parts with loose ops (a training step: the forward
    pass, the loss, the backward pass, the update), chunked into its runs.

    A graph whose every node fits in `max_nodes` is returned as it is.
    """
    if len(graph.nodes) <= max_nodes:
        return graph
    by_kind: dict[str, list[str]] = {}  # top-level node ids by `_leaf_kind`
    for node in graph.nodes:
        if not node.scope:
            by_kind.setdefault(_leaf_kind(node), []).append(node.id)
    moves: dict[str, Path] = {}
    new_groups: list[Group] = []
    for kind, name in (("input", "inputs"), ("constant", "constants"), ("output", "outputs")):
        ids = by_kind.get(kind, [])
        if len(ids) > INPUT_GROUP_MIN:
            path = (_fresh(graph, f"[{name}]"),)
            new_groups.append(synthetic_group(path, f"{name} ({len(ids)})", "leaves"))
            moves.update(dict.fromkeys(ids, path))
    item_of = _item_of(graph)
    items = _top_items(graph, item_of, moves)
    info = _item_info(graph, item_of)
    phases = any(info[i].scoped for i in items if i in info) and len(items) > PHASE_MIN
    if len(items) + len(new_groups) > max_nodes or phases:
        users = _item_users(graph, item_of, items, info) if phases else {}
        chunks = _chunks(items, info, max_nodes - len(new_groups), phases, trust_folds, users)
        for k, (label, members, parts) in enumerate(chunks):
            path = (_fresh(graph, f"[chunk {k + 1}]"),)
            new_groups.append(synthetic_group(path, label, "chunk"))
            moves.update(dict.fromkeys(members, path))
            for j, (part_label, part) in enumerate(parts):
                sub = (*path, _fresh(graph, f"[part {j + 1}]"))
                new_groups.append(synthetic_group(sub, part_label, "chunk"))
                moves.update(dict.fromkeys(part, sub))
    if not moves:
        return graph
    return _regroup(graph, moves, new_groups)


def _leaf_kind(node: Node) -> str:
    """'constant' for constant ops too (`stablehlo.constant`, HLO `constant`)."""
    return "constant" if node.op.rsplit(".", 1)[-1] == "constant" else node.kind


def _fresh(graph: Graph, name: str) -> str:
    while (name,) in graph.groups:
        name += "'"
    return name


def synthetic_group(path: Path, label: str, what: str) -> Group:
    return Group(path, label, "scope", attrs={SYNTHETIC: what})


def synthetic_kind(groups: dict[Path, Group], path: Path) -> str:
    """What a view added `path` as ('leaves', 'chunk', 'fold', 'rest', 'chains',
    'chain'), or '' for a group of the reader's."""
    group = groups.get(path)
    return group.attrs.get(SYNTHETIC, "") if group is not None else ""


def group_kind(groups: dict[Path, Group], path: Path) -> str:
    """A group's kind ('fusion', 'scope', ...), or '' for a scope with no group."""
    group = groups.get(path)
    return group.kind if group is not None else ""


def _item_of(graph: Graph) -> list[str]:
    """The top-level item of each node, in node order: its id, or its top-level group's
    name (`g:layer3`). Worked out once for the walks of `fold_top_level`."""
    return ["g:" + node.scope[0] if node.scope else node.id for node in graph.nodes]


def _top_items(graph: Graph, item_of: list[str], moved: dict[str, Path]) -> list[str]:
    """Top-level members in program order: node ids and top-level group names."""
    if moved:
        kept = (
            item for node, item in zip(graph.nodes, item_of, strict=True) if node.id not in moved
        )
        items = dict.fromkeys(kept)
    else:
        items = dict.fromkeys(item_of)
    for path in graph.groups:
        items.setdefault("g:" + path[0], None)
    return list(items)


_Chunk = tuple[str, list[str], list[tuple[str, list[str]]]]  # label, items, parts


def _chunks(
    items: list[str],
    info: dict[str, _ItemInfo],
    max_nodes: int,
    phases: bool,
    trust_folds: bool = True,
    users: dict[str, list[str]] | None = None,
) -> list[_Chunk]:
    """Runs of consecutive items with the same key, at most max_nodes // 2 entries in all.

    The key is an item's first name scope (`layer3`), else its source function. With
    `phases` (a top level mixing name scopes and loose ops), items with the same key
    form one run wherever they are: XLA's schedule interleaves the backward pass's
    kernels with the optimizer's, yet they are the phases a user thinks in.
    Runs shorter than MIN_RUN stay at top level. A run is divided into parts by
    the next name-scope level (`layer3` into `attention` and `mlp`) when that
    gives it 2 to max_nodes // 4 entries; a run longer than max_nodes // 4 items
    that does not divide so is split into pieces of max_nodes // 4 items. When
    that still leaves more than max_nodes // 2 top-level entries (counting runs of
    look-alike runs as one, which a fold will make of them, unless `trust_folds` is
    off), fixed-size chunks of all items are used (labelled with the keys they span).
    `users` (`_item_users`) places a phase's keyless items.
    """
    target, cap = max(2, max_nodes // 2), max(MIN_RUN, max_nodes // 4)
    chunks: list[_Chunk] = []  # (key, items, parts), labelled below
    for key, members in _phases(items, info, users or {}) if phases else _runs(items, info, 0):
        if len(members) < MIN_RUN:
            continue
        parts = _parts(members, info, cap)
        if parts or len(members) <= cap or phases:  # a phase is one box, however long
            chunks.append((key, members, parts))
        else:
            chunks.extend((key, members[i : i + cap], []) for i in range(0, len(members), cap))
    loose = len(items) - sum(len(members) for _, members, _ in chunks)
    if (_folded(chunks) if trust_folds else len(chunks)) + loose > target:
        size = math.ceil(len(items) / target)
        fixed = [items[i : i + size] for i in range(0, len(items), size)]
        chunks = [(_key_span(members, info), members, []) for members in fixed]
    return [
        (
            _chunk_label(key, members, info),
            members,
            [(_chunk_label(k, part, info), part) for k, part in parts],
        )
        for key, members, parts in chunks
    ]


def _runs(items: list[str], info: dict[str, _ItemInfo], level: int) -> list[tuple[str, list[str]]]:
    """Runs of consecutive items with the same key at `level` (0: first name scope)."""
    runs: list[tuple[str, list[str]]] = []
    for item in items:
        keys = info[item].keys if item in info else ()
        key = keys[level] if level < len(keys) else ""
        if runs and runs[-1][0] == key:
            runs[-1][1].append(item)
        else:
            runs.append((key, [item]))
    return runs


def _folded(chunks: list[tuple[str, list[str], list]]) -> int:
    """How many boxes the chunks make once look-alike runs are folded (`layer0` …
    `layer95`, each the same number of items: one fold, see viz.graph.repeats). Pieces
    of one long run share a key: they are not counted as look-alikes."""
    boxes, run = 0, 1
    following = [*chunks[1:], ("", [], [])][: len(chunks)]
    for (key, members, _), (after, others, _) in zip(chunks, following, strict=True):
        alike = after != key and len(others) == len(members)
        if alike and NUMBER.sub("#", after) == NUMBER.sub("#", key):
            run += 1
            continue
        boxes += 1 if run >= FOLD_MIN else run
        run = 1
    return boxes


def _phases(
    items: list[str], info: dict[str, _ItemInfo], users: dict[str, list[str]]
) -> list[tuple[str, list[str]]]:
    """Items by their first key, in order of first appearance. An item without a key (a
    broadcast kernel XLA made, a constant) joins the phase of the first item that uses
    it (through other keyless items); one no keyed item uses (the last ops before the
    outputs) stays loose."""
    key_of: dict[str, str] = {}
    for item in reversed(items):  # users come after what they use
        key = info[item].keys[0] if item in info else ""
        if item in info and info[item].kind in ("input", "output"):
            key = f"\0{item}"  # a few inputs (many are boxed already) stay loose
        elif not key:  # `_placed_by_users`
            found = (key_of.get(u, "") for u in users.get(item, ()))
            key = next((k for k in found if k and not k.startswith("\0")), f"\0{item}")
        key_of[item] = key
    runs: dict[str, list[str]] = {}
    for item in items:
        runs.setdefault(key_of[item], []).append(item)
    return [("" if key.startswith("\0") else key, members) for key, members in runs.items()]


def _placed_by_users(item: str, info: dict[str, _ItemInfo]) -> bool:
    """Whether `_phases` places `item` by its users: no key, not an input or output."""
    found = info.get(item)
    return found is None or (found.kind not in ("input", "output") and not found.keys[0])


def _item_users(
    graph: Graph, items_of: list[str], items: list[str], info: dict[str, _ItemInfo]
) -> dict[str, list[str]]:
    """item → the items that use its values, in item order, for the items `_phases`
    places by their users (a few: the others' edges are passed over)."""
    placed = {item for item in items if _placed_by_users(item, info)}
    if not placed:
        return {}
    item_of = dict(zip((n.id for n in graph.nodes), items_of, strict=True))
    order = {item: i for i, item in enumerate(items)}
    found: dict[str, set[str]] = {}
    for edge in graph.edges:
        src = item_of.get(edge.src)
        if src in placed:
            dst = item_of.get(edge.dst)
            if dst is not None and dst != src:
                found.setdefault(src, set()).add(dst)
    return {item: sorted(u, key=lambda x: order.get(x, len(order))) for item, u in found.items()}


def _parts(members: list[str], info: dict[str, _ItemInfo], cap: int) -> list[tuple[str, list[str]]]:
    """A chunk's parts by the next name-scope level, or [] when that does not divide it."""
    parts = [(k, part) for k, part in _runs(members, info, 1) if len(part) >= MIN_RUN]
    entries = len(parts) + len(members) - sum(len(part) for _, part in parts)
    return parts if parts and 2 <= entries <= cap else []


def _key_span(members: list[str], info: dict[str, _ItemInfo]) -> str:
    """`layer3`, or `layer3–layer4` for items whose keys run from one to the other."""
    keys = [info[m].keys[0] for m in members if m in info and info[m].keys[0]]
    return span(keys[0], keys[-1]) if keys else ""


def span(first: str, last: str) -> str:
    """`layer0–layer95`; of two spans, from the first's start to the last's end
    (`layer0–layer3` … `layer92–layer95` → `layer0–layer95`)."""
    start, end = first.split("–")[0], last.split("–")[-1]
    return start if start == end else f"{start}–{end}"


@dataclass
class _ItemInfo:
    keys: tuple[str, ...]  # chunking keys: name-scope components, else (source function,)
    lines: set[tuple[str, int]]  # (file, line) of its ops
    scoped: bool  # keyed by a name scope (or a fold), not by a source function
    kind: str = "op"  # its first node's: 'op', 'input', 'output', 'constant'


def _item_info(graph: Graph, item_of: list[str]) -> dict[str, _ItemInfo]:
    """Each top-level item's chunking keys (its first node's that has any: a fusion's
    first fused op may have no source) and source lines."""
    info: dict[str, _ItemInfo] = {}
    for node, item in zip(graph.nodes, item_of, strict=True):
        found = info.get(item)
        if found is None or not found.keys[0]:
            keys, scoped = _keys(node, graph.groups.get(node.scope[:1]))
            if found is None:
                found = info[item] = _ItemInfo(keys, set(), scoped, node.kind)
            else:
                found.keys, found.scoped = keys, scoped
        if node.source is not None:
            found.lines.add((node.source.file, node.source.line))
    return _without_common_scope(info)


def _without_common_scope(info: dict[str, _ItemInfo]) -> dict[str, _ItemInfo]:
    """The keys one level down while every name-scoped item shares its first one (a
    model under `Transformer/`, its layers `Transformer/layer3`): chunking then finds
    the layers, not one `Transformer` run."""
    scoped = [found for found in info.values() if found.scoped]
    while scoped and len({f.keys[0] for f in scoped}) == 1 and any(len(f.keys) > 1 for f in scoped):
        for found in scoped:
            if len(found.keys) > 1:
                found.keys = found.keys[1:]
    return info


def _keys(node: Node, group: Group | None) -> tuple[tuple[str, ...], bool]:
    """An item's chunking keys, and whether they are a name scope's."""
    if group is not None and group.attrs.get(SYNTHETIC) == "fold":
        # a fold stands alone, like a name scope, keyed by its span (`layer0–layer2`)
        return (group.attrs.get(SPAN, group.label),), True
    if group is not None and group.attrs.get("op_name"):
        # a kernel is named after its root op (XLA's metadata): a fusion of the last
        # layer's residual add with the final norm is the norm's, whatever it fuses
        scope = group.attrs.get("name_scope", "")
    else:
        scope = (group.attrs.get("name_scope") if group else None) or node.attrs.get(
            "name_scope", ""
        )
    if not scope and group is not None and group.kind == "scope":
        scope = group.path[0]  # a name scope the reader made a group of
    if scope:
        return tuple(scope.split("/")), True
    if node.source is not None:
        return (user_function_name(node.source.function) or node.source.file,), False
    return (node.kind if node.kind != "op" else "",), False


def user_function_name(name: str) -> str:
    """`train_step.<locals>.loss_fn` → `train_step.loss_fn`, `tree_map.<locals>.<lambda>`
    → `tree_map`: the names a user knows."""
    return ".".join(p for p in name.split(".") if not p.startswith("<"))


def _chunk_label(key: str, members: list[str], info: dict[str, _ItemInfo]) -> str:
    spots = set().union(*(info[m].lines for m in members if m in info))
    lines = sorted(line for _, line in spots)
    one_file = len({file for file, _ in spots}) == 1  # else the numbers mean nothing together
    where = f", lines {lines[0]}–{lines[-1]}" if lines and one_file else ""
    return f"{key or 'ops'} ({len(members)} items{where})"


def _regroup(graph: Graph, moves: dict[str, Path], new_groups: list[Group]) -> Graph:
    """A copy of `graph` with moved top-level items under their synthetic group."""
    group_moves = {m[2:]: p for m, p in moves.items() if m.startswith("g:")}
    scopes: dict[Path, Path | None] = {}  # each scope's new path (None: not moved)
    nodes = []
    for node in graph.nodes:
        scope = node.scope
        if not scope:
            head = moves.get(node.id)
            nodes.append(moved_node(node, head) if head else node)
            continue
        if scope not in scopes:
            head = group_moves.get(scope[0])
            scopes[scope] = head + scope if head else None
        new = scopes[scope]
        nodes.append(moved_node(node, new) if new else node)
    groups = {g.path: g for g in new_groups}
    for path, group in graph.groups.items():
        head = group_moves.get(path[0], ())
        groups[head + path] = moved_group(group, head + path) if head else group
    return replace(graph, nodes=nodes, groups=groups)


# `dataclasses.replace(node, scope=...)` without its per-call field introspection,
# which dominated regrouping big graphs; every field is passed on.
def moved_node(n: Node, scope: Path) -> Node:
    return Node(n.id, n.op, n.label, n.type, scope, n.source, n.kind, n.attrs)


def moved_group(g: Group, path: Path) -> Group:
    return Group(path, g.label, g.kind, g.op, g.opaque, g.attrs)
