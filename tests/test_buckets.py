"""Batch-size bucket planning: parsing, routing, scoring, the optimum, the snippet."""

import ast
import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from viz.cache.planner import (
    best_plan,
    compare_plans,
    draw_sizes,
    evaluate,
    exact_plan,
    expected_latency,
    powers_of_two_plan,
    route,
    user_plan,
)
from viz.cache.snippet import precompile_snippet
from viz.spec import parse_sizes


def brute_force_padding(sizes: list[int], k: int) -> int:
    """Least padded rows over every set of k buckets drawn from 1..max(sizes)."""
    largest = max(sizes)
    best = None
    for rest in itertools.combinations(range(1, largest), k - 1):
        buckets = (*rest, largest)
        padded = sum(route(s, buckets) - s for s in sizes)
        best = padded if best is None else min(best, padded)
    return best


# Request sizes: hand-rolled lists, and lists from every draw_sizes distribution.
hand_sizes = st.lists(st.integers(1, 300), min_size=1, max_size=60)
drawn_sizes = st.builds(
    draw_sizes,
    st.sampled_from(["uniform", "lognormal", "zipf"]),
    st.integers(1, 200),
    st.integers(1, 512),
    st.integers(0, 2**32 - 1),
)
any_sizes = st.one_of(hand_sizes, drawn_sizes)
small_sizes = st.lists(st.integers(1, 12), min_size=1, max_size=15)


# ---------------------------------------------------------------- parse_sizes


def test_parse_sizes_accepts_commas_spaces_and_newlines():
    assert parse_sizes("1, 3, 8 17\n5") == [1, 3, 8, 17, 5]


def test_parse_sizes_of_blank_text_is_empty():
    assert parse_sizes("  \n ") == []


def test_parse_sizes_names_the_junk_token():
    with pytest.raises(ValueError, match="'eight'"):
        parse_sizes("1, eight, 3")


def test_parse_sizes_rejects_fractions():
    with pytest.raises(ValueError, match=r"'2\.5'"):
        parse_sizes("2.5")


@pytest.mark.parametrize("token", ["0", "-4"])
def test_parse_sizes_rejects_zero_and_negatives(token):
    with pytest.raises(ValueError, match=f"'{token}'.*at least 1"):
        parse_sizes(f"3 {token} 5")


# ---------------------------------------------------------------- draw_sizes


def test_draw_sizes_is_deterministic_for_a_seed():
    assert draw_sizes("lognormal", 50, 128, seed=7) == draw_sizes("lognormal", 50, 128, seed=7)


def test_draw_sizes_changes_with_the_seed():
    assert draw_sizes("uniform", 50, 128, seed=1) != draw_sizes("uniform", 50, 128, seed=2)


@pytest.mark.parametrize("distribution", ["uniform", "lognormal", "zipf"])
def test_draw_sizes_gives_n_ints_within_range(distribution):
    sizes = draw_sizes(distribution, 500, 64, seed=3)
    assert len(sizes) == 500
    assert all(type(s) is int and 1 <= s <= 64 for s in sizes)


def test_draw_sizes_rejects_an_unknown_distribution():
    with pytest.raises(ValueError, match="'normal'"):
        draw_sizes("normal", 10, 64)


# ---------------------------------------------------------------- route


@pytest.mark.parametrize(("size", "bucket"), [(1, 4), (4, 4), (5, 16), (16, 16), (17, 32)])
def test_route_picks_the_smallest_bucket_that_fits(size, bucket):
    assert route(size, [32, 4, 16]) == bucket


def test_route_rejects_a_size_beyond_the_largest_bucket():
    with pytest.raises(ValueError, match=r"33.*largest bucket 32"):
        route(33, [4, 16, 32])


# ---------------------------------------------------------------- the plans


def test_evaluate_scores_padding_by_hand():
    plan = evaluate([1, 3, 5, 8], [4, 8], "mine")
    # 1→4 (3 padded), 3→4 (1), 5→8 (3), 8→8 (0): 7 padded rows next to 17 useful ones.
    assert (plan.padded_rows, plan.useful_rows) == (7, 17)
    assert plan.waste_pct == pytest.approx(100 * 7 / 24)
    assert plan.assignment == {4: 2, 8: 2}


def test_evaluate_lists_buckets_sorted_unique_with_idle_ones():
    plan = evaluate([2], [8, 2, 8, 4], "mine")
    assert plan.buckets == (2, 4, 8)
    assert plan.compiles == 3
    assert plan.assignment == {2: 1, 4: 0, 8: 0}


def test_exact_plan_has_no_waste_and_compiles_each_distinct_size():
    plan = exact_plan([5, 1, 5, 9, 1, 2])
    assert plan.buckets == (1, 2, 5, 9)
    assert plan.compiles == 4
    assert plan.padded_rows == 0
    assert plan.waste_pct == 0.0


def test_powers_of_two_keeps_only_used_powers_and_waste_by_hand():
    plan = powers_of_two_plan([3, 5, 9, 16])
    # 3→4 (1), 5→8 (3), 9→16 (7), 16→16 (0); buckets 1 and 2 serve nobody.
    assert plan.buckets == (4, 8, 16)
    assert plan.padded_rows == 11
    assert plan.waste_pct == pytest.approx(100 * 11 / (11 + 33))


def test_user_plan_keeps_buckets_that_cover_every_request():
    plan = user_plan([3, 7], [8, 4])
    assert plan.name == "your buckets"
    assert plan.buckets == (4, 8)


def test_user_plan_adds_the_largest_request_when_it_does_not_fit():
    plan = user_plan([3, 137, 20], [8, 32])
    assert plan.name == "your buckets + 137"
    assert plan.buckets == (8, 32, 137)


def test_best_plan_on_a_hand_example_matches_brute_force():
    sizes = [1, 3, 3, 5, 8, 17, 17, 20]
    plan = best_plan(sizes, 3)
    assert plan.name == "best 3 buckets"
    assert plan.buckets == (3, 8, 20)
    assert plan.padded_rows == brute_force_padding(sizes, 3) == 2 + 3 + 3 + 3


def test_best_plan_caps_k_at_the_distinct_sizes():
    plan = best_plan([2, 2, 7], 10)
    assert plan.name == "best 2 buckets"
    assert plan.buckets == (2, 7)
    assert plan.padded_rows == 0


def test_best_plan_rejects_k_below_one():
    with pytest.raises(ValueError, match="k must be at least 1"):
        best_plan([1, 2], 0)


def test_plans_reject_an_empty_request_list():
    with pytest.raises(ValueError, match="no request sizes"):
        exact_plan([])


def test_compare_plans_order_and_default_k():
    plans = compare_plans([3, 5, 9, 16, 16], [10], None)
    assert [p.name for p in plans] == [
        "exact shapes",
        "powers of two",
        "your buckets + 16",
        "best 3 buckets",  # as many buckets as the powers of two use: 4, 8, 16
    ]


def test_compare_plans_skips_missing_user_buckets_and_honours_k():
    plans = compare_plans([3, 5, 9, 16], None, 2)
    assert [p.name for p in plans] == ["exact shapes", "powers of two", "best 2 buckets"]


def test_expected_latency_weights_each_bucket_run_time_by_its_requests():
    plan = evaluate([1, 2, 3, 8], [4, 8], "mine")  # three requests at 4, one at 8
    assert expected_latency(plan, lambda bucket: bucket / 1000) == pytest.approx(0.005)


def test_plan_to_dict_is_json_able():
    data = exact_plan([2, 1, 2]).to_dict()
    assert data["buckets"] == [1, 2]
    assert data["assignment"] == {1: 1, 2: 2}
    json.dumps(data)


def test_plan_is_hashable_despite_its_assignment_dict():
    assert hash(exact_plan([1, 2])) == hash(exact_plan([2, 1]))


# ---------------------------------------------------------------- properties


@settings(max_examples=150, deadline=None)
@given(any_sizes)
def test_best_plan_pads_no_more_than_powers_of_two_with_as_many_compiles(sizes):
    powers = powers_of_two_plan(sizes)
    best = best_plan(sizes, powers.compiles)
    assert best.compiles <= powers.compiles
    assert best.padded_rows <= powers.padded_rows


@settings(max_examples=150, deadline=None)
@given(small_sizes, st.integers(1, 12))
def test_best_plan_equals_brute_force_on_small_inputs(sizes, k):
    plan = best_plan(sizes, k)
    assert plan.padded_rows == brute_force_padding(sizes, plan.compiles)
    assert plan.compiles == min(k, len(set(sizes)))


@settings(max_examples=100, deadline=None)
@given(any_sizes, st.lists(st.integers(1, 600), max_size=8), st.integers(1, 20))
def test_every_plan_routes_every_request_with_sane_waste(sizes, user_buckets, k):
    for plan in compare_plans(sizes, user_buckets, k):
        assert sum(plan.assignment.values()) == len(sizes)
        assert set(plan.assignment) == set(plan.buckets)
        assert list(plan.buckets) == sorted(set(plan.buckets))
        assert plan.compiles == len(plan.buckets)
        assert plan.padded_rows >= 0
        assert plan.useful_rows == sum(sizes)
        assert 0 <= plan.waste_pct < 100


@settings(max_examples=50, deadline=None)
@given(any_sizes, st.integers(1, 10))
def test_more_buckets_never_pad_more(sizes, k):
    assert best_plan(sizes, k + 1).padded_rows <= best_plan(sizes, k).padded_rows


# ---------------------------------------------------------------- the snippet


def mlp_snippet(buckets=(2, 4, 8)) -> str:
    return precompile_snippet("predict", "x", ["params", "x"], ["params", "f32[8,3]"], buckets)


def test_snippet_is_valid_python():
    compile(mlp_snippet(), "<snippet>", "exec")


def test_snippet_builds_shape_dtype_structs_with_the_bucket_as_batch():
    source = mlp_snippet()
    assert "jax.ShapeDtypeStruct((batch, 3), jnp.float32)" in source
    assert "BUCKETS = (2, 4, 8)" in source
    assert "jax.jit(predict).lower(*_example_args(bucket)).compile()" in source


def test_snippet_defines_the_helpers_a_server_needs():
    tree = ast.parse(mlp_snippet())
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert [a.arg for a in functions["pad_to_bucket"].args.args] == ["x", "buckets"]
    assert [a.arg for a in functions["serve"].args.args] == ["params", "x"]


def test_snippet_translates_dtypes_containers_and_keys():
    source = precompile_snippet(
        "step",
        "tokens",
        ["tokens", "weights", "rng"],
        ["i32[16,4]", "{'w': bf16[4,4], 'b': f16[4]}", "key"],
        [16],
    )
    assert "jax.ShapeDtypeStruct((batch, 4), jnp.int32)" in source
    assert "'w': jax.ShapeDtypeStruct((4, 4), jnp.bfloat16)" in source
    assert "'b': jax.ShapeDtypeStruct((4,), jnp.float16)" in source
    assert "jax.random.key(0)" in source
    compile(source, "<snippet>", "exec")


@pytest.mark.parametrize(
    ("batch_arg", "specs", "message"),
    [
        ("x", ["params", "f32[]"], "batch axis"),
        ("x", ["params", "params2"], "batch axis"),
        ("x", ["params", "q9[4]"], "unknown dtype 'q9'"),
        ("y", ["params", "f32[4]"], "'y' is not among"),
        ("x", ["params (", "f32[4]"], r"'params \('"),
    ],
)
def test_snippet_rejects_specs_that_cannot_work(batch_arg, specs, message):
    with pytest.raises(ValueError, match=message):
        precompile_snippet("predict", batch_arg, ["params", "x"], specs, [4])


def test_snippet_rejects_a_parameter_that_shadows_its_helpers():
    with pytest.raises(ValueError, match="'jnp' clashes"):
        precompile_snippet("predict", "x", ["jnp", "x"], ["params", "f32[4]"], [4])


def test_snippet_runs_end_to_end_with_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    params = {"w": jnp.arange(6.0).reshape(3, 2), "b": jnp.array([1.0, -1.0])}

    def predict(params, x):
        return x @ params["w"] + params["b"], jnp.sum(params["w"])

    namespace = {"predict": predict, "params": params}
    exec(compile(mlp_snippet(), "<snippet>", "exec"), namespace)

    assert sorted(namespace["COMPILED"]) == [2, 4, 8]
    for size in (1, 3, 4, 8):
        x = jnp.ones((size, 3)) * size
        out, total = namespace["serve"](params, x)
        assert out.shape == (size, 2)
        assert jnp.allclose(out, predict(params, x)[0])
        assert total.shape == ()
    padded, bucket, size = namespace["pad_to_bucket"](jnp.ones((3, 3)), (2, 4, 8))
    assert (padded.shape, bucket, size) == ((4, 3), 4, 3)
    with pytest.raises(ValueError, match="exceeds the largest bucket 8"):
        namespace["serve"](params, jnp.ones((9, 3)))
