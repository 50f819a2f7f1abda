"""The history file's tables, and the migrations that bring an older file forward.

The version is SQLite's `PRAGMA user_version`; `MIGRATIONS[v]` turns a version-v file
into version v + 1, so `SCHEMA_VERSION` is one past the last. Code is stored once per
distinct text in `sources`, keyed by `code_hash`. `History` (`viz.history.store`)
runs the migrations once per process and file, in one transaction.
"""

from __future__ import annotations

import hashlib
import sqlite3
import zlib
from collections.abc import Callable


def code_hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()[:16]


# Version 1 kept the code and the full report inline in `runs` and never pruned.
# Version 2 moves code into `sources` (one row per distinct text), the report into
# `reports` (zlib JSON, pruned to the bound) and adds the columns the history list
# filters and shows.
_V1 = """
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, created REAL NOT NULL, function TEXT NOT NULL,
    args TEXT NOT NULL, static TEXT NOT NULL, device TEXT NOT NULL, ok INTEGER NOT NULL,
    summary TEXT NOT NULL, code TEXT, report TEXT
);
"""

_V2 = """
CREATE TABLE sources (hash TEXT PRIMARY KEY, code TEXT NOT NULL);
CREATE TABLE runs2 (
    id INTEGER PRIMARY KEY AUTOINCREMENT, created REAL NOT NULL, source TEXT NOT NULL,
    function TEXT NOT NULL, args TEXT NOT NULL, static TEXT NOT NULL, device TEXT NOT NULL,
    ok INTEGER NOT NULL, error_kind TEXT, sample TEXT, code_hash TEXT,
    jax_version TEXT NOT NULL DEFAULT '', options TEXT NOT NULL DEFAULT '{}',
    donate TEXT NOT NULL DEFAULT '[]', summary TEXT NOT NULL
);
CREATE TABLE reports (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE, payload BLOB NOT NULL
);
"""


def _script(db: sqlite3.Connection, sql: str) -> None:
    """Run statements one by one (`executescript` would commit the open transaction)."""
    for statement in sql.split(";"):
        if statement.strip():
            db.execute(statement)


def _migrate_1_to_2(db: sqlite3.Connection) -> None:
    _script(db, _V2)
    old = db.execute(
        "SELECT id, created, function, args, static, device, ok, summary, code, report FROM runs"
    )
    for rid, created, function, args, static, device, ok, summary, code, report in old.fetchall():
        digest = None
        if code is not None:
            digest = code_hash(code)
            db.execute("INSERT OR IGNORE INTO sources VALUES (?, ?)", (digest, code))
        db.execute(
            "INSERT INTO runs2 (id, created, source, function, args, static, device, ok, "
            "code_hash, summary) VALUES (?, ?, 'unknown', ?, ?, ?, ?, ?, ?, ?)",
            (rid, created, function, args, static, device, ok, digest, summary),
        )
        if report is not None:
            db.execute("INSERT INTO reports VALUES (?, ?)", (rid, zlib.compress(report.encode())))
    db.execute("DROP TABLE runs")
    db.execute("ALTER TABLE runs2 RENAME TO runs")
    db.execute("CREATE INDEX runs_function ON runs(function, id)")


# Version 3 adds recordings of whole programs (`python -m viz record`), beside the runs.
_V3 = """
CREATE TABLE recordings (
    id INTEGER PRIMARY KEY AUTOINCREMENT, created REAL NOT NULL, name TEXT NOT NULL,
    argv TEXT NOT NULL, cwd TEXT NOT NULL, wall_s REAL, exit_code INTEGER,
    compiles INTEGER NOT NULL, compile_s REAL NOT NULL, functions INTEGER NOT NULL,
    payload BLOB NOT NULL
);
"""

# Version 4 adds the job and the process index of a recording made by one process of a
# multi-process job (`program.process`); older recordings have neither.
_V4 = """
ALTER TABLE recordings ADD COLUMN job TEXT;
ALTER TABLE recordings ADD COLUMN process INTEGER;
CREATE INDEX recordings_job ON recordings(job, id);
"""

# MIGRATIONS[v] turns a version-v file into version v + 1.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    0: lambda db: _script(db, _V1),
    1: _migrate_1_to_2,
    2: lambda db: _script(db, _V3),
    3: lambda db: _script(db, _V4),
}
SCHEMA_VERSION = max(MIGRATIONS) + 1
