"""A jit that a library builds, and the user's function under a lax loop, recorded from
a program written for it (tests/programs/library_jits.py): `fakelib`, installed in a
`site-packages` folder as pip would, builds a jit on each run around a cached body
function, as numpyro's `fori_collect` does (`cached_by` + `maybe_jit`); the user's
lambda runs under `lax.fori_loop`, outside jit.

- the jit is placed where the library made it, with the user's line that led there;
- the advice speaks of the library, asking no change of the user's code that would not
  help;
- a new jit wrapper around the same function is told apart from a new function;
- a recompile with new data is needed, one with an earlier compile's inputs avoidable;
- the lambda is the user's function, listed with its line, compared with its own
  compiles only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow

PROGRAMS = REPO / "tests" / "programs"
PROGRAM = PROGRAMS / "library_jits.py"
LIBRARY = PROGRAMS / "site-packages" / "fakelib" / "__init__.py"


def line_of(path: Path, text: str, nth: int = 0) -> int:
    lines = [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    return lines[nth]


def recorded_outside(program: Path, run: Path, pythonpath: str, **env: str) -> tuple:
    """(the Recording JSON, stderr with the summary, the HTML page) of `program` recorded
    with the CLI from `run`, a folder outside the program's, as a user runs it."""
    out, page = run / "rec.json", run / "rec.html"
    record = ["record", "--no-history", "--json", str(out), "--html", str(page)]
    done = subprocess.run(
        [sys.executable, "-m", "viz", *record, "--", str(program)],
        cwd=run,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": pythonpath, **env},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text()), done.stderr, page.read_text()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The library program recorded, its fake library on the path as an installed one."""
    run = tmp_path_factory.mktemp("run")
    return recorded_outside(PROGRAM, run, f"{REPO}{os.pathsep}{LIBRARY.parent.parent}")


def compiles_of(data: dict, name: str, line: int | None = None) -> list[dict]:
    return [
        c
        for c in data["compiles"]
        if c["function"] == name and (line is None or c["defined_at"].endswith(f":{line}"))
    ]


def test_the_jit_is_placed_in_the_library_with_the_users_line_that_led_there(recorded):
    data, _, _ = recorded
    loops = compiles_of(data, "_loop")
    made = f"{LIBRARY}:{line_of(LIBRARY, 'loop = maybe_jit(_loop')}"
    runs = [line_of(PROGRAM, "fakelib.run(step", n) for n in range(3)]
    assert [c["created_at"] for c in loops] == [made] * 3  # past the `maybe_jit` helper
    assert [c["called_from"] for c in loops] == [f"{PROGRAM}:{n}" for n in runs]
    assert all(c["call_site"] == c["called_from"] for c in loops)


def test_the_advice_names_the_library_and_no_change_to_the_users_code(recorded):
    data, stderr, _ = recorded
    (loop,) = [f for f in data["functions"] if f["name"] == "_loop"]
    assert loop["advice"] == (
        "fakelib builds a new jit wrapper for each `fakelib.run`: each call compiles once "
        "(1 of 3 avoidable); it is not in your code"
    )
    for fix in ("define it once", "make it once", "outside", "→"):
        assert fix not in loop["advice"]
    assert loop["advice"] in stderr


def test_a_new_wrapper_around_the_same_function_is_not_a_new_function(recorded):
    data, _, _ = recorded
    first, second, third = compiles_of(data, "_loop")
    assert (first["need"], second["need"], third["need"]) == ("first", "needed", "avoidable")
    # run 2: a new body function, with other data in its closure
    assert second["need_why"] == "new data in the closure: body.data f32[200,3] → f32[500,3]"
    # run 3: the first run's body (cached), in a new jit wrapper
    assert third["need_why"].startswith(
        "body: a new jit wrapper around the same function `_cached_body.<locals>._body_fn`"
    )
    assert "fakelib/__init__.py:" in third["need_why"]


def test_the_summary_splits_needed_and_avoidable(recorded):
    data, stderr, page = recorded
    s = data["summary"]
    loop_avoidable = sum(c["need"] == "avoidable" for c in compiles_of(data, "_loop"))
    lambda_avoidable = sum(c["need"] == "avoidable" for c in compiles_of(data, "<lambda>"))
    assert (loop_avoidable, lambda_avoidable) == (1, 1)
    assert (s["compiles"], s["needed"], s["avoidable"]) == (7, 5, 2)
    assert s["avoidable_s"] > 0
    assert "7 compiles: 5 needed, 2 avoidable (" in stderr
    by_name = {(f["name"], f["defined_at"]): f for f in data["functions"]}
    assert sum(f["avoidable"] for f in by_name.values()) == 2
    assert "needed · avoidable" in page


def test_the_lambda_under_fori_loop_is_the_users_function_with_its_line(recorded):
    data, stderr, _ = recorded
    line = line_of(PROGRAM, "lax.fori_loop(0, 10, lambda")
    mine = compiles_of(data, "<lambda>", line)
    assert len(mine) == 3 and not any(c["eager"] for c in mine)
    assert all(c["wraps"] == ["lax.scan"] for c in mine)
    assert [c["need"] for c in mine] == ["first", "needed", "avoidable"]
    assert mine[1]["need_why"].endswith("f32[] → f32[3]")
    assert mine[2]["need_why"] == "a new function object, the same code and data"
    listed = [f for f in data["functions"] if f["defined_at"] == f"{PROGRAM}:{line}"]
    assert listed and listed[0]["compiles"] == 3 and not listed[0]["eager"]
    assert listed[0]["advice"].splitlines() == [
        "a new `<lambda>` runs under lax.scan on each call of `accumulate` → define it "
        "outside `accumulate` and pass the same function each time",
        "args[1] took 2 shapes ([], [3]) → pass it with the same number of dimensions every call",
    ]
    # the while_loop's lambda is another function: compared with its own compiles only
    other = compiles_of(data, "<lambda>", line_of(PROGRAM, "lax.while_loop("))
    assert [c["need"] for c in other] == ["first"] and other[0]["wraps"] == ["lax.while_loop"]
    assert f"library_jits.py:{line}" in stderr


def test_places_read_as_the_user_knows_the_files(recorded):
    _, stderr, page = recorded
    assert str(PROGRAMS) not in stderr  # the program's folder, not the working folder
    assert "fakelib/__init__.py:" in stderr and "library_jits.py:" in stderr
    cells = page[page.index("<table") :]
    assert "`" not in cells  # no markdown in the HTML's tables


BATCHING_LIBRARY = """
import jax

_jitted = []


def _step(data):
    return data * 2


def predict(data, batch_size=4):
    if not _jitted:  # made once, on the first call, as keras's make_predict_function
        _jitted.append(jax.jit(_step))
    return [_jitted[0](data[i : i + batch_size]) for i in range(0, len(data), batch_size)]


def _sum(data):
    return data.sum()


def total(data):  # all the data at once, as numpyro's mcmc.run
    if len(_jitted) < 2:
        _jitted.append(jax.jit(_sum))
    return _jitted[1](data)
"""


def test_a_librarys_last_short_batch_is_told_by_the_call_that_gave_it_the_data(tmp_path):
    """keras's predict_step compiled again for the last batch of `model.predict` (100
    samples in batches of 32): 'pad to a few bucket sizes (Batch buckets page)' spoke
    of a function the user does not call; the library's batches come from the call."""
    library = tmp_path / "lib" / "site-packages" / "batchlib"
    library.mkdir(parents=True)
    (library / "__init__.py").write_text(BATCHING_LIBRARY)
    program = tmp_path / "proj" / "predict.py"
    program.parent.mkdir()
    program.write_text(
        "import jax.numpy as jnp\nimport batchlib\n\n"
        "print(batchlib.predict(jnp.ones((10, 3))))\n"
        "print(batchlib.total(jnp.ones(5)), batchlib.total(jnp.ones(8)))\n"
    )
    run = tmp_path / "run"
    run.mkdir()
    data, _, _ = recorded_outside(program, run, f"{REPO}{os.pathsep}{library.parent}")
    (step,) = [f for f in data["functions"] if f["name"] == "_step"]
    assert step["advice"] == (
        "data dim 0 took 2 values (4, 2) → batchlib cut the data your `batchlib.predict` "
        "gave it into batches, the last one shorter: a batch size that divides the data's "
        "length, or the data padded to a multiple of it, keeps one shape"
    )
    (whole,) = [f for f in data["functions"] if f["name"] == "_sum"]
    assert whole["advice"] == (
        "data dim 0 took 2 values (5, 8) → batchlib's jit takes its shapes from the data "
        "your `batchlib.total` gave it: each new size compiles once (a few sizes, the data "
        "padded to them, compile a few times)"
    )
