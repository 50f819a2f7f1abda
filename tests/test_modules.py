"""The worker keeps the user's module (issue #52): a second analysis of unchanged code
does not run it again, and still sees what a fresh load would give. The keeper is
tested here in this process (`Modules`, on code that counts its own loads), then
through a worker."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from viz.settings import Settings
from viz.worker.modules import Modules
from viz.worker.protocol import Analyze

# each run of a module counts itself outside it (a module's own counter would be its state)
LOADS = "import builtins\nbuiltins.loads = getattr(builtins, 'loads', 0) + 1\n"


def loads() -> int:
    import builtins

    return getattr(builtins, "loads", 0)


def twice(code: str, name: str, call=lambda fn: fn()) -> tuple[list, int]:
    """What `name` returns on two requests for `code`, and how many times it was run."""
    modules, before = Modules(), loads()
    found = [call(modules.function(LOADS + code, name)[1]) for _ in range(2)]
    return found, loads() - before


def test_unchanged_code_is_run_once_and_each_request_gets_its_own_globals() -> None:
    code = "n = 0\ndef f():\n    global n\n    n += 1\n    return n\n"
    assert twice(code, "f") == ([1, 1], 1)  # the rebinding stayed in the first copy


def test_a_value_changed_in_place_loads_the_module_afresh() -> None:
    code = "seen = []\ndef f():\n    seen.append(1)\n    return len(seen)\n"
    assert twice(code, "f") == ([1, 1], 2)


@pytest.mark.parametrize(
    ("setup", "change"),
    [
        ("import numpy as np\nW = np.zeros(3)", "W[0] = 1"),
        ("import jax.numpy as jnp\nW = jnp.zeros(3)", "W.delete()"),  # as a donation does
        ("class C:\n    size = 1", "C.size = 2"),
        ("class C:\n    pass\nc = C()", "c.size = 2"),
        ("def g(x=[]):\n    return x", "g.__defaults__[0].append(1)"),
    ],
)
def test_any_change_to_the_modules_state_loads_it_afresh(setup: str, change: str) -> None:
    code = f"{setup}\ndef f():\n    {change}\n    return 0\n"
    assert twice(code, "f")[1] == 2


@pytest.mark.parametrize(
    "setup",
    [
        "import jax\n@jax.jit\ndef g(x):\n    return x",  # its cache is state
        "import functools\ndef g(x):\n    return x\nh = functools.partial(g, 1)",
        "it = iter(range(3))",  # a generator's state is not in attributes
        "import numpy as np\nrng = np.random.default_rng(0)",
        "import threading\nlock = threading.Lock()",
    ],
)
def test_what_cannot_be_told_is_loaded_afresh_every_time(setup: str) -> None:
    assert twice(f"{setup}\ndef f():\n    return 0\n", "f")[1] == 2


def test_jax_traces_each_requests_functions_afresh(capsys: pytest.CaptureFixture) -> None:
    """JAX caches a trace per function object (here the scan's body and `f` itself): a
    reuse that handed out the same objects would time a trace JAX skipped."""
    code = (
        "import jax\n"
        "def body(c, x):\n    print('traced')\n    return c + x, c\n"
        "def f(xs):\n    return jax.lax.scan(body, 0.0, xs)\n"
    )
    modules = Modules()
    for _ in range(2):
        jax.jit(modules.function(code, "f")[1]).trace(jnp.ones(3))
    assert modules.loads == 1 and capsys.readouterr().out.count("traced") == 2


def test_the_global_random_state_is_as_the_load_left_it() -> None:
    code = "import numpy as np\nnp.random.seed(0)\ndef f():\n    return float(np.random.rand())\n"
    found, runs = twice(code, "f")
    assert runs == 1 and found[0] == found[1]


def test_a_big_model_is_told_in_milliseconds() -> None:
    import time

    from viz.samples import get_sample
    from viz.source import load_module
    from viz.worker.modules import state_of

    module = load_module(get_sample("transformer_24").code)  # 24 layers of parameters
    start = time.perf_counter()
    state_of(vars(module))
    assert time.perf_counter() - start < 0.1


# -- through a worker -----------------------------------------------------------------
PRINTS = (
    'import jax.numpy as jnp\nprint("module run")\nW = jnp.ones(4)\ndef f(x):\n    return x * W\n'
)


def analyzed(worker, code: str, args: str):
    reply = worker.ask(Analyze(Settings(code=code, function="f", args=args), runs=1))
    assert reply.ok, reply.error
    return reply


def test_a_second_analysis_of_unchanged_code_does_not_run_the_module(worker) -> None:
    analyzed(worker, PRINTS + "# fresh\n", "f32[4]")
    again = analyzed(worker, PRINTS + "# fresh\n", "f32[2, 4]")  # other arguments
    assert again.stdout == "" and again.report.args == "f32[2, 4]"
    assert again.report.timings.compile_s > 0 and again.report.timings.runs == 1


def test_an_edited_module_runs_again(worker) -> None:
    analyzed(worker, PRINTS, "f32[4]")
    edited = analyzed(worker, PRINTS.replace("ones(4)", "ones((4,))"), "f32[4]")
    assert "module run" in edited.stdout
