"""Numbers as people read them: the one home for seconds, bytes, SI units and counts
(the app, the CLI, the diff, the charts and the HTML export all format through here),
and the cells of every table (`table`). Stdlib only. `None` reads as MISSING; `signed`
writes + or − before a difference."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

MISSING = "–"

_SECONDS = (("s", 1.0, 2), ("ms", 1e-3, 1), ("µs", 1e-6, 0))  # unit, scale, decimals
_BYTES = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
_SI = (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))


def _sign(value: float, signed: bool) -> str:
    if value < 0:
        return "−"
    return "+" if signed and value > 0 else ""


def seconds(value: float | None, signed: bool = False) -> str:
    """1.23 s, 45.6 ms, 789 µs."""
    if value is None:
        return MISSING
    v = abs(value)
    unit, scale, decimals = next((u for u in _SECONDS if v >= u[1]), _SECONDS[-1])
    return f"{_sign(value, signed)}{v / scale:.{decimals}f} {unit}"


def nbytes(value: float | None, signed: bool = False) -> str:
    """3.0 MiB, 512 B (binary units)."""
    return _scaled(value, signed, _BYTES, 1, " B")


def si(value: float | None, signed: bool = False) -> str:
    """FLOPs and the like: 1.97 T, 1.23 G, 45.60 M, 789."""
    return _scaled(value, signed, _SI, 2, "")


def _scaled(
    value: float | None,
    signed: bool,
    units: tuple[tuple[str, float], ...],
    decimals: int,
    base_unit: str,
) -> str:
    """`value` in the largest unit it reaches; below all of them, whole `base_unit`s."""
    if value is None:
        return MISSING
    v = abs(value)
    unit, scale = next(((u, k) for u, k in units if v >= k), (None, 1.0))
    shown = f"{v / scale:.{decimals}f} {unit}" if unit else f"{v:.0f}{base_unit}"
    return f"{_sign(value, signed)}{shown}"


def count(value: float | None, signed: bool = False) -> str:
    """A count with thousands separators; a fraction keeps four significant digits."""
    if value is None:
        return MISSING
    v = abs(value)
    shown = f"{v:.4g}" if isinstance(v, float) and not v.is_integer() else f"{int(v):,}"
    return f"{_sign(value, signed)}{shown}"


def plural(n: float, word: str, words: str | None = None) -> str:
    """A count and its noun, in the singular for exactly one: "1 line", "2 lines",
    "1,024 kernels"; `words`: an irregular plural ("1 body", "3 bodies")."""
    return f"{count(n)} {word if n == 1 else words or word + 's'}"


def a_or_an(word: str) -> str:
    """'an equinox', 'a custom_jvp', 'an f32[]', 'an MLP': the article as the word is read
    aloud (a dtype's letter by its name: 'eff 32')."""
    first = word[:1].lower()
    spelled = word[1:2].isdigit() or word[:2].isupper()  # f32, x64, MLP: letter by letter
    vowel = first in "aeio" or (spelled and first in "aefhilmnorsx")
    return f"{'an' if vowel else 'a'} {word}"


def listed(items: Iterable[str], limit: int, sep: str = ", ") -> str:
    """The first `limit` of `items` joined by `sep`, and how many more were left out:
    "a, b, c and 4 more" (every list that cuts says so)."""
    items = list(items)
    more = len(items) - limit
    return sep.join(items[:limit]) + (f" and {more} more" if more > 0 else "")


def natural(text: str) -> tuple[tuple[int, object], ...]:
    """A sort key that orders the numbers inside text as numbers: `layers[2]` before
    `layers[10]` (text order puts `[10]` and `[11]` before `[2]`)."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text)
    )


def cell(value: object) -> object:
    """A table cell as data: an absent value (None, NaN, blank text, MISSING itself) is
    None, which every table shows as MISSING (the app's through Streamlit's placeholder,
    HTML through `cell_text`); a whole float (a count that went through a float) is an
    int; anything else stays as it is, a number a number."""
    if isinstance(value, str) and value.strip() in ("", MISSING):  # seconds(None) too
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if value.is_integer():
            return int(value)
    return value


def cell_text(value: object) -> str:
    """A cell as text (an HTML table's)."""
    shown = cell(value)
    return MISSING if shown is None else str(shown)


def table(rows: Iterable[Mapping[str, object]]) -> list[dict[str, object]]:
    """Rows ready to show: every cell through `cell`."""
    return [{name: cell(value) for name, value in row.items()} for row in rows]
