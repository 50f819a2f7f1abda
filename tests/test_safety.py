"""Safe to demo: the listening address, demo mode, and workers that clean up after
themselves (issue #10).

Demo-mode tests use a canary file: the forged code (or spec expression) would create
it, so its absence proves nothing forged ran, while the samples still analyze.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import analyzed_json
from serving import free_port, start_server, stop
from streamlit import config as st_config
from streamlit.testing.v1 import AppTest

from viz import demo, source
from viz.program import Program
from viz.samples import get_sample, list_samples
from viz.settings import Settings
from viz.source import list_functions
from viz.spec import SpecError, parse_spec
from viz.worker import Worker, admit
from viz.worker.frames import MAX_FRAME, ProtocolError, decode, encode
from viz.worker.protocol import Analyze, CacheCall, Passes, Ping, Scaling

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.usefixtures("navigation_mode", "plain_editor")

APP = str(ROOT / "app.py")
TIMEOUT = 180
OK_CODE = "def f(x):\n    return x * 2.0\n"


def analyze(worker: Worker, code: str, **kwargs):
    kwargs.setdefault("function", "f")
    kwargs.setdefault("args", "f32[4]")
    return analyzed_json(worker, code=code, **kwargs)


# --------------------------------------------------------------------------- the address


def test_the_project_config_serves_on_localhost_only() -> None:
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["address"] == "127.0.0.1"


def test_a_first_run_on_a_desktop_does_not_stop_at_streamlits_email_prompt() -> None:
    from streamlit import config as streamlit_config

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["showEmailPrompt"] is False
    assert "server.showEmailPrompt" in streamlit_config._config_options_template  # no typo


def _listening_addresses(port: int) -> set[str]:
    """The local addresses with a socket listening on `port` (from /proc/net/tcp*)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, _, hex_port = local.partition(":")
                if state == "0A" and int(hex_port, 16) == port:
                    found.add(address)
    return found


@pytest.mark.slow
def test_streamlit_run_from_the_project_listens_on_loopback_only(tmp_path: Path) -> None:
    port = free_port()
    proc = start_server(port, tmp_path / "server.log", {"JITSCOPE_WORKERS": "1"})
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not _listening_addresses(port):
            time.sleep(0.3)
        addresses = _listening_addresses(port)
        assert addresses == {"0100007F"}, addresses  # 127.0.0.1, and nothing else
        assert "Network URL" not in (tmp_path / "server.log").read_text()
    finally:
        stop(proc)


@pytest.mark.parametrize(
    ("address", "exposed"),
    [
        ("127.0.0.1", False),
        ("localhost", False),
        ("::1", False),
        ("127.0.1.1", False),
        (None, True),
        ("", True),
        ("0.0.0.0", True),
        ("192.168.1.20", True),
        ("::", True),
    ],
)
def test_which_addresses_reach_beyond_this_machine(address, exposed) -> None:
    assert demo.exposed(address) is exposed


@pytest.fixture
def served_on(request) -> Iterator[None]:
    old = st_config.get_option("server.address")
    st_config.set_option("server.address", request.param)
    yield
    st_config.set_option("server.address", old)


def _sidebar_errors(at: AppTest) -> str:
    return "\n".join(e.value for e in at.sidebar.error)


@pytest.mark.parametrize("served_on", ["0.0.0.0"], indirect=True)
def test_the_sidebar_says_plainly_when_anyone_can_run_code(served_on, monkeypatch) -> None:
    monkeypatch.delenv("JITSCOPE_DEMO", raising=False)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception
    assert "Anyone who can reach this port can run code on this machine" in _sidebar_errors(at)


@pytest.mark.parametrize("served_on", ["127.0.0.1"], indirect=True)
def test_no_warning_on_localhost(served_on, monkeypatch) -> None:
    monkeypatch.delenv("JITSCOPE_DEMO", raising=False)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert "can run code" not in _sidebar_errors(at)


# --------------------------------------------------------------------------- demo mode


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    return tmp_path / "canary"


def evil_code(canary: Path) -> str:
    return (
        f"open({str(canary)!r}, 'w').write('module')\n\n\n"
        f"def f(x):\n    open({str(canary)!r}, 'w').write('function')\n    return x\n"
    )


@pytest.fixture
def demo_mode(monkeypatch) -> None:
    monkeypatch.setenv("JITSCOPE_DEMO", "1")


@pytest.fixture(scope="module")
def demo_worker() -> Iterator[Worker]:
    w = Worker("cpu", timeout_s=120, demo=True)
    yield w
    w.close()


def test_demo_refuses_custom_code(demo_worker, canary) -> None:
    result = analyze(demo_worker, evil_code(canary))
    assert result["error"]["kind"] == "demo_refused"
    assert "built-in samples" in result["error"]["message"]
    assert not canary.exists()


def test_demo_runs_the_named_sample_whatever_code_the_request_carries(demo_worker, canary):
    sample = get_sample("dot_plus_one")
    result = analyze(
        demo_worker,
        evil_code(canary),
        sample=sample.name,
        function=sample.function,
        args=sample.args,
    )
    assert result["ok"], result["error"]
    assert result["jaxpr"]["eqn_count"] == 2
    assert not canary.exists()


def test_the_child_enforces_demo_mode_even_if_the_server_did_not(monkeypatch, canary) -> None:
    monkeypatch.setattr(admit, "admit", lambda request: request)  # a server-side bug
    w = Worker("cpu", timeout_s=120, demo=True)
    try:
        result = analyze(
            w, evil_code(canary), sample="dot_plus_one", args="f32[256,512], f32[512,128]"
        )
        assert result["ok"], result["error"]
        assert result["jaxpr"]["eqn_count"] == 2
        refused = analyze(w, evil_code(canary))
        assert refused["error"]["kind"] == "demo_refused"
    finally:
        w.close()
    assert not canary.exists()


def test_demo_refuses_expression_specs(demo_worker, canary) -> None:
    attack = f"__import__('pathlib').Path({str(canary)!r}).touch()"
    for args in (attack, f"f32[256,512], {attack}", f"[{attack}]", f"f32[{attack}]"):
        result = analyze(demo_worker, "", sample="dot_plus_one", function="dot_plus_one", args=args)
        assert result["error"]["kind"] == "demo_refused", args
    assert not canary.exists()


def test_demo_specs_take_the_spec_language_and_the_samples_own_names(demo_worker) -> None:
    sample = get_sample("mlp")  # ARGS = "params, f32[32,784]": params is the sample's
    result = analyze(demo_worker, "", sample="mlp", function=sample.function, args=sample.args)
    assert result["ok"], result["error"]


def test_demo_bounds_runs_sizes_and_functions(demo_worker) -> None:
    base = {"sample": "dot_plus_one", "function": "dot_plus_one"}
    too_many = analyze(demo_worker, "", runs=demo.LIMITS.runs + 1, **base)
    assert too_many["error"]["kind"] == "demo_refused"
    not_a_function = analyze(demo_worker, "", sample="dot_plus_one", function="jnp")
    assert not_a_function["error"]["kind"] == "demo_refused"
    sweep = demo_worker.ask(
        Scaling(
            Settings(sample="unrolled_loop", function="step", args="f32[8,8]"),
            sizes=[demo.LIMITS.loop_n * 2],
        )
    )
    assert sweep.error.kind == "demo_refused"
    passes = demo_worker.ask(Passes(Settings(sample="dot_plus_one")))
    assert passes.error.kind == "demo_refused"


def test_demo_forbids_file_writing_compiler_options_and_the_disk_cache() -> None:
    with pytest.raises(admit.Refused):
        admit.check_compiler_options({"xla_dump_to": "/tmp/x"})
    admitted = admit.admit(
        CacheCall(Settings(sample="dot_plus_one", args="f32[2,2], f32[2,2]"), persistent_cache=True)
    )
    assert admitted.persistent_cache is False


@pytest.mark.parametrize("sample", list_samples(), ids=lambda s: s.name)
def test_every_sample_passes_the_demo_policy(sample) -> None:
    admitted = admit.admit(
        Analyze(Settings(sample=sample.name, function=sample.function, args=sample.args))
    )
    assert admitted.settings.code == sample.code


def test_parse_spec_without_expressions_takes_literals_and_defined_values_only() -> None:
    ns = {"params": {"w": 1}, "n": 4, "os": os, "helper": print}
    parsed = parse_spec("params, f32[n, 3], key(3), -2.0, {'a': f32[2]}", ns, expressions=False)
    assert parsed[1].shape == (4, 3)
    for item in ("os", "helper", "jnp.ones(3)", "__import__('os')", "f32[n + 1]", "params['w']"):
        with pytest.raises(SpecError, match="only the spec language"):
            parse_spec(item, ns, expressions=False)


def _open_demo(**session) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for key, value in session.items():
        at.session_state[key] = value
    return at


def _analyzed(at: AppTest) -> dict:
    return {m.label: m.value for m in at.metric}


def test_demo_app_shows_a_banner_and_no_code_widget(demo_mode) -> None:
    at = _open_demo().run()
    assert not at.exception, at.exception
    assert any("Demo mode" in i.value for i in at.sidebar.info)  # the result keeps its room
    assert not at.text_area  # nothing to type code into
    assert _analyzed(at)["jaxpr equations"] == "2"  # the default sample still analyzes


def test_demo_app_never_runs_code_forged_into_session_state(demo_mode, canary) -> None:
    forged = Program(Settings(code=evil_code(canary), function="f", args="f32[2]"))
    at = _open_demo(program=forged, code_w=evil_code(canary)).run()
    assert not at.exception, at.exception
    at.session_state["program"] = replace(
        forged, settings=replace(forged.settings, sample="dot_plus_one")
    )
    at.session_state["code_w"] = evil_code(canary)
    at.run()
    next(b for b in at.button if b.label == "Analyze").click().run()
    assert not at.exception, at.exception
    assert all(r.report.ok for r in at.session_state["results"])
    assert _analyzed(at)["jaxpr equations"] == "2"
    assert not canary.exists()


def test_demo_links_cannot_carry_code_or_expressions(demo_mode, canary) -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["code"] = evil_code(canary)
    at.query_params["function"] = "f"
    at.query_params["args"] = "f32[2]"
    at.run()
    assert not at.exception, at.exception
    assert not canary.exists()
    link = AppTest.from_file(APP, default_timeout=TIMEOUT)
    link.query_params["sample"] = "dot_plus_one"
    link.query_params["args"] = f"open({str(canary)!r}, 'w'), f32[512,128]"
    link.run()
    assert not link.exception, link.exception
    assert link.session_state["results"][-1].report.error.kind == "demo_refused"
    assert not canary.exists()


# --------------------------------------------------------------------------- the protocol


def test_frames_are_json_and_survive_nan_inf_bytes_tuples_and_numpy() -> None:
    import numpy as np

    message = {
        "nan": math.nan,
        "inf": -math.inf,
        "raw": b"\xffab",
        "shape": (2, 3),
        "np": np.float32(1.5),
        "arr": np.arange(3),
        "keys": {(1, 2): "t", 3: "i"},
    }
    back = decode(encode(message)[8:])
    assert math.isnan(back["nan"]) and back["inf"] == -math.inf
    assert back["raw"] == "\ufffdab" and back["shape"] == [2, 3]
    assert back["np"] == 1.5 and back["arr"] == [0, 1, 2]
    assert back["keys"] == {"(1, 2)": "t", "3": "i"}


def test_a_pickle_on_the_pipe_is_refused_not_loaded() -> None:
    import pickle

    with pytest.raises(ProtocolError):
        decode(pickle.dumps({"kind": "result"}))


def test_analysis_results_with_graph_models_survive_the_json_frames(demo_worker) -> None:
    from viz.ir.model import Graph

    sample = get_sample("mlp")
    report = analyze(demo_worker, "", sample="mlp", function=sample.function, args=sample.args)
    for ir, model in report["graph_models"].items():
        graph = Graph.from_dict(model)
        assert graph.to_dict()["nodes"] and all(isinstance(p, tuple) for p in graph.groups), ir
    assert report["stablehlo"]["op_count"] > 0


@pytest.fixture
def fresh_worker() -> Iterator[Worker]:
    w = Worker("cpu", timeout_s=20, demo=False)
    assert w.ask(Ping()).ok
    yield w
    w.close()


def test_garbage_written_to_the_protocol_pipe_fails_that_request_only(fresh_worker) -> None:
    code = (
        "import os\n\n\ndef f(x):\n"
        "    for fd in range(100, 110):\n"
        "        try:\n            os.write(fd, b'\\x00' * 7 + b'\\x05' + b'junk!')\n"
        "        except OSError:\n            pass\n"
        "    return x\n"
    )
    result = analyze(fresh_worker, code)
    assert result["error"]["kind"] == "worker_crash"
    assert analyze(fresh_worker, OK_CODE)["ok"]


def test_a_huge_frame_header_is_garbage_not_an_allocation(fresh_worker) -> None:
    header = (MAX_FRAME + 1).to_bytes(8, "big").hex()
    code = (
        "import os\n\n\ndef f(x):\n"
        "    for fd in range(100, 110):\n"
        f"        try:\n            os.write(fd, bytes.fromhex({header!r}))\n"
        "        except OSError:\n            pass\n"
        "    return x\n"
    )
    assert analyze(fresh_worker, code)["error"]["kind"] == "worker_crash"
    assert analyze(fresh_worker, OK_CODE)["ok"]


# --------------------------------------------------------------------------- file descriptors


def test_code_that_closes_its_stdin_and_stdout_breaks_nothing(fresh_worker) -> None:
    code = (
        "import os, sys\n\n\ndef f(x):\n"
        "    sys.stdin.close()\n    sys.stdout.close()\n    os.close(0)\n    os.close(1)\n"
        "    return x\n"
    )
    assert analyze(fresh_worker, code)["ok"]
    pid = fresh_worker.pid()
    assert analyze(fresh_worker, OK_CODE)["ok"]
    assert fresh_worker.pid() == pid  # the same child kept serving


def test_closing_the_workers_pipes_is_blamed_on_the_request_that_did_it(fresh_worker) -> None:
    code = "import os\n\n\ndef f(x):\n    os.closerange(3, 4096)\n    return x\n"
    guilty = analyze(fresh_worker, code)
    assert guilty["ok"] is False
    assert guilty["error"]["kind"] == "worker_crash"
    assert "pipes" in guilty["error"]["message"]
    innocent = analyze(fresh_worker, OK_CODE)
    assert innocent["ok"], innocent["error"]


def test_closing_only_the_input_pipe_is_blamed_on_that_request(fresh_worker) -> None:
    code = (
        "import os\n\n\ndef f(x):\n"
        "    for fd in range(100, 110):\n"
        "        try:\n            os.fstat(fd)\n        except OSError:\n            continue\n"
        "        os.close(fd)\n        break\n"
        "    return x\n"
    )
    guilty = analyze(fresh_worker, code)
    assert guilty["error"]["kind"] == "worker_crash", guilty.get("error")
    assert analyze(fresh_worker, OK_CODE)["ok"]


def test_a_worker_that_died_between_requests_is_replaced_and_the_request_runs(fresh_worker):
    generation = fresh_worker.status().generation
    os.kill(fresh_worker.pid(), signal.SIGKILL)
    time.sleep(0.2)
    result = analyze(fresh_worker, OK_CODE)
    assert result["ok"], result["error"]
    assert fresh_worker.status().generation == generation + 1


def test_a_worker_that_dies_after_answering_does_not_fail_the_next_request(fresh_worker):
    code = (
        "import os, threading, time\n\n\n"
        "def f(x):\n"
        "    threading.Thread(target=lambda: (time.sleep(0.5), os._exit(9))).start()\n"
        "    return x\n"
    )
    assert analyze(fresh_worker, code)["ok"]
    time.sleep(0.1)  # the child is still alive when the next request is sent…
    result = analyze(fresh_worker, "import time\n\n\ndef f(x):\n    time.sleep(1)\n    return x\n")
    # …and dies before or while running it: either it was resent to a fresh child, or
    # it is reported as a crash of this request; never a hang or a server exception
    assert result["ok"] or result["error"]["kind"] == "worker_crash"
    assert analyze(fresh_worker, OK_CODE)["ok"]


# --------------------------------------------------------------------------- process groups


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _sleeper_code(pidfile: Path) -> str:
    return (
        "import subprocess\n\n"
        "_p = subprocess.Popen(['sleep', '778'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(_p.pid))\n\n\n"
        "def f(x):\n    import time\n    time.sleep(30)\n    return x\n"
    )


def _wait_dead(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_timeout_kills_the_subprocesses_the_code_left_behind(tmp_path: Path) -> None:
    pidfile = tmp_path / "sleeper"
    w = Worker("cpu", timeout_s=4, demo=False)
    try:
        result = analyze(w, _sleeper_code(pidfile))
        assert result["error"]["kind"] == "timeout"
        sleeper = int(pidfile.read_text())
        assert _wait_dead(sleeper), "sleep 778 outlived its worker"
    finally:
        w.close()


def test_close_kills_the_subprocesses_the_code_left_behind(tmp_path: Path) -> None:
    pidfile = tmp_path / "sleeper"
    code = (
        "import subprocess\n\n"
        "_p = subprocess.Popen(['sleep', '778'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(_p.pid))\n\n\n"
        "def f(x):\n    return x\n"
    )
    w = Worker("cpu", timeout_s=60, demo=False)
    assert analyze(w, code)["ok"]
    sleeper = int(pidfile.read_text())
    assert _pid_alive(sleeper)
    w.close()
    assert _wait_dead(sleeper), "sleep 778 outlived Worker.close()"


# --------------------------------------------------------------------------- bounded state


def test_samples_are_read_once_and_safely_from_many_threads() -> None:
    import threading

    assert list_samples()[0] is list_samples()[0]  # cached, not re-parsed
    errors: list[BaseException] = []

    def hammer() -> None:
        try:
            for _ in range(30):
                list_samples()
                list_functions(get_sample("transformer_block").code)
        except BaseException as exc:  # the test reports any of them
            errors.append(exc)

    threads = [threading.Thread(target=hammer) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


def test_user_modules_in_sys_modules_are_bounded(monkeypatch) -> None:
    monkeypatch.setattr(source, "MAX_USER_MODULES", 3)
    for i in range(6):
        source.load_module(f"VALUE = {i}\n")
    names = [n for n in sys.modules if n.startswith("jitscope_user_")]
    assert len(names) <= 3
    assert sys.modules[names[-1]].VALUE == 5


def test_user_code_leaves_no_copy_on_disk(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JITSCOPE_HOME", str(tmp_path))
    for i in range(3):
        module = source.load_module(f"VALUE = {i}\n")
    assert module.VALUE == 2 and module.__file__ == "<your code>"
    assert not any(tmp_path.rglob("*.py"))


def test_older_results_keep_their_numbers_but_drop_graph_models(monkeypatch) -> None:
    monkeypatch.delenv("JITSCOPE_DEMO", raising=False)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.number_input(key="runs_w").set_value(0).run()
    for _ in range(9):
        next(b for b in at.button if b.label == "Analyze").click().run()
    assert not at.exception, at.exception
    history = at.session_state["results"]
    assert len(history) == 10
    assert [bool(r.report.graph_models) for r in history] == [False] * 2 + [True] * 8
    assert [r.trimmed for r in history] == [True] * 2 + [False] * 8
    assert history[0].report.jaxpr.eqn_count == 2  # the numbers stay
    picker = next(s for s in at.selectbox if s.label == "Result")
    assert picker.options[0].startswith("#1 ·") and picker.options[-1].startswith("#10 ·")
