"""`bench/load.py --headless N`: the server under load, measured at the server.

N headless sessions (`stream_client.Session`: Streamlit's websocket protocol, nothing
rendered) against a real `streamlit run app.py`, each opening a link to a different
sample on Explore and waiting for its result, all at once. Before that, each sample
alone on a fresh session gives the single-session server CPU (the server process and
its workers, from /proc); their sum over the N sessions' samples divided by the cores
is the floor: no schedule finishes all N sooner. The two phases run on two fresh
servers, because a worker analyzes a sample it has seen before about 3x cheaper
(its module and JAX's op-by-op compiles are kept). Targets (issue #20): 8 sessions
p95 <= 1.3x the floor and 0 exceptions; 32 sessions all finish with 0 exceptions and
the workers within the pool's memory budget.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from proc_tree import PeakMemory, tree_seconds
from stream_client import Outcome, Session

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere, installed or not
sys.path.insert(0, str(ROOT / "tests"))  # the browser tests' server helpers
from serving import free_port, start_server, stop, wait_listening  # noqa: E402

from viz.samples import Sample, list_samples  # noqa: E402

SLOW = {"transformer_24"}  # a minute of compiling on its own: not a load test
WARM = "dot_plus_one"  # the smallest sample: starts and warms every worker
P95_OVER_FLOOR = 1.3
GIB = 2**30


def load_samples(n: int, names: list[str] | None = None) -> list[Sample]:
    """N samples, all different while there are enough (then round again): the
    samples that analyze without an error, or the ones named."""
    pool = [s for s in list_samples() if not s.expect_error and s.name not in SLOW]
    if names:
        by_name = {s.name: s for s in list_samples()}
        pool = [by_name[name] for name in names]
    return [pool[i % len(pool)] for i in range(n)]


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile (of 8 values, p95 is the largest)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def cores() -> int:
    return len(os.sched_getaffinity(0))


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (every process, every core)."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


@dataclass
class Solo:
    """A sample analyzed alone: its session and the server CPU it cost."""

    outcome: Outcome
    cpu_s: float


@dataclass
class Served:
    """A running server: where it listens, its process and log, its peak memory."""

    port: int
    pid: int
    log: Path
    memory: PeakMemory

    def tracebacks(self) -> int:
        return self.log.read_text().count("Traceback")


@contextmanager
def serve(env: dict[str, str]) -> Iterator[Served]:
    """A fresh `streamlit run app.py` (its own JITSCOPE_HOME) for the block."""
    port, log = free_port(), Path(tempfile.mkdtemp()) / "server.log"
    home = {"JITSCOPE_HOME": tempfile.mkdtemp(prefix="jitscope-load-")}
    proc = start_server(port, log, {**env, **home})
    try:
        wait_listening(port)
        with PeakMemory(proc.pid) as memory:
            yield Served(port, proc.pid, log, memory)
    finally:
        stop(proc)


async def together(port: int, samples: list[Sample], timeout_s: float) -> list[Outcome]:
    sessions = [Session(port, f"sample={s.name}") for s in samples]
    return await asyncio.gather(*(s.result(timeout_s) for s in sessions))


async def warm(port: int, slots: int, timeout_s: float) -> None:
    """One small session per worker, at once, so every worker has started and warmed:
    the server's start-up is not what is measured."""
    outcomes = await together(port, load_samples(1, [WARM]) * slots, timeout_s)
    print(f"warm-up ({slots} sessions, one per worker): " + ", ".join(map(describe, outcomes)))


async def alone(
    server: Served, samples: list[Sample], slots: int, timeout: float
) -> dict[str, Solo]:
    """Each sample once, alone, on a fresh session: the server CPU it costs."""
    await warm(server.port, slots, timeout)
    solo: dict[str, Solo] = {}
    for sample in {s.name: s for s in samples}.values():
        before = tree_seconds(server.pid)
        outcome = (await together(server.port, [sample], timeout))[0]
        solo[sample.name] = Solo(outcome, tree_seconds(server.pid) - before)
        cpu = f"server CPU {solo[sample.name].cpu_s:5.2f} s"
        print(f"  alone  {sample.name:<18} {describe(outcome)}  {cpu}")
    return solo


@dataclass
class Burst:
    outcomes: list[Outcome]
    wall_s: float
    server_cpu_s: float
    machine_cpu_s: float  # everything on the machine: the server, us and the neighbours


async def at_once(server: Served, samples: list[Sample], slots: int, timeout: float) -> Burst:
    """All sessions at once, on a server that has not analyzed these samples yet
    (a worker analyzes a sample again faster, so the single-session figures were
    measured on another server)."""
    await warm(server.port, slots, timeout)
    cpu0, busy0, t0 = tree_seconds(server.pid), machine_busy_s(), time.perf_counter()
    outcomes = await together(server.port, samples, timeout)
    wall = time.perf_counter() - t0
    burst = Burst(outcomes, wall, tree_seconds(server.pid) - cpu0, machine_busy_s() - busy0)
    for sample, outcome in zip(samples, outcomes, strict=True):
        print(f"  shared {sample.name:<18} {describe(outcome)}")
    return burst


def describe(outcome: Outcome) -> str:
    text = f"{outcome.seconds:6.2f} s" if outcome.seconds is not None else "  no result"
    text += " (Analyze pressed)" if outcome.clicked else ""
    problems = outcome.exceptions + outcome.error_cards + [outcome.failure or ""]
    return text + "".join(f"  !! {p[:160]}" for p in problems if p)


def run_headless(n: int, workers: int | None, names: list[str] | None, timeout_s: float) -> None:
    chosen = load_samples(n, names)
    env = {"JITSCOPE_WORKERS": str(workers)} if workers else {}
    slots, budget = pool_figures(env)
    print(
        f"headless: {n} sessions on a real `streamlit run app.py`, {slots} workers, "
        f"pool budget {budget / GIB:.1f} GiB, {cores()} cores (shared with whoever else runs)"
    )
    with serve(env) as first:
        solo = asyncio.run(alone(first, chosen, slots, timeout_s))
    with serve(env) as second:
        burst = asyncio.run(at_once(second, chosen, slots, timeout_s))
    logged = first.tracebacks() + second.tracebacks()
    summarize(n, chosen, solo, burst, logged, second.memory, budget)


def pool_figures(env: dict[str, str]) -> tuple[int, int]:
    """The server's pool size and memory budget, computed as the server computes them
    (viz/worker: pool.default_pool_size, limits.default_memory_limit) in its
    environment."""
    from viz.worker.limits import default_memory_limit
    from viz.worker.pool import default_pool_size

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return default_pool_size(), default_memory_limit()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def summarize(
    n: int,
    chosen: list[Sample],
    solo: dict[str, Solo],
    burst: Burst,
    logged: int,
    memory: PeakMemory,
    budget: int,
) -> None:
    outcomes = burst.outcomes
    times = [o.seconds for o in outcomes if o.finished and o.seconds is not None]
    p50, p95 = (percentile(times, 0.5), percentile(times, 0.95)) if times else (0.0, 0.0)
    work = sum(solo[s.name].cpu_s for s in chosen)
    floor = work / cores()
    shown = sum(len(o.exceptions) for o in outcomes)
    cards = sum(len(o.error_cards) for o in outcomes)
    failed = sum(not o.finished for o in outcomes)
    exceptions = shown + cards + logged + failed
    print(
        f"\n{n} sessions at once: p50 {p50:.2f} s   p95 {p95:.2f} s   (wall {burst.wall_s:.1f} s)"
    )
    print(
        f"floor: {floor:.2f} s = {work:.1f} s of single-session server CPU / {cores()} cores"
        f"   -> p95 is {p95 / max(floor, 1e-9):.2f}x the floor"
    )
    others = max(burst.machine_cpu_s - burst.server_cpu_s, 0.0)
    print(
        f"CPU during the burst: server + workers {burst.server_cpu_s:.1f} s, everything "
        f"else on the machine {others:.1f} s, of {cores() * burst.wall_s:.0f} core-s"
    )
    print(
        f"exceptions: {exceptions} (exception elements {shown}, error cards {cards}, "
        f"tracebacks in the server log {logged}, sessions without a result {failed})"
    )
    print(
        f"peak RSS: server {memory.server / GIB:.2f} GiB, workers (sum) "
        f"{memory.workers / GIB:.2f} GiB of the pool's budget {budget / GIB:.1f} GiB"
    )
    targets(n, p95, floor, exceptions, failed, memory.workers, budget)


def targets(
    n: int, p95: float, floor: float, exceptions: int, failed: int, workers: int, budget: int
) -> None:
    """Issue #20's targets: for 8 sessions speed and no exceptions, for 32 that all
    finish, no exceptions and memory within budget. Every check is printed; the line
    says which the issue sets for this N."""
    checks = [
        (f"p95 <= {P95_OVER_FLOOR}x floor", p95 <= P95_OVER_FLOOR * floor, n == 8),
        ("0 exceptions", exceptions == 0, n in (8, 32)),
        ("all sessions finish", failed == 0, n == 32),
        ("workers' peak RSS within the pool budget", workers <= budget, n == 32),
    ]
    print("targets:")
    for name, ok, set_here in checks:
        scope = f"target for {n} sessions" if set_here else "not a target for this N"
        print(f"  {name:<42} {'PASS' if ok else 'FAIL'}   ({scope})")
