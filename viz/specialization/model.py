"""What a compiled executable is specialized on, as plain data (no jax): one row per
argument leaf (DESIGN.md's `specialization[...]`) and the ops whose sizes equal an
argument's value or dimension. The worker fills them (`viz.specialization.read`);
the report, the app and the CLI read them."""

from __future__ import annotations

from dataclasses import dataclass, field

from viz.plain import Plain

STATES = ("static", "dynamic", "untraceable")


@dataclass
class SpecializedArg(Plain):
    """One argument leaf and what the executable baked in for it.

    state:
      - `static`: the value itself is baked in (`value` is its repr); each new value
        compiles again. One row per static argument, whatever its structure.
      - `dynamic`: `shape`, `dtype` and `weak_type` are baked in, the values are free.
      - `untraceable`: tracing failed because this leaf's value decided a shape (or a
        Python branch); `note` says which, the report's `error` has the line and fix.
    sharding: the compiled executable's input sharding of the leaf, short
      (`single device cpu:0`); None for static arguments and when nothing compiled.

    The other fields let a reader rebuild the spec with one leaf changed
    (`viz.specialization.variant_spec`): `param` is the parameter the leaf belongs to,
    `position` that parameter's place in the args spec, `item` the leaf in the spec
    language (`f32[8,128]`, `2.0`, `key`; "" when it cannot be written there), and
    `tree` (on a parameter's first row only) the parameter's spec text around its
    leaves: `tree[0] + item_0 + tree[1] + ... + item_n + tree[n+1]`; [] when the
    parameter is the leaf itself."""

    arg: str  # the leaf as JAX names it: x, params['w'], n
    state: str  # one of STATES
    shape: list[int] | None = None
    dtype: str | None = None  # jaxpr spelling: f32, i32, key<fry>
    weak_type: bool | None = None
    sharding: str | None = None
    value: str | None = None  # repr of a static value
    param: str = ""
    position: int = 0
    item: str = ""
    tree: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def baked_in(self) -> str:
        """What the executable holds for this leaf, as one short text."""
        if self.state == "static":
            return f"the value {self.value}"
        if self.dtype is None or self.shape is None:
            return "–"
        weak = "weak " if self.weak_type else ""
        return f"{weak}{self.dtype}[{','.join(str(d) for d in self.shape)}]"


@dataclass
class ShapeOp(Plain):
    """An equation of the jaxpr whose shape-carrying parameter holds a size equal to a
    static argument's value or to a dimension of an input (`matches`: `n`,
    `x.shape[0]`). A heuristic read from numbers: the jaxpr keeps the sizes, not the
    Python that computed them, so an equal number can be a coincidence."""

    primitive: str  # iota, broadcast_in_dim, reshape, ...
    param: str  # the parameter that holds the sizes: shape, new_sizes, ...
    sizes: list[int]
    line: int | None = None  # in the user's file
    matches: list[str] = field(default_factory=list)  # at most MAX_MATCHES
    more: int = 0  # matches left out
    count: int = 1  # equations with this primitive, sizes and line
    static: bool = False  # a static argument's value is among the matches


MAX_MATCHES = 4


def summary(rows: list[SpecializedArg]) -> str:
    """The rows by state, as markdown: `1 static value (`n`), 1 dynamic leaf (`x`)`."""
    parts = []
    words = (
        ("static", "static value", "static values"),
        ("dynamic", "dynamic leaf", "dynamic leaves"),
    )
    for state, one, many in words:
        names = [r.arg for r in rows if r.state == state]
        if names:
            shown = ", ".join(f"`{n}`" for n in names[:3]) + (" …" if len(names) > 3 else "")
            parts.append(f"{len(names)} {one if len(names) == 1 else many} ({shown})")
    stuck = [r.arg for r in rows if r.state == "untraceable"]
    if stuck:
        parts.append(f"untraceable: {', '.join(f'`{n}`' for n in stuck)}")
    return ", ".join(parts)
