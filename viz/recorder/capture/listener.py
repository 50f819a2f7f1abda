"""The recorder's ear on JAX: monitoring events and the live stack, no wrapped calls.

JAX announces every compilation through `jax.monitoring`: the trace, the lowering and
the XLA compile each end with a duration event, in the thread that did the work, and
a persistent-cache hit with an event of its own. The listener runs there and then, so
the Python stack above it is the program's: the frame of jit's cache-miss handler
holds the function and the arguments it was called with, and the frames above that
are the user's call site. Calls that hit the jit cache stay on JAX's C++ fast path
and never reach this module.

A compile under a transformation (an inner jit reached by `grad`, `vmap`, `jvp`, or
grad's backward pass) has tracers for arguments, or no cache-miss frame at all: the
frame that compiles (`_pjit_call_impl_python`) holds the computation's own input types
and its debug info (the function's name and line), and the transformation's rule
frame (`_pjit_batcher`, `_pjit_linearize`, …) names the transformation.

JAX does not keep where `jax.jit(...)` was called. The listener watches jit's one
constructor (`viz.jax_private.jit_constructor`) for that: the returned function is JAX's own,
unchanged, so calls stay on the C++ fast path; only its creation is noted. A framework
that jits a function of its own (equinox's `filter_jit`) is placed where the framework
was called. `jax.clear_caches` is watched too, so that a recompile after it is said to
be one, and only then (`clears`).

A framework's call (equinox, haiku, flax) is read in the user's terms by
`viz.recorder.capture.frameworks`, from the frames above jit's cache miss.

One pair of listeners is registered per process, on first use; they hand each
finished compilation to every active `Recorder` (`viz.recorder.capture.recorder`).
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import jax

from viz.recorder.capture import frameworks
from viz.recorder.model import installed_parts

TRACE = "/jax/core/compile/jaxpr_trace_duration"
LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE = "/jax/core/compile/backend_compile_duration"
DISK_HIT = "/jax/compilation_cache/cache_hits"
USES_CACHE = "/jax/compilation_cache/compile_requests_use_cache"  # a key was computed
SAVED = "/jax/compilation_cache/compile_time_saved_sec"

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
    user: frameworks.UserCall | None = None  # the call in the user's terms, via a framework


@dataclass
class Compiled:
    """What the compiling frame holds: the computation's inputs and its debug info."""

    source: str  # JAX's 'name at path:line' of the function, or ''
    arg_names: tuple[str, ...] | None
    in_avals: tuple[Any, ...]


@dataclass
class CacheContext:
    """The persistent cache key's inputs, read from jit's compiling frame."""

    computation: Any  # the MLIR module
    devices: Any  # numpy array of devices
    compile_options: Any
    backend: Any
    host_callbacks: tuple[Any, ...]


@dataclass
class Finished:
    """One compilation as the listener saw it; `viz.recorder.capture.recorder` describes it."""

    name: str  # the event's fun_name without 'jit(…)'
    call: Call | None
    frames: list[tuple[str, int, str]]  # user frames (file, line, function), outermost first
    started: float  # Unix time
    trace_s: float
    lower_s: float
    compile_s: float
    persistent_cache: bool
    thread: str
    compiled: Compiled | None = None
    transform: str | None = None  # 'vmap', 'linearize', 'jvp', 'transpose', …
    cache: CacheContext | None = None  # when the persistent cache was looked in
    saved_s: float | None = None  # JAX's figure for the compile time a disk hit saved
    jit_made: JitMade | None = None  # where jax.jit was called, and from which user line
    executable: Any = None  # XLA's executable, where the compiling frame holds it
    library: str = ""  # the installed package the user called that ran the op, or ''


@dataclass(frozen=True)
class JitMade:
    """Where a jit was made: the line that called `jax.jit` (a library's, when a library
    built it), whether that line is the user's, and the user's line that led there."""

    at: str  # 'path:line'
    by_user: bool
    called_from: str | None = None  # the innermost user frame, when `at` is a library's


@dataclass
class _Pending:
    """The stages of the compilation under way in one thread."""

    name: str = ""
    started: float = 0.0
    trace_s: float = 0.0
    lower_s: float = 0.0
    disk_hit: bool = False
    uses_cache: bool = False
    saved_s: float | None = None
    traced_call: Call | None = None  # for `.lower().compile()`: no cache-miss frame then


@dataclass(frozen=True)
class Clears:
    """The `jax.clear_caches()` calls seen while recording: how many, the last one's place."""

    count: int = 0
    last_at: str = ""  # 'path:line' in user code, or ''


@dataclass
class _Listeners:
    sinks: list[Callable[[Finished], None]] = field(default_factory=list)
    local: threading.local = field(default_factory=threading.local)
    lock: threading.Lock = field(default_factory=threading.Lock)
    registered: bool = False
    clears: Clears = field(default_factory=Clears)
    # called once each, as the next compile is handed to XLA (`ahead_of_compile`)
    ahead: list[Callable[[], None]] = field(default_factory=list)


_state = _Listeners()


def subscribe(sink: Callable[[Finished], None]) -> None:
    with _state.lock:
        if not _state.registered:
            jax.monitoring.register_event_duration_secs_listener(_on_duration)
            jax.monitoring.register_event_listener(_on_event)
            _watch_jit_creation()
            _watch_cache_clears()
            _state.registered = True
        _state.sinks.append(sink)


def ahead_of_compile(then: Callable[[], None]) -> None:
    """`then()` called once, in the thread that compiles, as soon as a program is
    lowered and about to go to XLA (whose compile then leaves the GIL free): for work
    a compile's record will need, started where it costs the program least."""
    with _state.lock:
        _state.ahead.append(then)


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
    elif event == USES_CACHE and _state.sinks:
        _pending().uses_cache = True


def _on_duration(event: str, duration: float, **kwargs: Any) -> None:
    if event == SAVED and _state.sinks:
        _pending().saved_s = duration
    if not _state.sinks or event not in (TRACE, LOWER, COMPILE):
        return
    now = time.time()
    name = _strip(str(kwargs.get("fun_name", "")))
    pending = _pending()
    if event == TRACE:
        _state.local.pending = _Pending(name, now - duration, trace_s=duration)
        _state.local.pending.traced_call = _call_from(_nearest(sys._getframe(1), "_infer_params"))
        return
    if name != pending.name:  # no trace of this function came first: its trace was cached
        pending = _state.local.pending = _Pending(name, now - duration)
    if event == LOWER:
        pending.lower_s = duration
        _run_ahead()
        return
    frame = sys._getframe(1)
    jax_frames = _jax_frames(frame)
    call = _call_from(jax_frames.get("cache_miss")) or pending.traced_call
    finished = Finished(
        name=name,
        call=call,
        frames=user_frames(frame),
        started=pending.started or now - duration,
        trace_s=pending.trace_s,
        lower_s=pending.lower_s,
        compile_s=duration,
        persistent_cache=pending.disk_hit,
        thread=threading.current_thread().name,
        compiled=_compiled_from(jax_frames.get("_pjit_call_impl_python")),
        transform=_transform_of(jax_frames),
        cache=_cache_context(jax_frames.get("_cached_compilation")) if pending.uses_cache else None,
        saved_s=pending.saved_s,
        jit_made=jit_made(call.jit_info) if call else None,
        executable=_executable_from(jax_frames.get("_cached_compilation")),
        library=calling_package(frame),
    )
    _state.local.pending = _Pending()
    for sink in list(_state.sinks):
        sink(finished)


def _run_ahead() -> None:
    if not _state.ahead:
        return
    with _state.lock:
        ahead, _state.ahead = _state.ahead, []
    for then in ahead:
        then()


# The frames between the compile and the user's call that say what compiled and how.
_WANTED = ("cache_miss", "_pjit_call_impl_python", "_cached_compilation")
_RULES = {  # a transformation's rule for jit, by its function's name in JAX
    "_pjit_batcher": "vmap",
    "_pjit_jvp": "jvp",
    "_pjit_linearize": "linearize",
    "_pjit_partial_eval": "linearize",
    "_pjit_transpose": "transpose",
    "_pjit_transpose_fancy": "transpose",
}


def _jax_frames(frame: FrameType | None) -> dict[str, FrameType]:
    """JAX's frames of interest below the first frame outside JAX, innermost of each;
    a transformation rule found on the way is kept under 'rule'."""
    found: dict[str, FrameType] = {}
    while frame is not None:
        code = frame.f_code
        if not code.co_filename.startswith(_JAX_PACKAGES):
            if found.get("cache_miss") is not None or "_pjit_call_impl_python" in found:
                break  # out of JAX above the compile: the rest is the caller's
        elif code.co_name in _WANTED:
            found.setdefault(code.co_name, frame)
            if code.co_name == "cache_miss":
                break
        elif code.co_name in _RULES:
            found.setdefault("rule", frame)
        frame = frame.f_back
    return found


def _transform_of(frames: dict[str, FrameType]) -> str | None:
    rule = frames.get("rule")
    return _RULES[rule.f_code.co_name] if rule is not None else None


def _compiled_from(frame: FrameType | None) -> Compiled | None:
    if frame is None:
        return None
    closed = frame.f_locals.get("jaxpr")
    info = getattr(getattr(closed, "jaxpr", None), "debug_info", None)
    return Compiled(
        source=str(getattr(info, "func_src_info", "") or ""),
        arg_names=getattr(info, "arg_names", None),
        in_avals=tuple(getattr(closed, "in_avals", ())),
    )


def _executable_from(frame: FrameType | None) -> Any:
    """The executable jit's compiling frame just made (the compile event fires as its
    timed block ends, the executable assigned); None where the frame is not seen."""
    return frame.f_locals.get("xla_executable") if frame is not None else None


def _cache_context(frame: FrameType | None) -> CacheContext | None:
    if frame is None:
        return None
    values = frame.f_locals
    return CacheContext(
        computation=values.get("computation"),
        devices=values.get("dev"),
        compile_options=values.get("compile_options"),
        backend=values.get("backend"),
        host_callbacks=tuple(values.get("host_callbacks") or ()),
    )


# -- where jax.jit(...) was called ---------------------------------------------------
_jits: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_MADE = "_jitscope_made_at"  # attribute set on the jitted function JAX returns


def _watch_jit_creation() -> None:
    """Note where each jit is made, from now on. Idempotent."""
    from viz.jax_private import jit_constructor, set_jit_constructor

    make_jit = jit_constructor()  # where this jax lacks it, jits go unplaced
    if make_jit is None or getattr(make_jit, "_jitscope", False):
        return

    @functools.wraps(make_jit)
    def noting_make_jit(fun: Callable, *args: Any, **kwargs: Any) -> Any:
        jitted = make_jit(fun, *args, **kwargs)
        if _state.sinks:
            _note_made(jitted, sys._getframe(1))
        return jitted

    noting_make_jit._jitscope = True  # type: ignore[attr-defined]
    set_jit_constructor(noting_make_jit)


def _note_made(jitted: Any, frame: FrameType | None) -> None:
    """Where jax.jit was called, on the jitted function: the line that called it, past
    jax.jit's own frames and a library's jit helpers (numpyro's `maybe_jit`), so that a
    jit a library builds is placed in the library, with the user's line that led there.
    A jit that a framework makes for the user (equinox's `filter_jit`) is placed where
    the framework was called, in a library too (diffrax's `@eqx.filter_jit`), with no
    user's line where it was made as its library was imported. Never raises."""
    while frame is not None and _is_jit_itself(frame.f_code):
        frame = frame.f_back
    wrapped = False
    while frame is not None and frameworks.is_jit_maker(frame):
        frame, wrapped = frame.f_back, True
    while frame is not None and not wrapped and _is_jit_helper(frame.f_code):
        frame = frame.f_back
    if frame is None:
        return
    by_user = is_user_file(frame.f_code.co_filename)
    user, imported = frame, False
    while user is not None and not is_user_file(user.f_code.co_filename):
        imported = imported or _is_import_machinery(user.f_code.co_filename)
        user = user.f_back
    if imported:  # made once as the library was imported (diffrax's @eqx.filter_jit)
        user = None  # the user's `import` line did not lead to any one call of it
    try:
        setattr(
            jitted,
            _MADE,
            JitMade(
                _place(frame),
                by_user,
                None if by_user or user is None else _place(user),
            ),
        )
        _jits[id(jitted._jit_info)] = jitted
    except (AttributeError, TypeError):
        pass


def _is_import_machinery(filename: str) -> bool:
    """importlib's frames, which run a module's body as it is imported (frozen in
    CPython, plain files where it is not)."""
    return filename.startswith("<frozen importlib") or filename.endswith(
        (f"importlib{os.sep}_bootstrap.py", f"importlib{os.sep}_bootstrap_external.py")
    )


def _place(frame: FrameType) -> str:
    return f"{os.path.abspath(frame.f_code.co_filename)}:{frame.f_lineno}"


def _is_jit_helper(code: Any) -> bool:
    """A library's own function that only calls jax.jit (numpyro's `maybe_jit`): the
    jit is made where the helper is called."""
    return code.co_name.endswith("_jit") and not is_user_file(code.co_filename)


_JIT_ITSELF = ("jit", "<lambda>", "pjit", "make_jit", "reraise_with_filtered_traceback")


def _is_jit_itself(code: Any) -> bool:
    """jax.jit's own frames (the decorator form's lambda too), above make_jit."""
    return code.co_name in _JIT_ITSELF and code.co_filename.startswith(_JAX_PACKAGES)


def _watch_cache_clears() -> None:
    """Count `jax.clear_caches()` calls from now on. Idempotent."""
    clear = jax.clear_caches
    if getattr(clear, "_jitscope", False):
        return

    @functools.wraps(clear)
    def noting_clear_caches() -> None:
        clear()
        frames = user_frames(sys._getframe(1))
        where = f"{frames[-1][0]}:{frames[-1][1]}" if frames else ""
        with _state.lock:
            _state.clears = Clears(_state.clears.count + 1, where)

    noting_clear_caches._jitscope = True  # type: ignore[attr-defined]
    jax.clear_caches = noting_clear_caches


def clears() -> Clears:
    return _state.clears


def jit_made(jit_info: Any) -> JitMade | None:
    """Where the jit with these settings was made, and whether by the user's own code."""
    jitted = _jits.get(id(jit_info))
    if jitted is None or getattr(jitted, "_jit_info", None) is not jit_info:
        return None
    return getattr(jitted, _MADE, None)


def _call_from(frame: FrameType | None) -> Call | None:
    """The function and arguments of jit's `cache_miss(*args, **kwargs)` frame or its
    `_infer_params(fun, ji, args, kwargs)` frame."""
    if frame is None:
        return None
    values = frame.f_locals
    info = values.get("jit_info", values.get("ji"))
    fun = values.get("fun")
    if fun is None or info is None:
        return None
    args, kwargs = tuple(values.get("args", ())), dict(values.get("kwargs", {}))
    return Call(fun, info, args, kwargs, frameworks.user_call(fun, args, kwargs, frame))


def _nearest(frame: FrameType | None, code_name: str) -> FrameType | None:
    while frame is not None:
        code = frame.f_code
        if code.co_name == code_name and code.co_filename.startswith(_JAX_PACKAGES):
            return frame
        frame = frame.f_back
    return None


_user_files: dict[str, bool] = {}


def is_user_file(filename: str) -> bool:
    """Outside JAX, the standard library, jitscope itself and any folder that packages
    are installed into (site-packages of this or another environment)."""
    known = _user_files.get(filename)
    if known is None:
        real = os.path.realpath(filename)
        known = not (
            filename.startswith("<")
            or real.startswith(_LIBRARY_DIRS)
            or bool(installed_parts(real))  # any environment's packages
        )
        _user_files[filename] = known
    return known


@functools.lru_cache(maxsize=4096)
def _real_path(filename: str) -> str:
    """A code file's real path, once per file: the stack is walked at every compile."""
    return os.path.realpath(filename)


def calling_package(frame: FrameType | None) -> str:
    """The installed package whose code called JAX here, as the user called it: where
    the innermost frame outside JAX, jitscope and the standard library is a library's,
    the outermost library below the user's frame ('numpyro' for numpyro's
    print_summary calling numpy calling JAX); '' where that frame is the user's."""
    package = ""
    while frame is not None:
        filename = frame.f_code.co_filename
        if is_user_file(filename):
            return package
        real = _real_path(filename)
        inside = installed_parts(real)
        if inside and not real.startswith((*_JAX_PACKAGES, _VIZ_DIR)):
            package = inside[0].removesuffix(".py")
        frame = frame.f_back
    return package


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
    return _real_path(filename).startswith(_JAX_PACKAGES)


# -- the user's function under a control-flow primitive run outside jit ----------------
_BODIES = {  # a control-flow primitive → its params that hold the user's function, first best
    "scan": ("jaxpr",),
    "while": ("body_jaxpr", "cond_jaxpr"),
    "cond": ("branches",),
}
# the primitive as the user's code calls it (fori_loop runs as a scan or a while)
_LAX_NAMES = {"scan": "lax.scan", "while": "lax.while_loop", "cond": "lax.cond"}


@dataclass(frozen=True)
class LoopBody:
    """The user's function that a `lax.scan`/`fori_loop`/`while_loop`/`cond` compiled
    op by op runs: its name and place as JAX's debug info gives them."""

    primitive: str  # 'lax.scan', 'lax.while_loop', 'lax.cond'
    name: str  # '<lambda>', 'body'
    defined_at: str  # 'path:line'


def loop_body(call: Call | None) -> LoopBody | None:
    """The user's function inside an op-by-op compile of a control-flow primitive (JAX's
    dispatch jits `prim.bind` with the primitive's params in its closure), or None when
    the compile is not one or its function is not the user's."""
    fun = call.fun if call is not None else None
    if not getattr(fun, "_apply_primitive", False):
        return None
    cells = dict(zip(fun.__code__.co_freevars, fun.__closure__ or (), strict=False))
    try:
        prim, params = cells["prim"].cell_contents, cells["params"].cell_contents
    except (KeyError, ValueError):
        return None
    for key in _BODIES.get(getattr(prim, "name", ""), ()):
        held = params.get(key)
        for closed in reversed(held) if isinstance(held, tuple) else (held,):
            info = getattr(getattr(closed, "jaxpr", closed), "debug_info", None)
            name, _, place = str(getattr(info, "func_src_info", "") or "").partition(" at ")
            path, _, line = place.rpartition(":")
            if path and is_user_file(path):
                where = f"{os.path.abspath(path)}:{line}"
                return LoopBody(_LAX_NAMES[prim.name], name, where)
    return None
