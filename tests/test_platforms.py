"""The platform seam (`viz.platforms`): a device configuration as a type, the devices a
machine offers (asked of JAX in a child, never in the server), each platform's words
when it cannot start, the holder of a TPU chip, and one worker for a device one process
owns (a CPU marked single-process stands for a TPU here: CI has none)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from viz import platforms
from viz.cache import clears
from viz.cli import ask_waiting
from viz.errors import ErrorInfo, ErrorKind
from viz.platforms import DeviceConfig, DeviceError, tpu
from viz.settings import Settings
from viz.worker import Worker, WorkerPool, worker_env
from viz.worker.protocol import CacheCall, CompileProfile, Ping
from viz.worker.replies import PingReply

LOCKFILE = (
    "RuntimeError: Unable to initialize backend 'tpu': ABORTED: Internal error when "
    'accessing libtpu multi-process lockfile. Run "$ sudo lsof -w /dev/accel0" to '
    "figure out which process is holding the TPU."
)
IN_USE = (  # the same, when the holder was still opening the chip (a v5e, jax 0.10.2; the
    # message's start as the TPU check recorded it)
    "RuntimeError: Unable to initialize backend 'tpu': ABORTED: The TPU is already in use "
    "by process with pid 2536."
)
CODE = "def f(x):\n    return x * 2.0\n"


# --------------------------------------------------------------------------- DeviceConfig


@pytest.mark.parametrize("text", ["cpu", "cpu:8", "gpu", "tpu", "cpu:1", "gpu:2"])
def test_a_device_configuration_reads_back_as_the_text_it_came_from(text: str) -> None:
    assert str(DeviceConfig.parse(text)) == text


def test_a_configuration_knows_its_jax_platform_and_its_devices() -> None:
    assert DeviceConfig.parse("gpu").jax_platform == "cuda"
    assert DeviceConfig.parse("tpu").jax_platform == "tpu"
    assert DeviceConfig.parse("cpu:8") == DeviceConfig("cpu", 8)
    assert [DeviceConfig.parse(t).devices for t in ("cpu", "cpu:8", "gpu", "tpu")] == [
        1,
        8,
        None,
        None,
    ]


@pytest.mark.parametrize("text", ["", "cuda", "cpu:", "cpu:x", "cpu:0", "tpu:-1", "CPU"])
def test_a_configuration_that_is_none_says_what_to_write(text: str) -> None:
    with pytest.raises(DeviceError, match="write cpu, cpu:8, gpu or tpu"):
        DeviceConfig.parse(text)


def test_one_process_owns_a_tpu_and_the_test_hook_marks_any_platform(monkeypatch) -> None:
    assert DeviceConfig.parse("tpu").max_processes == 1
    assert DeviceConfig.parse("cpu").max_processes is None
    monkeypatch.setenv(platforms.ONE_PROCESS_ENV, "cpu")
    assert DeviceConfig.parse("cpu:8").max_processes == 1
    assert DeviceConfig.parse("gpu").max_processes is None


def test_only_the_cpu_offers_a_memory_first_schedule() -> None:
    assert platforms.memory_schedule_of("cpu:8") == platforms.cpu.MEMORY_SCHEDULE
    assert platforms.memory_schedule_of("tpu") == platforms.memory_schedule_of("gpu") == {}
    assert platforms.memory_schedule_of("cuda") == {}  # an old run's text: no device


def test_each_platforms_worker_environment() -> None:
    assert worker_env("tpu", 1 << 30)["JAX_PLATFORMS"] == "tpu"
    assert "device_count" not in worker_env("tpu", 1 << 30).get("XLA_FLAGS", "")
    assert worker_env("cpu:4", 1 << 30)["XLA_FLAGS"].endswith("device_count=4")
    assert worker_env("gpu", 1 << 30)[platforms.DEVICE_ENV] == "gpu"


# --------------------------------------------------------------------------- available


def test_a_machine_without_accelerators_offers_the_cpus_at_once_without_a_child(
    monkeypatch,
) -> None:
    monkeypatch.setattr(platforms, "_PROBE", platforms._Probe())
    monkeypatch.setattr(platforms, "ask_jax", lambda names: pytest.fail("no child to ask"))
    for platform in (platforms.gpu.PLATFORM, platforms.tpu.PLATFORM):
        monkeypatch.setattr(type(platform), "detect", lambda self: False)
    assert platforms.available() == ["cpu", "cpu:8"]


def test_the_accelerators_jax_sees_come_first_asked_once_however_many_ask(monkeypatch) -> None:
    asked = []

    def slow_jax(names: list[str]) -> list[str]:
        asked.append(names)
        time.sleep(0.5)
        return ["tpu"]

    monkeypatch.setattr(platforms, "_PROBE", platforms._Probe())
    monkeypatch.setattr(platforms, "ask_jax", slow_jax)
    monkeypatch.setattr(type(platforms.gpu.PLATFORM), "detect", lambda self: False)
    monkeypatch.setattr(type(platforms.tpu.PLATFORM), "detect", lambda self: True)
    start = time.monotonic()
    assert platforms.available() == ["cpu", "cpu:8"]  # the first screen does not wait
    assert time.monotonic() - start < 0.2
    answers: list[list[str]] = []
    threads = [
        threading.Thread(target=lambda: answers.append(platforms.available(wait_s=5)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [["tpu", "cpu", "cpu:8"]] * 4
    assert asked == [["tpu"]]


def test_the_child_asks_jax_which_platforms_it_sees() -> None:
    """On this machine JAX sees no TPU: the child says so (and the server imported no jax
    to learn it)."""
    assert platforms.ask_jax(["tpu"]) == []
    assert platforms.ask_jax(["cpu", "tpu"]) == ["cpu"]


# --------------------------------------------------------------------------- unavailable


@pytest.mark.parametrize("error", [LOCKFILE, IN_USE])
def test_a_held_tpu_chip_is_said_as_such_with_cpu_offered(monkeypatch, error: str) -> None:
    monkeypatch.setattr(tpu, "holders", lambda: [tpu.Holder(4242, "python -m viz analyze")])
    why = DeviceConfig.parse("tpu").unavailable("0.10.2", error)
    assert why.held and platforms.held(why.message)
    assert why.message.startswith("Another process holds the TPU chip (pid 4242: python -m viz")
    assert "--wait" in why.hint and "pick cpu" in why.hint
    assert "CUDA" not in why.hint + why.message


@pytest.mark.parametrize(
    ("device", "said", "not_said"),
    [
        ("tpu", "pip install 'jax[tpu]'", "CUDA"),
        ("gpu", "requirements-gpu.txt", "TPU"),
        ("cpu", "requirements.txt", "requirements-gpu"),
    ],
)
def test_each_platform_that_cannot_start_says_why_in_its_own_terms(
    device: str, said: str, not_said: str
) -> None:
    why = DeviceConfig.parse(device).unavailable("0.10.2", "RuntimeError: no devices")
    assert said in why.hint and not_said not in why.hint
    assert why.message == f"JAX 0.10.2 cannot start its {device} backend in this worker " + (
        "(RuntimeError: no devices)"
    )
    assert not why.held and not platforms.held(why.message)


def _fake_process(proc: Path, pid: int, command: str, *links: str) -> None:
    fds = proc / str(pid) / "fd"
    fds.mkdir(parents=True)
    (proc / str(pid) / "cmdline").write_bytes(command.replace(" ", "\0").encode() + b"\0")
    for n, target in enumerate(links):
        os.symlink(target, fds / str(n))


def test_the_holder_of_a_chip_is_found_by_its_open_device_file(tmp_path: Path) -> None:
    _fake_process(tmp_path, 10, "bash", "/dev/pts/0", "/dev/null")
    _fake_process(tmp_path, 200, "python -m viz analyze sample:mlp", "/dev/null", "/dev/accel0")
    _fake_process(tmp_path, 31, "python train.py", "/dev/vfio/0")
    _fake_process(tmp_path, 5000, "python serve.py", "/tmp/libtpu_lockfile")
    _fake_process(tmp_path, 7, "me", "/dev/accel0")  # this process: not a holder
    (tmp_path / "self").mkdir()  # not a process
    (tmp_path / "99").mkdir()  # gone, or another user's: its fds unreadable
    found = tpu.holders(str(tmp_path), me=7)
    assert [h.pid for h in found] == [31, 200, 5000]
    assert found[0] == tpu.Holder(31, "python train.py")
    assert str(found[1]) == "pid 200: python -m viz analyze sample:mlp"
    assert tpu.held_message(found).startswith(
        "Another process holds the TPU chip (pid 31: python train.py; pid 200: "
    )
    assert tpu.holders(str(tmp_path / "nowhere")) == []


def test_a_worker_on_a_platform_this_machine_lacks_says_so_in_that_platforms_terms() -> None:
    worker = Worker("tpu", timeout_s=60)
    try:
        reply = worker.ask(Ping())
    finally:
        worker.close()
    assert reply.error is not None and reply.error.kind == "device_unavailable"
    assert "cannot start its tpu backend" in reply.error.message
    assert "pick cpu" in reply.error.hint and "CUDA" not in reply.error.hint


# --------------------------------------------------------------------------- --wait


class _HeldThenFree:
    """A worker whose device is held for the first `held` asks."""

    def __init__(self, held: int):
        self.held, self.asks = held, 0

    def ask(self, request: Ping) -> PingReply:
        self.asks += 1
        if self.asks <= self.held:
            info = ErrorInfo(ErrorKind.DEVICE_UNAVAILABLE, tpu.held_message([]), "wait")
            return PingReply.failure(info, request)
        return PingReply(ok=True)


def test_wait_asks_again_until_the_device_is_free(capsys) -> None:
    worker = _HeldThenFree(held=2)
    assert ask_waiting(worker, Ping(), wait=True, poll_s=0).ok  # type: ignore[arg-type]
    assert worker.asks == 3
    assert capsys.readouterr().err.count("waiting: Another process holds the TPU chip") == 1
    once = _HeldThenFree(held=2)
    assert not ask_waiting(once, Ping(), wait=False).ok  # type: ignore[arg-type]
    assert once.asks == 1


def test_a_worker_that_found_its_device_held_ends_so_the_next_request_opens_it_afresh(
    monkeypatch,
) -> None:
    from viz.worker.frames import error_result

    worker = Worker("cpu", timeout_s=60)
    held = error_result("device_unavailable", tpu.held_message([]), "wait")
    killed: list[str] = []
    monkeypatch.setattr(worker, "_run", lambda *args: dict(held))
    monkeypatch.setattr(worker, "_kill", lambda reason="": killed.append(reason))
    assert not worker.ask(Ping()).ok
    assert killed == ["another process held the device"]
    failed = error_result("device_unavailable", "No tpu device", "pick cpu")
    monkeypatch.setattr(worker, "_run", lambda *args: dict(failed))
    assert not worker.ask(Ping()).ok
    assert killed == ["another process held the device"]  # any other failure: kept


# --------------------------------------------------------------------------- one process


@pytest.fixture
def one_process_cpu(monkeypatch):
    monkeypatch.setenv(platforms.ONE_PROCESS_ENV, "cpu")
    workers = WorkerPool(timeout_s=60, size=2, demo=False)
    yield workers
    workers.close()


def test_a_device_one_process_owns_has_one_worker_for_every_session_and_role(
    one_process_cpu,
) -> None:
    pool = one_process_cpu
    one = pool.worker_for("alice", "cpu")
    assert pool.slot("alice") != pool.slot("bob")
    assert pool.worker_for("bob", "cpu", "lessons") is one
    assert pool.get("cpu", "lessons", 1) is one
    assert pool.worker_for("alice", "cpu:8") is pool.worker_for("bob", "cpu:8", "lessons")
    assert pool.shared("cpu") and not pool.shared("gpu")


def test_requests_queue_for_the_one_worker(one_process_cpu) -> None:
    from ui.workers import waited_for

    pool = one_process_cpu
    sleepy = "import time\n\ndef f(x):\n    time.sleep(1.5)\n    return x\n"
    lesson = pool.worker_for("bob", "cpu", "lessons")
    first = threading.Thread(
        target=lesson.ask,
        args=(CacheCall(Settings(code=sleepy, function="f", args="f32[2]"), owner="bob"),),
    )
    first.start()
    while not lesson.status().alive:
        time.sleep(0.05)
    time.sleep(0.5)
    heard: list[int] = []
    reply = pool.worker_for("alice", "cpu").ask(Ping(), on_queue=heard.append)
    first.join()
    assert reply.ok and heard[0] == 1 and heard[-1] == 0
    assert waited_for("cpu") == "the CPU" and waited_for("gpu") == "the worker"


def test_the_cache_lab_says_what_emptied_its_cache_in_a_shared_worker(one_process_cpu) -> None:
    pool = one_process_cpu
    lab = pool.worker_for("alice", "cpu")
    settings = Settings(code=CODE, function="f", args="f32[4]")
    assert lab.ask(CacheCall(settings, owner="alice")).ok
    again = lab.ask(CacheCall(settings, owner="alice"))
    assert again.event is not None and again.event.hit
    profile = pool.worker_for("bob", "cpu", "lessons").ask(CompileProfile(settings))
    assert profile.ok, profile.error
    after = lab.ask(CacheCall(settings, owner="alice"))
    event = after.event
    assert event is not None and not event.hit  # JAX's cache was emptied: it compiles again
    assert "emptied by a compile profile in Explore after call 2" in event.notes[0]
    assert len(after.table) == 1  # the table starts over: the entries before are gone
    assert after.event.entry == 0


def test_a_clear_is_counted_with_what_made_it(monkeypatch) -> None:
    import jax

    monkeypatch.setattr(jax, "clear_caches", jax.clear_caches)  # restored after
    clears.watch()
    clears.watch()  # idempotent: one count per clear
    count = clears.CLEARS.count
    assert clears.since(count) is None
    with clears.doing("the lesson Shape sweep"):
        jax.clear_caches()
    assert clears.CLEARS.count == count + 1
    assert clears.since(count) == "the lesson Shape sweep"
    jax.clear_caches()
    assert clears.since(count + 1) == "code in this worker"


# --------------------------------------------------------------------------- the app

APP = str(Path(__file__).resolve().parent.parent / "app.py")


@pytest.mark.usefixtures("navigation_mode", "plain_editor")
def test_the_sidebar_offers_what_the_machine_has_and_names_a_shared_worker(monkeypatch) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv(platforms.ONE_PROCESS_ENV, "cpu")
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["device"] = "cpu:8"  # a shared link's device
    at.run()
    picker = at.sidebar.selectbox(key="device")
    assert picker.options == platforms.available() == ["cpu", "cpu:8"]
    assert picker.value == "cpu:8"
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "The cpu:8 worker (one process owns the device" in captions


def test_a_holders_long_command_is_its_first_line_shortened() -> None:
    """On the chip, a `python -c` holder's command was its whole 14-line script."""
    script = "import time\nimport jax\njax.devices('tpu')\ntime.sleep(600)"
    said = str(tpu.Holder(2139, f"/usr/bin/python3 -c {script}"))
    assert said == "pid 2139: /usr/bin/python3 -c import time…"
    long = str(tpu.Holder(7, "python " + "x" * 200))
    assert long.endswith("…") and len(long) < 100
