"""The recorder's ear on JAX: monitoring events and the live stack, no wrapped calls.

JAX announces every compilation through `jax.monitoring`: the trace, the lowering and
the XLA compile each end with a duration event, in the thread that did the work, and
a persistent-cache hit with an event of its own. The listener runs there and then, so
the Python stack above it is the program's: the frame of jit's cache-miss handler
holds the function and the arguments it was called with, and the frames above that
are the user's call site. Calls that hit the jit cache stay on JAX's C++ fast path
and never reach this module.

One pair of listeners is registered per process, on first use; they hand each
finished compilation to every active `Recorder` (`viz.recorder.session`).
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import jax

TRACE = "/jax/core/compile/jaxpr_trace_duration"
LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE = "/jax/core/compile/backend_compile_duration"
DISK_HIT = "/jax/compilation_cache/cache_hits"

_JAX_DIR = os.path.dirname(os.path.dirname(jax.__file__))  # site-packages holding jax
_JAX_PACKAGES = tuple(
    os.path.join(_JAX_DIR, name) + os.sep for name in ("jax", "jaxlib", "jax_plugins")
)
_VIZ_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_LIBRARY_DIRS = tuple(
    {
        os.path.realpath(p) + os.sep
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (p := sysconfig.get_paths().get(key))
    }
    | {_JAX_DIR + os.sep, _VIZ_DIR}
)
MAX_STACK = 24  # user frames kept per compile


@dataclass
class Call:
    """What jit was called with, read from its cache-miss frame (or trace frame)."""

    fun: Callable
    jit_info: Any  # jax's PjitInfo: static_argnums, static_argnames, fun_signature
    args: tuple
    kwargs: dict[str, Any]


@dataclass
class Finished:
    """One compilation as the listener saw it; `viz.recorder.session` describes it."""

    name: str  # the event's fun_name without 'jit(…)'
    call: Call | None
    frames: list[tuple[str, int, str]]  # user frames (file, line, function), outermost first
    started: float  # Unix time
    trace_s: float
    lower_s: float
    compile_s: float
    persistent_cache: bool
    thread: str


@dataclass
class _Pending:
    """The stages of the compilation under way in one thread."""

    name: str = ""
    started: float = 0.0
    trace_s: float = 0.0
    lower_s: float = 0.0
    disk_hit: bool = False
    traced_call: Call | None = None  # for `.lower().compile()`: no cache-miss frame then


@dataclass
class _Listeners:
    sinks: list[Callable[[Finished], None]] = field(default_factory=list)
    local: threading.local = field(default_factory=threading.local)
    lock: threading.Lock = field(default_factory=threading.Lock)
    registered: bool = False


_state = _Listeners()


def subscribe(sink: Callable[[Finished], None]) -> None:
    with _state.lock:
        if not _state.registered:
            jax.monitoring.register_event_duration_secs_listener(_on_duration)
            jax.monitoring.register_event_listener(_on_event)
            _state.registered = True
        _state.sinks.append(sink)


def unsubscribe(sink: Callable[[Finished], None]) -> None:
    with _state.lock:
        if sink in _state.sinks:
            _state.sinks.remove(sink)


def _pending() -> _Pending:
    pending = getattr(_state.local, "pending", None)
    if pending is None:
        pending = _state.local.pending = _Pending()
    return pending


def _strip(name: str) -> str:
    return name[4:-1] if name.startswith("jit(") and name.endswith(")") else name


def _on_event(event: str, **_: Any) -> None:
    if event == DISK_HIT and _state.sinks:
        _pending().disk_hit = True


def _on_duration(event: str, duration: float, **kwargs: Any) -> None:
    if not _state.sinks or event not in (TRACE, LOWER, COMPILE):
        return
    now = time.time()
    name = _strip(str(kwargs.get("fun_name", "")))
    pending = _pending()
    if event == TRACE:
        _state.local.pending = _Pending(name, now - duration, trace_s=duration)
        _state.local.pending.traced_call = _call_from(sys._getframe(1), "_infer_params")
        return
    if name != pending.name:  # no trace of this function came first: its trace was cached
        pending = _state.local.pending = _Pending(name, now - duration)
    if event == LOWER:
        pending.lower_s = duration
        return
    frame = sys._getframe(1)
    finished = Finished(
        name=name,
        call=_call_from(frame, "cache_miss") or pending.traced_call,
        frames=user_frames(frame),
        started=pending.started or now - duration,
        trace_s=pending.trace_s,
        lower_s=pending.lower_s,
        compile_s=duration,
        persistent_cache=pending.disk_hit,
        thread=threading.current_thread().name,
    )
    _state.local.pending = _Pending()
    for sink in list(_state.sinks):
        sink(finished)


def _call_from(frame: FrameType | None, code_name: str) -> Call | None:
    """The function and arguments of the nearest JAX frame named `code_name`
    (jit's `cache_miss(*args, **kwargs)` or `_infer_params(fun, ji, args, kwargs)`)."""
    while frame is not None:
        code = frame.f_code
        if code.co_name == code_name and code.co_filename.startswith(_JAX_PACKAGES):
            values = frame.f_locals
            info = values.get("jit_info", values.get("ji"))
            fun = values.get("fun")
            if fun is None or info is None:
                return None
            return Call(fun, info, tuple(values.get("args", ())), dict(values.get("kwargs", {})))
        frame = frame.f_back
    return None


_user_files: dict[str, bool] = {}


def is_user_file(filename: str) -> bool:
    """Outside JAX, site-packages, the standard library and jitscope itself."""
    known = _user_files.get(filename)
    if known is None:
        real = os.path.realpath(filename)
        known = not (filename.startswith("<") or real.startswith(_LIBRARY_DIRS))
        _user_files[filename] = known
    return known


def user_frames(frame: FrameType | None) -> list[tuple[str, int, str]]:
    """The user's frames on the stack, outermost first (the call site is the last)."""
    found = []
    while frame is not None and len(found) < MAX_STACK:
        code = frame.f_code
        if is_user_file(code.co_filename):
            found.append((os.path.abspath(code.co_filename), frame.f_lineno, code.co_name))
        frame = frame.f_back
    return found[::-1]


def is_jax_code(filename: str) -> bool:
    return os.path.realpath(filename).startswith(_JAX_PACKAGES)
