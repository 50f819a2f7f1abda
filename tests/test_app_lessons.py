"""The lesson pages' own behaviour, driven headless with AppTest (the real worker runs
the code): their error path, their verdicts and their controls."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from viz.lessons.verdicts import EVERY_SHAPE, break_even_reading
from viz.program import Program
from viz.settings import Settings

TIMEOUT = 180
APP = str(Path(__file__).resolve().parent.parent / "app.py")

pytestmark = pytest.mark.usefixtures("navigation_mode", "plain_editor")

# `step` calls `inner`, which adds a 3-vector to the 4-vector it is given: every lesson
# that traces it fails on line 5
BROKEN = """import jax.numpy as jnp


def inner(x):
    return x + jnp.ones(3)


def step(x):
    return inner(x)
"""


def open_lesson(page: str, program: Program) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["program"] = program
    at.session_state["results"] = []  # skip the explorer's first-visit analysis
    at.run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def press(at: AppTest, label: str) -> AppTest:
    next(b for b in at.button if b.label == label).click().run()
    assert not at.exception, at.exception
    return at


@pytest.mark.parametrize(
    ("page", "run"),
    [
        ("pages/placement.py", "Measure the four strategies"),
        ("pages/scaling.py", "Sweep N"),
        ("pages/shapes.py", "Sweep shapes"),
    ],
)
def test_a_lesson_that_fails_shows_the_error_card_on_the_users_code(page, run) -> None:
    broken = Program(Settings(code=BROKEN, function="step", args="f32[4]"))
    at = open_lesson(page, broken)
    if page == "pages/scaling.py":
        at.selectbox[0].set_value("step").run()
    if page == "pages/shapes.py":
        at.text_input[-1].set_value("4").run()  # the sizes: one is enough to fail
    press(at, run)
    what = at.error[0].value
    assert "line 5" in what and "add got incompatible shapes" in what, what
    assert any(i.value.startswith("**Fix:**") for i in at.info)  # how to fix it
    assert "→ 5 |     return x + jnp.ones(3)" in at.code[0].value  # where, in the user's code
    assert at.session_state["program"].settings.code == BROKEN  # the code is kept


@pytest.mark.parametrize("page", ["pages/placement.py", "pages/scaling.py", "pages/cache.py"])
def test_a_page_that_ends_early_keeps_the_sidebars_worker_status(page) -> None:
    """The lessons' guidance for f(x, y), the Cache lab's first visit: each page stops
    there, and app.py's worker status (drawn after the page) went missing with it."""
    from ui import program_from_sample

    at = open_lesson(page, program_from_sample("dot_plus_one"))
    assert "Restart worker" in [b.label for b in at.sidebar.button]
    assert any("pool budget" in c.value for c in at.sidebar.caption)


def test_the_shape_sweep_reads_its_break_even_calls() -> None:
    from ui import program_from_sample

    at = open_lesson("pages/shapes.py", program_from_sample("batched_model"))
    at.text_input[-1].set_value("1, 256").run()
    press(at, "Sweep shapes")
    columns = list(at.dataframe[0].value.columns)
    assert columns[-1] == "break-even calls"  # no 100× test
    assert "trace → compile" in columns  # as History and the Overview name it
    reading = at.info[0].value
    assert "100×" not in reading and reading.endswith(EVERY_SHAPE), reading
    assert reading == f"On cpu: {break_even_reading(at.session_state['shapes'].rows)}"


def test_the_scaling_lesson_says_its_body_must_be_step_x_and_loads_one() -> None:
    from ui import program_from_sample

    at = open_lesson("pages/scaling.py", program_from_sample("dot_plus_one"))  # f(x, y)
    said = at.warning[0].value  # guidance, as Where to jit's: nothing failed
    assert said.startswith("This lesson needs a loop body `step(x) → x`") and not at.error
    assert said.endswith("`f(x, y)` takes 2 arguments.")
    assert "Sweep N" not in [b.label for b in at.button]  # nothing to run on f
    press(at, "Load the unrolled loop sample")
    assert at.session_state["program"].settings.sample == "unrolled_loop"
    assert at.selectbox[0].value == "step" and not at.warning
    assert "Sweep N" in [b.label for b in at.button]


def test_the_scaling_lesson_shows_every_n() -> None:
    from ui import program_from_sample

    at = open_lesson("pages/scaling.py", program_from_sample("unrolled_loop"))
    sizes = at.button_group[0]  # pills: every N in view, not chips cut off in a box
    assert [o.content for o in sizes.proto.options] == [
        "1",
        "2",
        "4",
        "8",
        "16",
        "32",
        "64",
        "128",
        "256",
        "512",
    ]
    assert sizes.value == [1, 2, 4, 8, 16, 32, 64, 128, 256]


def test_unrolling_that_compiled_no_slower_pays_off_at_once() -> None:
    """A negative extra compile cost (noise: unrolled N=1 compiled 5.6 ms faster than
    scan) read 'pays off after 0 calls'."""
    from ui import program_from_sample
    from viz.lessons.rows import ScalingRow
    from viz.worker.replies import ScalingReply

    def row(variant: str, n: int, total_s: float, run_s: float) -> ScalingRow:
        return ScalingRow(0.0, 0.0, total_s, total_s, n, n, run_s, n=n, variant=variant)

    at = open_lesson("pages/scaling.py", program_from_sample("unrolled_loop"))
    at.session_state["scaling"] = ScalingReply(
        rows=[
            row("unrolled", 1, 0.040, 50e-6),
            row("scan", 1, 0.045, 58e-6),
            row("unrolled", 64, 0.090, 40e-6),
            row("scan", 64, 0.050, 80e-6),
        ],
        exponents={"unrolled": None, "scan": None, "fori_loop": None},
    )
    at.run()
    assert not at.exception, at.exception
    said = list(at.dataframe[0].value["pays off after"])
    assert said == ["at once (it compiled no slower)", "1,000 calls"], said


@pytest.mark.parametrize("page", ["pages/shapes.py", "pages/buckets.py"])
def test_the_lessons_that_take_explores_function_say_which(page) -> None:
    """The shape sweep said 'Function f with args … (from Explore)'; the buckets page
    named its function only in a caption under its plans."""
    from ui import program_from_sample

    at = open_lesson(page, program_from_sample("batched_model"))
    s = at.session_state["program"].settings
    said = f"Function **`{s.function}`** with args `{s.args}` (from Explore)"
    assert said in [m.value for m in at.markdown]
