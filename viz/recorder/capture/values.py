"""A value the jit cache compares, in words: a static argument, one of equinox's static
leaves, a field of a pytree node's static part.

The cache compares such values by equality, and a function, or an object whose class
keeps `object.__eq__`, is equal only to itself: two lambdas from the same line are two
keys. So a value is read twice over. `text` is for people: a function by its qualified
name and line (function `solve.<locals>.<lambda>` (model.py:4)), a dataclass by its type
and fields, anything else by its repr, never with an address. `key` is for comparison:
the text with a token for each object compared by identity (a counter, held weakly, so a
new object never takes a dead one's token the way `id` may), and a digest of the whole
text when the text was shortened. Never raises.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import itertools
import os
import re
import threading
import types
import weakref
from dataclasses import dataclass
from typing import Any

from viz.recorder.model import short_path

# characters of a value's text: the reason that compares two cuts them to its width
# around where they differ (`viz.cache.signature.around_difference`)
MAX_TEXT = 400
ANGLED_REPR = 40  # a longer `<…>` repr of an identity-compared object: 'a T object'
MAX_ITEMS = 6  # items of a container, fields of an object, shown
MAX_DEPTH = 3  # nesting read before '…'
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+|0x[0-9a-fA-F]{6,}")  # a repr's id(): never shown

NEW = "a new "  # how a reason's `after` starts when only the object's identity changed


@dataclass(frozen=True)
class Words:
    text: str  # 'function `solve.<locals>.<lambda>` (model.py:4)', "Tsit5()", '0.5'
    key: str  # equal keys: the cache sees equal values (text, identity tokens, digest)


def words(value: Any, cwd: str) -> Words:
    """The value in words (a function whole, with its place; anything else at most
    MAX_TEXT characters) and its key."""
    try:
        text, key = _read(value, cwd, MAX_DEPTH)
    except Exception:  # a user object's repr or attributes may do anything
        text = key = f"a {type(value).__qualname__} object"
        key += _token(value)
    if len(text) > MAX_TEXT and not _is_function(value):
        digest = hashlib.sha1(key.encode(errors="replace")).hexdigest()[:12]
        return Words(text[: MAX_TEXT - 1] + "…", digest)
    return Words(text, key)


def location(fun: Any, cwd: str) -> str:
    """'model.py:4' (or 'diffrax/_integrate.py:120'), '' without Python source."""
    code = getattr(fun, "__code__", None)
    if code is None:
        return ""
    return short_path(f"{os.path.abspath(code.co_filename)}:{code.co_firstlineno}", cwd)


def _read(value: Any, cwd: str, depth: int) -> tuple[str, str]:
    """(text, key) of one value, `depth` levels of containers and fields deep."""
    if value is None or isinstance(value, bool | int | float | complex | str | bytes):
        text = repr(value)
        return text, text
    if isinstance(value, enum.Enum):
        text = f"{type(value).__name__}.{value.name}"
        return text, text
    if _is_function(value):
        return _function(value, cwd, depth)
    if depth <= 0:
        return "…", "…" + _identity_token(value)
    if isinstance(value, tuple | list | frozenset | set):
        return _items(value, cwd, depth)
    if isinstance(value, dict):
        return _mapping(value, cwd, depth)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _fields(value, cwd, depth)
    text = ADDRESS.sub("", repr(value))
    if type(value).__eq__ is object.__eq__:  # compared by identity
        if text.startswith("<") and len(text) > ANGLED_REPR:
            text = f"a {type(value).__qualname__} object"
        return text, text + _token(value)
    return text, text


def _is_function(value: Any) -> bool:
    return isinstance(
        value,
        types.FunctionType
        | types.BuiltinFunctionType
        | types.MethodType
        | functools.partial
        | type,
    ) or (  # a wrapper that compares by identity, such as a jitted function
        callable(value)
        and hasattr(value, "__wrapped__")
        and type(value).__eq__ is object.__eq__
        and not dataclasses.is_dataclass(value)
    )


def _function(value: Any, cwd: str, depth: int) -> tuple[str, str]:
    if isinstance(value, type):
        name = f"class {value.__qualname__}"
        return name, name + _token(value)
    if isinstance(value, functools.partial):
        inner, inner_key = _read(value.func, cwd, depth - 1)
        bound = [_read(a, cwd, depth - 1) for a in value.args]
        bound += [(f"{k}={t}", f"{k}={key}") for k, (t, key) in _kw(value.keywords, cwd, depth)]
        text = f"partial({', '.join([inner, *(t for t, _ in bound)])})"
        return text, f"partial({', '.join([inner_key, *(k for _, k in bound)])})"
    if isinstance(value, types.MethodType):  # `Cls.from_k`, bound to its class or object
        inner, inner_key = _function(value.__func__, cwd, depth)
        return inner.replace("function", "method", 1), inner_key + _token(value.__self__)
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", "?")
    where = location(getattr(value, "__wrapped__", value), cwd)
    text = f"function `{name}`" + (f" ({where})" if where else "")
    return text, text + _token(value)


def _kw(mapping: dict, cwd: str, depth: int) -> list[tuple[str, tuple[str, str]]]:
    return [(str(k), _read(v, cwd, depth - 1)) for k, v in mapping.items()]


def _items(value: Any, cwd: str, depth: int) -> tuple[str, str]:
    items = list(value)
    read = [_read(v, cwd, depth - 1) for v in items[:MAX_ITEMS]]
    more = ", …" if len(items) > MAX_ITEMS else ""
    opening, closing = {tuple: "()", list: "[]"}.get(type(value), ("{", "}"))
    if isinstance(value, tuple) and len(items) == 1:
        more = ","
    text = opening + ", ".join(t for t, _ in read) + more + closing
    key = opening + ", ".join(k for _, k in read) + more + closing
    if len(items) > MAX_ITEMS:  # the shown items are not the whole key
        key += _digest(repr(items))
    return text, key


def _mapping(value: dict, cwd: str, depth: int) -> tuple[str, str]:
    read = _kw(dict(itertools.islice(value.items(), MAX_ITEMS)), cwd, depth)
    more = ", …" if len(value) > MAX_ITEMS else ""
    text = "{" + ", ".join(f"{k!r}: {t}" for k, (t, _) in read) + more + "}"
    key = "{" + ", ".join(f"{k!r}: {k2}" for k, (_, k2) in read) + more + "}"
    return text, key + (_digest(repr(value)) if more else "")


def _fields(value: Any, cwd: str, depth: int) -> tuple[str, str]:
    """`Type(field=…, …)`: a dataclass (an equinox Module, a flax struct) by its fields."""
    fields = dataclasses.fields(value)
    read = [(f.name, _read(getattr(value, f.name, None), cwd, depth - 1)) for f in fields]
    shown = [item for item, f in zip(read, fields, strict=True) if f.repr][:MAX_ITEMS]
    more = ", …" if sum(f.repr for f in fields) > MAX_ITEMS else ""
    name = type(value).__qualname__
    text = f"{name}({', '.join(f'{n}={t}' for n, (t, _) in shown)}{more})"
    key = f"{name}({', '.join(f'{n}={k}' for n, (_, k) in read)})"
    return text, key + _identity_token(value)


def _identity_token(value: Any) -> str:
    """A token when the value's class compares by identity, else ''."""
    return _token(value) if type(value).__eq__ is object.__eq__ else ""


def _digest(text: str) -> str:
    return "#" + hashlib.sha1(text.encode(errors="replace")).hexdigest()[:12]


# -- identity tokens ---------------------------------------------------------------------
_tokens: dict[int, tuple[Any, int]] = {}  # id → (weak reference, token)
_counter = itertools.count(1)
_lock = threading.Lock()


def _token(value: Any) -> str:
    """'#17': the same for the same live object, never reused for another."""
    key = id(value)
    with _lock:
        held = _tokens.get(key)
        if held is not None and held[0]() is value:
            return f"#{held[1]}"
        number = next(_counter)
        try:
            ref = weakref.ref(value, functools.partial(_forget, key))
        except TypeError:  # not weakly referable: its id is the best there is
            return f"#id{key}"
        _tokens[key] = (ref, number)
        return f"#{number}"


def token(value: Any) -> str:
    """The value's identity token ('#17'): for a reader of values by content
    (`viz.recorder.capture.inputs`) where content cannot be read."""
    return _token(value)


def _forget(key: int, _: Any) -> None:
    _tokens.pop(key, None)
