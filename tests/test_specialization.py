"""The Specialization panel's engine (issue #21): what an executable is specialized on,
leaf by leaf (static value, dynamic value of known shape, untraceable), the ops whose
sizes equal an argument's value or dimension, and what would recompile: every change
the panel offers, called on the real jit cache through the cache lab's own requests.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import pytest

from viz.cache.events import CallEvent, FailedEvent
from viz.errors import ErrorInfo
from viz.pipeline import analyze, analyze_target
from viz.report import Report
from viz.samples import get_sample
from viz.settings import Settings
from viz.spec import parse_spec
from viz.specialization import Change, SpecializedArg, changes, outcome, variant_spec
from viz.specialization.read import named_arguments, spec_form
from viz.stages import trace
from viz.target import Target
from viz.worker import handlers
from viz.worker import protocol as p


def rows_by_arg(report: Report) -> dict[str, SpecializedArg]:
    return {row.arg: row for row in report.specialization}


def arange_plus(x, n):
    return x + jnp.arange(n)


def with_pytree(p, x):
    return jnp.sum(p["w"]) + p["b"] * x


# -- the three states -------------------------------------------------------------------
def test_a_static_argument_is_its_value_baked_in():
    rows = rows_by_arg(analyze(arange_plus, "f32[16], 16", static=["n"], runs=0))
    n = rows["n"]
    assert (n.state, n.value, n.shape, n.dtype, n.weak_type, n.sharding) == (
        "static",
        "16",
        None,
        None,
        None,
        None,
    )
    assert n.baked_in == "the value 16"


def test_a_dynamic_array_is_its_shape_dtype_and_weak_type_with_its_sharding():
    x = rows_by_arg(analyze(arange_plus, "f32[16], 16", static=["n"], runs=0))["x"]
    assert (x.state, x.shape, x.dtype, x.weak_type, x.value) == (
        "dynamic",
        [16],
        "f32",
        False,
        None,
    )
    assert x.sharding == "single device cpu:0"  # the compiled executable's input sharding
    assert x.baked_in == "f32[16]"


def test_a_python_scalar_is_a_weakly_typed_dynamic_leaf():
    s = rows_by_arg(analyze(lambda x, s: x * s, "f32[3], 2.0", runs=0))["s"]
    assert (s.state, s.shape, s.dtype, s.weak_type, s.item) == ("dynamic", [], "f32", True, "2.0")
    assert s.baked_in == "weak f32[]"


def test_every_leaf_of_a_pytree_is_a_row_named_as_jax_names_it():
    report = analyze(with_pytree, "{'w': f32[3,4], 'b': f32[4]}, f32[4]", runs=0)
    assert [r.arg for r in report.specialization] == ["p['b']", "p['w']", "x"]  # keys sorted
    assert [r.shape for r in report.specialization] == [[4], [3, 4], [4]]
    assert {r.param for r in report.specialization[:2]} == {"p"}


def test_the_rows_read_in_two_steps_are_the_rows_read_at_once():
    from viz.specialization.read import finish, read_specialization, read_traced

    target = Target.from_settings(Settings(static=["n"]), arange_plus)
    args = target.args("f32[16], 16")
    traced = trace(target, args)
    assert traced.abstract and len(traced.abstract) == 2  # the trace keeps what it traced
    compiled = traced.lower().compile()
    at_once = read_specialization(target, args, traced, compiled)
    assert finish(*read_traced(target, args, traced), compiled) == at_once
    assert at_once[1]  # jnp.arange(n): an op sized by the static value
    without_abstract = type(traced)(traced.target, traced.args, traced.traced, traced.seconds)
    assert read_specialization(target, args, without_abstract, compiled) == at_once


def test_an_argument_whose_value_decides_a_shape_is_untraceable():
    sample = get_sample("nonzero_dynamic")
    target = Target.from_code(sample.code, sample.function)
    report = analyze_target(target, sample.args, runs=0)
    (x,) = report.specialization
    assert report.error.kind == "value_dependent_shape"
    assert (x.state, x.shape, x.dtype) == ("untraceable", [100], "f32")
    assert "decided a shape" in x.note


def test_only_the_pytree_leaf_jax_names_is_untraceable():
    def f(p, x):
        return jnp.nonzero(p["w"])[0] + x

    rows = rows_by_arg(analyze(f, "{'w': f32[8], 'b': f32[8]}, 1", runs=0))
    assert {a: r.state for a, r in rows.items()} == {
        "p['b']": "dynamic",
        "p['w']": "untraceable",
        "x": "dynamic",
    }


def test_a_python_branch_on_a_value_is_untraceable_too():
    def relu(x):
        return x if x > 0 else -x

    (x,) = analyze(relu, "f32[]", runs=0).specialization
    assert x.state == "untraceable" and "Python branch" in x.note


def test_a_shape_mismatch_leaves_every_argument_in_its_state():
    def f(a, b):
        return a + b

    report = analyze(f, "f32[3], f32[4]", runs=0)
    assert report.error.kind == "shape_mismatch"
    assert [(r.state, r.shape, r.sharding) for r in report.specialization] == [
        ("dynamic", [3], None),  # nothing compiled: no sharding
        ("dynamic", [4], None),
    ]


def test_a_spec_that_does_not_parse_has_no_rows():
    assert analyze(arange_plus, "f32[16", runs=0).specialization == []


@pytest.mark.parametrize(
    ("message", "names"),
    [
        ("because it depends on the value of the argument x.", {"x"}),
        ("depends on the values of the arguments a and p['w'].\n", {"a", "p['w']"}),
        ("depends on the values of the arguments a, b, and c.", {"a", "b", "c"}),
        ("This value became a tracer due to JAX operations on these lines:", set()),
    ],
)
def test_the_arguments_jax_names_in_its_message(message: str, names: set[str]):
    assert named_arguments(message) == names


def test_the_report_json_carries_the_rows_and_reads_back():
    report = analyze(arange_plus, "f32[16], 16", static=["n"], runs=0)
    data = report.to_dict()
    keys = {"arg", "state", "shape", "dtype", "weak_type", "sharding", "value"}
    assert all(keys <= set(row) for row in data["specialization"])  # DESIGN.md's contract
    again = Report.from_dict(data)
    assert again.specialization == report.specialization
    assert again.specialization_ops == report.specialization_ops


# -- the spec form of a parameter -------------------------------------------------------
def test_a_parameter_is_written_back_in_jaxs_leaf_order():
    (item,) = parse_spec("[{'w': f32[2,3], 'b': f32[3]}, (i32[], 2.0)]")
    tree, leaves = spec_form(item)
    assert leaves == ["f32[3]", "f32[2,3]", "i32[]", "2.0"]
    text = tree[0] + "".join(leaf + t for leaf, t in zip(leaves, tree[1:], strict=True))
    assert text == "[{'b': f32[3], 'w': f32[2,3]}, (i32[], 2.0)]"


def test_a_value_the_spec_language_cannot_write_offers_no_change():
    from collections import namedtuple

    Pair = namedtuple("Pair", "a b")
    rows = analyze(lambda p: p.a + p.b, "pair", namespace={"pair": Pair(1.0, 2.0)}, runs=0)
    assert [r.item for r in rows.specialization] == ["", ""]
    assert all(changes(r) == [] for r in rows.specialization)
    assert "cannot be written" in rows.specialization[0].note


# -- ops whose sizes come from arguments ------------------------------------------------
def test_arange_of_a_static_value_is_an_op_sized_by_that_value():
    report = analyze(arange_plus, "f32[16], 16", static=["n"], runs=0)
    (iota,) = report.specialization_ops
    assert (iota.primitive, iota.param, iota.sizes, iota.static) == ("iota", "shape", [16], True)
    assert iota.matches[0] == "n" and "x.shape[0]" in iota.matches
    assert iota.line == arange_plus.__code__.co_firstlineno + 1


def test_a_reshape_that_reads_x_shape_is_an_op_sized_by_x():
    def flatten(x):
        return x.reshape(x.shape[0], -1)

    (op,) = analyze(flatten, "f32[6,4,5]", runs=0).specialization_ops
    assert (op.primitive, op.sizes, op.matches, op.static) == (
        "reshape",
        [6, 20],
        ["x.shape[0]"],
        False,
    )


def test_sizes_of_one_match_nothing():
    (op,) = analyze(lambda x: x.reshape(1, 8), "f32[8]", runs=0).specialization_ops
    assert op.matches == ["x.shape[0]"]  # 8, not the 1


# -- what would recompile: the changes, as text -------------------------------------------
def row(**fields: Any) -> SpecializedArg:
    return SpecializedArg(**{"arg": "x", "state": "dynamic", "param": "x", **fields})


def test_an_array_offers_the_next_size_of_each_dimension_and_another_dtype():
    offered = changes(row(item="f32[8,128]", shape=[8, 128], dtype="f32"))
    assert [(c.kind, c.item) for c in offered] == [
        ("shape", "f32[9,128]"),
        ("shape", "f32[8,129]"),
        ("dtype", "bf16[8,128]"),
    ]


def test_a_0d_array_offers_a_python_scalar_and_a_python_scalar_a_0d_array():
    assert changes(row(item="i32[]", shape=[], dtype="i32"))[-1] == Change(
        "weak_type", "Python scalar 1 (weak type)", "1"
    )
    scalar = changes(row(item="2.0", shape=[], dtype="f32", weak_type=True))
    assert [(c.kind, c.item) for c in scalar] == [("value", "4.0"), ("weak_type", "f32[]")]


def test_a_static_number_or_bool_offers_another_value_and_a_string_none():
    assert changes(row(state="static", item="16"))[0].item == "17"
    assert changes(row(state="static", item="True"))[0].item == "False"
    assert changes(row(state="static", item="'relu'")) == []
    assert changes(row(state="untraceable", item="f32[4]")) == []


def test_a_changed_leaf_rewrites_its_parameter_and_keeps_the_others():
    report = analyze(with_pytree, "{'w': f32[3,4], 'b': f32[4]}, f32[4]", runs=0)
    rows = report.specialization
    w = rows.index(next(r for r in rows if r.arg == "p['w']"))
    spec = variant_spec(report.args, rows, w, Change("dtype", "", "bf16[3,4]"))
    assert spec == "{'b': f32[4], 'w': bf16[3,4]}, f32[4]"
    x = len(rows) - 1
    spec = variant_spec(report.args, rows, x, Change("shape", "", "f32[5]"))
    assert spec == "{'w': f32[3,4], 'b': f32[4]}, f32[5]"  # the pytree as the user wrote it


# -- what would recompile: on the real cache --------------------------------------------
CODE = """
import jax.numpy as jnp

def step(x, s, p, n):
    return jnp.sum(x) * s + jnp.sum(p['w']) + p['b'] + n
"""
SPEC = "f32[4,3], 2.0, {'w': f32[2], 'b': f32[]}, 3"
OWNER = "test_specialization"


@pytest.fixture(scope="module")
def step_report() -> Report:
    target = Target.from_code(CODE, "step", static=["n"])
    report = analyze_target(target, SPEC, runs=0)
    assert report.ok, report.error
    return report


def ask_cache(spec: str) -> list[Any]:
    """What the panel asks: an emptied cache, then the analysed spec and `spec`."""
    program = Settings(code=CODE, function="step", static=["n"])
    handlers.handle(p.CacheState(program, OWNER, clear=True), lambda _: None)
    reply = handlers.handle(p.CacheCalls(program, OWNER, calls=[SPEC, spec]), lambda _: None)
    return reply.new


def every_change(report: Report) -> list[tuple[int, Change]]:
    return [(i, c) for i, r in enumerate(report.specialization) for c in changes(r)]


def test_the_step_offers_every_kind_of_change(step_report: Report):
    kinds = {c.kind for _, c in every_change(step_report)}
    assert kinds == {"shape", "dtype", "weak_type", "value", "static_value"}


def test_each_leaf_written_back_unchanged_hits_the_analysed_entry(step_report: Report):
    rows = step_report.specialization
    for i, r in enumerate(rows):
        spec = variant_spec(SPEC, rows, i, Change("none", "", r.item))
        _, again = ask_cache(spec)
        assert isinstance(again, CallEvent) and again.hit, (r.arg, spec, again)


@pytest.mark.parametrize("number", range(10))
def test_each_change_misses_for_its_own_field_or_hits_for_a_value(step_report: Report, number):
    offered = every_change(step_report)
    assert len(offered) == 10  # x 3, s 2, p["b"] 2, p["w"] 2, n 1
    i, change = offered[number]
    r = step_report.specialization[i]
    spec = variant_spec(SPEC, step_report.specialization, i, change)
    events = ask_cache(spec)
    answer = outcome(r, change, spec, events)
    changed = events[1]
    assert isinstance(changed, CallEvent), changed
    if change.kind == "value":
        assert answer.verdict == "hit" and changed.hit
    else:
        assert answer.verdict == "miss"
        assert [(x.arg, x.kind) for x in changed.reasons] == [(r.arg, change.kind)]
        assert answer.reasons and answer.fixes


def test_a_name_bound_pytree_written_back_hits_its_entry():
    sample = get_sample("mlp")
    target = Target.from_code(sample.code, sample.function)
    report = analyze_target(target, sample.args, runs=0)
    rows = report.specialization
    spec = variant_spec(report.args, rows, 0, Change("none", "", rows[0].item))
    assert spec.startswith("[{'b': f32[512], 'w': f32[784,512]}, ")  # `params`, written out
    program = Settings(code=sample.code, function="mlp")
    handlers.handle(p.CacheState(program, OWNER, clear=True), lambda _: None)
    reply = handlers.handle(p.CacheCalls(program, OWNER, calls=[report.args, spec]), lambda _: None)
    assert [e.hit for e in reply.new] == [False, True]


def test_a_change_whose_trace_fails_reads_as_a_miss_that_failed():
    sample = get_sample("arange_static")
    target = Target.from_code(sample.code, sample.function, static=list(sample.static))
    report = analyze_target(target, sample.args, runs=0)
    n = next(i for i, r in enumerate(report.specialization) if r.arg == "n")
    (change,) = changes(report.specialization[n])
    spec = variant_spec(report.args, report.specialization, n, change)
    assert spec == "f32[16], 17"
    program = Settings(code=sample.code, function="f", static=["n"])
    handlers.handle(p.CacheState(program, OWNER, clear=True), lambda _: None)
    reply = handlers.handle(p.CacheCalls(program, OWNER, calls=[report.args, spec]), lambda _: None)
    answer = outcome(report.specialization[n], change, spec, reply.new)
    assert isinstance(reply.new[1], FailedEvent)
    assert answer.verdict == "failed" and answer.recompiles
    assert "trace failed" in answer.note and "incompatible shapes" in answer.note


def test_no_answer_when_the_analysed_call_itself_failed():
    failed = FailedEvent(1, "f32[3]", ErrorInfo("user_exception", "boom", stage="trace"), 0)
    answer = outcome(row(item="f32[3]"), Change("shape", "", "f32[4]"), "f32[4]", [failed, failed])
    assert answer.verdict == "error" and "boom" in answer.note and answer.recompiles is None


def test_the_cli_summary_names_what_the_executable_is_specialized_on():
    from viz.cli import summarize_report

    report = analyze(arange_plus, "f32[16], 16", static=["n"], runs=0)
    assert "specialized on: x f32[16] · n = 16 (static)" in summarize_report(report)


def test_the_overviews_summary_counts_each_state_and_names_a_few():
    from viz.specialization import summary

    rows = [row(arg=a) for a in "abcd"] + [row(arg="n", state="static")]
    assert summary(rows) == "1 static value (`n`), 4 dynamic leaves (`a`, `b`, `c` …)"
