"""Request handlers that run inside the worker process (they import jax).

Each handler takes plain keyword arguments and returns a plain dict. A handler
never lets an exception escape: `handle` turns a bug into an error result so the
worker keeps serving.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import jax

from viz.errors import ErrorInfo, ErrorKind, UserCodeError, classify
from viz.report import Report
from viz.source import load_function
from viz.stages import Target

Progress = Callable[[Any], None]


def ping(progress: Progress, warm: bool = False) -> dict[str, Any]:
    """The worker is up; with `warm`, also run the pipeline once on a tiny program, so
    the first real Analyze neither waits for nor measures XLA's start-up."""
    if warm:
        _warm_up()
    devices = jax.devices()
    return {
        "ok": True,
        "jax_version": jax.__version__,
        "platform": devices[0].platform,
        "devices": [str(d) for d in devices],
        "device_count": len(devices),
    }


def _warm_up() -> None:
    import jax.numpy as jnp

    from viz.pipeline import analyze as run_pipeline

    def warm_up(x: Any) -> Any:
        return jnp.tanh(x @ x) + 1.0

    run_pipeline(warm_up, "f32[8,8]", runs=1)


def analyze(
    progress: Progress,
    code: str,
    function: str | None = None,
    args: str = "",
    static: list[str] | None = None,
    device: str = "cpu",
    runs: int = 20,
    memory_limit_bytes: int | None = None,
    x64: bool | None = None,
    donate: list[str] | None = None,
    compiler_options: dict[str, Any] | None = None,
    profile: bool = False,
    mlir: bool = False,
    folder: str | None = None,
) -> dict[str, Any]:
    from viz.pipeline import analyze_target
    from viz.stages import DEFAULT_MEMORY_LIMIT

    static = list(static or [])
    limit = memory_limit_bytes or _memory_limit(DEFAULT_MEMORY_LIMIT)
    try:
        target = Target.from_code(
            code,
            function,
            folder=folder,
            static=static,
            device=device,
            x64=x64,
            memory_limit_bytes=limit,
            donate=tuple(donate or ()),
            compiler_options=dict(compiler_options or {}),
        )
    except UserCodeError as exc:
        report = Report(
            device=device,
            jax_version=jax.__version__,
            function=function or "",
            args=args,
            static=static,
        ).fail(exc.info)
        return report.to_dict(include_models=True)
    return analyze_target(target, args, runs, profile=profile, mlir=mlir).to_dict(
        include_models=True
    )


def _memory_limit(default: int) -> int:
    """The ceiling the parent enforces on this worker (set in its environment)."""
    return int(os.environ.get("JITSCOPE_MEMORY_LIMIT_BYTES", default))


HANDLERS: dict[str, Callable[..., dict[str, Any]]] = {
    "ping": ping,
    "analyze": analyze,
}


def register(name: str) -> Callable[[Callable[..., dict[str, Any]]], Callable[..., dict[str, Any]]]:
    def add(handler: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        HANDLERS[name] = handler
        return handler

    return add


def handle(op: str, kwargs: dict[str, Any], progress: Progress) -> dict[str, Any]:
    handler = HANDLERS.get(op)
    if handler is None:
        return _failure(ErrorInfo(ErrorKind.BAD_REQUEST, f"unknown op {op!r}"))
    try:
        return handler(progress, **kwargs)
    except UserCodeError as exc:
        return _failure(exc.info)
    except Exception as exc:  # a bug in jitscope: report it, keep serving
        return _failure(
            ErrorInfo(
                ErrorKind.INTERNAL_ERROR,
                f"{type(exc).__name__}: {exc}",
                "this is a jitscope bug; please report it",
                detail=traceback.format_exc(),
            )
        )


def _failure(info: ErrorInfo) -> dict[str, Any]:
    return {"ok": False, "error": info.to_dict()}


# -- cache sessions: the real jitted function stays alive between requests ----
# keyed by (owner, code, function, static, device): each browser session has its own.
# Beyond MAX_SESSIONS per owner that owner's least recently used one is dropped, and
# beyond MAX_ALL the worker's, so memory stays bounded and sessions sharing a worker
# keep their own state.
_sessions: OrderedDict[tuple[str, str, str | None, tuple[str, ...], str], Any] = OrderedDict()
MAX_SESSIONS = 4
MAX_ALL = 32


@contextlib.contextmanager
def disk_cache(enabled: bool) -> Iterator[None]:
    """JAX's on-disk compilation cache (in JITSCOPE_HOME, so it survives restarts), on
    for one cache-lab request only: every other request on this worker (Explore's
    measurements, pass-by-pass dumps) compiles with it off. JAX decides once per
    process whether the cache is in use, so the decision is reset on each change."""
    from jax._src import compilation_cache

    from viz.source import home

    before = {
        name: getattr(jax.config, name)
        for name in (
            "jax_compilation_cache_dir",
            "jax_enable_compilation_cache",
            "jax_persistent_cache_min_compile_time_secs",
            "jax_persistent_cache_min_entry_size_bytes",
        )
    }
    wanted = dict(before)
    if enabled:
        wanted["jax_compilation_cache_dir"] = str(home() / "compilation_cache")
        wanted["jax_persistent_cache_min_compile_time_secs"] = 0
        wanted["jax_persistent_cache_min_entry_size_bytes"] = 0
    wanted["jax_enable_compilation_cache"] = enabled
    _configure(wanted, compilation_cache)
    try:
        yield
    finally:
        _configure(before, compilation_cache)


def _configure(settings: dict[str, Any], compilation_cache: Any) -> None:
    for name, value in settings.items():
        jax.config.update(name, value)
    compilation_cache.reset_cache()


def _session(
    code: str,
    function: str | None,
    static: list[str] | None,
    owner: str,
    device: str,
    folder: str | None = None,
) -> Any:
    from viz.cache.session import CacheSession

    key = (owner, code, function, tuple(static or ()), device)
    if key not in _sessions:
        module, fn = load_function(code, function, folder)
        _sessions[key] = CacheSession(fn, list(static or ()), vars(module), device)
        mine = [k for k in _sessions if k[0] == owner]
        for old in mine[: max(len(mine) - MAX_SESSIONS, 0)]:
            del _sessions[old]
        while len(_sessions) > MAX_ALL:
            _sessions.popitem(last=False)
    _sessions.move_to_end(key)
    return _sessions[key]


def _call(
    session: Any,
    args: str,
    placements: dict[str, str] | None,
    fail_on_recompile: bool,
    route: bool = False,
    x64: bool | None = None,
) -> Any:
    try:
        if route and session.router is not None:
            return session.routed_call(args, x64)
        return session.call(args, placements, fail_on_recompile, x64)
    except UserCodeError as exc:
        info = exc.info
    except Exception as exc:
        info = classify(exc, "trace", session.target.user_file)
    return session.record_error(args, info.to_dict())


def _state(session: Any) -> dict[str, Any]:
    return {
        "table": session.table(),
        "events": [e.to_dict() for e in session.events],
        "cache_size": session.jitted._cache_size(),
        "buckets": session.router.table() if session.router else [],
    }


@register("cache_calls")
def cache_calls(
    progress: Progress,
    code: str,
    function: str | None,
    calls: list[str],
    static: list[str] | None = None,
    owner: str = "",
    placements: dict[str, str] | None = None,
    fail_on_recompile: bool = False,
    persistent_cache: bool = False,
    route: bool = False,
    x64: bool | None = None,
    device: str = "cpu",
    folder: str | None = None,
) -> dict[str, Any]:
    """A sweep: many calls in one request (progress after each)."""
    session = _session(code, function, static, owner, device, folder)
    events = []
    with disk_cache(persistent_cache):
        for i, args in enumerate(calls):
            events.append(_call(session, args, placements, fail_on_recompile, route, x64))
            progress({"done": i + 1, "total": len(calls)})
    new = [e.to_dict() for e in events]
    return {"ok": all(e["type"] != "failed" for e in new), **_state(session), "new": new}


@register("cache_call")
def cache_call(progress: Progress, args: str, **kwargs: Any) -> dict[str, Any]:
    """One call; `event` is what it did."""
    result = cache_calls(progress, calls=[args], **kwargs)
    return {**result, "event": result["new"][0]}


@register("cache_state")
def cache_state(
    progress: Progress,
    code: str,
    function: str | None,
    static: list[str] | None = None,
    owner: str = "",
    clear: bool = False,
    device: str = "cpu",
) -> dict[str, Any]:
    session = _session(code, function, static, owner, device)
    if clear:
        session.clear()
    return {"ok": True, **_state(session)}


@register("cache_precompile")
def cache_precompile(
    progress: Progress,
    code: str,
    function: str | None,
    args: str,
    param: str,
    sizes: list[int],
    static: list[str] | None = None,
    owner: str = "",
    device: str = "cpu",
) -> dict[str, Any]:
    """Compile the session's function ahead of time at each batch-size bucket."""
    session = _session(code, function, static, owner, device)
    session.precompile(param, sizes, args)
    return {"ok": True, **_state(session)}


# -- lessons: heavy measurements with progress (served by a separate worker) ----
def _lesson(name: str) -> Callable[..., dict[str, Any]]:
    """A handler that forwards its keyword arguments to `viz.lessons.<name>`."""

    def run(progress: Progress, **kwargs: Any) -> dict[str, Any]:
        from viz.lessons import measure

        return getattr(measure, name)(progress=progress, **kwargs)

    return run


for _name in ("placement", "scaling", "shape_sweep", "bucket_costs"):
    HANDLERS[_name] = _lesson(_name)


@register("passes")
def passes(
    progress: Progress,
    code: str,
    function: str | None,
    args: str,
    static: list[str] | None = None,
    device: str = "cpu",
    x64: bool | None = None,
    donate: list[str] | None = None,
    compiler_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Op and fusion counts after every XLA pass that changed the program, compiled with
    the analysed run's settings."""
    from viz.passes import pass_by_pass

    target = Target.from_code(
        code,
        function,
        static=list(static or ()),
        device=device,
        x64=x64,
        donate=tuple(donate or ()),
        compiler_options=dict(compiler_options or {}),
    )
    return {"ok": True, "steps": pass_by_pass(target.trace(target.args(args)).lower())}
