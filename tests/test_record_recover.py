"""`python -m viz record --recover`: the journal of a recorder whose parent was killed
with SIGKILL is stored in history once its program has ended too, and not before."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from test_record_cli import viz

from viz.recorder import Recordings
from viz.recorder.storage import orphans

pytestmark = pytest.mark.slow

PROGRAM = """
import os, sys, time, pathlib
import jax, jax.numpy as jnp

@jax.jit
def step(x):
    return x * 2

step(jnp.ones(3))
step(jnp.ones(4))
pathlib.Path(sys.argv[1]).write_text(str(os.getpid()))
while not pathlib.Path(sys.argv[2]).exists():
    time.sleep(0.05)
"""


def wait_for(condition, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_a_killed_recorders_journal_is_recovered_into_history(tmp_path, monkeypatch):
    monkeypatch.setenv("JITSCOPE_HOME", str(tmp_path / "home"))
    (tmp_path / "prog.py").write_text(PROGRAM)
    ready, go = tmp_path / "ready", tmp_path / "go"
    parent = subprocess.Popen(
        [sys.executable, "-m", "viz", "record", "--", "prog.py", str(ready), str(go)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(ready.exists)
        assert orphans.orphans() == []  # the parent is alive
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        assert orphans.orphans() == []  # the program still runs and holds its journal
        done = viz("record", "--recover", cwd=tmp_path)
        assert done.returncode == 0 and "no orphaned recordings" in done.stderr
    finally:
        go.write_text("go")
        parent.kill()
    wait_for(lambda: orphans.orphans() != [])  # the program ended: nobody holds it
    done = viz("record", "--recover", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "recovered prog.py (2 compiles) as recording #" in done.stderr
    (row,) = Recordings().rows()
    assert row.compiles == 2 and row.exit_code is None
    recording = Recordings().get(row.id)
    assert recording is not None and recording.program.wall_s > 0
    assert list(orphans.folder().glob("*.jsonl")) == []


def test_recover_with_nothing_left_behind_says_so(tmp_path):
    done = viz("record", "--recover", cwd=tmp_path, env={"JITSCOPE_HOME": str(tmp_path)})
    assert done.returncode == 0 and "no orphaned recordings" in done.stderr
    assert not Path(tmp_path / "recordings").exists() or not list(
        (tmp_path / "recordings").iterdir()
    )
