"""A `Worker`: the server side of one `python -m viz.worker` child: its environment,
its limits (time, shared memory budget), its request queue, and replacing it when it
dies. The package docstring (`viz/worker/__init__.py`) describes the whole design."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import typing
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from viz import demo as demo_mode  # the property `demo` is this worker's
from viz.platforms import DeviceConfig, held
from viz.where import YOUR_CODE, user_where
from viz.worker import protocol
from viz.worker.frames import (
    ATTACHED,
    PROTOCOL_EXIT,
    Callback,
    FrameReader,
    ProtocolError,
    encode,
    error_result,
    widen,
)
from viz.worker.limits import MemoryBudget, default_memory_limit
from viz.worker.parts import Parts
from viz.worker.processes import descendants_of, kill_family, kill_group, process_rss_bytes
from viz.worker.replies import PARTS
from viz.worker.stuck import STACK_ENV, forget, new_stack_file, stuck_at

DEFAULT_TIMEOUT_S = 60.0
LESSON_TIMEOUT_S = 300.0
POLL_S = 0.05
QUEUE_POLL_S = 0.25
TICK_S = 0.25  # how often `on_tick` hears that a request is still waiting or running
RUNTIME_SAID = 1 << 30  # a runtime's own memory worth naming in a memory stop (a TPU's)
STARTUP_S = 120.0  # a fresh child's JAX import, not counted against a request's limit


def worker_env(device: str, memory_limit: int, demo: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    DeviceConfig.parse(device).worker_env(env)  # JAX_PLATFORMS, and the platform's own
    env["JITSCOPE_MEMORY_LIMIT_BYTES"] = str(memory_limit)
    env["JITSCOPE_DEMO"] = "1" if demo else ""
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


@dataclass
class WorkerStatus:
    device: str
    alive: bool
    pid: int | None
    rss_bytes: int | None
    memory_limit_bytes: int
    requests: int
    restarts: int
    generation: int  # changes whenever the child is replaced (its jit caches are gone)
    reason: str = ""  # why the last child was replaced ("" before the first restart)
    queued: int = 0  # requests waiting behind the one in flight

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _decoded(request: protocol.Request[protocol.ReplyT], payload: Any) -> protocol.ReplyT:
    """The reply to `request` from its JSON, typed as its class's parameter says: its
    `REPLY`, which `protocol.reply_type` read from that same parameter."""
    return typing.cast(protocol.ReplyT, protocol.decode_reply(request, payload))


def _announced(payload: dict[str, Any]) -> Parts | None:
    """The parts a reply's head says follow it (None: none), taken out of its JSON."""
    names = payload.pop(PARTS, None)
    if isinstance(names, list) and names and all(isinstance(n, str) for n in names):
        return Parts(names)
    return None


def _progress_of(
    on_progress: Callable[[protocol.Progress], None] | None,
) -> Callback | None:
    """A progress frame's callback: its payload decoded into a `protocol.Progress` for
    `on_progress` (a garbled one is not worth a failure: it is dropped)."""
    if on_progress is None:
        return None

    def hear(payload: Any) -> None:
        try:
            step = protocol.Progress.from_dict(payload)
        except (TypeError, AttributeError, KeyError, ValueError):
            return
        on_progress(step)

    return hear


class _Ticker:
    """Calls `on_tick` at most every TICK_S, however often it is itself called."""

    def __init__(self, on_tick: Callable[[], None] | None):
        self._on_tick = on_tick
        self._last = time.monotonic()

    def __call__(self) -> None:
        now = time.monotonic()
        if self._on_tick is not None and now - self._last >= TICK_S:
            self._last = now
            self._on_tick()


@dataclass
class _Ticket:
    client: str
    cancelled: bool = False
    running: bool = False


class Worker:
    """A client for one worker process. Thread-safe: requests queue in arrival order,
    one runs at a time, and each waiting one can be told its place."""

    def __init__(
        self,
        device: str = "cpu",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        memory_limit_bytes: int | None = None,
        budget: MemoryBudget | None = None,
        demo: bool | None = None,
    ):
        self.device = device
        self.timeout_s = timeout_s
        self.budget = budget or MemoryBudget(memory_limit_bytes or default_memory_limit())
        self.budget.join(self)
        self._demo = demo  # None: follow JITSCOPE_DEMO, read on every request
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: FrameReader | None = None
        # lifecycle: start, kill, restart, and a request under way. A Lock, not an RLock:
        # a reply's parts are read on a thread of their own, which releases it
        self._lock = threading.Lock()
        self._queue: list[_Ticket] = []
        self._queue_changed = threading.Condition()
        self._next_id = 0
        self.requests = 0
        self.restarts = 0
        self.generation = 0
        self.reason = ""
        self.startup_s = 0.0  # the last request's wait for the child to pick it up
        self._floor = 0  # the child's resident memory once its device opened (its runtime's)
        self._family: dict[int, int] = {}  # the child's descendants at the last look
        self._looked = 0.0
        self._cancelled = False
        self._stack_fd: int | None = None  # the file the child writes its stacks to, asked
        self._user_file = YOUR_CODE  # the file of the request under way's code

    @property
    def demo(self) -> bool:
        return demo_mode.enabled() if self._demo is None else self._demo

    @property
    def memory_limit(self) -> int:
        return self.budget.total

    # -- lifecycle -------------------------------------------------------
    def _start(self) -> None:
        self._stack_fd = new_stack_file()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "viz.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            env={
                **worker_env(self.device, self.budget.total, self.demo),
                STACK_ENV: str(self._stack_fd),
            },
            pass_fds=(self._stack_fd,),
            start_new_session=True,  # its own process group: killed as one
        )
        assert self._proc.stdout is not None
        widen(self._proc.stdout.fileno())
        self._reader = FrameReader(self._proc.stdout.fileno())
        self.generation += 1
        self._floor = 0

    def _kill(self, reason: str = "") -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        # the group id is the child's pid; killing before reaping keeps that id ours.
        # Descendants in sessions of their own are found below the child, or, if it
        # died first, among those seen below it at the last look.
        family = {**self._family, **descendants_of(proc.pid)}
        kill_group(proc.pid)
        kill_family(family)
        proc.wait()
        kill_group(proc.pid)  # anything the child forked while dying
        self._family = {}
        forget(self._stack_fd)
        self._stack_fd = None
        for stream in (proc.stdin, proc.stdout):
            if stream:
                with contextlib.suppress(OSError):
                    stream.close()
        self.restarts += 1
        self.reason = reason or self.reason

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc else None

    def rss(self) -> int | None:
        proc = self._proc
        return process_rss_bytes(proc.pid) if proc else None

    def grown(self) -> int | None:
        """The child's resident memory beyond what it held once its device opened:
        what its requests hold (the budget's measure)."""
        rss = self.rss()
        return None if rss is None else max(rss - self._floor, 0)

    def close(self) -> None:
        with self._lock:
            self._kill("closed")

    def restart(self, reason: str = "someone pressed Restart worker") -> None:
        with self._lock:
            self._kill(reason)
            self._start()

    def cancel(self, client: str | None = None) -> None:
        """Stop `client`'s requests (all requests when None), from another thread: a
        waiting one leaves the queue; the one in flight kills the child."""
        with self._queue_changed:
            tickets = [t for t in self._queue if client is None or t.client == client]
            for ticket in tickets:
                ticket.cancelled = True
            running = any(t.running for t in tickets)
            self._queue_changed.notify_all()
        proc = self._proc
        if running and proc is not None and proc.returncode is None:
            self._cancelled = True
            kill_group(proc.pid)

    def status(self) -> WorkerStatus:
        proc = self._proc
        alive = self.alive()
        with self._queue_changed:
            queued = max(len(self._queue) - 1, 0)
        return WorkerStatus(
            self.device,
            alive,
            proc.pid if proc else None,
            process_rss_bytes(proc.pid) if proc and alive else None,
            self.memory_limit,
            self.requests,
            self.restarts,
            self.generation,
            self.reason,
            queued,
        )

    # -- requests --------------------------------------------------------
    def ask(
        self,
        request: protocol.Request[protocol.ReplyT],
        timeout_s: float | None = None,
        on_progress: Callable[[protocol.Progress], None] | None = None,
        on_queue: Callback | None = None,
        client: str = "",
        on_tick: Callable[[], None] | None = None,
    ) -> protocol.ReplyT:
        """Run `request` in the child and decode the answer into its reply type, once (a
        failure is a reply too: `ok` False and `error` say what happened; nothing the
        user's code does raises here). `on_progress` hears `protocol.Progress`; while
        the request waits behind others, `on_queue(n)` hears how many are ahead (0 when
        it starts); while it waits at all, `on_tick()` is called every TICK_S (a page's
        clock of the stage under way). A reply whose head names parts to come (an
        analysis's texts, fusion map and graph models: `viz.worker.parts`) is returned
        once its head is in; its parts are read into it on a thread that keeps this
        worker's turn until they are in, and whoever reads one first waits for it."""
        if self.demo:
            from viz.worker import admit  # the spec language's numpy: after the app started

            try:
                request = admit.admit(request)
            except admit.Refused as exc:
                return _decoded(request, error_result("demo_refused", str(exc), exc.hint))
        tick = _Ticker(on_tick)
        ticket = _Ticket(client)
        if not self._wait_turn(ticket, on_queue, tick):
            return _decoded(request, error_result("cancelled", "Cancelled before it started.", ""))
        self._lock.acquire()
        reading = False
        try:
            timeout = timeout_s or self.timeout_s
            payload = self._run(request, timeout, _progress_of(on_progress), ticket, tick)
            parts = _announced(payload)
            reply = _decoded(request, payload)
            if reply.error is not None and held(reply.error.message):
                self._kill("another process held the device")  # the next opens it afresh
            if parts is not None:
                reply = typing.cast(protocol.ReplyT, reply.arriving(parts))
                threading.Thread(
                    target=self._read_parts,
                    args=(parts, self._next_id, ticket, timeout),
                    name="jitscope-parts",
                    daemon=True,
                ).start()
                reading = True
        finally:
            if not reading:  # else the parts' reader hands the worker on
                self._lock.release()
                self._leave(ticket)
        return reply

    def _read_parts(self, parts: Parts, request_id: int, ticket: _Ticket, timeout_s: float) -> None:
        """Read the parts a reply's head named into `parts`, then hand the worker (its
        lock and its turn) on. A child that dies, garbles its pipe, runs out of time or
        memory meanwhile is killed: its parts stay missing (`Parts.failure` says why)."""
        failure = ""
        try:
            deadline = time.monotonic() + timeout_s
            while parts.missing and not failure:
                failure = self._next_part(parts, request_id, deadline)
        finally:
            parts.close(failure)
            self._lock.release()
            self._leave(ticket)

    def _next_part(self, parts: Parts, request_id: int, deadline: float) -> str:
        """One look at the pipe for a part: "" while all is well, else what went wrong."""
        assert self._reader is not None
        try:
            message = self._reader.poll(POLL_S)
        except (EOFError, ProtocolError) as exc:
            self._kill("a reply's parts did not arrive")
            return f"the worker stopped sending ({type(exc).__name__})"
        if message is not None and message.get("id") == request_id and message["kind"] == "part":
            parts.put(str(message.get("name")), message.get(ATTACHED, ""))
        if time.monotonic() > deadline:
            self._kill("a reply's parts timed out")
            return "the worker took too long to send them"
        if self._over_budget() is not None:
            return "the worker ran out of memory sending them"
        return ""

    def _leave(self, ticket: _Ticket) -> None:
        """`ticket`'s turn is over: the next request's begins."""
        with self._queue_changed:
            self._queue.remove(ticket)
            self._queue_changed.notify_all()

    def _wait_turn(self, ticket: _Ticket, on_queue: Callback | None, tick: _Ticker) -> bool:
        """Queue up; True when it is `ticket`'s turn, False when it was cancelled."""
        told = None
        with self._queue_changed:
            self._queue.append(ticket)
        while True:
            with self._queue_changed:
                if ticket.cancelled:
                    self._leave(ticket)
                    return False
                ahead = self._queue.index(ticket)
                if ahead == 0:
                    ticket.running = True
                elif told == ahead:
                    self._queue_changed.wait(QUEUE_POLL_S)
            try:  # outside the lock: the callbacks may draw a page…
                if on_queue and told != ahead:
                    on_queue(ahead)
                tick()
            except BaseException:  # …or be interrupted by a rerun: leave the queue
                self._leave(ticket)
                raise
            told = ahead
            if ahead == 0:
                return True

    def _run(
        self,
        request: protocol.Request,
        timeout_s: float,
        on_progress: Callback | None,
        ticket: _Ticket,
        tick: _Ticker,
    ) -> dict[str, Any]:
        self._cancelled = False
        self.requests += 1
        settings = getattr(request, "settings", None)
        self._user_file = getattr(settings, "file", None) or YOUR_CODE
        frame = {"op": request.OP, "kwargs": request.to_dict()}  # the wire: JSON, no pickle
        for attempt in range(2):
            if not self.alive():
                self._kill("the worker had died between requests")
                self._start()
            self._next_id += 1
            assert self._proc is not None and self._proc.stdin is not None
            try:
                self._proc.stdin.write(encode({"id": self._next_id, **frame}))
                self._proc.stdin.flush()
            except OSError:  # it died since: a fresh one gets the request
                self._kill("the worker had died between requests")
                continue
            result = self._wait(self._next_id, timeout_s, on_progress, ticket, tick)
            if result is not None:
                return result
            if attempt == 0:
                self._kill("the worker had died between requests")
        return error_result(
            "worker_crash",
            "Two fresh workers died before they could start the request.",
            "look at the server's log: the worker cannot start on this machine",
        )

    def _wait(
        self,
        request_id: int,
        timeout_s: float,
        on_progress: Callback | None,
        ticket: _Ticket,
        tick: _Ticker,
    ) -> dict[str, Any] | None:
        """The result; None when the child died before it started the request. The
        limit counts from when the child starts the request (after its imports)."""
        sent = time.monotonic()
        deadline = sent + STARTUP_S + timeout_s
        started = False
        assert self._proc is not None and self._reader is not None
        while True:
            try:
                message = self._reader.poll(POLL_S)
            except EOFError:
                return self._crashed() if started or ticket.cancelled else None
            except ProtocolError as exc:
                return self._garbled(str(exc))
            if message is not None and message.get("id") == request_id:
                kind, payload = message["kind"], message.get("payload")
                if kind == "started":
                    started = True
                    self._floor = int(message.get("floor") or 0)
                    self.startup_s = time.monotonic() - sent
                    deadline = time.monotonic() + timeout_s
                elif kind == "result":
                    self._look_at_family(every_s=0)
                    return payload if isinstance(payload, dict) else self._garbled("result")
                elif kind == "progress" and on_progress:
                    on_progress(payload)  # then check the limits like any other pass
            tick()
            if time.monotonic() > deadline:
                return self._timed_out(timeout_s)
            if over := self._over_budget():
                return over
            self._look_at_family()

    def _timed_out(self, timeout_s: float) -> dict[str, Any]:
        """The child killed, and where in the user's code it was stuck, if it was in it
        (a loop that never ends): the line, marked in the editor as other errors are."""
        assert self._proc is not None
        stuck = None
        if self._stack_fd is not None:
            stuck = stuck_at(self._proc.pid, self._stack_fd, self._user_file)
        self._kill("a request timed out")
        if stuck is None:
            return error_result(
                "timeout",
                f"Stopped after {timeout_s:.0f} s: the function (or its compilation) did "
                "not finish in time.",
                "look for an infinite loop, or shrink the problem; the worker was restarted",
            )
        where = user_where(self._user_file, stuck.line)
        return error_result(
            "timeout",
            f"Stopped after {timeout_s:.0f} s in {stuck.function}, at {where}: the "
            "function did not finish in time.",
            f"look for a loop that never ends at {where}, or shrink the problem; the "
            "worker was restarted",
            line=stuck.line,
        )

    def _look_at_family(self, every_s: float = 1.0) -> None:
        """Remember the child's descendants now and then, so that they can be killed
        even after the child died without a word."""
        now = time.monotonic()
        if self._proc is not None and now - self._looked >= every_s:
            self._looked = now
            self._family.update(descendants_of(self._proc.pid))

    def _over_budget(self) -> dict[str, Any] | None:
        held = self.grown()
        if held is None:
            return None
        others = self.budget.others(self) if held > self.budget.total // 8 else 0
        if held + others <= self.budget.total:
            return None
        floor = self._floor
        self._kill("a request ran out of memory")
        shared = f" (the other workers use {others / 2**30:.1f} GiB of it)" if others else ""
        runtime = ""
        if floor > RUNTIME_SAID:
            runtime = f" beyond the {floor / 2**30:.1f} GiB its device's runtime holds"
        return error_result(
            "memory",
            f"Stopped at {held / 2**30:.1f} GiB{runtime}: above the memory limit of "
            f"{self.budget.total / 2**30:.1f} GiB{shared}.",
            "shrink the shapes, or analyze compile-only (runs=0); the worker was restarted",
        )

    def _garbled(self, what: str) -> dict[str, Any]:
        self._kill("a request garbled the worker's pipe")
        return error_result(
            "worker_crash",
            f"The worker sent something that is not a reply ({what}): your code wrote "
            "into the worker's own pipe.",
            "write output with print(); a fresh worker starts on the next request",
        )

    def _crashed(self) -> dict[str, Any]:
        code = self._proc.wait() if self._proc else None
        if self._cancelled:
            self._kill("a measurement was cancelled")
            return error_result("cancelled", "Cancelled.", "")
        self._kill("a request crashed the worker")
        if code == PROTOCOL_EXIT:
            return error_result(
                "worker_crash",
                "Your code closed or replaced the worker's own pipes, so it could not answer.",
                "leave file descriptors you did not open alone; a fresh worker starts on "
                "the next request",
            )
        return error_result(
            "worker_crash",
            f"The worker process died (exit status {code}) while running your code.",
            "look for os._exit, sys.exit or a native crash in your code; a fresh worker "
            "starts on the next request",
        )
