"""The worker: user code runs here, in a child process, never in the caller.

A `Worker` is a client for one `python -m viz.worker` child whose environment is set
before JAX starts (`cpu:8` sets XLA_FLAGS to simulate 8 devices). A `WorkerPool`
holds, per device, `JITSCOPE_WORKERS` such workers (plus one lessons worker each)
and pins every browser session to one of them, so its cache lab sees one real jit
cache and nobody else's restart.

Frames are length-prefixed JSON in both directions. The server never unpickles
what a child sends: a process that runs user code could craft a pickle that runs
code in the server, while JSON only ever decodes to plain data.

The parent enforces the limits; each failure ends only the request in flight:
- time: a request that outlives its timeout kills the child (`timeout`);
- memory: all workers of a pool share one budget (`JITSCOPE_MEMORY_LIMIT_GB`); a
  child whose request pushes the total over it is killed (`memory`);
- crashes: a child that dies mid-request (segfault, `os._exit`, closing the
  worker's own pipes) is reported as `worker_crash` for that request.
Killing a child kills its whole process group, so subprocesses the user's code left
behind go with it. A child that died between requests is replaced and the request
is sent again: it never started, so it cannot be blamed. This module does not
import jax.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import io
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any, BinaryIO

from viz.errors import ErrorInfo

DEFAULT_TIMEOUT_S = 60.0
LESSON_TIMEOUT_S = 300.0
POLL_S = 0.05
QUEUE_POLL_S = 0.25
STARTUP_S = 120.0  # a fresh child's JAX import, not counted against a request's limit
MAX_FRAME = 512 << 20  # a larger header is garbage, not a report
PROTOCOL_EXIT = 75  # the child's exit status when user code broke its pipes
_HEADER = struct.Struct("!Q")
_HIGH_FD = 100  # the child's protocol pipes live above the fds user code plays with

Callback = Callable[[Any], None]


def default_memory_limit() -> int:
    """The budget all workers share: JITSCOPE_MEMORY_LIMIT_GB, else half of this
    machine's memory, at most 16 GiB."""
    if "JITSCOPE_MEMORY_LIMIT_GB" in os.environ:
        return int(float(os.environ["JITSCOPE_MEMORY_LIMIT_GB"]) * 2**30)
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 16 << 30
    return min(total // 2, 16 << 30)


def default_pool_size() -> int:
    """JITSCOPE_WORKERS, else one worker per core, as many as 2 GiB each of the shared
    budget allow, at most 4 (each idle worker holds a JAX runtime, ~0.3 GiB)."""
    with contextlib.suppress(ValueError):  # unset or not a number: the default
        return max(1, int(os.environ.get("JITSCOPE_WORKERS", "")))
    return max(1, min(os.cpu_count() or 1, default_memory_limit() // (2 << 30), 4))


def available_devices() -> list[str]:
    """Device configurations the worker can serve on this machine."""
    devices = ["cpu", "cpu:8"]
    if shutil.which("nvidia-smi"):
        devices.insert(0, "gpu")
    return devices


def worker_env(device: str, memory_limit: int, demo: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    platform, _, count = device.partition(":")
    env["JAX_PLATFORMS"] = {"gpu": "cuda"}.get(platform, platform)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f]
    if platform == "cpu" and count:
        flags.append(f"--xla_force_host_platform_device_count={int(count)}")
    env["XLA_FLAGS"] = " ".join(flags)
    env["JITSCOPE_MEMORY_LIMIT_BYTES"] = str(memory_limit)
    env["JITSCOPE_DEMO"] = "1" if demo else ""
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


# -- frames: length-prefixed JSON ------------------------------------------------
class ProtocolError(ValueError):
    """A frame that is not what a worker sends: garbage on the pipe."""


def _plain(value: Any) -> Any:
    """JSON's fallback for what reports may hold besides dicts, lists and numbers."""
    if hasattr(value, "item") and hasattr(value, "dtype"):  # numpy scalars
        return value.item() if getattr(value, "ndim", 0) == 0 else value.tolist()
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return str(value)


def _keys_to_str(value: Any) -> Any:
    """A copy whose dict keys are all strings (JSON refuses tuple keys)."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): _keys_to_str(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_keys_to_str(v) for v in value]
    return value


def encode(message: Any) -> bytes:
    """One frame. NaN and ±inf travel as JSON's NaN/Infinity extensions (Python's json
    reads them back); tuples become lists; bytes become text."""
    try:
        data = json.dumps(message, default=_plain, separators=(",", ":"))
    except (TypeError, ValueError):  # tuple keys, or a cycle made of plain containers
        data = json.dumps(_keys_to_str(message), default=_plain, separators=(",", ":"))
    raw = data.encode("utf-8", "surrogatepass")
    return _HEADER.pack(len(raw)) + raw


def decode(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"not a JSON frame: {type(exc).__name__}") from None


def write_message(stream: BinaryIO, message: Any) -> None:
    stream.write(encode(message))
    stream.flush()


def read_message(stream: BinaryIO) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME:
        raise ProtocolError(f"frame of {size} bytes")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return decode(data)


def error_result(kind: str, message: str, hint: str) -> dict[str, Any]:
    """A failure the worker itself saw (the kind is checked like every other)."""
    return {"ok": False, "error": ErrorInfo(kind, message, hint, stage="worker").to_dict()}


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


class _Reader:
    """Reads frames from a pipe without ever blocking past a deadline."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buffer = b""
        self._poller = select.poll()  # not select(): a busy server has fds above 1023
        self._poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)

    def poll(self, wait_s: float) -> Any | None:
        """A message if one is complete within `wait_s`; None otherwise; EOFError if
        closed; ProtocolError for garbage."""
        if self._poller.poll(wait_s * 1000):
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise EOFError
            self.buffer += chunk
        if len(self.buffer) < _HEADER.size:
            return None
        (size,) = _HEADER.unpack_from(self.buffer)
        if size > MAX_FRAME:
            raise ProtocolError(f"frame of {size} bytes")
        if len(self.buffer) < _HEADER.size + size:
            return None
        data = self.buffer[_HEADER.size : _HEADER.size + size]
        self.buffer = self.buffer[_HEADER.size + size :]
        message = decode(data)
        if not (isinstance(message, dict) and isinstance(message.get("kind"), str)):
            raise ProtocolError("a frame that is not a worker message")
        return message


def _rss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _kill_group(pgid: int) -> None:
    """SIGKILL every process in the group (the child and whatever it started)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _stat(pid: int | str) -> tuple[int, int] | None:
    """(parent pid, start time) of a process, from /proc; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return int(fields[1]), int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def _descendants(root: int) -> dict[int, int]:
    """pid -> start time of every process below `root`. The child is a subreaper, so
    even daemons that left its process group still hang below it while it lives."""
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(entry)):
            children.setdefault(stat[0], []).append((int(entry), stat[1]))
    found: dict[int, int] = {}
    stack = list(children.get(root, []))
    while stack:
        pid, started = stack.pop()
        found[pid] = started
        stack.extend(children.get(pid, []))
    return found


def _kill_family(family: dict[int, int]) -> None:
    """SIGKILL each process that is still the one seen (same pid and start time)."""
    for pid, started in family.items():
        stat = _stat(pid)
        if stat and stat[1] == started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


class MemoryBudget:
    """One memory budget shared by every worker of a pool: a request that pushes the
    pool's total resident memory over it stops (the worker running it is the one
    growing). Thread-safe."""

    def __init__(self, total_bytes: int):
        self.total = total_bytes
        self._members: list[Worker] = []
        self._lock = threading.Lock()

    def join(self, worker: Worker) -> None:
        with self._lock:
            self._members.append(worker)

    def share(self) -> int:
        """What one worker may plan for (the pipeline refuses larger inputs up front)."""
        with self._lock:
            return self.total // max(len(self._members), 1)

    def others(self, worker: Worker) -> int:
        with self._lock:
            members = [w for w in self._members if w is not worker]
        return sum(w.rss() or 0 for w in members)


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
        self._reader: _Reader | None = None
        self._lock = threading.RLock()  # lifecycle: start, kill, restart
        self._queue: list[_Ticket] = []
        self._queue_changed = threading.Condition()
        self._next_id = 0
        self.requests = 0
        self.restarts = 0
        self.generation = 0
        self.reason = ""
        self.startup_s = 0.0  # the last request's wait for the child to pick it up
        self._family: dict[int, int] = {}  # the child's descendants at the last look
        self._looked = 0.0
        self._cancelled = False

    @property
    def demo(self) -> bool:
        from viz import demo

        return demo.enabled() if self._demo is None else self._demo

    @property
    def memory_limit(self) -> int:
        return self.budget.total

    # -- lifecycle -------------------------------------------------------
    def _start(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "viz.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            env=worker_env(self.device, self.budget.share(), self.demo),
            start_new_session=True,  # its own process group: killed as one
        )
        assert self._proc.stdout is not None
        self._reader = _Reader(self._proc.stdout.fileno())
        self.generation += 1

    def _kill(self, reason: str = "") -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        # the group id is the child's pid; killing before reaping keeps that id ours.
        # Descendants in sessions of their own are found below the child, or, if it
        # died first, among those seen below it at the last look.
        family = {**self._family, **_descendants(proc.pid)}
        _kill_group(proc.pid)
        _kill_family(family)
        proc.wait()
        _kill_group(proc.pid)  # anything the child forked while dying
        self._family = {}
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
        return _rss_bytes(proc.pid) if proc else None

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
            _kill_group(proc.pid)

    def status(self) -> WorkerStatus:
        proc = self._proc
        alive = self.alive()
        with self._queue_changed:
            queued = max(len(self._queue) - 1, 0)
        return WorkerStatus(
            self.device,
            alive,
            proc.pid if proc else None,
            _rss_bytes(proc.pid) if proc and alive else None,
            self.memory_limit,
            self.requests,
            self.restarts,
            self.generation,
            self.reason,
            queued,
        )

    # -- requests --------------------------------------------------------
    def request(
        self,
        op: str,
        timeout_s: float | None = None,
        on_progress: Callback | None = None,
        on_queue: Callback | None = None,
        client: str = "",
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Run `op` in the child; always returns a dict (errors included), never raises
        for anything the user's code does. While it waits behind other requests,
        `on_queue(n)` hears how many are ahead (0 when it starts)."""
        if self.demo:
            from viz import demo

            try:
                kwargs = demo.admit(op, kwargs)
            except demo.Refused as exc:
                return error_result("demo_refused", str(exc), exc.hint)
        ticket = _Ticket(client)
        if not self._wait_turn(ticket, on_queue):
            return error_result("cancelled", "Cancelled before it started.", "")
        try:
            with self._lock:
                return self._run(op, kwargs, timeout_s or self.timeout_s, on_progress, ticket)
        finally:
            with self._queue_changed:
                self._queue.remove(ticket)
                self._queue_changed.notify_all()

    def _wait_turn(self, ticket: _Ticket, on_queue: Callback | None) -> bool:
        """Queue up; True when it is `ticket`'s turn, False when it was cancelled."""
        told = None
        with self._queue_changed:
            self._queue.append(ticket)
        while True:
            with self._queue_changed:
                if ticket.cancelled:
                    self._queue.remove(ticket)
                    self._queue_changed.notify_all()
                    return False
                ahead = self._queue.index(ticket)
                if ahead == 0:
                    ticket.running = True
                elif told == ahead:
                    self._queue_changed.wait(QUEUE_POLL_S)
                    continue
            if on_queue and told != ahead:
                try:  # outside the lock: the callback may draw a page…
                    on_queue(ahead)
                except BaseException:  # …or be interrupted by a rerun: leave the queue
                    with self._queue_changed:
                        self._queue.remove(ticket)
                        self._queue_changed.notify_all()
                    raise
            told = ahead
            if ahead == 0:
                return True

    def _run(
        self,
        op: str,
        kwargs: dict[str, Any],
        timeout_s: float,
        on_progress: Callback | None,
        ticket: _Ticket,
    ) -> dict[str, Any]:
        self._cancelled = False
        self.requests += 1
        for attempt in range(2):
            if not self.alive():
                self._kill("the worker had died between requests")
                self._start()
            self._next_id += 1
            assert self._proc is not None and self._proc.stdin is not None
            try:
                self._proc.stdin.write(encode({"id": self._next_id, "op": op, "kwargs": kwargs}))
                self._proc.stdin.flush()
            except OSError:  # it died since: a fresh one gets the request
                self._kill("the worker had died between requests")
                continue
            result = self._wait(self._next_id, timeout_s, on_progress, ticket)
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
        self, request_id: int, timeout_s: float, on_progress: Callback | None, ticket: _Ticket
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
                    self.startup_s = time.monotonic() - sent
                    deadline = time.monotonic() + timeout_s
                elif kind == "result":
                    self._look_at_family(every_s=0)
                    return payload if isinstance(payload, dict) else self._garbled("result")
                elif kind == "progress" and on_progress:
                    on_progress(payload)  # then check the limits like any other pass
            if time.monotonic() > deadline:
                self._kill("a request timed out")
                return error_result(
                    "timeout",
                    f"Stopped after {timeout_s:.0f} s: the function (or its "
                    "compilation) did not finish in time.",
                    "look for an infinite loop, or shrink the problem; the worker was restarted",
                )
            if over := self._over_budget():
                return over
            self._look_at_family()

    def _look_at_family(self, every_s: float = 1.0) -> None:
        """Remember the child's descendants now and then, so that they can be killed
        even after the child died without a word."""
        now = time.monotonic()
        if self._proc is not None and now - self._looked >= every_s:
            self._looked = now
            self._family.update(_descendants(self._proc.pid))

    def _over_budget(self) -> dict[str, Any] | None:
        rss = self.rss()
        if rss is None:
            return None
        others = self.budget.others(self) if rss > self.budget.total // 8 else 0
        if rss + others <= self.budget.total:
            return None
        self._kill("a request ran out of memory")
        shared = f" (the other workers use {others / 2**30:.1f} GiB of it)" if others else ""
        return error_result(
            "memory",
            f"Stopped at {rss / 2**30:.1f} GiB: above the memory limit of "
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


class WorkerPool:
    """Per device, `size` slots, each a main worker and a lessons worker, created on
    first use; all share one memory budget. Each client (browser session) is pinned
    to one slot, the one with the fewest clients when it first asks. Thread-safe."""

    MAX_CLIENTS = 4096  # pins remembered (browser sessions end without a word)

    def __init__(
        self,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        size: int | None = None,
        memory_limit_bytes: int | None = None,
        demo: bool | None = None,
    ):
        self.timeout_s = timeout_s
        self.size = size or default_pool_size()
        self.budget = MemoryBudget(memory_limit_bytes or default_memory_limit())
        self.demo = demo
        self._workers: dict[tuple[str, str, int], Worker] = {}
        self._pins: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        atexit.register(self.close)

    def get(self, device: str, role: str = "main", slot: int = 0) -> Worker:
        """Slot `slot`'s worker for `device`; lessons get workers of their own (role
        'lessons') so that clearing caches for cold measurements never touches the
        cache lab."""
        with self._lock:
            key = (device, role, slot % self.size)
            if key not in self._workers:
                timeout = self.timeout_s if role == "main" else LESSON_TIMEOUT_S
                self._workers[key] = Worker(device, timeout, budget=self.budget, demo=self.demo)
            return self._workers[key]

    def slot(self, client: str) -> int:
        """The slot `client` is pinned to (assigned on first call)."""
        with self._lock:
            if client not in self._pins:
                load = [0] * self.size
                for pinned in self._pins.values():
                    load[pinned] += 1
                self._pins[client] = load.index(min(load))
                while len(self._pins) > self.MAX_CLIENTS:
                    self._pins.popitem(last=False)
            self._pins.move_to_end(client)
            return self._pins[client]

    def worker_for(self, client: str, device: str, role: str = "main") -> Worker:
        return self.get(device, role, self.slot(client))

    def warm(self, device: str) -> None:
        """Start `device`'s main workers one after another in the background, each
        warmed by one tiny analysis (JAX imports and XLA's start-up take a while; the
        first Analyze should neither wait for them nor measure them)."""

        def ping_all() -> None:
            for slot in range(self.size):
                self.get(device, "main", slot).request("ping", warm=True)

        threading.Thread(target=ping_all, daemon=True).start()

    def workers(self) -> list[Worker]:
        with self._lock:
            return list(self._workers.values())

    def close(self) -> None:
        for worker in self.workers():
            worker.close()


# -- the child side ----------------------------------------------------------
def _become_subreaper() -> None:
    """Orphans of the user's code (daemons that double-forked) reparent to this child
    instead of init, so the parent can find and kill them with it (Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _protocol_pipes() -> tuple[int, int]:
    """Move the protocol to high, close-on-exec fds; point 0 at /dev/null and 1 at
    stderr, so user code that reads, writes or closes its stdin/stdout touches
    nothing of ours."""
    fd_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, _HIGH_FD)
    fd_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, _HIGH_FD)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return fd_in, fd_out


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class _Channel:
    """The child's end of the protocol; notices when user code broke it."""

    def __init__(self, fd_in: int, fd_out: int):
        self.fd_in, self.fd_out = fd_in, fd_out
        self.stream_in = os.fdopen(fd_in, "rb", closefd=False)
        self.ids = _identity(fd_in), _identity(fd_out)

    def intact(self) -> bool:
        return (_identity(self.fd_in), _identity(self.fd_out)) == self.ids

    def send(self, message: dict[str, Any]) -> None:
        data = encode(message)
        while data:
            data = data[os.write(self.fd_out, data) :]

    def receive(self) -> Any:
        return read_message(self.stream_in)


def _handle(op: str, kwargs: dict[str, Any], progress: Callback) -> dict[str, Any]:
    from viz import demo, handlers

    if demo.enabled():  # the server checked too; this side loads samples from disk itself
        try:
            kwargs = demo.admit(op, kwargs)
        except demo.Refused as exc:
            return error_result("demo_refused", str(exc), exc.hint)
    kwargs = {k: v for k, v in kwargs.items() if k != "sample"}  # the code says it all
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        result = handlers.handle(op, kwargs, progress)
    with contextlib.suppress(ValueError):  # user code may have closed it
        if isinstance(result, dict) and captured.getvalue():
            result.setdefault("stdout", captured.getvalue()[-20000:])
    return result


def _broken_pipes_result() -> dict[str, Any]:
    return error_result(
        "worker_crash",
        "Your code closed or replaced the worker's own pipes; this worker stops here.",
        "leave file descriptors you did not open alone; a fresh worker starts on the next request",
    )


def serve() -> None:
    """The child's loop: answer requests until the parent goes away, then take the
    whole process group down (subprocesses the user's code left behind included)."""
    channel = _Channel(*_protocol_pipes())
    _become_subreaper()
    from viz import handlers  # noqa: F401  (import jax before the first request)

    try:
        while True:
            try:
                request = channel.receive()
            except (EOFError, OSError, ProtocolError):
                return
            rid = request.get("id")
            channel.send({"kind": "started", "id": rid})

            def progress(payload: Any, rid: int = rid) -> None:
                channel.send({"kind": "progress", "id": rid, "payload": payload})

            result = _handle(request.get("op", ""), request.get("kwargs") or {}, progress)
            if not channel.intact():
                result = _broken_pipes_result()
            try:
                channel.send({"kind": "result", "id": rid, "payload": result})
            except OSError:
                os._exit(PROTOCOL_EXIT)
            if not channel.intact():
                os._exit(PROTOCOL_EXIT)
    finally:
        with contextlib.suppress(OSError):
            os.killpg(os.getpgrp(), signal.SIGKILL)


if __name__ == "__main__":
    serve()
