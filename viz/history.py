"""Run history: every analysis, kept in `$JITSCOPE_HOME/history.sqlite`.

The database is the durable store; the app's in-session list of results is only a
view of the current session. It is bounded: the last `keep_reports` runs keep their
full report (IR texts, kernels, the compiled graph), and older runs keep only their
summary numbers (counts, timings, cost, memory, op histograms), which is all the
history list and most of a diff need. At most `keep_runs` runs are kept at all.

The schema is versioned (`PRAGMA user_version`) and migrates forward when a file
written by an older jitscope is opened. Every call opens its own connection
(SQLite in WAL mode, a busy timeout), so many Streamlit sessions, the CLI and the
tests can share one file. Stdlib only: no jax, no Streamlit.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from viz.diff import numbers
from viz.source import home

FILE_NAME = "history.sqlite"
DEFAULT_KEEP_REPORTS = 100  # full reports (the largest sample's is ~200 KB compressed)
DEFAULT_KEEP_RUNS = 5000  # summary rows (about 2 KB each)
DEFAULT_KEEP_RECORDINGS = 200  # whole-program recordings (bounded detail each)


class HistoryError(RuntimeError):
    """The history file cannot be used (e.g. written by a newer jitscope)."""


def default_path() -> Path:
    return home() / FILE_NAME


def code_hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Run:
    """One recorded analysis: what ran, and its summary numbers."""

    id: int
    created: float  # Unix time
    source: str  # app, cli or api
    function: str
    args: str
    static: list[str]
    device: str
    ok: bool
    error_kind: str | None
    sample: str | None  # the built-in sample whose code ran, if any
    code_hash: str | None
    jax_version: str
    compiler_options: dict[str, Any] = field(default_factory=dict)
    donate: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)  # viz.diff.numbers(report)
    full: bool = False  # whether the full report is still kept

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def when(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.created))

    @property
    def options_text(self) -> str:
        """Static, donated and compiler options in one short line ('' when none)."""
        parts = [f"{k}={v}" for k, v in self.compiler_options.items()]
        if self.static:
            parts.append("static " + ", ".join(self.static))
        if self.donate:
            parts.append("donate " + ", ".join(self.donate))
        return " · ".join(parts)


# -- schema -------------------------------------------------------------------
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

# MIGRATIONS[v] turns a version-v file into version v + 1.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    0: lambda db: _script(db, _V1),
    1: _migrate_1_to_2,
    2: lambda db: _script(db, _V3),
}
SCHEMA_VERSION = max(MIGRATIONS) + 1

_lock = threading.Lock()  # serialises schema set-up within this process
_ready: set[Path] = set()

_COLUMNS = (
    "id, created, source, function, args, static, device, ok, error_kind, sample, code_hash, "
    "jax_version, options, donate, summary, "
    "EXISTS (SELECT 1 FROM reports WHERE run_id = runs.id) AS full"
)


def _run(row: tuple[Any, ...]) -> Run:
    (rid, created, source, function, args, static, device, ok, error_kind, sample, digest) = row[
        :11
    ]
    jax_version, options, donate, summary, full = row[11:]
    return Run(
        id=rid,
        created=created,
        source=source,
        function=function,
        args=args,
        static=json.loads(static),
        device=device,
        ok=bool(ok),
        error_kind=error_kind,
        sample=sample,
        code_hash=digest,
        jax_version=jax_version,
        compiler_options=json.loads(options),
        donate=json.loads(donate),
        summary=json.loads(summary),
        full=bool(full),
    )


def _payload(report: dict[str, Any]) -> bytes:
    """The report as kept: public keys, plus the compiled graph model for the diff view."""
    public = {
        k: v
        for k, v in report.items()
        if not k.startswith("_") and k not in ("graph_models", "stdout")
    }
    compiled = (report.get("graph_models") or {}).get("compiled")
    if compiled is not None:
        public["graph_models"] = {"compiled": compiled}
    return zlib.compress(json.dumps(public, default=str).encode())


def donated_names(report: dict[str, Any]) -> list[str]:
    """Names of the donated arguments (DESIGN.md's `donation{args[{name, donated}]}`)."""
    args = (report.get("donation") or {}).get("args") or []
    return [a.get("name", "?") for a in args if a.get("donated")]


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
    def _connect(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        self._setup()
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            db.execute("PRAGMA foreign_keys = ON")
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
        with self._connect() as db:
            return db.execute("PRAGMA user_version").fetchone()[0]

    # -- writing -------------------------------------------------------------
    def record(
        self,
        report: dict[str, Any],
        *,
        code: str | None = None,
        sample: str | None = None,
        source: str = "api",
    ) -> int:
        """Store one analysis (a report dict, as `Report.to_dict()` or the worker gives
        it); returns its id. Prunes to the bound in the same transaction."""
        error = report.get("error") or {}
        digest = code_hash(code) if code is not None else None
        row = (
            time.time(),
            source,
            report.get("function") or "",
            report.get("args") or "",
            json.dumps([str(s) for s in report.get("static") or []]),
            report.get("device") or "",
            int(bool(report.get("ok"))),
            error.get("kind"),
            sample,
            digest,
            report.get("jax_version") or "",
            json.dumps(report.get("compiler_options") or {}, default=str),
            json.dumps(donated_names(report)),
            json.dumps(numbers(report)),
        )
        with self._connect(write=True) as db:
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
        with self._connect() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM runs {where} ORDER BY id DESC LIMIT ?", (*params, limit)
            ).fetchall()
        return [_run(r) for r in rows]

    def get(self, run_id: int) -> Run | None:
        with self._connect() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _run(row) if row else None

    def functions(self) -> list[str]:
        with self._connect() as db:
            rows = db.execute("SELECT DISTINCT function FROM runs ORDER BY function").fetchall()
        return [r[0] for r in rows]

    def count(self) -> int:
        with self._connect() as db:
            return db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    def code(self, run_id: int) -> str | None:
        """The code that ran (None for a run recorded without it)."""
        with self._connect() as db:
            row = db.execute(
                "SELECT code FROM sources JOIN runs ON runs.code_hash = sources.hash "
                "WHERE runs.id = ?",
                (run_id,),
            ).fetchone()
        return row[0] if row else None

    # -- recordings of whole programs ------------------------------------------
    def record_recording(self, recording: dict[str, Any]) -> int:
        """Store a Recording JSON (`Recording.to_dict()`); returns its id. Keeps the
        newest DEFAULT_KEEP_RECORDINGS."""
        program, summary = recording["program"], recording["summary"]
        row = (
            program.get("started") or time.time(),
            program.get("name") or " ".join(program.get("argv") or []) or "?",
            json.dumps(program.get("argv") or []),
            program.get("cwd") or "",
            program.get("wall_s"),
            program.get("exit_code"),
            summary.get("compiles", 0),
            summary.get("compile_s", 0.0),
            summary.get("functions", 0),
            zlib.compress(json.dumps(recording, default=str).encode()),
        )
        with self._connect(write=True) as db:
            cursor = db.execute(
                "INSERT INTO recordings (created, name, argv, cwd, wall_s, exit_code, "
                "compiles, compile_s, functions, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            db.execute(
                "DELETE FROM recordings WHERE id NOT IN "
                "(SELECT id FROM recordings ORDER BY id DESC LIMIT ?)",
                (DEFAULT_KEEP_RECORDINGS,),
            )
        return int(cursor.lastrowid or 0)

    def recordings(self, limit: int = 200) -> list[RecordingRow]:
        """The newest recordings first."""
        with self._connect() as db:
            rows = db.execute(
                f"SELECT {_RECORDING_COLUMNS} FROM recordings ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
        return [RecordingRow(r[0], r[1], r[2], json.loads(r[3]), *r[4:]) for r in rows]

    def recording(self, recording_id: int) -> dict[str, Any] | None:
        """The Recording JSON of one recording, None for an unknown id."""
        with self._connect() as db:
            row = db.execute(
                "SELECT payload FROM recordings WHERE id = ?", (recording_id,)
            ).fetchone()
        return json.loads(zlib.decompress(row[0])) if row else None

    def previous(self, run_id: int) -> Run | None:
        """The newest run of the same function recorded before `run_id`."""
        with self._connect() as db:
            row = db.execute(
                f"SELECT {_COLUMNS} FROM runs WHERE id < ? AND function = "
                "(SELECT function FROM runs WHERE id = ?) ORDER BY id DESC LIMIT 1",
                (run_id, run_id),
            ).fetchone()
        return _run(row) if row else None

    def report(self, run_id: int) -> dict[str, Any] | None:
        """The run as a report dict: the full report while it is kept, else a skeleton
        rebuilt from the summary numbers (no texts, kernels or graphs). Either carries
        `history{id, full, when, source}`. None for an unknown id."""
        run = self.get(run_id)
        if run is None:
            return None
        with self._connect() as db:
            row = db.execute("SELECT payload FROM reports WHERE run_id = ?", (run_id,)).fetchone()
        report = json.loads(zlib.decompress(row[0])) if row else skeleton(run)
        report["history"] = {
            "id": run.id,
            "full": row is not None,
            "when": run.when,
            "source": run.source,
        }
        return report


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

    @property
    def when(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.created))


_RECORDING_COLUMNS = (
    "id, created, name, argv, cwd, wall_s, exit_code, compiles, compile_s, functions"
)


def skeleton(run: Run) -> dict[str, Any]:
    """A report with only what a pruned run still knows: its summary numbers."""
    s = run.summary
    counts = s.get("counts") or {}
    return {
        "ok": run.ok,
        "error": {"kind": run.error_kind} if run.error_kind else None,
        "device": run.device,
        "jax_version": run.jax_version,
        "function": run.function,
        "args": run.args,
        "static": run.static,
        "compiler_options": run.compiler_options,
        "timings": s.get("timings") or {},
        "cost": s.get("cost") or {},
        "memory": s.get("memory") or {},
        "jaxpr": {"eqn_count": counts.get("jaxpr.eqn_count")},
        "stablehlo": {
            "op_count": counts.get("stablehlo.op_count"),
            "ops": s.get("stablehlo_ops") or {},
        },
        "compiled": {
            "op_count": counts.get("compiled.op_count"),
            "kernel_count": counts.get("compiled.kernel_count"),
            "fusion_count": counts.get("compiled.fusion_count"),
            "ops": s.get("ops") or {},
        },
        "kernels": None,
        "graphs": {},
    }


def sample_runs(runs: list[Run]) -> list[Run]:
    """Only runs of a built-in sample whose code is still that sample's code (demo mode
    shows and re-opens these only, and re-opens them by sample name)."""
    from viz.samples import list_samples

    pristine = {s.name: code_hash(s.code) for s in list_samples()}
    return [r for r in runs if r.sample in pristine and r.code_hash == pristine[r.sample]]


def sample_of(code: str) -> str | None:
    """The built-in sample whose file is exactly `code`, if any."""
    from viz.samples import list_samples

    return next((s.name for s in list_samples() if s.code == code), None)


def record_api_run(report: Any) -> int | None:
    """`analyze(..., history=True)`: record a `Report` with the code of its source file.
    A history that cannot be written becomes a warning in the report, never an error."""
    path = Path(report.source_file) if report.source_file else None
    code = path.read_text() if path and path.is_file() else None
    try:
        return History().record(
            report.to_dict(include_models=True),
            code=code,
            sample=sample_of(code) if code else None,
            source="api",
        )
    except (sqlite3.Error, OSError, HistoryError) as exc:
        report.warnings.append(f"could not record the run in history: {exc}")
        return None
