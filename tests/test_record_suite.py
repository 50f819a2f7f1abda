"""`python -m viz record -- -m pytest tests/` on a realistic suite: jit under grad, vmap,
jacfwd and `functools.partial`, x64 switches and dtype sweeps. The recorder's count
equals JAX's own count of backend compiles in the same process, it describes every
compile, and it names wrapped functions by the user's function and where the jit was
made."""

from __future__ import annotations

import json
import textwrap

import pytest
from test_record_cli import viz

pytestmark = pytest.mark.slow

# Counts JAX's own backend-compile events beside the recorder, in the same process.
CONFTEST = """
import atexit, os
import jax

compiles = [0]

def _on(event, duration, **kwargs):
    if event == "/jax/core/compile/backend_compile_duration":
        compiles[0] += 1

jax.monitoring.register_event_duration_secs_listener(_on)
atexit.register(lambda: open(os.environ["JAX_COUNT_OUT"], "w").write(str(compiles[0])))
"""

NUMERICS = """
import jax, jax.numpy as jnp

def safe_norm(x, min_norm, ord=None):
    norm = jnp.linalg.norm(x, ord=ord, keepdims=True)
    return jnp.where(norm <= min_norm, min_norm, norm)

def loss(w, x, y):
    return jnp.mean((x @ w - y) ** 2)

@jax.jit
def inner(x):
    return jnp.sin(x) * 2

def outer(x):
    return inner(x).sum()
"""

TESTS = """
import functools
import jax, jax.numpy as jnp
import pytest
from numerics import safe_norm, loss, inner, outer

@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("n", [3, 5])
def test_safe_norm_jacobian(dtype, n):
    x = jnp.ones(n, dtype)
    jacobian = jax.jit(jax.jacfwd(functools.partial(safe_norm, min_norm=0.1)))(x)
    assert jacobian.shape == (1, n)

def test_loss_gradients():
    w, x, y = jnp.ones((4, 2)), jnp.ones((8, 4)), jnp.ones((8, 2))
    assert jax.jit(jax.grad(loss))(w, x, y).shape == w.shape
    jax.jit(jax.value_and_grad(loss))(w, x, y)

def test_vmap_of_partial():
    f = jax.jit(jax.vmap(functools.partial(safe_norm, min_norm=0.0)))
    assert f(jnp.ones((4, 3))).shape == (4, 1)

def test_inner_jit_under_transformations():
    assert jax.grad(outer)(jnp.ones(3)).shape == (3,)
    assert jax.vmap(outer)(jnp.ones((2, 3))).shape == (2,)
    assert jax.jacrev(outer)(jnp.ones(3)).shape == (3,)
    assert jax.jit(jax.grad(outer))(jnp.ones(4)).shape == (4,)

@pytest.mark.parametrize("x64", [False, True])
def test_x64_switch(x64):
    with jax.enable_x64(x64):
        assert jax.jit(jnp.sum)(jnp.ones(3)) == 3

def test_checkpoint_and_custom_jvp():
    assert jax.jit(jax.grad(jax.checkpoint(lambda x: jnp.sin(x).sum())))(jnp.ones(3)).shape == (3,)

    @jax.custom_jvp
    def softplus(x):
        return jnp.log1p(jnp.exp(x))

    softplus.defjvp(lambda p, t: (softplus(p[0]), t[0] * jax.nn.sigmoid(p[0])))
    assert jax.jit(jax.grad(softplus))(1.0) > 0

def test_calling_convention():
    add = jax.jit(lambda x, y: x + y)
    add(1.0, jnp.ones(2))
    add(1, y=jnp.ones(2))
"""


def line_of(snippet: str) -> int:
    """The line of test_numerics.py that holds `snippet`."""
    lines = textwrap.dedent(TESTS).splitlines()
    return next(i for i, line in enumerate(lines, 1) if snippet in line)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, int, str]:
    """One recorded pytest run: (Recording JSON, JAX's count, the summary on stderr)."""
    root = tmp_path_factory.mktemp("suite")
    tests = root / "tests"
    tests.mkdir()
    for name, text in (("conftest.py", CONFTEST), ("numerics.py", NUMERICS)):
        (tests / name).write_text(textwrap.dedent(text))
    (tests / "test_numerics.py").write_text(textwrap.dedent(TESTS))
    out, count = root / "rec.json", root / "count"
    done = viz(
        "record", "--json", str(out), "--no-history",
        "--", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/",
        cwd=root, env={"JAX_COUNT_OUT": str(count)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "13 passed" in done.stdout
    return json.loads(out.read_text()), int(count.read_text()), done.stderr


def test_compiles_listed_plus_op_by_op_equal_jax_own_count(suite):
    data, jax_count, _ = suite
    summary = data["summary"]
    assert summary["compiles"] + summary["eager_compiles"] == jax_count
    assert summary["compiles"] >= 20


def test_every_compile_is_described_even_under_transformations(suite):
    data, _, stderr = suite
    assert data["summary"]["recorder_errors"] == 0 and data["summary"]["errors"] == []
    assert "failed to describe" not in stderr
    inner = [c for c in data["compiles"] if c["function"] == "inner"]
    assert {c["transform"] for c in inner} >= {"linearize", "transpose", "vmap"}
    assert all(c["defined_at"].endswith("numerics.py:11") for c in inner)
    assert all(c["signature"] for c in inner)  # abstract shapes and dtypes, read
    batched = next(c for c in inner if c["transform"] == "vmap")
    assert batched["signature"][0]["shape"] == [2, 3]  # the batch vmap compiled for


def test_a_wrapped_jit_made_in_a_loop_names_the_user_function_and_where(suite):
    data, _, stderr = suite
    norms = [c for c in data["compiles"] if c["function"] == "safe_norm"]
    assert all(c["defined_at"].endswith("tests/numerics.py:4") for c in norms)
    jacobians = [c for c in norms if c["wraps"] == ["jacfwd", "partial"]]
    assert len(jacobians) == 6
    made = f"test_numerics.py:{line_of('jax.jit(jax.jacfwd(')}"
    assert {c["created_at"].rsplit("/", 1)[1] for c in jacobians} == {made}
    advice = next(f["advice"] for f in data["functions"] if f["name"] == "safe_norm")
    assert advice.splitlines() == [  # a line per kind of recompile, the commonest first
        f"a new jit(jacfwd(partial(safe_norm))) is made on each call at tests/{made} "
        "→ make it once, outside the test or loop",
        "dtype of x took 3 values (f32, bf16, f16) → cast once where data enters, e.g. "
        "x.astype(jnp.float32)",
        "x took 3 shapes ([3], [5], [4,3]) → pass it with the same number of dimensions every call",
    ]
    assert "defined at ?" not in stderr and " ?\n" not in stderr
    grads = {tuple(c["wraps"]) for c in data["compiles"] if c["function"] == "loss"}
    assert grads == {("grad",), ("value_and_grad",)}


def test_positional_then_keyword_is_a_calling_convention_reason(suite):
    data, _, _ = suite
    first, second = [
        c for c in data["compiles"] if c["function"] == "<lambda>" and c["wraps"] == []
    ]
    assert second["call_site"].endswith(f":{line_of('add(1, y=')}")
    reasons = {(r["arg"], r["kind"]): r for r in second["reasons"]}
    convention = reasons[("(arguments)", "pytree")]
    assert (convention["before"], convention["after"]) == ("(x, y)", "(x, y=…)")
    assert ("x", "dtype") in reasons
    assert first["function"] == second["function"] == "<lambda>"


def test_a_jit_of_a_jax_function_made_in_user_code_is_listed(suite):
    data, _, _ = suite
    sums = [c for c in data["compiles"] if c["function"] == "sum"]
    assert len(sums) == 2 and not any(c["eager"] for c in sums)
    assert [r["arg"] for r in sums[1]["reasons"]] == ["a", "jax_enable_x64"]
