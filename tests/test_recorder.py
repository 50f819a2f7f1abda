"""The recorder in-process (`viz.recording()`): what each compile records and why."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import viz
from viz.recorder import Recordings
from viz.recorder.model import Recording
from viz.recorder.storage.journal import read_journal
from viz.spec import abstract_args, parse_spec

ROOT = Path(__file__).resolve().parent.parent
TPU_FIXTURES = ROOT / "tests" / "fixtures" / "tpu_v5e"


@jax.jit
def step(w, x):
    return jnp.tanh(x @ w).sum()


@partial(jax.jit, static_argnames="n")
def power(x, n):
    for _ in range(n):
        x = x * x
    return x


@jax.jit
def scale(x, s):
    return x * s


@jax.jit
def tree_sum(params):
    return sum(jnp.sum(v) for v in jax.tree_util.tree_leaves(params))


def kinds_of(rec, name: str) -> list[list[str]]:
    return [[r.kind for r in c.reasons] for c in rec.compiles if c.function == name]


@pytest.fixture(autouse=True)
def fresh_caches():
    jax.clear_caches()


def test_a_new_shape_is_a_shape_reason_against_the_closest_earlier_compile():
    w = jnp.ones((4, 4))
    with viz.recording() as rec:
        for batch in (8, 9, 8, 10):
            step(w, jnp.ones((batch, 4)))
    compiles = [c for c in rec.compiles if c.function == "step"]
    assert len(compiles) == 3  # batch 8 hit the cache the second time
    assert [r.kind for r in compiles[0].reasons] == ["new_function"]
    last = compiles[2].reasons
    assert [(r.arg, r.kind) for r in last] == [("x", "shape")]
    assert last[0].after == "f32[10,4]"
    stats = rec.recording().function(compiles[0].key)
    assert stats is not None and stats.compiles == 3
    assert stats.advice.startswith("x dim 0 took 3 values (8, 9, 10) → pad")


def test_each_kind_of_recompile_gets_its_advice_the_commonest_first():
    """train_loop.py's train_step: shape ×4 and weak type ×2 gave only the shape's line."""
    with viz.recording() as rec:
        for size, s in ((3, 2.0), (4, 2.0), (5, 2.0), (5, jnp.float32(2.0))):
            scale(jnp.ones(size), s)
    first = next(c for c in rec.compiles if c.function == "scale")
    stats = rec.recording().function(first.key)
    assert stats is not None and stats.reasons == {"new_function": 1, "shape": 2, "weak_type": 1}
    shape, weak = stats.advice.splitlines()
    assert shape.startswith("x dim 0 took 3 values (3, 4, 5) → pad")
    assert weak == (
        "`s` was a Python float, then an f32[] array: only the weak type differs → pass one "
        "kind on every call: jnp.float32(s) (jnp.asarray(s) keeps a Python float weak), or "
        "mark `s` static if it is a config value"
    )
    # the weak-type change alone (x f32[5] both times) is avoidable; the shapes needed
    needs = [c.need for c in rec.compiles if c.function == "scale"]
    assert needs == ["first", "needed", "needed", "avoidable"]
    assert stats.avoidable == 1


def test_static_values_dtypes_weak_types_and_pytrees_are_named():
    with viz.recording() as rec:
        power(jnp.ones(3), 1)
        power(jnp.ones(3), 2)
        scale(jnp.ones(3), 2.0)
        scale(jnp.ones(3), jnp.float32(2.0))
        scale(jnp.ones(3, jnp.int32), jnp.float32(2.0))
        tree_sum({"a": jnp.ones(2)})
        tree_sum({"a": jnp.ones(2), "b": jnp.ones(2)})
    assert kinds_of(rec, "power")[1] == ["static_value"]
    assert kinds_of(rec, "scale")[1:] == [["weak_type"], ["dtype"]]
    assert kinds_of(rec, "tree_sum")[1] == ["pytree"]
    weak = next(c for c in rec.compiles if c.function == "scale")
    s_leaf = next(leaf for leaf in weak.signature if leaf.arg == "s")
    assert s_leaf.weak_type and s_leaf.python_scalar
    n_leaf = next(
        leaf
        for c in rec.compiles
        if c.function == "power"
        for leaf in c.signature
        if leaf.arg == "n"
    )
    assert n_leaf.static_value == "1" and n_leaf.shape is None
    power_compiles = [c for c in rec.compiles if c.function == "power"]
    assert power_compiles[0].static == ["n"] and power_compiles[0].spec == "f32[3], 1"


def test_a_jit_made_in_a_loop_is_a_new_function_object_at_its_line():
    with viz.recording() as rec:
        for _ in range(3):
            jax.jit(lambda v: v + 1)(jnp.ones(2))
    lambdas = [c for c in rec.compiles if c.function == "<lambda>"]
    assert len(lambdas) == 3
    assert all(c.reasons[0].kind == "new_function" for c in lambdas)
    assert "a new function object" in lambdas[1].reasons[0].after
    stats = rec.recording().function(lambdas[0].key)
    assert stats is not None and "a new jit(<lambda>) is made on each call at" in stats.advice
    assert stats.advice.endswith("make it once, outside the test or loop")


def loss(w, x):
    return jnp.tanh(x @ w).sum()


def test_a_jit_of_a_transformed_function_beside_its_own_jit_is_a_first_compile_of_its_own():
    """jax.jit(loss) and jax.jit(jax.grad(loss)), each made once, are two computations:
    neither is a function made anew on each call, nor avoidable."""
    loss_jit, grad_jit = jax.jit(loss), jax.jit(jax.grad(loss))
    w = jnp.ones((4, 3))
    with viz.recording() as rec:
        for batch in (2, 3):
            loss_jit(w, jnp.ones((batch, 4)))
            grad_jit(w, jnp.ones((batch, 4)))
    compiles = [c for c in rec.compiles if c.function == "loss"]
    assert [c.wraps for c in compiles] == [[], ["grad"], [], ["grad"]]
    assert [c.need for c in compiles] == ["first", "first", "needed", "needed"]
    assert [[r.kind for r in c.reasons] for c in compiles[2:]] == [["shape"], ["shape"]]
    stats = rec.recording().function(compiles[0].key)
    assert stats is not None and stats.avoidable == 0
    assert stats.advice.startswith("x dim 0 took 2 values (2, 3) → pad")
    assert "made on each call" not in stats.advice


def test_the_x64_setting_is_a_config_reason():
    try:
        with viz.recording() as rec:
            scale(jnp.ones(3), 2.0)
            jax.config.update("jax_enable_x64", True)
            scale(jnp.ones(3), 2.0)
    finally:
        jax.config.update("jax_enable_x64", False)
    kinds = kinds_of(rec, "scale")
    assert "config" in kinds[1], kinds


def test_call_site_stack_and_stage_times_are_recorded():
    with viz.recording() as rec:
        step(jnp.ones((4, 4)), jnp.ones((2, 4)))
    (c,) = [c for c in rec.compiles if c.function == "step"]
    assert c.call_site.startswith(__file__ + ":")
    assert c.stack[-1].startswith(c.call_site) and "test_call_site" in c.stack[-1]
    assert c.defined_at.startswith(__file__ + ":")
    assert c.trace_s > 0 and c.lower_s > 0 and c.compile_s > 0
    assert c.t_s >= 0 and c.persistent_cache is False
    assert all("site-packages" not in frame for frame in c.stack)


def test_the_recorded_spec_reproduces_the_compiled_signature():
    x = jnp.ones((5, 3), jnp.bfloat16)
    params = {"w": jnp.ones((3, 2)), "b": [jnp.zeros(2), np.ones(2, np.int32)]}

    @jax.jit
    def f(params, x, s):
        return x.astype(jnp.float32) @ params["w"] + params["b"][0] + s

    with viz.recording() as rec:
        f(params, x, 1.5)
    (c,) = [c for c in rec.compiles if c.function == "f"]
    assert c.spec is not None, c.spec_reason
    items = parse_spec(c.spec)
    shapes = [(a.shape, str(a.dtype)) for a in jax.tree_util.tree_leaves(abstract_args(items)[:2])]
    assert shapes == [((2,), "float32"), ((2,), "int32"), ((3, 2), "float32"), ((5, 3), "bfloat16")]
    assert items[2].value == 1.5  # a Python float: weak, as it was called


def test_an_argument_the_spec_cannot_write_is_named_with_the_reason():
    from typing import NamedTuple

    class State(NamedTuple):
        count: jax.Array

    @jax.jit
    def g(state):
        return state.count + 1

    with viz.recording() as rec:
        g(State(jnp.zeros(())))
    (c,) = [c for c in rec.compiles if c.function == "g"]
    assert c.spec is None
    assert "`state` is a" in c.spec_reason and "State" in c.spec_reason


EAGER_LIBRARY = """
import jax.numpy as jnp


def prepare(n, scale):
    return scale(jnp.arange(float(n)))  # `scale`: another library's
"""
INNER_LIBRARY = """
def scale(x):
    return x * 5 - 1
"""


def test_op_by_op_compiles_a_librarys_code_ran_are_told_apart_from_the_users(tmp_path):
    """numpyro's MCMC set-up, keras's layers' set-up and blackjax's warm-up run their
    ops outside jit (124 of numpyro's eight schools' 126): 'jit the code that calls
    them' does not reach them, and the advice says whose code ran them."""
    import importlib.util

    from viz.recorder.display.summary import eager_words

    def installed(name: str, code: str):
        folder = tmp_path / "lib" / "python3.11" / "site-packages" / name
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text(code)
        spec = importlib.util.spec_from_file_location(name, folder / "__init__.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    eaglib, innerlib = installed("eaglib", EAGER_LIBRARY), installed("innerlib", INNER_LIBRARY)
    for kept in (False, True):
        with viz.recording(eager=kept) as rec:  # shapes no other test compiled
            eaglib.prepare(11 + kept, innerlib.scale)  # the library the user called
        summary = rec.recording().summary
        assert summary.eager_libraries == {"eaglib": summary.eager_compiles} != {}, kept
        _, advice = eager_words(summary, summary.eager_compile_s, "")
        assert advice.endswith("all ran in eaglib's own code, called from yours: not in your code")
        read_back = Recording.from_dict(json.loads(json.dumps(rec.recording().to_dict())))
        assert read_back.summary.eager_libraries == summary.eager_libraries
    with viz.recording() as mine:
        jnp.arange(13.0) * 5 - 1
    summary = mine.recording().summary
    assert summary.eager_compiles and summary.eager_libraries == {}
    assert eager_words(summary, summary.eager_compile_s, "")[1].endswith("the data preparation)")


def test_op_by_op_compiles_are_counted_apart_and_kept_only_when_asked():
    with viz.recording() as hidden:
        jnp.arange(7.0) * 3
    assert not hidden.compiles
    assert hidden.recording().summary.eager_compiles >= 1
    with viz.recording(eager=True) as kept:
        jnp.arange(9.0) * 3
    assert kept.compiles and all(c.eager for c in kept.compiles)
    assert kept.recording().summary.compiles == 0


def test_details_are_bounded_and_counts_stay_exact():
    with viz.recording(details=3) as rec:
        for _ in range(12):
            jax.jit(lambda v: v * 2)(jnp.ones(2))
    recording = rec.recording()
    assert len([c for c in recording.compiles if c.function == "<lambda>"]) == 3
    (stats,) = [f for f in recording.functions if f.name == "<lambda>"]
    assert stats.compiles == 12 and stats.reasons["new_function"] == 12
    assert recording.summary.details_dropped == 9


def test_two_threads_compiling_at_once_are_both_recorded():
    barrier = threading.Barrier(2)

    def work(size: int) -> None:
        barrier.wait()
        for k in range(3):
            step(jnp.ones((4, 4)), jnp.ones((size + k, 4)))

    with viz.recording() as rec:
        threads = [threading.Thread(target=work, args=(s,), name=f"w{s}") for s in (10, 20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    compiles = [c for c in rec.compiles if c.function == "step"]
    assert len(compiles) == 6
    assert {c.thread for c in compiles} == {"w10", "w20"}
    assert sorted(c.seq for c in rec.compiles) == list(range(1, len(rec.compiles) + 1))
    assert all(c.compile_s > 0 for c in compiles)


def test_recording_does_not_change_results_or_stay_subscribed():
    x = jnp.arange(6.0).reshape(2, 3)
    expected = np.asarray(step(jnp.ones((3, 3)), x))
    jax.clear_caches()
    with viz.recording() as rec:
        got = np.asarray(step(jnp.ones((3, 3)), x))
    np.testing.assert_array_equal(got, expected)
    before = len(rec.compiles)
    step(jnp.ones((3, 3)), jnp.ones((7, 3)))  # after the block: not recorded
    assert len(rec.compiles) == before


def test_journal_json_and_history_hold_the_same_recording(tmp_path):
    journal = tmp_path / "j.jsonl"
    with viz.recording(journal=journal, name="unit") as rec:
        power(jnp.ones(2), 3)
        power(jnp.ones(2), 4)
    with journal.open("a") as f:
        f.write('{"type": "compile", "seq"')  # a torn last line, as a kill leaves it
    from_disk = read_journal(journal)
    assert [c.seq for c in from_disk.compiles] == [c.seq for c in rec.compiles]
    rid = rec.save(tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    assert set(data) >= {"program", "summary", "functions", "compiles"}
    assert set(data["program"]) >= {"argv", "cwd", "started", "wall_s", "exit_code"}
    assert set(data["summary"]) >= {"compiles", "compile_s", "functions", "eager_compiles"}
    assert set(data["functions"][0]) >= {
        "name",
        "defined_at",
        "compiles",
        "compile_s",
        "reasons",
        "advice",
    }
    assert set(data["compiles"][0]) >= {
        "seq",
        "t_s",
        "function",
        "defined_at",
        "call_site",
        "stack",
        "signature",
        "spec",
        "static",
        "reasons",
        "trace_s",
        "lower_s",
        "compile_s",
        "persistent_cache",
    }
    assert set(data["compiles"][0]["signature"][0]) >= {
        "arg",
        "shape",
        "dtype",
        "weak_type",
        "sharding",
        "static_value",
    }
    stored = Recordings().get(rid)
    assert stored is not None and stored.to_dict() == data
    (row,) = [r for r in Recordings().rows() if r.id == rid]
    assert row.name == "unit" and row.compiles == 2


def test_a_recorder_failure_is_counted_named_and_never_reaches_the_program(monkeypatch):
    from viz.recorder.capture import describe

    def broken(call, finished, cwd):
        raise RuntimeError("describe failed")

    x = jnp.ones(3)  # made before the block: the one compile inside is scale's
    monkeypatch.setattr(describe, "describe", broken)  # the recorder calls it there
    with viz.recording() as rec:
        out = np.asarray(scale(x, 2.0))
    np.testing.assert_array_equal(out, np.full(3, 2.0, np.float32))
    recording = rec.recording()
    assert not recording.compiles and recording.summary.recorder_errors == 1
    assert recording.summary.compiles == 1  # still counted: the totals stay JAX's
    data = recording.to_dict()
    assert data["summary"]["errors"] == [{"message": "RuntimeError: describe failed", "count": 1}]
    summary = rec.summary()
    assert "1 compile the recorder failed to describe" in summary
    assert "×1 RuntimeError: describe failed" in summary


def test_a_closure_is_read_by_its_data_not_its_identity():
    """Three lambdas, each a new jit: the second closes over other arrays with the same
    values (avoidable: the same inputs), the third over other values (new data)."""
    with viz.recording() as rec:
        for held in (jnp.ones(3), jnp.ones(3), jnp.zeros(3)):
            jax.jit(lambda x, held=held: x + held)(jnp.ones(3))
    made = [c for c in rec.compiles if c.function == "<lambda>"]
    assert [c.need for c in made] == ["first", "avoidable", "needed"]
    assert made[1].need_why == "a new function object, the same code and data"
    assert made[2].need_why.startswith("new ")
    summary = rec.recording().summary
    assert (summary.needed, summary.avoidable) == (2, 1)


class _TpuExecutable:
    """An executable as a TPU's reads to the recorder: no buffer assignment, and XLA's
    memory stats (the chip's, tests/fixtures/tpu_v5e/<program>/memory.json)."""

    def __init__(self, program: str) -> None:
        self.analysis = json.loads((TPU_FIXTURES / program / "memory.json").read_text())

    def get_compiled_memory_stats(self):
        from types import SimpleNamespace

        m = self.analysis["memory_analysis"]
        return SimpleNamespace(
            argument_size_in_bytes=m["argument_bytes"],
            output_size_in_bytes=m["output_bytes"],
            temp_size_in_bytes=m["temp_bytes"],
            alias_size_in_bytes=m["alias_bytes"],
            peak_memory_in_bytes=m["xla_peak_bytes"],
        )


@pytest.mark.parametrize(
    ("program", "profile_peak"),  # the memory profile's HBM peak, from the chip's dump
    [("sort_cumsum", 201_327_616), ("pallas_forward", 1_310_720), ("narrow", 2_097_152)],
)
def test_a_compile_without_a_buffer_assignment_takes_the_footprint_xlas_stats_give(
    program: str, profile_peak: int
):
    """A TPU's executable: arguments, outputs and temporaries less the aliased, as the
    memory profile's peak read from the dump (sort_cumsum's temporaries are 67 MB that
    XLA's own peak leaves out; the narrow program's temp_size is 0)."""
    from viz.recorder.capture.recorder import _peak

    peak = _peak(_TpuExecutable(program))
    assert peak == pytest.approx(profile_peak, rel=2e-4)
    assert _peak(object()) is None  # no stats at all


def test_the_memory_profile_is_imported_beside_the_first_compile_and_its_peak_read():
    """The recorder starts without the memory profile's reader and the call's describer
    (two thirds of its imports): they are imported on a thread as the first compile goes
    to XLA, and every compile is still described, with its peak."""
    program = """
import sys
import jax, jax.numpy as jnp
import viz
with viz.recording() as rec:
    ahead = ("viz.memory.profile", "viz.recorder.capture.describe", "viz.spec")
    before = any(name in sys.modules for name in ahead)
    jax.jit(lambda x: jnp.sort(x * 2, axis=1))(jnp.ones((64, 128))).block_until_ready()
after = all(name in sys.modules for name in ahead)
print(before, after, [c.peak_bytes for c in rec.compiles])
"""
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, check=True
    )
    before, after, peaks = done.stdout.strip().split(" ", 2)
    assert (before, after) == ("False", "True")
    assert peaks.startswith("[") and "None" not in peaks and int(peaks.strip("[]")) >= 64 * 128 * 4


def test_work_ahead_of_a_compile_runs_once_as_the_first_program_is_lowered():
    from viz.recorder.capture import listener

    heard: list[str] = []
    sink = heard.append  # subscribed: the listener hears JAX's events
    listener.subscribe(sink)
    try:
        listener.ahead_of_compile(lambda: heard.append("ahead"))
        jax.jit(lambda x: x + 1)(jnp.ones(3))
        jax.jit(lambda x: x - 1)(jnp.ones(3))
    finally:
        listener.unsubscribe(sink)
    assert heard.count("ahead") == 1 and heard[0] == "ahead"  # before the compile's record


def test_a_node_of_another_type_is_told_as_its_own_program_not_a_structure_to_fix():
    """lineax's documented operators: a DiagonalLinearOperator after a
    MatrixLinearOperator read 'pytree of operator changed → keep the structure fixed:
    same keys, same lengths', advice for a dict's keys."""
    lx = pytest.importorskip("lineax")

    @jax.jit
    def solve(operator, b):
        return lx.linear_solve(operator, b).value

    with viz.recording() as rec:
        solve(lx.MatrixLinearOperator(jnp.eye(3) * 2), jnp.ones(3))
        solve(lx.DiagonalLinearOperator(jnp.full(3, 2.0)), jnp.ones(3))
    (stats,) = [f for f in rec.recording().functions if f.name == "solve"]
    assert stats.advice.startswith(
        "the structure of operator changed (MatrixLinearOperator(*) → "
        "DiagonalLinearOperator(*)) → each type of node is a program of its own"
    )
    assert "same keys" not in stats.advice
    from viz.cache.signature import NODE_TYPE_FIX, reason_fix

    _, second = [c for c in rec.compiles if c.function == "solve"]
    assert reason_fix(second.reasons[0]) == NODE_TYPE_FIX  # the cache lab's words alike
