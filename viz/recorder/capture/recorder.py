"""`Recorder`: turns each compilation the listener hears into a `Compile`.

For every compilation it writes down where the function is defined and where it was
called from, its signature per argument leaf, the args spec that reproduces it, and
why it compiled, field by field, against the closest earlier compile of the same
function (the cache lab's comparison, `viz.cache.signature.diff`). A function
object made anew for each call (a `jax.jit(lambda …)` in a loop) is told apart from
the function itself by identity, without keeping it alive. A wrapped function
(`jit(jacfwd(partial(f)))`) is named and placed by the user's `f`
(`viz.recorder.capture.unwrap`), with the layers and the line where the jit was made;
what the persistent cache did is in `viz.recorder.capture.persistent`.

Memory is bounded: the first `details` compiles of each function keep their details;
later ones, and hidden op-by-op compiles, only add to exact counts. A recorder never
raises into the program: an error of its own is counted and the program goes on.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from viz.cache.signature import NEW, Reason, Signature, diff, weak_type_text
from viz.recorder.capture import listener, persistent
from viz.recorder.capture.distributed import ProcessWatch
from viz.recorder.capture.unwrap import defined_at, unwrap
from viz.recorder.display.summary import summary_text
from viz.recorder.model import (
    AVOIDABLE,
    CACHE,
    CLEARED,
    DEFAULT_DETAILS,
    FIRST,
    FIRST_COMPILE,
    NEEDED,
    Compile,
    Persistent,
    Process,
    ProcessRun,
    Recording,
    cache_reason,
    function_key,
    jitted,
    new_data_text,
    short_path,
)
from viz.recorder.storage.journal import Journal
from viz.recorder.tally import Tally

if TYPE_CHECKING:
    from viz.recorder.capture.describe import Described
    from viz.recorder.capture.inputs import Inputs

MAX_IDENTITIES = 100  # function objects and jit wrappers remembered per function
MAX_ERROR_TEXT = 300  # characters of a recorder error's message kept


@dataclass
class _Earlier:
    """An earlier detailed compile of a function: what it was called with, how, and by
    which function object (weakly: None once that object is gone)."""

    signature: Signature
    convention: str  # '(x, y=…)'
    owner: Callable[[], Any]


@dataclass
class _FunctionState:
    earlier: list[_Earlier] = field(default_factory=list)  # the detailed compiles
    objects: list[Any] = field(default_factory=list)  # weak references to function objects
    jit_infos: list[int] = field(default_factory=list)  # ids of the jax.jit wrappers' settings
    compiles: int = 0
    clears: int = 0  # jax.clear_caches() calls seen before its latest compile
    inputs: list[Inputs] = field(default_factory=list)  # the compiles' inputs, by content


class Recorder:
    """Records every compilation while started (any thread)."""

    def __init__(
        self,
        program: ProcessRun | None = None,
        journal: Path | None = None,
        details: int = DEFAULT_DETAILS,
        eager: bool = False,
    ):
        self.program = program or ProcessRun(
            argv=list(sys.argv), cwd=os.getcwd(), started=time.time()
        )
        self.details = max(int(details), 0)
        self.keep_eager = eager
        self.journal = Journal(journal) if journal else None
        self.tally = Tally(self.program)
        self._state: dict[str, _FunctionState] = {}
        self._lock = threading.Lock()
        self._seq = 0
        self.process_watch = ProcessWatch(self.note_process)
        self._keys = persistent.KeyIndex()
        self._hidden: frozenset[str] = frozenset()  # files whose frames are not call sites
        # a framework's jitted function (equinox's fun_wrapped, by function_key) → the
        # user's function it ran (None: more than one): for its compiles with no call
        self._framework_functions: dict[str, _Where | None] = {}
        self._write({"type": "program", **self.program.__dict__})

    def hide_stack(self, frame: FrameType | None) -> None:
        """Leave the files of the user's frames on `frame`'s stack out of call sites and
        stacks: the cell that runs `%%jitscope_record` is the magic's, not a place the
        user's code compiled from."""
        self._hidden = frozenset(file for file, _, _ in listener.user_frames(frame))

    # -- lifetime -------------------------------------------------------------
    def start(self) -> Recorder:
        listener.subscribe(self._on_compile)
        listener.ahead_of_compile(_COMPILE_RECORD.start)
        self.process_watch.start()
        return self

    def stop(self, exit_code: int | None = None) -> None:
        listener.unsubscribe(self._on_compile)
        self.process_watch.stop()
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

    def note_process(self, process: Process) -> None:
        """The program joined a multi-process job: which process of which job it is."""
        with self._lock:
            self.program.process = process
        self._write({"type": "process", **asdict(process)})

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
        return summary_text(self.recording())

    def _repr_html_(self) -> str:
        """A notebook cell shows the recording (viz.notebook), as `--html` writes it."""
        from viz.notebook import recording_cell_html

        return recording_cell_html(self.recording())

    def __repr__(self) -> str:
        s = self.recording().summary
        return f"<Recording: {s.compiles} compiles of {s.functions} function(s)>"

    def save(self, json_path: Path | str | None = None, history: bool = True) -> int | None:
        """Write the JSON (when a path is given) and store it in history; the id or None."""
        from viz.recorder.storage.recordings import save  # the history: when saved, not
        # when a recording starts (`jitscope record` starts it as the program imports JAX)

        return save(self.recording(), json_path=json_path, history=history)

    # -- one compilation ----------------------------------------------------------
    def _write(self, line: dict[str, Any]) -> None:
        if self.journal:
            self.journal.write(line)

    def _on_compile(self, finished: listener.Finished) -> None:
        try:
            self._record(finished)
        except Exception as exc:  # never into the program: count it, keep going
            self._count_failure(finished, f"{type(exc).__name__}: {exc}")

    def _count_failure(self, finished: listener.Finished, message: str) -> None:
        """A compile the recorder failed to describe still counts (under JAX's name for
        it), so the totals stay equal to JAX's; the message goes into the summary."""
        line = {
            "type": "count",
            "function": finished.name,
            "defined_at": "",
            "total_s": finished.trace_s + finished.lower_s + finished.compile_s,
            "kinds": [],
            "eager": False,
            "error": message[:MAX_ERROR_TEXT],
        }
        with self._lock:
            self.tally.add(line)
        self._write(line)

    def _record(self, finished: listener.Finished) -> None:
        call = finished.call
        body = listener.loop_body(call)  # the user's function under a lax loop, op by op
        made = (None if body else finished.jit_made) or listener.JitMade("", bool(body))
        where = _Where(body.name, body.defined_at, None, [body.primitive]) if body else None
        where = where or self._where(finished)
        eager = not body and (
            (call is None and not finished.frames)
            or (_is_jax_function(call, where.fun, where.defined_at) and not made.by_user)
        )
        frames = [f for f in finished.frames if f[0] not in self._hidden]
        call_site = f"{frames[-1][0]}:{frames[-1][1]}" if frames else "?"
        described = _describe().describe(call, finished, self.program.folders)
        with self._lock:
            # jit(f) and jit(grad(f)) are two computations of f, each with its own first
            # compile: compared with the other's, one reads as f made anew on each call
            key = function_key(jitted(where.layers, where.name), where.defined_at)
            state = self._state.setdefault(key, _FunctionState())
            reasons = self._reasons(state, call, described, where, made.at or None)
            hidden = eager and not self.keep_eager
            found = None if hidden else _inputs_of(call, described, where)
            need, need_why = _need(state, found, reasons)
            state.compiles += 1
            disk = self._persistent(finished, where, described)
            common = {
                "function": where.name,
                "defined_at": where.defined_at,
                "total_s": finished.trace_s + finished.lower_s + finished.compile_s,
                "kinds": [r.kind for r in reasons],
                "eager": eager,
                "disk_hit": disk.state == "hit",
                "peak_bytes": None if eager else _peak(finished.executable),
                "need": need,
                "library": finished.library if eager else "",
            }
            if hidden:
                self.tally.add_count({**common, "hidden": True})
                self._write({"type": "count", **common, "hidden": True})
                return
            self._seq += 1  # hidden op-by-op compiles take no number
            if state.compiles > self.details:
                self.tally.add_count(common)
                self._write({"type": "count", **common})
                return
            if described:
                owner = _weak(call.fun if call else None)
                state.earlier.append(_Earlier(described.signature, described.convention, owner))
            compile = Compile(
                seq=self._seq,
                t_s=max(finished.started - self.program.started, 0.0),
                function=where.name,
                defined_at=where.defined_at,
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
                created_at=made.at or None,
                called_from=made.called_from,
                wraps=where.layers,
                transform=_transform(described),
                persistent=disk,
                peak_bytes=common["peak_bytes"],
                need=need,
                need_why=need_why,
                library=common["library"],
            )
            self.tally.add_compile(compile)
            self._write({"type": "compile", **compile.to_dict()})

    def _where(self, finished: listener.Finished) -> _Where:
        """Which function compiled. A compile with no call above it (grad's backward pass
        of an equinox function) is placed by a framework call seen earlier, when only
        one user function ran under the jitted function JAX names."""
        call = finished.call
        if call is None:
            where = _where_compiled(finished)
            return (
                self._framework_functions.get(function_key(where.name, where.defined_at)) or where
            )
        where = _where_called(call)
        if call.user is not None:
            key = function_key(getattr(call.fun, "__name__", ""), defined_at(call.fun))
            with self._lock:
                known = self._framework_functions.setdefault(key, where)
                if known is not None and known.defined_at != where.defined_at:
                    self._framework_functions[key] = None  # two user functions: no guess
        return where

    def _persistent(
        self, finished: listener.Finished, where: _Where, described: Described | None
    ) -> Persistent:
        """What the persistent cache did (off when the compile did not look in it: JAX
        computes a key whenever the cache is enabled, even with no folder to look in)."""
        folder = persistent.cache_dir() if finished.cache is not None else ""
        if not folder:
            hit = finished.persistent_cache
            return Persistent("hit", why="served from disk") if hit else Persistent()
        key, components = persistent.key_components(finished.cache)
        state = "hit" if finished.persistent_cache else "miss"
        match = " · ".join(
            [where.name, where.defined_at.rpartition(":")[0]]
            + [leaf.text for leaf in (described.leaves if described else [])]
        )
        earlier = persistent.nearest(self._keys.entries(folder), match, components)
        stored = state == "miss" and persistent.written(key) is not False
        not_stored = (
            persistent.why_not_written(finished.cache, finished.compile_s)
            if state == "miss" and not stored
            else ""
        )
        record = persistent.explain(
            state, key, components, earlier, stored, not_stored, folder, finished.saved_s,
            finished.compile_s,
        )  # fmt: skip
        took = finished.compile_s if state == "miss" else (earlier.compile_s if earlier else 0.0)
        self._keys.add(
            folder, persistent.Entry(match, key, components, took, stored or state == "hit")
        )
        return record

    def _reasons(
        self,
        state: _FunctionState,
        call: listener.Call | None,
        described: Described | None,
        where: _Where,
        made_at: str | None,
    ) -> list[Reason]:
        """Why this compile: every field that differs from the closest earlier compile."""
        new_object = call is not None and not _seen(state, call.fun)
        new_jit = call is not None and id(call.jit_info) not in state.jit_infos
        if call is not None:
            state.jit_infos[:] = [*state.jit_infos[1 - MAX_IDENTITIES :], id(call.jit_info)]
        clears = listener.clears()
        cleared, state.clears = clears.count > state.clears, clears.count
        if state.compiles == 0:
            return [Reason("(function)", "new_function", FIRST_COMPILE, "first compile")]
        reasons: list[Reason] = []
        if new_object:
            made = short_path(made_at or where.defined_at, self.program.folders)
            what = jitted(where.layers, where.name) if where.layers else "function object"
            reasons.append(
                Reason(
                    "(function)",
                    "new_function",
                    f"{state.compiles} compile(s) of earlier function objects",
                    f"a new {what}, made at {made}",
                )
            )
        if described is not None and state.earlier:
            reasons += _closest_differences(described, _compared(state, call, new_object))
        if not reasons and new_jit:
            reasons.append(
                Reason("(jit)", "config", "other jax.jit settings", "new jax.jit settings")
            )
        elif not reasons:  # a cleared cache only when one was seen: never a guess
            where = short_path(clears.last_at, self.program.folders) if clears.last_at else ""
            reasons.append(cache_reason(cleared, where))
        return reasons


def _inputs_of(
    call: listener.Call | None, described: Described | None, where: _Where
) -> Inputs | None:
    """The compile's inputs by content; None where the call was not seen."""
    if call is None or described is None:
        return None
    # an array by its type, its weak type left out: a Python float then an f32[] array
    # is the same data passed as another kind, an avoidable recompile
    arrays = [
        replace(leaf, weak_type=False).text
        for leaf in described.leaves
        if leaf.static_value is None
    ]
    # a framework's static leaves by what the cache compares of them (identity included)
    arrays += [
        f"{leaf.path}={leaf.value_key or leaf.value}"
        for arg in described.signature.args
        for leaf in arg.leaves
        if leaf.value is not None
    ]
    found = _COMPILE_RECORD.module(INPUTS).inputs
    return found(where.fun or call.fun, arrays, described.static_values, _transform(described))


# differences in what the computation reads; not weak_type: a Python scalar in place of
# an array of the same dtype and shape is the same data in another kind (avoidable)
DATA_KINDS = frozenset({"shape", "dtype", "pytree", "sharding", "device"})


def _need(state: _FunctionState, found: Inputs | None, reasons: list[Reason]) -> tuple[str, str]:
    """FIRST, NEEDED or AVOIDABLE, with why in words: inputs no earlier compile had are
    new data; the same inputs as an earlier compile compiled again for a reason of JAX's
    cache (a new object, a new wrapper, a cleared cache, a weak type alone)."""
    earlier = list(state.inputs)
    if found is not None:
        state.inputs[:] = [*earlier[1 - MAX_IDENTITIES :], found]
    if state.compiles == 0:
        return FIRST, ""
    data = [r for r in reasons if _is_new_data(r)]
    same = next((e for e in reversed(earlier) if found and e.key == found.key), None)
    if data or (found is not None and same is None):
        return NEEDED, _new_data_text(data, found, earlier)
    if found is None and not any(_of_the_cache(r) for r in reasons):
        return NEEDED, "a new function object; what it holds could not be read"
    return AVOIDABLE, _avoidable_text(reasons, found, same)


def _of_the_cache(reason: Reason) -> bool:
    """A reason of how JAX keys its cache, not of the data: a cleared cache, a new object,
    a weak type."""
    return reason.arg == CACHE or reason.after.startswith(NEW) or reason.kind == "weak_type"


def _is_new_data(reason: Reason) -> bool:
    """A difference in what the computation reads: an array's type, a static value
    (one that reads differently, not the same words in a new object), a transformation."""
    if reason.kind in DATA_KINDS:
        return True
    if reason.kind == "static_value":
        return not reason.after.startswith(NEW)
    return reason.arg == _describe().TRANSFORMATION


def _new_data_text(data: list[Reason], found: Inputs | None, earlier: list[Inputs]) -> str:
    """'x: f32[8] → f32[9]', or the closure's data that changed: 'in the closure: data
    f32[200,3] → f32[500,3]'."""
    if data:
        return new_data_text(data[0])
    before = earlier[-1].data if earlier else {}
    now = found.data if found else {}
    changed = [(k, before[k], v) for k, v in now.items() if k in before and before[k] != v]
    if changed:
        name, old, new = changed[0]
        return f"new data in the closure: {name} {old} → {new}"
    if now:
        return f"new data in the closure: other arrays in {', '.join(list(now)[:3])}"
    return "new code or data: a function that reads other code or data"


def _avoidable_text(reasons: list[Reason], found: Inputs | None, same: Inputs | None) -> str:
    """Why the same inputs compiled again, in words."""
    if any(r.arg == CACHE and r.after.startswith(CLEARED) for r in reasons):
        return "jax.clear_caches() emptied the cache"
    for r in reasons:
        if r.kind == "static_value" and r.after.startswith(NEW) and found and same:
            now, then = found.functions.get(r.arg), same.functions.get(r.arg)
            name = r.after.removeprefix(NEW).removeprefix("function ")
            if now and then and now[0] == then[0]:
                wrapper = f"{now[1]} wrapper" if now[1] else "wrapper"
                return f"{r.arg}: a new {wrapper} around the same function {name}"
            return f"{r.arg}: a new function {name}, the same code and data"
    if any(r.kind == "new_function" for r in reasons):
        return "a new function object, the same code and data"
    weak = next((r for r in reasons if r.kind == "weak_type"), None)
    if weak is not None:
        return weak_type_text(weak.arg, weak.before, weak.after)
    if any(r.arg == "(jit)" for r in reasons):
        return "a new jax.jit wrapper around the same function"
    return "no difference found in the inputs"


class _ImportedAhead:
    """Modules `names`, imported in turn on a thread of its own from `start()` on, each
    waited for where first used, and no further (imported there where that thread did
    not, or never started): the first compile's record waits for the describer alone,
    while the memory profile's reader goes on beside the program."""

    def __init__(self, *names: str) -> None:
        self.names = names
        self._done = {name: threading.Event() for name in names}
        self._started = False
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
            thread = threading.Thread(target=self._import, name="jitscope-import", daemon=True)
            thread.start()
        atexit.register(thread.join)  # a program that ends first waits for it

    def _import(self) -> None:
        for name in self.names:
            try:
                with contextlib.suppress(Exception):  # `module()` imports it again, fails there
                    importlib.import_module(name)
            finally:
                self._done[name].set()

    def module(self, name: str) -> Any:
        with self._lock:
            started = self._started
        if started and name in self._done:
            self._done[name].wait()
        return importlib.import_module(name)


# What a compile's record needs and the program's start does not: the call's describer
# and its inputs (the args-spec language: 0.03 s of imports) and the memory profile's
# reader (protobuf's runtime, XLA's schema, the live ranges: 0.07 s), two thirds of the
# recorder's imports, are imported while the program's first compile is in XLA, which
# leaves the GIL free (`listener.ahead_of_compile`), not as the program imports JAX
DESCRIBE, INPUTS, MEMORY_PROFILE = (
    "viz.recorder.capture.describe",
    "viz.recorder.capture.inputs",
    "viz.memory.profile",
)
_COMPILE_RECORD = _ImportedAhead(DESCRIBE, INPUTS, MEMORY_PROFILE)


def _describe() -> Any:
    return _COMPILE_RECORD.module(DESCRIBE)


def _peak(executable: Any) -> int | None:
    """The memory profile's peak of a compiled executable: the program's own compile,
    read in its process. Where XLA gives no buffer assignment (a TPU's executable),
    the footprint XLA's memory stats give. None where it was not seen."""
    if executable is None:
        return None
    try:
        return _COMPILE_RECORD.module(MEMORY_PROFILE).executable_profile(executable).peak_bytes
    except Exception:
        return _footprint(executable)


def _footprint(executable: Any) -> int | None:
    """The arguments, outputs and temporaries less what the outputs alias: XLA packs the
    temporaries by their live ranges, so it is the device memory's peak as the memory
    profile reads it from a dump, to 0.02 % on the chip's programs. Not XLA's
    `peak_memory_in_bytes`: a TPU's leaves the temporaries out (a CPU's too)."""
    try:
        stats = executable.get_compiled_memory_stats()
        held = stats.argument_size_in_bytes + stats.output_size_in_bytes
        return int(held + stats.temp_size_in_bytes - stats.alias_size_in_bytes)
    except Exception:  # no stats from this backend
        return None


def _compared(
    state: _FunctionState, call: listener.Call | None, new_object: bool
) -> list[_Earlier]:
    """The earlier compiles to compare with: a function object that compiled before
    has a cache of its own (JAX keys it by the object), so its own compiles, where they
    are remembered; a new object, every compile of its function."""
    fun = None if call is None or new_object else call.fun
    own = [e for e in state.earlier if fun is not None and e.owner() is fun]
    return own or state.earlier


def _weak(fun: Any) -> Callable[[], Any]:
    try:
        return weakref.ref(fun)
    except TypeError:  # not weakly referable (or None): never its own
        return lambda: None


def _closest_differences(described: Described, earlier: list[_Earlier]) -> list[Reason]:
    """Every difference from the closest earlier compile, the calling convention (`f(x, y)`
    against `f(x, y=…)`, which JAX keys apart) counted as one more."""
    best: list[Reason] | None = None
    names = {a.name for a in described.signature.args}
    for before in reversed(earlier):
        old, convention = before.signature, before.convention
        if names.isdisjoint(a.name for a in old.args):
            # Nothing to pair (a transposed computation's `in[0]` against the call's own
            # names): only the settings, such as the transformation, compare.
            old = replace(old, args=described.signature.args)
        found = [_readable(r) for r in diff(old, described.signature)]
        if convention and described.convention and convention != described.convention:
            found.append(Reason("(arguments)", "pytree", convention, described.convention))
        if best is None or len(found) < len(best):
            best = found
    return best or []


def _readable(reason: Any) -> Reason:
    """A transformation, which the signature keeps as a setting, said in words."""
    before, after = reason.before, reason.after
    if reason.arg == _describe().TRANSFORMATION:
        before = "a direct call" if before == "default" else f"under {before}"
        after = "a direct call" if after == "default" else f"under {after}"
    return Reason(reason.arg, reason.kind, before, after)


def _transform(described: Described | None) -> str | None:
    return dict(described.signature.config).get(_describe().TRANSFORMATION) if described else None


@dataclass
class _Where:
    """Which function compiled: its name, its source line, the layers around it."""

    name: str
    defined_at: str
    fun: Any = None
    layers: list[str] = field(default_factory=list)


def _where_called(call: listener.Call) -> _Where:
    user = call.user  # a framework's call: the user's function inside it
    found = unwrap(user.fun if user else call.fun, user.layers if user else [])
    return _Where(found.name, defined_at(found.fun), found.fun, found.layers)


def _where_compiled(finished: listener.Finished) -> _Where:
    """From JAX's debug info ('inner at path:line') when no call was seen."""
    source = finished.compiled.source if finished.compiled else ""
    name, _, location = source.partition(" at ")
    if location and ":" in location:
        path, _, line = location.rpartition(":")
        return _Where(name or finished.name, f"{os.path.abspath(path)}:{line}")
    return _Where(finished.name, f"{finished.name} (no call and no source seen)")


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
def _is_jax_function(call: listener.Call | None, fun: Any, defined_at: str) -> bool:
    """JAX's op-by-op dispatch (a primitive applied outside jit) or a JAX helper."""
    if call is not None and getattr(call.fun, "_apply_primitive", False):
        return True
    path = defined_at.rpartition(":")[0]
    return bool(path) and listener.is_jax_code(path)
