"""One compile's arguments, as the jit cache keyed them, and the args spec that
reproduces them, which `viz.spec.calls` writes (`viz.recorder.capture.recorder` uses it for
every compile it keeps).

Four cases:
- an ordinary call: jit's cache-miss frame holds the values; each leaf is read as the
  cache reads it (shape, dtype, weak type, sharding, committed device), a static value
  in words (`viz.recorder.capture.arguments`);
- a framework's call (`viz.recorder.capture.frameworks`): the arguments are named by the user's
  parameters (flax linen's `x`, not `args[1]`), and equinox's `filter_jit` is read from
  the user's own arguments, leaf by leaf, its static leaves by their values;
- a call under a transformation: the values are tracers, which have no sharding or
  device to read; their abstract values (shape, dtype, weak type) are what is known,
  and the transformation goes into the signature as a setting of its own;
- no call seen (grad's backward pass compiles the transposed function with no jit call
  above it): the compiled computation's own input types, named by its debug info.
`calling_convention` tells `f(x, y)` from `f(x, y=…)`: JAX keys them apart.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field, replace
from typing import Any

import jax

from viz.cache.signature import ArgSig, LeafSig, Signature, keep_place
from viz.recorder.capture import arguments, frameworks, listener
from viz.recorder.model import ArgLeaf
from viz.spec import dtype_name
from viz.spec.calls import call_spec

MAX_VALUE_TEXT = 80  # characters of a static value's repr
TRANSFORMATION = "(transformation)"  # the signature's setting for a compile under one


@dataclass
class Described:
    signature: Signature
    leaves: list[ArgLeaf]
    spec: str | None
    spec_reason: str | None
    static: list[str]
    convention: str  # '(x, y)' or '(x, y=…)': how the arguments were passed ('' unseen)
    static_values: dict[str, Any] = field(default_factory=dict)  # the static values, by name


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def describe(call: listener.Call | None, finished: listener.Finished, cwd: str) -> Described | None:
    """The compile's signature, leaves and spec; None when nothing can be read. `cwd`:
    the program's folder, that a function's place is written from."""
    if call is None:
        return _from_compiled(finished.compiled, finished.transform)
    if call.user is not None and call.user.values is not None:
        return _framework_call(call.user, finished, cwd)
    info = call.jit_info
    signature = getattr(info, "fun_signature", None)
    params = list(signature.parameters) if signature is not None else []
    positional = [p for p in params if signature.parameters[p].kind in _POSITIONAL]  # type: ignore[union-attr]
    names = _jax_names(call, positional)
    values = [*call.args, *call.kwargs.values()]
    static_nums = set(getattr(info, "static_argnums", ()) or ())
    static_names = set(getattr(info, "static_argnames", ()) or ())
    keyed = [positional[i] if i < len(positional) else "" for i in range(len(call.args))]
    static = tuple(
        i
        for i, n in enumerate([*keyed, *call.kwargs])
        if n in static_names
        or (i < len(call.args) and i in static_nums)
        or (i >= len(call.args) and n in positional and positional.index(n) in static_nums)
    )
    spec, reason = call_spec(names, values, static, positional, len(call.args))
    if finished.transform or _has_tracers(values):
        # Tracers: the computation's own inputs are what compiled (vmap's batch included),
        # named after the call's leaves when they correspond one to one.
        leaf_names = _leaf_names(names, values, static)
        described = _from_compiled(finished.compiled, finished.transform, leaf_names)
        if described is not None:
            described.spec, described.spec_reason = spec, reason
            described.convention = calling_convention(call)
            described.static_values = {names[i]: values[i] for i in static}
            return described
    inside = call.user.inside if call.user is not None else None
    sig = arguments.signature(names, values, set(static), cwd, inside=inside)
    if finished.transform or _has_tracers(values):
        sig = _under(sig, finished.transform or "a transformation")
    return Described(
        sig, _leaves(sig), spec, reason, [names[i] for i in static], calling_convention(call),
        {names[i]: values[i] for i in static},
    )  # fmt: skip


def _jax_names(call: listener.Call, positional: list[str]) -> list[str]:
    """Each argument's name: the user's, where a framework renamed them (flax linen's
    `args[1]` is `x`), else the parameter jit's signature gives it, or `args[i]`."""
    if call.user is not None and call.user.names is not None:
        return list(call.user.names)
    n = len(call.args)
    return [positional[i] if i < len(positional) else f"args[{i}]" for i in range(n)] + list(
        call.kwargs
    )


def _framework_call(user: frameworks.UserCall, finished: listener.Finished, cwd: str) -> Described:
    """A framework's call read from the user's own arguments (equinox's `filter_jit`):
    every leaf by its path in them, a static leaf by its value in words. Under a
    transformation an array leaf is a tracer: its type is the compiled input that the
    framework's partition puts at its path."""
    names, values = list(user.names or []), list(user.values or [])
    avals = {}
    compiled = finished.compiled
    if compiled is not None and compiled.arg_names:
        for jax_path, aval in zip(compiled.arg_names, compiled.in_avals, strict=False):
            path = frameworks.renamed(user, jax_path)
            if path:
                avals[path] = aval
    sig = arguments.signature(names, values, set(), cwd, user.is_static, avals)
    if user.keyed_fun is not None:  # filter_jit(filter_grad(loss)): keyed by its value
        sig = replace(sig, args=(*sig.args, arguments.function_argument(user.keyed_fun, cwd)))
    if finished.transform or _has_tracers(values):
        sig = _under(sig, finished.transform or "a transformation")
    n = len(names) - int(names[-1:] == ["(function)"])
    spec, reason = call_spec(names[:n], values[:n], (), names[:n], n)
    return Described(sig, _leaves(sig), spec, reason, [], "")


def _leaf_names(names: list[str], values: list[Any], static: tuple[int, ...]) -> list[str]:
    """'x', "params['w']": each dynamic leaf's path, in flattening order."""
    found = []
    for i, (name, value) in enumerate(zip(names, values, strict=True)):
        if i not in static:
            leaves = jax.tree_util.tree_flatten_with_path(value)[0]
            found += [name + jax.tree_util.keystr(path) for path, _ in leaves]
    return found


def calling_convention(call: listener.Call) -> str:
    """'(x, y)' for f(1.0, y), '(x, y=…)' for f(1, y=y): JAX keys the two apart."""
    info = getattr(call.jit_info, "fun_signature", None)
    params = [
        p for p in (info.parameters if info else {}) if info.parameters[p].kind in _POSITIONAL
    ]
    names = _jax_names(call, params)[: len(call.args)]
    return "(" + ", ".join([*names, *(f"{k}=…" for k in call.kwargs)]) + ")"


def _has_tracers(values: list[Any]) -> bool:
    leaves = jax.tree_util.tree_leaves(values)
    return any(isinstance(leaf, jax.core.Tracer) for leaf in leaves)


def _under(sig: Signature, transform: str) -> Signature:
    return replace(sig, config=(*sig.config, (TRANSFORMATION, transform)))


def _leaves(sig: Signature) -> list[ArgLeaf]:
    leaves = []
    for arg in sig.args:
        if arg.static:
            leaves.append(ArgLeaf(arg.name, static_value=_truncate(arg.value or "")))
            continue
        for leaf in arg.leaves:
            if leaf.value is not None:  # a leaf the framework holds static
                leaves.append(ArgLeaf(leaf.path, static_value=_truncate(leaf.value)))
                continue
            where = leaf.sharding if leaf.sharding != "default" else None
            if leaf.device != "default":
                where = f"{where or ''} on {leaf.device}".strip()
            leaves.append(
                ArgLeaf(
                    leaf.path,
                    list(leaf.shape),
                    leaf.dtype,
                    leaf.weak_type,
                    where,
                    python_scalar=leaf.python_scalar,
                )
            )
    return leaves


def _from_compiled(
    compiled: listener.Compiled | None, transform: str | None, names: list[str] | None = None
) -> Described | None:
    """The computation's own inputs, by the call's leaf names, or the names its debug
    info gives them, or their positions."""
    if compiled is None:
        return None
    for candidate in (names or [], list(compiled.arg_names or ())):
        if len(candidate) == len(compiled.in_avals) and all(candidate):
            names = candidate
            break
    else:
        names = [f"in[{i}]" for i in range(len(compiled.in_avals))]
    args = []
    for name, aval in zip(names, compiled.in_avals, strict=True):
        leaf = LeafSig(
            name,
            tuple(getattr(aval, "shape", ())),
            dtype_name(getattr(aval, "dtype", "?")),
            bool(getattr(aval, "weak_type", False)),
        )
        args.append(ArgSig(name, False, tree="*", leaves=(leaf,)))
    x64 = ("jax_enable_x64", "on" if jax.config.jax_enable_x64 else "off")
    sig = _under(Signature(tuple(args), (x64,)), transform or "a transformation")
    why = f"compiled under {transform or 'a transformation'}: no call of the function was seen"
    return Described(sig, _leaves(sig), None, why, [], "")  # '': no call, no convention


def _truncate(text: str) -> str:
    return keep_place(text, MAX_VALUE_TEXT)
