"""The user's call inside a framework's jit: equinox, haiku, flax linen and nnx.

Frameworks call `jax.jit` on functions of their own, so what JAX sees, and names, is
the framework's function and its split of the arguments:
- equinox's `filter_jit` (and so diffrax, lineax, optimistix) jits `fun_wrapped`
  (equinox/_jit.py) over a partition of the call: `dynamic_nodonate['first'][2]`, and a
  static part that holds every leaf that is not an array;
- haiku's `transform` returns an `apply_fn` of its own (haiku/_src/transform.py);
- flax linen's `jax.jit(model.apply)` is `Module.apply(variables, *args)`, the user's
  `__call__` (or `method=`) inside;
- flax nnx's `jit` wraps the function in a `JitFn`, called with a split of each module:
  its graph as static data, its variables as lists of arrays without their paths.

`user_call` reads the call as the user wrote it: their function, the framework's layers
(`['filter_jit']`, `['haiku.transform']`), their parameter names and, for equinox, their
arguments with the rule that makes a leaf static; for nnx, each variable's path in the
user's module and each module's static attributes. `layer_name` names a framework's
wrapper objects for `viz.recorder.capture.unwrap`. No framework is imported here: each is
recognized by its module's name on a frame or a function, and read through the attributes
it sets (equinox's `_JitWrapper`, haiku's `_original_fn`), so this module is where a new
framework version may need a look. Never raises: a call it cannot read is left as JAX
saw it.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import jax

MAX_FRAMES = 16  # frames looked through between jit's cache miss and the framework's call


@dataclass
class UserCall:
    """A jitted call in the user's terms."""

    fun: Any  # the user's function (`viz.recorder.capture.unwrap` peels any further layers)
    layers: list[str]  # the framework's layers, outermost first: ['filter_jit']
    names: list[str] | None = None  # the user's names for JAX's arguments (None: JAX's own)
    values: list[Any] | None = None  # the user's own arguments, when JAX saw a partition
    is_static: Callable[[Any], bool] | None = None  # a leaf the framework holds static
    renames: dict[str, str] = field(default_factory=dict)  # JAX's argument path → the user's
    keyed_fun: Any = None  # a callable object without arrays, keyed as one static value
    inside: list[Inside] | None = None  # per argument, what JAX's split of it hides (nnx)


@dataclass
class Inside:
    """What a framework's split of one argument hides from JAX's view of it: each array
    leaf's path in the user's object, by the leaf's id (`.layer.kernel`), and the static
    attributes the split keys as one opaque value (`.bn.use_running_average`)."""

    paths: dict[int, str] = field(default_factory=dict)
    static: list[tuple[str, Any]] = field(default_factory=list)


def user_call(fun: Any, args: tuple, kwargs: dict, frame: FrameType | None) -> UserCall | None:
    """The call as the user wrote it, or None when `fun` is no framework's."""
    try:
        return _equinox(fun, frame) or _haiku(fun) or _linen(fun, args, kwargs) or _nnx(fun, frame)
    except Exception:  # a framework's internals changed, or a user object misbehaved
        return None


# -- equinox ---------------------------------------------------------------------------
_EQUINOX_PATH = re.compile(r"dynamic_(?:no)?donate\['(first|fun|rest)'\](.*)")


def _equinox(fun: Any, frame: FrameType | None) -> UserCall | None:
    """`filter_jit`: the user's call is in equinox's `_call(jit_wrapper, is_lower, args,
    kwargs)` frame, above the jit of `fun_wrapped` that compiles."""
    frame = _frame_of(frame, "equinox._jit", "_call")
    if frame is None:
        return None
    wrapper = frame.f_locals.get("jit_wrapper")
    if getattr(getattr(wrapper, "_cached", None), "__wrapped__", None) is not fun:
        return None  # another filter_jit's frame: not the one compiling
    user_fun = wrapper.__wrapped__
    bound = inspect.signature(user_fun).bind(
        *frame.f_locals.get("args", ()), **frame.f_locals.get("kwargs", {})
    )
    names = [*_positional_names(bound), *bound.kwargs]
    values = [*bound.args, *bound.kwargs.values()]
    equinox = sys.modules.get("equinox")
    is_array = getattr(equinox, "is_array", None)
    if not callable(is_array):
        return None
    keyed_fun = None
    if not inspect.isfunction(user_fun):  # a callable object: its fields are keyed too
        if any(is_array(leaf) for leaf in jax.tree_util.tree_leaves(user_fun)):
            names.append("(function)")
            values.append(user_fun)
        else:
            keyed_fun = user_fun
    return UserCall(
        user_fun,
        ["filter_jit"],
        names,
        values,
        is_static=lambda leaf: not is_array(leaf),
        renames=_equinox_renames(names, bound, user_fun),
        keyed_fun=keyed_fun,
    )


def _positional_names(bound: inspect.BoundArguments) -> list[str]:
    """A name for each of `bound.args`: the parameter's, `args[1]` inside a `*args`."""
    names: list[str] = []
    for param in bound.signature.parameters.values():
        if param.kind in (param.KEYWORD_ONLY, param.VAR_KEYWORD) or param.name in bound.kwargs:
            break
        if param.name not in bound.arguments:
            break
        if param.kind == param.VAR_POSITIONAL:
            names += [f"{param.name}[{i}]" for i in range(len(bound.arguments[param.name]))]
        else:
            names.append(param.name)
    return names[: len(bound.args)]


def _equinox_renames(
    names: list[str], bound: inspect.BoundArguments, user_fun: Any
) -> dict[str, str]:
    """JAX's path of each array leaf in equinox's partition (`['first'][2]`: leaf 2 of
    the first argument; `['rest'][j]`: leaf j of the other arguments and the keywords;
    `['fun'][k]`: leaf k of the function) → its path in the user's arguments."""
    positional = names[: len(bound.args)]
    keywords = sorted(bound.kwargs)  # JAX flattens a dict in the order of its keys
    groups = {
        "first": (positional[:1], bound.args[:1]),
        "rest": (
            positional[1:] + keywords,
            (*bound.args[1:], *(bound.kwargs[k] for k in keywords)),
        ),
        "fun": (["(function)"], (user_fun,)),
    }
    renames = {}
    for group, (group_names, group_values) in groups.items():
        index = 0
        for name, value in zip(group_names, group_values, strict=False):
            for path, _ in jax.tree_util.tree_flatten_with_path(value)[0]:
                renames[f"{group}[{index}]"] = name + jax.tree_util.keystr(path)
                index += 1
    return renames


def renamed(user: UserCall, jax_path: str) -> str | None:
    """The user's path for an argument path in JAX's debug info, when the framework's
    partition is known (`dynamic_nodonate['first'][2]` → `y0`)."""
    match = _EQUINOX_PATH.fullmatch(jax_path)
    if not match:
        return None
    group, rest = match.groups()
    return user.renames.get(f"{group}{rest}")


# -- haiku -------------------------------------------------------------------------------
_HAIKU_LAYERS = {  # the function that made an apply_fn → the layer the user wrote
    "without_state": "haiku.transform",  # transform = without_state(transform_with_state(f))
    "transform_with_state": "haiku.transform_with_state",
    "without_apply_rng": "haiku.without_apply_rng",
}


def _haiku(fun: Any) -> UserCall | None:
    """`transform(f).apply`: haiku keeps the user's `f` on it as `_original_fn`."""
    original = getattr(fun, "_original_fn", None)
    if original is None or not _module(fun).startswith("haiku"):
        return None
    layers = []
    while fun is not None and _module(fun).startswith("haiku"):
        maker = getattr(fun, "__qualname__", "").split(".<locals>")[0]
        layer = _HAIKU_LAYERS.get(maker, f"haiku.{maker}")
        if not (layer == "haiku.transform_with_state" and layers[-1:] == ["haiku.transform"]):
            layers.append(layer)
        fun = getattr(_closure_value(fun, "f"), "apply", None)
    return UserCall(original, layers)


def _closure_value(fun: Any, name: str) -> Any:
    code = getattr(fun, "__code__", None)
    if code is None or name not in code.co_freevars:
        return None
    return fun.__closure__[code.co_freevars.index(name)].cell_contents


# -- flax linen ------------------------------------------------------------------------------
def _linen(fun: Any, args: tuple, kwargs: dict) -> UserCall | None:
    """`jax.jit(model.apply)`: `Module.apply(variables, *args, method=None, ...)` runs
    the module's `__call__`, or `method`; its arguments are that method's."""
    apply = getattr(fun, "__func__", None)
    module = getattr(fun, "__self__", None)
    if getattr(apply, "__qualname__", "") != "Module.apply" or not _module(apply).startswith(
        "flax.linen"
    ):
        return None
    method = kwargs.get("method")
    if method is None:
        user_fun = type(module).__call__
    elif isinstance(method, str):
        user_fun = getattr(type(module), method)
    else:
        user_fun = getattr(method, "__func__", method)
    params = list(inspect.signature(user_fun).parameters.values())[1:]  # after self
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = ["variables"] + [
        positional[i] if i < len(positional) else f"args[{i}]" for i in range(len(args) - 1)
    ]
    return UserCall(user_fun, ["linen.apply"], names + list(kwargs))


# -- flax nnx --------------------------------------------------------------------------------
def _nnx(fun: Any, frame: FrameType | None) -> UserCall | None:
    """`nnx.jit`: JAX sees nnx's `JitFn` over a split of each module: its variables
    without their paths (`model.states[0][1]`), its static attributes inside one graph
    definition. The user's arguments are in the `__call__` frame of nnx's jit wrapper
    above; each variable there is named by its path in them and matched to JAX's leaf by
    identity (the split hands on the same arrays), and each module's static attributes
    are read by their paths (`model.eval()` turns `.bn.use_running_average` on)."""
    nnx = sys.modules.get("flax.nnx")
    if nnx is None or layer_name(fun) != "nnx.jit":
        return None
    frame = _frame_of(frame, "flax.nnx.transforms.compilation", "__call__")
    if frame is None:
        return None
    values = [*frame.f_locals.get("args", ()), *frame.f_locals.get("kwargs", {}).values()]
    return UserCall(fun, [], inside=[_nnx_inside(nnx, value) for value in values])


def _nnx_inside(nnx: Any, value: Any) -> Inside:
    """Every nnx variable of the modules in `value` by its array's id, and every static
    attribute of theirs, each with its path in `value`."""
    inside = Inside()
    is_node = nnx.graph.is_graph_node
    for outer, node in jax.tree_util.tree_flatten_with_path(value, is_leaf=is_node)[0]:
        if not is_node(node):
            continue
        prefix = _path_text(outer)
        for inner, leaf in jax.tree_util.tree_flatten_with_path(nnx.state(node))[0]:
            keys = list(inner)
            if _key_part(keys[-1]) == "value":  # the Variable's own field
                keys.pop()
            inside.paths[id(leaf)] = prefix + _path_text(keys)
        for parts, sub in nnx.iter_graph(node):
            if is_node(sub):
                where = prefix + "".join(map(_path_part, parts))
                inside.static += [
                    (where + _path_part(k), v) for k, v in _static_attributes(nnx, sub)
                ]
    return inside


def _static_attributes(nnx: Any, node: Any) -> list[tuple[str, Any]]:
    """A module's attributes that its graph definition holds as static data: neither a
    node nor a variable nor an array (the split carries those apart), nor nnx's own."""
    found = []
    for name, value in sorted(getattr(node, "__dict__", {}).items()):
        if name.startswith("_") or nnx.graph.is_graph_node(value):
            continue
        leaves = jax.tree_util.tree_leaves(value)
        if not any(isinstance(leaf, (nnx.Variable, jax.Array)) for leaf in leaves):
            found.append((name, value))
    return found


def _path_text(keys: Any) -> str:
    return "".join(_path_part(_key_part(k)) for k in keys)


def _key_part(key: Any) -> Any:
    """A key path entry's name or index: DictKey's key, GetAttrKey's name, SequenceKey's
    index."""
    for field_name in ("key", "name", "idx"):
        if hasattr(key, field_name):
            return getattr(key, field_name)
    return str(key)


def _path_part(part: Any) -> str:
    return f".{part}" if isinstance(part, str) and part.isidentifier() else f"[{part!r}]"


# -- layers ------------------------------------------------------------------------------------
_WRAPPER_LAYERS = {  # a framework's wrapper object (module.qualname) → the layer's name
    "equinox._jit._JitWrapper": "filter_jit",
    "equinox._ad._GradWrapper": "filter_grad",
    "equinox._ad._ValueAndGradWrapper": "filter_value_and_grad",
    "equinox._vmap_pmap._VmapWrapper": "filter_vmap",
    "equinox._vmap_pmap._PmapWrapper": "filter_pmap",
    "flax.nnx.transforms.compilation.JitFn": "nnx.jit",
    "flax.nnx.transforms.compilation.SimpleJitFn": "nnx.jit",
}


_INTERNAL_WRAPPERS = (  # (module, the function that wrapped it): a framework's own layer
    ("flax.linen.module", "wrap_method_once."),  # every linen method, not a user's layer
)


def layer_name(wrapper: Any) -> str | None:
    """'filter_grad' for equinox's gradient wrapper, 'nnx.jit' for nnx's, '' for a
    wrapper a framework puts around every method (no layer of the user's); None for an
    object that is no framework's wrapper."""
    kind = type(wrapper)
    known = _WRAPPER_LAYERS.get(f"{kind.__module__}.{kind.__qualname__}")
    if known:
        return known
    code = getattr(wrapper, "__code__", None)
    module = (getattr(wrapper, "__globals__", None) or {}).get("__name__")
    qualname = getattr(code, "co_qualname", "")
    if any(module == m and qualname.startswith(q) for m, q in _INTERNAL_WRAPPERS):
        return ""
    return None


# -- a pytree node's static data ---------------------------------------------------------------
def static_fields(kind: type, static_data: Any) -> list[tuple[str, Any]] | None:
    """A dataclass node's static data, field by field: an equinox Module's
    `field(static=True)` (its data is a slot for `functools.wraps`'s attributes, then
    the static fields), a flax struct's or `jax.tree_util.register_dataclass`'s
    `pytree_node=False` or meta fields (their data is those fields' values); None when
    the data does not line up with the fields."""
    if not dataclasses.is_dataclass(kind) or not isinstance(static_data, tuple):
        return None
    fields = dataclasses.fields(kind)
    marked = [
        f.name for f in fields if f.metadata.get("static") or f.metadata.get("pytree_node") is False
    ]
    if _is_equinox_module(kind) and len(static_data) == len(marked) + 1:
        return list(zip(marked, static_data[1:], strict=True))
    if len(static_data) == len(marked):
        return list(zip(marked, static_data, strict=True))
    return None


def _is_equinox_module(kind: type) -> bool:
    return any(_module(base) == "equinox._module._module" for base in kind.__mro__)


# -- frames and modules --------------------------------------------------------------------------
_JIT_MAKERS = (  # modules whose functions call jax.jit for the user: filter_jit, nnx.jit
    "equinox._jit",
    "equinox._compile_utils",
    "flax.nnx.transforms.compilation",
)


def is_jit_maker(frame: FrameType) -> bool:
    """A frame of a framework's jit maker, between the user's call of it and jax.jit."""
    return frame.f_globals.get("__name__") in _JIT_MAKERS


def _frame_of(frame: FrameType | None, module: str, function: str) -> FrameType | None:
    """The nearest frame at or above `frame` running `function` of `module`."""
    for _ in range(MAX_FRAMES):
        if frame is None:
            return None
        if frame.f_code.co_name == function and frame.f_globals.get("__name__") == module:
            return frame
        frame = frame.f_back
    return None


def _module(obj: Any) -> str:
    return getattr(obj, "__module__", None) or ""
