"""The compile profile of one target: its trace, lower and compile made again on
cleared caches, measured where the time goes (`viz.compile_profile.model`).

1. a trace under the `LineCounter` (how often each user line runs; too slow to time),
   which also pays what only the first trace in a process pays (imports, JAX's first
   uses of its primitives), so that the timed traces after it compare;
2. a plain trace, for what the trace takes unprofiled (`trace_plain_s`);
3. a trace under the `StackSampler`: the time by user line (`trace_s`), and the
   jaxpr whose equations are counted by the lines that made them;
4. its lowering (`lower_s`);
5. its compile under `jax.profiler`, its Python tracer off, inside a span of ours
   (`spans.WINDOW`): XLA's spans read back as a tree, the trace kept for Perfetto.

Every step starts from `jax.clear_caches()`, as a fresh process would (JAX caches
traces, lowerings and executables in memory, and a second jit of the same function
shares them), and JAX's persistent compilation cache is off for the whole profile,
so a compile it would serve from disk runs for real. Clearing the caches costs the
process's other jitted functions a retrace on their next call: the worker serves
profiles from the lessons worker, which clears them for every lesson anyway.

A profiler that fails to start, or a trace that cannot be read, is `error` on a
profile that keeps its trace lines; a failure of the user's code raises UserCodeError.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax

from viz.compile_profile.frames import UserCode
from viz.compile_profile.lines import (
    count_eqns,
    find_loops,
    statement_runs,
    trace_lines,
    unrolled_loops,
    user_files,
)
from viz.compile_profile.model import CompileProfileSection
from viz.compile_profile.repeated import repeated_groups
from viz.compile_profile.sampler import INTERVAL_S, LineCounter, StackSampler
from viz.compile_profile.spans import WINDOW, read_spans
from viz.errors import ErrorInfo, ErrorKind, UserCodeError
from viz.found import Found
from viz.fusion.profile import newest, trace_folder
from viz.ir.model import Graph
from viz.stages import Compiled, Lowered, Traced, trace
from viz.target import Args, Target

STEPS = ("counted trace", "plain trace", "sampled trace", "lower", "profiled compile")


# hears a `viz.progress.Progress` frame's JSON (that module reads the report: not here)
OnProgress = Callable[[dict[str, Any]], None]


def profile_compile(
    target: Target,
    spec: str,
    *,
    jaxpr_graph: Graph | None = None,
    progress: OnProgress | None = None,
    trace_dir: str | None = None,
) -> CompileProfileSection:
    """The compile profile of `target` on the args spec (see the module docstring).

    `jaxpr_graph`: the jaxpr's graph where an analysis read it already (the repeated
    groups are found in it); `trace_dir`: where the profiler writes (default: a new
    folder under $JITSCOPE_HOME/traces)."""
    started = time.perf_counter()
    tell = _Steps(progress)
    args = target.args(spec)
    user = UserCode()
    with persistent_cache_off() as bypassed:
        tell("counted trace")  # first: it also pays what only a process's first trace pays
        with LineCounter(user) as counter:
            _cold_trace(target, args)
        tell("plain trace")
        plain_s = _cold_trace(target, args, collect=True).seconds
        tell("sampled trace")
        jax.clear_caches()
        gc.collect()  # as before the plain one: neither pays for the other's garbage
        with StackSampler(INTERVAL_S, user) as sampler:
            traced = trace(target, args)
        tell("lower")
        lowered = traced.lower()
        tell("profiled compile")
        profile = _profiled_compile(lowered, trace_dir)
    profile.trace_s, profile.trace_plain_s = traced.seconds, plain_s
    profile.lower_s = lowered.seconds
    profile.samples, profile.interval_s = sampler.samples, INTERVAL_S
    profile.persistent_cache = "bypassed" if bypassed else "off"
    runs = statement_runs(counter.steps)
    loops = find_loops(user_files(sampler.stacks, runs))
    eqns = count_eqns(traced.jaxpr, user, loops)
    profile.eqns = eqns.total
    profile.trace_lines, profile.trace_user_s = trace_lines(sampler.stacks, runs, eqns)
    profile.loops = unrolled_loops(loops, runs, eqns)
    profile.repeated = _repeated(traced, jaxpr_graph, profile)
    profile.profile_s = time.perf_counter() - started
    return profile


class _Steps:
    """Progress frames, one per step of STEPS."""

    def __init__(self, progress: OnProgress | None) -> None:
        self.progress = progress
        self.done = 0

    def __call__(self, label: str) -> None:
        if self.progress is not None:
            self.progress({"done": self.done, "total": len(STEPS), "label": label})
        self.done += 1


def _cold_trace(target: Target, args: Args, collect: bool = False) -> Traced:
    """A trace on cleared caches; `collect`: after a full garbage collection, so that
    the traces timed against each other start from the same heap."""
    jax.clear_caches()
    if collect:
        gc.collect()
    return trace(target, args)


@contextlib.contextmanager
def persistent_cache_off() -> Iterator[bool]:
    """JAX's persistent compilation cache off inside the block, and as it was after;
    yields whether it was on (JAX decides once whether it uses the cache: that
    decision is reset on each change)."""
    from viz.jax_private import reset_compilation_cache

    enabled = bool(jax.config.jax_enable_compilation_cache)
    was_on = enabled and bool(jax.config.jax_compilation_cache_dir)
    jax.config.update("jax_enable_compilation_cache", False)
    reset_compilation_cache()
    try:
        yield was_on
    finally:
        jax.config.update("jax_enable_compilation_cache", enabled)
        reset_compilation_cache()


def _profiled_compile(lowered: Lowered, trace_dir: str | None) -> CompileProfileSection:
    """Compile under `jax.profiler` and read XLA's spans; a profiler that fails to
    start leaves the compile unprofiled, and says why in `error`."""
    folder = Path(trace_dir) if trace_dir else trace_folder()
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0  # a hook on every Python call: the compile is XLA's
    try:
        jax.profiler.start_trace(folder, create_perfetto_trace=True, profiler_options=options)
    except Exception as exc:
        compiled = lowered.compile()
        return CompileProfileSection(compile_s=compiled.seconds, error=_profiler_error(exc))
    try:
        compiled = _compile_in_window(lowered)
    finally:
        jax.profiler.stop_trace()
    profile = CompileProfileSection(compile_s=compiled.seconds)
    trace = newest(folder, "perfetto_trace.json.gz")
    profile.trace_file = str(trace) if trace else None
    _read_xla(profile, trace, compiled.seconds, lowered.target.device)
    return profile


def _compile_in_window(lowered: Lowered) -> Compiled:
    with jax.profiler.TraceAnnotation(WINDOW):
        return lowered.compile()


def _read_xla(
    profile: CompileProfileSection, trace: Path | None, compile_s: float, device: str
) -> None:
    """XLA's spans into the profile; what the platform did not emit is said in words
    (the exception itself goes to the error's `detail`, never to its message)."""
    if trace is None:
        profile.error = _unreadable("the profiler wrote no trace file")
        return
    try:
        tree = read_spans(trace, compile_s, device)
    except ValueError as exc:  # no window: the compile left no span of ours in the trace
        profile.error = _unreadable(
            f"the profiler's trace holds no `{WINDOW}` span around the compile", exc
        )
        return
    except Exception as exc:  # a trace this jax writes differently: the lines stay
        profile.error = _unreadable(
            "the profiler's trace is not in the form jitscope reads (open it in Perfetto)", exc
        )
        return
    profile.xla, profile.xla_covered = tree.spans, tree.covered
    profile.kernels, profile.xla_spans = tree.kernels, tree.count
    if not tree.count:
        profile.warnings.append(
            f"XLA emitted no spans of its own for this compile on {device}: only the "
            "compile's total time is known"
        )


def _profiler_error(exc: Exception) -> ErrorInfo:
    return ErrorInfo(
        ErrorKind.PROFILER_UNAVAILABLE,
        f"jax.profiler could not start, so XLA's spans of the compile are missing: "
        f"{type(exc).__name__}: {exc}",
        "another profile may be running in this process (jax.profiler.start_trace, "
        "TensorBoard's profiler): stop it and profile again; the trace lines do not need it",
        stage="compile",
        detail=f"{type(exc).__name__}: {exc}",
    )


def _unreadable(why: str, exc: Exception | None = None) -> ErrorInfo:
    return ErrorInfo(
        ErrorKind.PROFILER_UNAVAILABLE,
        f"XLA's spans of the compile are missing: {why}",
        "the trace lines do not need it; open the trace file in Perfetto instead",
        stage="compile",
        detail="" if exc is None else f"{type(exc).__name__}: {exc}",
    )


def _repeated(traced: Traced, graph: Graph | None, profile: CompileProfileSection) -> list[Any]:
    """The folds of the jaxpr's graph (a reader bug is a warning, not a failure)."""
    try:
        if graph is None:
            from viz.ir.jaxpr import read_jaxpr

            names = traced.target.param_names(len(traced.args.items))
            graph = read_jaxpr(traced.jaxpr, names)
        return repeated_groups(graph)
    except Exception as exc:
        profile.warnings.append(f"could not fold the jaxpr: {type(exc).__name__}: {exc}")
        return []


def compile_profile_section(
    target: Target, spec: str, jaxpr_graph: Graph | None
) -> Found[CompileProfileSection]:
    """Where the compile's time went, after an analysis whose compile worked (a failure
    of the profile is a warning: the analysis stays; so is the profile's own error)."""
    try:
        profile = profile_compile(target, spec, jaxpr_graph=jaxpr_graph)
    except UserCodeError as exc:
        return Found(warning=f"compile profile failed: {exc.info.message}")
    except Exception as exc:  # a bug here must not hide the analysis
        return Found.failed("compile profile failed", exc)
    return Found(profile, profile.error.message if profile.error is not None else "")
