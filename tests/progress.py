"""Progress a person can read on a slow machine: `pytest -q` prints one dot per test,
and a browser or install test can run for a minute, so every HEARTBEAT_S seconds that a
test runs this names it, with how long it has run and how far the suite is."""

from __future__ import annotations

import io
import os
import sys
import threading
import time
from typing import TextIO

import pytest

HEARTBEAT_S = 30.0


class Heartbeat:
    def __init__(self, terminal: TextIO) -> None:
        self.terminal = terminal
        self.line_started = True  # pytest's dots since our last line
        self.lock = threading.Lock()
        self.running: tuple[str, float] | None = None  # (nodeid, started)
        self.done = 0
        self.total = 0
        self.stop = threading.Event()
        threading.Thread(target=self._beat, name="pytest-heartbeat", daemon=True).start()

    def _beat(self) -> None:
        while not self.stop.wait(HEARTBEAT_S):
            with self.lock:
                if self.running is None:
                    continue
                nodeid, started = self.running
                ran = time.monotonic() - started
                if ran >= HEARTBEAT_S:
                    self._say(f"… {nodeid} running for {ran:.0f} s ({self.done}/{self.total} done)")

    def _say(self, line: str) -> None:
        self.terminal.write(f"\n{line}\n" if self.line_started else f"{line}\n")
        self.line_started = False
        self.terminal.flush()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.total = len(session.items)

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        with self.lock:
            self.running = nodeid, time.monotonic()

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        with self.lock:
            self.running = None
            self.done += 1
            self.line_started = True

    def pytest_unconfigure(self) -> None:
        self.stop.set()


def register(config: pytest.Config) -> None:
    """Called from pytest_configure, while pytest's capture is paused: a copy of the
    terminal's descriptor now still reaches it while a test's output is captured."""
    if config.option.collectonly or config.option.verbose < -1:  # -qq: asked for silence
        return
    try:
        terminal = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    except (OSError, ValueError, io.UnsupportedOperation):  # stdout is not a file here
        return
    config.pluginmanager.register(Heartbeat(terminal), "jitscope-heartbeat")
