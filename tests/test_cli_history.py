"""The history commands of the CLI, run as a user would run them: `analyze` records
(unless `--no-history`), `history` lists, `diff A B` compares ids or JSON files.

Each test has its own JITSCOPE_HOME, so its history starts empty.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from viz.diff import diff_reports
from viz.report import Report
from viz.units import seconds

CHAIN = "samples/elementwise_chain.py::chain"


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "JITSCOPE_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "viz", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def history(home: Path) -> list[dict]:
    proc = cli(home, "history", "--json", "-")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # nothing but JSON on stdout with `-`


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The chain at two shapes, recorded by `analyze`; returns home and both reports."""
    home = tmp_path_factory.mktemp("home")
    outs = home / "a.json", home / "b.json"
    for shape, out in zip(("f32[512,512]", "f32[64,64]"), outs, strict=True):
        proc = cli(home, "analyze", CHAIN, "--args", shape, "--runs", "2", "--json", str(out))
        assert proc.returncode == 0, proc.stderr
        assert "recorded as #" in proc.stderr
    return home, *outs


def test_analyze_records_each_run_with_its_numbers(two_runs):
    home, _, b_json = two_runs
    runs = history(home)
    assert [r["args"] for r in runs] == ["f32[64,64]", "f32[512,512]"]  # newest first
    newest, report = runs[0], json.loads(b_json.read_text())
    assert newest["source"] == "cli" and newest["sample"] == "elementwise_chain"
    assert newest["summary"]["counts"]["jaxpr.eqn_count"] == report["jaxpr"]["eqn_count"] == 24
    assert newest["summary"]["timings"]["run_median_s"] == report["timings"]["run_median_s"]


def test_no_history_opts_out(tmp_path):
    proc = cli(tmp_path, "analyze", CHAIN, "--args", "f32[8]", "--runs", "0", "--no-history")
    assert proc.returncode == 0, proc.stderr
    assert history(tmp_path) == []
    assert "no runs recorded yet" in cli(tmp_path, "history").stdout


def test_history_prints_a_table_and_filters_by_function(two_runs):
    home, _, _ = two_runs
    proc = cli(home, "history", "--function", "chain")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 3 and "chain(f32[64,64])" in lines[1] and "24→51→1" in lines[1]
    assert "no runs" in cli(home, "history", "--function", "other").stdout


def test_diff_by_ids_and_by_files_gives_b_minus_a(two_runs, tmp_path):
    home, a_json, b_json = two_runs
    a, b = json.loads(a_json.read_text()), json.loads(b_json.read_text())
    ids = [r["id"] for r in history(home)][::-1]
    out = tmp_path / "diff.json"
    by_id = cli(home, "diff", str(ids[0]), f"#{ids[1]}", "--json", str(out))
    assert by_id.returncode == 0, by_id.stderr
    assert by_id.stdout.startswith(f"A: #{ids[0]} chain(f32[512,512])")
    assert f"wrote the JSON: {out} (" in by_id.stderr
    diff = json.loads(out.read_text())
    by_file = json.loads(cli(home, "diff", str(a_json), str(b_json), "--json", "-").stdout)
    for d in (diff, by_file):
        assert d["memory"]["argument_bytes"]["delta"] == (
            b["memory"]["argument_bytes"] - a["memory"]["argument_bytes"]
        )
        assert d["timings"]["compile_s"]["delta"] == (
            b["timings"]["compile_s"] - a["timings"]["compile_s"]
        )
        assert d["kernels"]["unchanged"] == 1
    assert diff["ir"]["jaxpr"]["kept"] and "+{ lambda ; a:f32[64,64]" in diff["ir"]["jaxpr"]["diff"]


def test_diff_of_an_unknown_id_or_a_bad_file_is_misuse(two_runs, tmp_path):
    home, a_json, _ = two_runs
    proc = cli(home, "diff", "999", str(a_json))
    assert proc.returncode == 2 and "no run #999" in proc.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    proc = cli(home, "diff", str(a_json), str(bad))
    assert proc.returncode == 2 and "cannot read a report" in proc.stderr


def test_diff_json_is_the_diff_of_the_decoded_reports(two_runs):
    home, a_json, b_json = two_runs
    proc = cli(home, "diff", str(a_json), str(b_json), "--json", "-")
    assert proc.returncode == 0, proc.stderr
    a, b = (Report.from_dict(json.loads(p.read_text())) for p in (a_json, b_json))
    assert proc.stdout == json.dumps(diff_reports(a, b).to_dict(), indent=2, default=str) + "\n"


def test_a_diff_side_may_be_a_file_and_the_other_an_id(two_runs):
    home, a_json, _ = two_runs
    newest = history(home)[0]["id"]
    d = json.loads(cli(home, "diff", str(a_json), f"#{newest}", "--json", "-").stdout)
    assert (d["a"]["id"], d["a"]["full"]) == (None, True)  # a file: no history id
    assert (d["b"]["id"], d["b"]["full"], d["b"]["args"]) == (newest, True, "f32[64,64]")


def test_a_json_file_that_is_not_a_report_is_misuse(two_runs, tmp_path):
    home, a_json, _ = two_runs
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    proc = cli(home, "diff", str(a_json), str(listed))
    assert proc.returncode == 2 and "is not a report" in proc.stderr


def test_the_history_table_shows_each_runs_compile_total(two_runs):
    home, _, b_json = two_runs
    report = Report.from_dict(json.loads(b_json.read_text()))
    head, newest = cli(home, "history").stdout.splitlines()[:2]
    assert seconds(report.compile_total_s) in newest
    assert "trace → compile" in head  # trace + lower + compile, as the app says
