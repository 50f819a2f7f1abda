"""Every use of JAX's private internals, in one room (DESIGN.md: "supported JAX").

jitscope supports the newest three JAX minors the registry serves (0.8, 0.9 and 0.10,
docs/performance.md). Most of what it reads is public (`jax.stages`, `jax.extend.core`,
`jax.monitoring`, MLIR's Python bindings); a few things JAX keeps private, and this
module is the only one of jitscope that reaches for them. Each use is a function with
its version guard and its fallback, so that the next JAX breaks one place, and that
place says what it lost. No private module is imported before a function asks for it.

What it reaches for, and why:

- `jax._src.source_info_util.user_frame`: the innermost frame of the user's code in an
  equation's traceback (the line an op came from). No public API; without it, ops
  carry no line.
- `jax._src.source_info_util.user_frames`: every frame outside JAX of an equation's
  traceback, so that an op a library makes is placed at the user's line that called the
  library. Without it, ops carry no line.
- the `jax._src.callback` logger: a host callback's exception, which the worker reports
  as the run's error, is not logged to the terminal as well. Without it, it is.
- `jax._src.source_info_util.register_exclusion`: jitscope's own files are not the
  user's code, so they stay out of the user frames JAX writes for each op (StableHLO's
  locations, the compiled HLO's stack frames), as JAX's own files do. Without it, each
  op's location ends in a chain of jitscope's frames (the worker, the pipeline); the
  op's line is still found, and that chain is all that is lost.
- `jax._src.core.DropVar` (jax < 0.10; `jax.extend.core.DropVar` after): the type of an
  output an equation drops (`_`), which makes no value.
- `jax._src.core.jaxprs_in_params` (jax < 0.10; `jax.extend.core` after): the jaxprs
  held in an equation's params. Fallback: a walk of the params for jaxprs.
- `pretty_print(source_map=...)` of a jaxpr (jax >= 0.10; the keyword belongs to JAX's
  private printer, though the method is public): for each row of the text, the
  equations' tracebacks it writes, so that a followed line marks its rows. Fallback
  (jax 0.8, 0.9): the text alone, and the app says the rows need jax >= 0.10.
- `jaxlib._jax.Traceback.code_addr2line`: a traceback frame's line, as CPython computes
  it. Fallback: the same from the code object's own line table (`co_lines`).
- `jax._src.compilation_cache.reset_cache` and its `_cache`: JAX decides once per
  process whether the persistent cache is in use; a change of its settings needs that
  decision reset. The cache's folder says whether an entry was written.
- `jax._src.pjit.make_jit`: jit's one constructor, watched by the recorder to note where
  each `jax.jit(...)` was made (the function it returns stays JAX's own).
- `jax._src.distributed.global_state` and `jax._src.xla_bridge`: whether this process is
  part of a multi-process job, read without importing them (the recorder must not start
  JAX's backends).
- `jax._src.cache_key`: how the persistent cache's key is built, component by component,
  to say which component changed when the cache missed.
- `jax._src.lib.tpu` (jaxlib's Mosaic bindings): the TPU dialect, registered in an MLIR
  context, so that a Pallas kernel's Mosaic module (the body of its custom call) can be
  parsed and printed (`viz.platforms.mosaic`). Fallback: no kernel IR text.

The recorder also reads JAX's own frames by name (`_pjit_call_impl_python`, the cache
miss handler's locals: `viz.recorder.capture.listener`); those are names on the stack, not
imports, and are guarded there (a frame not found leaves the compile unexplained).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

# -- jaxprs -------------------------------------------------------------------------


@functools.cache
def drop_var_type() -> type:
    """The type of a dropped equation output (`_` in a jaxpr)."""
    from jax.extend import core

    if hasattr(core, "DropVar"):  # jax >= 0.10
        return core.DropVar
    from jax._src import core as private

    return private.DropVar


def user_frame(traceback: Any) -> Any | None:
    """The innermost frame of the user's code in an equation's traceback (with
    `file_name`, `start_line`, `start_column`, `function_name`), or None."""
    try:
        from jax._src import source_info_util
    except ImportError:
        return None
    return source_info_util.user_frame(traceback)


def user_frames(traceback: Any) -> Iterator[Any]:
    """The frames of an equation's traceback outside JAX (`user_frame`'s kind), the
    innermost first; none where this JAX lacks them."""
    try:
        from jax._src import source_info_util
    except ImportError:
        return iter(())
    return source_info_util.user_frames(traceback)


def quiet_callback_errors() -> None:
    """Keep JAX from logging an exception raised in a host callback (`jax.pure_callback
    failed` and its traceback, on stderr): for a caller that reports it as the run's
    error, with the whole text."""
    import logging

    logging.getLogger("jax._src.callback").setLevel(logging.CRITICAL)


def hide_frames(*prefixes: str) -> None:
    """Keep the frames of files whose names start with `prefixes` out of JAX's user
    frames (the frames it writes for each op)."""
    try:
        from jax._src import source_info_util
    except ImportError:
        return
    for prefix in prefixes:
        source_info_util.register_exclusion(prefix)


@functools.cache
def hide_jitscope_frames() -> None:
    """Take jitscope's package out of JAX's user frames (once per process)."""
    hide_frames(os.path.dirname(__file__) + os.sep)


# The JAX from which a jaxpr's printer keeps its source map (`jaxpr_text`).
JAXPR_ROWS_SINCE = "0.10"


def jaxpr_text(jaxpr: Any) -> tuple[str, list[list[tuple[int, int, Any]]] | None]:
    """A jaxpr's text as `str(jaxpr)` prints it, and for each of its rows the spans
    `(start, end, traceback)` of the equations it writes; None where this JAX's printer
    keeps no source map (jax < 0.10)."""
    source_map: list[list[tuple[int, int, Any]]] = []
    try:
        return jaxpr.pretty_print(source_map=source_map), source_map
    except TypeError:  # the printer takes no source map
        return str(jaxpr), None


def jaxprs_in_params(params: dict[str, Any]) -> Iterator[Any]:
    """The jaxprs (`Jaxpr`, not closed) held in an equation's params, at any depth of
    list or tuple."""
    from jax.extend import core

    public = getattr(core, "jaxprs_in_params", None)  # jax >= 0.10
    if public is not None:
        yield from public(params)
        return
    try:
        from jax._src.core import jaxprs_in_params as private
    except ImportError:
        yield from _walk_params(params.values(), core)
        return
    yield from private(params)


def _walk_params(values: Any, core: Any) -> Iterator[Any]:
    for value in values:
        if isinstance(value, core.ClosedJaxpr):
            yield value.jaxpr
        elif isinstance(value, core.Jaxpr):
            yield value
        elif isinstance(value, list | tuple):
            yield from _walk_params(value, core)


@functools.cache
def code_line_finder() -> Callable[[Any, int], int | None]:
    """`(code, lasti) -> line` for the raw frames of a JAX traceback."""
    try:
        from jaxlib import _jax

        return _jax.Traceback.code_addr2line
    except (ImportError, AttributeError):
        return _line_of


def _line_of(code: Any, lasti: int) -> int | None:
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return line
    return None


# -- the persistent compilation cache -----------------------------------------------


def reset_compilation_cache() -> None:
    """Make JAX decide again whether it uses the persistent cache (after its settings
    changed). A JAX without the function decides at its own time."""
    try:
        from jax._src import compilation_cache
    except ImportError:
        return
    reset = getattr(compilation_cache, "reset_cache", None)
    if reset is not None:
        reset()


def compilation_cache_folder() -> str | None:
    """The folder the persistent cache in use writes to (None: not a folder, or not
    known to this JAX)."""
    from jax._src import compilation_cache

    cache = getattr(compilation_cache, "_cache", None)
    folder = getattr(cache, "path", None) or getattr(
        getattr(cache, "_base_cache", None), "path", None
    )
    return None if folder is None else str(folder)


def compression() -> str:
    """The algorithm JAX compresses cache entries with (part of the key)."""
    from jax._src import compilation_cache

    return "zstandard" if getattr(compilation_cache, "zstandard", None) else "zlib"


def cache_key_hashers(context: Any) -> dict[str, Callable[[Any], None]]:
    """For each component of the persistent cache's key, in the order `cache_key.get`
    hashes them, a function that feeds that component to a hash object. `context`: the
    compile's module, devices, compile options and backend (`CacheContext`)."""
    import jax
    from jax._src import cache_key

    module, backend = context.computation, context.backend
    ignore = (
        cache_key.IgnoreCallbacks.CUSTOM_PARTITIONING
        if jax.config.jax_remove_custom_partitioning_ptr_from_cache_key
        else cache_key.IgnoreCallbacks.NO
    )
    algorithm, version = compression(), jaxlib_version()
    return {
        "computation": lambda h: cache_key._hash_computation(h, module, ignore),
        "jaxlib": lambda h: h.update(version.encode()),
        "backend": lambda h: cache_key._hash_platform(h, backend),
        "xla_flags": lambda h: cache_key._hash_xla_flags(h, cache_key.get_flag_prefixes()),
        "compile_options": lambda h: cache_key._hash_serialized_compile_options(
            h, context.compile_options, strip_device_assignment=backend.platform == "gpu"
        ),
        "devices": lambda h: cache_key._hash_accelerator_config(h, context.devices),
        "compression": lambda h: cache_key._hash_string(h, algorithm),
        "hook": lambda h: cache_key._hash_string(h, cache_key.custom_hook()),
    }


def jaxlib_version() -> str:
    """jaxlib's version, as the key holds it."""
    from jax._src.lib import version_str

    return version_str


def cache_key_hook() -> str:
    """The custom hook's string in the key ('' without one)."""
    from jax._src import cache_key

    return cache_key.custom_hook()


def xla_flag_rules() -> tuple[list[str], set[str]]:
    """(the prefixes of command-line flags JAX puts into the key, the flags it leaves
    out of it)."""
    from jax._src import cache_key

    return cache_key.get_flag_prefixes(), set(cache_key.xla_flags_to_exclude_from_cache_key)


# -- a kernel's own IR -----------------------------------------------------------------


def mosaic_context() -> Any | None:
    """An MLIR context that knows JAX's dialects and the TPU's (Mosaic), where
    unregistered ops still parse; None where this jaxlib has no Mosaic bindings."""
    try:
        from jax._src.lib import tpu
    except ImportError:
        return None
    from jax.interpreters.mlir import make_ir_context

    context = make_ir_context()
    tpu.register_dialect(context)
    context.allow_unregistered_dialects = True
    return context


# -- the recorder ---------------------------------------------------------------------


def jit_constructor() -> Callable | None:
    """jit's one constructor (`jax._src.pjit.make_jit`), or None where this JAX has none
    (the recorder then leaves jits unplaced)."""
    try:
        from jax._src import pjit
    except ImportError:
        return None
    return getattr(pjit, "make_jit", None)


def set_jit_constructor(make_jit: Callable) -> None:
    """Put `make_jit` where JAX's jit looks its constructor up."""
    from jax._src import pjit

    pjit.make_jit = make_jit


def distributed_state() -> Any | None:
    """JAX's distributed state, if jax is imported (only read: never imported here)."""
    module = sys.modules.get("jax._src.distributed")
    return getattr(module, "global_state", None)


def backends_started() -> bool:
    """Whether JAX has started its backends (only read: never imported here)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    started = getattr(bridge, "backends_are_initialized", None)
    return bool(started and started())
