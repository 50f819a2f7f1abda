"""The Recordings page's job view in a real browser, on two real jax.distributed jobs of
two processes each, recorded here: one whose process 1 loads another local batch and
compiles a function of its own, and one whose process 1 is killed by SIGKILL.
Screenshots (1440×900) land in screenshots/."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from serving import browser_marks, running_server
from test_browser import browser, page, pick, shot, shot_from  # noqa: F401
from test_job_cli import recorded, run_job

pytestmark = [*browser_marks(), pytest.mark.slow]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("job-home")
    for name, flags in (
        ("divergent", ("--extra-on", "1", "--batch-on", "1=12")),
        ("killed", ("--die-on", "1", "--timeout", "5")),
    ):
        (home / name).mkdir()
        ended = run_job(home, home / name, 2, *flags)
        failed = [e.stderr[-2000:] for e in ended if e.returncode != 0]
        assert name == "killed" or not failed, failed  # the killed job: process 1 is killed
    return home


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[str]:
    with running_server(home / "server.log", {"JITSCOPE_HOME": str(home)}) as url:
        yield url


def test_a_job_shows_its_divergences_timeline_stragglers_and_the_process_killed(
    page,  # noqa: F811
    home: Path,
) -> None:
    page.goto(f"{page.base_url}/recordings")
    page.get_by_role("heading", name="Recordings", level=1).wait_for()
    # the newest recording belongs to the killed job: it opens as a job
    page.get_by_text("Process 1 ended first").wait_for()
    page.get_by_text("exit status 137 (SIGKILL)").first.wait_for()
    timeline = page.locator(".js-plotly-plot").first
    timeline.locator("g.bars path").first.wait_for()
    assert timeline.get_by_text("SIGKILL").count() == 1  # the ✕ where it ended
    shot(page, "job_killed")

    job = recorded(home / "divergent", 2)[0]["program"]["process"]["job"]
    pick(page, "Job", job)
    divergences = page.get_by_role("heading", name="Where the processes diverge")
    divergences.wait_for()
    missing = page.locator("[data-testid=stAlert]", has_text="batch_stats")
    missing.get_by_text("compiled by process 1 only (not by process 0)").wait_for()
    signature = page.locator("[data-testid=stAlert]", has_text="train_step")
    signature.get_by_text("x: f32[24,16] where the others had f32[16,16]").wait_for()
    shot_from(page, "job_divergences", divergences)
    timeline = page.locator(".js-plotly-plot").first
    # drawn after the chart's frame: waited for, not counted at once
    timeline.locator("g.bars path").nth(4).wait_for()  # 2 + 3 compiles, 2 lifelines
    timeline.locator("path.point").nth(3).wait_for()  # where the processes parted
    shot_from(page, "job_timeline", timeline)
    stragglers = page.get_by_role("heading", name="Stragglers: compile time per process")
    shot_from(page, "job_stragglers", stragglers)

    page.get_by_text("one recording", exact=True).click()
    page.get_by_text(re.compile(r"Process \d of 2 of job")).first.wait_for()
