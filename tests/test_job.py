"""A multi-process job from its processes' recordings: divergences, stragglers, endings,
and the history that keeps jobs apart. Recordings are built here as the recorder
writes them (`Tally`); test_job_cli.py records real jax.distributed jobs."""

from __future__ import annotations

import json
import sqlite3

import pytest

from viz.history import History
from viz.recorder.cli.record import json_path, tagged
from viz.recorder.display.divergence import Member, majority, processes_text
from viz.recorder.display.job import JobError, job_view
from viz.recorder.model import ArgLeaf, Compile, Process, ProcessRun, Recording
from viz.recorder.storage.recordings import Recordings, recording_id
from viz.recorder.tally import Tally

CWD = "/home/me/project"
MESH = "P('data',) over mesh(data=4)"


def leaf(arg: str, shape: list[int], sharded: bool = True) -> ArgLeaf:
    return ArgLeaf(arg, shape, "float32", sharding=MESH if sharded else None)


def step(name: str, rows: int = 8, sharded: bool = True, line: int = 10) -> dict:
    """A compile of `name` over a batch of `rows` rows, called from train.py:`line`."""
    return {
        "function": name,
        "signature": [leaf("x", [rows, 16], sharded), leaf("y", [rows, 1], sharded)],
        "line": line,
    }


def recording(
    index: int,
    compiles: list[dict],
    job: str | None = "job-a",
    count: int = 2,
    exit_code: int | None = 0,
    signal: str | None = None,
    seconds: float = 0.25,
    started: float = 1000.0,
    cwd: str = CWD,
) -> Recording:
    program = ProcessRun(
        argv=["train.py"],
        cwd=cwd,
        started=started + index * 0.1,
        wall_s=5.0,
        exit_code=exit_code,
        signal=signal,
        process=Process(index, count, job, f"host{index}"),
    )
    tally = Tally(program)
    for seq, c in enumerate(compiles, 1):
        tally.add_compile(
            Compile(
                seq=seq,
                t_s=0.5 * seq,
                function=c["function"],
                defined_at=f"{cwd}/train.py:{3 + len(c['function'])}",
                call_site=f"{cwd}/train.py:{c['line']}",
                stack=[f"{cwd}/train.py:{c['line']} in main"],
                signature=c["signature"],
                compile_s=c.get("seconds", seconds),
            )
        )
    return tally.recording()


def view(*recordings: Recording):
    return job_view([Member(f"rec:{i + 1}", r) for i, r in enumerate(recordings)])


def alike(count: int = 2, **kw) -> list[Recording]:
    return [
        recording(i, [step("train_step"), step("evaluate", line=20)], count=count, **kw)
        for i in range(count)
    ]


def test_processes_that_compile_alike_show_no_divergence():
    job = view(*alike(4))
    assert job.divergences == []
    assert job.job == "job-a" and [p.index for p in job.processes] == [0, 1, 2, 3]
    assert job.absent == [] and not any(p.ended_early for p in job.processes)


def test_an_extra_function_on_process_1_is_missing_elsewhere_named_with_its_process():
    extra = [step("train_step"), step("batch_stats", sharded=False, line=12), step("evaluate")]
    job = view(alike()[0], recording(1, extra))
    (d,) = job.divergences
    assert (d.kind, d.function, d.processes) == ("missing", "batch_stats", [1])
    assert d.detail == "compiled by process 1 only (not by process 0)"
    here, there = d.call_sites
    assert (here.process, here.call_site, here.note) == (1, "train.py:12", "compiled it here")
    assert (there.process, there.function) == (0, "evaluate")  # what 0 compiled next


def test_in_a_tie_the_processes_that_compiled_it_differ_unless_the_others_ended_early():
    logging = [step("train_step"), step("log_metrics", sharded=False), step("evaluate")]
    (d,) = view(recording(0, logging), alike()[1]).divergences
    assert (d.function, d.processes) == ("log_metrics", [0])
    died = recording(1, [step("train_step")], exit_code=137, signal="SIGKILL")
    (d,) = view(alike()[0], died).divergences
    assert (d.function, d.processes) == ("evaluate", [1])


def test_a_function_most_processes_compiled_is_missing_from_the_one_that_did_not():
    job = view(*alike(4)[:3], recording(3, [step("train_step")], count=4))
    (d,) = job.divergences
    assert (d.kind, d.function, d.processes) == ("missing", "evaluate", [3])
    assert d.detail.startswith("not compiled by process 3 (compiled by processes 0, 1 and 2)")


def test_another_local_batch_is_a_signature_divergence_naming_the_leaves():
    four = alike(4)
    four[2] = recording(2, [step("train_step", rows=12), step("evaluate", line=20)], count=4)
    (d,) = view(*four).divergences
    assert (d.kind, d.function, d.processes) == ("signature", "train_step", [2])
    assert d.detail == (
        "process 2: x: float32[12,16] where the others had float32[8,16]; "
        "y: float32[12,1] where the others had float32[8,1]"
    )
    assert [s.process for s in d.call_sites] == [0, 2]


def test_the_same_signature_compiled_again_is_a_count_divergence():
    again = [step("train_step"), step("train_step"), step("evaluate", line=20)]
    (d,) = view(alike()[0], recording(1, again)).divergences
    assert (d.kind, d.function, d.processes) == ("count", "train_step", [1])
    assert d.detail == "process 1 compiled it 2×; the others 1× (with the same signatures)"


def test_programs_across_processes_compiled_in_another_order_are_an_order_divergence():
    swapped = [step("evaluate", line=20), step("train_step")]
    three = [*alike(3)[:2], recording(2, swapped, count=3)]
    (d,) = view(*three).divergences
    assert (d.kind, d.processes) == ("order", [2])
    assert d.detail == (
        "process 2 compiled evaluate before train_step; the others compiled train_step first"
    )


def test_local_programs_in_another_order_run_no_collective_and_do_not_diverge():
    local = [step("stats", sharded=False), step("norms", sharded=False)]
    assert view(recording(0, local), recording(1, local[::-1])).divergences == []


def test_divergences_come_earliest_parting_first():
    late_extra = [step("train_step"), step("evaluate", line=20), step("extra", line=30)]
    odd = recording(1, [step("train_step", rows=4), step("evaluate", line=20), *late_extra[2:]])
    kinds = [d.kind for d in view(alike()[0], odd).divergences]
    assert kinds == ["signature", "missing"]


def test_a_process_killed_by_sigkill_is_ended_early_and_named_where_it_lacks_compiles():
    killed = recording(1, [step("train_step")], exit_code=137, signal="SIGKILL")
    job = view(alike()[0], killed)
    assert [p.ended_early for p in job.processes] == [False, True]
    assert job.processes[1].ending == "exit status 137 (SIGKILL)"
    (d,) = job.divergences
    assert d.kind == "missing" and "process 1 ended early, exit status 137 (SIGKILL)" in d.detail


def test_the_straggler_is_the_slowest_process_against_the_median():
    slow = recording(2, [{**step("train_step"), "seconds": 4.0}], count=3)
    fast = [
        recording(i, [{**step("train_step"), "seconds": s}], count=3) for i, s in ((0, 1), (1, 2))
    ]
    (s,) = view(*fast, slow).stragglers
    assert (s.function, s.slowest, s.slowest_s, s.median_s, s.wait_s) == (
        "train_step", 2, 4.0, 2.0, 2.0
    )  # fmt: skip


def test_the_job_json_has_the_public_keys():
    data = json.loads(json.dumps(view(*alike()).to_dict()))
    assert {"job", "processes", "divergences"} <= set(data)
    assert set(data["processes"][0]) >= {"index", "host", "compiles", "compile_s", "wall_s"}
    extra = recording(1, [step("train_step"), step("evaluate", line=20), step("more")])
    (d,) = view(alike()[0], extra).to_dict()["divergences"]
    assert set(d) >= {"function", "kind", "processes", "detail"}


def test_a_missing_process_is_listed_absent():
    assert view(alike(4)[0], alike(4)[2]).absent == [1, 3]


@pytest.mark.parametrize(
    ("recordings", "complaint"),
    [
        ([], "no recordings"),
        ([recording(0, [], job="a"), recording(1, [], job="b")], "2 different jobs"),
        ([recording(0, []), recording(0, [])], "rec:1 and rec:2 are both process 0"),
    ],
)
def test_recordings_that_do_not_make_one_job_are_refused(recordings, complaint):
    with pytest.raises(JobError, match=complaint):
        view(*recordings)


def test_a_process_that_never_learned_its_job_id_joins_the_others():
    job = view(recording(0, [], job=None), recording(1, [], job="job-b"))
    assert job.job == "job-b" and len(job.processes) == 2


def test_a_program_without_jax_distributed_is_not_a_process_of_a_job():
    alone = recording(0, [])
    alone.program.process = None
    with pytest.raises(JobError, match=r"never initialized jax\.distributed"):
        view(alone)


def test_a_tie_goes_to_the_side_of_process_0():
    assert majority({"a": [1], "b": [0]}) == ("b", [1])
    assert majority({"a": [0], "b": [1, 2]}) == ("b", [0])
    assert processes_text([1]) == "process 1" and processes_text([0, 2]) == "processes 0 and 2"


def test_record_tags_each_line_and_fills_the_process_into_the_json_path():
    p1 = Process(1, 2, "j", "h")
    assert tagged("a\nb", p1) == "[p1] a\n[p1] b" and tagged("a", None) == "a"
    assert json_path("out/p{process}.json", p1) == "out/p1.json"
    assert json_path("out/p{process}.json", None) == "out/p0.json"
    assert json_path("out.json", p1) == "out.json" and json_path(None, p1) is None


def test_program_process_survives_json_and_the_journal():
    rec = recording(1, [step("train_step")])
    again = Recording.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert again.program.process == Process(1, 2, "job-a", "host1")
    tally = Tally()
    tally.add({"type": "program", "argv": [], "cwd": CWD, "started": 1.0})
    assert tally.recording().program.process is None
    tally.add({"type": "process", "index": 3, "count": 4, "job": "j", "host": "h"})
    assert tally.recording().program.process == Process(3, 4, "j", "h")


def test_two_jobs_in_one_history_stay_apart(tmp_path):
    db = Recordings(History(tmp_path / "h.sqlite"))
    first = [db.add(r) for r in alike(job="job-1")]
    second = [db.add(r) for r in alike(job="job-2")]
    alone = recording(0, [])
    alone.program.process = None
    db.add(alone)
    assert db.newest_job() == "job-2"
    assert [r.id for r in db.of_job("job-1")] == first
    assert [(r.id, r.job, r.process) for r in db.of_job("job-2")] == [
        (second[0], "job-2", 0),
        (second[1], "job-2", 1),
    ]
    assert db.rows()[0].job is None


def test_a_version_3_history_migrates_and_keeps_its_recordings(tmp_path):
    made = tmp_path / "made.sqlite"
    old = recording(0, [step("train_step")])
    old.program.process = None
    Recordings(History(made)).add(old)
    with sqlite3.connect(made) as raw:  # back to version 3: no job, no process
        raw.execute("DROP INDEX recordings_job")
        raw.execute("ALTER TABLE recordings DROP COLUMN job")
        raw.execute("ALTER TABLE recordings DROP COLUMN process")
        raw.execute("PRAGMA user_version = 3")
    v3 = tmp_path / "v3.sqlite"
    v3.write_bytes(made.read_bytes())
    db = Recordings(History(v3))
    (row,) = db.rows()
    assert (row.job, row.process) == (None, None)
    assert db.get(row.id).summary.compiles == 1 and db.newest_job() is None
    assert db.add(recording(0, [])) and db.newest_job() == "job-a"


def test_a_recording_outside_a_job_has_no_process_and_stops_looking_for_one():
    import jax
    import jax.numpy as jnp

    import viz

    with viz.recording() as rec:
        jax.jit(jnp.cos)(1.0)
        rec.process_watch.stop()  # its last look: JAX runs without jax.distributed
        assert not rec.process_watch.watching
    assert rec.recording().program.process is None


@pytest.mark.parametrize(
    ("ref", "number"),
    [
        ("rec:12", 12),
        ("rec:#12", 12),
        ("rec:", None),
        ("rec:12a", None),
        ("12", None),
        ("out/p0.json", None),
    ],
)
def test_job_and_diff_read_one_name_for_a_recording_in_history(ref, number):
    assert recording_id(ref) == number
