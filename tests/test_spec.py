"""Tests for viz.spec, the args-spec parser (DESIGN.md, "Args spec language")."""

from __future__ import annotations

import pickle
import time
import tracemalloc
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from viz.spec import (
    DTYPES,
    ArraySpec,
    KeySpec,
    SpecError,
    ValueSpec,
    abstract_args,
    concrete_args,
    format_spec,
    input_bytes,
    parse_spec,
    uses_x64,
)

ALL_DTYPES = list(DTYPES)
NUMPY_DTYPE = {
    "f16": jnp.float16,
    "bf16": jnp.bfloat16,
    "f32": jnp.float32,
    "f64": jnp.float64,
    "i8": jnp.int8,
    "i16": jnp.int16,
    "i32": jnp.int32,
    "i64": jnp.int64,
    "u8": jnp.uint8,
    "u16": jnp.uint16,
    "u32": jnp.uint32,
    "u64": jnp.uint64,
    "bool": jnp.bool_,
    "c64": jnp.complex64,
    "c128": jnp.complex128,
}


def error_of(text: str, namespace: dict[str, Any] | None = None) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_spec(text, namespace)
    return info.value


# --------------------------------------------------------------------------- arrays


def test_dtype_table_is_the_contract():
    contract = [
        "f16",
        "bf16",
        "f32",
        "f64",
        "i8",
        "i16",
        "i32",
        "i64",
        "u8",
        "u16",
        "u32",
        "u64",
        "bool",
        "c64",
        "c128",
    ]
    assert list(NUMPY_DTYPE) == contract
    assert list(DTYPES) == contract


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_every_dtype_parses_to_an_array_spec(dtype: str):
    assert parse_spec(f"{dtype}[2,3]") == [ArraySpec(dtype, (2, 3))]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_every_dtype_abstracts_to_its_dtype_under_x64(dtype: str):
    with jax.enable_x64(True):
        (abstract,) = abstract_args(parse_spec(f"{dtype}[4]"))
    assert abstract == jax.ShapeDtypeStruct((4,), NUMPY_DTYPE[dtype])


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_every_dtype_concretizes_to_its_dtype_under_x64(dtype: str):
    with jax.enable_x64(True):
        (value,) = concrete_args(parse_spec(f"{dtype}[3]"))
    assert value.shape == (3,)
    assert value.dtype == NUMPY_DTYPE[dtype]


def test_scalar_array_has_empty_shape():
    assert parse_spec("i32[]") == [ArraySpec("i32", ())]
    assert parse_spec("f32[ ]") == [ArraySpec("f32", ())]


def test_explicit_empty_tuple_shape_is_also_a_scalar():
    assert parse_spec("f32[()]") == [ArraySpec("f32", ())]


def test_trailing_comma_in_shape_is_allowed():
    assert parse_spec("f32[3,]") == [ArraySpec("f32", (3,))]


def test_array_str_is_jaxpr_spelling():
    assert str(ArraySpec("f32", (8, 128))) == "f32[8,128]"
    assert str(ArraySpec("i32", ())) == "i32[]"


def test_array_nbytes():
    assert ArraySpec("f32", (8, 128)).nbytes == 8 * 128 * 4
    assert ArraySpec("bf16", (3,)).nbytes == 6
    assert ArraySpec("bool", ()).nbytes == 1


def test_dimensions_can_be_names_from_the_namespace():
    assert parse_spec("f32[batch, 128]", {"batch": 32}) == [ArraySpec("f32", (32, 128))]


def test_dimensions_can_be_numpy_ints():
    assert parse_spec("f32[n]", {"n": np.int64(5)}) == [ArraySpec("f32", (5,))]


def test_whitespace_around_items_is_ignored():
    assert parse_spec("  f32[2] ,\n i32[] ") == [ArraySpec("f32", (2,)), ArraySpec("i32", ())]


def test_empty_spec_is_no_arguments():
    assert parse_spec("") == []
    assert parse_spec("   \n ") == []


def test_one_trailing_comma_is_allowed():
    assert parse_spec("f32[2],") == [ArraySpec("f32", (2,))]


# --------------------------------------------------------------------------- other items


@pytest.mark.parametrize(
    ("text", "value"),
    [("5", 5), ("-3", -3), ("2.0", 2.0), ("-0.5", -0.5), ("True", True), ("None", None)],
)
def test_literals_become_value_specs(text: str, value: Any):
    assert parse_spec(text) == [ValueSpec(text, value)]


def test_string_literals_may_hold_commas_and_brackets():
    assert parse_spec("'relu', \"a,[b\", 'i32[]'") == [
        ValueSpec("'relu'", "relu"),
        ValueSpec('"a,[b"', "a,[b"),
        ValueSpec("'i32[]'", "i32[]"),
    ]


def test_key_is_a_prng_key():
    assert parse_spec("key") == [KeySpec(0)]
    assert str(KeySpec()) == "key"


def test_key_with_seed():
    assert parse_spec("key(7)") == [KeySpec(7)]
    assert str(KeySpec(7)) == "key(7)"


def test_key_defined_by_the_namespace_wins():
    k = jax.random.key(5)
    (item,) = parse_spec("key", {"key": k})
    assert isinstance(item, ValueSpec)
    assert item.value is k


def test_key_abstract_and_concrete():
    (abstract,) = abstract_args([KeySpec(3)])
    (value,) = concrete_args([KeySpec(3)])
    assert abstract == jax.eval_shape(lambda: jax.random.key(0))
    assert jnp.array_equal(jax.random.key_data(value), jax.random.key_data(jax.random.key(3)))


def test_nested_containers_become_real_containers():
    spec = "{'w': f32[3,3], 'layers': [(i32[], key), {'b': f32[3]}]}, ()"
    assert parse_spec(spec) == [
        {
            "w": ArraySpec("f32", (3, 3)),
            "layers": [(ArraySpec("i32", ()), KeySpec()), {"b": ArraySpec("f32", (3,))}],
        },
        (),
    ]


def test_container_order_is_kept():
    (tree,) = parse_spec("{'z': 1, 'a': 2}")
    assert list(tree) == ["z", "a"]


def test_one_element_tuple_and_parenthesised_value():
    assert parse_spec("(f32[2],), (5)") == [(ArraySpec("f32", (2,)),), ValueSpec("(5)", 5)]


def test_names_are_evaluated_in_the_namespace():
    params = {"w": jnp.ones((2, 2))}
    (item,) = parse_spec("params", {"params": params})
    assert item == ValueSpec("params", params)


def test_expressions_are_evaluated_in_the_namespace():
    ns = {"params": {"w": np.arange(4)}}
    a, b = parse_spec("params['w'], jnp.ones((3, 3))", ns)
    assert a.text == "params['w']" and a.value is ns["params"]["w"]
    assert b.text == "jnp.ones((3, 3))" and b.value.shape == (3, 3)


def test_expressions_inside_containers_keep_their_text():
    (tree,) = parse_spec("{'w': f32[2], 'x': n + 1}", {"n": 4})
    assert tree == {"w": ArraySpec("f32", (2,)), "x": ValueSpec("n + 1", 5)}


def test_evaluation_does_not_write_into_the_namespace():
    ns = {"n": 1}
    parse_spec("n, (m := 2)", ns)
    assert ns == {"n": 1}


# --------------------------------------------------------------------------- abstract / concrete


def test_abstract_and_concrete_agree_on_shapes_and_dtypes():
    items = parse_spec("f32[2,3], {'a': i32[], 'b': [bool[4], u8[1]]}, bf16[5]")
    abstract = jax.tree_util.tree_leaves(abstract_args(items))
    concrete = jax.tree_util.tree_leaves(concrete_args(items))
    assert [(a.shape, a.dtype) for a in abstract] == [(c.shape, c.dtype) for c in concrete]


def test_values_pass_through_abstract_and_concrete():
    items = parse_spec("3, 'relu', None")
    assert abstract_args(items) == [3, "relu", None]
    assert concrete_args(items) == [3, "relu", None]


def test_arrays_inside_values_become_shape_dtype_structs():
    ns = {"params": {"w": jnp.ones((2, 3)), "n": 3, "m": np.zeros(4, np.int32)}}
    (abstract,) = abstract_args(parse_spec("params", ns))
    assert abstract == {
        "w": jax.ShapeDtypeStruct((2, 3), jnp.float32),
        "n": 3,
        "m": jax.ShapeDtypeStruct((4,), jnp.int32),
    }


def test_weak_type_of_evaluated_arrays_is_kept():
    strong, weak = abstract_args(parse_spec("jnp.ones(3), jnp.asarray(2.0)"))
    assert strong.weak_type is False
    assert weak.weak_type is True


def test_concrete_values_are_deterministic_per_seed():
    items = parse_spec("f32[4], i32[4], bool[4], c64[2]")
    first, again, other = concrete_args(items), concrete_args(items), concrete_args(items, 1)
    assert all(jnp.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not jnp.array_equal(first[0], other[0])


def test_concrete_ints_are_small():
    (ints, uints) = concrete_args(parse_spec("i32[1000], u8[1000]"))
    assert int(jnp.abs(ints).max()) <= 5
    assert int(uints.max()) < 10


def test_64_bit_dtypes_truncate_without_x64():
    (abstract,) = abstract_args(parse_spec("f64[2]"))
    (value,) = concrete_args(parse_spec("f64[2]"))
    assert abstract.dtype == jnp.float32
    assert value.dtype == jnp.float32


def test_huge_array_parses_and_abstracts_without_allocating():
    tracemalloc.start()
    start = time.perf_counter()
    items = parse_spec("f32[100000,100000]")
    (abstract,) = abstract_args(items)
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert abstract == jax.ShapeDtypeStruct((100000, 100000), jnp.float32)
    assert elapsed < 1.0
    assert peak < 10 * 2**20
    assert input_bytes(items) == 100000 * 100000 * 4


# --------------------------------------------------------------------------- helpers


def test_input_bytes_counts_arrays_keys_and_arrays_inside_values():
    ns = {"w": np.zeros((10, 10), np.float32)}
    items = parse_spec("f32[8,128], {'b': bf16[3]}, 7, w, key", ns)
    key_bytes = jax.random.key_data(jax.random.key(0)).nbytes
    assert input_bytes(items) == 8 * 128 * 4 + 3 * 2 + 400 + key_bytes


def test_uses_x64():
    assert uses_x64(parse_spec("f32[2], {'a': [c128[1]]}"))
    assert not uses_x64(parse_spec("f32[2], c64[1], 3, key"))
    for dtype in ("f64", "i64", "u64", "c128"):
        assert uses_x64(parse_spec(f"{dtype}[]"))


def test_format_spec_round_trip():
    spec = "f32[32,784], {'w': f32[3,3], 'b': f32[3]}, 3, key, key(2), (i32[],), [], 'relu', -1"
    items = parse_spec(spec)
    assert format_spec(items) == spec
    assert parse_spec(format_spec(items)) == items


def test_spec_error_pickles():
    err = error_of("f32[2], f33[3]")
    again = pickle.loads(pickle.dumps(err))
    assert (again.index, again.item, again.reason, str(again)) == (
        err.index,
        err.item,
        err.reason,
        str(err),
    )


# --------------------------------------------------------------------------- errors


def test_error_empty_dimension():
    err = error_of("f32[2], f32[3,,4]")
    assert str(err) == "item 2 'f32[3,,4]': empty dimension"
    assert (err.index, err.item, err.reason) == (2, "f32[3,,4]", "empty dimension")


def test_error_unknown_dtype():
    known = "f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, bool, c64, c128"
    assert str(error_of("f33[3]")) == f"item 1 'f33[3]': unknown dtype 'f33' (known: {known})"


def test_error_unknown_dtype_suggests_the_short_name():
    assert str(error_of("float32[3]")) == (
        "item 1 'float32[3]': unknown dtype 'float32' (did you mean f32?)"
    )
    assert str(error_of("F32[3]")) == "item 1 'F32[3]': unknown dtype 'F32' (did you mean f32?)"


def test_error_a_typo_in_a_dtype_says_it_is_no_dtype_nor_a_name():
    """'q32[4]' said only "name 'q32' is not defined": a name before a shape is read as
    a dtype first; ML's fp32 spelling is recognised."""
    dtypes = "f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, bool, c64, c128"
    assert str(error_of("f32[2], q32[256,512]")) == (
        f"item 2 'q32[256,512]': 'q32' is neither a dtype ({dtypes}) nor a name your code defines"
    )
    assert "'tf32' is neither a dtype" in str(error_of("tf32[]"))
    assert str(error_of("fp32[3]")) == "item 1 'fp32[3]': unknown dtype 'fp32' (did you mean f32?)"
    assert parse_spec("table[1]", {"table": [0, [4]]})[0].value == [4]  # the code's name


def test_error_negative_dimension():
    assert str(error_of("f32[-1]")) == "item 1 'f32[-1]': dimension -1 is negative"


def test_error_negative_dimension_from_a_name():
    assert str(error_of("f32[n]", {"n": -2})) == "item 1 'f32[n]': dimension n = -2 is negative"


def test_shapes_jax_or_xla_cannot_hold_are_spec_errors_not_crashes() -> None:
    many = "f32[" + ",".join(["1"] * 65) + "]"
    assert "65 dimensions: JAX arrays have at most 64" in str(error_of(many))
    assert "has more elements than XLA can count" in str(error_of("f32[4294967296,4294967296]"))
    assert "has more elements than XLA can count" in str(error_of("f32[0,99999999999999999999]"))
    assert parse_spec("f32[" + ",".join(["1"] * 64) + "]")  # the limit itself is fine


def test_error_fractional_dimension():
    assert str(error_of("f32[2.5]")) == "item 1 'f32[2.5]': dimension 2.5 is not an integer"


def test_error_boolean_dimension():
    assert str(error_of("f32[True]")) == "item 1 'f32[True]': dimension True is not an integer"


def test_error_undefined_name():
    err = error_of("f32[2], 3, parms", {"params": {}})
    assert str(err) == "item 3 'parms': name 'parms' is not defined"


def test_error_undefined_dimension_name():
    assert str(error_of("f32[batch]")) == "item 1 'f32[batch]': name 'batch' is not defined"


def test_error_unbalanced_brackets():
    assert str(error_of("{'a': f32[2]")) == "item 1 '{'a': f32[2]': unbalanced brackets"


def test_error_unexpected_closing_bracket():
    err = error_of("f32[2]], 3")
    assert str(err) == "item 1 'f32[2]]': unbalanced brackets (unexpected ']')"


def test_error_mismatched_brackets():
    err = error_of("3, (f32[2]]")
    assert str(err) == "item 2 '(f32[2]]': unbalanced brackets ('(' closed by ']')"


def test_error_unterminated_string():
    assert str(error_of("f32[2], 'relu")) == "item 2 ''relu': unterminated string"


def test_error_expression_that_raises():
    assert str(error_of("1 / 0")) == "item 1 '1 / 0': ZeroDivisionError: division by zero"


def test_error_expression_that_raises_inside_a_container():
    err = error_of("[f32[2], {}['x']]")
    assert str(err) == "item 1 '[f32[2], {}['x']]': KeyError: 'x'"


def test_error_empty_item():
    assert str(error_of("f32[2],,3")) == "item 2 '': empty item"


def test_error_dtype_without_shape():
    assert (
        str(error_of("f32")) == "item 1 'f32': 'f32' needs a shape: f32[3], or f32[] for a scalar"
    )


def test_error_array_inside_an_expression():
    err = error_of("jnp.ones(2) + f32[2]")
    assert (
        err.reason == "f32[...] is an argument, not a value: it cannot be used inside an expression"
    )


def test_error_bad_key_seed():
    assert str(error_of("key(1.5)")) == "item 1 'key(1.5)': key seed 1.5 is not an integer"
    assert (
        str(error_of("key(1, 2)"))
        == "item 1 'key(1, 2)': key takes one integer seed: key or key(0)"
    )


def test_error_syntax():
    assert str(error_of("f32[2], 3 +")) == "item 2 '3 +': invalid syntax"


def test_error_keyword_argument():
    assert str(error_of("n=3")) == (
        "item 1 'n=3': keyword arguments are not supported: give every argument by position"
    )


def test_error_non_string_spec_is_a_whole_spec_error():
    err = error_of(42)  # type: ignore[arg-type]
    assert err.index is None
    assert str(err) == "spec must be a string, not int"


def test_error_deep_nesting_is_a_spec_error():
    err = error_of("[" * 500 + "]" * 500)
    assert err.index == 1


def test_error_long_items_are_shortened_in_the_message():
    text = "(" + "1, " * 40 + "f32[-1])"
    err = error_of(text)
    assert str(err) == f"item 1 '{text[:57]}...': dimension -1 is negative"
    assert err.item == text


# --------------------------------------------------------------------------- properties

VALID_SPECS = [
    "f32[32,784], {'w': f32[3,3], 'b': f32[3]}, 3, key, params",
    "i32[], bool[3], u8[2,2], bf16[4]",
    "(i32[], f32[4]), [f32[2], f32[2]]",
    "5, 2.0, True, 'relu', None, -1",
    "params['w'], jnp.ones((3, 3)), f32[batch, 128]",
    "{'a': [key, (c64[1],)], 'b': \"x,y\"}",
]
JUNK_ALPHABET = "f32[],{}()'\":-.0123456789 abcxyz_"
NAMESPACE = {"params": {"w": jnp.zeros((2, 2))}, "batch": 4, "x": 1}


@st.composite
def mutated_specs(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(VALID_SPECS))
    for _ in range(draw(st.integers(1, 4))):
        text = draw(mutation(text))
    return text


def mutation(text: str) -> st.SearchStrategy[str]:
    n = len(text)
    at = st.integers(0, max(n - 1, 0))
    junk = st.text(JUNK_ALPHABET, min_size=1, max_size=6)
    return st.one_of(
        at.map(lambda i: text[:i] + text[i + 1 :]),  # delete a character
        at.map(lambda i: text[: i + 1] + text[i:]),  # duplicate a character
        st.tuples(at, junk).map(lambda p: text[: p[0]] + p[1] + text[p[0] :]),  # insert junk
        st.sampled_from(",[](){}'\"").map(lambda c: text.replace(c, "", 1)),  # drop one
        st.sampled_from(",[](){}'\"").map(lambda c: text.replace(c, c + c, 1)),  # double one
    )


junk_specs = st.one_of(mutated_specs(), st.text(JUNK_ALPHABET, max_size=40))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(junk_specs)
def test_malformed_specs_only_ever_raise_spec_error(text: str):
    try:
        result = parse_spec(text, NAMESPACE)
    except SpecError as err:
        assert str(err)
        assert err.index is None or err.index >= 1
    else:
        assert isinstance(result, list)


def literal_values() -> st.SearchStrategy[ValueSpec]:
    values = st.one_of(
        st.integers(-(10**6), 10**6),
        st.floats(allow_nan=False, allow_infinity=False),
        st.booleans(),
        st.none(),
        st.text(max_size=8),
    )
    return values.map(lambda v: ValueSpec(repr(v), v))


leaf_specs = st.one_of(
    st.builds(
        ArraySpec,
        st.sampled_from(ALL_DTYPES),
        st.lists(st.integers(0, 64), max_size=3).map(tuple),
    ),
    st.builds(KeySpec, st.integers(0, 100)),
    literal_values(),
)
spec_trees = st.recursive(
    leaf_specs,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.text("abcxyz_'\",[]", max_size=4), children, max_size=3),
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(spec_trees, max_size=4))
def test_random_valid_specs_round_trip_through_format_spec(items: list):
    assert parse_spec(format_spec(items)) == items


@pytest.mark.parametrize(
    "item", ["f32[8,128]", "i32[]", "{'w': bf16[4,4], 'b': [f16[4], u8[2]]}", "(bool[3], 2.5)"]
)
def test_python_expression_builds_what_the_parser_abstracts(item):
    from viz.spec import python_expression

    built = eval(python_expression(item), {"jax": jax, "jnp": jnp})
    assert built == abstract_args(parse_spec(item))[0]


def test_python_expression_names_the_batch_dimension():
    from viz.spec import python_expression

    assert python_expression("f32[8,3]", "batch") == "jax.ShapeDtypeStruct((batch, 3), jnp.float32)"
    with pytest.raises(SpecError, match="batch axis"):
        python_expression("f32[]", "batch")
