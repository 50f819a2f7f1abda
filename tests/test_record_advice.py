"""What `jitscope record` tells a user about recompiles they can avoid, recorded from a
program written for it (tests/programs/recompiles.py), run from a folder outside the
clone as a user runs it, with JAX's own `jax_explain_cache_misses` on beside it:

- a recompile whose only difference is a weak type (a Python float, then an f32 array)
  is avoidable, and said so with the argument, both kinds and the cure, alike in the
  summary, the compile's need, the advice and the HTML page;
- a function made anew on each call that reads its maker's locals is told how to give
  them to it (arguments, functools.partial, the loop's carry), not to move it out as
  it is; one that reads no locals keeps "make it once, outside".
"""

from __future__ import annotations

import pytest
from conftest import REPO
from test_record_library import recorded_outside

pytestmark = pytest.mark.slow

PROGRAM = REPO / "tests" / "programs" / "recompiles.py"


def line_of(text: str) -> int:
    return next(i for i, line in enumerate(PROGRAM.read_text().splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """(the Recording JSON, stderr: JAX's explanations and the summary, the HTML page)."""
    run = tmp_path_factory.mktemp("run")
    return recorded_outside(PROGRAM, run, str(REPO), JAX_EXPLAIN_CACHE_MISSES="1")


def function(data: dict, line: int) -> dict:
    (found,) = [f for f in data["functions"] if f["defined_at"] == f"{PROGRAM}:{line}"]
    return found


def compiles_at(data: dict, line: int) -> list[dict]:
    return [c for c in data["compiles"] if c["defined_at"] == f"{PROGRAM}:{line}"]


WEAK = "`lr` was a Python float, then an f32[] array: only the weak type differs"
WEAK_FIX = (
    "pass one kind on every call: jnp.float32(lr) (jnp.asarray(lr) keeps a Python float "
    "weak), or mark `lr` static if it is a config value"
)


def test_jax_says_the_step_recompiled_for_the_weak_type_of_lr(recorded):
    _, stderr, _ = recorded
    assert "at lr, now f32[]{weak_type=False} and before f32[]{weak_type=True}" in stderr


def test_a_weak_type_change_alone_is_avoidable_and_said_with_its_cure(recorded):
    data, stderr, _ = recorded
    step = compiles_at(data, line_of("@jax.jit"))
    assert [c["need"] for c in step] == ["first", "avoidable"]  # the third call: cached
    assert [(r["arg"], r["kind"]) for r in step[1]["reasons"]] == [("lr", "weak_type")]
    assert step[1]["need_why"] == WEAK
    stats = function(data, line_of("@jax.jit"))
    assert stats["avoidable"] == 1 and stats["avoidable_s"] > 0
    assert stats["advice"] == f"{WEAK} → {WEAK_FIX}"
    assert f"↳ {WEAK} → {WEAK_FIX}" in stderr


def test_the_summary_counts_every_new_object_and_the_weak_type_as_avoidable(recorded):
    data, stderr, page = recorded
    s = data["summary"]
    assert (s["compiles"], s["needed"], s["avoidable"]) == (8, 4, 4)  # each function's first
    assert "8 compiles: 4 needed, 4 avoidable (" in stderr
    assert "4 · 4" in page  # needed · avoidable
    plain = WEAK.replace("`", "")  # a page shows the words without code marks
    assert f"avoidable: {plain}" in page and plain in page


def test_a_jit_of_a_lambda_reading_its_makers_locals_is_told_to_take_them(recorded):
    data, stderr, _ = recorded
    line = line_of("jax.jit(lambda v: v @ w)")
    advice = function(data, line)["advice"]
    assert advice == (
        f"a new jit(<lambda>) is made on each call at recompiles.py:{line} → it reads `w` "
        "of `project`: jit it once, outside `project`, with `w` as an argument "
        "(functools.partial(f, w) binds it)"
    )
    assert "make it once, outside the test or loop" not in advice
    assert f"↳ {advice}" in stderr


def test_a_jit_of_a_lambda_reading_no_locals_keeps_make_it_once_outside(recorded):
    data, _, _ = recorded
    line = line_of("jax.jit(lambda v: v * 2.0)")
    assert function(data, line)["advice"] == (
        f"a new jit(<lambda>) is made on each call at recompiles.py:{line} → make it once, "
        "outside the test or loop"
    )


def test_a_lax_loops_lambda_reading_its_makers_locals_is_told_to_jit_the_maker(recorded):
    data, _, page = recorded
    line = line_of("lax.fori_loop(0, 5, lambda")
    assert [c["need"] for c in compiles_at(data, line)] == ["first", "avoidable"]
    advice = function(data, line)["advice"]
    assert advice == (
        "a new `<lambda>` runs under lax.scan on each call of `accumulate` → it reads "
        "`rate` of `accumulate`: jit `accumulate` itself, or define the function once, "
        "outside `accumulate`, and pass `rate` in the loop's carry"
    )
    assert "jit accumulate itself" in page


CHAIN = """
import jax


def inference_loop(key, kernel, state, n):
    def one_step(state, key):
        state, _ = kernel(key, state)
        return state, state

    return jax.lax.scan(one_step, state, jax.random.split(key, n))
"""


def test_a_lax_loops_function_calling_its_makers_function_is_not_told_to_carry_it(tmp_path):
    """blackjax's documented inference loop: `one_step` calls the `kernel` it reads,
    a function, which no loop's carry can hold ('pass `kernel` in the loop's carry')."""
    from viz.recorder.advice import _loop_fix
    from viz.recorder.closures import read_locals

    path = tmp_path / "chain.py"
    path.write_text(CHAIN)
    line = next(i for i, text in enumerate(CHAIN.splitlines(), 1) if "def one_step" in text)
    reads = read_locals(f"{path}:{line}", "one_step")
    assert (reads.names, reads.called) == (["kernel"], ("kernel",))
    assert _loop_fix(reads, "lax.scan", []) == (
        "it reads `kernel` of `inference_loop`, a function it calls, which cannot go in the "
        "loop's carry: jit `inference_loop` itself, with `kernel` static (static_argnames)"
    )
