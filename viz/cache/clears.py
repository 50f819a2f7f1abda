"""`jax.clear_caches()` in the worker, counted with what called it. One worker may serve
the cache lab and requests that empty JAX's caches (a lesson's cold measurements, a
compile profile, the user's own code; on a device one process owns, all of them), so a
cache session asks here whether its live cache was emptied since its last call, and by
what, instead of showing entries that are gone."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class Clears:
    count: int = 0  # jax.clear_caches() calls since the watch began
    by: str = ""  # what made the last one
    doing: str = ""  # what this process is doing now (the request in flight)


CLEARS = Clears()


def watch() -> None:
    """Count `jax.clear_caches()` calls from now on (idempotent)."""
    import jax

    clear = jax.clear_caches
    if getattr(clear, "_jitscope_counted", False):
        return

    def counted() -> None:
        clear()
        CLEARS.count += 1
        CLEARS.by = CLEARS.doing or "code in this worker"

    counted._jitscope_counted = True  # type: ignore[attr-defined]
    jax.clear_caches = counted


@contextlib.contextmanager
def doing(what: str) -> Iterator[None]:
    """While the block runs, a clear is said to be made by `what`."""
    before, CLEARS.doing = CLEARS.doing, what
    try:
        yield
    finally:
        CLEARS.doing = before


def since(count: int) -> str | None:
    """What emptied JAX's caches after the `count`-th clear, or None if nothing did."""
    return CLEARS.by if CLEARS.count != count else None
