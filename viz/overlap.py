"""Reading the IRs beside XLA's compile, and what keeps that from slowing it.

XLA's compile releases the GIL and, on a big model, takes longer than reading the
jaxpr and the StableHLO, so `viz.pipeline` reads them on a thread meanwhile, in the
worker and in a caller's own process or notebook alike. What makes that thread cost
the compile next to nothing:

- the reader waits until the compile is about to start (`CompileWindow`), runs at idle
  priority while XLA generates code on every core (`Background(idle=True)`,
  `IdlePriority`), and is joined before the analysis returns;
- process-wide: the cyclic garbage collector paused (`gc_paused`) and CPython's switch
  interval shortened (`CompileWindow`) while XLA compiles. Without them a reader beside
  the compile made a 12-layer transformer's `compile_s` 1.10-1.22x a bare compile's in
  a caller's process (it held the GIL each time JAX's Python around XLA wanted it
  back, a full collection of the caller's objects at a time).

In jitscope's own process (the worker calls `own_process()` once at start) the
collector stays paused for the whole analysis. In a caller's, the switch interval is
the caller's again once the compile's window closes, and the collector once the reading
after it is done (`gc_paused(callers_too=True)`), however either ends (an exception, a
KeyboardInterrupt, a timeout's signal).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar, cast

T = TypeVar("T")

_own_process = False  # set once by the worker: the process-wide settings are ours to tune


def own_process(owned: bool = True) -> None:
    """This process is jitscope's own (the worker): `gc_paused` and `CompileWindow` may
    tune its garbage collector and switch interval (`owned=False`: no longer)."""
    global _own_process
    _own_process = owned


def owns_process() -> bool:
    """Whether this process is jitscope's own (the worker), not a caller's."""
    return _own_process


@contextlib.contextmanager
def gc_paused(settle: bool = True, callers_too: bool = False) -> Iterator[None]:
    """No cyclic garbage collection inside the block, in jitscope's own process (in any
    other, the block runs as it is, unless `callers_too`). Timed runs pause it as
    `timeit` does (`settle=False`: a collection mid-sample is not the function's time).
    Reading a 96-layer model allocates a few hundred thousand small objects, which sets
    off full collections that walk every object alive, the jaxpr and the graphs
    included, again and again (a third of the readers' time), and frees nothing: the
    readers make no reference cycles.

    What the block made lives as long as the report: it goes straight to the oldest
    generation (`gc.freeze()` then `gc.unfreeze()` move every object there without
    walking any), which only a full collection walks. Left young, the first collections
    after the block walked all of it three times over (youngest, middle, then a full
    collection it set off): 0.2 s after a 96-layer model's analysis.

    `callers_too`: in a caller's own process as well (`viz.analyze()`'s compile window
    and its reading, where a caller's objects made each full collection longer: a third
    of a 12-layer analysis; its trace and lowering run as `jax.jit`'s would), and in
    the app's, where a page decodes a graph, folds its view or keeps a report (the
    process holds every session's reports: each full collection walked them all). The
    collector is as it was once the block is left, however it is left (an exception, a
    KeyboardInterrupt, a timeout's signal): enabled or not, its thresholds untouched,
    nothing left frozen."""
    if not (_own_process or callers_too):  # a user's process: their collector is theirs
        yield
        return
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if settle and gc.get_freeze_count() == 0:  # never thaw what someone else froze
            gc.freeze()
            gc.unfreeze()
        if was_enabled:
            gc.enable()


def collector_paused(make: Callable[[], T]) -> Callable[[], T]:
    """`make`, run with the collector paused (`gc_paused(callers_too=True)`): a part of
    a caller's report made where first read (`viz.plain.Later`) reads as the analysis
    did, without full collections walking the caller's objects."""

    def made() -> T:
        with gc_paused(callers_too=True):
            return make()

    return made


class CompileWindow:
    """When a reader beside XLA's compile runs, as far as the GIL goes: CPython hands
    the GIL from a busy thread to a waiting one only once the waiter has waited its
    switch interval (5 ms). A reader started before the compile kept the calling
    thread from XLA for that long (5.6 ms on a 12-layer transformer), and a reader
    still busy when XLA returns keeps JAX's Python after the compile waiting as long.

    So the reader waits in `enter()` for `open()`, said just before the compile, and
    holds the GIL only once the calling thread lets it go in XLA; it then shortens the
    interval to 0.5 ms (a shorter one from the start would have the two threads trade
    the GIL every 0.5 ms through JAX's Python before XLA), until `close()` right after
    the compile. The interval is process-wide: overlapping analyses share the short
    one, and the last to close gives the old one back."""

    SHORT_S = 0.0005
    _lock = threading.Lock()
    _shortened = 0  # windows that shortened the interval and are not closed yet
    _saved_s = 0.0  # the interval before the first of them

    def __init__(self) -> None:
        self._opened = threading.Event()
        self._shortened_here = False
        self._closed = False

    def open(self) -> None:
        self._opened.set()

    def enter(self) -> None:
        self._opened.wait()
        cls = type(self)
        with cls._lock:
            if self._closed:  # the compile is over already (it failed at once)
                return
            if cls._shortened == 0:
                cls._saved_s = sys.getswitchinterval()
                sys.setswitchinterval(min(cls._saved_s, self.SHORT_S))
            cls._shortened += 1
            self._shortened_here = True

    def compiling(self) -> bool:
        """Whether the compile has not returned yet."""
        return not self._closed

    def close(self) -> None:
        self._opened.set()  # a reader never waits on a compile that will not come
        cls = type(self)
        with cls._lock:
            self._closed = True
            if self._shortened_here:
                cls._shortened -= 1
                if cls._shortened == 0:
                    sys.setswitchinterval(cls._saved_s)


class Background(Generic[T]):
    """`fn()` on a thread of its own; `result()` waits for it and returns what it
    returned, or raises what it raised. An `idle` thread runs only on the CPU time the
    rest of the process leaves idle (`IdlePriority`) until `resume()`; with a
    `priority` of its own, `fn` lowers it when it sees fit and `resume()` restores it.
    `deferred`: the thread starts where its result is first asked for, not before."""

    def __init__(
        self,
        fn: Callable[[], T],
        name: str = "reader",
        idle: bool = False,
        priority: IdlePriority | None = None,
        deferred: bool = False,
    ):
        self._fn = fn
        self._value: T | None = None
        self._error: BaseException | None = None
        self._idle = idle
        self._priority = IdlePriority() if idle else priority
        self._thread = threading.Thread(target=self._run, name=f"jitscope-{name}", daemon=True)
        self._starting = threading.Lock()
        if not deferred:
            self._thread.start()

    def _run(self) -> None:
        if self._idle and self._priority is not None:
            self._priority.lower()
        try:
            self._value = self._fn()
        except BaseException as exc:  # handed to the caller of result()
            self._error = exc

    def resume(self) -> None:
        """The thread's default priority back, where the system lets it be restored."""
        if self._priority is not None:
            self._priority.restore()

    def start(self) -> None:
        """A deferred thread started now, not waited for (`result()` waits)."""
        with self._starting:
            if self._thread.ident is None:
                self._thread.start()

    def _join(self) -> None:
        self.start()  # deferred, and asked for now
        self._thread.join()

    def result(self) -> T:
        self._join()
        if self._error is not None:
            raise self._error
        return cast(T, self._value)

    def get(self) -> T | None:
        """`result()`, or None where `fn` raised (whoever calls `result()` learns why)."""
        self._join()
        return self._value if self._error is None else None


class IdlePriority:
    """A thread's priority while XLA compiles beside it: Linux's SCHED_IDLE (it runs
    only where a core would idle, so XLA's code generation on every core is not slowed
    at all) where the process may give the thread its normal policy back once the
    compile is done (CAP_SYS_NICE); else nice 19, which it keeps, since an unprivileged
    thread may never raise its priority again (a SCHED_IDLE one then starves, and holds
    the GIL, whenever other processes keep the cores busy). `restorable_only`: no nice
    19 either (a caller's process: once the compile returned, the call waits for what
    the reader has left, which another process keeping the cores busy would starve at
    nice 19). Elsewhere: no change."""

    def __init__(self, restorable_only: bool = False) -> None:
        self._restorable_only = restorable_only
        self._lock = threading.Lock()
        self._tid: int | None = None  # the thread, once lowered to SCHED_IDLE
        self._lowered = False
        self._restored = False

    def lower(self) -> None:
        """The calling thread's priority lowered (once: again does nothing)."""
        tid = threading.get_native_id()
        with self._lock, contextlib.suppress(AttributeError, OSError):
            # elsewhere a native thread id is no process id that setpriority could take
            if self._lowered or self._restored or not sys.platform.startswith("linux"):
                return
            self._lowered = True
            if may_restore_policy():
                os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
                self._tid = tid
            elif not self._restorable_only:
                os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + 19)

    def restore(self) -> None:
        with self._lock, contextlib.suppress(OSError):
            self._restored = True
            if self._tid is not None:
                os.sched_setscheduler(self._tid, os.SCHED_OTHER, os.sched_param(0))


@functools.cache
def may_restore_policy() -> bool:
    """Whether this process may move a SCHED_IDLE thread back to the normal policy:
    tried once, on a thread of its own."""

    def probe() -> None:
        tid = threading.get_native_id()
        with contextlib.suppress(AttributeError, OSError):  # not Linux, or not allowed
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
            allowed.append(True)

    allowed: list[bool] = []
    thread = threading.Thread(target=probe, name="jitscope-priority-probe", daemon=True)
    thread.start()
    thread.join()
    return bool(allowed)
