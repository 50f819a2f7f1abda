"""Padding: the bytes an array's layout adds to its elements' own (issue #59).

A TPU lays an array out in tiles over its minor-most dimensions: `f32[1024,8192]{1,0:
T(8,128)}` is stored as whole 8×128 tiles, the minor dimension (the `1` first in the
minor-to-major order `1,0`) rounded up to 128 lanes and the next one to 8 rows. So an
f32[65536,3] takes 128 lanes a row: 42.7× its elements' bytes, the classic cause of an
out-of-memory on TPU. Further tiles (`T(8,128)(2,1)`, bf16's) tile the first tile's
elements, rounded the same way. The CPU tiles nothing: padded bytes = logical bytes.

Layouts come from the module proto's shapes (`viz.memory.xla`) or from HLO text
(`parse_array`). No jax.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# bits per element, as jaxprs spell the dtypes (XLA stores a bool in a byte)
BITS = {
    "bool": 8,
    "i4": 4,
    "u4": 4,
    "i8": 8,
    "u8": 8,
    "f8_e5m2": 8,
    "f8_e4m3fn": 8,
    "f8_e4m3": 8,
    "i16": 16,
    "u16": 16,
    "f16": 16,
    "bf16": 16,
    "i32": 32,
    "u32": 32,
    "f32": 32,
    "i64": 64,
    "u64": 64,
    "f64": 64,
    "c64": 64,
    "c128": 128,
}
COMBINED = "*"  # a tile dimension that combines dimensions: it pads nothing


@dataclass(frozen=True)
class Layout:
    """An array's layout: the order of its dimensions in memory, minor first (empty:
    the default, the last dimension minor), its tiles, and its element size in bits
    where the layout sets one (0: the dtype's)."""

    minor_to_major: tuple[int, ...] = ()
    tiles: tuple[tuple[int, ...], ...] = ()
    element_bits: int = 0


UNTILED = Layout()


def logical_bytes(dtype: str, dims: tuple[int, ...] | list[int]) -> int:
    """The bytes of the array's elements, unpadded."""
    return math.ceil(math.prod(dims) * BITS.get(dtype, 0) / 8)


def padded_bytes(dtype: str, dims: tuple[int, ...] | list[int], layout: Layout) -> int:
    """The bytes the array takes laid out in `layout`'s tiles (its logical bytes where
    the layout has none)."""
    bits = layout.element_bits or BITS.get(dtype, 0)
    if not layout.tiles:
        return math.ceil(math.prod(dims) * bits / 8)
    order = layout.minor_to_major or tuple(reversed(range(len(dims))))
    physical = [dims[d] for d in reversed(order)]  # major first
    first = layout.tiles[0]
    elements = math.prod(_rounded(physical, first))
    for tile in layout.tiles[1:]:  # sub-tiles pad each first tile's elements
        tile_elements = math.prod(t for t in first if t > 0)
        elements = elements // tile_elements * math.prod(_rounded(list(first), tile))
    return math.ceil(elements * bits / 8)


def _rounded(dims: list[int], tile: tuple[int, ...]) -> list[int]:
    """`dims` with their minor-most ones rounded up to multiples of the tile's (a tile
    with more dimensions than the array sees size-1 dimensions before it)."""
    padded = [1] * max(0, len(tile) - len(dims)) + list(dims)
    for i, size in enumerate(tile, start=len(padded) - len(tile)):
        if size > 0:
            padded[i] = -(-padded[i] // size) * size
    return padded


def times_its_size(padded: int, logical: int) -> str:
    """How much larger its layout makes it, to a useful precision: `43× its size`,
    `1.3× its size`, `0.0064 % over its size` (a sliver); '' where it pads nothing."""
    said = padding_ratio(padded, logical)
    if "%" in said:
        return f"{said.removeprefix('+')} over its size"
    return f"{said} its size" if said else ""


def padding_ratio(padded: int, logical: int) -> str:
    """`43×`, `1.3×`, `+0.0064 %` (a sliver): padded over logical bytes; '' none."""
    if not logical or padded <= logical:
        return ""
    ratio = padded / logical
    if ratio >= 10:
        return f"{ratio:.0f}×"
    if ratio >= 1.05:
        return f"{ratio:.2g}×"
    return f"+{(ratio - 1) * 100:.2g} %"


@dataclass(frozen=True)
class PaddedDim:
    """A dimension of an array that its first tile rounds up."""

    axis: int  # the array's axis, as the user indexes its shape
    size: int  # its length
    padded: int  # rounded up to a multiple of the tile's
    lanes: bool  # along the tile's minor-most dimension (a TPU's 128 lanes), else its rows
    tile: tuple[int, ...]  # the first tile: (8, 128), (4, 128), (256,)


def padded_dims(dims: tuple[int, ...] | list[int], layout: Layout) -> list[PaddedDim]:
    """The array's dimensions its layout's first tile pads, minor-most (the lanes)
    first; [] where it tiles nothing or fills its tiles."""
    if not layout.tiles or not dims:
        return []
    order = layout.minor_to_major or tuple(reversed(range(len(dims))))
    tile = layout.tiles[0]
    found = []
    for k, size in enumerate(reversed(tile)):  # k = 0: the tile's minor-most dimension
        if k >= len(order) or size <= 0:
            continue
        axis = order[k]
        if dims[axis] % size:
            padded = -(-dims[axis] // size) * size
            found.append(PaddedDim(axis, dims[axis], padded, k == 0, tile))
    return found


def layout_text(layout: Layout) -> str:
    """The layout as HLO text prints it, `{0,1:T(4,128)}`; '' where it tiles nothing."""
    if not layout.tiles:
        return ""
    tiles = "".join(
        "(" + ",".join(COMBINED if d < 0 else str(d) for d in t) + ")" for t in layout.tiles
    )
    bits = f"E({layout.element_bits})" if layout.element_bits else ""
    return "{" + ",".join(map(str, layout.minor_to_major)) + f":T{tiles}{bits}" + "}"


def parse_layout(text: str) -> Layout:
    """A layout as HLO text prints it (`{0,1:T(4,128)}`, the braces optional)."""
    return _parse_layout(text.strip().removeprefix("{").removesuffix("}"))


_ARRAY = re.compile(r"(\w+)\[([\d,]*)\](?:\{([^}]*)\})?")
_TILES = re.compile(r"T((?:\([\d,*]+\))+)")
_ELEMENT_BITS = re.compile(r"E\((\d+)\)")


def parse_array(text: str) -> tuple[str, tuple[int, ...], Layout]:
    """An array type as HLO text prints it, `f32[65536,3]{1,0:T(8,128)}`: its dtype
    (as jaxprs spell it: `pred` is `bool`, `s32` is `i32`), dims and layout."""
    found = _ARRAY.fullmatch(text.strip())
    if found is None:
        raise ValueError(f"not an array type: {text!r}")
    dtype, dims, layout = found.groups()
    shape = tuple(int(d) for d in dims.split(",") if d)
    return _jaxpr_dtype(dtype), shape, _parse_layout(layout or "")


def _parse_layout(text: str) -> Layout:
    order, _, rest = text.partition(":")
    minor_to_major = tuple(int(d) for d in order.split(",") if d.strip())
    tiles: tuple[tuple[int, ...], ...] = ()
    found = _TILES.search(rest)
    if found:
        tiles = tuple(
            tuple(-1 if d == COMBINED else int(d) for d in tile.split(","))
            for tile in re.findall(r"\(([\d,*]+)\)", found.group(1))
        )
    bits = _ELEMENT_BITS.search(rest)
    return Layout(minor_to_major, tiles, int(bits.group(1)) if bits else 0)


def _jaxpr_dtype(hlo: str) -> str:
    if hlo == "pred":
        return "bool"
    return re.sub(r"^s(\d+)$", r"i\1", hlo)
