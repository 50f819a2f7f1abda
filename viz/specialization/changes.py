"""What would recompile: the changes to try on one argument leaf, the args spec with
that one change, and what the real jit cache said. Pure text on the report's rows
(no jax): the app builds the specs and asks the cache lab's worker to call them
(`CacheCalls`: the analysed spec, then the changed one, on an emptied cache).

The changes, each one field of jit's cache key:
- `shape`: the next size of each dimension (`f32[16]` → `f32[17]`);
- `dtype`: another dtype of the same kind (`f32` ↔ `bf16`, `i32` → `i16`);
- `weak_type`: a Python scalar in place of a 0-d array (`f32[]` → `1.0`), or a 0-d
  array in place of a Python scalar;
- `value`: another Python scalar of the same type (a dynamic value: expect a hit);
- `static_value`: another value of a static int, float or bool (`16` → `17`).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from viz.cache.events import CacheEvent, CallEvent, FailedEvent
from viz.cache.signature import reason_fix, reason_text
from viz.plain import Plain
from viz.spec.text import array_item, array_item_parts, split_spec
from viz.specialization.model import SpecializedArg

# Another dtype of the same kind, never a 64-bit one (that would switch x64 on too).
OTHER_DTYPE = {
    "f32": "bf16",
    "bf16": "f32",
    "f16": "f32",
    "f64": "f32",
    "i32": "i16",
    "i16": "i32",
    "i8": "i32",
    "i64": "i32",
    "u32": "u8",
    "u8": "u32",
    "u16": "u32",
    "u64": "u32",
    "c128": "c64",
}
SCALAR_OF = {"f": "1.0", "b": "1.0", "i": "1", "u": "1", "c": "1j"}  # by the dtype's letter


@dataclass(frozen=True)
class Change(Plain):
    """One change of one leaf: what it tests (`kind`), its label, and the leaf's new
    spec item (or the static argument's new value)."""

    kind: str  # shape | dtype | weak_type | value | static_value
    label: str
    item: str


def changes(row: SpecializedArg) -> list[Change]:
    """The changes worth trying on a row ([] for an untraceable row, a key, or a leaf
    that cannot be written in the spec language)."""
    if row.state == "static":
        return _static_changes(row)
    if row.state != "dynamic" or not row.item:
        return []
    parts = array_item_parts(row.item)
    if parts is not None:
        return _array_changes(row, *parts)
    return _scalar_changes(row)


def _array_changes(row: SpecializedArg, dtype: str, shape: tuple[int, ...]) -> list[Change]:
    found = []
    for axis, size in enumerate(shape):
        bigger = (*shape[:axis], size + 1, *shape[axis + 1 :])
        found.append(Change("shape", f"dim {axis}: {size} → {size + 1}", array_item(dtype, bigger)))
    if dtype in OTHER_DTYPE:
        other = OTHER_DTYPE[dtype]
        found.append(Change("dtype", f"dtype {dtype} → {other}", array_item(other, shape)))
    if not shape and dtype[0] in SCALAR_OF:
        scalar = SCALAR_OF[dtype[0]]
        found.append(Change("weak_type", f"Python scalar {scalar} (weak type)", scalar))
    return found


def _scalar_changes(row: SpecializedArg) -> list[Change]:
    """A Python scalar leaf (weakly typed): another value, or a 0-d array instead."""
    value = _literal(row.item)
    if type(value) not in (int, float, complex) or row.dtype is None:
        return []
    other = value + 1 if type(value) is int else (value * 2 or 1.0)
    return [
        Change("value", f"another value: {value!r} → {other!r}", repr(other)),
        Change("weak_type", f"a {row.dtype}[] array (not weak)", f"{row.dtype}[]"),
    ]


def _static_changes(row: SpecializedArg) -> list[Change]:
    value = _literal(row.item)
    if isinstance(value, bool):
        other: Any = not value
    elif isinstance(value, int | float):
        other = value + 1
    else:
        return []
    return [Change("static_value", f"another value: {value!r} → {other!r}", repr(other))]


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def variant_spec(spec: str, rows: Sequence[SpecializedArg], index: int, change: Change) -> str:
    """`spec` with the leaf of `rows[index]` replaced by `change.item`: the leaf's
    parameter is rewritten from its rows (`tree` and every leaf's `item`), the other
    parameters stay as written."""
    row = rows[index]
    items = split_spec(spec)
    if row.state == "static" or not rows[_first(rows, index)].tree:
        items[row.position] = change.item
        return ", ".join(items)
    first = _first(rows, index)
    siblings = [r for r in rows[first:] if r.position == row.position and r.state != "static"]
    leaves = [change.item if r is row else r.item for r in siblings]
    tree = rows[first].tree
    written = zip(leaves, tree[1:], strict=True)  # a tree has one text more than leaves
    items[row.position] = tree[0] + "".join(leaf + text for leaf, text in written)
    return ", ".join(items)


def _first(rows: Sequence[SpecializedArg], index: int) -> int:
    """The index of the first row of `rows[index]`'s parameter."""
    position = rows[index].position
    while index > 0 and rows[index - 1].position == position:
        index -= 1
    return index


# -- what the cache said ------------------------------------------------------------
@dataclass
class Outcome(Plain):
    """The real cache's answer to one change, read from the cache lab's two events
    (the analysed spec, then the changed one, on an emptied cache)."""

    change: Change
    arg: str
    spec: str
    verdict: str  # hit | miss | failed (the changed call failed) | error (no answer)
    reasons: list[str] = field(default_factory=list)  # why it missed, field by field
    fixes: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def recompiles(self) -> bool | None:
        """True for a miss (or a failed call, which traced again), False for a hit."""
        return {"hit": False, "miss": True, "failed": True}.get(self.verdict)


def outcome(
    row: SpecializedArg, change: Change, spec: str, events: Sequence[CacheEvent]
) -> Outcome:
    """Read the answer: the second event is the changed call."""
    answer = Outcome(change, row.arg, spec, "error")
    if len(events) != 2:
        answer.note = "the cache lab did not make both calls"
        return answer
    base, changed = events
    if isinstance(base, FailedEvent):
        answer.note = f"the analysed call failed in the cache lab: {base.error.message}"
        return answer
    if isinstance(changed, FailedEvent):
        return _failed(answer, changed)
    if not isinstance(changed, CallEvent):
        answer.note = "the call was routed to a precompiled bucket"
        return answer
    answer.verdict = "hit" if changed.hit else "miss"
    answer.reasons = [reason_text(r) for r in changed.reasons]
    answer.fixes = list(dict.fromkeys(f for r in changed.reasons if (f := reason_fix(r))))
    answer.note = "; ".join(changed.notes)
    return answer


def _failed(answer: Outcome, event: FailedEvent) -> Outcome:
    """A changed call that raised: in trace, lower or compile jit had missed (a hit
    runs the cached executable); a spec that did not parse made no call at all."""
    error = event.error
    if error.stage in ("trace", "lower", "compile"):
        answer.verdict = "failed"
        answer.note = f"{error.stage} failed: {error.message}"
    else:
        answer.note = f"the call was not made: {error.message}"
    return answer
