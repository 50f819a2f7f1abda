"""Errors are results: every error kind, end to end, with a message, a fix and a line.

The user's code goes through the worker's `analyze` op as source text (the way the
app and the CLI send it), so `line` is a line of that text. A few kinds that need
no user module are checked through the in-process `viz.analyze`.
"""

from __future__ import annotations

import ast
import keyword
import re

import pytest
from conftest import REPO, analyzed_json, check_error_contract, line_of

from viz import analyze
from viz.errors import KINDS, ErrorInfo, ErrorKind, UserCodeError, classify, eager_failure


@pytest.fixture(scope="module")
def fails(worker):
    """analyze `code` in the worker; return the error after checking the error contract."""

    def run(code: str, args: str, kind: str, function: str | None = "f", **kwargs):
        report = analyzed_json(worker, code=code, function=function, args=args, **kwargs)
        return check_error_contract(report, kind)

    return run


# --------------------------------------------------------------------------- loading the code


def test_syntax_error_gives_line_and_column(fails):
    code = "import jax.numpy as jnp\n\ndef f(x):\n    return x +\n"
    error = fails(code, "f32[2]", "syntax_error")
    assert (error["line"], error["column"]) == (4, 15)
    assert "line 4" in error["message"]
    assert error["stage"] == "load"


def test_function_not_found_lists_the_functions_in_the_hint(fails):
    code = "def f(x):\n    return x\n\n\ndef g(y):\n    return y\n"
    error = fails(code, "f32[2]", "function_not_found", function="h")
    assert "`h`" in error["message"]
    assert "f, g" in error["hint"]


def test_code_without_functions_is_function_not_found(fails):
    error = fails("X = 1\n", "f32[2]", "function_not_found", function=None)
    assert "def" in error["hint"]


def test_exception_at_module_level_is_an_import_error_at_its_line(fails):
    code = (
        "import jax\n\nSIZE = 3\nraise RuntimeError('setup failed')\n\n\ndef f(x):\n    return x\n"
    )
    error = fails(code, "f32[2]", "import_error")
    assert error["line"] == line_of(code, "raise RuntimeError")
    assert "setup failed" in error["message"]


def test_missing_import_is_an_import_error(fails):
    code = "import jitscope_no_such_module\n\n\ndef f(x):\n    return x\n"
    error = fails(code, "f32[2]", "import_error")
    assert error["line"] == 1
    assert "jitscope_no_such_module" in error["message"]


# --------------------------------------------------------------------------- the args spec


def test_spec_error_quotes_the_bad_item(fails):
    code = "def f(x, y):\n    return x + y\n"
    error = fails(code, "f32[2], f33[4]", "spec_error")
    assert "'f33[4]'" in error["message"]
    assert error["message"].startswith("y, item 2 'f33[4]': unknown dtype 'f33'")  # its name
    assert error["stage"] == "spec"


def test_spec_error_for_an_unknown_name_quotes_the_name(fails):
    code = "def f(x):\n    return x\n"
    error = fails(code, "weights", "spec_error")
    assert "'weights'" in error["message"]


def test_static_name_that_is_not_a_parameter_is_a_spec_error(fails):
    code = "def f(x, n):\n    return x * n\n"
    error = fails(code, "f32[2], 3", "spec_error", static=["m"])
    assert "`m`" in error["message"]
    assert "x, n" in error["hint"]


def test_unhashable_static_value_is_a_static_arg_error(fails):
    code = "def f(x, sizes):\n    return x * len(sizes)\n"
    error = fails(code, "f32[2], [1, 2]", "static_arg", static=["sizes"])
    assert "hashable" in error["message"]
    assert "[1, 2]" in error["message"]
    assert not error["message"].endswith(":")
    assert "tuple" in error["hint"]


def test_a_function_in_a_dynamic_argument_is_a_static_arg_error_naming_its_leaf(fails):
    code = (
        "import jax\nimport jax.numpy as jnp\n\n"
        "params = {'w': jnp.ones(3), 'act': jax.nn.relu}\n\n\n"
        "def f(params, x):\n    return params['act'](x * params['w'])\n"
    )
    error = fails(code, "params, f32[3]", "static_arg")
    assert "`params['act']` is a custom_jvp, not an array" in error["message"]
    assert "static" in error["hint"] and "eqx.filter_jit" in error["hint"]


def test_a_non_array_leaf_is_named_whatever_the_wrapper_repr_spans():
    """eqx.filter_jit's repr spans lines: the headline is not cut after its first."""
    message = (
        "Error interpreting argument to _JitWrapper(\n  fn='loss', donate_first=False\n) as "
        "an abstract array. The problematic value is of type <class 'jax._src.custom_"
        "derivatives.custom_jvp'> and was passed to the function at path model.activation.\n"
        "This typically means that a jit-wrapped function was called with a non-array argument"
    )
    info = classify(TypeError(message), "trace")
    assert info.kind == ErrorKind.STATIC_ARG
    assert info.message.startswith("`model.activation` is a custom_jvp, not an array")
    assert "`model`" in info.hint


# --------------------------------------------------------------------------- tracing


def test_python_if_on_a_tracer_is_control_flow(fails):
    code = (
        "import jax.numpy as jnp\n\n\ndef f(x):\n    if x > 0:\n        return x\n    return -x\n"
    )
    error = fails(code, "f32[]", "control_flow")
    assert error["line"] == line_of(code, "if x > 0")
    assert "lax.cond" in error["hint"] and "jnp.where" in error["hint"]
    assert error["stage"] == "trace"


def test_arange_of_a_traced_length_says_mark_it_static(fails):
    code = "import jax.numpy as jnp\n\n\ndef f(x, n):\n    return x + jnp.arange(n)\n"
    error = fails(code, "f32[4], 4", "value_dependent_shape")
    assert error["line"] == line_of(code, "jnp.arange(n)")
    assert "mark `n` static" in error["hint"]


def test_nonzero_without_size_says_pass_size(fails):
    code = "import jax.numpy as jnp\n\n\ndef f(x):\n    (idx,) = jnp.nonzero(x)\n    return idx\n"
    error = fails(code, "f32[8]", "value_dependent_shape")
    assert error["line"] == line_of(code, "jnp.nonzero")
    assert "size=" in error["hint"]


def test_slicing_by_a_traced_bound_suggests_dynamic_slice_or_a_mask(fails):
    code = "def f(x, n):\n    head = x[:n]\n    return head\n"
    error = fails(code, "f32[8], 3", "value_dependent_shape")
    assert error["line"] == line_of(code, "x[:n]")
    assert "dynamic_slice" in error["hint"]
    assert "pad" in error["hint"] and "mask" in error["hint"]


def test_boolean_mask_indexing_is_a_value_dependent_shape(fails):
    code = "def f(x):\n    return x[x > 0]\n"
    error = fails(code, "f32[8]", "value_dependent_shape")
    assert error["line"] == 2
    assert "jnp.where" in error["hint"]


def test_dot_of_incompatible_shapes_is_a_shape_mismatch(fails):
    code = "import jax.numpy as jnp\n\n\ndef f(x, y):\n    return jnp.dot(x, y)\n"
    error = fails(code, "f32[3,4], f32[5,6]", "shape_mismatch")
    assert error["line"] == line_of(code, "jnp.dot")
    assert "(4,)" in error["message"] and "(5,)" in error["message"]
    assert "shapes" in error["hint"]


def test_exception_raised_by_the_function_is_a_user_exception_at_the_raise(fails):
    code = (
        "def f(x):\n"
        "    y = x * 2\n"
        "    if y.ndim != 2:\n"
        "        raise ValueError('expected a matrix')\n"
        "    return y\n"
    )
    error = fails(code, "f32[3]", "user_exception")
    assert error["line"] == line_of(code, "raise ValueError")
    assert "ValueError" in error["message"] and "expected a matrix" in error["message"]


def test_error_in_a_helper_points_at_the_deepest_user_line(fails):
    code = "def helper(v):\n    return v.no_such_method()\n\n\ndef f(x):\n    return helper(x)\n"
    error = fails(code, "f32[3]", "user_exception")
    assert error["line"] == line_of(code, "no_such_method")


# --------------------------------------------------------------------------- compiling and running


def test_unknown_custom_call_fails_to_compile(fails):
    code = (
        "import jax\n\n\n"
        "def f(x):\n"
        "    call = jax.ffi.ffi_call('jitscope_missing', jax.ShapeDtypeStruct(x.shape, x.dtype))\n"
        "    return call(x)\n"
    )
    error = fails(code, "f32[4]", "compile_error")
    assert error["stage"] == "compile"
    assert "jitscope_missing" in error["message"]


def test_exception_inside_a_callback_is_a_runtime_error_naming_it(fails):
    code = (
        "import jax\n\n\n"
        "def explode(v):\n"
        "    raise ValueError('callback exploded')\n\n\n"
        "def f(x):\n"
        "    return jax.pure_callback(explode, jax.ShapeDtypeStruct(x.shape, x.dtype), x)\n"
    )
    error = fails(code, "f32[4]", "runtime_error", runs=2)
    assert error["stage"] == "run"
    assert "callback exploded" in error["message"]
    assert "Traceback" not in error["message"]
    assert error["line"] == line_of(code, "raise ValueError")


def test_memory_precheck_refuses_to_run_but_keeps_the_compile_results(worker):
    code = "def f(x):\n    return x * 2.0\n"
    report = analyzed_json(worker, code=code, function="f", args="f32[100000,100000]", runs=1)
    error = check_error_contract(report, "memory")
    assert "runs=0" in error["hint"]
    assert report["jaxpr"]["eqn_count"] == 1
    assert report["compiled"]["kernel_count"] >= 1
    assert report["memory"]["argument_bytes"] == 100_000 * 100_000 * 4
    assert report["timings"]["compile_s"] > 0
    assert report["timings"]["run_median_s"] is None


def test_memory_precheck_uses_the_given_limit():
    report = analyze(lambda x: x + 1.0, "f32[1024,1024]", runs=1, memory_limit_bytes=1 << 20)
    check_error_contract(report.to_dict(), "memory")
    assert report.compiled is not None
    assert report.timings["run_median_s"] is None


# --------------------------------------------------------------------------- devices


def test_more_devices_than_the_process_has_is_device_unavailable():
    report = analyze(lambda x: x, "f32[8]", device="cpu:8", runs=0)
    error = check_error_contract(report.to_dict(), "device_unavailable")
    assert "cpu:8" in error["message"]
    assert "worker" in error["hint"]


def test_unknown_platform_is_device_unavailable():
    report = analyze(lambda x: x, "f32[8]", device="tpu", runs=0)
    check_error_contract(report.to_dict(), "device_unavailable")


# --------------------------------------------------------------------------- classify itself


def _documented_kinds() -> list[str]:
    """The kinds the guide's "Errors are results" section lists, in its order."""
    text = (REPO / "docs" / "guide.md").read_text(encoding="utf-8")
    section = text.split("## Errors are results", 1)[1].split("The kind is an enum", 1)[0]
    words = re.findall(r"`([a-z_]+)`", section)
    return [w for w in words if not keyword.iskeyword(w)]  # `if` is Python, not a kind


def _kinds_raised_in_viz() -> dict[str, str]:
    """Every error kind viz/ spells out where it builds an error: `ErrorKind.NAME`, or
    the string `ErrorInfo(...)` or `error_result(...)` is given; kind -> where."""
    members = {kind.name: kind.value for kind in ErrorKind}
    found = {}
    for path in sorted((REPO / "viz").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Attribute) and getattr(node.value, "id", "") == "ErrorKind":
                found[members.get(node.attr, f"ErrorKind.{node.attr}")] = where
            if not isinstance(node, ast.Call):
                continue
            called = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if called not in ("ErrorInfo", "error_result"):
                continue
            given = node.args[:1] + [k.value for k in node.keywords if k.arg == "kind"]
            for arg in given:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found[arg.value] = where
    return found


def test_the_error_kinds_are_the_ones_the_readme_documents():
    documented = _documented_kinds()
    assert len(documented) == len(set(documented)), documented
    assert set(KINDS) == set(documented)


def test_every_error_kind_viz_raises_is_a_known_kind():
    raised = _kinds_raised_in_viz()
    unknown = {kind: where for kind, where in raised.items() if kind not in KINDS}
    assert not unknown, unknown
    assert {"spec_error", "worker_crash", "timeout", "memory", "bad_request"} <= set(raised)


def test_classify_passes_an_already_classified_error_through():
    info = ErrorInfo("spec_error", "bad", "fix it", stage="spec")
    assert classify(UserCodeError(info), "trace") is info


def test_classify_of_a_plain_exception_is_a_user_exception_with_its_type():
    info = classify(KeyError("missing"), "trace")
    assert info.kind == "user_exception"
    assert info.message.startswith("KeyError")
    assert info.detail.startswith("KeyError")


def test_error_info_is_plain_data():
    data = ErrorInfo("memory", "too big", "shrink it", stage="run").to_dict()
    assert data == {
        "kind": "memory",
        "message": "too big",
        "hint": "shrink it",
        "line": None,
        "column": None,
        "stage": "run",
        "detail": "",
    }


def test_a_compile_xla_refuses_for_lack_of_memory_is_out_of_memory_with_its_fixes():
    import jax

    said = (
        "RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO "
        "temporaries (20.00G) exceeds available HBM (15.75G)."
    )
    error = classify(jax.errors.JaxRuntimeError(said), "compile")
    assert error.kind == ErrorKind.OUT_OF_MEMORY and error.stage == "compile"
    assert said in error.message
    for fix in ("donate", "jax.checkpoint", "smaller batch", "shard"):
        assert fix in error.hint, fix
    other = classify(jax.errors.JaxRuntimeError("INVALID_ARGUMENT: bad op"), "compile")
    assert other.kind == ErrorKind.COMPILE_ERROR
    ran = classify(jax.errors.JaxRuntimeError(said), "run")  # a run's: not the compile's
    assert ran.kind == ErrorKind.RUNTIME_ERROR


def test_a_check_that_fails_as_the_program_runs_is_named_by_its_message_with_its_fix():
    """equinox's error_if (diffrax's 'maximum number of solver steps', optimistix's and
    lineax's checks) raises through a callback, and its advice follows the exception:
    the headline was the callback's 'Traceback (most recent call last):'."""
    eqx = pytest.importorskip("equinox")
    import jax
    import jax.numpy as jnp

    def check(x):
        return eqx.error_if(x, x > 0, "x must\nbe negative")  # equinox's run over lines

    with pytest.raises(jax.errors.JaxRuntimeError) as raised:
        jax.jit(check)(jnp.float32(1.0)).block_until_ready()
    error = classify(raised.value, "run")
    assert error.kind == ErrorKind.RUNTIME_ERROR
    assert error.message.endswith("EquinoxRuntimeError: x must be negative"), error.message
    assert "Traceback" not in error.message
    assert "eqx.error_if" in error.hint and "args spec" in error.hint
    assert "out-of-memory" not in error.hint


def test_a_chained_exception_in_a_callback_is_named_by_the_last_one_raised():
    import jax

    said = (
        "INTERNAL: CpuCallback error calling callback: Traceback (most recent call last):\n"
        '  File "a.py", line 1, in f\n'
        "KeyError: 'x'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n"
        '  File "a.py", line 3, in f\n'
        "ValueError: boom\n"
    )
    error = classify(jax.errors.JaxRuntimeError(said), "run")
    assert error.message.endswith("callback: ValueError: boom"), error.message


def _allocate_op_by_op() -> None:
    import jax

    message = "RESOURCE_EXHAUSTED: Out of memory allocating 102400000000 bytes."
    raise jax.errors.JaxRuntimeError(message)  # XLA's words, op by op


def test_an_eager_run_out_of_memory_says_how_much_one_array_asked_for_and_where() -> None:
    try:
        _allocate_op_by_op()
    except Exception as exc:  # the exception a run without jit raised
        said = eager_failure(exc, __file__)
    line = _allocate_op_by_op.__code__.co_firstlineno + 4  # its raise
    assert said.startswith("eager run failed: out of memory (95.4 GiB for one array) at ")
    assert f"test_errors.py:{line}" in said and "the timings compare jit alone" in said
    assert "102400000000" not in said  # XLA's raw count of bytes, once in words


def test_any_other_eager_failure_keeps_its_exception() -> None:
    try:
        raise TypeError("jit-only code")
    except TypeError as exc:
        assert eager_failure(exc, None) == "eager run failed: TypeError: jit-only code"
