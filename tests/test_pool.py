"""The worker pool: sessions pinned to workers, queues, cancels and one memory budget.

A restart, timeout, crash or Cancel touches only the sessions pinned to that worker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from serving import free_port, start_server, stop, wait_listening
from streamlit.testing.v1 import AppTest

from viz.settings import Settings
from viz.worker import (
    MemoryBudget,
    Worker,
    WorkerPool,
    default_pool_size,
)
from viz.worker.handlers import POOL_BUDGET
from viz.worker.protocol import Analyze, Analyzed, CacheCall, CacheReply, CacheState, Ping

pytestmark = pytest.mark.usefixtures("navigation_mode", "plain_editor")

APP = str(Path(__file__).resolve().parent.parent / "app.py")
CODE = "def f(x):\n    return x * 2.0\n"
SLEEPY = "import time\n\n\ndef f(x):\n    time.sleep(float(x.shape[0]) / 4)\n    return x\n"
GIB = 1 << 30


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    workers = WorkerPool(timeout_s=60, size=2, demo=False)
    yield workers
    workers.close()


def cache_call(pool: WorkerPool, client: str, args: str = "f32[4]") -> CacheReply:
    worker = pool.worker_for(client, "cpu")
    request = CacheCall(Settings(code=CODE, function="f", args=args), owner=client)
    return worker.ask(request, client=client)


def table(pool: WorkerPool, client: str) -> list:
    worker = pool.worker_for(client, "cpu")
    result = worker.ask(CacheState(Settings(code=CODE, function="f"), owner=client), client=client)
    return result.table


# --------------------------------------------------------------------------- pinning


def test_sessions_spread_over_the_workers_and_stay_pinned(pool) -> None:
    slots = [pool.slot(f"s{i}") for i in range(4)]
    assert sorted(slots) == [0, 0, 1, 1]
    assert [pool.slot(f"s{i}") for i in range(4)] == slots
    assert pool.worker_for("s0", "cpu") is pool.worker_for("s0", "cpu")
    assert pool.worker_for("s0", "cpu", "lessons") is not pool.worker_for("s0", "cpu")


def test_one_sessions_restart_leaves_the_other_sessions_cache_table_intact(pool) -> None:
    a, b = "alice", "bob"
    assert pool.slot(a) != pool.slot(b)
    for client in (a, b):
        assert cache_call(pool, client)["ok"]
        assert cache_call(pool, client, "f32[8]")["ok"]
    assert len(table(pool, b)) == 2
    other = pool.worker_for(b, "cpu").status()
    pool.worker_for(a, "cpu").restart()
    assert len(table(pool, b)) == 2  # bob's worker and its jit cache are untouched
    assert pool.worker_for(b, "cpu").status().generation == other.generation
    assert table(pool, a) == []  # alice's was replaced…
    assert "Restart" in pool.worker_for(a, "cpu").status().reason  # …and says why


def test_sessions_sharing_a_worker_keep_separate_cache_tables(pool) -> None:
    carol = next(f"c{i}" for i in range(100) if pool.slot(f"c{i}") == pool.slot("alice"))
    assert cache_call(pool, "alice", "f32[3]")["ok"]
    assert cache_call(pool, carol, "f32[5]")["ok"]
    assert [e["describe"] for e in table(pool, carol)] != [
        e["describe"] for e in table(pool, "alice")
    ]


def test_a_timeout_affects_only_the_sessions_of_that_worker(pool) -> None:
    a, b = "alice", "bob"
    assert cache_call(pool, b, "f32[2]")["ok"]
    before = len(table(pool, b))
    worker = pool.worker_for(a, "cpu")
    loop = Settings(code="def f(x):\n    while True:\n        pass\n", function="f", args="f32[1]")
    result = worker.ask(Analyze(loop, runs=0), timeout_s=2, client=a)
    assert result["error"]["kind"] == "timeout"
    assert worker.status().reason == "a request timed out"
    assert len(table(pool, b)) == before


def test_default_pool_size_follows_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("JITSCOPE_WORKERS", "3")
    assert default_pool_size() == 3
    monkeypatch.delenv("JITSCOPE_WORKERS")
    assert 1 <= default_pool_size() <= 4


# --------------------------------------------------------------------------- the queue


def _run_in_thread(fn, *args, **kwargs) -> tuple[threading.Thread, dict]:
    out: dict = {}
    thread = threading.Thread(target=lambda: out.update(result=fn(*args, **kwargs)))
    thread.start()
    return thread, out


@pytest.fixture
def worker() -> Iterator[Worker]:
    w = Worker("cpu", timeout_s=60, demo=False)
    assert w.ask(Ping()).ok
    yield w
    w.close()


def _sleep_request(worker: Worker, client: str, quarter_seconds: int, **kwargs) -> Analyzed:
    sleepy = Settings(code=SLEEPY, function="f", args=f"f32[{quarter_seconds}]")
    return worker.ask(Analyze(sleepy, runs=0), client=client, **kwargs)


def test_a_waiting_request_hears_its_place_in_the_queue(worker) -> None:
    first, _ = _run_in_thread(_sleep_request, worker, "a", 8)
    time.sleep(0.5)
    places: list[int] = []
    result = worker.ask(Ping(), on_queue=places.append, client="b")
    first.join()
    assert result["ok"]
    assert places == [1, 0]


def test_cancel_stops_only_the_cancelling_sessions_measurement(worker) -> None:
    mine, mine_out = _run_in_thread(_sleep_request, worker, "a", 12)
    time.sleep(0.5)
    theirs, theirs_out = _run_in_thread(_sleep_request, worker, "b", 1)
    time.sleep(0.3)
    worker.cancel("b")  # b's request is still waiting: it leaves the queue
    theirs.join()
    assert theirs_out["result"]["error"]["kind"] == "cancelled"
    mine.join()
    assert mine_out["result"]["ok"], mine_out["result"]["error"]  # a's ran to the end


def test_cancel_of_the_running_request_lets_the_next_session_run(worker) -> None:
    mine, mine_out = _run_in_thread(_sleep_request, worker, "a", 40)
    time.sleep(1.0)
    theirs, theirs_out = _run_in_thread(_sleep_request, worker, "b", 1)
    time.sleep(0.3)
    worker.cancel("a")
    mine.join(timeout=10)
    assert mine_out["result"]["error"]["kind"] == "cancelled"
    theirs.join(timeout=60)
    assert theirs_out["result"]["ok"], theirs_out["result"]["error"]


# --------------------------------------------------------------------------- memory


def test_workers_share_one_memory_budget() -> None:
    pool = WorkerPool(size=2, memory_limit_bytes=4 * GIB, demo=False)
    try:
        first, second = pool.get("cpu", slot=0), pool.get("cpu", slot=1)
        assert first.budget is second.budget
        assert first.budget.total == 4 * GIB
        assert first.ask(Ping()).ok and second.ask(Ping()).ok
        # a run must fit in the pool's whole budget, whichever worker ran it: the same
        # figure for each, as the sidebar says it (not a share that depends on how many
        # workers had joined when each started)
        for worker in (first, second):
            reply = worker.ask(Analyze(Settings(code=CODE, function="f", args="f32[2]"), runs=0))
            memory = reply.report.memory
            assert (memory.limit_bytes, memory.limit_of) == (4 * GIB, POOL_BUDGET)
        # two reads of a live process's RSS: a page or two may move between them
        assert first.budget.others(first) == pytest.approx(second.grown(), abs=1 << 20)

    finally:
        pool.close()


def test_the_budget_counts_what_requests_hold_not_what_the_runtime_holds_from_its_start() -> None:
    """A TPU's runtime holds 13.5 GiB resident from its start, next to a 16 GiB budget:
    the budget counts the memory a worker's requests add beyond its open device's."""
    worker = Worker("cpu", demo=False)
    try:
        assert worker.ask(Ping()).ok
        rss, grown = worker.rss(), worker.grown()
        assert rss is not None and grown is not None
        assert 0 <= grown < rss - (100 << 20)  # JAX's import and the CPU client: the floor
    finally:
        worker.close()


def test_a_worker_over_the_shared_budget_is_stopped_as_memory() -> None:
    budget = MemoryBudget(GIB)
    idle, busy = Worker("cpu", budget=budget, demo=False), Worker("cpu", budget=budget, demo=False)
    try:
        assert idle.ask(Ping()).ok and busy.ask(Ping()).ok
        hog = (
            "import numpy as np\n\n_kept = []\n\n\n"
            "def f(x):\n    _kept.append(np.ones(2**30 // 8))\n    return x\n"
        )
        result = busy.ask(Analyze(Settings(code=hog, function="f", args="f32[2]"), runs=1))
        assert result["error"]["kind"] == "memory"
        assert "other workers use" in result["error"]["message"]
        assert idle.alive()  # the one that grew pays, not its neighbour
    finally:
        idle.close()
        busy.close()


# --------------------------------------------------------------------------- in the app


def _until(condition, within_s: float = 60) -> bool:
    deadline = time.time() + within_s
    while not condition() and time.time() < deadline:
        time.sleep(0.1)
    return condition()


def test_only_the_first_slot_warms_at_start_and_the_next_when_its_session_comes() -> None:
    """On a small machine a second JAX import would slow the first visitor's page."""
    workers = WorkerPool(timeout_s=60, size=2, demo=False)
    try:
        workers.warm("cpu", others_after_s=600)
        first = workers.get("cpu")
        assert _until(lambda: first.status().requests == 1)  # its warming analysis began
        assert workers.workers() == [first]  # slot 1: nobody asked for it yet
        workers.slot("first visitor")
        second = workers.worker_for("second visitor", "cpu")
        assert second is not first
        assert _until(lambda: second.status().requests == 1)  # warming as the session came
    finally:
        workers.close()


def test_a_first_result_does_not_start_the_other_slots() -> None:
    """Their JAX imports, started at the first visitor's first result, made that
    visitor's first screen 0.5 s later on 2 cores (bench/cold_start.py, issue #40)."""
    workers = WorkerPool(timeout_s=60, size=2, demo=False)
    try:
        workers.warm("cpu", others_after_s=600)
        first = workers.get("cpu")
        assert first.ask(Analyze(Settings(code=CODE, function="f", args="f32[2]"), runs=0)).ok
        time.sleep(1.0)
        assert workers.workers() == [first]
    finally:
        workers.close()


def test_the_other_slots_warm_after_a_while_without_a_session() -> None:
    workers = WorkerPool(timeout_s=60, size=2, demo=False)
    try:
        workers.warm("cpu", others_after_s=0.2)
        assert _until(lambda: len(workers.workers()) == 2, within_s=10)
    finally:
        workers.close()


def test_closing_the_pool_cancels_the_later_warm_up() -> None:
    workers = WorkerPool(timeout_s=60, size=2, demo=False)
    workers.warm("cpu", others_after_s=0.5)
    workers.close()
    time.sleep(1.0)
    assert len(workers.workers()) == 1  # no worker started after close


def _workers_of(server_pid: int) -> list[int]:
    """The `python -m viz.worker` children of a process (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == server_pid and b"viz.worker" in command:
            found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_the_server_starts_a_worker_before_anyone_connects(tmp_path: Path) -> None:
    """app.py, imported by the server: JAX imports while the first browser is loading."""
    port = free_port()
    server = start_server(port, tmp_path / "server.log", {"JITSCOPE_WORKERS": "1"})
    try:
        wait_listening(port)
        started = _until(lambda: _workers_of(server.pid), within_s=30)
        assert started, (tmp_path / "server.log").read_text()[-2000:]
        assert "missing ScriptRunContext" not in (tmp_path / "server.log").read_text()
    finally:
        stop(server)


def test_the_server_builds_its_pool_once_for_every_session_and_rerun() -> None:
    import ui

    ui.pool.clear()
    try:
        assert ui.pool() is ui.pool()  # a new pool per call would start new workers
    finally:
        ui.pool().close()
        ui.pool.clear()


def test_two_app_sessions_one_restart_the_other_keeps_its_cache_table(monkeypatch) -> None:
    import ui

    monkeypatch.setenv("JITSCOPE_WORKERS", "2")
    ui.pool.clear()  # a pool of two, built for this test
    try:
        sessions = [AppTest.from_file(APP, default_timeout=180) for _ in range(2)]
        for at in sessions:
            at.switch_page("pages/cache.py").run()
            next(b for b in at.button if b.label == "Call").click().run()
            assert not at.exception, at.exception
        first, second = sessions
        slots = {ui.pool().slot(at.session_state["owner"]) for at in sessions}
        assert slots == {0, 1}
        next(b for b in first.sidebar.button if b.label == "Restart worker").click().run()
        assert not first.exception, first.exception
        second.run()
        assert not any("was replaced" in w.value for w in second.sidebar.warning)
        next(b for b in second.button if b.label == "Call").click().run()
        hits = second.dataframe[0].value["hits"].tolist()
        assert hits == [1]  # the entry compiled before the other's restart, now hit
    finally:
        ui.pool().close()
        ui.pool.clear()


def test_sessions_on_the_restarted_worker_are_told_and_drop_its_cache_table(monkeypatch) -> None:
    import ui

    monkeypatch.setenv("JITSCOPE_WORKERS", "1")
    ui.pool.clear()  # one worker: both sessions share it
    try:
        sessions = [AppTest.from_file(APP, default_timeout=180) for _ in range(2)]
        for at in sessions:
            at.switch_page("pages/cache.py").run()
            next(b for b in at.button if b.label == "Call").click().run()
        first, second = sessions
        next(b for b in first.sidebar.button if b.label == "Restart worker").click().run()
        second.run()
        assert not second.exception, second.exception
        notice = " ".join(w.value for w in second.sidebar.warning)
        assert "was replaced" in notice and "Restart worker" in notice
        assert any("Make a call" in i.value for i in second.info)  # the stale table is gone
        assert not any("was replaced" in w.value for w in first.sidebar.warning)
    finally:
        ui.pool().close()
        ui.pool.clear()


def test_a_waiting_request_interrupted_by_its_page_leaves_the_queue(worker) -> None:
    first, _ = _run_in_thread(_sleep_request, worker, "a", 4)
    time.sleep(0.5)

    def rerun(ahead: int) -> None:
        raise KeyboardInterrupt  # what Streamlit's rerun does to a waiting script thread

    with pytest.raises(KeyboardInterrupt):
        worker.ask(Ping(), on_queue=rerun, client="b")
    first.join()
    assert worker.status().queued == 0
    assert worker.ask(Ping(), client="c")["ok"]  # the queue is not stuck
