"""viz.worker.Worker: user code runs in a child process the caller survives.

Timeouts, crashes and runaway memory each end the request with an error result,
and the next request starts a fresh child and just works.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from viz.platforms import available
from viz.settings import Settings
from viz.worker import (
    LESSON_TIMEOUT_S,
    Worker,
    WorkerPool,
    WorkerStatus,
    protocol,
    worker_env,
)
from viz.worker.frames import read_message, write_message

OK_CODE = "def f(x):\n    return x * 2.0\n"
GIB = 1 << 30


def analyze(worker: Worker, code: str, timeout_s: float | None = None, runs: int = 0, **settings):
    """The worker's answer to an Analyze, as the JSON it sent (the report's, stdout beside)."""
    settings = {"function": "f", "args": "f32[4]", **settings}
    request = protocol.Analyze(Settings(code=code, **settings), runs=runs)
    return worker.ask(request, timeout_s=timeout_s).to_dict()


def assert_next_request_succeeds(worker: Worker) -> None:
    report = analyze(worker, OK_CODE)
    assert report["ok"], report["error"]
    assert report["jaxpr"]["primitives"] == {"mul": 1}


@pytest.fixture
def fresh_worker() -> Iterator[Worker]:
    """A worker of this test's own, with a 3 s timeout, already started."""
    w = Worker("cpu", timeout_s=3)
    assert w.ask(protocol.Ping()).ok
    yield w
    w.close()


@pytest.fixture
def small_worker() -> Iterator[Worker]:
    """A worker whose memory ceiling is 1.5 GiB (and a generous timeout)."""
    w = Worker("cpu", timeout_s=60, memory_limit_bytes=int(1.5 * GIB))
    yield w
    w.close()


# --------------------------------------------------------------------------- limits


def test_infinite_loop_times_out_within_two_seconds_of_the_limit(fresh_worker):
    code = "def f(x):\n    while True:\n        pass\n"
    start = time.monotonic()
    result = analyze(fresh_worker, code)
    elapsed = time.monotonic() - start
    assert result["ok"] is False
    assert result["error"]["kind"] == "timeout"
    assert "3 s" in result["error"]["message"]
    assert 3 <= elapsed < 3 + 2
    # where: the loop's line of the user's code, marked as other errors' lines are
    error = result["error"]
    assert error["line"] in (2, 3), error
    assert f"Stopped after 3 s in f, at your code, line {error['line']}:" in error["message"]
    assert error["hint"].startswith("look for a loop that never ends at your code, line ")
    assert_next_request_succeeds(fresh_worker)


def test_a_request_can_set_its_own_shorter_timeout(fresh_worker):
    code = "import time\n\n\ndef f(x):\n    time.sleep(30)\n    return x\n"
    start = time.monotonic()
    result = analyze(fresh_worker, code, timeout_s=1)
    assert result["error"]["kind"] == "timeout"
    assert time.monotonic() - start < 1 + 2
    assert_next_request_succeeds(fresh_worker)


def test_os_exit_in_user_code_is_a_worker_crash(fresh_worker):
    code = "import os\n\n\ndef f(x):\n    os._exit(1)\n"
    result = analyze(fresh_worker, code)
    assert result["ok"] is False
    assert result["error"]["kind"] == "worker_crash"
    assert "exit status 1" in result["error"]["message"]
    assert result["error"]["hint"]
    assert_next_request_succeeds(fresh_worker)


EXITS = {
    "sys_exit_in_the_function": ("import sys\n\n\ndef f(x):\n    sys.exit(0)\n", 5, "sys.exit(0)"),
    "keyboard_interrupt": ("def f(x):\n    raise KeyboardInterrupt\n", 2, "KeyboardInterrupt"),
    "sys_exit_at_module_level": (
        "import sys\n\nsys.exit(3)\n\n\ndef f(x):\n    return x\n",
        3,
        "sys.exit(3)",
    ),
}


@pytest.mark.parametrize("name", list(EXITS))
def test_sys_exit_and_keyboard_interrupt_say_what_the_code_did_and_the_worker_lives(worker, name):
    code, line, what = EXITS[name]
    restarts = worker.status().restarts
    result = analyze(worker, code)
    assert result["error"]["kind"] == "user_exception"
    assert what in result["error"]["message"] and f"at line {line}" in result["error"]["message"]
    assert result["error"]["line"] == line and result["error"]["hint"]
    assert worker.status().restarts == restarts  # no crash, no fresh worker
    assert_next_request_succeeds(worker)


MEMORY_HOGS = {
    "in_the_function": (
        "import numpy as np\n\n_kept = []\n\n\n"
        "def f(x):\n"
        "    _kept.append(np.ones(3 * 2**30 // 8))  # 3 GiB of float64 ones\n"
        "    return x\n"
    ),
    "at_module_level": (
        "import numpy as np\n\n"
        "TABLE = np.ones(3 * 2**30 // 8)  # 3 GiB of float64 ones\n\n\n"
        "def f(x):\n"
        "    return x\n"
    ),
}


@pytest.mark.slow  # touching 1.5 GiB of fresh pages can take seconds on a small VM
@pytest.mark.parametrize("code", MEMORY_HOGS.values(), ids=MEMORY_HOGS.keys())
def test_allocating_past_the_memory_ceiling_is_stopped_as_memory(small_worker, code):
    result = analyze(small_worker, code)
    assert result["ok"] is False
    assert result["error"]["kind"] == "memory"
    assert "1.5 GiB" in result["error"]["message"]
    assert not small_worker.alive()
    assert_next_request_succeeds(small_worker)


def test_memory_precheck_uses_the_worker_ceiling_and_keeps_the_compile_results(small_worker):
    # 4 GiB in and 4 GiB out: under the in-process default, over this worker's 1.5 GiB.
    result = analyze(small_worker, OK_CODE, args="f32[32768,32768]", runs=1)
    assert result["ok"] is False
    assert result["error"]["kind"] == "memory"
    assert result["error"]["stage"] == "run"  # refused before allocating, not killed
    assert "1.5 GiB" in result["error"]["message"]
    assert result["compiled"]["kernel_count"] >= 1
    assert small_worker.alive()


def test_cancel_from_another_thread_stops_the_request(fresh_worker):
    code = "import time\n\n\ndef f(x):\n    time.sleep(30)\n    return x\n"
    timer = threading.Timer(0.5, fresh_worker.cancel)
    timer.start()
    try:
        result = analyze(fresh_worker, code, timeout_s=20)
    finally:
        timer.cancel()
    assert result["error"]["kind"] == "cancelled"
    assert_next_request_succeeds(fresh_worker)


def test_the_garbage_of_a_request_is_freed_before_the_next_one(fresh_worker):
    """A module's arrays held in a reference cycle are garbage once the next request
    loads the module again; the collector, which counts objects, not bytes, would let
    them pile up against the pool's memory budget."""
    code = (
        "import numpy as np\n\n\n"
        "class Holder:\n    pass\n\n\n"
        "held = Holder()\nheld.me = held\nheld.data = np.ones(25_000_000)  # 200 MB\n\n\n"
        "def f(x):\n    return x * 2.0\n"
    )
    sizes = []
    for _ in range(5):
        assert analyze(fresh_worker, code)["ok"]
        assert fresh_worker.ask(protocol.Ping()).ok  # answered once the worker is idle again
        sizes.append(fresh_worker.status().rss_bytes)
    assert sizes[-1] - sizes[0] < 300 << 20, [s >> 20 for s in sizes]


# --------------------------------------------------------------------------- the protocol


def test_user_prints_come_back_as_stdout(worker):
    code = "print('loading the module')\n\n\ndef f(x):\n    print('tracing f')\n    return x\n"
    result = analyze(worker, code)
    assert result["ok"], result["error"]
    assert "loading the module" in result["stdout"]
    assert "tracing f" in result["stdout"]


def test_raw_writes_to_file_descriptor_1_do_not_corrupt_the_protocol(worker):
    code = (
        "import os\n\n\n"
        "def f(x):\n"
        "    os.write(1, b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x08garbage!')\n"
        "    return x\n"
    )
    result = analyze(worker, code)
    assert result["ok"], result["error"]
    assert_next_request_succeeds(worker)


def test_results_without_prints_have_no_stdout(worker):
    assert "stdout" not in analyze(worker, OK_CODE)


def test_progress_messages_reach_the_callback(worker):
    seen = []
    request = protocol.CacheCalls(
        Settings(code=OK_CODE, function="f"), calls=["f32[2]", "f32[3]", "f32[2]"]
    )
    result = worker.ask(request, on_progress=seen.append)
    assert result.ok
    assert seen == [protocol.Progress(done=i, total=3) for i in (1, 2, 3)]


@dataclass
class NoSuchOp(protocol.Ping):
    """A request for an operation the worker does not know (its answer: a PingReply)."""

    OP = "no_such_op"


@dataclass
class AnalyzeMore(protocol.Analyze):
    """An Analyze with a field the operation does not take."""

    not_an_argument: int = 1


def test_unknown_op_is_a_bad_request_and_the_worker_keeps_serving(worker):
    result = worker.ask(NoSuchOp())
    assert result.ok is False
    assert result.error.kind == "bad_request"
    assert worker.ask(protocol.Ping()).ok


def test_a_field_the_operation_does_not_take_is_a_bad_request_and_the_worker_keeps_serving(
    worker,
):
    pid = worker.status().pid
    result = worker.ask(AnalyzeMore())
    assert result.error.kind == "bad_request"
    assert "not_an_argument" in result.error.message
    assert worker.ask(protocol.Ping()).ok
    assert worker.status().pid == pid


def test_a_handler_bug_is_an_internal_error_in_the_reply_type(monkeypatch):
    from viz.worker import handlers, protocol

    def broken(progress, request):
        raise KeyError("a jitscope bug")

    monkeypatch.setitem(handlers.HANDLERS, protocol.Passes, broken)
    reply = handlers.handle(
        protocol.Passes(Settings(code="def f(x):\n    return x\n")), lambda p: None
    )
    assert isinstance(reply, protocol.PassesReply) and not reply.ok
    assert reply.error.kind == "internal_error" and "a jitscope bug" in reply.error.message
    assert "Traceback" in reply.error.detail


def test_messages_are_length_prefixed_json():
    import io

    stream = io.BytesIO()
    write_message(stream, (1, "ping", {"a": [1, 2]}))
    write_message(stream, "second")
    assert stream.getvalue()[8:].startswith(b'[1,"ping"')  # JSON text, not a pickle
    stream.seek(0)
    assert read_message(stream) == [1, "ping", {"a": [1, 2]}]  # tuples come back as lists
    assert read_message(stream) == "second"
    with pytest.raises(EOFError):
        read_message(stream)


# --------------------------------------------------------------------------- devices


def test_cpu_worker_has_one_device(worker):
    result = worker.ask(protocol.Ping())
    assert result.ok
    assert (result.platform, result.device_count) == ("cpu", 1)


def test_a_warming_ping_runs_the_pipeline_once_and_answers(worker):
    """WorkerPool.warm sends this at server start: a broken warm-up must show here,
    not as a slower first Analyze."""
    result = worker.ask(protocol.Ping(warm=True))
    assert result.ok, result.error
    assert result.platform == "cpu"


def test_cpu8_worker_reports_eight_devices(worker8):
    result = worker8.ask(protocol.Ping())
    assert result.device_count == 8
    assert result.devices == [f"cpu:{i}" for i in range(8)]


def test_cpu8_worker_can_analyze_on_cpu8(worker8):
    report = analyze(worker8, OK_CODE, device="cpu:8")
    assert report["ok"], report["error"]
    assert report["device"] == "cpu:8"


def test_worker_env_simulates_n_cpu_devices_before_jax_starts():
    env = worker_env("cpu:8", 1 << 30)
    assert env["JAX_PLATFORMS"] == "cpu"
    assert "--xla_force_host_platform_device_count=8" in env["XLA_FLAGS"]
    assert env["JITSCOPE_MEMORY_LIMIT_BYTES"] == str(1 << 30)
    assert "device_count" not in worker_env("cpu", 1 << 30)["XLA_FLAGS"]
    assert worker_env("gpu", 1 << 30)["JAX_PLATFORMS"] == "cuda"
    # each of a pool's gpu workers takes memory as it needs it, not 75% of the GPU at start
    assert worker_env("gpu", 1 << 30)["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" not in worker_env("cpu", 1 << 30)


MODULE_LEVEL_JAX = "import jax.numpy as jnp\nW = jnp.ones(4)\ndef f(x):\n    return x * W\n"


def test_a_gpu_worker_without_a_usable_gpu_says_so_for_every_request(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU even on a machine with one
    w = Worker("gpu", timeout_s=60)
    try:
        for code in (OK_CODE, MODULE_LEVEL_JAX):  # the failure is not the module's
            report = analyze(w, code, device="gpu")
            assert not report["ok"]
            assert report["error"]["kind"] == "device_unavailable", report["error"]
            assert "requirements-gpu.txt" in report["error"]["hint"]
            assert report["function"] == "f"  # the reply still says what it answers
        ping = w.ask(protocol.Ping())
        assert ping.error.kind == "device_unavailable"
    finally:
        w.close()


def test_available_devices_always_include_cpu_and_cpu8():
    assert {"cpu", "cpu:8"} <= set(available())


# --------------------------------------------------------------------------- lifecycle


def test_status_before_the_first_request_is_not_alive():
    w = Worker("cpu", memory_limit_bytes=2 * GIB)
    status = w.status()
    assert isinstance(status, WorkerStatus)
    assert (status.alive, status.pid, status.requests, status.generation) == (False, None, 0, 0)
    assert status.memory_limit_bytes == 2 * GIB
    assert status.to_dict()["device"] == "cpu"


def test_status_of_a_running_worker_counts_requests_and_memory():
    w = Worker("cpu")
    try:
        w.ask(protocol.Ping())
        w.ask(protocol.Ping())
        status = w.status()
        assert status.alive and status.pid is not None
        assert status.requests == 2
        assert status.rss_bytes is not None and status.rss_bytes > 0
        assert status.generation == 1 and status.restarts == 0
    finally:
        w.close()


def test_restart_replaces_the_child_and_bumps_the_generation():
    w = Worker("cpu")
    try:
        w.ask(protocol.Ping())
        before = w.status()
        w.restart()
        after = w.status()
        assert after.alive
        assert after.pid != before.pid
        assert after.generation == before.generation + 1
        assert after.restarts == before.restarts + 1
        assert w.ask(protocol.Ping()).ok
    finally:
        w.close()


def test_a_crash_bumps_the_generation_on_the_next_request(fresh_worker):
    generation = fresh_worker.status().generation
    analyze(fresh_worker, "import os\n\n\ndef f(x):\n    os._exit(3)\n")
    assert not fresh_worker.alive()
    assert fresh_worker.ask(protocol.Ping()).ok
    assert fresh_worker.status().generation == generation + 1


def test_close_stops_the_child_and_a_later_request_starts_one_again():
    w = Worker("cpu")
    try:
        w.ask(protocol.Ping())
        w.close()
        assert not w.alive() and w.status().pid is None
        assert w.ask(protocol.Ping()).ok
        assert w.alive()
    finally:
        w.close()


def test_pool_gives_one_worker_per_device_and_role():
    pool = WorkerPool(timeout_s=7)
    try:
        main = pool.get("cpu")
        assert pool.get("cpu") is main
        assert pool.get("cpu:8") is not main
        lessons = pool.get("cpu", role="lessons")
        assert lessons is not main
        assert (main.timeout_s, lessons.timeout_s) == (7, LESSON_TIMEOUT_S)
        assert not main.alive()  # nothing starts until the first request
    finally:
        pool.close()


def test_pass_by_pass_imports_a_programs_sibling_modules_after_a_restart(tmp_path):
    """A program opened from a recording lives in its own folder; pass-by-pass must
    not rely on an earlier Analyze having left that folder on a worker's sys.path."""
    (tmp_path / "siblings_helper.py").write_text("def double(x):\n    return x * 2\n")
    code = "from siblings_helper import double\n\n\ndef f(x):\n    return double(x) + 1\n"
    settings = Settings(code=code, folder=str(tmp_path), function="f", args="f32[4]")
    worker = Worker("cpu", timeout_s=60)
    try:
        assert worker.ask(protocol.Analyze(settings, runs=0)).report.ok
        worker.restart("a fresh child: nothing left on its sys.path")
        reply = worker.ask(protocol.Passes(settings))
        assert reply.ok and reply.steps, reply.error
    finally:
        worker.close()


def test_every_request_type_has_its_handler_filed_under_it():
    from viz.worker import handlers

    assert set(handlers.HANDLERS) == set(protocol.REQUESTS)
    assert handlers.HANDLERS[protocol.CacheCall] is handlers.HANDLERS[protocol.CacheCalls]
