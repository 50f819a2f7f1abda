"""The sharding part of a diff: how two runs split the program over devices.

`diff_sharding(a, b)` compares the reports' `sharding` sections (None when neither
run is sharded): each side's mesh, every argument leaf whose sharding or per-device
shape changed, and the collectives by kind and element type, their count and bytes
per device as `Delta`s (a kind missing on one side is 0 there), biggest change
first. Plain data; no jax.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from viz.diff.deltas import Delta, delta
from viz.plain import Plain
from viz.report import Report
from viz.sharding.model import Collective, ShardingSection


@dataclass
class CollectiveDelta(Plain):
    """One kind of collective (and element type) in A and in B."""

    kind: str
    dtype: str
    count: Delta
    bytes_per_device: Delta
    lines_a: list[int] = field(default_factory=list)
    lines_b: list[int] = field(default_factory=list)


@dataclass
class ArgChange(Plain):
    """An argument leaf split differently in B than in A."""

    arg: str
    a: str  # `P('data', None) · [8, 128]`
    b: str


@dataclass
class ShardingDiff(Plain):
    mesh_a: dict[str, int]
    mesh_b: dict[str, int]
    args: list[ArgChange]
    collectives: list[CollectiveDelta]

    @property
    def changed(self) -> list[CollectiveDelta]:
        """The kinds whose count or bytes changed."""
        return [c for c in self.collectives if c.count.delta or c.bytes_per_device.delta]


def diff_sharding(a: Report, b: Report) -> ShardingDiff | None:
    """A → B of the sharding sections; None when neither run is sharded."""
    if a.sharding is None and b.sharding is None:
        return None
    sa, sb = a.sharding or ShardingSection(), b.sharding or ShardingSection()
    return ShardingDiff(sa.mesh, sb.mesh, _arg_changes(sa, sb), _collectives(sa, sb))


def _arg_changes(a: ShardingSection, b: ShardingSection) -> list[ArgChange]:
    shown_a = {x.arg: f"{x.spec} · {x.per_device_shape}" for x in a.args}
    shown_b = {x.arg: f"{x.spec} · {x.per_device_shape}" for x in b.args}
    names = list(dict.fromkeys([*shown_a, *shown_b]))
    return [
        ArgChange(n, shown_a.get(n, "–"), shown_b.get(n, "–"))
        for n in names
        if shown_a.get(n) != shown_b.get(n)
    ]


def _collectives(a: ShardingSection, b: ShardingSection) -> list[CollectiveDelta]:
    by_a = {(c.kind, c.dtype): c for c in a.collectives}
    by_b = {(c.kind, c.dtype): c for c in b.collectives}
    rows = [_row(k, by_a.get(k), by_b.get(k)) for k in dict.fromkeys([*by_a, *by_b])]
    return sorted(rows, key=lambda r: -abs(r.count.delta or 0))


def _row(key: tuple[str, str], a: Collective | None, b: Collective | None) -> CollectiveDelta:
    return CollectiveDelta(
        kind=key[0],
        dtype=key[1],
        count=delta(a.count if a else 0, b.count if b else 0),
        bytes_per_device=delta(a.bytes_per_device if a else 0, b.bytes_per_device if b else 0),
        lines_a=list(a.lines) if a else [],
        lines_b=list(b.lines) if b else [],
    )
