"""`History`: the run history in one SQLite file, `$JITSCOPE_HOME/history.sqlite`.

Every call opens its own connection (SQLite in WAL mode, a busy timeout), so many
Streamlit sessions, the CLI and the tests can share one file; a process's first call
on a file creates it or migrates it forward (`viz.history.schema`). A run keeps
its full report (zlib JSON in `reports`) while it is among the newest `keep_reports`
(`JITSCOPE_HISTORY_KEEP`, else DEFAULT_KEEP_REPORTS), and its summary row while among
the newest `keep_runs`; both are pruned in the transaction that records a run.
`record_api_run` is `analyze(..., history=True)`: a history that cannot be written is
a warning in the report.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from viz.history.schema import MIGRATIONS, SCHEMA_VERSION, code_hash
from viz.locations import home
from viz.overlap import gc_paused
from viz.settings import Settings

if TYPE_CHECKING:
    from viz.history.runs import Recorded, Run
    from viz.program import Program
    from viz.report import Report

# The report, the diff's numbers and the samples (numpy among them: 0.2 s) are imported
# where a run's report is written or read: `jitscope record` stores a recording through
# `History` without them

FILE_NAME = "history.sqlite"
DEFAULT_KEEP_REPORTS = 100  # full reports (the largest sample's is ~200 KB compressed)
DEFAULT_KEEP_RUNS = 5000  # summary rows (about 2 KB each)
# zlib's fastest level: a 96-layer model's report (16 MB of JSON) in 0.05 s, 1.5 MB, where
# the default took 0.29 s for 1.0 MB, while the page that records it waited
COMPRESSION = 1


class HistoryError(RuntimeError):
    """The history file cannot be used: written by a newer jitscope, unreadable, locked
    past the timeout, corrupt, or on a full disk. The only error `History` raises."""


def default_path() -> Path:
    return home() / FILE_NAME


_lock = threading.Lock()  # serialises schema set-up within this process
_ready: set[Path] = set()

_COLUMNS = (
    "id, created, source, function, args, static, device, ok, error_kind, sample, code_hash, "
    "jax_version, options, donate, summary, "
    "EXISTS (SELECT 1 FROM reports WHERE run_id = runs.id) AS full"
)


def _run(row: tuple[Any, ...]) -> Run:
    from viz.history.runs import Run

    (rid, created, source, function, args, static, device, ok, error_kind, sample, digest) = row[
        :11
    ]
    jax_version, options, donate, summary, full = row[11:]
    settings = Settings(
        sample=sample,
        function=function,
        args=args,
        static=json.loads(static),
        donate=json.loads(donate),
        device=device,
        compiler_options=json.loads(options),
    )
    return Run(
        id=rid,
        created=created,
        source=source,
        ok=bool(ok),
        error_kind=error_kind,
        code_hash=digest,
        jax_version=jax_version,
        settings=settings,
        summary=json.loads(summary),
        full=bool(full),
    )


# a run's settings and outcome: the columns two identical runs share (not its time, its
# source, or its timings, which differ from run to run)
_SAME_COLUMNS = (
    "function",
    "args",
    "static",
    "device",
    "ok",
    "error_kind",
    "sample",
    "code_hash",
    "jax_version",
    "options",
    "donate",
)
_ROW = ("created", "source", *_SAME_COLUMNS, "summary")  # `record`'s row, in order
_SAME_SUMMARY = ("counts", "ops", "stablehlo_ops")  # what it compiled to, not how fast


def _identical(db: sqlite3.Connection, row: tuple[Any, ...]) -> int | None:
    """The id of the newest run of the same code with the same settings, the same
    outcome and the same program compiled (its counts and ops) as `row`, or None."""
    values = dict(zip(_ROW, row, strict=True))
    where = " AND ".join(f"{name} IS ?" for name in _SAME_COLUMNS)
    found = db.execute(
        f"SELECT id, summary FROM runs WHERE {where} ORDER BY id DESC LIMIT 1",
        [values[name] for name in _SAME_COLUMNS],
    ).fetchone()
    if found is None:
        return None
    before, now = json.loads(found[1]), json.loads(values["summary"])
    return found[0] if all(before.get(k) == now.get(k) for k in _SAME_SUMMARY) else None


def _payload(report: Report) -> bytes:
    """The report as kept: its JSON, plus the compiled graph model for the diff view
    (its JSON as the worker sent it: the app need not have decoded it)."""
    with gc_paused(callers_too=True):  # the report's dicts: see `viz.overlap`
        text = json.dumps(report.to_dict(), default=str)
        graph = report.graph_models.json("compiled") if "compiled" in report.graph_models else ""
    if graph:
        text = f'{{"graph_models":{{"compiled":{graph}}},{text[1:]}'
    return zlib.compress(text.encode(), COMPRESSION)


def _unpack(payload: bytes) -> Report | None:
    """A kept report, decoded once; None for one this jitscope cannot read (say, an
    error kind an older one wrote): the run's numbers stand in for it."""
    from viz.report import Report

    try:
        return Report.from_dict(json.loads(zlib.decompress(payload)))
    except (ValueError, TypeError, KeyError, zlib.error):
        return None


class History:
    """The run history in one SQLite file (`default_path()` unless given)."""

    def __init__(
        self,
        path: Path | str | None = None,
        keep_reports: int | None = None,
        keep_runs: int = DEFAULT_KEEP_RUNS,
    ):
        self.path = Path(path) if path is not None else default_path()
        env_keep = os.environ.get("JITSCOPE_HISTORY_KEEP", "")
        default_keep = int(env_keep) if env_keep.isdigit() else DEFAULT_KEEP_REPORTS
        self.keep_reports = keep_reports if keep_reports is not None else default_keep
        self.keep_runs = max(keep_runs, self.keep_reports)

    # -- connections ---------------------------------------------------------
    @contextmanager
    def connect(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        """A connection (a transaction when `write`); SQLite's and the file system's
        errors become HistoryError, which names the file. The runs are read and written
        here; the recordings table beside them is `viz.recorder.storage.recordings`'s."""
        with self._errors_named(), self._connection(write) as db:
            yield db

    @contextmanager
    def _errors_named(self) -> Iterator[None]:
        """SQLite's and the file system's errors raised as HistoryError, naming the file."""
        try:
            yield
        except (sqlite3.Error, OSError) as exc:
            raise HistoryError(f"history {self.path}: {exc}") from exc

    @contextmanager
    def _connection(self, write: bool) -> Iterator[sqlite3.Connection]:
        self._setup()
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            db.execute("PRAGMA foreign_keys = ON")
            # WAL's own setting: a commit is not synced to disk on its own (a checkpoint
            # is); the file cannot be corrupted, a power cut may lose the last runs. A
            # synced commit and close took 0.02-0.05 s of every write (`jitscope record`)
            db.execute("PRAGMA synchronous = NORMAL")
            if write:
                db.execute("BEGIN IMMEDIATE")  # one writer at a time, across processes
            try:
                yield db
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            if db.in_transaction:
                db.execute("COMMIT")
        finally:
            db.close()

    def prepare(self) -> None:
        """Create or migrate the file now, ahead of its first use in this process
        (`jitscope record`, while the program runs)."""
        with self._errors_named():
            self._setup()

    def _setup(self) -> None:
        """Create or migrate the file once per process (and path)."""
        with _lock:
            if self.path in _ready and self.path.exists():  # a deleted file starts afresh
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            try:
                db.execute("PRAGMA journal_mode = WAL")  # readers never wait for the writer
                db.execute("BEGIN IMMEDIATE")
                try:
                    version = db.execute("PRAGMA user_version").fetchone()[0]
                    if version > SCHEMA_VERSION:
                        raise HistoryError(
                            f"{self.path} has history schema v{version}, newer than this "
                            f"jitscope's v{SCHEMA_VERSION}: update jitscope or move the file"
                        )
                    for step in range(version, SCHEMA_VERSION):
                        MIGRATIONS[step](db)
                    if version < SCHEMA_VERSION:  # else nothing is written (nor synced)
                        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
            finally:
                db.close()
            _ready.add(self.path)

    def schema_version(self) -> int:
        with self.connect() as db:
            return db.execute("PRAGMA user_version").fetchone()[0]

    # -- writing -------------------------------------------------------------
    def record(
        self,
        report: Report,
        *,
        code: str | None = None,
        sample: str | None = None,
        source: str = "api",
        once: bool = False,
    ) -> int:
        """Store one analysis with the code that ran and the built-in sample it is, if
        any; returns its id. Prunes to the bound in the same transaction. `once`: an
        identical run recorded before (`_identical`) is not stored again; its id is
        returned (the app's automatic first-screen run, on every page load)."""
        from viz.diff import donated_names, numbers

        digest = code_hash(code) if code is not None else None
        row = (
            time.time(),
            source,
            report.function,
            report.args,
            json.dumps([str(s) for s in report.static]),
            report.device,
            int(report.ok),
            report.error.kind.value if report.error else None,
            sample,
            digest,
            report.jax_version,
            json.dumps(report.compiler_options, default=str),
            json.dumps(donated_names(report)),
            json.dumps(numbers(report)),
        )
        with self.connect(write=True) as db:
            if once and (same := _identical(db, row)) is not None:
                return same
            if digest is not None:
                db.execute("INSERT OR IGNORE INTO sources VALUES (?, ?)", (digest, code))
            cursor = db.execute(
                "INSERT INTO runs (created, source, function, args, static, device, ok, "
                "error_kind, sample, code_hash, jax_version, options, donate, summary) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            run_id = int(cursor.lastrowid or 0)
            db.execute("INSERT INTO reports VALUES (?, ?)", (run_id, _payload(report)))
            self._prune(db)
        return run_id

    def _prune(self, db: sqlite3.Connection) -> None:
        """Keep the newest `keep_reports` full reports and `keep_runs` runs."""
        db.execute(
            "DELETE FROM reports WHERE run_id NOT IN "
            "(SELECT id FROM runs ORDER BY id DESC LIMIT ?)",
            (self.keep_reports,),
        )
        db.execute(
            "DELETE FROM runs WHERE id NOT IN (SELECT id FROM runs ORDER BY id DESC LIMIT ?)",
            (self.keep_runs,),
        )
        db.execute(
            "DELETE FROM sources WHERE hash NOT IN "
            "(SELECT code_hash FROM runs WHERE code_hash IS NOT NULL)"
        )

    # -- reading -------------------------------------------------------------
    def runs(self, function: str | None = None, limit: int = 500) -> list[Run]:
        """The newest runs first, optionally of one function only."""
        where, params = ("WHERE function = ?", [function]) if function else ("", [])
        with self.connect() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM runs {where} ORDER BY id DESC LIMIT ?", (*params, limit)
            ).fetchall()
        return [_run(r) for r in rows]

    def get(self, run_id: int) -> Run | None:
        with self.connect() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _run(row) if row else None

    def functions(self) -> list[str]:
        with self.connect() as db:
            rows = db.execute("SELECT DISTINCT function FROM runs ORDER BY function").fetchall()
        return [r[0] for r in rows]

    def count(self) -> int:
        with self.connect() as db:
            return db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    def code(self, run_id: int) -> str | None:
        """The code that ran (None for a run recorded without it)."""
        with self.connect() as db:
            row = db.execute(
                "SELECT code FROM sources JOIN runs ON runs.code_hash = sources.hash "
                "WHERE runs.id = ?",
                (run_id,),
            ).fetchone()
        return row[0] if row else None

    def previous(self, run_id: int) -> Run | None:
        """The newest run of the same function recorded before `run_id`."""
        with self.connect() as db:
            row = db.execute(
                f"SELECT {_COLUMNS} FROM runs WHERE id < ? AND function = "
                "(SELECT function FROM runs WHERE id = ?) ORDER BY id DESC LIMIT 1",
                (run_id, run_id),
            ).fetchone()
        return _run(row) if row else None

    def report(self, run_id: int) -> Report | None:
        """The run's report: the full report while it is kept, else a skeleton rebuilt
        from the summary numbers (no texts, kernels or graphs; `recorded(id).run.full`
        says which). None for an unknown id."""
        recorded = self.recorded(run_id)
        return recorded.report if recorded else None

    def recorded(self, run_id: int) -> Recorded | None:
        """The run and its report, read at once (so `run.full` says which report it
        is). None for an unknown id."""
        from viz.history.runs import Recorded, skeleton

        with self.connect() as db:
            row = db.execute(
                f"SELECT {_COLUMNS}, (SELECT payload FROM reports WHERE run_id = runs.id) "
                "FROM runs WHERE id = ?",
                (run_id,),
            ).fetchone()
        if row is None:
            return None
        run, payload = _run(row[:-1]), row[-1]
        report = _unpack(payload) if payload is not None else None
        if report is None:
            run = replace(run, full=False)
        return Recorded(run, report or skeleton(run))

    def program(self, run: Run, *, sample_only: bool = False) -> Program:
        """The run as a program to open again: its code and its settings. The sample
        stays named only while the code is still the sample's. `sample_only` (demo
        mode): the code is the sample's, loaded by name, never the database's."""
        from viz.history.runs import shipped_sample
        from viz.program import Program  # the worker's protocol: not for the recorder
        from viz.samples import get_sample

        ran = run.settings
        if sample_only:
            sample = get_sample(ran.sample or "")
            return Program(replace(ran, code=sample.code), extra=dict(sample.extra))
        code = self.code(run.id) or ""
        shipped = shipped_sample(ran.sample)
        named = ran.sample if shipped and shipped.code == code else None
        extra = dict(shipped.extra) if shipped else {}
        return Program(replace(ran, code=code, sample=named), extra=extra)


def record_api_run(report: Report) -> tuple[int | None, Report]:
    """`analyze(..., history=True)`: record a `Report` with the code of its source file;
    returns the run's id and the report. A history that cannot be written is no error:
    the report returned is a copy with a warning that says so (None for the id)."""
    from viz.history.runs import sample_of

    path = Path(report.source_file) if report.source_file else None
    code = path.read_text() if path and path.is_file() else None
    try:
        recorded = History().record(
            report,
            code=code,
            sample=sample_of(code) if code else None,
            source="api",
        )
    except HistoryError as exc:
        said = f"could not record the run in history: {exc}"
        return None, replace(report, warnings=[*report.warnings, said])
    return recorded, report
