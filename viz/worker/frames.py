"""The worker's frames: length-prefixed JSON both ways (never pickle: a
process that runs user code must not be able to run code in the server), and the
error results the worker itself produces.

A frame's JSON may be followed by a newline and a text, kept as it came: a part of a
reply that follows its head (`viz.worker.parts`: an IR's text, or a graph model's JSON,
decoded only where it is read). JSON as `json.dumps` writes it here holds no raw
newline."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import struct
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from typing import Any, BinaryIO

from viz.errors import ErrorInfo

PROTOCOL_EXIT = 75  # the child's exit status when user code broke its pipes
MAX_FRAME = 512 << 20  # a larger header is garbage, not a report
PIPE_BYTES = 1 << 20  # a reply pipe's buffer (Linux's default is 64 KiB: 16x the reads)
ATTACHED = "attached"  # the key a decoded message holds the text after its JSON under


Callback = Callable[[Any], None]
_HEADER = struct.Struct("!Q")


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


def encode(message: Any, attached: str = "") -> bytes:
    """One frame: `message` as JSON, then `attached` (if any) as it is. NaN and ±inf
    travel as JSON's NaN/Infinity extensions (Python's json reads them back); tuples
    become lists; bytes become text."""
    try:
        data = json.dumps(message, default=_plain, separators=(",", ":"))
    except (TypeError, ValueError):  # tuple keys, or a cycle made of plain containers
        data = json.dumps(_keys_to_str(message), default=_plain, separators=(",", ":"))
    raw = [data.encode("utf-8", "surrogatepass")]
    if attached:
        raw += [b"\n", attached.encode("utf-8", "surrogatepass")]
    return b"".join([_HEADER.pack(sum(map(len, raw))), *raw])


def decode(data: bytes) -> Any:
    """A frame's message; the text after its JSON, if any, under ATTACHED."""
    head, newline, rest = data.partition(b"\n")
    try:
        message = json.loads(head.decode("utf-8", "surrogatepass"))
        if newline and isinstance(message, dict):
            message[ATTACHED] = rest.decode("utf-8", "surrogatepass")
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"not a JSON frame: {type(exc).__name__}") from None
    return message


def widen(fd: int) -> None:
    """Give the pipe at `fd` a 1 MiB buffer where the system allows it: a 20 MB reply
    then crosses in 20 reads, not 320."""
    with contextlib.suppress(OSError, AttributeError):  # F_SETPIPE_SZ: Linux only
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)


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


def error_result(kind: str, message: str, hint: str, line: int | None = None) -> dict[str, Any]:
    """A failure the worker itself saw (the kind is checked like every other); `line`:
    the user's line it was at, where known."""
    error = ErrorInfo(kind, message, hint, line, stage="worker")
    return {"ok": False, "error": error.to_dict()}


class FrameReader:
    """Reads frames from a pipe without ever blocking past a deadline. Each frame is
    read into a buffer of the size its header announces, so a big report costs one
    copy, not one per chunk the pipe delivers (64 KiB: 800 for a 50 MB frame)."""

    def __init__(self, fd: int):
        self.fd = fd
        self._header = bytearray()
        self._body: bytearray | None = None  # the frame under way, at its announced size
        self._filled = 0
        self._poller = select.poll()  # not select(): a busy server has fds above 1023
        self._poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)

    def poll(self, wait_s: float) -> Any | None:
        """A message if one is complete within `wait_s`; None otherwise; EOFError if
        closed; ProtocolError for garbage."""
        if self._poller.poll(wait_s * 1000):
            self._read()
        if self._body is None or self._filled < len(self._body):
            return None
        data, self._body, self._filled = self._body, None, 0
        message = decode(bytes(data))
        if not (isinstance(message, dict) and isinstance(message.get("kind"), str)):
            raise ProtocolError("a frame that is not a worker message")
        return message

    def _read(self) -> None:
        """One read from the pipe: the header's missing bytes, or into the body."""
        if self._body is None:
            chunk = os.read(self.fd, _HEADER.size - len(self._header))
            if not chunk:
                raise EOFError
            self._header += chunk
            if len(self._header) == _HEADER.size:
                (size,) = _HEADER.unpack(self._header)
                if size > MAX_FRAME:
                    raise ProtocolError(f"frame of {size} bytes")
                self._header.clear()
                self._body = bytearray(size)
            return
        got = os.readv(self.fd, [memoryview(self._body)[self._filled :]])
        if not got:
            raise EOFError
        self._filled += got
