"""The memory the workers may use: the budget all of a pool's workers share, and its
default. A request that pushes the pool over it stops (`Worker` checks)."""

from __future__ import annotations

import os
import threading
from typing import Protocol


class Member(Protocol):
    """What the budget needs of a worker: the resident memory its requests hold now
    (beyond what its device's runtime holds from its start)."""

    def grown(self) -> int | None: ...


def default_memory_limit() -> int:
    """The budget all workers share: JITSCOPE_MEMORY_LIMIT_GB, else half of this
    machine's memory, at most 16 GiB."""
    if "JITSCOPE_MEMORY_LIMIT_GB" in os.environ:
        return int(float(os.environ["JITSCOPE_MEMORY_LIMIT_GB"]) * 2**30)
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 16 << 30
    return min(total // 2, 16 << 30)


class MemoryBudget:
    """One memory budget shared by every worker of a pool: a request that pushes the
    pool's total resident memory over it stops (the worker running it is the one
    growing). Thread-safe."""

    def __init__(self, total_bytes: int):
        self.total = total_bytes
        self._members: list[Member] = []
        self._lock = threading.Lock()

    def join(self, worker: Member) -> None:
        with self._lock:
            self._members.append(worker)

    def others(self, worker: Member) -> int:
        with self._lock:
            members = [w for w in self._members if w is not worker]
        return sum(w.grown() or 0 for w in members)
