"""The recording as it is written: one JSON line per event, appended as it happens.

A line is `{"type": "program" | "compile" | "count" | "end", ...}`. `compile` lines
carry a whole `Compile`; `count` lines only what the totals need (for compiles past
the per-function detail bound, and for hidden op-by-op compiles), so a program that
compiles 10,000 times writes bounded detail and exact counts. Each line is one
`write` to a file opened for appending: a program killed with SIGKILL, or one that
calls `os._exit`, leaves every line written before that point.

`read_journal` reads a journal back into a `Recording` (`viz.recorder.tally`, which the
live recorder keeps too). Stdlib only.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # not on this platform
    fcntl = None  # type: ignore[assignment]

from viz.recorder.model import Recording
from viz.recorder.tally import Tally


def _lock_for_life(fd: int) -> None:
    """An exclusive flock while this process lives (or until close): a journal nobody
    holds, whose parent is gone, is an orphan (`viz.recorder.storage.orphans`). Best effort."""
    if fcntl is not None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


class Journal:
    """Appends lines to one file; safe from many threads."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._lock = threading.Lock()
        _lock_for_life(self._fd)

    def write(self, line: dict[str, Any]) -> None:
        data = (json.dumps(line, default=str, separators=(",", ":")) + "\n").encode()
        with self._lock:
            if self._fd >= 0:
                os.write(self._fd, data)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def read_journal(path: Path) -> Recording:
    """A recording from its journal; a torn last line (the writer was killed) is skipped."""
    tally = Tally()
    with path.open(encoding="utf-8", errors="replace") as lines:
        for text in lines:
            try:
                line = json.loads(text)
            except ValueError:
                continue
            if isinstance(line, dict):
                tally.add(line)
    return tally.recording()
