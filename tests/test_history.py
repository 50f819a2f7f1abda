"""viz.history: the run history in $JITSCOPE_HOME/history.sqlite.

Reports come from the real `viz.analyze` on small functions defined here; each test
uses its own database file.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import zlib
from dataclasses import replace
from pathlib import Path

import jax.numpy as jnp
import pytest
from conftest import REPO

from viz import analyze
from viz.diff import numbers
from viz.errors import ErrorKind
from viz.history import SCHEMA_VERSION, History, HistoryError, Run, default_pair, sample_runs
from viz.report import DonatedArg, Donation, Report
from viz.samples import get_sample
from viz.settings import Settings


def scale(x):
    return jnp.sin(x) * 2.0 + 1.0


def matmul(x, y):
    return jnp.dot(x, y) + 1.0


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    """Real reports, analyzed once for the module (compile only), graph models included."""
    return {
        "scale8": analyze(scale, "f32[8]", runs=0),
        "scale64": analyze(scale, "f32[64,64]", runs=0),
        "matmul": analyze(matmul, "f32[16,32], f32[32,8]", runs=0),
    }


@pytest.fixture
def db(tmp_path: Path) -> History:
    return History(tmp_path / "history.sqlite")


def test_a_recorded_run_survives_a_new_connection_and_a_new_process(db, reports, tmp_path):
    run_id = db.record(reports["scale8"], code="def scale(x): ...", source="cli")
    again = History(db.path).get(run_id)  # a second History object: fresh connections
    assert (
        again is not None and again.settings.function == "scale" and again.settings.args == "f32[8]"
    )
    script = (
        "import sys, json; sys.path.insert(0, sys.argv[1]); from viz.history import History; "
        "h = History(sys.argv[2]); r = h.runs()[0]; "
        "print(json.dumps([r.id, r.settings.function, r.summary['counts'], h.code(r.id)]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(REPO), str(db.path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    rid, function, counts, code = json.loads(out.stdout)
    assert (rid, function, code) == (run_id, "scale", "def scale(x): ...")
    assert counts == numbers(reports["scale8"])["counts"]
    assert counts["jaxpr.eqn_count"] == reports["scale8"].jaxpr.eqn_count


def test_the_full_report_comes_back_as_recorded(db, reports):
    recorded = reports["matmul"]
    run_id = db.record(recorded, code="x")
    back = db.report(run_id)
    assert isinstance(back, Report) and db.get(run_id).full
    assert back.to_dict() == json.loads(json.dumps(recorded.to_dict()))  # nothing added
    assert set(back.graph_models) == {"compiled"}  # the diff view's graph, not all three
    assert back.graph_models["compiled"].to_dict() == recorded.graph_models["compiled"].to_dict()


def test_what_travels_beside_the_report_is_the_run(db, reports):
    run_id = db.record(reports["matmul"], code="x", sample=None, source="cli")
    recorded = db.recorded(run_id)
    assert (recorded.run.id, recorded.run.source, recorded.run.full) == (run_id, "cli", True)
    assert recorded.origin.id == run_id and recorded.origin.when == recorded.run.when
    assert "history" not in recorded.report.to_dict()


def test_the_bound_keeps_the_newest_full_reports_and_summaries_of_older_runs(tmp_path, reports):
    db = History(tmp_path / "h.sqlite", keep_reports=3, keep_runs=5)
    ids = [
        db.record(reports["scale8" if i % 2 else "matmul"], code=f"# version {i}") for i in range(8)
    ]
    runs = db.runs()
    assert [r.id for r in runs] == ids[::-1][:5]  # the 5 newest runs are left
    assert [r.full for r in runs] == [True] * 3 + [False] * 2
    assert db.get(ids[2]) is None and db.report(ids[2]) is None
    old = db.recorded(ids[3])  # pruned to its summary: numbers kept, texts gone
    assert old.run.full is False and old.origin.full is False
    assert numbers(old.report) == numbers(reports["scale8"])
    assert old.report.compiled.text == "" and old.report.kernels == [] and not old.report.graphs
    with sqlite3.connect(db.path) as raw:  # code of deleted runs goes with them
        kept = {row[0] for row in raw.execute("SELECT code FROM sources")}
        assert raw.execute("SELECT COUNT(*) FROM reports").fetchone()[0] == 3
    assert kept == {f"# version {i}" for i in range(3, 8)}


def test_the_bound_holds_across_many_runs_and_restarts(tmp_path, reports):
    path = tmp_path / "h.sqlite"
    for _ in range(4):  # four "sessions", each a new History on the same file
        db = History(path, keep_reports=2, keep_runs=6)
        for _ in range(5):
            db.record(reports["scale8"], code="same code")
    assert db.count() == 6
    assert sum(r.full for r in db.runs()) == 2
    assert db.runs()[0].id == 20


def test_threads_record_concurrently_without_losing_a_run(db, reports):
    ids: list[int] = []

    def record_some() -> None:
        for _ in range(10):
            ids.append(db.record(reports["scale8"], code="c"))

    threads = [threading.Thread(target=record_some) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 40 and db.count() == 40


def test_processes_create_and_fill_one_new_file_at_once(tmp_path):
    path = tmp_path / "shared.sqlite"
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); from viz.history import History; h = "
        "History(sys.argv[2], keep_reports=4); from viz.report import Report, Subject; "
        "[h.record(Report(subject=Subject(function='f', args=str(i))), code=f'c{i % 2}') "
        "for i in range(10)]"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(REPO), str(path)]) for _ in range(3)
    ]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    db = History(path)
    assert db.count() == 30 and sum(r.full for r in db.runs()) == 4
    assert db.schema_version() == SCHEMA_VERSION


def test_filter_by_function_and_the_previous_run_of_the_same_function(db, reports):
    first = db.record(reports["scale8"])
    db.record(reports["matmul"])
    second = db.record(reports["scale64"])
    assert [r.settings.args for r in db.runs(function="scale")] == ["f32[64,64]", "f32[8]"]
    assert db.functions() == ["matmul", "scale"]
    assert db.previous(second).id == first
    assert db.previous(first) is None


def test_options_static_and_donation_are_stored_and_shown(db, reports):
    donation = Donation(args=[DonatedArg("x", True, 0), DonatedArg("y", False, None)])
    scale8 = reports["scale8"]
    options = {"xla_disable_hlo_passes": "fusion"}
    report = replace(
        scale8,
        subject=replace(scale8.subject, static=["n"], compiler_options=options),
        donation=donation,
    )
    run = db.get(db.record(report))
    assert run.settings.compiler_options == {"xla_disable_hlo_passes": "fusion"}
    assert run.settings.donate == ["x"]
    assert run.options_text == "xla_disable_hlo_passes=fusion · static n · donate x"


def test_a_failed_run_keeps_its_error_kind(db):
    report = analyze(scale, "f32[3,,4]", runs=0)
    run = db.get(db.record(report))
    assert run.ok is False and run.error_kind == "spec_error"
    assert run.summary["counts"]["jaxpr.eqn_count"] is None


def test_a_pruned_failed_run_is_a_report_with_the_kind_of_its_error(tmp_path, reports):
    db = History(tmp_path / "h.sqlite", keep_reports=1)
    failed = db.record(analyze(scale, "f32[3,,4]", runs=0))
    db.record(reports["scale8"])
    skeleton = db.report(failed)
    assert skeleton.ok is False and skeleton.error.kind is ErrorKind.SPEC_ERROR
    assert "kept only the kind" in skeleton.error.message
    assert (skeleton.function, skeleton.args) == ("scale", "f32[3,,4]")


def test_a_runs_numbers_are_a_report_with_its_compile_total(db, reports):
    report = analyze(scale, "f32[4]", runs=2)
    n = db.get(db.record(report)).numbers
    assert n.compile_total_s == report.compile_total_s > 0
    assert n.timings.run_median_s == report.timings.run_median_s
    assert n.compiled.kernel_count == report.compiled.kernel_count
    assert n.stablehlo.ops == report.stablehlo.ops


def test_a_report_read_back_from_its_json_is_recorded_like_the_report(db, reports):
    read_back = Report.from_dict(reports["matmul"].to_dict(include_models=True))
    as_json = db.get(db.record(read_back))
    as_report = db.get(db.record(reports["matmul"]))
    assert as_json.summary == as_report.summary and as_json.settings.function == "matmul"
    assert db.report(as_json.id).to_dict() == db.report(as_report.id).to_dict()


def test_a_kept_report_this_jitscope_cannot_read_falls_back_to_its_numbers(db, reports):
    run_id = db.record(reports["scale8"])
    bad = {**reports["scale8"].to_dict(), "ok": False, "error": {"kind": "gone", "message": "?"}}
    with sqlite3.connect(db.path) as raw:
        raw.execute(
            "UPDATE reports SET payload = ? WHERE run_id = ?",
            (zlib.compress(json.dumps(bad).encode()), run_id),
        )
    recorded = db.recorded(run_id)
    assert recorded.run.full is False
    assert numbers(recorded.report) == numbers(reports["scale8"])


def test_a_run_opens_again_as_its_program(db, reports):
    sample = get_sample("dot_plus_one")
    matmul = reports["matmul"]
    report = replace(
        matmul, subject=replace(matmul.subject, static=["y"], compiler_options={"k": "v"})
    )
    pristine = db.get(db.record(report, code=sample.code, sample=sample.name))
    program = db.program(pristine)
    assert (program.settings.code, program.settings.sample, program.settings.function) == (
        sample.code,
        sample.name,
        "matmul",
    )
    assert (program.settings.args, program.settings.static, program.settings.compiler_options) == (
        "f32[16,32], f32[32,8]",
        ["y"],
        {"k": "v"},
    )
    edited = db.get(db.record(report, code=sample.code + "# edited\n", sample=sample.name))
    assert db.program(edited).settings.sample is None and db.program(edited).settings.code.endswith(
        "# edited\n"
    )
    demo = db.program(edited, sample_only=True)  # demo mode: the sample's code, by name
    assert demo.settings.code == sample.code and demo.settings.args == "f32[16,32], f32[32,8]"


def test_demo_mode_sees_only_runs_of_unedited_samples(db, reports):
    sample = get_sample("dot_plus_one")
    pristine = db.record(reports["matmul"], code=sample.code, sample=sample.name)
    db.record(reports["matmul"], code=sample.code + "\n# edited", sample=sample.name)
    db.record(reports["scale8"], code="def scale(x): ...")
    assert [r.id for r in sample_runs(db.runs())] == [pristine]


# --------------------------------------------------------------------------- schema


def write_v1_file(path: Path, report: Report) -> None:
    """A history file as jitscope's schema v1 wrote it: code and report (its JSON) inline."""
    with sqlite3.connect(path) as raw:
        raw.executescript(
            """
            CREATE TABLE runs (
                id INTEGER PRIMARY KEY AUTOINCREMENT, created REAL NOT NULL,
                function TEXT NOT NULL, args TEXT NOT NULL, static TEXT NOT NULL,
                device TEXT NOT NULL, ok INTEGER NOT NULL, summary TEXT NOT NULL,
                code TEXT, report TEXT
            );
            PRAGMA user_version = 1;
            """
        )
        raw.execute(
            "INSERT INTO runs VALUES (7, 1700000000.0, 'scale', 'f32[8]', '[]', 'cpu', 1, ?, ?, ?)",
            (json.dumps(numbers(report)), "def scale(x): ...", json.dumps(report.to_dict())),
        )
        raw.execute(
            "INSERT INTO runs VALUES (8, 1700000001.0, 'scale', 'f32[8]', '[]', 'cpu', 1, ?, "
            "NULL, NULL)",
            (json.dumps(numbers(report)),),
        )


def test_a_v1_file_migrates_forward_and_keeps_its_runs(tmp_path, reports):
    path = tmp_path / "old.sqlite"
    write_v1_file(path, reports["scale8"])
    public = reports["scale8"].to_dict()
    db = History(path)
    assert db.schema_version() == SCHEMA_VERSION == 4
    old, bare = db.get(7), db.get(8)
    assert old.full and old.source == "unknown" and db.code(7) == "def scale(x): ..."
    assert db.report(7).compiled.text == public["compiled"]["text"]
    assert db.report(7).to_dict() == public
    assert not bare.full and db.code(8) is None
    assert db.report(8).compiled.kernel_count == public["compiled"]["kernel_count"]
    new = db.record(reports["matmul"], code="y")
    assert new == 9 and db.count() == 3  # ids continue after the migrated ones


def test_a_summary_an_older_jitscope_wrote_still_reads_as_numbers(tmp_path, reports):
    path = tmp_path / "old.sqlite"
    write_v1_file(path, reports["scale8"])
    older = {"counts": {"jaxpr.eqn_count": 3}, "timings": None}  # fewer keys, a null
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE runs SET summary = ? WHERE id = 8", (json.dumps(older),))
    n = History(path).get(8).numbers
    assert n.jaxpr.eqn_count == 3 and n.compiled.kernel_count is None
    assert n.compile_total_s == 0 and n.ok


def test_a_file_from_a_newer_jitscope_is_refused_with_a_clear_error(tmp_path):
    path = tmp_path / "new.sqlite"
    with sqlite3.connect(path) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(HistoryError, match="newer than this"):
        History(path).runs()


def test_reports_are_stored_compressed(db, reports):
    run_id = db.record(reports["scale64"])
    with sqlite3.connect(db.path) as raw:
        (payload,) = raw.execute(
            "SELECT payload FROM reports WHERE run_id = ?", (run_id,)
        ).fetchone()
    assert len(payload) < len(json.dumps(reports["scale64"].to_dict(include_models=True))) / 3
    assert json.loads(zlib.decompress(payload))["function"] == "scale"


# --------------------------------------------------------------------------- Python API


def test_the_python_api_records_only_when_asked(jitscope_home):
    db = History()
    assert db.path == jitscope_home / "history.sqlite"
    before = db.count() if db.path.exists() else 0
    analyze(scale, "f32[4]", runs=0)
    assert (db.count() if db.path.exists() else 0) == before
    report = analyze(scale, "f32[5]", runs=0, history=True)
    run = db.runs()[0]
    assert db.count() == before + 1
    assert (run.settings.function, run.settings.args, run.source) == ("scale", "f32[5]", "api")
    assert run.summary["counts"]["compiled.kernel_count"] == report.compiled.kernel_count
    assert "def scale(x):" in db.code(run.id)  # the source file the function came from


def test_a_history_that_cannot_be_opened_raises_only_history_error(tmp_path):
    folder = tmp_path / "history.sqlite"
    folder.mkdir()  # a folder where the file should be: SQLite cannot open it
    with pytest.raises(HistoryError, match=r"^history .*history\.sqlite"):
        History(folder).runs()
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a database" * 100)
    with pytest.raises(HistoryError):
        History(garbage).runs()


# -- an automatic run is recorded once (issue #40: every page load added a row) ------
def test_a_run_recorded_once_is_not_stored_again_when_identical(db, reports):
    first = db.record(reports["scale8"], code="def scale(x): ...", source="app", once=True)
    again = replace(reports["scale8"], timings=replace(reports["scale8"].timings, trace_s=9.0))
    assert db.record(again, code="def scale(x): ...", source="app", once=True) == first
    assert [r.id for r in db.runs()] == [first]  # other timings: the same run, not a new row


def test_a_run_recorded_once_is_stored_when_anything_but_its_timings_differs(db, reports):
    code = "def scale(x): ..."
    first = db.record(reports["scale8"], code=code, source="app", once=True)
    other_args = db.record(reports["scale64"], code=code, source="app", once=True)
    other_code = db.record(reports["scale8"], code=code + "\n", source="app", once=True)
    thunks = {"xla_cpu_use_thunk_runtime": False}
    options = replace(
        reports["scale8"], subject=replace(reports["scale8"].subject, compiler_options=thunks)
    )
    other_options = db.record(options, code=code, source="app", once=True)
    counts = replace(reports["scale8"], jaxpr=replace(reports["scale8"].jaxpr, eqn_count=99))
    other_counts = db.record(counts, code=code, source="app", once=True)
    ids = [first, other_args, other_code, other_options, other_counts]
    assert len(set(ids)) == 5 and db.count() == 5


def test_a_run_recorded_without_once_is_always_stored(db, reports):
    first = db.record(reports["scale8"], code="def scale(x): ...", source="app")
    second = db.record(reports["scale8"], code="def scale(x): ...", source="app")
    assert second != first and db.count() == 2
    assert db.record(reports["scale8"], code="def scale(x): ...", once=True) == second


def a_run(run_id: int, function: str, ok: bool = True) -> Run:
    return Run(
        id=run_id,
        created=0.0,
        source="app",
        ok=ok,
        error_kind=None if ok else "control_flow",
        code_hash=None,
        jax_version="",
        settings=Settings(function=function),
    )


def test_the_default_diff_is_the_two_newest_successful_runs_of_one_function():
    runs = [a_run(5, "relu", ok=False), a_run(4, "block"), a_run(3, "f"), a_run(2, "block")]
    assert [r.id for r in default_pair(runs)[:2]] == [2, 4] and default_pair(runs)[2] == ""
    unrelated = [a_run(2, "relu", ok=False), a_run(1, "block")]
    a, b, why = default_pair(unrelated)
    assert (a.id, b.id) == (1, 2) and "two newest" in why
    assert [r.id for r in default_pair([a_run(1, "f")])[:2]] == [1, 1]
