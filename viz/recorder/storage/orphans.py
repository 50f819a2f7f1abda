"""Journals left behind by a recorder whose parent was killed, found and stored.

`python -m viz record` names each journal `<started ms>-<parent pid>.jsonl` under
`$JITSCOPE_HOME/recordings/`, and the recorded program holds an exclusive `flock` on it
while it runs (the lock goes when the process does, however it ends). The parent
reads the journal when the program ends and deletes it once saved. A journal is an
orphan when neither is there any more: nobody holds its lock and its parent process is
gone. `recover` reads each orphan (a torn last line is skipped), stores it in history
and deletes it. Stdlib only: the Recordings page offers the same.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from viz.locations import home
from viz.recorder.storage.journal import read_journal

try:
    import fcntl
except ImportError:  # not on this platform: the parent's pid alone decides
    fcntl = None  # type: ignore[assignment]


def folder() -> Path:
    return home() / "recordings"


def journal_path(started: float, parent_pid: int) -> Path:
    return folder() / f"{int(started * 1000)}-{parent_pid}.jsonl"


def _locked(path: Path) -> bool:
    if fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _parent_pid(path: Path) -> int | None:
    _, _, pid = path.stem.rpartition("-")
    return int(pid) if pid.isdigit() else None


def orphans() -> list[Path]:
    """Journals whose program and parent are both gone, oldest first."""
    try:
        journals = sorted(folder().glob("*.jsonl"))
    except OSError:
        return []
    found = []
    for path in journals:
        pid = _parent_pid(path)
        if pid is not None and pid != os.getpid() and not _alive(pid) and not _locked(path):
            found.append(path)
    return found


@dataclass(frozen=True)
class Recovered:
    journal: Path
    recording_id: int
    compiles: int
    name: str


def recover(paths: list[Path] | None = None) -> list[Recovered]:
    """Store each orphan in history and delete its journal; returns what was stored."""
    from viz.recorder.storage.recordings import Recordings  # the history: `record` names
    # a journal (`journal_path`) before its program starts, and imports it while it runs

    done = []
    recordings = Recordings()
    for path in orphans() if paths is None else paths:
        recording = read_journal(path)
        program = recording.program
        if program.wall_s is None:  # it never wrote its end: it lasted until its last line
            program.wall_s = max(path.stat().st_mtime - program.started, 0.0)
        recording_id = recordings.add(recording)
        path.unlink(missing_ok=True)
        done.append(Recovered(path, recording_id, recording.summary.compiles, program.name))
    return done


def recover_orphans() -> int:
    """`python -m viz record --recover`: exit status 0, also when there was nothing."""
    recovered = recover()
    if not recovered:
        print("jitscope: no orphaned recordings", file=sys.stderr)
    for r in recovered:
        print(
            f"jitscope: recovered {r.name or r.journal.name} ({r.compiles} compiles) as "
            f"recording #{r.recording_id}",
            file=sys.stderr,
        )
    return 0
