"""A pool of workers per device: `JITSCOPE_WORKERS` main workers (plus a lessons
worker each), one shared memory budget, and each browser session pinned to one. A
device that one process owns (a TPU chip: `DeviceConfig.max_processes`) gets one
worker for everything, Explore, the lessons and the cache lab in turn."""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections import OrderedDict

from viz.platforms import DeviceConfig
from viz.worker.client import DEFAULT_TIMEOUT_S, LESSON_TIMEOUT_S, Worker
from viz.worker.limits import MemoryBudget, default_memory_limit
from viz.worker.protocol import Ping


def default_pool_size() -> int:
    """JITSCOPE_WORKERS, else one worker per core, as many as 2 GiB each of the shared
    budget allow, at most 4 (each idle worker holds a JAX runtime, ~0.3 GiB)."""
    with contextlib.suppress(ValueError):  # unset or not a number: the default
        return max(1, int(os.environ.get("JITSCOPE_WORKERS", "")))
    return max(1, min(os.cpu_count() or 1, default_memory_limit() // (2 << 30), 4))


class WorkerPool:
    """Per device, `size` slots, each a main worker and a lessons worker, created on
    first use; all share one memory budget. Each client (browser session) is pinned
    to one slot, the one with the fewest clients when it first asks. Thread-safe."""

    MAX_CLIENTS = 4096  # pins remembered (browser sessions end without a word)

    def __init__(
        self,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        size: int | None = None,
        memory_limit_bytes: int | None = None,
        demo: bool | None = None,
    ):
        self.timeout_s = timeout_s
        self.size = size or default_pool_size()
        self.budget = MemoryBudget(memory_limit_bytes or default_memory_limit())
        self.demo = demo
        self._workers: dict[tuple[str, str, int], Worker] = {}
        self._pins: OrderedDict[str, int] = OrderedDict()
        self._warmed: set[str] = set()  # devices whose main workers warm as they start
        self._later: list[threading.Timer] = []  # the other slots' warm-ups, to cancel
        self._lock = threading.Lock()
        atexit.register(self.close)

    def get(self, device: str, role: str = "main", slot: int = 0) -> Worker:
        """Slot `slot`'s worker for `device`; lessons get workers of their own (role
        'lessons') so that clearing caches for cold measurements never touches the
        cache lab. A device one process owns has one worker, every role's and slot's:
        requests queue for it (and a cache lab is told when a lesson emptied its cache:
        `viz.cache.clears`)."""
        with self._lock:
            key = self._key(device, role, slot)
            if key not in self._workers:
                timeout = self.timeout_s if key[1] == "main" else LESSON_TIMEOUT_S
                worker = Worker(device, timeout, budget=self.budget, demo=self.demo)
                self._workers[key] = worker
                if role == "main" and device in self._warmed:
                    threading.Thread(
                        target=worker.ask, args=(Ping(warm=True),), daemon=True
                    ).start()
            return self._workers[key]

    def _key(self, device: str, role: str, slot: int) -> tuple[str, str, int]:
        if self.shared(device):
            return (device, "main", 0)
        return (device, role, slot % self.size)

    @staticmethod
    def shared(device: str) -> bool:
        """Whether one worker serves every session and role on `device`."""
        return DeviceConfig.parse(device).max_processes == 1

    def slot(self, client: str) -> int:
        """The slot `client` is pinned to (assigned on first call)."""
        with self._lock:
            if client not in self._pins:
                load = [0] * self.size
                for pinned in self._pins.values():
                    load[pinned] += 1
                self._pins[client] = load.index(min(load))
                while len(self._pins) > self.MAX_CLIENTS:
                    self._pins.popitem(last=False)
            self._pins.move_to_end(client)
            return self._pins[client]

    def worker_for(self, client: str, device: str, role: str = "main") -> Worker:
        return self.get(device, role, self.slot(client))

    def warm(self, device: str, others_after_s: float = 20.0) -> None:
        """Start `device`'s main workers in the background, each warmed by one tiny
        analysis (JAX imports and XLA's start-up take a while; the first Analyze should
        neither wait for them nor measure them). Slot 0's starts now, for the first
        session; each other slot's when a session is first pinned to it, or after
        `others_after_s`: on a small machine their JAX imports would slow the first
        session's page."""
        with self._lock:
            self._warmed.add(device)
        self.get(device, "main", 0)
        others = threading.Timer(
            others_after_s, lambda: [self.get(device, "main", s) for s in range(self.size)]
        )
        others.daemon = True
        self._later.append(others)
        others.start()

    def workers(self) -> list[Worker]:
        with self._lock:
            return list(self._workers.values())

    def close(self) -> None:
        for timer in self._later:
            timer.cancel()
        for worker in self.workers():
            worker.close()
