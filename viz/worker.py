"""The worker: user code runs here, in a child process, never in the caller.

One `Worker` per device configuration ('cpu', 'cpu:8', 'gpu'). The child is a
plain `python -m viz.worker` process whose environment is set before JAX starts
(`cpu:8` sets XLA_FLAGS to simulate 8 devices). Requests and answers are plain
data, pickled over the child's stdin/stdout. The parent enforces the limits:

- time: a request that outlives its timeout kills the child (`timeout`);
- memory: the child's resident memory is polled and the child is killed above
  the ceiling (`memory`);
- crashes: a child that dies mid-request (segfault, `os._exit`) is reported as
  `worker_crash`.
After any of these the next request starts a fresh child and just works. The
child keeps jitted functions alive between requests, so cache sessions see the
real jit cache. This module does not import jax.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import select
import shutil
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, BinaryIO

DEFAULT_TIMEOUT_S = 60.0
LESSON_TIMEOUT_S = 300.0
POLL_S = 0.05
_HEADER = struct.Struct("!Q")


def default_memory_limit() -> int:
    """JITSCOPE_MEMORY_LIMIT_GB, else half of this machine's memory, at most 16 GiB."""
    if "JITSCOPE_MEMORY_LIMIT_GB" in os.environ:
        return int(float(os.environ["JITSCOPE_MEMORY_LIMIT_GB"]) * 2**30)
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 16 << 30
    return min(total // 2, 16 << 30)


def available_devices() -> list[str]:
    """Device configurations the worker can serve on this machine."""
    devices = ["cpu", "cpu:8"]
    if shutil.which("nvidia-smi"):
        devices.insert(0, "gpu")
    return devices


def worker_env(device: str, memory_limit: int) -> dict[str, str]:
    env = dict(os.environ)
    platform, _, count = device.partition(":")
    env["JAX_PLATFORMS"] = {"gpu": "cuda"}.get(platform, platform)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f]
    if platform == "cpu" and count:
        flags.append(f"--xla_force_host_platform_device_count={int(count)}")
    env["XLA_FLAGS"] = " ".join(flags)
    env["JITSCOPE_MEMORY_LIMIT_BYTES"] = str(memory_limit)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def write_message(stream: BinaryIO, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def read_message(stream: BinaryIO) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


def error_result(kind: str, message: str, hint: str) -> dict[str, Any]:
    return {
        "ok": False,
        "error": {
            "kind": kind,
            "message": message,
            "hint": hint,
            "line": None,
            "column": None,
            "stage": "worker",
            "detail": "",
        },
    }


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Reader:
    """Reads framed messages from a pipe without ever blocking past a deadline."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buffer = b""

    def poll(self, wait_s: float) -> Any | None:
        """A message if one is complete within `wait_s`; None otherwise; EOFError if closed."""
        ready, _, _ = select.select([self.fd], [], [], wait_s)
        if ready:
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise EOFError
            self.buffer += chunk
        if len(self.buffer) < _HEADER.size:
            return None
        (size,) = _HEADER.unpack_from(self.buffer)
        if len(self.buffer) < _HEADER.size + size:
            return None
        data = self.buffer[_HEADER.size : _HEADER.size + size]
        self.buffer = self.buffer[_HEADER.size + size :]
        return pickle.loads(data)


def _rss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class Worker:
    """A client for one worker process; thread-safe (one request at a time)."""

    def __init__(
        self,
        device: str = "cpu",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        memory_limit_bytes: int | None = None,
    ):
        self.device = device
        self.timeout_s = timeout_s
        self.memory_limit = memory_limit_bytes or default_memory_limit()
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: _Reader | None = None
        self._lock = threading.Lock()
        self._next_id = 0
        self.requests = 0
        self.restarts = 0
        self.generation = 0
        self._cancelled = False

    # -- lifecycle -------------------------------------------------------
    def _start(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "viz.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            env=worker_env(self.device, self.memory_limit),
            start_new_session=True,
        )
        assert self._proc.stdout is not None
        self._reader = _Reader(self._proc.stdout.fileno())
        self.generation += 1

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream:
                with contextlib.suppress(OSError):
                    stream.close()
        self.restarts += 1

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def close(self) -> None:
        with self._lock:
            self._kill()

    def restart(self) -> None:
        with self._lock:
            self._kill()
            self._start()

    def cancel(self) -> None:
        """Stop the request in flight (from another thread): the child is killed."""
        self._cancelled = True
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()

    def status(self) -> WorkerStatus:
        proc = self._proc
        alive = self.alive()
        return WorkerStatus(
            self.device,
            alive,
            proc.pid if proc else None,
            _rss_bytes(proc.pid) if proc and alive else None,
            self.memory_limit,
            self.requests,
            self.restarts,
            self.generation,
        )

    # -- requests --------------------------------------------------------
    def request(
        self,
        op: str,
        timeout_s: float | None = None,
        on_progress: Callable[[Any], None] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Run `op` in the child; always returns a dict (errors included), never raises
        for anything the user's code does."""
        with self._lock:
            if not self.alive():
                if self._proc is not None:
                    self._kill()
                self._start()
            self._cancelled = False
            self.requests += 1
            self._next_id += 1
            assert self._proc is not None and self._proc.stdin is not None
            try:
                write_message(self._proc.stdin, (self._next_id, op, kwargs))
            except (BrokenPipeError, OSError):
                self._kill()
                return error_result(
                    "worker_crash",
                    "The worker died before the request.",
                    "run it again: a fresh worker starts automatically",
                )
            return self._wait(self._next_id, timeout_s or self.timeout_s, on_progress)

    def _wait(
        self, request_id: int, timeout_s: float, on_progress: Callable[[Any], None] | None
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        assert self._proc is not None and self._reader is not None
        while True:
            try:
                message = self._reader.poll(POLL_S)
            except EOFError:
                return self._crashed()
            if message is not None:
                kind, rid, payload = message
                if kind == "result" and rid == request_id:
                    return payload
                if kind == "progress" and rid == request_id and on_progress:
                    on_progress(payload)  # then check the limits like any other pass
            if time.monotonic() > deadline:
                self._kill()
                return error_result(
                    "timeout",
                    f"Stopped after {timeout_s:.0f} s: the function (or its "
                    "compilation) did not finish in time.",
                    "look for an infinite loop, or shrink the problem; the worker was restarted",
                )
            rss = _rss_bytes(self._proc.pid)
            if rss is not None and rss > self.memory_limit:
                self._kill()
                return error_result(
                    "memory",
                    f"Stopped at {rss / 2**30:.1f} GiB: above the worker's memory "
                    f"limit of {self.memory_limit / 2**30:.1f} GiB.",
                    "shrink the shapes, or analyze compile-only (runs=0); the worker was restarted",
                )

    def _crashed(self) -> dict[str, Any]:
        code = self._proc.wait() if self._proc else None
        self._kill()
        if self._cancelled:
            return error_result("cancelled", "Cancelled.", "")
        return error_result(
            "worker_crash",
            f"The worker process died (exit status {code}) while running your code.",
            "look for os._exit, sys.exit or a native crash in your code; a fresh worker "
            "starts on the next request",
        )


class WorkerPool:
    """One worker per device configuration, created on first use."""

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.timeout_s = timeout_s
        self._workers: dict[str, Worker] = {}
        self._lock = threading.Lock()

    def get(self, device: str, role: str = "main") -> Worker:
        """The worker for `device`; lessons get a worker of their own (role 'lessons') so
        that clearing caches for cold measurements never touches the cache lab."""
        with self._lock:
            key = f"{device}#{role}"
            if key not in self._workers:
                timeout = self.timeout_s if role == "main" else LESSON_TIMEOUT_S
                self._workers[key] = Worker(device, timeout)
            return self._workers[key]

    def warm(self, device: str) -> None:
        """Start `device`'s worker in the background (JAX imports take a while)."""
        worker = self.get(device)
        threading.Thread(
            target=worker.request, args=("ping",), kwargs={"warm": True}, daemon=True
        ).start()

    def close(self) -> None:
        for worker in self._workers.values():
            worker.close()


# -- the child side ----------------------------------------------------------
def serve() -> None:
    """The child's loop: answer requests until stdin closes."""
    protocol_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # user prints go to stderr, never into the protocol
    protocol_in = sys.stdin.buffer
    from viz import handlers

    while True:
        try:
            request_id, op, kwargs = read_message(protocol_in)
        except EOFError:
            return

        def progress(payload: Any, rid: int = request_id) -> None:
            write_message(protocol_out, ("progress", rid, payload))

        captured = io.StringIO()
        with contextlib.redirect_stdout(captured):
            result = handlers.handle(op, kwargs, progress)
        if isinstance(result, dict) and captured.getvalue():
            result.setdefault("stdout", captured.getvalue()[-20000:])
        write_message(protocol_out, ("result", request_id, result))


if __name__ == "__main__":
    serve()
