"""Where a request that ran out of time was stuck: the line of the user's code under way.

The client opens a file for each child's stacks, unlinked at once (nothing is left on
disk), and hands the child its descriptor (`STACK_ENV`); the child has Python's
faulthandler write its threads' stacks there on SIGUSR1 (`listen`), from the signal
handler itself, so a pure-Python loop that never yields is caught too. Before killing a
request that ran out of time the client asks (`stuck_at`): the innermost frame in the
user's file is where it was. No jax.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import re
import signal
import tempfile
import time
from dataclasses import dataclass

STACK_ENV = "JITSCOPE_STACK_FD"
_FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+) in (?P<function>\S+)', re.M)
_MOST = 1 << 20  # bytes of stacks read: far more than a few threads' 100 frames each


@dataclass(frozen=True)
class Stuck:
    """A line of the user's code, and the function it is in."""

    line: int
    function: str


def new_stack_file() -> int:
    """A descriptor of a fresh, empty file for one child's stacks, already unlinked."""
    fd, path = tempfile.mkstemp(prefix="jitscope-stack-", suffix=".txt")
    os.unlink(path)
    return fd


def listen() -> None:
    """In the child: write every thread's stack to the client's file on SIGUSR1."""
    fd = os.environ.get(STACK_ENV)
    if fd and fd.isdigit() and hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=int(fd), all_threads=True, chain=False)


def stuck_at(pid: int, fd: int, user_file: str, wait_s: float = 1.0) -> Stuck | None:
    """Ask the child `pid` for its stacks: the innermost frame in `user_file` (most
    recent call first, as faulthandler writes them); None when it does not answer or
    is in none of the user's lines (XLA compiling, say)."""
    try:
        os.kill(pid, signal.SIGUSR1)
    except OSError:
        return None
    deadline = time.monotonic() + wait_s
    text = b""
    while time.monotonic() < deadline:
        time.sleep(0.05)
        newer = os.pread(fd, _MOST, 0)
        if newer and newer == text:  # written, and done writing
            break
        text = newer
    for frame in _FRAME.finditer(text.decode(errors="replace")):
        if frame["file"] == user_file:
            return Stuck(int(frame["line"]), frame["function"])
    return None


def forget(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
