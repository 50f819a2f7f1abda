"""The recorder's words: the summary table, short paths, wrapped functions named by
their layers, and the HTML page (no jax needed for most of these)."""

from __future__ import annotations

import functools
import operator
import re

import jax
import jax.numpy as jnp

import viz
from viz.recorder.capture.unwrap import defined_at, unwrap
from viz.recorder.display.html import recording_html
from viz.recorder.display.summary import summary_text
from viz.recorder.model import FunctionStats, ProcessRun, Recording, jitted, short_path


def recording(functions: list[FunctionStats], eager_hidden: int = 0) -> Recording:
    rec = Recording(ProcessRun(argv=["t.py"], cwd="/w", started=0.0, wall_s=2.0), functions, [])
    rec.eager.compiles = eager_hidden
    return rec


def table_rows(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("function"))
    return lines[start : start + 3]


def test_the_table_is_aligned_when_every_name_is_shorter_than_its_header():
    text = summary_text(
        recording(
            [FunctionStats("f", "/w/t.py:3", 2, 0.5), FunctionStats("g", "/w/t.py:9", 1, 0.1)]
        )
    )
    header, first, second = table_rows(text)
    columns = [m.start() for m in re.finditer(r"compiles|compile |defined at", header)]
    assert header.index("compiles") + len("compiles") == first.index("2") + 1
    assert first.index("t.py:3") == second.index("t.py:9") == header.index("defined at")
    assert len(columns) == 3


def test_the_table_widens_for_a_long_name():
    text = summary_text(recording([FunctionStats("a_rather_long_function", "/w/t.py:3", 1, 0.2)]))
    header, row, _ = [*table_rows(text), ""][:3]
    assert header.index("defined at") == row.index("t.py:3")


def test_eager_compiles_kept_with_eager_are_listed_under_their_own_heading():
    eager = FunctionStats(
        "broadcast_in_dim", "/site-packages/jax/_src/dispatch.py:101", 4, 0.3, eager=True
    )
    text = summary_text(recording([FunctionStats("step", "/w/t.py:3", 1, 0.2), eager]))
    assert "--eager lists them" not in text and "listed below" in text
    heading = text.index("op-by-op compiles, of ops run outside jit (--eager):")
    assert text.index("broadcast_in_dim") > heading > text.index("step")
    assert "jax/_src/dispatch.py:101" in text[heading:]


def test_hidden_eager_compiles_say_how_to_list_them():
    text = summary_text(recording([FunctionStats("step", "/w/t.py:3", 1, 0.2)], eager_hidden=5))
    assert "plus 5 op-by-op compiles of ops run outside jit" in text
    assert "--eager lists them" in text and "(--eager):" not in text


def test_an_installed_file_is_shown_from_its_package():
    full = "/venv/lib/python3.11/site-packages/optax/_src/numerics.py:106"
    assert short_path(full, "/home/me/project") == "optax/_src/numerics.py:106"
    assert short_path("/usr/lib/python3/dist-packages/x/y.py:2", "/") == "x/y.py:2"
    assert short_path("/home/me/project/train.py:5", "/home/me/project") == "train.py:5"
    assert short_path("/elsewhere/train.py:5", "/home/me/project") == "/elsewhere/train.py:5"


def safe_norm(x, min_norm):
    return jnp.maximum(jnp.linalg.norm(x), min_norm)


def test_wrapped_functions_unwrap_to_the_user_function_with_their_layers():
    cases = {
        jax.jacfwd(functools.partial(safe_norm, min_norm=0.1)): ["jacfwd", "partial"],
        jax.grad(safe_norm): ["grad"],
        jax.value_and_grad(safe_norm): ["value_and_grad"],
        jax.jacrev(safe_norm): ["jacrev"],
        jax.vmap(safe_norm): ["vmap"],
        jax.checkpoint(safe_norm): ["checkpoint"],
        jax.custom_jvp(safe_norm): ["custom_jvp"],
        jax.custom_vjp(safe_norm): ["custom_vjp"],
        jax.jit(safe_norm): ["jit"],
    }
    line = safe_norm.__code__.co_firstlineno
    for wrapped, layers in cases.items():
        found = unwrap(wrapped)
        assert (found.fun, found.layers) == (safe_norm, layers)
        assert defined_at(found.fun).endswith(f"test_record_text.py:{line}")
    found = unwrap(jax.jacfwd(functools.partial(safe_norm, min_norm=0.1)))
    assert jitted(found.layers, found.name) == "jit(jacfwd(partial(safe_norm)))"
    assert jitted(["filter_jit"], "f") == "filter_jit(f)"  # a framework's own jit


def test_a_function_without_source_says_so_in_words():
    where = defined_at(unwrap(operator.add).fun)
    assert "?" not in where and "built in" in where and "add" in where


def test_the_html_page_is_self_contained_and_holds_every_part():
    step = jax.jit(lambda x: x * 2)
    with viz.recording(name="unit") as rec:
        for n in (2, 3):
            step(jnp.ones(n))
    page = recording_html(rec.recording())
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>")
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # nothing from the network
    assert "<script" not in page and "@import" not in page
    for part in ("Summary", "<svg", "Functions, by compile time", "x dim 0 took 2 values"):
        assert part in page
    assert "Where compiles came from" in page and "<details" in page


def test_a_compiles_signature_reads_its_arrays_before_its_static_leaves():
    from viz.recorder.model import ArgLeaf, Compile

    leaves = [
        ArgLeaf("model.bn.epsilon", static_value="1e-05"),
        ArgLeaf("model.layer.kernel", [8, 32], "f32"),
        ArgLeaf("model.bn.use_running_average", static_value="False"),
        ArgLeaf("x", [2, 8], "f32"),
    ]
    compile = Compile(1, 0.0, "step", "m.py:1", "m.py:9", signature=leaves)
    assert compile.signature_text == (
        "model.layer.kernel: f32[8,32] · x: f32[2,8] · model.bn.epsilon=1e-05"
        " · model.bn.use_running_average=False"
    )


def test_a_cut_eager_list_says_how_many_more_and_their_compiles():
    eager = [
        FunctionStats(f"op{i}", "/site-packages/jax/_src/dispatch.py:101", i + 1, 0.1, eager=True)
        for i in range(15)
    ]
    text = summary_text(recording([FunctionStats("step", "/w/t.py:3", 1, 0.2), *eager]))
    cut = eager[12:]  # the list shows 12
    assert f"… and 3 more ({sum(f.compiles for f in cut)} compiles)" in text
    assert "op12" not in text and "op11" in text


def test_the_summary_splits_needed_and_avoidable_compiles():
    step = FunctionStats("step", "/w/t.py:3", 3, 1.5, avoidable=1, avoidable_s=1.2)
    text = summary_text(recording([step]))
    assert "3 compiles: 2 needed, 1 avoidable (1.20 s)" in text


def test_a_path_is_shown_from_the_programs_folder_when_it_runs_from_another():
    program = ProcessRun(argv=["p.py"], cwd="/tmp/run", started=0.0, path="/home/me/proj")
    assert short_path("/home/me/proj/p.py:4", program.folders) == "p.py:4"
    assert short_path("/tmp/run/data.py:2", program.folders) == "data.py:2"


def test_a_cut_value_keeps_its_functions_file_name_and_line():
    from viz.cache.signature import around_difference, keep_place

    long = "a new function `solve.<locals>.<lambda>` (/home/me/a/very/long/folder/fr/model.py:23)"
    assert keep_place(long, 60).endswith("(…/model.py:23)")
    before, after = around_difference("x" * 90 + " (model.py:4)", "y" * 90 + " (model.py:4)")
    assert before.endswith("(model.py:4)") and after.endswith("(model.py:4)")


def test_the_saved_line_names_the_app_command_without_a_path(monkeypatch):
    from viz.locations import app_command

    monkeypatch.setattr("sys.argv", ["/home/me/venv/bin/jitscope", "record", "--", "t.py"])
    monkeypatch.setattr("shutil.which", lambda name: None)  # the venv is not activated
    assert app_command() == "jitscope app"
    monkeypatch.setattr("sys.argv", ["/home/me/venv/lib/python3.11/site-packages/viz/__main__.py"])
    assert app_command() == "python -m viz app"


def test_op_by_op_compiles_that_take_a_tenth_of_the_run_say_what_to_do():
    """On a TPU, JAX's examples/mnist_classifier.py spent 12.0 s of 32.5 s in 47 of them."""
    costly = recording([FunctionStats("update", "/w/t.py:3", 2, 1.9)], eager_hidden=47)
    costly.eager.compile_s, costly.program.wall_s = 12.0, 32.5
    text = summary_text(costly)
    assert "plus 47 op-by-op compiles of ops run outside jit (12.00 s, 37%;" in text
    assert "jit the code that calls them" in text
    costly.eager.compile_s = 1.0  # 3 %: counted, no advice
    assert "jit the code that calls them" not in summary_text(costly)


def test_every_line_of_a_functions_advice_is_printed_under_it():
    advice = "x dim 0 took 5 values (32, 48) → pad\nweak type of lr changed → pass one kind"
    step = FunctionStats("train_step", "/w/t.py:3", 7, 1.0, advice=advice)
    text = summary_text(recording([step]))
    assert "  ↳ x dim 0 took 5 values (32, 48) → pad\n" in text
    assert text.endswith("  ↳ weak type of lr changed → pass one kind")


def test_the_libraries_that_ran_op_by_op_compiles_are_listed_as_a_sentence_lists_them():
    """diffrax's neural ODE: 'equinox's and optax's and diffrax's own code'."""
    from viz.recorder.display.summary import eager_words
    from viz.recorder.model import Summary

    libraries = {"equinox": 9, "optax": 6, "diffrax": 4}
    s = Summary(0, 0.0, 0, eager_compiles=35, eager_compile_s=2.0, eager_libraries=libraries)
    _, advice = eager_words(s, 4.0, "")
    assert advice.endswith(
        "; 19 of the 35 ran in equinox's, optax's and diffrax's own code, not in yours"
    )
