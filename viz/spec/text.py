"""The args-spec language as text: splitting, dtype names, an item parsed as Python,
size lists, resizing one dimension. No jax here (the app server uses it). The
sharding suffix is `viz.spec.partition`, an item written as the Python a user would
write `viz.spec.expression`; evaluating a spec into argument values is
`viz.spec.values`.
"""

from __future__ import annotations

import ast
import keyword
import re
import warnings
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from viz.source import parse_python

DTYPES: dict[str, np.dtype] = {
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32),
    "u64": np.dtype(np.uint64),
    "bool": np.dtype(np.bool_),
    "c64": np.dtype(np.complex64),
    "c128": np.dtype(np.complex128),
}
NARROWED = {"f64": "f32", "i64": "i32", "u64": "u32", "c128": "c64"}  # what x64 off makes them
X64_DTYPES = frozenset(NARROWED)  # the dtypes that need x64 mode
_SHORT_NAMES = {dtype: name for name, dtype in DTYPES.items()}


def dtype_name(dtype: Any) -> str:
    """numpy dtype → jaxpr spelling (float32 → f32, key<fry> stays as is)."""
    try:
        name = _SHORT_NAMES.get(np.dtype(dtype))
    except TypeError:  # extended dtypes such as PRNG keys
        name = None
    return str(dtype) if name is None else name  # (numpy's str of a dtype is slow)


_DTYPE_LIKE = re.compile(r"^(?:bf|f|i|u|c)\d+$")
_ALIASES = {
    "float16": "f16",
    "half": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float": "f32",
    "float64": "f64",
    "double": "f64",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "bool_": "bool",
    "complex64": "c64",
    "complex": "c64",
    "complex128": "c128",
    "fp16": "f16",  # ML's spellings
    "fp32": "f32",
    "fp64": "f64",
}
_MAX_SHOWN = 60
_OPENERS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = frozenset(")]}")


class SpecError(ValueError):
    """A spec that cannot be parsed; ``index`` is the 1-based item number (None: whole spec)."""

    def __init__(self, reason: str, index: int | None = None, item: str | None = None) -> None:
        self.reason = reason
        self.index = index
        self.item = item
        super().__init__(reason, index, item)

    def __str__(self) -> str:
        if self.index is None:
            return self.reason
        return f"item {self.index} '{_shorten(self.item or '')}': {self.reason}"

    def named(self, params: list[str]) -> str:
        """The message with the item's parameter, as the function names it (`params`,
        in order): "x, item 1 'q32[4]': …", where "item 1" alone sent the reader
        counting the spec's commas."""
        if self.index is None or self.index > len(params):
            return str(self)
        return f"{params[self.index - 1]}, {self}"

    def __reduce__(self) -> tuple[type[SpecError], tuple[str, int | None, str | None]]:
        return (SpecError, (self.reason, self.index, self.item))


def _shorten(text: str) -> str:
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


# --------------------------------------------------------------------------- splitting


@dataclass(frozen=True)
class SpecItem:
    """One top-level item of a spec, as the splitter found it."""

    index: int  # 1-based
    text: str  # stripped source of the item
    masked: str  # same as text with string contents blanked out
    problem: str | None  # a problem found while splitting


def _string_end(text: str, start: int) -> int | None:
    """Index just past the string literal opening at ``start``, or None if unterminated."""
    quote = text[start] * 3 if text.startswith(text[start] * 3, start) else text[start]
    i = start + len(quote)
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text.startswith(quote, i):
            return i + len(quote)
        else:
            i += 1
    return None


class _Splitter:
    """Splits a spec at top-level commas, tracking brackets and string literals."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.masked = list(text)
        self.stack: list[str] = []
        self.spans: list[tuple[int, int, str | None]] = []
        self.start = 0
        self.problem: str | None = None

    def run(self) -> list[SpecItem]:
        i = 0
        while i < len(self.text):
            i = self._step(i)
        if self.stack:
            self._note("unbalanced brackets")
        self.spans.append((self.start, len(self.text), self.problem))
        return self._items()

    def _note(self, problem: str) -> None:
        self.problem = self.problem or problem

    def _step(self, i: int) -> int:
        ch = self.text[i]
        if ch in "'\"":
            return self._skip_string(i)
        if ch in _OPENERS:
            self.stack.append(ch)
        elif ch in _CLOSERS:
            self._close(ch)
        elif ch == "," and not self.stack:
            self.spans.append((self.start, i, self.problem))
            self.start, self.problem = i + 1, None
        return i + 1

    def _skip_string(self, i: int) -> int:
        end = _string_end(self.text, i)
        if end is None:
            self._note("unterminated string")
            end = len(self.text)
        for j in range(i + 1, end - 1):
            self.masked[j] = " "
        return end

    def _close(self, ch: str) -> None:
        if not self.stack:
            self._note(f"unbalanced brackets (unexpected {ch!r})")
            return
        opener = self.stack.pop()
        if _OPENERS[opener] != ch:
            self._note(f"unbalanced brackets ({opener!r} closed by {ch!r})")

    def _items(self) -> list[SpecItem]:
        masked = "".join(self.masked)
        if len(self.spans) > 1 and not self.text[self.spans[-1][0] :].strip():
            self.spans.pop()  # one trailing comma is allowed, as in a Python call
        return [_make_item(n, self.text, masked, s) for n, s in enumerate(self.spans, 1)]


def _make_item(index: int, text: str, masked: str, span: tuple[int, int, str | None]) -> SpecItem:
    start, end, problem = span
    raw = text[start:end]
    lead = len(raw) - len(raw.lstrip())
    stripped = raw.strip()
    body = masked[start + lead : start + lead + len(stripped)]
    return SpecItem(index, stripped, body, problem or (None if stripped else "empty item"))


def split_items(text: str) -> list[SpecItem]:
    """The spec's top-level items (never raises: a problem is noted on its item)."""
    if not text.strip():
        return []
    return _Splitter(text).run()


def split_spec(text: str) -> list[str]:
    """The spec's top-level items as text, one per argument (never raises)."""
    return [item.text for item in split_items(text)]


# --------------------------------------------------------------------------- item parsing


class ItemError(Exception):
    """An item-level problem; becomes a SpecError naming the item."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_EMPTY_SUBSCRIPT = re.compile(r"\b([A-Za-z_]\w*)(\s*)\[\s*\]")
_SUBSCRIPT_START = re.compile(r"\b([A-Za-z_]\w*)\s*\[")
_KEYWORD_ARG = re.compile(r"^[A-Za-z_]\w*\s*=(?!=)")


def rewrite_empty_subscripts(text: str, masked: str) -> str:
    """``i32[]`` -> ``i32[()]`` outside string literals, so that Python can parse it."""
    out: list[str] = []
    last = 0
    for m in _EMPTY_SUBSCRIPT.finditer(masked):
        if keyword.iskeyword(m.group(1)):
            continue
        out += [text[last : m.end(2)], "[()]"]
        last = m.end()
    return "".join(out) + text[last:]


def looks_like_dtype(name: str) -> bool:
    """Whether `name` is, or looks like a misspelling of, a dtype (`f32`, `float32`, `f8`)."""
    return name.lower() in DTYPES or name in _ALIASES or bool(_DTYPE_LIKE.match(name))


def _bracket_body(masked: str, open_at: int) -> str:
    depth = 0
    for i in range(open_at, len(masked)):
        depth += (masked[i] in _OPENERS) - (masked[i] in _CLOSERS)
        if depth == 0:
            return masked[open_at + 1 : i]
    return masked[open_at + 1 :]


def _top_level_parts(body: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        depth += (ch in _OPENERS) - (ch in _CLOSERS)
        if ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    return [*parts, body[start:]]


def _has_empty_dimension(masked: str) -> bool:
    for m in _SUBSCRIPT_START.finditer(masked):
        if looks_like_dtype(m.group(1)):
            parts = _top_level_parts(_bracket_body(masked, m.end() - 1))
            if any(not p.strip() for p in parts[:-1]):
                return True
    return False


def _syntax_reason(err: SyntaxError, item: SpecItem) -> str:
    if _has_empty_dimension(item.masked):
        return "empty dimension"
    if _KEYWORD_ARG.match(item.masked):
        return "keyword arguments are not supported: give every argument by position"
    msg = re.sub(r"\s*\(detected at line \d+\)", "", err.msg or "invalid syntax")
    return msg if "syntax" in msg.lower() else f"syntax error: {msg}"


def parse_item_ast(src: str, item: SpecItem) -> ast.Expression:
    """`src` (the item's text, rewritten for Python) as an expression; ItemError saying
    what is wrong with the item when it is not Python."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return parse_python(src, "eval")  # type: ignore[return-value]
    except SyntaxError as err:
        raise ItemError(_syntax_reason(err, item)) from None
    except ValueError as err:  # e.g. null bytes
        raise ItemError(f"syntax error: {err}") from None


def unknown_dtype_message(name: str) -> str:
    """Why `name[...]` is not an array item, with the dtype it probably meant."""
    guess = _ALIASES.get(name) or (name.lower() if name.lower() in DTYPES else None)
    if guess:
        return f"unknown dtype '{name}' (did you mean {guess}?)"
    return f"unknown dtype '{name}' (known: {', '.join(DTYPES)})"


def unknown_name_message(name: str) -> str:
    """Why `name[3]` is no item when `name` is neither a dtype nor defined: it is read
    as a dtype first ('q32[4]' said only that name 'q32' is not defined)."""
    return f"'{name}' is neither a dtype ({', '.join(DTYPES)}) nor a name your code defines"


def describe_error(err: BaseException) -> str:
    """`Type: message` of an exception, in one short line."""
    msg = str(err)
    msg = msg if len(msg) <= 200 else msg[:197] + "..."
    return f"{type(err).__name__}: {msg}" if msg else type(err).__name__


_ARRAY_ITEM = re.compile(r"^\s*([a-z]+\d*)\s*\[\s*([\d\s,]*)\]\s*$")


def array_item_parts(item: str) -> tuple[str, tuple[int, ...]] | None:
    """('f32', (8, 128)) for a plain array item like 'f32[8,128]'; None otherwise.
    Text only (no jax), for controls that edit one dimension or the dtype."""
    found = _ARRAY_ITEM.match(item)
    if not found or found.group(1) not in DTYPES:
        return None
    dims = [d.strip() for d in found.group(2).split(",") if d.strip()]
    return found.group(1), tuple(int(d) for d in dims)


def parse_sizes(text: str, what: str = "size", minimum: int = 1) -> list[int]:
    """Whole numbers separated by commas, spaces or newlines ("1, 3, 8 17"): sizes,
    shapes and bucket lists everywhere. [] for blank text; SpecError naming the first
    token that is not a whole number at least `minimum`."""
    sizes = []
    for token in re.split(r"[,\s]+", text.strip()):
        if not token:
            continue
        if not re.fullmatch(r"[+-]?[0-9]+", token):
            raise SpecError(f"{what} {token!r} is not a whole number (write e.g. 1, 8, 32)")
        if int(token) < minimum:
            raise SpecError(f"{what} {token!r} must be at least {minimum}")
        sizes.append(int(token))
    return sizes


def array_item(dtype: str, shape: tuple[int, ...]) -> str:
    """'f32[8,128]': the spec item of an array."""
    return f"{dtype}[{','.join(str(d) for d in shape)}]"


def resize(args: str, names: list[str], param: str, axis: int, size: int) -> str:
    """The spec with one dimension of one array argument replaced."""
    items = split_spec(args)
    index = names.index(param)
    parts = array_item_parts(items[index])
    if parts is None:
        raise ValueError(f"`{param}` is not an array argument ({items[index]})")
    dtype, shape = parts
    items[index] = array_item(dtype, (*shape[:axis], size, *shape[axis + 1 :]))
    return ", ".join(items)
