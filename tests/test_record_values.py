"""What a recorded reason says of a value the jit cache compares: a function by its name
and line, an object by its type and the fields that differ, never an address; and a
recompile with nothing different is never guessed to be an eviction."""

from __future__ import annotations

import dataclasses
import gc
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import viz
from viz.recorder.advice import outer_function
from viz.recorder.capture.values import words
from viz.recorder.model import CLEARED, NOT_FOUND

ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
HERE = "tests/test_record_values.py"


@pytest.fixture(autouse=True)
def fresh_caches():
    jax.clear_caches()


def make_scale(factor: float) -> Callable:
    return lambda x: x * factor  # a new closure on every call


@partial(jax.jit, static_argnums=1)
def apply(x, fn):
    return fn(x)


@dataclasses.dataclass(frozen=True)
class Config:
    depth: int
    act: Callable = jnp.tanh


@partial(jax.jit, static_argnames="config")
def layer(x, config):
    for _ in range(config.depth):
        x = config.act(x)
    return x


def reasons_of(rec, name: str) -> list[list[tuple[str, str, str, str]]]:
    return [
        [(r.arg, r.kind, r.before, r.after) for r in c.reasons]
        for c in rec.compiles
        if c.function == name
    ]


def test_a_function_reads_as_its_qualified_name_and_line_without_an_address():
    said = words(make_scale(2.0), "/")
    line = make_scale.__code__.co_firstlineno + 1
    assert re.fullmatch(
        rf"function `make_scale.<locals>.<lambda>` \(.*test_record_values.py:{line}\)", said.text
    )
    assert not ADDRESS.search(said.text) and not ADDRESS.search(said.key)
    assert outer_function(said.text) == "make_scale"
    assert outer_function(words(jnp.tanh, "/").text) is None  # defined once


def test_two_closures_of_one_line_read_alike_and_key_apart():
    one, two = make_scale(2.0), make_scale(2.0)
    assert words(one, "/").text == words(two, "/").text
    assert words(one, "/").key != words(two, "/").key
    assert words(one, "/").key == words(one, "/").key


def test_a_dead_functions_key_is_never_given_to_a_new_one():
    keys = set()
    for _ in range(50):  # CPython reuses a freed object's id at once
        keys.add(words(make_scale(1.0), "/").key)
        gc.collect()
    assert len(keys) == 50


def test_a_new_function_as_a_static_argument_is_named_with_its_line():
    x = jnp.ones(3)
    with viz.recording() as rec:
        for _ in range(2):
            apply(x, make_scale(2.0))
    line = make_scale.__code__.co_firstlineno + 1
    ((arg, kind, before, after),) = reasons_of(rec, "apply")[1]
    assert (arg, kind) == ("fn", "static_value")
    assert before.startswith("function `make_scale.<locals>.<lambda>` (")
    assert before.endswith(f"test_record_values.py:{line})")
    assert after == "a new " + before
    advice = rec.recording().function(rec.compiles[0].key).advice
    assert advice.startswith("`fn`: a new function `make_scale.<locals>.<lambda>`")
    # it reads make_scale's `factor`: moved out as it is, it would not see it
    assert advice.endswith(
        "on every call → it reads `factor` of `make_scale`: define it once, outside "
        "`make_scale`, taking `factor` as an argument, and pass "
        "jax.tree_util.Partial(f, factor), which jit compares by its values, not its "
        "identity (a dynamic argument, not static)"
    )
    assert not ADDRESS.search(str(rec.recording().to_dict()))


def make_double() -> Callable:
    return lambda x: x * 2.0  # a new function on every call, reading no locals


def test_a_new_function_that_reads_no_locals_is_told_to_be_defined_outside():
    x = jnp.ones(3)
    with viz.recording() as rec:
        for _ in range(2):
            apply(x, make_double())
    advice = rec.recording().function(rec.compiles[0].key).advice
    assert advice.startswith("`fn`: a new function `make_double.<locals>.<lambda>`")
    assert advice.endswith("on every call → define it once, outside `make_double`")


def test_a_static_object_that_differs_is_named_by_the_fields_that_differ():
    x = jnp.ones(3)
    with viz.recording() as rec:
        layer(x, Config(1))
        layer(x, Config(2))
        layer(x, Config(2, jnp.sin))
    assert reasons_of(rec, "layer")[1:] == [
        [("config.depth", "static_value", "1", "2")],
        [("config.act", "static_value", words(jnp.tanh, "/").text, words(jnp.sin, "/").text)],
    ]


@dataclasses.dataclass
class Step:
    """A pytree node with a static field (as an equinox Module or a flax struct has)."""

    w: jax.Array
    fn: Callable = dataclasses.field(metadata={"static": True})


jax.tree_util.register_dataclass(Step, data_fields=["w"], meta_fields=["fn"])


@jax.jit
def run(step, x):
    return step.fn(step.w * x)


def test_a_pytree_nodes_static_field_is_named_by_its_path():
    x = jnp.ones(3)
    with viz.recording() as rec:
        for _ in range(2):
            run(Step(jnp.ones(3), make_scale(3.0)), x)
    ((arg, kind, _, after),) = reasons_of(rec, "run")[1]
    assert (arg, kind) == ("step.fn", "static_value")
    assert after.startswith("a new function `make_scale.<locals>.<lambda>`")


def test_a_recompile_after_clear_caches_says_so_and_where():
    square = jax.jit(lambda x: x * x)
    with viz.recording() as rec:
        square(jnp.ones(3))
        jax.clear_caches()  # cleared here
        square(jnp.ones(3))
    ((arg, kind, _, after),) = reasons_of(rec, "<lambda>")[1]
    assert (arg, kind) == ("(cache)", "config")
    assert after.startswith(CLEARED) and after.endswith(f"{HERE}:{line_of('# cleared here')}")


def test_a_difference_jitscope_does_not_read_is_said_not_found_never_evicted():
    dot = jax.jit(lambda x: x @ x)
    with viz.recording() as rec:
        dot(jnp.ones(3))
        with jax.default_matmul_precision("highest"):  # in JAX's key, not read by jitscope
            dot(jnp.ones(3))
    ((arg, _, _, after),) = reasons_of(rec, "<lambda>")[1]
    assert (arg, after) == ("(cache)", NOT_FOUND)
    said = [(r.before, r.after) for c in rec.compiles for r in c.reasons]
    said += [f.advice for f in rec.recording().functions]
    assert "evict" not in str(said) and "clear" not in str(said)


def line_of(snippet: str) -> int:
    """The line of this file that holds `snippet` inside a test."""
    source = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(source, 1) if snippet in line and "line_of" not in line)


@partial(jax.jit, static_argnames="layout")
def laid_out(x, layout):
    return x * len(layout)


def test_two_long_values_that_differ_near_their_end_show_the_end() -> None:
    x = jnp.ones(3)
    common = "batch, heads, " * 10
    with viz.recording() as rec:
        laid_out(x, common + "seq")
        laid_out(x, common + "dim")
        laid_out(x, tuple(range(40)))
        laid_out(x, (*range(39), 99))
    (_, (one,), _, (two,)) = reasons_of(rec, "laid_out")
    arg, kind, before, after = one
    assert (arg, kind) == ("layout", "static_value")
    assert before.startswith("…") and before.endswith("heads, seq'")
    assert after.startswith("…") and after.endswith("heads, dim'")
    assert len(before) <= 80 and len(after) <= 80
    _, _, before, after = two  # the items past the sixth are not read: no 'new object'
    assert after == before + " (differs further in)"


def made_per_test(read: bool) -> Callable:
    @jax.jit
    @jax.vmap
    def step(x):
        return x * 2 if read else x

    return step


def test_a_new_function_objects_later_compiles_compare_with_its_own() -> None:
    """Each jit object has a cache of its own: the second object's second shape misses
    in it, though the first object compiled that shape (equinox's test_while_loop)."""
    with viz.recording() as rec:
        for read in (False, True):
            step = made_per_test(read)
            for n in (2, 3):
                step(jnp.zeros((2, n)))
    compiles = reasons_of(rec, "step")
    assert [kinds[0][1] for kinds in compiles] == ["new_function", "shape", "new_function", "shape"]
    assert compiles[3] == [("x", "shape", "f32[2,2]", "f32[2,3]")]
