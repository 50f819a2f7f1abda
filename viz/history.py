"""Run history: every analysis, kept in `$JITSCOPE_HOME/history.sqlite`.

The database is the durable store; the app's in-session list of results is only a
view of the current session. It is bounded: the last `keep_reports` runs keep their
full report (IR texts, kernels, the compiled graph), and older runs keep only their
summary numbers (counts, timings, cost, memory, op histograms), which is all the
history list and most of a diff need. At most `keep_runs` runs are kept at all.

`History.report(id)` gives a run back as a `Report` (the full one, or a skeleton of
its numbers); what travels beside it (the id, when it ran, whether the full report is
kept, the code, the sample) is the `Run` row, never part of the report.

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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from viz.diff import Origin, donated_names, numbers
from viz.errors import KINDS, ErrorInfo, ErrorKind
from viz.plain import Plain
from viz.report import (
    CompiledSection,
    Cost,
    JaxprSection,
    Memory,
    Report,
    StableHLOSection,
    Timings,
)
from viz.samples import Sample, get_sample, list_samples
from viz.source import home

if TYPE_CHECKING:
    from viz.program import Program

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
    def origin(self) -> Origin:
        """This run as one side of a diff."""
        return Origin(id=self.id, when=self.when, full=self.full)

    @property
    def numbers(self) -> Report:
        """Its summary numbers as a report (`skeleton`): counts, timings, cost, memory."""
        return skeleton(self)

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


def _payload(report: Report) -> bytes:
    """The report as kept: its JSON, plus the compiled graph model for the diff view."""
    data = report.to_dict()
    if "compiled" in report.graph_models:
        data["graph_models"] = {"compiled": report.graph_models["compiled"].to_dict()}
    return zlib.compress(json.dumps(data, default=str).encode())


def _unpack(payload: bytes) -> Report | None:
    """A kept report, decoded once; None for one this jitscope cannot read (say, an
    error kind an older one wrote): the run's numbers stand in for it."""
    try:
        return Report.from_dict(json.loads(zlib.decompress(payload)))
    except (ValueError, TypeError, KeyError, zlib.error):
        return None


@dataclass(frozen=True)
class Recorded:
    """A run of the history and its report, read together: the full report while the
    history keeps it (`run.full`), else the run's numbers as a report (`skeleton`)."""

    run: Run
    report: Report

    @property
    def origin(self) -> Origin:
        return self.run.origin


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
        report: Report,
        *,
        code: str | None = None,
        sample: str | None = None,
        source: str = "api",
    ) -> int:
        """Store one analysis with the code that ran and the built-in sample it is, if
        any; returns its id. Prunes to the bound in the same transaction."""
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

    def report(self, run_id: int) -> Report | None:
        """The run's report: the full report while it is kept, else a skeleton rebuilt
        from the summary numbers (no texts, kernels or graphs; `get(id).full` says
        which). None for an unknown id."""
        recorded = self.recorded(run_id)
        return recorded.report if recorded else None

    def recorded(self, run_id: int) -> Recorded | None:
        """The run and its report, read at once (so `run.full` says which report it
        is). None for an unknown id."""
        with self._connect() as db:
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
        """The run as a program to open again: its code, function, args, static and
        donated arguments and compiler options. The sample stays named only while the
        code is still the sample's. `sample_only` (demo mode): the code is the
        sample's, loaded by name, never the database's."""
        from viz.program import Program  # the worker's protocol: not for the recorder

        if sample_only:
            base = Program.from_sample(get_sample(run.sample or ""))
        else:
            code = self.code(run.id) or ""
            sample = _sample(run.sample)
            base = Program(
                code=code,
                function=run.function,
                sample=run.sample if sample and sample.code == code else None,
                extra=dict(sample.extra) if sample else {},
            )
        return replace(
            base,
            function=run.function,
            args=run.args,
            static=list(run.static),
            donate=list(run.donate),
            compiler_options=dict(run.compiler_options),
        )


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


@dataclass
class Summary(Plain):
    """A run's stored summary (`viz.diff.numbers`), decoded once. A file written by an
    older jitscope may lack keys (they take their defaults) or hold nulls."""

    counts: dict[str, int | None] = field(default_factory=dict)  # by COUNT_PATHS name
    timings: Timings | None = None
    cost: Cost | None = None
    memory: Memory | None = None
    ops: dict[str, int] | None = None
    stablehlo_ops: dict[str, int] | None = None


def skeleton(run: Run) -> Report:
    """A report with only what a pruned run still knows: its summary numbers. Every
    section is there, with no text; no kernels, no graphs."""
    s = Summary.from_dict(run.summary)
    counts = s.counts or {}
    report = Report(
        device=run.device,
        jax_version=run.jax_version,
        function=run.function,
        args=run.args,
        static=list(run.static),
        compiler_options=dict(run.compiler_options),
        timings=s.timings or Timings(),
        cost=s.cost or Cost(),
        memory=s.memory or Memory(),
        jaxpr=JaxprSection(eqn_count=counts.get("jaxpr.eqn_count")),
        stablehlo=StableHLOSection(
            op_count=counts.get("stablehlo.op_count"), ops=dict(s.stablehlo_ops or {})
        ),
        compiled=CompiledSection(
            op_count=counts.get("compiled.op_count"),
            kernel_count=counts.get("compiled.kernel_count"),
            fusion_count=counts.get("compiled.fusion_count"),
            ops=dict(s.ops or {}),
        ),
    )
    return report if run.ok else report.fail(_kept_error(run.error_kind))


def _kept_error(kind: str | None) -> ErrorInfo:
    """A failed run's error, of which the history keeps the kind only."""
    if kind in KINDS:
        shown = kind.replace("_", " ")
        return ErrorInfo(kind, f"{shown}: the history kept only the kind of this error")
    return ErrorInfo(
        ErrorKind.INTERNAL_ERROR,
        f"this run failed ({kind or 'kind not recorded'}); the history kept no more of it",
    )


def _sample(name: str | None) -> Sample | None:
    """The built-in sample of that name, None for none (or one no longer shipped)."""
    try:
        return get_sample(name) if name else None
    except KeyError:
        return None


def sample_runs(runs: list[Run]) -> list[Run]:
    """Only runs of a built-in sample whose code is still that sample's code (demo mode
    shows and re-opens these only, and re-opens them by sample name)."""
    pristine = {s.name: code_hash(s.code) for s in list_samples()}
    return [r for r in runs if r.sample in pristine and r.code_hash == pristine[r.sample]]


def sample_of(code: str) -> str | None:
    """The built-in sample whose file is exactly `code`, if any."""
    return next((s.name for s in list_samples() if s.code == code), None)


def record_api_run(report: Report) -> int | None:
    """`analyze(..., history=True)`: record a `Report` with the code of its source file.
    A history that cannot be written becomes a warning in the report, never an error."""
    path = Path(report.source_file) if report.source_file else None
    code = path.read_text() if path and path.is_file() else None
    try:
        return History().record(
            report,
            code=code,
            sample=sample_of(code) if code else None,
            source="api",
        )
    except (sqlite3.Error, OSError, HistoryError) as exc:
        report.warnings.append(f"could not record the run in history: {exc}")
        return None
