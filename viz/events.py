"""JAX's own monitoring events, collected per block of work.

JAX reports how long it spent tracing, lowering and compiling (and whether the
persistent cache served an executable) through `jax.monitoring`. A listener is
registered once; each `collect()` block receives only the events emitted while
it is open, and nothing is kept after the block closes.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import jax

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
DISK_CACHE_HIT = "/compilation_cache/cache_hits"

_open: list[list[tuple[str, float]]] = []  # one list per open collect() block
_lock = threading.Lock()


def _record(name: str, duration: float = 0.0, **_: Any) -> None:
    if "/compile" not in name and "cache" not in name:
        return
    with _lock:
        for events in _open:
            events.append((name, duration))


def _record_plain(name: str, **_: Any) -> None:
    _record(name)  # e.g. /jax/compilation_cache/cache_hits carries no duration


jax.monitoring.register_event_duration_secs_listener(_record)
jax.monitoring.register_event_listener(_record_plain)


@dataclass
class CompileEvents:
    """The compile and cache events JAX emitted inside one `collect()` block."""

    events: list[tuple[str, float]] = field(default_factory=list)

    def totals(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for name, duration in self.events:
            totals[name] = totals.get(name, 0.0) + duration
        return totals

    def compile_seconds(self) -> float:
        """Time JAX spent tracing, lowering and compiling, by its own events."""
        return sum(d for name, d in self.events if "/compile/" in name)

    def backend_compiles(self) -> int:
        """How many XLA compilations ran (each jitted function or eager primitive)."""
        return sum(1 for name, _ in self.events if name == BACKEND_COMPILE)

    def from_disk(self) -> bool:
        """Whether the persistent compilation cache supplied an executable."""
        return any(name.endswith(DISK_CACHE_HIT) for name, _ in self.events)


@contextlib.contextmanager
def collect() -> Iterator[CompileEvents]:
    """Collect JAX's compile events emitted (by any thread) while the block runs."""
    found = CompileEvents()
    with _lock:
        _open.append(found.events)
    try:
        yield found
    finally:
        with _lock:  # by identity: two blocks' lists may be equal
            del _open[next(i for i, e in enumerate(_open) if e is found.events)]
