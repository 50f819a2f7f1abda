"""The Recordings page's job view, driven headless with AppTest, on jobs built from
recordings as the recorder writes them (test_job.py) and stored in this test's own
JITSCOPE_HOME. Demo mode shows the same view and opens no file."""

from __future__ import annotations

import pathlib
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_job import alike, recording, step

from viz.recorder import Recordings

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")

pytestmark = pytest.mark.usefixtures("navigation_mode", "plain_editor")


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JITSCOPE_HOME", str(tmp_path))
    db = Recordings()
    for r in alike(job="calm-job"):
        db.add(r)
    extra = [step("train_step"), step("batch_stats", sharded=False, line=12), step("evaluate")]
    db.add(recording(0, [step("train_step"), step("evaluate")], job="odd-job"))
    db.add(recording(1, extra, job="odd-job", exit_code=137, signal="SIGKILL"))
    return tmp_path


def recordings_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.switch_page("pages/recordings.py").run()
    assert not at.exception, at.exception
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_the_newest_job_opens_with_its_divergences_first():
    at = recordings_page()
    assert at.radio(key="rec_show").value == "a job"
    assert metrics(at)["divergences"] == "1" and metrics(at)["ended early"] == "1"
    (error, divergence) = [e.value for e in at.error]
    assert error.startswith("Process 1 ended first") and "SIGKILL" in error
    assert "**missing** · `batch_stats`: compiled by process 1 only" in divergence
    assert [h.value for h in at.subheader] == [
        "Where the processes diverge",
        "Processes",
        "Stragglers: compile time per process",
    ]


def test_a_job_that_compiles_alike_says_so():
    at = recordings_page()
    at.selectbox(key="rec_job").set_value("calm-job").run()
    assert metrics(at)["divergences"] == "0"
    assert any("No divergence" in s.value for s in at.success)


def test_one_recording_of_a_job_names_its_process():
    at = recordings_page()
    at.radio(key="rec_show").set_value("one recording").run()
    assert any("Process 1 of 2 of job `odd-job`" in c.value for c in at.caption)


def test_demo_mode_shows_the_job_and_opens_no_file(monkeypatch, tmp_path):
    program = tmp_path / "train.py"  # the recorded function's file exists here
    program.write_text("def train_step(x, y):\n    return x\n")
    Recordings().add(recording(0, [step("train_step")], job="demo", cwd=str(tmp_path)))
    opened: list[str] = []
    read_text = pathlib.Path.read_text

    def spy(self: pathlib.Path, *args, **kwargs):
        if self == program:
            opened.append(str(self))
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "read_text", spy)
    monkeypatch.setenv("JITSCOPE_DEMO", "1")
    at = recordings_page()
    assert metrics(at)["processes"] == "1 of 2"  # the job view, as outside demo mode
    at.radio(key="rec_show").set_value("one recording").run()
    assert any("Demo mode opens no files" in c.value for c in at.caption)
    assert opened == []
    monkeypatch.setenv("JITSCOPE_DEMO", "")
    at.run()  # outside demo mode, the same view reads the file to offer Open in Explore
    assert opened == [str(program)]
