"""Installed once, usable from any folder (#40), beside the user's own JAX (#49).

A temp venv gets jitscope two ways, the README's command 1 (`pip install -e .`) and a
wheel (`pip install` of what `pip wheel .` builds), then each is driven from a temp
folder far from the clone, as a user in their own project would: `jitscope record --
train.py`, `jitscope analyze sample:mlp` and `jitscope app`. To stay minutes short the
venv borrows this environment's dependencies through a path file (a path line adds
the folder only: this environment's own editable jitscope stays out), so what is
tested is jitscope's own packaging: its modules, package data and console script.

A third venv is a user's with the oldest supported JAX (`.ci/oldest-jax-venv`: that jax,
then command 1, which must leave it as it was); there `jitscope analyze sample:mlp`
reads every count and graph, and `jitscope record` records. .ci/run builds that venv
once (JITSCOPE_OLDEST_VENV) for this test and for its pass of the engine tests on it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO
from serving import free_port

pytestmark = pytest.mark.slow

HEADLESS = ("--server.headless", "true")
NOT_SOURCE = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache")

TRAIN = """\
import jax
import jax.numpy as jnp


@jax.jit
def step(x):
    return jnp.tanh(x @ x.T).sum()


for batch in (8, 16, 32):
    step(jnp.ones((batch, 64)))
"""


def _pip(venv: Path, *args: str, cwd: Path) -> None:
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture(scope="module", params=["editable", "wheel"])
def venv(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp(request.param)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    (venv / "lib" / "python3.11" / "site-packages" / "borrowed.pth").write_text(
        "\n".join(site.getsitepackages()) + "\n"
    )
    if request.param == "editable":
        _pip(venv, "-e", str(REPO), cwd=root)
    else:
        source = root / "source"  # setuptools builds in the source tree: not in the clone's
        shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
        built = root / "dist"
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", built, source],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        (wheel,) = built.glob("jitscope-*.whl")
        _pip(venv, str(wheel), cwd=root)
    return venv


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's own folder, with a training script that jits 3 batch sizes."""
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


def _run(venv: Path, project: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"  # an activated venv
    env["JITSCOPE_HOME"] = str(project / "home")
    return subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=300)


def test_viz_comes_from_the_install_not_from_the_clone(venv: Path, project: Path):
    proc = _run(venv, project, "python", "-c", "import viz.locations as l; print(l.APP_SCRIPT)")
    assert proc.returncode == 0, proc.stderr
    app_script = Path(proc.stdout.strip())
    assert app_script.is_file()
    if "wheel" in str(venv):
        assert REPO not in app_script.parents


def test_record_from_the_users_own_folder(venv: Path, project: Path):
    proc = _run(venv, project, "jitscope", "record", "--", "train.py")
    assert proc.returncode == 0, proc.stderr
    assert "3 compiles of 1 function" in proc.stderr
    assert "(jitscope app → Recordings)" in proc.stderr


def test_analyze_a_sample_by_name(venv: Path, project: Path):
    proc = _run(venv, project, "jitscope", "analyze", "sample:mlp", "--runs", "0")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("mlp(params, f32[32,784]) on cpu")


@pytest.fixture
def app(venv: Path, project: Path) -> Iterator[int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["JITSCOPE_HOME"] = str(project / "home")
    server = subprocess.Popen(
        [str(venv / "bin" / "jitscope"), "app", "--server.port", str(port), *HEADLESS],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_app_starts_from_anywhere_on_localhost_only(app: int):
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{app}/_stcore/health") as reply:
                assert reply.read() == b"ok"
                break
        except OSError:
            assert time.monotonic() < deadline, "jitscope app never answered its health check"
            time.sleep(0.5)
    if shutil.which("ss"):  # iproute2: the app's own config.toml, read from anywhere
        listening = subprocess.run(["ss", "-ltn"], capture_output=True, text=True).stdout
        assert f"127.0.0.1:{app} " in listening


# -- the oldest supported JAX, installed first by the user ---------------------------
OLDEST_JAX = re.search(r"^jax>=([\d.]+)", (REPO / "requirements.txt").read_text(), re.M)[1]


@pytest.fixture(scope="module")
def oldest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the oldest supported jax, then jitscope by command 1 (pip's cache
    and the registry serve the wheels)."""
    given = os.environ.get("JITSCOPE_OLDEST_VENV")
    venv = Path(given) if given else tmp_path_factory.mktemp("oldest") / "venv"
    if not (venv / "bin" / "jitscope").exists():
        build = [str(REPO / ".ci" / "oldest-jax-venv"), str(venv)]
        proc = subprocess.run(build, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
    return venv


def test_command_1_keeps_the_users_oldest_supported_jax(oldest: Path, project: Path):
    freeze = _run(oldest, project, "python", "-m", "pip", "freeze").stdout.split()
    assert f"jax=={OLDEST_JAX}" in freeze and f"jaxlib=={OLDEST_JAX}" in freeze


def test_the_oldest_jax_reads_every_count_and_graph(oldest: Path, project: Path):
    argv = ("jitscope", "analyze", "sample:mlp", "--runs", "0", "--no-history")
    proc = _run(oldest, project, *argv, "--json", "mlp.json")
    assert proc.returncode == 0, proc.stderr
    assert f"jax {OLDEST_JAX}" in proc.stdout and "None" not in proc.stdout, proc.stdout
    report = json.loads((project / "mlp.json").read_text())
    assert report["jax_version"] == OLDEST_JAX
    assert report["jaxpr"]["eqn_count"] == 15 and report["stablehlo"]["op_count"] == 20
    assert report["compiled"]["kernel_count"] > 0
    assert {ir: g["total_nodes"] > 0 for ir, g in report["graphs"].items()} == {
        "jaxpr": True,
        "stablehlo": True,
        "compiled": True,
    }
    assert report["fusion_map_coverage"]["stablehlo"] > 0.9
    assert not [w for w in report["warnings"] if "could not read" in w], report["warnings"]


def test_the_oldest_jax_records_a_program(oldest: Path, project: Path):
    proc = _run(oldest, project, "jitscope", "record", "--", "train.py")
    assert proc.returncode == 0, proc.stderr
    assert "3 compiles of 1 function" in proc.stderr
