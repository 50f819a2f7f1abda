"""What a cache-lab call did, and the cache's rows, as plain data (no jax): the
worker's cache session makes them, the Cache JSON and the app read them. `type`
tells the events apart on the wire (`event_from_dict`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from viz.cache.signature import Reason
from viz.errors import ErrorInfo
from viz.plain import Plain


@dataclass
class CallEvent(Plain):
    """A call of the jitted function: a hit, or a miss with every reason."""

    call: int
    args: str
    signature: str
    hit: bool
    compile_s: float
    wall_s: float
    run_s: float
    cache_size: int
    entry: int | None  # the table row that served (or was compiled for) the call
    closest: int | None = None  # for a miss: the most similar cached entry
    reasons: list[Reason] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. why a hit hit
    from_disk: bool = False
    guard: str | None = None  # set when the recompile guard tripped
    time: float = field(default_factory=time.time)
    type: str = ""

    def __post_init__(self) -> None:
        self.type = "hit" if self.hit else "miss"

    @property
    def status(self) -> str:
        """What a miss did to get its executable: loaded it from disk, or compiled it."""
        return "loaded from disk" if self.from_disk else "compile"


@dataclass
class RoutedEvent(Plain):
    """A call served by a precompiled batch-size bucket (padded; the jit cache untouched)."""

    call: int
    args: str
    aot_bucket: int
    size: int
    padding: int
    run_s: float
    cache_size: int
    time: float = field(default_factory=time.time)
    type: str = "routed"


@dataclass
class FailedEvent(Plain):
    """A call that raised; its error is classified like any other."""

    call: int
    args: str
    error: ErrorInfo
    cache_size: int
    time: float = field(default_factory=time.time)
    type: str = "failed"


CacheEvent = CallEvent | RoutedEvent | FailedEvent
_EVENTS: dict[str, type[Plain]] = {
    "hit": CallEvent,
    "miss": CallEvent,
    "routed": RoutedEvent,
    "failed": FailedEvent,
}


def event_from_dict(data: dict[str, Any]) -> CacheEvent:
    return _EVENTS[data["type"]].from_dict(data)


@dataclass
class EntryRow(Plain):
    """One jit cache entry: the signature it was compiled for and how it was used."""

    signature: dict[str, Any]  # viz.cache.signature.Signature as JSON
    describe: str  # the signature as one line
    compile_s: float
    created: int  # call number that compiled it
    hits: int = 0
    last_hit: int | None = None
    failed: bool = False  # tracing failed, yet jit kept a cache entry for the signature
    from_disk: bool = False  # the persistent compilation cache supplied the executable

    @property
    def status(self) -> str:
        if self.failed:
            return "trace failed"
        return "loaded from disk cache" if self.from_disk else "compiled"


@dataclass
class BucketRow(Plain):
    """One precompiled batch-size bucket and the calls it served."""

    bucket: int
    compile_s: float
    calls: int = 0
    padded_rows: int = 0
    useful_rows: int = 0

    @property
    def waste(self) -> float:
        """The share of rows the bucket computed on padding."""
        return self.padded_rows / max(self.padded_rows + self.useful_rows, 1)
