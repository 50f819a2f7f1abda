"""Real jax.distributed jobs on this machine's CPU, each process under `jitscope record`
(2 and 4 processes, 2 CPU devices each, gloo collectives between them), and
`jitscope job` on what they recorded."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow

PROGRAM = REPO / "tests" / "programs" / "data_parallel.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Ended:
    index: int
    returncode: int
    stdout: str
    stderr: str


def run_job(home: Path, out: Path, processes: int, *flags: str) -> list[Ended]:
    """Every process of one job started at once, as a shell loop would, each recorded;
    their recordings land in `out/p{process}.json` and in the history under `home`."""
    coordinator = f"localhost:{free_port()}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "JITSCOPE_HOME": str(home)}
    record = [sys.executable, "-m", "viz", "record", "--json", str(out / "p{process}.json")]
    job_flags = ["--", str(PROGRAM), "--coordinator", coordinator, "--timeout", "10"]
    job_flags += ["--processes", str(processes)]
    children = [
        subprocess.Popen(
            [*record, *job_flags, "--process", str(i), *flags],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    ended = []
    for i, child in enumerate(children):
        stdout, stderr = child.communicate(timeout=300)
        ended.append(Ended(i, child.returncode, stdout, stderr))
    return ended


def job(home: Path, *refs: str) -> tuple[int, dict | None, str]:
    """`jitscope job REFS --json -`: exit status, the Job JSON, stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "viz", "job", *refs, "--json", "-"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "JITSCOPE_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, json.loads(done.stdout) if done.returncode == 0 else None, done.stderr


def recorded(out: Path, processes: int) -> list[dict]:
    return [json.loads((out / f"p{i}.json").read_text()) for i in range(processes)]


def test_two_processes_that_compile_alike_share_one_job_and_do_not_diverge(tmp_path):
    ended = run_job(tmp_path, tmp_path, 2)
    for e in ended:
        assert e.returncode == 0, e.stderr
        assert f"process {e.index}: loss" in e.stdout
        tagged = [line for line in e.stderr.splitlines() if "jitscope:" in line]
        assert tagged and all(line.startswith(f"[p{e.index}] jitscope:") for line in tagged)
    data = recorded(tmp_path, 2)
    processes = [d["program"]["process"] for d in data]
    assert [(p["index"], p["count"]) for p in processes] == [(0, 2), (1, 2)]
    assert processes[0]["job"] and processes[0]["job"] == processes[1]["job"]
    assert all(p["host"] == socket.gethostname() for p in processes)
    status, view, _ = job(tmp_path)  # no REC: the newest job in history
    assert status == 0 and view["job"] == processes[0]["job"]
    assert [(p["index"], p["compiles"]) for p in view["processes"]] == [(0, 2), (1, 2)]
    assert view["divergences"] == []
    assert {s["function"] for s in view["stragglers"]} == {"train_step", "evaluate"}


def test_a_function_only_process_1_compiles_is_a_missing_divergence(tmp_path):
    ended = run_job(tmp_path, tmp_path, 2, "--extra-on", "1")
    assert [e.returncode for e in ended] == [0, 0], ended[1].stderr
    status, view, _ = job(tmp_path, str(tmp_path / "p0.json"), str(tmp_path / "p1.json"))
    assert status == 0
    (d,) = view["divergences"]
    assert (d["function"], d["kind"], d["processes"]) == ("batch_stats", "missing", [1])
    sites = {s["process"]: s for s in d["call_sites"]}
    assert sites[1]["call_site"] == "tests/programs/data_parallel.py:90"
    assert sites[0]["function"] == "evaluate"  # where process 0 went on instead


def test_four_processes_one_with_another_local_batch_one_with_an_extra_function(tmp_path):
    ended = run_job(tmp_path, tmp_path, 4, "--batch-on", "2=12", "--extra-on", "3")
    assert [e.returncode for e in ended] == [0] * 4, [e.stderr[-2000:] for e in ended]
    jobs = {d["program"]["process"]["job"] for d in recorded(tmp_path, 4)}
    assert len(jobs) == 1 and None not in jobs
    status, view, _ = job(tmp_path)
    assert status == 0 and len(view["processes"]) == 4
    found = {(d["kind"], d["function"]): d for d in view["divergences"]}
    assert set(found) == {
        ("signature", "train_step"),
        ("signature", "evaluate"),
        ("missing", "batch_stats"),
    }
    shape = found["signature", "train_step"]
    assert shape["processes"] == [2]
    assert "x: f32[48,16] where the others had f32[32,16]" in shape["detail"]
    assert found["missing", "batch_stats"]["processes"] == [3]


def test_two_jobs_in_one_history_stay_apart(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = run_job(tmp_path, tmp_path / "a", 2)
    second = run_job(tmp_path, tmp_path / "b", 2, "--extra-on", "0")
    assert [e.returncode for e in first + second] == [0] * 4
    status, newest, _ = job(tmp_path)
    job_a = recorded(tmp_path / "a", 2)[0]["program"]["process"]["job"]
    assert status == 0 and newest["job"] != job_a and len(newest["processes"]) == 2
    assert [d["processes"] for d in newest["divergences"]] == [[0]]
    ids = sorted(int(p["recording"].removeprefix("rec:")) for p in newest["processes"])
    older = ({1, 2, 3, 4} - set(ids)).pop()
    status, earlier, _ = job(tmp_path, f"rec:{older}")  # one id: its whole job
    assert status == 0 and earlier["job"] == job_a and earlier["divergences"] == []
    status, _, complaint = job(tmp_path, f"rec:{ids[0]}", f"rec:{older}")
    assert status == 2 and "2 different jobs" in complaint


def test_a_process_killed_with_sigkill_is_shown_as_ended_early(tmp_path):
    ended = run_job(tmp_path, tmp_path, 2, "--die-on", "1", "--timeout", "5")
    assert ended[1].returncode == 128 + 9
    status, view, _ = job(tmp_path)
    assert status == 0
    killed = view["processes"][1]
    assert (killed["ended_early"], killed["exit_code"], killed["signal"]) == (
        True, 137, "SIGKILL"
    )  # fmt: skip
    assert killed["compiles"] == 1  # its train_step, written as it went
    assert view["processes"][0]["ended_s"] > killed["ended_s"]


def test_a_program_without_jax_distributed_records_no_process(tmp_path):
    script = tmp_path / "alone.py"
    script.write_text("import jax, jax.numpy as jnp\njax.jit(jnp.sin)(1.0)\n")
    out = tmp_path / "p{process}.json"
    done = subprocess.run(
        [sys.executable, "-m", "viz", "record", "--json", str(out), "--", str(script)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO), "JITSCOPE_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "p0.json").read_text())["program"]["process"] is None
    assert "[p" not in done.stderr
    status, _, complaint = job(tmp_path)
    assert status == 2 and "no multi-process job in history" in complaint
