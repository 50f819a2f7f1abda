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

Modules: `store` (`History`: connections, writing, reading and pruning runs;
`record_api_run`), `schema` (the tables and their migrations, the recordings table's
too) and `runs` (`Run`, `Recorded`, the skeleton report of a pruned run, which runs are
of a sample). The recordings of whole programs share the file and its connection; their
table's SQL is the recorder's (`viz.recorder.storage.recordings`).
"""

from importlib import import_module
from typing import Any

from viz.history.schema import MIGRATIONS, SCHEMA_VERSION, code_hash
from viz.history.store import (
    DEFAULT_KEEP_REPORTS,
    DEFAULT_KEEP_RUNS,
    FILE_NAME,
    History,
    HistoryError,
    default_path,
    record_api_run,
)

__all__ = [
    "DEFAULT_KEEP_REPORTS",
    "DEFAULT_KEEP_RUNS",
    "FILE_NAME",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "History",
    "HistoryError",
    "Recorded",
    "Run",
    "Summary",
    "code_hash",
    "default_pair",
    "default_path",
    "record_api_run",
    "sample_of",
    "sample_runs",
    "skeleton",
]

_RUNS = ("Recorded", "Run", "Summary", "default_pair", "sample_of", "sample_runs", "skeleton")


def __getattr__(name: str) -> Any:
    """`viz.history.runs`'s names, imported on first use: it imports the report and the
    samples (numpy: 0.2 s), which a recording stored by `jitscope record` needs not."""
    if name in _RUNS:
        return getattr(import_module("viz.history.runs"), name)
    raise AttributeError(f"module 'viz.history' has no attribute {name!r}")
