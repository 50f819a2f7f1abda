"""`Recorder`: turns each compilation the listener hears into a `Compile`.

For every compilation it writes down where the function is defined and where it was
called from, its signature per argument leaf, the args spec that reproduces it, and
why it compiled, field by field, against the closest earlier compile of the same
function (`viz.cache.signature.explain_miss`, the cache lab's comparison). A function
object made anew for each call (a `jax.jit(lambda …)` in a loop) is told apart from
the function itself by identity, without keeping it alive.

Memory is bounded: the first `details` compiles of each function keep their details;
later ones, and hidden op-by-op compiles, only add to exact counts. A recorder never
raises into the program: an error of its own is counted and the program goes on.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np

from viz.cache.keys import call_signature, dtype_name
from viz.cache.signature import Signature, explain_miss
from viz.recorder import listener
from viz.recorder.journal import Journal, Tally
from viz.recorder.model import (
    DEFAULT_DETAILS,
    FIRST_COMPILE,
    ArgLeaf,
    Compile,
    Program,
    Reason,
    Recording,
    function_key,
    short_path,
)
from viz.spec import ArraySpec, KeySpec, ValueSpec, format_spec

MAX_VALUE_TEXT = 80  # characters of a static value's repr
MAX_IDENTITIES = 100  # function objects and jit wrappers remembered per function


@dataclass
class _FunctionState:
    signatures: list[Signature] = field(default_factory=list)  # of the detailed compiles
    objects: list[Any] = field(default_factory=list)  # weak references to function objects
    jit_infos: list[int] = field(default_factory=list)  # ids of the jax.jit wrappers' settings
    compiles: int = 0


class Recorder:
    """Records every compilation while started (any thread)."""

    def __init__(
        self,
        program: Program | None = None,
        journal: Path | None = None,
        details: int = DEFAULT_DETAILS,
        eager: bool = False,
    ):
        self.program = program or Program(argv=list(sys.argv), cwd=os.getcwd(), started=time.time())
        self.details = max(int(details), 0)
        self.keep_eager = eager
        self.journal = Journal(journal) if journal else None
        self.tally = Tally(self.program)
        self._state: dict[str, _FunctionState] = {}
        self._lock = threading.Lock()
        self._seq = 0
        self._write({"type": "program", **self.program.__dict__})

    # -- lifetime -------------------------------------------------------------
    def start(self) -> Recorder:
        listener.subscribe(self._on_compile)
        return self

    def stop(self, exit_code: int | None = None) -> None:
        listener.unsubscribe(self._on_compile)
        wall = time.time() - self.program.started
        with self._lock:
            self.program.wall_s = wall
            if exit_code is not None:
                self.program.exit_code = exit_code
        self._write({"type": "end", "exit_code": exit_code, "wall_s": wall})
        if self.journal:
            self.journal.close()

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- results ----------------------------------------------------------------
    @property
    def compiles(self) -> list[Compile]:
        with self._lock:
            return list(self.tally.compiles)

    def recording(self) -> Recording:
        with self._lock:
            recording = self.tally.recording()
        if recording.program.wall_s is None:  # still running: the wall time so far
            recording.program.wall_s = time.time() - self.program.started
        return recording

    def summary(self) -> str:
        from viz.recorder.summary import summary_text

        return summary_text(self.recording())

    def save(self, json_path: Path | str | None = None, history: bool = True) -> int | None:
        """Write the JSON (when a path is given) and store it in history; the id or None."""
        from viz.recorder.store import save

        return save(self.recording(), json_path=json_path, history=history)

    # -- one compilation ----------------------------------------------------------
    def _write(self, line: dict[str, Any]) -> None:
        if self.journal:
            self.journal.write(line)

    def _on_compile(self, finished: listener.Finished) -> None:
        try:
            self._record(finished)
        except Exception as exc:  # never into the program: count it, keep going
            line = {"type": "error", "message": f"{type(exc).__name__}: {exc}"}
            with self._lock:
                self.tally.add(line)
            self._write(line)

    def _record(self, finished: listener.Finished) -> None:
        call = finished.call
        fun = _unwrap(call.fun) if call else None
        name = getattr(fun, "__name__", None) or finished.name
        defined_at = _defined_at(fun) if fun is not None else "?"
        eager = (call is None and not finished.frames) or _is_jax_function(call, fun)
        frames = finished.frames
        call_site = f"{frames[-1][0]}:{frames[-1][1]}" if frames else "?"
        described = _describe(call) if call else None
        with self._lock:
            key = function_key(name, defined_at)
            state = self._state.setdefault(key, _FunctionState())
            reasons = self._reasons(
                state, call, described.signature if described else None, defined_at
            )
            state.compiles += 1
            common = {
                "function": name,
                "defined_at": defined_at,
                "total_s": finished.trace_s + finished.lower_s + finished.compile_s,
                "kinds": [r.kind for r in reasons],
                "eager": eager,
            }
            if eager and not self.keep_eager:
                self.tally.add_count({**common, "hidden": True})
                self._write({"type": "count", **common, "hidden": True})
                return
            self._seq += 1  # hidden op-by-op compiles take no number
            if state.compiles > self.details:
                self.tally.add_count(common)
                self._write({"type": "count", **common})
                return
            if described:
                state.signatures.append(described.signature)
            compile = Compile(
                seq=self._seq,
                t_s=max(finished.started - self.program.started, 0.0),
                function=name,
                defined_at=defined_at,
                call_site=call_site,
                stack=[f"{file}:{line} in {func}" for file, line, func in frames],
                signature=described.leaves if described else [],
                spec=described.spec if described else None,
                spec_reason=described.spec_reason if described else "the call was not seen",
                static=described.static if described else [],
                reasons=reasons,
                trace_s=finished.trace_s,
                lower_s=finished.lower_s,
                compile_s=finished.compile_s,
                persistent_cache=finished.persistent_cache,
                eager=eager,
                thread=finished.thread,
            )
            self.tally.add_compile(compile)
            self._write({"type": "compile", **compile.to_dict()})

    def _reasons(
        self,
        state: _FunctionState,
        call: listener.Call | None,
        signature: Signature | None,
        defined_at: str,
    ) -> list[Reason]:
        """Why this compile: every field that differs from the closest earlier compile."""
        new_object = call is not None and not _seen(state, call.fun)
        new_jit = call is not None and id(call.jit_info) not in state.jit_infos
        if call is not None:
            state.jit_infos[:] = [*state.jit_infos[1 - MAX_IDENTITIES :], id(call.jit_info)]
        if state.compiles == 0:
            return [Reason("(function)", "new_function", FIRST_COMPILE, "first compile")]
        reasons: list[Reason] = []
        if new_object:
            where = short_path(defined_at, self.program.cwd)
            reasons.append(
                Reason(
                    "(function)",
                    "new_function",
                    f"{state.compiles} compile(s) of earlier function objects",
                    f"a new function object, created at {where}",
                )
            )
        if signature is not None and state.signatures:
            miss = explain_miss(signature, state.signatures)
            reasons += [Reason(r.arg, r.kind, r.before, r.after) for r in miss.reasons]
        if not reasons:
            reasons.append(
                Reason("(jit)", "config", "other jax.jit settings", "new jax.jit settings")
                if new_jit
                else Reason("(cache)", "config", "cached", "the entry was cleared or evicted")
            )
        return reasons


def _seen(state: _FunctionState, fun: Callable) -> bool:
    """Whether this very object compiled before; remembers it (weakly) from now on."""
    live = [r for r in state.objects if r() is not None]
    seen = any(r() is fun for r in live)
    if not seen:
        try:
            live.append(weakref.ref(fun))
        except TypeError:  # not weakly referable: identity cannot be tracked
            seen = True
    state.objects[:] = live[-MAX_IDENTITIES:]
    return seen


# -- describing a call ---------------------------------------------------------------
def _unwrap(fun: Any) -> Any:
    while isinstance(fun, functools.partial):
        fun = fun.func
    with contextlib.suppress(ValueError):  # a cycle of __wrapped__
        fun = inspect.unwrap(fun)
    return getattr(fun, "__func__", fun)


def _defined_at(fun: Any) -> str:
    code = getattr(fun, "__code__", None)
    if code is None:
        call = type(fun).__dict__.get("__call__")  # a callable object: its __call__
        code = getattr(call, "__code__", None)
    if code is None:
        return "?"
    return f"{os.path.abspath(code.co_filename)}:{code.co_firstlineno}"


def _is_jax_function(call: listener.Call | None, fun: Any) -> bool:
    """JAX's op-by-op dispatch (a primitive applied outside jit) or a JAX helper."""
    if call is None:
        return False
    if getattr(call.fun, "_apply_primitive", False):
        return True
    code = getattr(fun, "__code__", None)
    return code is not None and listener.is_jax_code(code.co_filename)


@dataclass
class Described:
    signature: Signature
    leaves: list[ArgLeaf]
    spec: str | None
    spec_reason: str | None
    static: list[str]


class _Inexpressible(Exception):
    """The spec language cannot write this argument (the message says which and why)."""


def _describe(call: listener.Call) -> Described:
    info = call.jit_info
    signature = getattr(info, "fun_signature", None)
    params = list(signature.parameters) if signature is not None else []
    positional = [p for p in params if signature.parameters[p].kind in _POSITIONAL]  # type: ignore[union-attr]
    names = [positional[i] if i < len(positional) else f"args[{i}]" for i in range(len(call.args))]
    names += list(call.kwargs)
    values = [*call.args, *call.kwargs.values()]
    static_nums = set(getattr(info, "static_argnums", ()) or ())
    static_names = set(getattr(info, "static_argnames", ()) or ())
    static = tuple(
        i
        for i, n in enumerate(names)
        if n in static_names
        or (i < len(call.args) and i in static_nums)
        or (i >= len(call.args) and n in positional and positional.index(n) in static_nums)
    )
    x64 = bool(jax.config.jax_enable_x64)
    sig = call_signature(names, values, static, x64)
    leaves = []
    for arg in sig.args:
        if arg.static:
            leaves.append(ArgLeaf(arg.name, static_value=_truncate(arg.value or "")))
            continue
        for leaf in arg.leaves:
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
    spec, reason = _spec(names, values, static, positional, len(call.args))
    return Described(sig, leaves, spec, reason, [names[i] for i in static])


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _truncate(text: str) -> str:
    return text if len(text) <= MAX_VALUE_TEXT else text[: MAX_VALUE_TEXT - 1] + "…"


def _spec(
    names: list[str],
    values: list[Any],
    static: tuple[int, ...],
    positional: list[str],
    n_positional: int,
) -> tuple[str | None, str | None]:
    """The args spec that reproduces the call, or (None, why not)."""
    by_position: dict[int, int] = dict(enumerate(range(n_positional)))
    for i in range(n_positional, len(names)):
        if names[i] not in positional:
            return None, f"keyword argument `{names[i]}` is not a positional parameter"
        by_position[positional.index(names[i])] = i
    if sorted(by_position) != list(range(len(by_position))):
        missing = next(p for p in range(len(by_position)) if p not in by_position)
        return None, f"parameter `{positional[missing]}` was left at its default"
    try:
        items = [
            _static_item(names[i], values[i]) if i in static else _dynamic_item(names[i], values[i])
            for i in (by_position[p] for p in range(len(by_position)))
        ]
    except _Inexpressible as exc:
        return None, str(exc)
    return format_spec(items), None


def _static_item(name: str, value: Any) -> Any:
    text = repr(value)
    try:
        same = ast.literal_eval(text) == value and type(ast.literal_eval(text)) is type(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        same = False
    if not same:
        raise _Inexpressible(
            f"static `{name}` is a {type(value).__qualname__}: the spec language writes "
            "static values as Python literals"
        )
    return ValueSpec(text, value)


def _dynamic_item(path: str, value: Any) -> Any:
    if value is None:
        return None
    if type(value) is dict:
        return {k: _dynamic_item(f"{path}[{k!r}]", v) for k, v in value.items()}
    if type(value) in (list, tuple):
        items = [_dynamic_item(f"{path}[{i}]", v) for i, v in enumerate(value)]
        return items if type(value) is list else tuple(items)
    if isinstance(value, bool | int | float | complex):
        return ValueSpec(repr(value), value)
    if isinstance(value, jax.Array | np.ndarray | np.generic):
        return _array_item(path, value)
    raise _Inexpressible(
        f"`{path}` is a {type(value).__module__}.{type(value).__qualname__} "
        "(a custom pytree node): the spec language writes dicts, lists and tuples"
    )


def _array_item(path: str, value: Any) -> Any:
    aval = jax.typeof(value)
    if jax.dtypes.issubdtype(aval.dtype, jax.dtypes.prng_key):
        if aval.shape == ():
            return KeySpec()
        raise _Inexpressible(f"`{path}` is an array of {aval.shape} PRNG keys: spec writes one")
    sharding = getattr(value, "sharding", None)
    if sharding is not None and len(getattr(sharding, "device_set", ())) > 1:
        raise _Inexpressible(f"`{path}` is spread over {len(sharding.device_set)} devices")
    if aval.weak_type:
        raise _Inexpressible(f"`{path}` is a weak-typed array: the spec writes Python scalars")
    name = dtype_name(aval.dtype)
    try:
        return ArraySpec(name, tuple(aval.shape))
    except ValueError:
        raise _Inexpressible(f"`{path}` has dtype {name}, which the spec language lacks") from None
