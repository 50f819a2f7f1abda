"""`python -m viz record`: the program runs as `python SCRIPT` would, and every compile
it made before it ended, however it ended, is in the recording."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow

STEP = """
import jax, jax.numpy as jnp

@jax.jit
def step(x):
    return jnp.sin(x) * 2
"""


def viz(*args: str, cwd: Path, stdin: str = "", env: dict[str, str] | None = None):
    """`python -m viz ARGS` as a user runs it, from `cwd`."""
    return subprocess.run(
        [sys.executable, "-m", "viz", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )


def record(
    tmp_path: Path,
    body: str,
    *extra: str,
    args: tuple[str, ...] = (),
    stdin: str = "",
    env: dict[str, str] | None = None,
):
    script = tmp_path / "prog" / "train.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(STEP + textwrap.dedent(body))
    out = tmp_path / "rec.json"
    done = viz(
        "record", "--json", str(out), *extra, "--", str(script), *args,
        cwd=tmp_path, stdin=stdin, env=env,
    )  # fmt: skip
    data = json.loads(out.read_text()) if out.exists() else None
    return done, data


def test_the_program_sees_its_own_argv_main_path_and_stdio(tmp_path):
    body = """
    import sys
    print("argv", sys.argv[1:], __name__, sys.path[0] == __file__.rsplit("/", 1)[0])
    print("read", sys.stdin.read().strip())
    print("to stderr", file=sys.stderr)
    for n in (3, 4):
        step(jnp.ones(n))
    """
    done, data = record(tmp_path, body, args=("--lr", "0.1"), stdin="hello")
    assert done.returncode == 0, done.stderr
    assert "argv ['--lr', '0.1'] __main__ True" in done.stdout
    assert "read hello" in done.stdout
    assert done.stderr.startswith("to stderr")
    assert data["program"]["exit_code"] == 0
    assert data["program"]["argv"][1:] == ["--lr", "0.1"]
    assert data["summary"]["compiles"] == 2
    assert data["compiles"][1]["reasons"][0]["kind"] == "shape"
    assert "step" in done.stderr and "x dim 0 took 2 values (3, 4)" in done.stderr
    assert "saved as recording #" in done.stderr


def test_the_program_runs_in_a_fork_of_record_and_its_frames_are_not_call_sites(tmp_path):
    """`record`'s own process, forked, runs the program (no second interpreter to start):
    the recording's start is imported already, and record's frames under the program's
    are no call site or stack of its compiles."""
    body = """
    import sys
    print("forked", "viz.recorder.cli.record" in sys.modules)
    step(jnp.ones(2))
    """
    done, data = record(tmp_path, body)
    assert done.returncode == 0, done.stderr
    assert "forked True" in done.stdout
    program = str(tmp_path / "prog" / "train.py")
    assert [line.split(":")[0] for line in data["compiles"][0]["stack"]] == [program]


def test_record_inside_a_process_with_jax_starts_a_fresh_interpreter(tmp_path, monkeypatch, capfd):
    """Called inside a process that holds JAX (and threads), `record` does not fork it: the
    program runs in a fresh interpreter, recorded all the same."""
    from viz.recorder.cli import record as record_command

    monkeypatch.setenv("JITSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    script = tmp_path / "train.py"
    script.write_text(
        STEP + 'import sys\nprint("forked", "viz.recorder.cli.record" in sys.modules)\n'
        "step(jnp.ones(3))\nsys.exit(5)\n"
    )
    out = tmp_path / "rec.json"
    status = record_command.main(["--no-history", "--json", str(out), "--", str(script)])
    data = json.loads(out.read_text())
    assert status == 5 and data["program"]["exit_code"] == 5
    assert "forked False" in capfd.readouterr().out
    assert data["summary"]["compiles"] == 1
    assert data["compiles"][0]["call_site"] == f"{script}:9"


def test_an_uncaught_exception_prints_as_python_does_and_exits_one(tmp_path):
    done, data = record(tmp_path, "step(jnp.ones(2))\nraise ValueError('bad batch')\n")
    assert done.returncode == 1
    assert "Traceback (most recent call last):" in done.stderr
    assert "ValueError: bad batch" in done.stderr
    assert "runpy" not in done.stderr and "viz/recorder" not in done.stderr
    assert data["program"]["exit_code"] == 1 and data["summary"]["compiles"] == 1


def test_sys_exit_three_exits_three(tmp_path):
    done, data = record(tmp_path, "step(jnp.ones(2))\nimport sys\nsys.exit(3)\n")
    assert done.returncode == 3
    assert data["program"]["exit_code"] == 3 and data["summary"]["compiles"] == 1


def test_a_program_killed_with_sigkill_keeps_every_compile_before_it(tmp_path):
    body = """
    import os, signal
    for n in (2, 3, 4):
        step(jnp.ones(n))
    os.kill(os.getpid(), signal.SIGKILL)
    step(jnp.ones(99))
    """
    done, data = record(tmp_path, body)
    assert done.returncode == 128 + 9
    assert data["program"]["signal"] == "SIGKILL"
    assert [c["signature"][0]["shape"] for c in data["compiles"]] == [[2], [3], [4]]


def test_os_exit_keeps_every_compile_before_it(tmp_path):
    done, data = record(tmp_path, "step(jnp.ones(5))\nimport os\nos._exit(4)\n", "--no-history")
    assert done.returncode == 4 and data["summary"]["compiles"] == 1
    assert "saved as" in done.stderr and "recording #" not in done.stderr


def test_compiles_from_two_threads_at_once(tmp_path):
    body = """
    import threading
    barrier = threading.Barrier(2)
    def work(base):
        barrier.wait()
        for k in range(3):
            step(jnp.ones(base + k))
    threads = [threading.Thread(target=work, args=(b,)) for b in (10, 20)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    """
    done, data = record(tmp_path, body)
    assert done.returncode == 0, done.stderr
    assert data["summary"]["compiles"] == 6
    assert len({c["thread"] for c in data["compiles"]}) == 2


def test_sharding_and_device_changes_are_named_on_eight_devices(tmp_path):
    body = """
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()), ("data",))
    x = jnp.ones((16, 4))
    step(jax.device_put(x, NamedSharding(mesh, P("data"))))
    step(jax.device_put(x, NamedSharding(mesh, P(None, None))))
    step(jax.device_put(x, jax.devices()[0]))
    step(jax.device_put(x, jax.devices()[1]))
    """
    flags = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    done, data = record(tmp_path, body, env=flags)
    assert done.returncode == 0, done.stderr
    first, second, _, on_device_1 = data["compiles"]
    assert first["signature"][0]["sharding"] == "P('data',) over mesh(data=8)"
    assert [r["kind"] for r in second["reasons"]] == ["sharding"]
    assert first["spec"] is None and "spread over 8 devices" in first["spec_reason"]
    assert [r["kind"] for r in on_device_1["reasons"]] == ["device"]


def test_a_module_runs_under_dash_m_as_pytest(tmp_path):
    tests = tmp_path / "suite"
    tests.mkdir()
    (tests / "test_model.py").write_text(
        STEP
        + textwrap.dedent("""
        def test_small():
            assert float(step(jnp.zeros(3)).sum()) == 0.0

        def test_large():
            assert step(jnp.zeros(30)).shape == (30,)
        """)
    )
    out = tmp_path / "rec.json"
    done = viz(
        "record",
        "--no-history",
        "--json",
        str(out),
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        str(tests),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    data = json.loads(out.read_text())
    assert data["summary"]["compiles"] == 2
    sites = {c["call_site"].rsplit(":", 1)[0] for c in data["compiles"]}
    assert sites == {str(tests / "test_model.py")}
    assert data["compiles"][1]["stack"][0].startswith(str(tests / "test_model.py"))


def test_a_failing_pytest_run_keeps_its_exit_status(tmp_path):
    (tmp_path / "test_fail.py").write_text("def test_no():\n    assert False\n")
    done = viz(
        "record",
        "--no-history",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        str(tmp_path / "test_fail.py"),
        cwd=tmp_path,
    )
    assert done.returncode == 1 and "1 failed" in done.stdout


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [([], "name a program"), (["--", "nope.py"], "no such file: nope.py")],
)
def test_misuse_exits_two(argv, complaint, tmp_path):
    done = viz("record", *argv, cwd=tmp_path)
    assert done.returncode == 2 and complaint in done.stderr
