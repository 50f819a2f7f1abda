"""The spec language's sharding suffix as text: `f32[64,128] @ P('data', None)`. The
partition is read as literals (axis names, None, tuples of names), never evaluated;
checking it against a mesh is `viz.spec.mesh`, placing arrays by it `viz.spec.values`.
No jax here: the cache lab's placement field and the app server read it too.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from viz.source import parse_python
from viz.spec.text import ItemError, SpecError

PARTITION_NAMES = frozenset({"P", "PartitionSpec"})
Axes = str | tuple[str, ...] | None  # one dimension's entry: a mesh axis, several, or None


@dataclass(frozen=True)
class Partition:
    """A PartitionSpec as the spec language writes it after `@`: `P('data', None)`. Per
    array dimension, the mesh axis (or tuple of axes) it is split over, None for not
    split; dimensions past the last entry are not split, as in JAX. Text only: the
    worker builds `jax.sharding.PartitionSpec(*entries)` from it."""

    entries: tuple[Axes, ...] = ()

    @property
    def axes(self) -> tuple[str, ...]:
        """Every mesh axis named, in order."""
        named: list[str] = []
        for entry in self.entries:
            named += [entry] if isinstance(entry, str) else list(entry or ())
        return tuple(named)

    def __str__(self) -> str:
        return "P(" + ", ".join(repr(e) for e in self.entries) + ")"


def is_partition(node: ast.expr) -> bool:
    """Whether `node` is a call `P(...)`, `PartitionSpec(...)` or `x.PartitionSpec(...)`."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in PARTITION_NAMES
    return isinstance(func, ast.Attribute) and func.attr == "PartitionSpec"


def sharded_parts(node: ast.expr) -> tuple[ast.expr, ast.Call] | None:
    """(what is sharded, the partition call) of `item @ P(...)`, None for anything else:
    `a @ b` with anything but a partition on the right stays Python's matmul."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult)):
        return None
    return (node.left, node.right) if is_partition(node.right) else None  # type: ignore[return-value]


def partition_of(call: ast.Call) -> Partition:
    """The Partition a `P(...)` call writes; ItemError naming a bad entry. Entries are
    literals only (an axis name, None, a tuple of names), never evaluated code."""
    if call.keywords:
        raise ItemError("P(...) takes mesh axis names by position: P('data', None)")
    return Partition(tuple(_partition_entry(arg) for arg in call.args))


def _partition_entry(node: ast.expr) -> Axes:
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        value = ...
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, tuple) and value and all(isinstance(v, str) for v in value):
        return value
    raise ItemError(
        f"P(...) entry {ast.unparse(node)} is not a mesh axis: write an axis name "
        "('data'), None (not split) or a tuple of names (('data', 'model'))"
    )


def parse_partition(text: str) -> Partition:
    """`P('data', None)` (or `@ P('data', None)`, a spec's suffix alone) as a Partition;
    SpecError saying what is wrong. The cache lab's placement field takes it."""
    source = text.strip().removeprefix("@").strip()
    try:
        node = parse_python(source, "eval").body  # type: ignore[attr-defined]
    except (SyntaxError, ValueError):
        node = None
    if node is None or not is_partition(node):
        raise SpecError(f"{text.strip()!r} is not a partition: write e.g. P('x') or P(None, 'x')")
    try:
        return partition_of(node)
    except ItemError as err:
        raise SpecError(err.reason) from None


_SUFFIX = re.compile(r"^(?P<item>.*?)\s*@\s*(?P<partition>(?:P|PartitionSpec)\s*\(.*\))\s*$", re.S)


def split_sharding(item: str) -> tuple[str, str]:
    """('f32[64,128]', "P('data', None)") for an item with a sharding suffix at its top
    level; (item, '') without one. Text only, for controls that edit the array part."""
    found = _SUFFIX.match(item.strip())
    if not found:
        return item.strip(), ""
    return found.group("item"), found.group("partition")
