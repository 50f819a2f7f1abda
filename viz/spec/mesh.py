"""The device mesh of a sharded analysis, as text: `data=4, model=2`.

One `name=size` per mesh axis, separated by commas or spaces; a size may end in
`:explicit` (JAX's `AxisType.Explicit`: shardings are part of the types, and
`jax.sharding.reshard` works) or `:auto` (the default, `AxisType.Auto`: XLA
propagates shardings, and `jax.lax.with_sharding_constraint` steers it). The mesh
uses the first `size × size × …` devices of the analysis's platform. Text only, no
jax: the worker builds the `jax.sharding.Mesh` (`viz.sharding.build`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from viz.spec.partition import Partition
from viz.spec.text import ItemError, SpecError
from viz.units import plural

_AXIS = re.compile(r"^(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<size>\d+)\s*(?::\s*(?P<type>\w+))?$")
AXIS_TYPES = ("auto", "explicit")


@dataclass(frozen=True)
class MeshAxis:
    name: str
    size: int
    explicit: bool = False  # AxisType.Explicit (else Auto)

    def __str__(self) -> str:
        return f"{self.name}={self.size}" + (":explicit" if self.explicit else "")


@dataclass(frozen=True)
class MeshSpec:
    """A mesh's axes, in order (the device grid's dimensions)."""

    axes: tuple[MeshAxis, ...]

    @property
    def sizes(self) -> dict[str, int]:
        """{axis: size}: the report's `sharding.mesh`."""
        return {a.name: a.size for a in self.axes}

    @property
    def devices(self) -> int:
        """How many devices the mesh spans."""
        return math.prod(a.size for a in self.axes)

    def __str__(self) -> str:
        return ", ".join(str(a) for a in self.axes)


def parse_mesh(text: str) -> MeshSpec | None:
    """The mesh `text` describes (None for blank text); SpecError saying what is wrong."""
    parts = [p for p in re.split(r"\s*,\s*|\s+(?=[A-Za-z_]\w*\s*=)", text.strip()) if p]
    if not parts:
        return None
    axes = tuple(_axis(part) for part in parts)
    names = [a.name for a in axes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SpecError(f"mesh axis '{twice[0]}' is named twice")
    return MeshSpec(axes)


def _axis(part: str) -> MeshAxis:
    found = _AXIS.match(part.strip())
    if not found:
        raise SpecError(f"mesh axis {part!r} is not NAME=SIZE: write e.g. data=4, model=2")
    kind = (found.group("type") or "auto").lower()
    if kind not in AXIS_TYPES:
        raise SpecError(f"mesh axis {part!r}: the axis type is auto or explicit, not {kind!r}")
    size = int(found.group("size"))
    if size < 1:
        raise SpecError(f"mesh axis {part!r}: its size must be at least 1")
    return MeshAxis(found.group("name"), size, kind == "explicit")


def check_partition(partition: Partition, mesh: MeshSpec) -> None:
    """ItemError unless each of `partition`'s axes is in `mesh`, once."""
    unknown = [a for a in partition.axes if a not in mesh.sizes]
    if unknown:
        raise ItemError(f"mesh axis '{unknown[0]}' is not in the mesh ({mesh})")
    twice = [a for a in partition.axes if partition.axes.count(a) > 1]
    if twice:
        raise ItemError(f"mesh axis '{twice[0]}' is used twice in {partition}")


def check_split(shape: tuple[int, ...], partition: Partition, mesh: MeshSpec, what: str) -> None:
    """ItemError when `partition` does not fit an array of `shape` on `mesh`."""
    if len(partition.entries) > len(shape):
        raise ItemError(
            f"{partition} has {len(partition.entries)} entries but {what} has "
            f"{plural(len(shape), 'dimension')}"
        )
    for axis, (dim, entry) in enumerate(zip(shape, partition.entries, strict=False)):
        names = (entry,) if isinstance(entry, str) else tuple(entry or ())
        parts = math.prod(mesh.sizes[n] for n in names)
        if dim % parts:
            over = " × ".join(f"'{n}'" for n in names)
            raise ItemError(
                f"dimension {axis} of {what} ({dim}) does not split over {over} "
                f"({parts} devices): make it a multiple of {parts}"
            )
