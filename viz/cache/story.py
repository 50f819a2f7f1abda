"""The cache lab's one-click story: four calls of the user's own function that show the
jit cache at work. The first compiles; the second, the same call, hits; the third
changes one thing the cache is keyed on (a batch size, a 0-d array passed as a Python
scalar, a static value) and compiles again, for that reason; the fourth is the first
again, and hits the entry the first made. Spec text only (no jax): the worker calls."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from viz.program import join_spec
from viz.spec import array_item, array_item_parts


@dataclass(frozen=True)
class Story:
    calls: list[str]  # args specs, in order
    change: str  # what the third call changes, in words


def cache_story(rows: list[tuple[str, str]], static: Sequence[str]) -> Story | None:
    """The story on `rows` ((parameter, spec item) of the call to start from); None when
    no argument has something to change (no array, no whole-number static value)."""
    items = [item for _, item in rows]
    for change in (_batch_size, _python_scalar, _static_value):  # the most familiar first
        for i, (name, item) in enumerate(rows):
            found = change(item, name in static)  # (the new item, what changed in words)
            if found:
                changed, words = found
                first = join_spec(items)
                other = join_spec([*items[:i], changed, *items[i + 1 :]])
                return Story([first, first, other, first], f"`{name}`: {words}")
    return None


def _batch_size(item: str, static: bool) -> tuple[str, str] | None:
    """Half the leading dimension (2 for 1): a new shape."""
    parts = array_item_parts(item)
    if static or parts is None or not parts[1]:
        return None
    dtype, (size, *rest) = parts
    new = size // 2 if size > 1 else 2
    return array_item(dtype, (new, *rest)), f"batch size {size} → {new}"


def _python_scalar(item: str, static: bool) -> tuple[str, str] | None:
    """A 0-d array passed as a Python number: weakly typed, so jit keys it apart."""
    parts = array_item_parts(item)
    if static or parts is None or parts[1]:
        return None
    dtype = parts[0]
    number = "True" if dtype == "bool" else ("1.0" if dtype.startswith(("f", "bf")) else "1")
    return number, f"{item} → the Python scalar {number} (weakly typed)"


def _static_value(item: str, static: bool) -> tuple[str, str] | None:
    """A whole-number static value, one more: jit compiles per static value."""
    if not static or not re.fullmatch(r"-?[0-9]+", item.strip()):
        return None
    value = int(item)
    return str(value + 1), f"static value {value} → {value + 1}"
