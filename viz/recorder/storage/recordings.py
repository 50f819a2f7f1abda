"""Where recordings are kept: the recordings table of the history file, a JSON file, and
how the command line names one in history (`rec:12`). Stdlib only.

`Recordings` reads and writes the table through `History`'s connection: one SQLite file
and one schema (`viz.history.schema` creates the table, beside the runs). A recording is
kept whole (its Recording JSON, zlib-compressed) beside the few numbers the Recordings
list shows (`RecordingRow`); at most `DEFAULT_KEEP_RECORDINGS` are kept, the newest.
"""

from __future__ import annotations

import json
import re
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from viz.history import History
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


_COLUMNS = (
    "id, created, name, argv, cwd, wall_s, exit_code, compiles, compile_s, functions, job, process"
)


def _row(r: tuple[Any, ...]) -> RecordingRow:
    return RecordingRow(r[0], r[1], r[2], json.loads(r[3]), *r[4:])


class Recordings:
    """The recordings in one history file (`$JITSCOPE_HOME/history.sqlite` unless given).
    Raises HistoryError, as `History` does, when the file cannot be used."""

    def __init__(self, history: History | None = None):
        self.history = history or History()

    def add(self, recording: Recording) -> int:
        """Store a recording; returns its id. Keeps the newest DEFAULT_KEEP_RECORDINGS."""
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
        with self.history.connect(write=True) as db:
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

    def rows(self, limit: int = 200) -> list[RecordingRow]:
        """The newest recordings first."""
        with self.history.connect() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM recordings ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
        return [_row(r) for r in rows]

    def get(self, recording_id: int) -> Recording | None:
        """One recording, decoded once; None for an unknown id."""
        with self.history.connect() as db:
            row = db.execute(
                "SELECT payload FROM recordings WHERE id = ?", (recording_id,)
            ).fetchone()
        return Recording.from_dict(json.loads(zlib.decompress(row[0]))) if row else None

    def of_job(self, job: str) -> list[RecordingRow]:
        """The recordings of one multi-process job, by process index (newest first within
        an index, should one have been recorded twice)."""
        with self.history.connect() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM recordings WHERE job = ? ORDER BY process, id DESC",
                (job,),
            ).fetchall()
        return [_row(r) for r in rows]

    def newest_job(self) -> str | None:
        """The job of the newest recording that belongs to one; None when none does."""
        with self.history.connect() as db:
            row = db.execute(
                "SELECT job FROM recordings WHERE job IS NOT NULL ORDER BY id DESC LIMIT 1"
            ).fetchone()
        return row[0] if row else None


def save(
    recording: Recording, json_path: Path | str | None = None, history: bool = True
) -> int | None:
    """Write the Recording JSON to `json_path` (if given; `-` is stdout) and store the
    recording in history (if `history`); returns its history id, or None."""
    data = recording.to_dict()
    if json_path == "-":
        print(json.dumps(data, indent=2, default=str))
    elif json_path:
        Path(json_path).write_text(json.dumps(data, indent=2, default=str))
    return Recordings().add(recording) if history else None


REF_PREFIX = "rec:"  # a recording in history, as the CLI names it: rec:12


def recording_id(ref: str) -> int | None:
    """The history id `rec:12` (or `rec:#12`) names; None when `ref` is not such a name."""
    match = re.fullmatch(rf"{REF_PREFIX}#?([0-9]+)", ref)
    return int(match.group(1)) if match else None
