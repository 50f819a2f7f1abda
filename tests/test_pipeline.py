"""viz.analyze, the in-process Python API: trace → lower → compile → run, as a Report.

Each test states one behaviour of the pipeline on a small function defined here
or on a sample from samples/. Functions are analyzed with runs=0 (compile only)
unless the test is about running.
"""

from __future__ import annotations

import functools
import json
import time
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from conftest import (
    SECTION_KEYS,
    check_error_contract,
    check_report_contract,
    function_lines,
    sample_params,
)
from jax import lax

from viz import analyze
from viz.report import Report
from viz.samples import Sample, get_sample
from viz.source import find_function, load_module
from viz.timing import MIN_EAGER_SAMPLES

# --------------------------------------------------------------------------- functions


def elementwise(x):
    return jnp.sin(x) * 2.0 + 1.0


def matmul(x, y):
    return jnp.dot(x, y)


def dense(params, x):
    return x @ params["w"] + params["b"]


def total(xs):
    return xs[0] + xs[1] + xs[2]


def scale_pair(pair):
    n, x = pair
    return x * n


def doubled(x, n):
    for _ in range(n):  # n is static: the loop unrolls while tracing
        x = x * 2.0
    return x


def noisy(key, x):
    return x + jax.random.normal(key, x.shape)


def branch(x, p):
    return lax.cond(p > 0, jnp.sin, jnp.cos, x)


def cumulative(xs):
    def body(carry, x):
        return carry + x, carry * 2.0

    return lax.scan(body, jnp.zeros(xs.shape[1:]), xs)


def grow_until(x):
    return lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 1.1), (0, x))[1]


def fori(x):
    return lax.fori_loop(0, 10, lambda i, v: v * 1.5 + i, x)


def outer_of_nested(x):
    inner = jax.jit(lambda v: jnp.sin(v) + 1.0)
    return inner(x) * 2.0


@jax.custom_jvp
def softplus(x):
    return jnp.log1p(jnp.exp(x))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t * jax.nn.sigmoid(x)


def uses_custom_jvp(x):
    return softplus(x).sum()


def bf16_layer(x, w):
    return jnp.tanh(x @ w)


def summaries(x):
    return {"sum": x.sum(), "parts": [x * 2.0, x + 1.0], "range": (x.min(), x.max())}


def times(x, y):
    return x * y


def jit_only(x):
    if not isinstance(x, jax.core.Tracer):
        raise RuntimeError("this function only runs under jit")
    return x + 1.0


# (id, function, args spec, static): every one analyzes cleanly.
CASES = [
    ("elementwise", elementwise, "f32[16,16]", ()),
    ("dot", matmul, "f32[32,64], f32[64,8]", ()),
    ("dict_pytree", dense, "{'w': f32[3,3], 'b': f32[3]}, f32[2,3]", ()),
    ("list_pytree", total, "[f32[4], f32[4], f32[4]]", ()),
    ("tuple_pytree", scale_pair, "(i32[], f32[4])", ()),
    ("static_by_name", doubled, "f32[4], 3", ("n",)),
    ("static_by_index", doubled, "f32[4], 3", (1,)),
    ("prng_key", noisy, "key, f32[4]", ()),
    ("lax_cond", branch, "f32[8], f32[]", ()),
    ("lax_scan", cumulative, "f32[5,3]", ()),
    ("while_loop", grow_until, "f32[3]", ()),
    ("fori_loop", fori, "f32[4]", ()),
    ("nested_jit", outer_of_nested, "f32[8]", ()),
    ("custom_jvp", uses_custom_jvp, "f32[8]", ()),
    ("bf16", bf16_layer, "bf16[8,16], bf16[16,4]", ()),
    ("pytree_output", summaries, "f32[5]", ()),
    ("python_literals", times, "f32[4], 2.0", ()),
]


def run(fn, spec: str, static=(), runs: int = 0, **kwargs: Any) -> Report:
    return analyze(fn, spec, static=list(static), runs=runs, **kwargs)


def run_sample(sample: Sample, runs: int = 0) -> Report:
    module = load_module(sample.code)
    fn = find_function(module, sample.code, sample.function)
    return analyze(
        fn,
        sample.args,
        static=list(sample.static),
        runs=runs,
        namespace=vars(module),
        user_file=module.__file__,
    )


def assert_counts_consistent(report: dict[str, Any]) -> None:
    jaxpr, shlo, compiled = report["jaxpr"], report["stablehlo"], report["compiled"]
    assert sum(jaxpr["primitives"].values()) == jaxpr["eqn_count"] > 0
    assert sum(shlo["ops"].values()) == shlo["op_count"] > 0
    assert sum(compiled["ops"].values()) == compiled["op_count"] > 0
    assert 0 <= compiled["fusion_count"] <= compiled["kernel_count"] <= compiled["op_count"]
    assert compiled["fusion_count"] == compiled["ops"].get("fusion", 0)
    for ir in ("jaxpr", "stablehlo", "compiled"):
        graph = report["graphs"][ir]
        assert 0 < graph["visible_nodes"] <= graph["total_nodes"], ir


# --------------------------------------------------------------------------- the contract


CASE_PARAMS = [pytest.param(fn, spec, static, id=name) for name, fn, spec, static in CASES]


@pytest.mark.parametrize(("fn", "spec", "static"), CASE_PARAMS)
def test_report_has_every_design_key_and_is_plain_json(fn, spec, static):
    check_report_contract(run(fn, spec, static).to_dict())


@pytest.mark.parametrize(("fn", "spec", "static"), CASE_PARAMS)
def test_op_counts_add_up(fn, spec, static):
    assert_counts_consistent(run(fn, spec, static).to_dict())


def test_report_round_trips_through_json():
    report = run(elementwise, "f32[4]", runs=2)
    data = json.loads(json.dumps(report.to_dict()))
    assert Report.from_dict(data).to_dict() == data


def test_fields_json_by_their_type_hints_are_serialized_as_they_are():
    from viz.plain import _json_as_is
    from viz.report import Kernel

    for hint in (str, int | None, list[int], dict[str, int], list[str] | None):
        assert _json_as_is(hint), hint
    for hint in (Kernel, list[Kernel], tuple[int, int], Any, dict[int, str], list[Any]):
        assert not _json_as_is(hint), hint
    kernel = Kernel("fusion.1", "kLoop", "#fff", {"add": 2}, [3], ["f.py:3"])
    assert kernel.to_dict() == {
        "name": "fusion.1",
        "kind": "kLoop",
        "colour": "#fff",
        "ops": {"add": 2},
        "lines": [3],
        "sources": ["f.py:3"],
    }


def test_report_records_function_args_static_and_device():
    report = run(doubled, "f32[4], 3", ("n",))
    assert (report.function, report.args, report.static, report.device) == (
        "doubled",
        "f32[4], 3",
        ["n"],
        "cpu",
    )
    assert report.jax_version == jax.__version__
    assert report.source_file == __file__


WEIGHTS = {"w": jnp.ones((4, 2))}


@functools.partial(jax.jit, static_argnames="n")
def jitted_dense(params, x, n):
    return (x @ params["w"]) * n


def test_a_decorated_function_reads_its_names_and_source_from_the_function_it_wraps():
    """`@jax.jit` (an `eqx.filter_jit`, a `functools.partial`) hides the function's
    module: the spec's names and the source file are the wrapped function's."""
    report = run(jitted_dense, "WEIGHTS, f32[3,4], 2", ("n",))
    assert report.ok, report.error
    assert report.source_file == __file__
    partial = run(functools.partial(jitted_dense, n=2), "WEIGHTS, f32[3,4]")
    assert partial.ok and partial.function == "jitted_dense"  # not "fn"


TRACED: list[bool] = []  # whether each run of `noted`'s Python saw tracers


@jax.jit
def noted(x):
    TRACED.append(isinstance(x, jax.core.Tracer))
    return jnp.sin(x) * 2.0


def test_a_jitted_functions_eager_time_is_its_python_op_by_op():
    """`eager` of a @jax.jit function timed its jitted calls (hk_train's step: 'eager
    109 µs' beside a 105 µs run median, where op by op takes 60 ms)."""
    TRACED.clear()
    assert run(noted, "f32[8]", runs=3).timings.eager_median_s is not None
    assert False in TRACED  # its Python ran on arrays, op by op


def test_an_nnx_jit_step_is_analysed_with_the_state_it_hands_back():
    """nnx.jit hands an optimizer step's new parameters back by updating the Modules it
    was given: a jax.jit of it dropped them, and XLA with them the whole update (20
    StableHLO ops, the loss alone, where nnx.jit compiles 186)."""
    optax = pytest.importorskip("optax")
    nnx = pytest.importorskip("flax.nnx")
    model = nnx.Linear(8, 1, rngs=nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

    @nnx.jit
    def train_step(model, optimizer, x, y):
        loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
        optimizer.update(model, grads)
        return loss

    args = (model, optimizer, jnp.ones((16, 8)), jnp.ones((16, 1)))
    expected = train_step.lower(*args).compile().cost_analysis()["flops"]
    names = {"model": model, "optimizer": optimizer}
    step = int(optimizer.step[...])
    spec = "model, optimizer, f32[16,8], f32[16,1]"
    report = run(train_step, spec, runs=3, namespace=names)
    assert report.ok, report.error
    assert report.cost.flops == expected
    assert report.timings.eager_median_s is not None
    assert int(optimizer.step[...]) == step  # the timed steps trained copies, not the model
    assert any(row.arg.startswith("model.") for row in report.specialization)


def test_an_equinox_filter_jit_function_keeps_its_non_array_leaves_static():
    """eqx.filter_jit traces the arrays and keeps the rest static (an MLP's activation,
    a Python float), outputs too: its functions were refused, 'model.activation is a
    custom_jvp, not an array'."""
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(4, 2, 8, 2, key=jax.random.PRNGKey(0))

    @eqx.filter_jit
    def step(model, x, scale):
        return model, (jax.vmap(model)(x) * scale).sum()  # the model: its functions too

    expected = step.lower(model, jnp.ones((8, 4)), 2.0).lowered.compile().cost_analysis()
    report = run(step, "model, f32[8,4], 2.0", runs=2, namespace={"model": model})
    assert report.ok, report.error
    assert report.cost.flops == expected["flops"]
    assert report.timings.run_median_s is not None
    static = {row.arg: row.value for row in report.specialization if row.state == "static"}
    assert static["scale"] == "2.0" and "model.activation" in static
    donated = run(
        step, "model, f32[8,4], 2.0", runs=2, donate=["model"], namespace={"model": model}
    )
    assert donated.ok, donated.error  # fresh copies of its arrays for each timed call


def test_graph_models_stay_out_of_the_default_dict():
    report = run(elementwise, "f32[4]")
    assert "graph_models" not in report.to_dict()
    assert set(report.to_dict(include_models=True)["graph_models"]) == {
        "jaxpr",
        "stablehlo",
        "compiled",
    }


def test_each_stage_is_timed():
    timings = run(elementwise, "f32[4]").timings
    assert timings["trace_s"] > 0
    assert timings["lower_s"] > 0
    assert timings["compile_s"] > 0


# --------------------------------------------------------------------------- what each IR shows


def test_elementwise_ops_are_one_equation_each_and_fuse_into_one_kernel():
    report = run(elementwise, "f32[16,16]")
    assert report.jaxpr["primitives"] == {"sin": 1, "mul": 1, "add": 1}
    assert report.compiled["kernel_count"] == 1
    assert report.compiled["fusion_count"] == 1


def test_dot_reports_flops_and_buffer_sizes():
    m, k, n = 256, 512, 128
    report = run(matmul, f"f32[{m},{k}], f32[{k},{n}]")
    assert report.jaxpr["primitives"] == {"dot_general": 1}
    assert report.cost["flops"] == pytest.approx(2 * m * k * n, rel=0.01)
    assert report.memory["argument_bytes"] == (m * k + k * n) * 4
    assert report.memory["output_bytes"] == m * n * 4


def test_dict_argument_is_flattened_into_one_input_per_leaf():
    report = run(dense, "{'w': f32[3,3], 'b': f32[3]}, f32[2,3]")
    invars = report.jaxpr["text"].splitlines()[0]
    assert invars.count(":f32[") == 3  # b, w, x
    assert report.memory["argument_bytes"] == (3 + 9 + 6) * 4


def test_list_argument_is_flattened_into_one_input_per_leaf():
    report = run(total, "[f32[4], f32[4], f32[4]]")
    assert report.jaxpr["text"].splitlines()[0].count(":f32[4]") == 3
    assert report.jaxpr["primitives"] == {"add": 2}


def test_tuple_argument_keeps_each_leaf_dtype():
    report = run(scale_pair, "(i32[], f32[4])")
    header = report.jaxpr["text"].splitlines()[0]
    assert "i32[]" in header and "f32[4]" in header
    assert report.jaxpr["primitives"]["mul"] == 1


def test_static_argument_by_name_is_a_trace_time_constant():
    report = run(doubled, "f32[4], 3", static=["n"])
    assert report.jaxpr["primitives"] == {"mul": 3}  # the loop unrolled three times
    assert "i32" not in report.jaxpr["text"].splitlines()[0]  # n is not an input


def test_static_argument_by_index_equals_static_by_name():
    by_name = run(doubled, "f32[4], 3", static=["n"])
    assert run(doubled, "f32[4], 3", static=[1]).jaxpr == by_name.jaxpr
    assert run(doubled, "f32[4], 3", static=["1"]).jaxpr == by_name.jaxpr


def test_static_value_changes_the_program():
    short = run(doubled, "f32[4], 2", static=["n"])
    long = run(doubled, "f32[4], 6", static=["n"])
    assert (short.jaxpr["eqn_count"], long.jaxpr["eqn_count"]) == (2, 6)


def test_prng_key_argument_is_a_typed_key():
    report = run(noisy, "key, f32[4]", runs=2)
    assert report.ok, report.error
    assert "key<" in report.jaxpr["text"].splitlines()[0]
    assert report.jaxpr["primitives"].get("random_bits") == 1


def test_lax_cond_compiles_both_branches_into_one_conditional():
    report = run(branch, "f32[8], f32[]")
    prims = report.jaxpr["primitives"]
    assert prims["cond"] == 1 and prims["sin"] == 1 and prims["cos"] == 1
    assert report.stablehlo["ops"].get("stablehlo.case") == 1
    assert report.compiled["ops"].get("conditional") == 1


def test_lax_scan_is_one_loop_whatever_its_length():
    report = run(cumulative, "f32[5,3]")
    assert report.jaxpr["primitives"]["scan"] == 1
    assert report.stablehlo["ops"].get("stablehlo.while") == 1
    longer = run(cumulative, "f32[500,3]")
    assert longer.jaxpr["eqn_count"] == report.jaxpr["eqn_count"]


def test_while_loop_is_a_while_equation():
    report = run(grow_until, "f32[3]")
    assert report.jaxpr["primitives"]["while"] == 1
    assert report.compiled["ops"].get("while") == 1


def test_fori_loop_with_fixed_bounds_becomes_a_loop_not_ten_copies():
    report = run(fori, "f32[4]")
    assert report.jaxpr["primitives"]["mul"] == 1
    assert report.stablehlo["ops"].get("stablehlo.while") == 1


def test_nested_jit_is_one_equation_with_its_body_counted():
    report = run(outer_of_nested, "f32[8]")
    assert report.jaxpr["primitives"] == {"jit": 1, "sin": 1, "add": 1, "mul": 1}
    assert report.jaxpr["eqn_count"] == 4


def test_custom_jvp_function_keeps_its_custom_rule_equation():
    report = run(uses_custom_jvp, "f32[8]")
    assert report.jaxpr["primitives"]["custom_jvp_call"] == 1
    assert report.jaxpr["primitives"]["log1p"] == 1


def test_bf16_function_stays_bf16_through_every_ir():
    report = run(bf16_layer, "bf16[8,16], bf16[16,4]", runs=2)
    assert report.ok, report.error
    assert "bf16[8,4]" in report.jaxpr["text"]
    assert "bf16" in report.stablehlo["text"]
    assert "bf16" in report.compiled["text"]
    assert report.memory["argument_bytes"] == (8 * 16 + 16 * 4) * 2


def test_function_returning_a_pytree_has_one_output_per_leaf():
    report = run(summaries, "f32[5]", runs=2)
    assert report.ok, report.error
    outputs = report.jaxpr["text"].strip().splitlines()[-1]
    assert outputs.count(",") == 4  # five leaves: sum, two parts, min, max
    assert report.memory["output_bytes"] >= 3 * 4 + 2 * 5 * 4


def test_python_float_is_weakly_typed_and_keeps_bf16():
    weak = run(times, "bf16[4], 2.0")
    strong = run(times, "bf16[4], f32[]")
    assert "d:bf16[4] = mul" in weak.jaxpr["text"]  # a Python float does not promote
    assert "d:f32[4] = mul" in strong.jaxpr["text"]  # an f32[] array does


def test_python_int_is_a_weak_dynamic_argument():
    report = run(times, "i32[3], 3")
    header = report.jaxpr["text"].splitlines()[0]
    assert "b:i32[]" in header  # traced, not baked in
    assert report.jaxpr["primitives"]["mul"] == 1


# --------------------------------------------------------------------------- runs


def test_runs_zero_compiles_but_never_runs():
    report = run(elementwise, "f32[16]", runs=0)
    t = report.timings
    assert report.ok
    assert t["compile_s"] > 0
    assert t["runs"] == 0
    for key in ("first_call_s", "run_median_s", "run_min_s", "eager_median_s"):
        assert t[key] is None, key
    assert report.run is None


def test_runs_zero_never_allocates_the_inputs():
    start = time.perf_counter()
    report = run(elementwise, "f32[100000,100000]", runs=0)  # 40 GB if it were allocated
    assert time.perf_counter() - start < 10
    assert report.ok, report.error
    assert report.memory["argument_bytes"] == 100_000 * 100_000 * 4


def test_runs_time_the_compiled_function_and_the_eager_one():
    report = run(elementwise, "f32[64,64]", runs=5)
    t = report.timings
    assert report.ok
    assert t["first_call_s"] > 0
    assert 0 < t["run_min_s"] <= t["run_median_s"]
    assert 1 <= t["runs"] <= 5
    assert t["eager_median_s"] > 0
    assert set(report.run) == {"jit", "eager"}
    assert len(report.run["jit"]["per_call_s"]) == t["runs"]


def test_eager_takes_enough_samples_for_a_verdict_even_past_its_time_budget():
    # eager's first call compiles op by op and can use up its budget: not a sample
    report = run(elementwise, "f32[64,64]", runs=5, time_budget_s=0.0)
    assert report.ok, report.error
    assert report.run["eager"]["samples"] >= MIN_EAGER_SAMPLES
    assert len(report.run["eager"]["per_call_s"]) == report.run["eager"]["samples"]


def test_eager_failure_is_a_warning_not_an_error():
    report = run(jit_only, "f32[4]", runs=2)
    assert report.ok, report.error
    assert report.timings["run_median_s"] > 0
    assert report.timings["eager_median_s"] is None
    assert any("eager run failed" in w for w in report.warnings)


def test_x64_dtypes_are_analyzed_as_64_bit():
    report = run(elementwise, "f64[4]")
    assert report.ok, report.error
    assert "f64[4]" in report.jaxpr["text"]
    assert jnp.zeros(1).dtype == jnp.float32  # x64 was switched on for that analysis only


# --------------------------------------------------------------------------- failures


def test_trace_failure_keeps_the_trace_timing_and_no_ir():
    def bad(x):
        if x > 0:
            return x
        return -x

    report = run(bad, "f32[]")
    check_error_contract(report.to_dict(), "control_flow")
    assert report.timings["trace_s"] is not None
    assert report.jaxpr is None and report.compiled is None
    assert set(SECTION_KEYS["timings"]) <= set(report.timings)


def test_analyze_never_raises_for_a_bad_spec():
    report = run(elementwise, "f32[4")
    assert check_error_contract(report.to_dict(), "spec_error")["stage"] == "spec"


# --------------------------------------------------------------------------- samples


def test_elementwise_chain_is_48_stablehlo_ops_but_at_most_two_kernels():
    report = run_sample(get_sample("elementwise_chain"))
    assert report.ok, report.error
    assert report.jaxpr["eqn_count"] == 24
    assert report.stablehlo["op_count"] >= 48
    assert report.compiled["kernel_count"] <= 2


@pytest.mark.parametrize("sample", sample_params(only=lambda s: not s.expect_error))
def test_sample_analyzes_cleanly_with_consistent_counts(sample: Sample):
    report = run_sample(sample).to_dict()
    check_report_contract(report)
    assert_counts_consistent(report)


@pytest.mark.parametrize("sample", sample_params(only=lambda s: bool(s.expect_error)))
def test_failing_sample_fails_with_its_expected_kind_on_its_own_line(sample: Sample):
    error = check_error_contract(run_sample(sample).to_dict(), sample.expect_error)
    assert error["line"] in function_lines(sample.code, sample.function)


def test_sample_runs_and_times_when_runs_are_asked_for():
    report = run_sample(get_sample("dot_plus_one"), runs=3)
    assert report.ok, report.error
    assert report.timings["run_median_s"] > 0
    assert report.timings["eager_median_s"] > 0


# -- the jaxpr and the StableHLO are read on a thread while XLA compiles (issue #20) --
def _chain(x):
    for _ in range(4):
        x = jnp.tanh(x) * 1.5 + 0.25
    return x


def test_the_stablehlo_read_beside_the_compile_is_the_lowered_module():
    """The reader thread walks a copy of the module (its own MLIR context): its text,
    graph and counts are those of the module XLA compiled."""
    from viz.ir.stablehlo import module_bytecode, module_copy, module_text, read_stablehlo

    lowered = jax.jit(_chain).lower(jax.ShapeDtypeStruct((8, 8), jnp.float32))
    module = lowered.compiler_ir("stablehlo")
    copy = module_copy(module_bytecode(module))
    assert module_text(copy) == lowered.as_text()
    assert read_stablehlo(copy).to_dict() == read_stablehlo(module).to_dict()
    report = analyze(_chain, "f32[8,8]", runs=0)
    assert report.stablehlo.text == lowered.as_text()


def test_a_failed_lowering_keeps_the_jaxpr(monkeypatch: pytest.MonkeyPatch):
    """The jaxpr is read beside the compile, so a lowering that fails reads it first."""
    import viz.stages
    from viz.errors import UserCodeError, classify

    def broken(_: Any) -> Any:
        raise UserCodeError(classify(ValueError("no lowering"), "lower", None))

    monkeypatch.setattr(viz.stages.Traced, "lower", broken)
    report = analyze(_chain, "f32[8,8]", runs=0)
    assert not report.ok and report.error.stage == "lower"
    assert report.jaxpr is not None and report.jaxpr.eqn_count == 12  # tanh, mul, add ×4
    assert "jaxpr" in report.graphs and report.stablehlo is None


def test_the_analysis_leaves_garbage_collection_as_it_found_it():
    import gc

    analyze(_chain, "f32[8,8]", runs=0)
    assert gc.isenabled()
    gc.disable()
    try:
        analyze(_chain, "f32[8,8]", runs=0)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_what_the_analysis_made_is_old_but_its_cycles_are_still_collected(worker_process: None):
    """In the worker, whose collector the analysis pauses."""
    import gc
    import weakref

    class Cycle:
        pass

    made: list[Any] = []

    def read_and_make_a_cycle(*args: Any) -> Any:
        cycle = Cycle()
        cycle.me = cycle
        made.append(weakref.ref(cycle))
        return real(*args)

    import viz.readers

    real = viz.readers.read_hlo_text
    viz.readers.read_hlo_text = read_and_make_a_cycle
    try:
        report = analyze(_chain, "f32[8,8]", runs=0)
    finally:
        viz.readers.read_hlo_text = real
    assert gc.get_freeze_count() == 0  # moved to the oldest generation, not left frozen
    assert gc.is_tracked(report.graph_models["compiled"].nodes[0])
    gc.collect(1)  # the two younger generations: it is in neither
    assert made[0]() is not None
    gc.collect()
    assert made[0]() is None  # a full collection frees it


def test_objects_frozen_before_the_analysis_stay_frozen():
    import gc

    gc.freeze()
    try:
        analyze(_chain, "f32[8,8]", runs=0)
        assert gc.get_freeze_count() > 0  # not thawed (some may have been freed)
    finally:
        gc.unfreeze()


def test_the_specialization_is_read_beside_the_compile(
    monkeypatch: pytest.MonkeyPatch, worker_process: None
):
    import threading

    import viz.readers

    threads: list[str] = []
    real = viz.readers.read_traced

    def read_traced(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(viz.readers, "read_traced", read_traced)
    report = analyze(_chain, "f32[8,8]", runs=0)
    assert threads == ["jitscope-reader"]
    (row,) = report.specialization
    assert (row.arg, row.state, row.shape) == ("x", "dynamic", [8, 8])
    assert row.sharding.startswith("single device")  # the executable's, added after


def test_a_specialization_reader_failure_beside_the_compile_is_read_again(
    monkeypatch: pytest.MonkeyPatch, worker_process: None
):
    import viz.readers

    def broken(*_: Any, **__: Any) -> Any:
        raise ValueError("boom")

    monkeypatch.setattr(viz.readers, "read_traced", broken)
    report = analyze(_chain, "f32[8,8]", runs=0)
    assert report.ok and [r.arg for r in report.specialization] == ["x"]
    monkeypatch.setattr(viz.readers, "read_specialization", broken)
    report = analyze(_chain, "f32[8,8]", runs=0)
    assert "could not read the specialization: ValueError: boom" in report.warnings


def test_a_reader_failure_on_the_thread_is_a_warning(
    monkeypatch: pytest.MonkeyPatch, worker_process: None
):
    import viz.readers

    def broken(*_: Any) -> Any:
        raise ValueError("boom")

    monkeypatch.setattr(viz.readers.StableHLOReading, "graph", broken)
    report = analyze(_chain, "f32[8,8]", runs=0)
    assert report.ok
    assert "could not read the stablehlo graph: ValueError: boom" in report.warnings
    assert report.stablehlo.text and report.stablehlo.op_count is None
    assert report.jaxpr.eqn_count and report.compiled.op_count


# -- the compiled HLO is read from XLA's dump while it generates code (issue #20) --
def test_the_compiled_graph_read_from_the_dump_is_the_executables(
    monkeypatch: pytest.MonkeyPatch, worker_process: None
):
    import threading

    import viz.pipeline
    import viz.readers

    threads: list[str] = []
    real = viz.readers.read_compiled_text

    def read(text: str, *lazy: bool) -> Any:
        threads.append(threading.current_thread().name)
        return real(text, *lazy)

    monkeypatch.setattr(viz.readers, "read_compiled_text", read)
    monkeypatch.setattr(viz.pipeline, "DUMP_FROM_BYTES", 0)  # a chain this small is not dumped
    early = analyze(_chain, "f32[8,8]", runs=0)
    assert threads == ["jitscope-reader"]  # read once, while XLA generated code
    monkeypatch.setattr(viz.pipeline, "OptimizedHloDump", _NoDump)
    after = analyze(_chain, "f32[8,8]", runs=0)
    assert early.graph_models["compiled"].to_dict() == after.graph_models["compiled"].to_dict()
    assert early.to_dict()["fusion_map"] == after.to_dict()["fusion_map"]
    assert early.kernels == after.kernels


def test_with_a_dump_the_executables_text_is_printed_where_first_read(
    monkeypatch: pytest.MonkeyPatch, worker_process: None
):
    """The report's graph comes from XLA's dump: printing the executable's text (50 ms
    of a 96-layer model's compile) waits until the text is read."""
    import viz.pipeline
    import viz.stages

    printed: list[bool] = []
    real = viz.stages.Compiled.text

    def text(self: Any) -> str:
        printed.append(True)
        return real(self)

    monkeypatch.setattr(viz.stages.Compiled, "text", text)
    monkeypatch.setattr(viz.pipeline, "DUMP_FROM_BYTES", 0)
    report = analyze(_chain, "f32[8,8]", runs=0)
    assert report.ok and report.compiled.op_count and printed == []
    assert "tanh" in report.compiled.text and printed == [True]
    monkeypatch.setattr(viz.pipeline, "DUMP_FROM_BYTES", 1 << 40)  # no dump: read now
    analyze(_chain, "f32[8,8]", runs=0)
    assert printed == [True, True]


def test_a_small_program_is_not_dumped_and_a_big_one_is(
    monkeypatch: pytest.MonkeyPatch, worker_process: None
):
    """A dump costs XLA more than reading a small executable's text after the compile."""
    import viz.pipeline

    folders: list[str | None] = []
    real = viz.pipeline.OptimizedHloDump

    def dump(*args: Any, **kwargs: Any) -> Any:
        made = real(*args, **kwargs)
        folders.append(made.folder)
        return made

    monkeypatch.setattr(viz.pipeline, "OptimizedHloDump", dump)
    small = analyze(_chain, "f32[8,8]", runs=0)
    monkeypatch.setattr(viz.pipeline, "DUMP_FROM_BYTES", 0)
    dumped = analyze(_chain, "f32[8,8]", runs=0)
    assert folders[0] is None and folders[1] is not None
    assert small.to_dict()["compiled"] == dumped.to_dict()["compiled"]
    assert small.to_dict()["fusion_map"] == dumped.to_dict()["fusion_map"]


def _NoDump(options: dict[str, Any], **_: Any) -> Any:
    """A dump that never comes, as for a user who dumps already: the compiled HLO is
    read after the compile."""
    from viz.hlo_dump import OptimizedHloDump

    return OptimizedHloDump(options, {"XLA_FLAGS": "--xla_dump_to=/their/own/folder"})


def test_the_reader_beside_the_compile_takes_only_idle_cpu_until_the_compile_ends():
    """SCHED_IDLE while XLA compiles (where the process may restore the policy after),
    the normal policy once the analysis waits for what is left to read."""
    import os
    import threading

    import viz.overlap

    if not viz.overlap.may_restore_policy():
        pytest.skip("this process may not move a SCHED_IDLE thread back (no CAP_SYS_NICE)")
    policies: list[int] = []
    started, resumed = threading.Event(), threading.Event()

    def read() -> None:
        policies.append(os.sched_getscheduler(0))  # 0: this thread, on Linux
        started.set()
        resumed.wait(10)
        policies.append(os.sched_getscheduler(0))

    reader = viz.overlap.Background(read, idle=True)
    started.wait(10)
    reader.resume()
    resumed.set()
    reader.result()
    assert policies == [os.SCHED_IDLE, os.SCHED_OTHER]


@pytest.mark.parametrize("restorable_only", [False, True], ids=["the worker", "a caller"])
def test_where_idle_priority_cannot_be_given_back_a_callers_reader_keeps_its_own(
    monkeypatch: pytest.MonkeyPatch, restorable_only: bool
):
    """Without CAP_SYS_NICE the worker's reader takes nice 19 for good; a caller's keeps
    its priority (the call waits for what the reader left once the compile returned)."""
    import os
    import threading

    import viz.overlap

    monkeypatch.setattr(viz.overlap, "may_restore_policy", lambda: False)

    def read() -> int:
        priority = viz.overlap.IdlePriority(restorable_only)
        before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        priority.lower()
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) - before

    assert viz.overlap.Background(read).result() == (0 if restorable_only else 19)


def test_the_readers_hold_the_gil_only_inside_the_compile_with_a_short_switch_interval(
    monkeypatch: pytest.MonkeyPatch, worker_process: None
):
    """In jitscope's own process (the worker), the reader starts once the compile is
    about to (`open`), shortens CPython's switch interval while XLA compiles so the GIL
    comes back to the caller at once, and the interval is given back after the compile,
    also across overlapping analyses and where the compile ended before the reader
    came in."""
    import sys
    import threading

    import viz.overlap
    import viz.pipeline
    import viz.readers

    window_of = viz.overlap.CompileWindow
    normal = sys.getswitchinterval()
    seen: list[float] = []
    real = viz.readers.read_early

    def read_early(*args: Any) -> Any:
        seen.append(sys.getswitchinterval())
        return real(*args)

    monkeypatch.setattr(viz.readers, "read_early", read_early)

    def fresh(x):  # a program no earlier test compiled: XLA's cache would make it instant
        return _chain(x) * 1.000123

    assert analyze(fresh, "f32[8,13]", runs=0).ok
    assert seen == [window_of.SHORT_S] and sys.getswitchinterval() == normal

    first, second = window_of(), window_of()
    for window in (first, second):
        window.open()
        window.enter()
    first.close()
    assert sys.getswitchinterval() == window_of.SHORT_S  # the second is still compiling
    second.close()
    assert sys.getswitchinterval() == normal

    late = window_of()
    entered = threading.Thread(target=late.enter)
    entered.start()
    late.close()  # a compile that failed before the reader got the GIL
    entered.join(10)
    assert not entered.is_alive() and sys.getswitchinterval() == normal


def _when_read(monkeypatch: pytest.MonkeyPatch, wait_for_reader: bool) -> list[tuple[str, str]]:
    """What the analyses do when, each with its thread's name: the compile asked for
    (with or without a dump), the IRs' reading started, the compile returned. With
    `wait_for_reader`, a compile waits up to 10 s for the reading to start beside it."""
    import threading

    import viz.pipeline
    import viz.readers
    import viz.stages

    happened: list[tuple[str, str]] = []
    reading = threading.Event()
    real_read, real_compile = viz.readers.read_early, viz.stages.Lowered.compile

    def note(what: str) -> None:
        happened.append((what, threading.current_thread().name))

    def read_early(*args: Any) -> Any:
        note("read")
        reading.set()
        return real_read(*args)

    def compile(self: Any, extra_options: dict[str, Any] | None = None) -> Any:
        note("compile, dumped" if "xla_dump_to" in (extra_options or {}) else "compile")
        if wait_for_reader:
            reading.wait(10)
        compiled = real_compile(self, extra_options)
        note("compiled")
        return compiled

    monkeypatch.setattr(viz.readers, "read_early", read_early)
    monkeypatch.setattr(viz.stages.Lowered, "compile", compile)
    monkeypatch.setattr(viz.pipeline, "DUMP_FROM_BYTES", 0)  # even a chain would be dumped
    return happened


def test_in_the_callers_process_the_irs_are_read_beside_the_compile_and_nothing_is_dumped(
    monkeypatch: pytest.MonkeyPatch,
):
    """viz.analyze() in a user's process: the jaxpr and the StableHLO are read beside
    XLA's compile (issue #60), which dumps nothing (`compile_s` stays what jax.jit takes:
    a dump costs XLA 3-6 % of a 12-layer compile)."""
    happened = _when_read(monkeypatch, wait_for_reader=True)
    report = analyze(_chain, "f32[8,9]", runs=0)
    assert report.ok and report.compiled.kernel_count
    assert happened == [
        ("compile", "MainThread"),
        ("read", "jitscope-reader"),
        ("compiled", "MainThread"),
    ]


def test_in_the_worker_the_irs_are_read_beside_the_compile_from_its_dump(
    monkeypatch: pytest.MonkeyPatch, worker_process: None
):
    happened = _when_read(monkeypatch, wait_for_reader=True)
    report = analyze(_chain, "f32[8,9]", runs=0)
    assert report.ok and report.compiled.kernel_count
    assert happened == [
        ("compile, dumped", "MainThread"),
        ("read", "jitscope-reader"),
        ("compiled", "MainThread"),
    ]


def test_the_report_is_the_same_read_beside_the_compile_or_after_it(
    monkeypatch: pytest.MonkeyPatch,
):
    """Only the times differ between the worker's analysis and a caller's."""
    import viz.overlap
    import viz.pipeline

    monkeypatch.setattr(viz.pipeline, "DUMP_FROM_BYTES", 0)  # the compiled HLO from the dump
    sample = get_sample("transformer_block")
    block = getattr(load_module(sample.code, str(sample.path)), sample.function)
    reports = []
    for own in (True, False):
        viz.overlap.own_process(own)
        try:
            reports.append(analyze(block, sample.args, runs=0).to_dict())
        finally:
            viz.overlap.own_process(False)
    timed = ("timings", "compile_events")
    beside, after = ({k: v for k, v in r.items() if k not in timed} for r in reports)
    assert beside == after


def _interpreter() -> tuple[Any, ...]:
    """What a caller's interpreter must be left as: its collector and switch interval."""
    import gc
    import sys

    return gc.isenabled(), gc.get_threshold(), gc.get_freeze_count(), sys.getswitchinterval()


class _Timeout(Exception):
    pass


def _timeout(signum: int, frame: Any) -> None:
    raise _Timeout


@pytest.mark.parametrize("collector", ["enabled", "disabled by the caller"])
@pytest.mark.parametrize(
    "ending", ["returns", "the user's function raises", "KeyboardInterrupt", "a timeout"]
)
def test_the_callers_interpreter_is_left_as_it_was(
    monkeypatch: pytest.MonkeyPatch, collector: str, ending: str
):
    """viz.analyze() pauses the caller's collector, and shortens the switch interval,
    while it reads beside XLA's compile and after it (issue #60), and gives both back as
    they were, however the call ends."""
    import gc
    import signal

    import viz.readers
    import viz.stages

    seen: dict[str, list[bool]] = {"compile": [], "reading": []}  # the collector on?
    real_compile, real_read = viz.stages.Lowered.compile, viz.readers.read_early

    def compile(self: Any, extra_options: dict[str, Any] | None = None) -> Any:
        seen["compile"].append(gc.isenabled())
        if ending == "a timeout":  # a caller's alarm going off as XLA compiles
            signal.setitimer(signal.ITIMER_REAL, 0.01)
            time.sleep(5)
        return real_compile(self, extra_options)

    def read_early(*args: Any) -> Any:
        seen["reading"].append(gc.isenabled())
        if ending == "KeyboardInterrupt":
            raise KeyboardInterrupt
        return real_read(*args)

    def fails(x):
        raise ValueError("the user's bug")

    monkeypatch.setattr(viz.stages.Lowered, "compile", compile)
    monkeypatch.setattr(viz.readers, "read_early", read_early)
    previous = signal.signal(signal.SIGALRM, _timeout)
    if collector != "enabled":
        gc.disable()
    try:
        before = _interpreter()
        if ending in ("returns", "the user's function raises"):
            fn = fails if ending == "the user's function raises" else _chain
            report = analyze(fn, "f32[8,11]", runs=2)
            assert report.ok == (ending == "returns")
        else:
            with pytest.raises(KeyboardInterrupt if ending == "KeyboardInterrupt" else _Timeout):
                analyze(_chain, "f32[8,11]", runs=0)
        assert _interpreter() == before
        if ending == "the user's function raises":  # in the trace: nothing compiled or read
            assert seen == {"compile": [], "reading": []}
        else:  # no collection while XLA compiles and the reader reads beside it
            assert seen == {"compile": [False], "reading": [False]}
    finally:
        gc.enable()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_in_the_callers_process_what_is_not_read_is_made_when_first_read():
    """The views, texts, fusion map, sharding and XLA's analyses wait for their first
    reader; the counts and timings do not."""
    from viz.plain import pending

    report = analyze(_chain, "f32[8,12]", runs=0)
    later = ("graphs", "fusion_map", "fusion_map_coverage", "warnings", "cost", "memory")
    assert all(pending(report, name) for name in later)
    assert pending(report.jaxpr, "text") and pending(report.stablehlo, "text")
    assert report.jaxpr.eqn_count and report.compiled.kernel_count
    assert report.fusion_map and report.graphs["compiled"].visible_nodes
    assert "tanh" in report.jaxpr.text and not pending(report, "fusion_map")


@pytest.mark.parametrize("time_left", [True, False], ids=["compiling", "compiled"])
def test_in_the_callers_process_what_the_compile_leaves_time_for_is_made_beside_it(
    monkeypatch: pytest.MonkeyPatch, time_left: bool
):
    """Each IR's view, text and side of the fusion map: made on the reader thread while
    XLA still compiles; once it returned, left to be made where first read."""
    import threading

    import viz.readers
    from viz.ir.jaxpr import JaxprReading

    made_on: list[str] = []
    real_beside, real_text = viz.readers.made_beside, JaxprReading.text

    def text(self: Any) -> str:
        made_on.append(threading.current_thread().name)
        return real_text(self)

    def beside(read: Any, compiling: Any) -> Any:
        return real_beside(read, lambda: time_left)

    monkeypatch.setattr(viz.readers, "made_beside", beside)
    monkeypatch.setattr(JaxprReading, "text", text)
    report = analyze(_chain, "f32[8,13]", runs=0)
    assert made_on == (["jitscope-reader"] if time_left else [])
    assert "tanh" in report.jaxpr.text and report.fusion_map
    assert made_on == ["jitscope-reader" if time_left else "MainThread"]


def test_in_the_callers_process_xlas_memory_analysis_runs_beside_the_fusion_map_and_ends_there(
    monkeypatch: pytest.MonkeyPatch,
):
    """Read first, XLA's analyses start XLA's memory analysis (its C++ leaves the GIL)
    before the fusion map they need is made, and wait for it: once read, nothing of
    jitscope's runs on in the caller's process."""
    import threading

    import viz.pipeline
    import viz.readers

    order: list[str] = []
    read_memory, fusion_map_section = viz.readers.read_memory, viz.pipeline.fusion_map_section

    def memory(*args: Any) -> Any:
        order.append("memory")
        return read_memory(*args)

    def fusion(*args: Any) -> Any:  # the memory analysis under way, or done, by now
        threads = {t.name for t in threading.enumerate()}
        order.append("memory" if "jitscope-xla" in threads and not order else "")
        order.append("fusion map")
        return fusion_map_section(*args)

    monkeypatch.setattr(viz.readers, "read_memory", memory)
    monkeypatch.setattr(viz.pipeline, "fusion_map_section", fusion)
    report = analyze(_chain, "f32[8,10]", runs=0)
    assert order == []  # neither made before the report is read
    assert report.memory.peak_bytes and report.cost.flops
    assert order.index("memory") < order.index("fusion map") and report.fusion_map
    assert not [t for t in threading.enumerate() if t.name.startswith("jitscope")]


def test_in_the_worker_xlas_memory_analysis_starts_once_the_reader_is_done(
    monkeypatch: pytest.MonkeyPatch,
):
    """In the worker XLA's memory analysis starts once the reader thread beside the
    compile is done, not beside the reader's last graphs (its layout is Python: it held
    the GIL they waited for, and the report's head waits for them), and before the
    report is returned (its part follows the head)."""
    import threading

    import viz.overlap
    import viz.readers
    from viz.pipeline import analyze_target
    from viz.settings import Settings
    from viz.target import Target

    readers_alive: list[bool] = []
    read_memory, read_early = viz.readers.read_memory, viz.readers.read_early

    def memory(*args: Any) -> Any:
        readers_alive.append(any(t.name == "jitscope-reader" for t in threading.enumerate()))
        return read_memory(*args)

    def late(*args: Any) -> Any:  # the reader still busy once XLA returns
        early = read_early(*args)
        time.sleep(0.2)
        return early

    monkeypatch.setattr(viz.readers, "read_memory", memory)
    monkeypatch.setattr(viz.readers, "read_early", late)
    viz.overlap.own_process(True)
    try:
        target = Target.from_settings(Settings(function="_chain", args="f32[8,15]"), _chain)
        report = analyze_target(target, "f32[8,15]", runs=0, defer_analyses=True)
        started = list(readers_alive)
    finally:
        viz.overlap.own_process(False)
    assert started == [False]
    assert report.memory.peak_bytes and report.cost.flops


@pytest.mark.parametrize("process", ["the worker's", "a caller's"])
def test_nothing_of_jitscope_runs_beside_the_timed_runs(
    monkeypatch: pytest.MonkeyPatch, process: str
):
    """The reader thread, and XLA's memory analysis on its own thread, are done before
    the first timed run (issue #60): a run's median is the function's alone."""
    import threading

    import viz.overlap
    import viz.stages

    beside: list[list[str]] = []
    real = viz.stages.Compiled.time_runs

    def time_runs(self: Any, *args: Any) -> Any:
        beside.append([t.name for t in threading.enumerate() if t.name.startswith("jitscope")])
        return real(self, *args)

    monkeypatch.setattr(viz.stages.Compiled, "time_runs", time_runs)
    viz.overlap.own_process(process == "the worker's")
    try:
        report = analyze(_chain, "f32[8,14]", runs=3)
    finally:
        viz.overlap.own_process(False)
    assert report.ok and report.run is not None
    assert beside == [[]]


def test_an_executable_without_text_is_a_warning(monkeypatch: pytest.MonkeyPatch):
    import viz.pipeline
    import viz.stages

    monkeypatch.setattr(viz.pipeline, "OptimizedHloDump", _NoDump)
    monkeypatch.setattr(viz.stages.Compiled, "text", lambda self: None)
    report = analyze(_chain, "f32[8,8]", runs=0)
    assert report.ok and report.compiled.op_count is None
    assert any("as_text() is None" in w for w in report.warnings)


def test_the_jaxpr_graph_names_each_input_leaf_as_jax_does():
    def step(params, x):
        return jnp.tanh(x @ params["w"] + params["b"])

    report = analyze(step, "{'w': f32[4,3], 'b': f32[3]}, f32[2,4]", runs=0)
    inputs = {n.label: n.type for n in report.graph_models["jaxpr"].nodes if n.kind == "input"}
    assert inputs == {"params['b']": "f32[3]", "params['w']": "f32[4,3]", "x": "f32[2,4]"}


def test_analyze_in_the_callers_process_gives_its_gc_and_switch_interval_back():
    """viz.analyze() in a user's process or notebook: sampled every millisecond, the
    switch interval is the caller's but while XLA compiles (shortened for the reader
    beside it, issue #60), and the collector, paused for the compile and the reading,
    is on again once each call returns; no thread is left behind."""
    import gc
    import sys
    import threading

    from viz.overlap import CompileWindow

    before = {t.name for t in threading.enumerate()}
    interval = sys.getswitchinterval()
    samples: list[tuple[bool, float]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append((gc.isenabled(), sys.getswitchinterval()))
            time.sleep(0.001)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        sample = get_sample("transformer_block")
        block = getattr(load_module(sample.code, str(sample.path)), sample.function)
        for fn, spec in ((_chain, "f32[64,64]"), (block, sample.args), (_chain, "f32[8,8]")):
            report = analyze(fn, spec, runs=2)
            assert report.ok, report.error
            assert gc.isenabled() and sys.getswitchinterval() == interval
    finally:
        done.set()
        sampler.join()
    assert len(samples) > 50
    assert {interval for _, interval in samples} <= {interval, CompileWindow.SHORT_S}
    assert {t.name for t in threading.enumerate()} == before


def _sorted_and_summed(x):
    return jnp.cumsum(jnp.sort(x, axis=-1), axis=0)


class _NoAssignment:
    """XLA's memory analysis as a TPU gives it: the totals, no buffer assignment."""

    def __init__(self, analysis: Any):
        self._analysis = analysis

    serialized_buffer_assignment_proto = b""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._analysis, name)


@pytest.mark.parametrize("own", [True, False], ids=["in the worker", "in the caller's process"])
def test_where_memory_analysis_holds_no_assignment_the_profile_comes_from_the_dump(
    monkeypatch: pytest.MonkeyPatch, own: bool
):
    """The TPU's path, forced on the CPU: the compile asks XLA to dump its buffer
    assignment, reads it before the folder goes, and the profile is the same."""
    import viz.overlap
    import viz.pipeline
    import viz.stages

    expected = analyze(_sorted_and_summed, "f32[256,512]", runs=0).memory
    monkeypatch.setattr(viz.pipeline, "assignment_from_dump", lambda device: True)
    analysis = viz.stages.Compiled._analysis
    monkeypatch.setattr(viz.stages.Compiled, "_analysis", lambda c: _NoAssignment(analysis(c)))
    viz.overlap.own_process(own)
    try:
        report = analyze(_sorted_and_summed, "f32[256,512]", runs=0)
    finally:
        viz.overlap.own_process(False)
    memory = report.memory
    assert report.ok and not memory.profile_warning
    assert memory.peak_bytes == expected.peak_bytes and memory.at_peak == expected.at_peak
    monkeypatch.setattr(viz.pipeline, "assignment_from_dump", lambda device: False)
    without = analyze(_sorted_and_summed, "f32[256,512]", runs=0).memory
    assert without.peak_bytes is None and "no buffer assignment" in without.profile_warning


def test_a_program_without_transcendentals_counts_zero_of_them() -> None:
    """XLA's cost map leaves a zero count out: `transcendentals` is 0 where it counted."""
    report = analyze(lambda x: jnp.maximum(x @ x, 0.0), "f32[64,64]", runs=0)
    assert report.cost.transcendentals == 0.0
    with_tanh = analyze(lambda x: jnp.tanh(x @ x), "f32[64,64]", runs=0)
    assert with_tanh.cost.transcendentals == 64 * 64
