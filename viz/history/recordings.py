"""The recordings table: whole programs recorded with `python -m viz record`.

`History` opens the connection and the transaction; these functions hold the table's
SQL. A recording is kept whole (its Recording JSON, zlib-compressed) beside the few
numbers the Recordings list shows (`RecordingRow`); at most `DEFAULT_KEEP_RECORDINGS`
are kept, the newest.
"""

from __future__ import annotations

import json
import sqlite3
import time
import zlib
from dataclasses import dataclass

from viz.recorder.model import Recording

DEFAULT_KEEP_RECORDINGS = 200  # whole-program recordings (bounded detail each)


@dataclass(frozen=True)
class RecordingRow:
    """One recorded program, as the Recordings list shows it."""

    id: int
    created: float
    name: str
    argv: list[str]
    cwd: str
    wall_s: float | None
    exit_code: int | None
    compiles: int
    compile_s: float
    functions: int
    job: str | None = None  # the multi-process job it belongs to (`program.process.job`)
    process: int | None = None  # its process index in that job

    @property
    def when(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.created))


_RECORDING_COLUMNS = (
    "id, created, name, argv, cwd, wall_s, exit_code, compiles, compile_s, functions, job, process"
)


def insert_recording(db: sqlite3.Connection, recording: Recording) -> int:
    """Store a recording (its Recording JSON) in the open transaction; returns its id.
    Keeps the newest DEFAULT_KEEP_RECORDINGS."""
    program, summary = recording.program, recording.summary
    row = (
        program.started or time.time(),
        program.name or " ".join(program.argv) or "?",
        json.dumps(program.argv),
        program.cwd,
        program.wall_s,
        program.exit_code,
        summary.compiles,
        summary.compile_s,
        summary.functions,
        zlib.compress(json.dumps(recording.to_dict(), default=str).encode()),
        program.process.job if program.process else None,
        program.process.index if program.process else None,
    )
    cursor = db.execute(
        "INSERT INTO recordings (created, name, argv, cwd, wall_s, exit_code, "
        "compiles, compile_s, functions, payload, job, process) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        row,
    )
    db.execute(
        "DELETE FROM recordings WHERE id NOT IN "
        "(SELECT id FROM recordings ORDER BY id DESC LIMIT ?)",
        (DEFAULT_KEEP_RECORDINGS,),
    )
    return int(cursor.lastrowid or 0)


def newest_recordings(db: sqlite3.Connection, limit: int) -> list[RecordingRow]:
    """The newest recordings first."""
    rows = db.execute(
        f"SELECT {_RECORDING_COLUMNS} FROM recordings ORDER BY id DESC LIMIT ?", (limit,)
    ).fetchall()
    return [RecordingRow(r[0], r[1], r[2], json.loads(r[3]), *r[4:]) for r in rows]


def read_recording(db: sqlite3.Connection, recording_id: int) -> Recording | None:
    """One recording, decoded once; None for an unknown id."""
    row = db.execute("SELECT payload FROM recordings WHERE id = ?", (recording_id,)).fetchone()
    return Recording.from_dict(json.loads(zlib.decompress(row[0]))) if row else None


def job_recordings(db: sqlite3.Connection, job: str) -> list[RecordingRow]:
    """The recordings of one multi-process job, by process index (newest first within
    an index, should one have been recorded twice)."""
    rows = db.execute(
        f"SELECT {_RECORDING_COLUMNS} FROM recordings WHERE job = ? ORDER BY process, id DESC",
        (job,),
    ).fetchall()
    return [RecordingRow(r[0], r[1], r[2], json.loads(r[3]), *r[4:]) for r in rows]


def newest_job(db: sqlite3.Connection) -> str | None:
    """The job of the newest recording that belongs to one; None when none does."""
    row = db.execute(
        "SELECT job FROM recordings WHERE job IS NOT NULL ORDER BY id DESC LIMIT 1"
    ).fetchone()
    return row[0] if row else None
