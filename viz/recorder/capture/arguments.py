"""A call's arguments read as the jit cache keys them, in the user's words.

`signature` is the cache lab's `call_signature` (viz.cache.keys) with three more things
a recorded program needs:
- a static value in words (`viz.recorder.capture.values`): a function by its name and line, an
  object by its type and fields, never an address, with a key that tells two objects
  apart that read the same;
- a leaf can be static (equinox's `filter_jit` keys every leaf that is not an array by
  its value): `is_static` says which, and such a leaf is read as a value;
- a custom pytree node's static data (an equinox Module's `field(static=True)`, a flax
  struct's `pytree_node=False` field) is keyed by the cache too: each field is read as a
  static leaf under the node's path (`solver.scan_kind`), so that a change names it.
Under a transformation a leaf is a tracer: its type is the compiled computation's input
of that path (`avals`, vmap's batch included) where known, else the tracer's own.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import jax

from viz.cache.keys import leaf_signature
from viz.cache.signature import ArgSig, LeafSig, Signature
from viz.recorder.capture import frameworks
from viz.recorder.capture.unwrap import unwrap
from viz.recorder.capture.values import ADDRESS, words
from viz.spec import dtype_name

MAX_NODES = 10_000  # nodes walked in one argument: a larger one is read without static fields
STATIC_PART = " (static part)"  # a custom node's static data read as one value


def signature(
    names: list[str],
    values: list[Any],
    static: set[int],
    cwd: str,
    is_static: Callable[[Any], bool] | None = None,
    avals: Mapping[str, Any] | None = None,
    inside: list[frameworks.Inside] | None = None,
) -> Signature:
    """The call as the jit cache keys it: each argument, and the x64 setting.
    `inside`: per argument, what a framework's split of it hides from JAX (nnx's
    variables' paths, its modules' static attributes)."""
    args = [
        static_argument(name, value, cwd)
        if i in static
        else _Reader(cwd, is_static, avals or {}, _at(inside, i)).argument(name, value)
        for i, (name, value) in enumerate(zip(names, values, strict=True))
    ]
    x64 = "on" if jax.config.jax_enable_x64 else "off"
    return Signature(tuple(args), (("jax_enable_x64", x64),))


def static_argument(name: str, value: Any, cwd: str) -> ArgSig:
    """A static argument in words; a dataclass's fields too, so a change names the field."""
    said = words(value, cwd)
    fields: tuple[LeafSig, ...] = ()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = tuple(
            static_leaf(f"{name}.{f.name}", getattr(value, f.name, None), cwd)
            for f in dataclasses.fields(value)
        )
    return ArgSig(name, True, value=said.text, leaves=fields, value_key=_key(said))


def function_argument(fun: Any, cwd: str) -> ArgSig:
    """A callable object the jit keys by value (equinox's `filter_grad(loss)`), named
    `(function)` and shown as the user's function inside it."""
    inner = words(unwrap(fun).fun, cwd)
    return ArgSig("(function)", True, value=inner.text, value_key=words(fun, cwd).key)


def static_leaf(path: str, value: Any, cwd: str) -> LeafSig:
    said = words(value, cwd)
    return LeafSig(path, (), "", False, value=said.text, value_key=_key(said))


def _key(said: Any) -> str:
    return "" if said.key == said.text else said.key


def _at(inside: list[frameworks.Inside] | None, index: int) -> frameworks.Inside:
    return inside[index] if inside and index < len(inside) else frameworks.Inside()


class _Reader:
    """Reads one argument: its structure in text, its leaves (dynamic and static)."""

    def __init__(
        self,
        cwd: str,
        is_static: Callable[[Any], bool] | None,
        avals: Mapping,
        inside: frameworks.Inside,
    ):
        self.cwd, self.is_static, self.avals, self.inside = cwd, is_static, avals, inside
        self.leaves: list[LeafSig] = []
        self.name = ""

    def argument(self, name: str, value: Any) -> ArgSig:
        self.name = name
        paths, tree = jax.tree_util.tree_flatten_with_path(value)
        text = _tree_text(tree)
        if (self.is_static is None and "CustomNode(" not in text) or tree.num_nodes > MAX_NODES:
            self.leaves = [self.leaf(name + jax.tree_util.keystr(p), x) for p, x in paths]
        else:  # static leaves, or custom nodes whose static data the cache keys
            text = self.node(name, value)
        return ArgSig(name, False, tree=text, leaves=tuple(self._with_inside_static(name)))

    def _with_inside_static(self, name: str) -> list[LeafSig]:
        """The leaves, with the static attributes a framework's split hides placed before
        the opaque static part that holds them (so a change reads by its attribute
        first: `model.bn.use_running_average`, then nnx's graph definition)."""
        attributes = [static_leaf(name + p, v, self.cwd) for p, v in self.inside.static]
        at = next(
            (i for i, leaf in enumerate(self.leaves) if leaf.path.endswith(STATIC_PART)),
            len(self.leaves),
        )
        return self.leaves[:at] + attributes + self.leaves[at:]

    def leaf(self, path: str, x: Any) -> LeafSig:
        if id(x) in self.inside.paths:  # the user's path for a leaf the framework moved
            path = self.name + self.inside.paths[id(x)]
        if self.is_static is not None and self.is_static(x):
            return static_leaf(path, x, self.cwd)
        if isinstance(x, jax.core.Tracer):
            aval = self.avals.get(path)
            aval = jax.typeof(x) if aval is None else aval
            return LeafSig(path, tuple(aval.shape), dtype_name(aval.dtype), bool(aval.weak_type))
        return leaf_signature(path, x)

    def node(self, path: str, value: Any) -> str:
        """The structure of `value` at `path` in text; its leaves appended in order."""
        children, tree = jax.tree_util.tree_flatten_with_path(
            value, is_leaf=lambda child: child is not value
        )
        data = tree.node_data()
        if data is None:
            self.leaves.append(self.leaf(path, value))
            return "*"
        kind, static_data = data
        if kind not in _CONTAINERS and not _is_namedtuple(kind):
            self.static_data(kind, static_data, path)
        inner = [self.node(path + jax.tree_util.keystr(key), child) for key, child in children]
        return _node_text(kind, static_data, inner)

    def static_data(self, kind: type, static_data: Any, path: str) -> None:
        """A custom node's static data as leaves: field by field where the framework's
        layout is known (`frameworks.static_fields`), else as one value."""
        if static_data is None:
            return
        fields = frameworks.static_fields(kind, static_data)
        if fields is None:
            self.leaves.append(static_leaf(path + STATIC_PART, static_data, self.cwd))
            return
        for name, value in fields:
            self.leaves.append(static_leaf(f"{path}.{name}", value, self.cwd))


_CONTAINERS = (tuple, list, dict, collections.OrderedDict, type(None))


def _is_namedtuple(kind: type) -> bool:
    return isinstance(kind, type) and issubclass(kind, tuple) and hasattr(kind, "_fields")


def _node_text(kind: type, static_data: Any, inner: list[str]) -> str:
    """One node as `str(PyTreeDef)` writes it, a custom one without its static data
    (read as leaves instead): `(*, *)`, `{'a': *}`, `ODETerm(*)`."""
    if kind is type(None):
        return "None"
    if kind is tuple:
        return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"
    if kind is list:
        return "[" + ", ".join(inner) + "]"
    if kind in (dict, collections.OrderedDict):
        keys = static_data or []
        return "{" + ", ".join(f"{k!r}: {t}" for k, t in zip(keys, inner, strict=False)) + "}"
    return f"{kind.__name__}(" + ", ".join(inner) + ")"


def _tree_text(tree: Any) -> str:
    return ADDRESS.sub("", str(tree).removeprefix("PyTreeDef(").removesuffix(")"))
