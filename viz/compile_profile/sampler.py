"""Where a trace spends its time, by the user's source lines, and how often each ran.

`StackSampler`: a thread of its own takes the tracing thread's stack every
`interval_s` (`sys._current_frames()`), keeps the user's frames of it (`UserCode`),
and weighs the stack by the time since the last one. While it runs, the interpreter
hands the GIL between threads every `interval_s` too (instead of 5 ms), so that the
samples keep their pace through long stretches of JAX's Python.

Why sampling (`bench/compile_profile.py --methods`, the 96-layer transformer's trace on
cleared caches, against a plain one): a sample every 2 ms cost 1.06-1.10× (every 1 ms:
1.10-1.25×), while a hook on every call costs far more: `sys.setprofile` with a
function that does nothing 2.0-2.1×, `jax.profiler`'s Python tracer 2.2-2.4× (and
seconds more to write its trace), `sys.settrace` counting the user's lines 3.2-3.5×.
A sample catches the stack only where the tracing thread lets go of the GIL, so a
long native call is seen after it, still inside the Python function that made it; a
sample weighs the time since the one before (capped: `CAP_INTERVALS`).

`LineCounter`: how many times each statement of the user's code ran, from
`sys.settrace` on the user's frames: exact, but too slow to time with, so it runs in
a trace of its own.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from types import CodeType, FrameType, TracebackType
from typing import Any

from viz.compile_profile.frames import CALLER, USER, UserCode

Line = tuple[CodeType, int]  # a line of a code object
Stack = tuple[Line, ...]  # the user's frames of one stack, outermost first
Step = tuple[CodeType, int | None, int]  # a frame's move from a line (None: its start) to one

INTERVAL_S = 0.002
# A sample weighs the time since the one before, at most this many intervals: on a
# busy machine the sampling thread itself may wait for a core for 100 ms, and that
# wait says nothing about the line it then finds. The weights are scaled back to
# the block's time after.
CAP_INTERVALS = 10


class StackSampler:
    """Samples the thread that enters it: `with StackSampler() as s: trace()`; then
    `s.stacks` (the user's frames of each stack, outermost first → seconds),
    `s.samples` and `s.seconds` (the time the block took, which the weights add up to)."""

    def __init__(self, interval_s: float = INTERVAL_S, user: UserCode | None = None):
        self.interval_s = interval_s
        self.user = user or UserCode()
        self.stacks: Counter[Stack] = Counter()
        self.samples = 0
        self.seconds = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._switch_s = 0.0

    def __enter__(self) -> StackSampler:
        target = threading.get_ident()
        self._switch_s = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_s, self.interval_s))
        self._start = time.perf_counter()
        self._thread = threading.Thread(
            target=self._run, args=(target,), name="jitscope-sampler", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.seconds = time.perf_counter() - self._start
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        sys.setswitchinterval(self._switch_s)
        self._rescale()

    def _run(self, target: int) -> None:
        last = self._start
        cap = CAP_INTERVALS * self.interval_s
        while not self._stop.wait(self.interval_s):
            frame = sys._current_frames().get(target)
            now = time.perf_counter()
            if frame is None:
                return
            self.stacks[self._user_stack(frame)] += min(now - last, cap)
            self.samples += 1
            last = now

    def _rescale(self) -> None:
        """The weights scaled to add up to the block's time (capped ones add up to less)."""
        weighed = sum(self.stacks.values())
        if weighed > 0:
            for stack in self.stacks:
                self.stacks[stack] *= self.seconds / weighed

    def _user_stack(self, frame: FrameType | None) -> Stack:
        """The user's frames of the stack, up to jitscope's own (which called the trace)."""
        lines = []
        kind = self.user
        while frame is not None:
            found = kind(frame.f_code)
            if found == USER:
                lines.append((frame.f_code, frame.f_lineno))
            elif found == CALLER:
                break
            frame = frame.f_back
        lines.reverse()
        return tuple(lines)


class LineCounter:
    """Follows the lines of the user's code as they run in the thread that enters it
    (`with LineCounter() as c: trace()`): `c.steps` counts each move from one line to
    the next within a frame (`viz.compile_profile.lines.statement_runs` turns them into
    how often each statement ran). A tracer set before (a debugger, coverage) is put
    back after."""

    def __init__(self, user: UserCode | None = None):
        self.user = user or UserCode()
        self.steps: Counter[Step] = Counter()
        self._kinds = self.user.known
        self._before: Callable[..., Any] | None = None

    def _call(self, frame: FrameType, event: str, arg: Any) -> Any:
        # called on every Python call while the trace runs: the common case first
        code = frame.f_code
        kind = self._kinds.get(code)
        if kind is None:
            kind = self.user(code)
        if kind != USER:
            return None
        steps = self.steps
        before: list[int | None] = [None]  # this frame's last line

        def line(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "line":
                now = frame.f_lineno
                steps[(code, before[0], now)] += 1
                before[0] = now
            return line

        return line

    def __enter__(self) -> LineCounter:
        self._before = sys.gettrace()
        sys.settrace(self._call)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(self._before)
