"""Parse the args-spec language into pytrees of argument specs.

A spec is a comma-separated list with one item per positional argument
(see "Args spec language" in DESIGN.md)::

    f32[32,784], {'w': f32[3,3], 'b': f32[3]}, 3, key, params

Items:

- ``f32[8,128]``, ``bf16[4]``, ``i32[]`` (scalar), ``bool[3]``, ``u8[2,2]``: an array
  (:class:`ArraySpec`). Dtypes: f16 bf16 f32 f64 i8 i16 i32 i64 u8 u16 u32 u64 bool c64
  c128. A dimension is an int or any expression that evaluates to an int in the
  namespace (``f32[batch, 128]``).
- ``key`` (or ``key(7)``): a PRNG key, ``jax.random.key(seed)`` (:class:`KeySpec`), unless
  the namespace itself defines ``key``.
- dicts, lists and tuples of items, nested arbitrarily: real containers in the result.
- anything else (literals ``5``, ``-2.0``, ``True``, ``'relu'``, ``None``, and expressions
  such as ``params`` or ``jnp.ones((3, 3))``) is evaluated with the namespace as globals
  (:class:`ValueSpec`). ``jax``, ``jnp`` and ``np`` are available unless the namespace
  binds those names itself. Evaluation never writes into the caller's dict.

Contract:

- :func:`parse_spec` returns one pytree per argument, made of dict/list/tuple containers
  whose leaves are ArraySpec / KeySpec / ValueSpec. For *any* input string it either
  returns or raises :class:`SpecError`, whose message names the item:
  ``item 2 'f32[3,,4]': empty dimension``.
- Parsing and :func:`abstract_args` never allocate array data, whatever the shapes;
  :func:`input_bytes` says how much :func:`concrete_args` would allocate.
- :func:`format_spec` is the inverse of :func:`parse_spec` for specs of arrays, keys,
  literals and containers.

64-bit dtypes: JAX truncates f64/i64/u64/c128 to their 32-bit versions unless x64 is
enabled. :meth:`ArraySpec.abstract` and :meth:`ArraySpec.concrete` follow the x64 setting
in force *when they are called*, so a caller for which :func:`uses_x64` is true wraps
abstraction, concretization and tracing in ``with jax.enable_x64(True): ...``.
"""

from __future__ import annotations

import ast
import importlib
import keyword
import math
import operator
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np


class _LazyModule:
    """Imports a module on first use: the app server splits specs (`split_spec`)
    without ever importing jax; everything else here runs in the worker."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


jax: Any = _LazyModule("jax")
jnp: Any = _LazyModule("jax.numpy")

__all__ = [
    "DTYPES",
    "ArraySpec",
    "KeySpec",
    "SpecError",
    "ValueSpec",
    "abstract_args",
    "concrete_args",
    "format_spec",
    "input_bytes",
    "parse_spec",
    "uses_x64",
]

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
_X64_DTYPES = frozenset({"f64", "i64", "u64", "c128"})
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

    def __reduce__(self) -> tuple[type[SpecError], tuple[str, int | None, str | None]]:
        return (SpecError, (self.reason, self.index, self.item))


def _shorten(text: str) -> str:
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


# --------------------------------------------------------------------------- leaf specs


@dataclass(frozen=True)
class ArraySpec:
    """An array argument of a given dtype (short name, e.g. 'f32') and shape."""

    dtype: str
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(_unknown_dtype(str(self.dtype)))
        shape = tuple(operator.index(d) for d in self.shape)
        if any(d < 0 for d in shape):
            raise ValueError(f"negative dimension in shape {shape}")
        object.__setattr__(self, "shape", shape)

    @property
    def np_dtype(self) -> np.dtype:
        """The dtype as written (64-bit stays 64-bit)."""
        return DTYPES[self.dtype]

    @property
    def nbytes(self) -> int:
        """Bytes of the array as written (an upper bound when x64 is off)."""
        return math.prod(self.shape) * self.np_dtype.itemsize

    def abstract(self) -> jax.ShapeDtypeStruct:
        """The ShapeDtypeStruct JAX would see (64-bit only under ``jax.enable_x64``)."""
        return jax.ShapeDtypeStruct(self.shape, jax.dtypes.canonicalize_dtype(self.np_dtype))

    def concrete(self, rng: np.random.Generator) -> jax.Array:
        """Deterministic data: normal floats/complex, small ints, random bools."""
        dtype = jax.dtypes.canonicalize_dtype(self.np_dtype)
        return jnp.asarray(np.asarray(_sample(self.np_dtype, self.shape, rng)).astype(dtype))

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"


def _sample(dtype: np.dtype, shape: tuple[int, ...], rng: np.random.Generator) -> Any:
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if jnp.issubdtype(dtype, jnp.complexfloating):
        return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    if jnp.issubdtype(dtype, jnp.floating):
        return rng.standard_normal(shape)
    if jnp.issubdtype(dtype, jnp.unsignedinteger):
        return rng.integers(0, 10, shape)
    return rng.integers(-5, 6, shape)


@dataclass(frozen=True)
class KeySpec:
    """A new-style PRNG key argument, ``jax.random.key(seed)``."""

    seed: int = 0

    def abstract(self) -> jax.ShapeDtypeStruct:
        return jax.eval_shape(lambda: jax.random.key(0))

    def concrete(self, rng: np.random.Generator | None = None) -> jax.Array:
        return jax.random.key(self.seed)

    @property
    def nbytes(self) -> int:
        data = jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0)))
        return math.prod(data.shape) * np.dtype(data.dtype).itemsize

    def __str__(self) -> str:
        return "key" if self.seed == 0 else f"key({self.seed})"


@dataclass(frozen=True)
class ValueSpec:
    """A literal or evaluated expression: ``text`` as written, ``value`` as evaluated."""

    text: str
    value: Any

    def __str__(self) -> str:
        return self.text


# --------------------------------------------------------------------------- splitting


@dataclass(frozen=True)
class _Item:
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

    def run(self) -> list[_Item]:
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

    def _items(self) -> list[_Item]:
        masked = "".join(self.masked)
        if len(self.spans) > 1 and not self.text[self.spans[-1][0] :].strip():
            self.spans.pop()  # one trailing comma is allowed, as in a Python call
        return [_make_item(n, self.text, masked, s) for n, s in enumerate(self.spans, 1)]


def _make_item(index: int, text: str, masked: str, span: tuple[int, int, str | None]) -> _Item:
    start, end, problem = span
    raw = text[start:end]
    lead = len(raw) - len(raw.lstrip())
    stripped = raw.strip()
    body = masked[start + lead : start + lead + len(stripped)]
    return _Item(index, stripped, body, problem or (None if stripped else "empty item"))


def _split(text: str) -> list[_Item]:
    if not text.strip():
        return []
    return _Splitter(text).run()


def split_spec(text: str) -> list[str]:
    """The spec's top-level items as text, one per argument (never raises)."""
    return [item.text for item in _split(text)]


# --------------------------------------------------------------------------- item parsing


class _Fail(Exception):
    """An item-level problem; becomes a SpecError naming the item."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class _Ctx:
    ns: dict[str, Any]
    src: str
    expressions: bool = True  # False: literals and the namespace's own names only


_EMPTY_SUBSCRIPT = re.compile(r"\b([A-Za-z_]\w*)(\s*)\[\s*\]")
_SUBSCRIPT_START = re.compile(r"\b([A-Za-z_]\w*)\s*\[")
_KEYWORD_ARG = re.compile(r"^[A-Za-z_]\w*\s*=(?!=)")


def _rewrite_empty_subscripts(text: str, masked: str) -> str:
    """``i32[]`` -> ``i32[()]`` outside string literals, so that Python can parse it."""
    out: list[str] = []
    last = 0
    for m in _EMPTY_SUBSCRIPT.finditer(masked):
        if keyword.iskeyword(m.group(1)):
            continue
        out += [text[last : m.end(2)], "[()]"]
        last = m.end()
    return "".join(out) + text[last:]


def _looks_like_dtype(name: str) -> bool:
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
        if _looks_like_dtype(m.group(1)):
            parts = _top_level_parts(_bracket_body(masked, m.end() - 1))
            if any(not p.strip() for p in parts[:-1]):
                return True
    return False


def _syntax_reason(err: SyntaxError, item: _Item) -> str:
    if _has_empty_dimension(item.masked):
        return "empty dimension"
    if _KEYWORD_ARG.match(item.masked):
        return "keyword arguments are not supported: give every argument by position"
    msg = re.sub(r"\s*\(detected at line \d+\)", "", err.msg or "invalid syntax")
    return msg if "syntax" in msg.lower() else f"syntax error: {msg}"


def _parse_ast(src: str, item: _Item) -> ast.Expression:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(src, mode="eval")
    except SyntaxError as err:
        raise _Fail(_syntax_reason(err, item)) from None
    except ValueError as err:  # e.g. null bytes
        raise _Fail(f"syntax error: {err}") from None


def _parse_item(item: _Item, ns: dict[str, Any], expressions: bool = True) -> Any:
    if item.problem:
        raise _Fail(item.problem)
    src = "(\n" + _rewrite_empty_subscripts(item.text, item.masked) + "\n)"
    ctx = _Ctx(ns, src, expressions)
    root = _parse_ast(src, item).body
    if _is_value_node(root, ctx):
        return ValueSpec(item.text, _eval(root, ctx))
    return _build(root, ctx)


def _is_value_node(node: ast.expr, ctx: _Ctx) -> bool:
    """True when ``node`` is a plain Python value, not an array/key/container item."""
    if isinstance(node, ast.Subscript | ast.Name | ast.Call):
        return _special(node, ctx) is None
    if isinstance(node, ast.Dict):
        return None in node.keys
    if isinstance(node, ast.List | ast.Tuple):
        return any(isinstance(e, ast.Starred) for e in node.elts)
    return True


def _build(node: ast.expr, ctx: _Ctx) -> Any:
    if _is_value_node(node, ctx):
        return ValueSpec(_segment(node, ctx), _eval(node, ctx))
    if isinstance(node, ast.Dict):
        pairs = zip(node.keys, node.values, strict=True)
        return {_dict_key(k, ctx): _build(v, ctx) for k, v in pairs}
    if isinstance(node, ast.List):
        return [_build(e, ctx) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_build(e, ctx) for e in node.elts)
    return _special(node, ctx)()


def _special(node: ast.expr, ctx: _Ctx) -> Callable[[], Any] | None:
    """A builder for an array or key item, or None when ``node`` is an ordinary value."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        return _array_builder(node, node.value.id, ctx)
    if isinstance(node, ast.Name) and node.id not in ctx.ns:
        if node.id == "key":
            return KeySpec
        if node.id in DTYPES:
            raise _Fail(f"'{node.id}' needs a shape: {node.id}[3], or {node.id}[] for a scalar")
    if _is_key_call(node, ctx):
        return lambda: _key_spec(node, ctx)
    return None


def _array_builder(node: ast.Subscript, name: str, ctx: _Ctx) -> Callable[[], Any] | None:
    if name in DTYPES:
        return lambda: ArraySpec(name, _shape(node.slice, ctx))
    if name not in ctx.ns and _looks_like_dtype(name):
        raise _Fail(_unknown_dtype(name))
    return None


def _unknown_dtype(name: str) -> str:
    guess = _ALIASES.get(name) or (name.lower() if name.lower() in DTYPES else None)
    if guess:
        return f"unknown dtype '{name}' (did you mean {guess}?)"
    return f"unknown dtype '{name}' (known: {', '.join(DTYPES)})"


def _is_key_call(node: ast.expr, ctx: _Ctx) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "key"
        and "key" not in ctx.ns
    )


def _key_spec(node: ast.Call, ctx: _Ctx) -> KeySpec:
    if len(node.args) != 1 or node.keywords or isinstance(node.args[0], ast.Starred):
        raise _Fail("key takes one integer seed: key or key(0)")
    seed = _eval(node.args[0], ctx)
    if isinstance(seed, bool) or not _is_int(seed):
        raise _Fail(f"key seed {_label(_segment(node.args[0], ctx), seed)} is not an integer")
    return KeySpec(operator.index(seed))


def _shape(node: ast.expr, ctx: _Ctx) -> tuple[int, ...]:
    dims = node.elts if isinstance(node, ast.Tuple) else [node]
    return tuple(_dimension(d, ctx) for d in dims)


def _dimension(node: ast.expr, ctx: _Ctx) -> int:
    text = _segment(node, ctx)
    if isinstance(node, ast.Slice | ast.Starred):
        raise _Fail(f"dimension {text} is not an integer")
    value = _eval(node, ctx)
    if isinstance(value, bool | np.bool_) or not _is_int(value):
        raise _Fail(f"dimension {_label(text, value)} is not an integer")
    if operator.index(value) < 0:
        raise _Fail(f"dimension {_label(text, value)} is negative")
    return operator.index(value)


def _is_int(value: Any) -> bool:
    try:
        operator.index(value)
    except Exception:
        return False
    return True


def _label(text: str, value: Any) -> str:
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return text if text == shown else f"{text} = {shown}"


def _dict_key(node: ast.expr | None, ctx: _Ctx) -> Any:
    assert node is not None  # ** unpacking is handled as a plain value
    key = _eval(node, ctx)
    try:
        hash(key)
    except TypeError:
        raise _Fail(f"dict key {_segment(node, ctx)} is not hashable") from None
    return key


def _segment(node: ast.expr, ctx: _Ctx) -> str:
    return ast.get_source_segment(ctx.src, node) or ast.unparse(node)


def _eval(node: ast.expr, ctx: _Ctx) -> Any:
    if not ctx.expressions and not _is_plain(node, ctx.ns):
        raise _Fail(f"only the spec language and names the code defines, not `{ast.unparse(node)}`")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            code = compile(ast.Expression(body=node), "<spec>", "eval")
        return eval(code, ctx.ns)
    except NameError as err:
        raise _Fail(_name_error(err)) from None
    except (Exception, SystemExit) as err:
        raise _Fail(_describe(err)) from None


def _is_plain(node: ast.expr, ns: dict[str, Any]) -> bool:
    """A literal, or a bare name bound in `ns` to a value (not a module or function)."""
    if isinstance(node, ast.Name):
        value = ns.get(node.id)
        return node.id in ns and not (callable(value) or isinstance(value, type(np)))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return isinstance(node.operand, ast.Constant)
    if isinstance(node, ast.Tuple | ast.List):
        return all(_is_plain(e, ns) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(e is not None and _is_plain(e, ns) for e in [*node.keys, *node.values])
    return isinstance(node, ast.Constant)


def _name_error(err: NameError) -> str:
    name = getattr(err, "name", None)
    if name in DTYPES:
        return f"{name}[...] is an argument, not a value: it cannot be used inside an expression"
    return str(err)


def _describe(err: BaseException) -> str:
    msg = str(err)
    msg = msg if len(msg) <= 200 else msg[:197] + "..."
    return f"{type(err).__name__}: {msg}" if msg else type(err).__name__


# --------------------------------------------------------------------------- public API


def parse_spec(
    text: str, namespace: dict[str, Any] | None = None, expressions: bool | None = None
) -> list[Any]:
    """Parse ``text`` into one pytree per positional argument. Raises SpecError only.

    ``expressions=False`` accepts only the spec language and bare names ``namespace``
    binds to values (never calls, attributes or operators); None means False in demo
    mode (``viz.demo``) and True otherwise."""
    if expressions is None:
        from viz import demo

        expressions = not demo.enabled()
    if not isinstance(text, str):
        raise SpecError(f"spec must be a string, not {type(text).__name__}")
    defaults = {
        "jax": importlib.import_module("jax"),
        "np": np,
        "jnp": importlib.import_module("jax.numpy"),
    }
    ns = {**defaults, **(namespace or {})}
    try:
        items = _split(text)
    except Exception as err:  # pragma: no cover - the splitter is total
        raise SpecError(f"cannot split spec: {_describe(err)}") from err
    return [_parse_one(item, ns, expressions) for item in items]


def _parse_one(item: _Item, ns: dict[str, Any], expressions: bool = True) -> Any:
    try:
        return _parse_item(item, ns, expressions)
    except _Fail as err:
        raise SpecError(err.reason, item.index, item.text) from None
    except Exception as err:  # e.g. RecursionError on absurd nesting
        raise SpecError(f"cannot parse: {_describe(err)}", item.index, item.text) from err


def _map_tree(tree: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(tree, dict):
        return {k: _map_tree(v, fn) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_map_tree(v, fn) for v in tree]
    if isinstance(tree, tuple):
        mapped = [_map_tree(v, fn) for v in tree]
        return type(tree)(*mapped) if hasattr(tree, "_fields") else tuple(mapped)
    return fn(tree)


def _leaves(tree: Any) -> Iterator[Any]:
    if isinstance(tree, dict):
        tree = list(tree.values())
    if isinstance(tree, list | tuple):
        for v in tree:
            yield from _leaves(v)
    else:
        yield tree


def _is_array(x: Any) -> bool:
    return isinstance(x, jax.Array | np.ndarray | np.generic)


def _value_leaves(value: Any) -> list[Any]:
    try:
        return jax.tree_util.tree_leaves(value)
    except Exception:
        return [value]


def _abstract_leaf(x: Any) -> Any:
    if isinstance(x, jax.Array):
        return jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=getattr(x, "weak_type", False))
    if isinstance(x, np.ndarray | np.generic):
        return jax.ShapeDtypeStruct(x.shape, jax.dtypes.canonicalize_dtype(x.dtype))
    return x


def _abstract_value(value: Any) -> Any:
    try:
        return jax.tree_util.tree_map(_abstract_leaf, value)
    except Exception:
        return _abstract_leaf(value)


def _abstract_spec(leaf: Any) -> Any:
    if isinstance(leaf, ArraySpec | KeySpec):
        return leaf.abstract()
    return _abstract_value(leaf.value if isinstance(leaf, ValueSpec) else leaf)


def abstract_args(items: list) -> list:
    """Same trees with ShapeDtypeStruct for arrays and keys; values stay values, except
    that array leaves inside them become ShapeDtypeStruct (shape, dtype, weak_type)."""
    return [_map_tree(item, _abstract_spec) for item in items]


def concrete_args(items: list, seed: int = 0) -> list:
    """Same trees with real arrays, drawn in order from ``np.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)

    def concrete(leaf: Any) -> Any:
        if isinstance(leaf, ArraySpec | KeySpec):
            return leaf.concrete(rng)
        return leaf.value if isinstance(leaf, ValueSpec) else leaf

    return [_map_tree(item, concrete) for item in items]


def _leaf_bytes(leaf: Any) -> int:
    if isinstance(leaf, ArraySpec | KeySpec):
        return leaf.nbytes
    value = leaf.value if isinstance(leaf, ValueSpec) else leaf
    return sum(int(getattr(x, "nbytes", 0)) for x in _value_leaves(value) if _is_array(x))


def input_bytes(items: list) -> int:
    """Bytes of all array inputs (specs as written, plus arrays held by values)."""
    return sum(_leaf_bytes(leaf) for leaf in _leaves(items))


def uses_x64(items: list) -> bool:
    """True if any ArraySpec is 64-bit (f64, i64, u64, c128): wrap in jax.enable_x64(True)."""
    return any(isinstance(x, ArraySpec) and x.dtype in _X64_DTYPES for x in _leaves(items))


def _format(tree: Any) -> str:
    if isinstance(tree, dict):
        return "{" + ", ".join(f"{k!r}: {_format(v)}" for k, v in tree.items()) + "}"
    if isinstance(tree, list):
        return "[" + ", ".join(_format(v) for v in tree) + "]"
    if isinstance(tree, tuple):
        inner = ", ".join(_format(v) for v in tree)
        return f"({inner},)" if len(tree) == 1 else f"({inner})"
    if isinstance(tree, ArraySpec | KeySpec | ValueSpec):
        return str(tree)
    return repr(tree)


def format_spec(items: list) -> str:
    """Spec text for ``items``; ``parse_spec(format_spec(x)) == x`` for parsed specs."""
    return ", ".join(_format(item) for item in items)


_ARRAY_ITEM = re.compile(r"^\s*([a-z]+\d*)\s*\[\s*([\d\s,]*)\]\s*$")


def array_item_parts(item: str) -> tuple[str, tuple[int, ...]] | None:
    """('f32', (8, 128)) for a plain array item like 'f32[8,128]'; None otherwise.
    Text only (no jax), for controls that edit one dimension or the dtype."""
    found = _ARRAY_ITEM.match(item)
    if not found or found.group(1) not in DTYPES:
        return None
    dims = [d.strip() for d in found.group(2).split(",") if d.strip()]
    return found.group(1), tuple(int(d) for d in dims)


def array_item(dtype: str, shape: tuple[int, ...]) -> str:
    return str(ArraySpec(dtype, shape))


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
