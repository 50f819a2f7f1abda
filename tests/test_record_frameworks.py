"""`jitscope record` on programs written with the frameworks most JAX code goes through:
equinox (and diffrax on top of it), haiku, flax linen and nnx. A compile is named by the
user's function and parameters, not the framework's (`equinox/_jit.py:43`,
`dynamic_nodonate['first'][2]`, `args[1]`); a closure made anew on every call is named with
its line; no reason or advice holds an address; nothing is guessed to be evicted; and the
count equals JAX's own count of backend compiles in the same process."""

from __future__ import annotations

import importlib.util
import json
import re
import textwrap
from pathlib import Path

import pytest
from test_record_cli import viz

pytestmark = pytest.mark.slow

# JAX's own count of backend compiles, kept by the program beside the recorder.
COUNTER = """
import atexit, os
import jax

_compiles = [0]


def _count(event, duration, **kwargs):
    _compiles[0] += event == "/jax/core/compile/backend_compile_duration"


jax.monitoring.register_event_duration_secs_listener(_count)
atexit.register(lambda: open(os.environ["JAX_COUNT_OUT"], "w").write(str(_compiles[0])))
"""

EQUINOX = """
from typing import Callable

import diffrax
import equinox as eqx
import jax.numpy as jnp


def solve(y0, rate):
    term = diffrax.ODETerm(lambda t, y, args: -rate * y)  # a new closure on every call
    return diffrax.diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 0.1, y0)


class Scale(eqx.Module):
    w: jax.Array
    act: Callable = eqx.field(static=True)

    def __call__(self, x):
        return self.act(self.w * x)


def loss(model, x):
    return jnp.sum(model(x) ** 2)


for rate in (1.0, 2.0, 3.0):
    solve(jnp.ones(3), rate)
grads = eqx.filter_jit(eqx.filter_grad(loss))
for act in (jnp.tanh, jnp.sin):
    grads(Scale(jnp.ones(3), act), jnp.ones(3))
jax.vmap(lambda y0: solve(y0, 1.0))(jnp.ones((4, 3)))
"""

# diffrax's documented use: a vector field defined once, its `args` a Python float
DIFFRAX_ARGS = """
import diffrax


def vector_field(t, y, args):
    return -args * y


def solve(y0, rate):
    term = diffrax.ODETerm(vector_field)
    return diffrax.diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 0.1, y0, args=rate)


for rate in (1.0, 2.0, jax.numpy.asarray(3.0)):  # two Python floats, then an array
    solve(jax.numpy.ones(3), rate)
"""

HAIKU = """
import haiku as hk
import jax.numpy as jnp


def forward(x):
    return hk.nets.MLP([8, 2])(x)


model = hk.transform(forward)
params = model.init(jax.random.key(0), jnp.ones((2, 4)))
apply = jax.jit(model.apply)
for batch in (2, 3):
    apply(params, None, jnp.ones((batch, 4)))
jax.jit(hk.without_apply_rng(hk.transform(forward)).apply)(params, jnp.ones((2, 4)))


def predict(x):
    def inner(x):  # a new closure, and a new jit, on every call
        return hk.nets.MLP([8, 2])(x)

    return jax.jit(hk.transform(inner).apply)(params, None, x)


for _ in range(2):
    predict(jnp.ones((2, 4)))
"""

FLAX = """
import flax.linen as nn
import jax.numpy as jnp
from flax import nnx


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2)(nn.relu(nn.Dense(8)(x)))


model = MLP()
variables = model.init(jax.random.key(0), jnp.ones((2, 4)))
apply = jax.jit(model.apply)
for batch in (2, 3):
    apply(variables, jnp.ones((batch, 4)))


class Linear(nnx.Module):
    def __init__(self, rngs, din=4):
        self.layer = nnx.Linear(din, 2, rngs=rngs)
        self.drop = nnx.Dropout(0.5, rngs=rngs)

    def __call__(self, x):
        return self.drop(self.layer(x))


@nnx.jit
def predict(model, x):
    return model(x)


linear = Linear(nnx.Rngs(0))
for batch in (2, 3):
    predict(linear, jnp.ones((batch, 4)))
linear.eval()  # the dropout turns deterministic: a static attribute
predict(linear, jnp.ones((3, 4)))
predict(Linear(nnx.Rngs(0), din=8), jnp.ones((3, 8)))
"""

ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


def needs(*modules: str) -> pytest.MarkDecorator:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(
        bool(missing),
        reason=f"{', '.join(missing)} not installed (requirements-dev.txt pins the frameworks)",
    )


def line_of(program: str, snippet: str) -> int:
    """The line of model.py that holds `snippet`."""
    lines = (COUNTER + textwrap.dedent(program)).splitlines()
    return next(i for i, line in enumerate(lines, 1) if snippet in line)


def record(tmp_path: Path, program: str) -> tuple[dict, int, str]:
    """model.py recorded from another folder: (Recording JSON, JAX's count, stderr)."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "model.py").write_text(COUNTER + textwrap.dedent(program))
    out, count = tmp_path / "rec.json", tmp_path / "count"
    done = viz(
        "record", "--json", str(out), "--no-history", "--", "proj/model.py",
        cwd=tmp_path, env={"JAX_COUNT_OUT": str(count)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text()), int(count.read_text()), done.stderr


def of(data: dict, function: str) -> list[dict]:
    return [c for c in data["compiles"] if c["function"] == function]


def check_parity_and_no_guess(data: dict, jax_count: int) -> None:
    """Every compile counted as JAX counts it; no address, no guessed eviction, nothing
    left unexplained, in any reason or advice."""
    summary = data["summary"]
    assert summary["compiles"] + summary["eager_compiles"] == jax_count
    assert summary["recorder_errors"] == 0, summary["errors"]
    reasons = [r for c in data["compiles"] for r in c["reasons"]]
    said = json.dumps(reasons) + json.dumps([f["advice"] for f in data["functions"]])
    assert not ADDRESS.search(said), ADDRESS.search(said)
    assert "evicted" not in said and "no difference found" not in said
    leaves = json.dumps([c["signature"] for c in data["compiles"]])
    assert not ADDRESS.search(leaves)


@pytest.fixture(scope="module")
def equinox_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, int, str]:
    return record(tmp_path_factory.mktemp("equinox"), EQUINOX)


@needs("equinox", "diffrax")
def test_diffrax_is_named_by_diffeqsolve_and_the_users_parameters(equinox_run):
    data, jax_count, _ = equinox_run
    check_parity_and_no_guess(data, jax_count)
    solves = of(data, "diffeqsolve")
    assert len(solves) == 4  # three rates, each a new term, and once under vmap
    for compile in solves:
        assert re.search(r"diffrax/_integrate\.py:\d+$", compile["defined_at"])
        assert compile["wraps"] == ["filter_jit"]
        assert "diffrax/_integrate.py:" in compile["created_at"]  # where filter_jit was applied
        assert compile["call_site"].endswith(f"model.py:{line_of(EQUINOX, 'return diffrax.')}")
        names = {leaf["arg"] for leaf in compile["signature"]}
        assert {"terms.vector_field", "t0", "t1", "dt0", "y0"} <= names
        assert not [n for n in names if n.startswith(("dynamic_", "static"))]


@needs("equinox", "diffrax")
def test_a_new_closure_per_call_is_named_with_its_line(equinox_run):
    data, _, stderr = equinox_run
    line = line_of(EQUINOX, "diffrax.ODETerm(lambda")
    closure = f"function `solve.<locals>.<lambda>` (proj/model.py:{line})"
    second = of(data, "diffeqsolve")[1]
    assert [(r["arg"], r["kind"], r["before"], r["after"]) for r in second["reasons"]] == [
        ("terms.vector_field", "static_value", closure, f"a new {closure}")
    ]
    advice = next(f["advice"] for f in data["functions"] if f["name"] == "diffeqsolve")
    new_closure, *others = advice.splitlines()  # then the shapes', the vmap's
    assert new_closure == (  # the lambda reads solve's `rate`: moved out alone, it cannot
        f"`terms.vector_field`: a new {closure} on every call → it reads `rate` of `solve`: "
        "define it once, outside `solve`, taking `rate` as an argument, and pass "
        "jax.tree_util.Partial(f, rate), which jit compares by its values, not its identity"
    )
    assert others[0].startswith("y0 took 2 shapes ([3], [4,3])")
    assert all(f"↳ {line}" in stderr for line in advice.splitlines())


@needs("equinox", "diffrax")
def test_under_vmap_the_batched_argument_keeps_its_name(equinox_run):
    data, _, _ = equinox_run
    (batched,) = [c for c in of(data, "diffeqsolve") if c["transform"] == "vmap"]
    y0 = next(leaf for leaf in batched["signature"] if leaf["arg"] == "y0")
    assert y0["shape"] == [4, 3]  # the batch vmap compiled for, under the user's name


@needs("equinox")
def test_filter_grad_is_a_layer_and_a_static_field_is_named_by_its_path(equinox_run):
    data, _, _ = equinox_run
    first, second = of(data, "loss")
    assert first["wraps"] == ["filter_jit", "filter_grad"]
    assert first["defined_at"].endswith(f"model.py:{line_of(EQUINOX, 'def loss(')}")
    assert first["created_at"].endswith(f"model.py:{line_of(EQUINOX, 'grads = eqx.')}")
    (reason,) = second["reasons"]
    assert (reason["arg"], reason["kind"]) == ("model.act", "static_value")
    assert reason["before"].startswith("function `tanh` (")
    assert reason["after"].startswith("function `sin` (")


@needs("equinox", "diffrax")
def test_a_python_number_that_filter_jit_holds_static_is_told_to_be_an_array(tmp_path):
    """diffeqsolve's filter_jit is made as diffrax is imported: no call of the user's led
    there (its 'from' read the `import diffrax` line), and a new `args` value is the
    user's data, not a jit wrapper diffrax builds ('diffrax builds a new jit wrapper for
    each call: … it is not in your code' read there)."""
    data, jax_count, stderr = record(tmp_path, DIFFRAX_ARGS)
    check_parity_and_no_guess(data, jax_count)
    first, second, third = of(data, "diffeqsolve")
    assert [c["called_from"] for c in (first, second, third)] == [None] * 3
    assert "diffrax/_integrate.py:" in second["created_at"]
    assert second["reasons"] == [
        {"arg": "args", "kind": "static_value", "before": "1.0", "after": "2.0"}
    ]
    advice = next(f["advice"] for f in data["functions"] if f["name"] == "diffeqsolve")
    assert advice == (
        "static args took 2 values (1.0, 2.0) → equinox's filter_jit holds a Python number "
        "static, as it does all that is not an array: pass it as an array, "
        "jnp.asarray(value), and one compile serves every value"
    )
    assert "(from proj/model.py:" not in stderr


@pytest.fixture(scope="module")
def haiku_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, int, str]:
    return record(tmp_path_factory.mktemp("haiku"), HAIKU)


@needs("haiku")
def test_haiku_is_named_by_the_users_forward(haiku_run):
    data, jax_count, _ = haiku_run
    check_parity_and_no_guess(data, jax_count)
    first, second, plain = of(data, "forward")
    for compile in (first, second, plain):
        assert compile["defined_at"].endswith(f"model.py:{line_of(HAIKU, 'def forward(')}")
        assert not [leaf for leaf in compile["signature"] if leaf["arg"].startswith("args[")]
    assert first["wraps"] == ["haiku.transform"]
    assert first["created_at"].endswith(f"model.py:{line_of(HAIKU, 'apply = jax.jit(')}")
    assert [(r["arg"], r["kind"]) for r in second["reasons"]] == [("x", "shape")]
    assert plain["wraps"] == ["haiku.without_apply_rng", "haiku.transform"]


@needs("haiku")
def test_a_new_haiku_closure_per_call_is_named_with_its_line(haiku_run):
    data, _, _ = haiku_run
    made = f"proj/model.py:{line_of(HAIKU, 'return jax.jit(hk.transform(inner)')}"
    _, second = of(data, "inner")
    assert second["reasons"][0]["kind"] == "new_function"
    assert second["reasons"][0]["after"] == f"a new jit(haiku.transform(inner)), made at {made}"
    advice = next(f["advice"] for f in data["functions"] if f["name"] == "inner")
    assert advice.startswith(f"a new jit(haiku.transform(inner)) is made on each call at {made}")


@pytest.fixture(scope="module")
def flax_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, int, str]:
    return record(tmp_path_factory.mktemp("flax"), FLAX)


@needs("flax")
def test_flax_linen_apply_is_named_by_the_modules_call_and_its_parameters(flax_run):
    data, jax_count, _ = flax_run
    check_parity_and_no_guess(data, jax_count)
    first, second = of(data, "MLP.__call__")
    assert first["defined_at"].endswith(f"model.py:{line_of(FLAX, '@nn.compact')}")
    assert first["wraps"] == ["linen.apply"]
    names = [leaf["arg"] for leaf in first["signature"]]
    assert "x" in names and not [n for n in names if n.startswith("args[")]
    assert [(r["arg"], r["kind"]) for r in second["reasons"]] == [("x", "shape")]


@needs("flax")
def test_flax_nnx_jit_is_a_layer_around_the_users_function(flax_run):
    data, _, _ = flax_run
    first, second, _, _ = of(data, "predict")
    assert first["wraps"] == ["nnx.jit"]
    assert first["defined_at"].endswith(f"model.py:{line_of(FLAX, '@nnx.jit')}")
    assert first["created_at"].endswith(f"model.py:{line_of(FLAX, '@nnx.jit')}")
    assert [(r["arg"], r["kind"]) for r in second["reasons"]] == [("x", "shape")]


@needs("flax")
def test_nnx_variables_and_static_attributes_are_named_by_their_paths_in_the_module(flax_run):
    """nnx.jit hands JAX the variables without their paths and the modules' static
    attributes inside one graph definition: each reads by its path in the user's module."""
    data, _, _ = flax_run
    first, _, evaluated, wider = of(data, "predict")
    names = [leaf["arg"] for leaf in first["signature"]]
    assert {"model.layer.kernel", "model.layer.bias", "model.drop.deterministic"} <= set(names)
    assert not [n for n in names if "states" in n or re.search(r"model\[\d+\]", n)]
    said = [(r["arg"], r["kind"], r["before"], r["after"]) for r in evaluated["reasons"]]
    assert said[0] == ("model.drop.deterministic", "static_value", "False", "True")  # .eval()
    changed = {(r["arg"], r["kind"]) for r in wider["reasons"]}
    assert {("model.layer.kernel", "shape"), ("model.layer.in_features", "static_value")} <= changed
