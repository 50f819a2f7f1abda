"""Why did jit recompile? Signatures of calls and the fields that differ.

A `Signature` describes one call the way the jit cache keys it: per parameter,
the static value, or the pytree structure and, per array leaf, shape, dtype,
weak type, sharding and committed device. A leaf can be static too (equinox holds every
leaf that is not an array static, and a pytree node's static fields are keyed alike):
then it has a value in words, and a key where the words are not all the cache compares
(a function is equal only to itself: two lambdas of one line are two keys).
`explain_miss` compares a new signature with every cached one and lists, for the
closest, *every* field that differs. Plain data only: the worker builds signatures
(`viz.cache.session`), the app renders them with `reason_text` and `reason_fix`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from viz.plain import Plain
from viz.units import a_or_an

REASON_KINDS = (
    "new_function",
    "shape",
    "dtype",
    "weak_type",
    "static_value",
    "pytree",
    "sharding",
    "device",
    "config",  # a setting in JAX's cache key changed, e.g. x64
)


@dataclass(frozen=True)
class LeafSig:
    path: str  # 'x', "params['w']"
    shape: tuple[int, ...]
    dtype: str  # jaxpr spelling: 'f32'
    weak_type: bool
    python_scalar: bool = False
    sharding: str = "default"
    device: str = "default"
    value: str | None = None  # a static leaf's value, in words
    value_key: str = ""  # what the cache compares of it, when not `value` itself

    def type_text(self) -> str:
        if self.value is not None:
            return self.value
        text = f"{self.dtype}[{','.join(map(str, self.shape))}]"
        if self.python_scalar:
            return f"Python {PYTHON_NAMES.get(self.dtype, 'scalar')} (weak {text})"
        return f"weak {text}" if self.weak_type else text


PYTHON_NAMES = {
    "f32": "float",
    "f64": "float",
    "i32": "int",
    "i64": "int",
    "bool": "bool",
    "c64": "complex",
    "c128": "complex",
}


@dataclass(frozen=True)
class ArgSig:
    name: str
    static: bool
    value: str | None = None  # a static value, in words
    tree: str | None = None  # pytree structure of a dynamic argument
    leaves: tuple[LeafSig, ...] = ()  # a static argument's: its fields, when it has any
    value_key: str = ""  # what the cache compares of a static value, when not `value`


@dataclass(frozen=True)
class Signature:
    args: tuple[ArgSig, ...]
    config: tuple[tuple[str, str], ...] = ()  # settings JAX keys its cache on: (name, value)

    def describe(self) -> str:
        parts = []
        for arg in self.args:
            if arg.static:
                parts.append(f"{arg.name}={arg.value} (static)")
            elif len(arg.leaves) == 1 and arg.leaves[0].path == arg.name:
                parts.append(f"{arg.name}: {_leaf_text(arg.leaves[0])}")
            else:
                inner = ", ".join(f"{leaf.path}: {_leaf_text(leaf)}" for leaf in arg.leaves)
                parts.append(f"{arg.name}: {{{inner}}}")
        parts += [f"{name}={value}" for name, value in self.config]
        return " · ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Signature:
        return cls(
            tuple(
                ArgSig(
                    **{
                        **a,
                        "leaves": tuple(
                            LeafSig(**{**leaf, "shape": tuple(leaf["shape"])})
                            for leaf in a["leaves"]
                        ),
                    }
                )
                for a in data["args"]
            ),
            tuple(tuple(pair) for pair in data.get("config", ())),
        )


def _leaf_text(leaf: LeafSig) -> str:
    text = leaf.type_text()
    if leaf.sharding != "default":
        text += f" {leaf.sharding}"
    if leaf.device != "default":
        text += f" on {leaf.device}"
    return text


@dataclass(frozen=True)
class Reason(Plain):
    arg: str  # the parameter as the function's signature names it (or a leaf path in it)
    kind: str  # one of viz.cache.signature.REASON_KINDS
    before: str
    after: str


NEW = "a new "  # a reason's `after` when the value reads the same but is another object
CUT = "…"  # where a value's text was cut (`viz.recorder.capture.values`) or is cut here
REASON_TEXT = 80  # characters of each side of a reason


def _static_reason(where: str, old: str, old_key: str, new: str, new_key: str) -> list[Reason]:
    if (old_key or old) == (new_key or new):
        return []
    if old == new and CUT not in old:  # the same words, another object: a function made anew
        new = NEW + new.removeprefix("an ").removeprefix("a ")
    elif old == new:  # cut before where they differ
        new += " (differs further in)"
    return [Reason(where, "static_value", *around_difference(old, new))]


def around_difference(old: str, new: str, width: int = REASON_TEXT) -> tuple[str, str]:
    """Both texts at most `width` characters, cut alike around where they first differ:
    two long values (a structure of 40 ShapeDtypeStructs, a config) that differ near
    their end show that end, not the start they share."""
    if len(old) <= width and len(new) <= width:
        return old, new
    pairs = enumerate(zip(old, new, strict=False))
    same = next((i for i, (a, b) in pairs if a != b), min(len(old), len(new)))
    start = max(0, same - width // 4)
    space = old.rfind(" ", 0, start)  # the shared part: a word cut whole
    if start and space > start - width // 4:
        start = space + 1
    return _window(old, start, width), _window(new, start, width)


def _window(text: str, start: int, width: int) -> str:
    head = CUT if start else ""
    body = text[start : start + width - len(head)]
    if start + len(body) < len(text):
        return keep_place(head + text[start:], width)
    return head + body


_PLACE = re.compile(r" \([^()]*:\d+\)$")  # a function's place at the end of its words


def keep_place(text: str, width: int) -> str:
    """`text` in `width` characters, cut before its end: a value's words that end with
    a function's place ('… (model.py:4)') keep that place whole, cut before it."""
    if len(text) <= width:
        return text
    place = _PLACE.search(text)
    tail = place.group(0) if place else ""
    if len(tail) >= width // 2:  # a long path: its file name and line, never cut
        tail = f" ({CUT}/{tail[2:-1].rsplit('/', 1)[-1]})"
    head = text[: place.start()] if place else text
    if len(head) + len(tail) <= width:
        return head + tail
    return head[: width - len(tail) - 1] + CUT + tail


def _leaf_reasons(name: str, old: LeafSig, new: LeafSig) -> list[Reason]:
    where = new.path or name
    if old.value is not None or new.value is not None:
        return _static_reason(where, old.type_text(), old.value_key, new.type_text(), new.value_key)
    reasons = []
    if old.shape != new.shape:
        reasons.append(Reason(where, "shape", old.type_text(), new.type_text()))
    if old.dtype != new.dtype:
        reasons.append(Reason(where, "dtype", old.dtype, new.dtype))
    if old.weak_type != new.weak_type or old.python_scalar != new.python_scalar:
        reasons.append(Reason(where, "weak_type", old.type_text(), new.type_text()))
    if old.sharding != new.sharding:
        reasons.append(Reason(where, "sharding", old.sharding, new.sharding))
    if old.device != new.device:
        reasons.append(Reason(where, "device", old.device, new.device))
    return reasons


def diff(old: Signature, new: Signature) -> list[Reason]:
    """Every field in which `new` differs from `old`. Arguments are paired by position
    when both signatures name them alike, else by name (a keyword passed or left out
    shifts the positions, not the arguments)."""
    reasons: list[Reason] = []
    old_names, new_names = [a.name for a in old.args], [a.name for a in new.args]
    pairs = list(zip(old.args, new.args, strict=False))
    if old_names != new_names:
        by_name = {a.name: a for a in old.args}
        pairs = [(by_name[a.name], a) for a in new.args if a.name in by_name]
    for was, now in pairs:
        if now.static or was.static:
            reasons += _static_arg_reasons(was, now)
        elif was.tree != now.tree or len(was.leaves) != len(now.leaves):
            before, after = around_difference(str(was.tree), str(now.tree))
            reasons.append(Reason(now.name, "pytree", before, after))
        else:
            for old_leaf, new_leaf in zip(was.leaves, now.leaves, strict=True):
                reasons.extend(_leaf_reasons(now.name, old_leaf, new_leaf))
    before, after = dict(old.config), dict(new.config)
    for name in sorted(before.keys() | after.keys()):
        if before.get(name) != after.get(name):
            was, now = before.get(name, "default"), after.get(name, "default")
            reasons.append(Reason(name, "config", was, now))
    if len(old.args) != len(new.args):
        reasons.append(
            Reason(
                "(arguments)", "pytree", f"{len(old.args)} arguments", f"{len(new.args)} arguments"
            )
        )
    elif old_names != new_names:
        before, after = f"({', '.join(old_names)})", f"({', '.join(new_names)})"
        reasons.append(Reason("(arguments)", "pytree", before, after))
    return reasons


def _static_arg_reasons(was: ArgSig, now: ArgSig) -> list[Reason]:
    """A static argument that differs: by the fields that differ, when it has fields."""
    if (was.value_key or was.value) == (now.value_key or now.value):
        return []
    if (
        was.static
        and now.static
        and was.leaves
        and [f.path for f in was.leaves] == [f.path for f in now.leaves]
    ):
        fields = [
            r
            for a, b in zip(was.leaves, now.leaves, strict=True)
            for r in _leaf_reasons(now.name, a, b)
        ]
        if fields:
            return fields
    return _static_reason(now.name, str(was.value), was.value_key, str(now.value), now.value_key)


@dataclass
class MissExplanation:
    closest: int | None  # index of the closest cached entry, None when the cache was empty
    reasons: list[Reason] = field(default_factory=list)


def explain_miss(new: Signature, cached: list[Signature]) -> MissExplanation:
    """Compare with every cached signature; report all differences from the closest."""
    if not cached:
        return MissExplanation(
            None, [Reason("(function)", "new_function", "empty cache", new.describe())]
        )
    diffs = [diff(old, new) for old in cached]
    best = min(range(len(cached)), key=lambda i: (len(diffs[i]), -i))
    return MissExplanation(best, diffs[best])


def reason_text(reason: dict[str, str] | Reason) -> str:
    r = reason if isinstance(reason, dict) else reason.to_dict()
    arg, before, after = r["arg"], r["before"], r["after"]
    return {
        "new_function": "first call: nothing was cached yet",
        "shape": f"`{arg}`: shape {before} → {after}",
        "dtype": f"`{arg}`: dtype {before} → {after}",
        "weak_type": f"`{arg}`: {before} → {after}",
        "static_value": f"`{arg}` (static): {before} → {after}",
        "pytree": f"`{arg}`: structure {before} → {after}",
        "sharding": f"`{arg}`: sharding {before} → {after}",
        "device": f"`{arg}`: device {before} → {after}",
        "config": f"setting `{arg}`: {before} → {after}",
    }.get(r["kind"], f"`{arg}`: {before} → {after}")


def weak_type_text(arg: str, before: str, after: str) -> str:
    """'`lr` was a Python float, then an f32[] array: only the weak type differs': a
    weak-type change (`before`, `after`: `LeafSig.type_text` of each) as a JAX user
    says it."""
    return f"`{arg}` was {_kind_of(before)}, then {_kind_of(after)}: only the weak type differs"


def weak_type_fix(arg: str, before: str, after: str) -> str:
    """The cure of a weak-type change: one kind on every call, the array's dtype by name
    (`jnp.asarray(lr)` alone keeps a Python float weak: it does not cure it), or a static
    argument where it is a setting."""
    scalar = before.startswith("Python ") or after.startswith("Python ")
    found = _ARRAY_TYPE.search(before if after.startswith("Python ") else after)
    dtype, shape = found.groups() if found else ("f32", "")
    name = _jnp_dtype(dtype)
    cast = f"jnp.{name}({arg})" if not shape else f"jnp.asarray({arg}, jnp.{name})"
    fix = f"pass one kind on every call: {cast}"
    if not scalar:
        return fix
    python = PYTHON_NAMES.get(dtype, "scalar")
    fix += f" (jnp.asarray({arg}) keeps a Python {python} weak)"
    return fix + (f", or mark `{arg}` static if it is a config value" if arg.isidentifier() else "")


_ARRAY_TYPE = re.compile(r"\b([a-z]+\d*)\[([\d,]*)\]")  # 'f32[]', 'bf16[3,4]'
_JNP_PREFIXES = {"bf": "bfloat", "f": "float", "i": "int", "u": "uint", "c": "complex"}


def _jnp_dtype(dtype: str) -> str:
    """'float32' for 'f32', 'bool_' for 'bool': the name `jnp.` spells it by."""
    found = re.fullmatch(r"([a-z]+)(\d+)", dtype)
    if found and found.group(1) in _JNP_PREFIXES:
        return _JNP_PREFIXES[found.group(1)] + found.group(2)
    return "bool_" if dtype == "bool" else dtype


def _kind_of(type_text: str) -> str:
    """'a Python float' for 'Python float (weak f32[])', 'a weakly typed f32[] array' for
    'weak f32[]', 'an f32[] array' for 'f32[]'."""
    if type_text.startswith("Python "):
        return "a " + type_text.partition(" (")[0]
    if type_text.startswith("weak "):
        return f"a weakly typed {type_text.removeprefix('weak ')} array"
    return f"{a_or_an(type_text)} array"


NODE_TYPE_FIX = (
    "each type of node is a program of its own, compiled once: expected where the types "
    "differ by design (a lineax operator of another kind), else pass one type"
)


def node_type_changed(before: str, after: str) -> bool:
    """Whether a pytree's node changed type ('MatrixLinearOperator(*)' →
    'DiagonalLinearOperator(*)', a structure's words), not its keys or lengths."""
    kinds = [re.match(r"[A-Za-z_][\w.]*(?=\()", text) for text in (before, after)]
    return bool(kinds[0] and kinds[1]) and kinds[0].group(0) != kinds[1].group(0)


def reason_fix(reason: dict[str, str] | Reason) -> str:
    r = reason if isinstance(reason, dict) else reason.to_dict()
    if r["kind"] == "weak_type":
        return weak_type_fix(r["arg"], r["before"], r["after"])
    if r["kind"] == "pytree" and node_type_changed(r["before"], r["after"]):
        return NODE_TYPE_FIX
    return {
        "new_function": "",
        "shape": "pad inputs to a few bucket sizes so shapes repeat (see Precompile buckets)",
        "dtype": "cast once where data enters, e.g. x.astype(jnp.float32)",
        "static_value": "every new static value compiles again; make it a dynamic argument "
        "if it changes often",
        "pytree": "keep the pytree structure fixed (same dict keys, same list lengths)",
        "sharding": "place inputs with the same sharding every call (jax.device_put)",
        "device": "put inputs on the same device every call",
        "config": "JAX keys its cache on this setting: set it once, before the first call",
    }.get(r["kind"], "")
