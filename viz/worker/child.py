"""The child side: `python -m viz.worker` answers requests until its parent goes
away. The protocol lives on high close-on-exec fds, so user code that closes its
stdin/stdout breaks nothing, and code that breaks the pipes is blamed on its own
request."""

from __future__ import annotations

import contextlib
import fcntl
import gc
import io
import os
import runpy
import signal
import threading
from collections.abc import Iterator
from typing import Any

from viz import jax_private, overlap
from viz.worker import stuck
from viz.worker.frames import (
    PROTOCOL_EXIT,
    Callback,
    ProtocolError,
    encode,
    error_result,
    read_message,
)

_HIGH_FD = 100  # the child's protocol pipes live above the fds user code plays with


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
        self._sending = threading.Lock()  # a streamed analysis also sends from its reader

    def intact(self) -> bool:
        return (_identity(self.fd_in), _identity(self.fd_out)) == self.ids

    def send(self, message: dict[str, Any], attached: str = "") -> None:
        data = memoryview(encode(message, attached))
        with self._sending:  # frames whole, never interleaved
            while data:
                data = data[os.write(self.fd_out, data) :]

    def receive(self) -> Any:
        return read_message(self.stream_in)


Wire = tuple[dict[str, Any], Iterator[tuple[str, str]]]  # a reply's head and its parts


def _handle(op: str, kwargs: dict[str, Any], progress: Callback) -> Wire:
    """The reply as it is sent (its head's JSON, then its parts: `Reply.wire`): the
    request decoded (and, in demo mode, admitted) into its type, handled with the
    user's prints captured beside the reply."""
    from viz import demo
    from viz.worker import admit, handlers, protocol

    try:
        request = protocol.decode_request(op, kwargs)
    except protocol.BadRequest as exc:
        return error_result("bad_request", str(exc), ""), iter(())
    if demo.enabled():  # the server checked too; this side loads samples from disk itself
        try:
            request = admit.admit(request)
        except admit.Refused as exc:
            return error_result("demo_refused", str(exc), exc.hint), iter(())
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        reply = handlers.handle(request, progress)
    with contextlib.suppress(ValueError):  # user code may have closed it
        reply.stdout = reply.stdout or captured.getvalue()[-20000:]
    return reply.wire()


def _broken_pipes_result() -> dict[str, Any]:
    return error_result(
        "worker_crash",
        "Your code closed or replaced the worker's own pipes; this worker stops here.",
        "leave file descriptors you did not open alone; a fresh worker starts on the next request",
    )


def _open_device() -> int:
    """Open the device before the first request, and return this process's resident
    memory then: what the runtime holds from its start, which the pool's memory budget
    does not count against requests (a TPU's runtime: 13.5 GiB resident on a v5e, next
    to a 16 GiB budget). A device that cannot open says why in the first request."""
    import jax

    with contextlib.suppress(Exception):
        jax.devices()
    from viz.worker.processes import process_rss_bytes

    return process_rss_bytes(os.getpid()) or 0


def serve() -> None:
    """The child's loop: answer requests until the parent goes away, then take the
    whole process group down (subprocesses the user's code left behind included)."""
    channel = _Channel(*_protocol_pipes())
    _become_subreaper()
    overlap.own_process()  # the collector and switch interval are ours to tune here
    from viz.worker import handlers  # noqa: F401  (import jax before the first request)

    stuck.listen()  # its stacks, when a request runs out of time
    floor = _open_device()
    # what started the worker (`python -m viz.worker`) is no frame of the user's either
    jax_private.hide_frames("<frozen runpy>", runpy.__file__)
    # a callback's exception is the run's error, its text whole (JAX's log of it came
    # first on the terminal: eqx.error_if's traceback and advice, then jitscope's)
    jax_private.quiet_callback_errors()

    try:
        while True:
            try:
                request = channel.receive()
            except (EOFError, OSError, ProtocolError):
                return
            rid = request.get("id")
            channel.send({"kind": "started", "id": rid, "floor": floor})

            def progress(payload: Any, rid: int = rid) -> None:
                channel.send({"kind": "progress", "id": rid, "payload": payload})

            result, parts = _handle(request.get("op", ""), request.get("kwargs") or {}, progress)
            if not channel.intact():
                result, parts = _broken_pipes_result(), iter(())
            try:  # JSON: many small objects, no cycles, and no collection walking them
                with overlap.gc_paused(settle=False):
                    channel.send({"kind": "result", "id": rid, "payload": result})
                    for name, text in parts:  # the head is on its way: the parts follow
                        channel.send({"kind": "part", "id": rid, "name": name}, text)
            except OSError:
                os._exit(PROTOCOL_EXIT)
            if not channel.intact():
                os._exit(PROTOCOL_EXIT)
            # the request's garbage (the user's module and its arrays, the jaxpr, the
            # graphs: cycles) freed now, while the worker idles, not inside a later
            # request's timing, and not counted against the pool's memory budget: the
            # pipeline's readers pause the collector (`gc_paused`), and left to itself
            # it let a 24-layer model's analyses pile up 0.1 GiB each
            gc.collect()
    finally:
        with contextlib.suppress(OSError):
            os.killpg(os.getpgrp(), signal.SIGKILL)
