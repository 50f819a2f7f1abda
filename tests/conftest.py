"""Shared fixtures for the engine tests: workers, samples and the report contract.

User source files written by the engine go to a temporary JITSCOPE_HOME, so the
tests never touch the user's ~/.cache/jitscope.
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.runtime.pages_manager import PagesManager

from viz.samples import Sample, list_samples
from viz.settings import Settings
from viz.worker import Worker
from viz.worker.protocol import Analyze

REPO = Path(__file__).resolve().parent.parent


@pytest.hookimpl(trylast=True)  # after the terminal reporter it writes to
def pytest_configure(config: pytest.Config) -> None:
    import progress

    progress.register(config)


# The jax CI tests against (constraints.txt): XLA's exact figures (a golden report, a
# program's peak) are that jax's, and another jax's XLA fuses and schedules otherwise.
TESTED_JAX = re.search(r"^jax==(\S+)", (REPO / "constraints.txt").read_text(), re.M)[1]


SLOW_SAMPLES = {"transformer_24"}

# DESIGN.md's report contract: every key, and every key of every section.
REPORT_KEYS = {
    "ok",
    "error",
    "device",
    "jax_version",
    "timings",
    "jaxpr",
    "stablehlo",
    "compiled",
    "cost",
    "memory",
    "graphs",
}
ERROR_KEYS = {"kind", "message", "hint", "line"}
SECTION_KEYS = {
    "timings": {
        "trace_s",
        "lower_s",
        "compile_s",
        "first_call_s",
        "run_median_s",
        "run_min_s",
        "runs",
        "eager_median_s",
    },
    "jaxpr": {"text", "eqn_count", "primitives"},
    "stablehlo": {"text", "op_count", "ops"},
    "compiled": {"text", "op_count", "ops", "fusion_count", "kernel_count"},
    "cost": {"flops", "bytes_accessed", "transcendentals"},
    "memory": {"argument_bytes", "output_bytes", "temp_bytes", "generated_code_bytes"},
}
GRAPH_IRS = ("jaxpr", "stablehlo", "compiled")
GRAPH_KEYS = {"total_nodes", "visible_nodes", "dot"}


def check_report_contract(report: dict[str, Any]) -> None:
    """Assert that a successful report has every DESIGN.md key and is plain JSON."""
    missing = REPORT_KEYS - set(report)
    assert not missing, f"report lacks {sorted(missing)}"
    assert report["ok"] is True, report.get("error")
    assert report["error"] is None
    for section, keys in SECTION_KEYS.items():
        assert isinstance(report[section], dict), section
        assert keys <= set(report[section]), (
            f"{section} lacks {sorted(keys - set(report[section]))}"
        )
    assert set(GRAPH_IRS) <= set(report["graphs"])
    for ir in GRAPH_IRS:
        graph = report["graphs"][ir]
        assert set(graph) >= GRAPH_KEYS, ir
        assert graph["dot"].lstrip().startswith("digraph"), ir
    json.dumps(report, allow_nan=False)  # plain JSON: no default=, no NaN


def analyzed_json(
    worker: Worker, runs: int = 0, timeout_s: float | None = None, **settings: Any
) -> dict[str, Any]:
    """`worker`'s answer to an Analyze of these settings, as the JSON it sent (the
    report's, its stdout beside it): what the error and report contracts check."""
    request = Analyze(Settings(**settings), runs=runs)
    return worker.ask(request, timeout_s=timeout_s).to_dict()


def check_error_contract(report: dict[str, Any], kind: str) -> dict[str, Any]:
    """Assert that `report` failed with `kind`, with a message and a hint; return the error."""
    assert set(report) >= REPORT_KEYS, f"report lacks {sorted(REPORT_KEYS - set(report))}"
    assert report["ok"] is False
    error = report["error"]
    assert set(error) >= ERROR_KEYS
    assert error["kind"] == kind, error
    assert error["message"].strip()
    assert error["hint"].strip()
    json.dumps(report)
    return error


@pytest.fixture(scope="session", autouse=True)
def jitscope_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """User sources go to a temporary home (inherited by every worker started later)."""
    home = tmp_path_factory.mktemp("jitscope-home")
    old = os.environ.get("JITSCOPE_HOME")
    os.environ["JITSCOPE_HOME"] = str(home)
    yield home
    if old is None:
        os.environ.pop("JITSCOPE_HOME", None)
    else:
        os.environ["JITSCOPE_HOME"] = old


@pytest.fixture
def worker_process() -> Iterator[None]:
    """This test's process taken for the worker's (`viz.overlap.own_process`): the IRs
    read beside XLA's compile, the collector and switch interval tuned."""
    import viz.overlap

    viz.overlap.own_process()
    yield
    viz.overlap.own_process(False)


@pytest.fixture(scope="module")
def worker() -> Iterator[Worker]:
    """One single-device worker per test module, closed at teardown."""
    w = Worker("cpu", timeout_s=120)
    yield w
    w.close()


@pytest.fixture(scope="module")
def worker8() -> Iterator[Worker]:
    """One worker with 8 simulated CPU devices per test module."""
    w = Worker("cpu:8", timeout_s=120)
    yield w
    w.close()


def sample_params(*, only: Callable[[Sample], bool] = lambda s: True) -> list[Any]:
    """Every sample as a pytest param (id = file stem), slow ones marked slow."""
    return [
        pytest.param(s, id=s.name, marks=[pytest.mark.slow] if s.name in SLOW_SAMPLES else [])
        for s in list_samples()
        if only(s)
    ]


def function_lines(code: str, name: str) -> range:
    """The lines of the top-level function `name` in `code` (def line to last line)."""
    for node in ast.parse(code).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            assert node.end_lineno is not None
            return range(node.lineno, node.end_lineno + 1)
    raise LookupError(name)


def line_of(code: str, marker: str) -> int:
    """The 1-based number of the only line of `code` that contains `marker`."""
    found = [i for i, text in enumerate(code.splitlines(), 1) if marker in text]
    assert len(found) == 1, (marker, found)
    return found[0]


# -- AppTest: the Streamlit pages headless (tests/test_app*.py use these) --------
@pytest.fixture
def navigation_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """AppTest sets Streamlit's legacy pages/ flag again before every run, where a server
    sets it once per start; `ui.leave_legacy_pages` then reruns, and a rerun drops the
    click that started the run. Clear the flag as a started server's second run sees it
    (tests marked `legacy_pages` keep Streamlit's own behaviour)."""
    if request.node.get_closest_marker("legacy_pages"):
        return
    init = PagesManager.__init__

    def init_then_clear(self: PagesManager, *args: object, **kwargs: object) -> None:
        init(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", init_then_clear)


@pytest.fixture
def plain_editor(monkeypatch: pytest.MonkeyPatch) -> None:
    """AppTest cannot type into a component: the editor's text_area fallback, same key."""
    monkeypatch.setenv("JITSCOPE_EDITOR", "plain")


@pytest.fixture(scope="session")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """examples/notebook.ipynb run top to bottom by ipykernel, as Jupyter would."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(REPO / "examples" / "notebook.ipynb", as_version=4)
    folder = tmp_path_factory.mktemp("notebook")
    nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": folder}}
    ).execute()
    return notebook
