"""Request handlers that run inside the worker process (they import jax).

Each handler takes its operation's typed request (`viz.worker.protocol`) and returns
its typed reply; `@handles` files it under the request class(es) its `request`
parameter is annotated with, so no operation's name is written here. A handler never
lets an exception escape: `handle` turns a bug into an error reply so the worker keeps
serving.
"""

from __future__ import annotations

import contextlib
import functools
import os
import traceback
import typing
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, TypeVar

import jax

from viz import demo
from viz.cache import clears
from viz.errors import USER_EXITS, ErrorInfo, ErrorKind, UserCodeError, classify
from viz.platforms import DeviceConfig
from viz.progress import STAGES, OnProgress
from viz.report import Report, Subject
from viz.sections import Sections, assemble
from viz.settings import Settings
from viz.source import load_function
from viz.stages import trace
from viz.target import DEFAULT_MEMORY_LIMIT, Target
from viz.worker import protocol as p
from viz.worker.modules import Modules

Handler = Callable[[OnProgress, Any], p.Reply]
H = TypeVar("H", bound=Handler)

HANDLERS: dict[type[p.Request], Handler] = {}


def handles(handler: H) -> H:
    """File `handler` under the request type(s) its `request` parameter is annotated
    with (`p.CacheCalls | p.CacheCall`: both)."""
    hint = typing.get_type_hints(handler)["request"]
    for kind in typing.get_args(hint) or (hint,):
        HANDLERS[kind] = handler
    return handler


@handles
def ping(progress: OnProgress, request: p.Ping) -> p.PingReply:
    """The worker is up; with `warm`, also run the pipeline once on a tiny program, so
    the first real Analyze neither waits for nor measures XLA's start-up."""
    if request.warm:
        _warm_up()
    devices = jax.devices()
    return p.PingReply(
        jax_version=jax.__version__,
        platform=devices[0].platform,
        devices=[str(d) for d in devices],
        device_count=len(devices),
    )


def _warm_up() -> None:
    import jax.numpy as jnp

    from viz.pipeline import analyze

    def warm_up(x: Any) -> Any:
        return jnp.tanh(x @ x) + 1.0

    analyze(warm_up, "f32[8,8]", runs=1)


# the last user module loaded, used again while its code and state are unchanged
MODULES = Modules()


def _target_of(request: p.CodeRequest) -> Target:
    """The request's program, loaded (or its module kept from the last request used
    again: `viz.worker.modules`), with its settings and this worker's limits."""
    s = request.settings
    module, fn = MODULES.function(s.code, s.function, s.folder, s.file)
    return Target.from_settings(
        s,
        fn,
        namespace=vars(module),
        user_file=module.__file__,
        expressions=_expressions(),
        memory_limit_bytes=_memory_limit(DEFAULT_MEMORY_LIMIT),
        memory_limit_of=POOL_BUDGET,
    )


@handles
def analyze(progress: OnProgress, request: p.Analyze) -> p.Analyzed:
    from viz.pipeline import analyze_target

    settings = request.settings
    on_stage = _stage_frames(progress) if request.stream else None
    if on_stage is not None:
        on_stage("load", assemble(Subject.asked(settings), Sections()))
    try:
        target = _target_of(request)
    except UserCodeError as exc:  # what a failed load knew of what it was to analyse
        failed = replace(Subject.asked(settings), jax_version=jax.__version__)
        return p.Analyzed.of(Report.failed(failed, exc.info))
    report = analyze_target(
        target,
        settings.args,
        request.runs,
        profile=request.profile,
        mlir=request.mlir,
        compile_profile=request.compile_profile,
        on_stage=on_stage,
        defer_analyses=True,  # XLA's analyses follow the report's head (`Analyzed.wire`)
        defer_texts=True,  # and so do the IRs' texts, made as their parts are sent
    )
    return p.Analyzed.of(report)


def _stage_frames(progress: OnProgress) -> Callable[[str, Report], None]:
    """A streamed analysis's `on_stage`: each stage as a Progress frame (step k of the
    stages, labelled with the stage under way) carrying what is known so far."""

    def send(stage: str, known: Report) -> None:
        step = p.Progress(STAGES.index(stage), len(STAGES), stage, known)
        progress(step.to_dict())

    return send


@functools.cache
def _backend_error() -> ErrorInfo | None:
    """Why this worker's JAX cannot run anything, or None, in its platform's own terms
    (`viz.platforms`). A `gpu` worker whose jaxlib has no CUDA plugin (or sees no GPU)
    fails on first use, with an empty AssertionError, wherever that is: loading the
    user's module, or tracing; a `tpu` worker fails when another process holds the chip."""
    try:
        jax.devices()
    except Exception as exc:
        error = f"{type(exc).__name__}{': ' + str(exc) if str(exc) else ''}"
        why = DeviceConfig.of_worker().unavailable(jax.__version__, error)
        return ErrorInfo(ErrorKind.DEVICE_UNAVAILABLE, why.message, why.hint, stage="spec")
    return None


def _expressions() -> bool:
    """Whether specs may hold Python expressions: not in demo mode, where a spec is the
    spec language and the sample's own names only."""
    return not demo.enabled()


# what a worker's memory limit is: its pool's whole budget, which the parent enforces
# on every worker's requests together (`viz.worker.limits`); the same for each
POOL_BUDGET = "the pool's memory budget"


def _memory_limit(default: int) -> int:
    """The ceiling the parent enforces on this worker (set in its environment)."""
    return int(os.environ.get("JITSCOPE_MEMORY_LIMIT_BYTES", default))


# What each request is called where a cache lab says what emptied JAX's caches (those
# that clear them on purpose; the user's own code may, in any request).
CALLED: dict[type, str] = {
    p.Analyze: "an analysis in Explore",
    p.CompileProfile: "a compile profile in Explore",
    p.Placement: "the lesson Where to put jit",
    p.Scaling: "the lesson Compile time vs program size",
    p.ShapeSweep: "the lesson Shape sweep",
    p.BucketCosts: "the lesson Batch-size buckets",
}


def handle(request: p.Request, progress: OnProgress) -> p.Reply:
    unusable = _backend_error()
    if unusable is not None:  # every request would fail inside JAX: say why, once
        return request.REPLY.failure(unusable, request)
    clears.watch()
    try:
        with clears.doing(CALLED.get(type(request), f"a {request.OP} request")):
            return HANDLERS[type(request)](progress, request)
    except UserCodeError as exc:
        return request.REPLY.failure(exc.info)
    except USER_EXITS as exc:  # user code outside any stage (a lesson's loop): say what it did
        return request.REPLY.failure(classify(exc, "run"))
    except Exception as exc:  # a bug in jitscope: report it, keep serving
        return request.REPLY.failure(
            ErrorInfo(
                ErrorKind.INTERNAL_ERROR,
                f"{type(exc).__name__}: {exc}",
                "this is a jitscope bug; please report it",
                detail=traceback.format_exc(),
            )
        )


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
    from viz.locations import home

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
    _configure(wanted)
    try:
        yield
    finally:
        _configure(before)


def _configure(settings: dict[str, Any]) -> None:
    from viz.jax_private import reset_compilation_cache

    for name, value in settings.items():
        jax.config.update(name, value)
    reset_compilation_cache()


def _session(settings: Settings, owner: str) -> Any:
    from viz.cache.session import CacheSession

    s = settings
    key = (owner, s.code, s.function, tuple(s.static), s.device)
    if key not in _sessions:
        module, fn = load_function(s.code, s.function, s.folder, s.file)
        _sessions[key] = CacheSession(fn, list(s.static), vars(module), s.device, _expressions())
        mine = [k for k in _sessions if k[0] == owner]
        for old in mine[: max(len(mine) - MAX_SESSIONS, 0)]:
            del _sessions[old]
        while len(_sessions) > MAX_ALL:
            _sessions.popitem(last=False)
    _sessions.move_to_end(key)
    return _sessions[key]


def _call(session: Any, args: str, request: p.CallOptions) -> Any:
    try:
        if request.route and session.router is not None:
            return session.routed_call(args, request.settings.x64)
        settings = request.settings
        return session.call(
            args, request.placements, request.fail_on_recompile, settings.x64, settings.mesh
        )
    except UserCodeError as exc:
        info = exc.info
    except (Exception, *USER_EXITS) as exc:
        info = classify(exc, "trace", session.target.user_file)
    return session.record_error(args, info)


def _state(session: Any, **more: Any) -> p.CacheReply:
    return p.CacheReply(
        table=session.table(),
        events=list(session.events),
        cache_size=session.jitted._cache_size(),
        buckets=session.router.table() if session.router else [],
        **more,
    )


def _session_of(request: p.CacheRequest) -> Any:
    return _session(request.settings, request.owner)


@handles
def cache_calls(progress: OnProgress, request: p.CacheCalls | p.CacheCall) -> p.CacheReply:
    """A sweep or the story: many calls in one request (progress after each); or one
    call, whose reply's `event` is what it did."""
    calls = request.calls if isinstance(request, p.CacheCalls) else [request.settings.args]
    session = _session_of(request)
    if isinstance(request, p.CacheCalls) and request.fresh:
        session.clear()
    new = []
    with disk_cache(request.persistent_cache):
        for i, args in enumerate(calls):
            new.append(_call(session, args, request))
            progress({"done": i + 1, "total": len(calls)})
    ok = all(e.type != "failed" for e in new)
    return _state(session, ok=ok, new=new, event=new[0] if len(new) == 1 else None)


@handles
def cache_state(progress: OnProgress, request: p.CacheState) -> p.CacheReply:
    session = _session_of(request)
    if request.clear:
        session.clear()
    return _state(session)


@handles
def cache_precompile(progress: OnProgress, request: p.CachePrecompile) -> p.CacheReply:
    """Compile the session's function ahead of time at each batch-size bucket."""
    session = _session_of(request)
    session.precompile(request.param, request.sizes, request.settings.args)
    return _state(session)


# -- lessons: heavy measurements with progress (served by a separate worker; on a
# device one process owns, by its one worker: a cache lab there hears of their clears)
# (the sample's name stays behind: in demo mode the code already came from it)
@handles
def placement(progress: OnProgress, request: p.Placement) -> p.PlacementReply:
    from viz.lessons import measure

    r = request
    rows, recommendation = measure.placement(r.settings, r.outer, r.inner, progress, _expressions())
    return p.PlacementReply(rows=rows, outer=r.outer, inner=r.inner, recommendation=recommendation)


@handles
def scaling(progress: OnProgress, request: p.Scaling) -> p.ScalingReply:
    from viz.lessons import measure

    r = request
    rows, exponents = measure.scaling(r.settings, r.sizes, progress, _expressions())
    return p.ScalingReply(rows=rows, exponents=exponents)


@handles
def shape_sweep(progress: OnProgress, request: p.ShapeSweep) -> p.ShapeSweepReply:
    from viz.lessons import measure

    r = request
    rows = measure.shape_sweep(r.settings, r.param, r.axis, r.sizes, progress, _expressions())
    return p.ShapeSweepReply(rows=rows)


@handles
def bucket_costs(progress: OnProgress, request: p.BucketCosts) -> p.BucketCostsReply:
    from viz.lessons import measure

    r = request
    rows = measure.bucket_costs(r.settings, r.batch_arg, r.buckets, progress, _expressions())
    return p.BucketCostsReply(rows=rows)


@handles
def passes(progress: OnProgress, request: p.Passes) -> p.PassesReply:
    """Op and fusion counts after every XLA pass that changed the program, compiled with
    the analysed run's settings."""
    from viz.passes import pass_by_pass

    target = _target_of(request)
    steps = pass_by_pass(trace(target, target.args(request.settings.args)).lower())
    return p.PassesReply(steps=[p.PassStep.from_dict(s) for s in steps])


@handles
def compile_profile(progress: OnProgress, request: p.CompileProfile) -> p.CompileProfiled:
    """Where the compile time went, traced, lowered and compiled once more with the
    analysed run's settings on cleared caches (served by the lessons worker: it
    clears JAX's caches)."""
    from viz.compile_profile.run import profile_compile

    target = _target_of(request)
    profile = profile_compile(target, request.settings.args, progress=progress)
    return p.CompileProfiled(profile=profile)
