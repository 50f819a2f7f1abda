"""Request handlers that run inside the worker process (they import jax).

Each handler takes plain keyword arguments and returns a plain dict. A handler
never lets an exception escape: `handle` turns a bug into an error result so the
worker keeps serving.
"""

from __future__ import annotations

import os
import traceback
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import jax

from viz.errors import UserCodeError
from viz.report import Report
from viz.source import find_function, load_module

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


def load_function(code: str, function: str | None) -> tuple[Any, Any]:
    module = load_module(code)
    return module, find_function(module, code, function)


def analyze(
    progress: Progress,
    code: str,
    function: str | None = None,
    args: str = "",
    static: list[str] | None = None,
    device: str = "cpu",
    runs: int = 20,
    memory_limit_bytes: int | None = None,
) -> dict[str, Any]:
    from viz.pipeline import DEFAULT_MEMORY_LIMIT
    from viz.pipeline import analyze as run_pipeline

    static = list(static or [])
    try:
        module, fn = load_function(code, function)
    except UserCodeError as exc:
        report = Report(
            device=device,
            jax_version=jax.__version__,
            function=function or "",
            args=args,
            static=static,
        ).fail(exc.info.to_dict())
        return report.to_dict(include_models=True)
    report = run_pipeline(
        fn,
        args,
        static,
        device,
        runs,
        namespace=vars(module),
        user_file=module.__file__,
        memory_limit_bytes=memory_limit_bytes or _memory_limit(DEFAULT_MEMORY_LIMIT),
    )
    return report.to_dict(include_models=True)


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
        return {
            "ok": False,
            "error": {
                "kind": "bad_request",
                "message": f"unknown op {op!r}",
                "hint": "",
                "line": None,
            },
        }
    try:
        return handler(progress, **kwargs)
    except UserCodeError as exc:
        return {"ok": False, "error": exc.info.to_dict()}
    except Exception as exc:  # a bug in jitscope: report it, keep serving
        return {
            "ok": False,
            "error": {
                "kind": "internal_error",
                "message": f"{type(exc).__name__}: {exc}",
                "hint": "this is a jitscope bug; please report it",
                "line": None,
                "detail": traceback.format_exc(),
            },
        }


# -- cache sessions: the real jitted function stays alive between requests ----
# keyed by (owner, code, function, static): each browser session has its own; the
# least recently used is dropped beyond MAX_SESSIONS to keep the worker's memory bounded
_sessions: OrderedDict[tuple[str, str, str | None, tuple[str, ...]], Any] = OrderedDict()
MAX_SESSIONS = 4


def use_persistent_cache(enabled: bool) -> None:
    """JAX's on-disk compilation cache in a project-local directory; survives restarts."""
    from viz.source import home

    if enabled and jax.config.jax_compilation_cache_dir is None:
        jax.config.update("jax_compilation_cache_dir", str(home() / "compilation_cache"))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jax.config.update("jax_enable_compilation_cache", enabled)


def _session(code: str, function: str | None, static: list[str] | None, owner: str) -> Any:
    from viz.cache_session import CacheSession

    key = (owner, code, function, tuple(static or ()))
    if key not in _sessions:
        module, fn = load_function(code, function)
        _sessions[key] = CacheSession(fn, list(static or ()), vars(module))
        while len(_sessions) > MAX_SESSIONS:
            _sessions.popitem(last=False)
    _sessions.move_to_end(key)
    return _sessions[key]


def _call(
    session: Any,
    args: str,
    placements: dict[str, str] | None,
    fail_on_recompile: bool,
    route: bool = False,
) -> dict[str, Any]:
    from viz.errors import ErrorInfo, classify
    from viz.spec import SpecError

    try:
        if route and session.router is not None:
            return session.routed_call(args)
        return session.call(args, placements, fail_on_recompile)
    except SpecError as exc:
        info = ErrorInfo("spec_error", str(exc), "check the args spec", stage="spec")
    except Exception as exc:
        info = classify(exc, "trace", session.fn.__code__.co_filename)
    return session.record_error(args, info.to_dict())


def _state(session: Any) -> dict[str, Any]:
    return {
        "table": session.table(),
        "events": session.events,
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
) -> dict[str, Any]:
    """A sweep: many calls in one request (progress after each)."""
    use_persistent_cache(persistent_cache)
    session = _session(code, function, static, owner)
    events = []
    for i, args in enumerate(calls):
        events.append(_call(session, args, placements, fail_on_recompile, route))
        progress({"done": i + 1, "total": len(calls)})
    return {"ok": all("error" not in e for e in events), **_state(session), "new": events}


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
) -> dict[str, Any]:
    session = _session(code, function, static, owner)
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
) -> dict[str, Any]:
    """Compile the session's function ahead of time at each batch-size bucket."""
    session = _session(code, function, static, owner)
    session.precompile(param, sizes, args)
    return {"ok": True, **_state(session)}


# -- lessons: heavy measurements with progress (served by a separate worker) ----
def _lesson(name: str) -> Callable[..., dict[str, Any]]:
    """A handler that forwards its keyword arguments to `viz.lessons.<name>`."""

    def run(progress: Progress, **kwargs: Any) -> dict[str, Any]:
        from viz import lessons

        return getattr(lessons, name)(progress=progress, **kwargs)

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
) -> dict[str, Any]:
    """Op and fusion counts after every XLA pass that changed the program."""
    from viz.passes import pass_by_pass
    from viz.pipeline import static_argnums
    from viz.spec import abstract_args, parse_spec

    module, fn = load_function(code, function)
    abstract = abstract_args(parse_spec(args, vars(module)))
    lowered = jax.jit(fn, static_argnums=static_argnums(fn, static or [])).lower(*abstract)
    return {"ok": True, "steps": pass_by_pass(lowered)}
