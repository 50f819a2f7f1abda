"""A live cache session: one real jitted function, called again and again.

Hits and misses are read from the jit cache itself (`_cache_size()` before and
after each call) and compile time from JAX's own compile events; the reasons
for a miss come from `viz.cache.explain_miss`. Runs in the worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from viz import events
from viz.cache import clears
from viz.cache.events import CacheEvent, CallEvent, EntryRow, FailedEvent, RoutedEvent
from viz.cache.keys import call_signature
from viz.cache.router import BucketRouter
from viz.cache.signature import Reason, Signature, explain_miss
from viz.errors import USER_EXITS, ErrorInfo
from viz.settings import Settings
from viz.sharding.build import device_mesh, platform_devices
from viz.spec import NARROWED, SpecError, array_specs
from viz.spec.mesh import MeshAxis, MeshSpec, parse_mesh
from viz.spec.partition import parse_partition
from viz.stages import block
from viz.target import Args, Target, spec_error

PLACEMENTS = ("default", "replicated", "sharded")  # plus 'device:N' and P(...)


def partition_sharding(placement: str, device: str, mesh: str = "") -> NamedSharding:
    """The NamedSharding of a placement written as the spec's suffix (`P('x', None)`,
    `@ P('x')`) on `mesh` (text, viz.spec.mesh; default: one axis `x` over every
    device of `device`'s platform); a spec_error for a partition or mesh that does not fit."""
    try:
        partition = parse_partition(placement)
        spec = parse_mesh(mesh) or MeshSpec((MeshAxis("x", len(platform_devices(device))),))
    except SpecError as exc:
        raise spec_error(f"placement: {exc}") from None
    unknown = [a for a in partition.axes if a not in spec.sizes]
    if unknown:
        raise spec_error(f"placement {partition}: mesh axis '{unknown[0]}' is not in {spec}")
    return NamedSharding(device_mesh(spec, device), PartitionSpec(*partition.entries))


def place(value: Any, placement: str, device: str = "cpu", mesh: str = "") -> Any:
    """Put every array leaf of `value` where the user asked, on the devices of
    `device`'s platform."""
    if placement == "default":
        return value
    devices = platform_devices(device)
    if placement.startswith("device:"):
        target: Any = devices[int(placement.split(":")[1])]
    elif placement.lstrip("@ ").startswith("P"):
        target = partition_sharding(placement, device, mesh)
    else:
        mesh = Mesh(np.array(devices), ("x",))
        spec = PartitionSpec("x") if placement == "sharded" else PartitionSpec()
        target = NamedSharding(mesh, spec)

    def put(leaf: Any) -> Any:
        if placement == "sharded" and (np.ndim(leaf) == 0 or np.shape(leaf)[0] % len(devices)):
            raise ValueError(
                f"cannot shard a {np.shape(leaf)} array over {len(devices)} "
                "devices: its leading dimension must divide evenly"
            )
        return jax.device_put(leaf, target)

    return jax.tree_util.tree_map(put, value)


@dataclass
class Entry:
    """One jit cache entry: the signature it is keyed on (compared with each call's)
    and its table row (counted as calls hit it)."""

    signature: Signature
    row: EntryRow

    @classmethod
    def compiled(cls, signature: Signature, compile_s: float, created: int, **flags: bool) -> Entry:
        row = EntryRow(signature.to_dict(), signature.describe(), compile_s, created, **flags)
        return cls(signature, row)


def x64_notes(args: Args) -> list[str]:
    """Why a 64-bit spec may hit a 32-bit entry: JAX canonicalizes it when x64 is off."""
    if args.x64:
        return []
    wide = sorted({leaf.dtype for leaf in array_specs(args.items)} & NARROWED.keys())
    return [f"{w} canonicalized to {NARROWED[w]}: x64 is off" for w in wide]


def emptied_note(by: str, number: int) -> str:
    return (
        f"JAX's caches were emptied by {by} after call {number} (the same worker "
        "serves it): the entries before are gone, so the table starts over here"
    )


class CacheSession:
    """One real jitted function (through the staged pipeline's `Target`), called
    again and again; its table has one row per jit cache entry."""

    def __init__(
        self,
        fn: Callable,
        static: list[str] | None = None,
        namespace: dict[str, Any] | None = None,
        device: str = "cpu",
        expressions: bool = True,  # False: specs take the spec language only (demo mode)
    ):
        self.target = Target.from_settings(
            Settings(static=list(static or ()), device=device),
            fn,
            namespace=namespace or {},
            expressions=expressions,
        )
        self.fn = fn
        self.static_nums = self.target.static_argnums
        self.jitted = self.target.jitted
        self.entries: list[Entry] = []
        self.events: list[CacheEvent] = []
        self.router: BucketRouter | None = None
        self.clears_seen = clears.CLEARS.count

    def emptied_by(self) -> str | None:
        """What emptied JAX's caches (this function's among them) since the last look,
        or None; the table starts over then: its entries are gone."""
        by = clears.since(self.clears_seen)
        self.clears_seen = clears.CLEARS.count
        if by is not None and self.entries:
            self.entries.clear()
            return by
        return None

    def clear(self) -> None:
        self.jitted.clear_cache()
        self.entries.clear()
        self.events.clear()
        self.router = None

    def precompile(self, param: str, sizes: list[int], args: str) -> None:
        self.router = BucketRouter(self.target, param, sizes, args)

    def routed_call(self, args: str, x64: bool | None = None) -> RoutedEvent:
        """A call served by the precompiled buckets (padding the batch)."""
        assert self.router is not None
        event = self.router.call(len(self.events) + 1, args, x64)
        self.events.append(event)
        return event

    def values(
        self, args: Args, placements: dict[str, str] | None = None, mesh: str = ""
    ) -> list[Any]:
        """Concrete arguments, each placed where the user asked (inside the target's scope)."""
        values = args.concrete()
        names = self.target.param_names(len(values))
        placements = placements or {}
        return [
            place(v, placements.get(n, "default"), self.target.device, mesh)
            if i not in self.static_nums
            else v
            for i, (n, v) in enumerate(zip(names, values, strict=True))
        ]

    def call(
        self,
        spec: str,
        placements: dict[str, str] | None = None,
        fail_on_recompile: bool = False,
        x64: bool | None = None,
        mesh: str = "",
    ) -> CallEvent:
        """Call the jitted function once; `x64` None follows the spec, as Explore does;
        `mesh`: the mesh a `P(...)` placement splits over (default: `x` over every device)."""
        emptied = self.emptied_by()
        args = self.target.args(spec, x64=x64)
        with self.target.scope(args):
            values = self.target.traceable(self.values(args, placements, mesh))
            names = self.target.param_names(len(values))
            signature = call_signature(names, values, self.static_nums, args.x64)
            size_before = self.jitted._cache_size()
            with events.collect() as found:
                start = time.perf_counter()
                try:
                    block(self.jitted(*values))
                except (Exception, *USER_EXITS):
                    self._record_failure(signature, size_before)
                    raise
                wall = time.perf_counter() - start
        hit = self.jitted._cache_size() == size_before
        event = self._record(spec, signature, hit, 0.0 if hit else found.compile_seconds(), wall)
        event.notes = x64_notes(args)
        if emptied is not None:
            event.notes.insert(0, emptied_note(emptied, number=len(self.events) - 1))
        if not hit and found.from_disk():
            event.from_disk = self.entries[-1].row.from_disk = True
        if fail_on_recompile and not hit and len(self.entries) > 1:
            event.guard = "recompiled: the cache grew while the recompile guard was on"
        return event

    def _record_failure(self, signature: Signature, size_before: int) -> None:
        """A call that failed can still leave a cache entry; keep one row per entry."""
        if self.jitted._cache_size() > size_before:
            self.entries.append(Entry.compiled(signature, 0.0, len(self.events) + 1, failed=True))

    def record_error(self, args: str, error: ErrorInfo) -> FailedEvent:
        """Log a failed call, so call numbers stay unique and the timeline shows it."""
        event = FailedEvent(len(self.events) + 1, args, error, self.jitted._cache_size())
        self.events.append(event)
        return event

    def _record(
        self, args: str, signature: Signature, hit: bool, compile_s: float, wall: float
    ) -> CallEvent:
        number = len(self.events) + 1
        reasons: list[Reason] = []
        closest = None
        if hit:
            entry = next((e for e in self.entries if e.signature == signature), None)
            if entry is not None:
                entry.row.hits += 1
                entry.row.last_hit = number
                used = self.entries.index(entry)
            else:  # the cache matched a signature we describe differently
                used = None
        else:
            miss = explain_miss(signature, [e.signature for e in self.entries])
            reasons, closest = list(miss.reasons), miss.closest
            self.entries.append(Entry.compiled(signature, compile_s, number))
            used = len(self.entries) - 1
        event = CallEvent(
            call=number,
            args=args,
            signature=signature.describe(),
            hit=hit,
            compile_s=compile_s,
            wall_s=wall,
            run_s=max(wall - compile_s, 0.0),
            cache_size=self.jitted._cache_size(),
            entry=used,
            closest=closest,
            reasons=reasons,
        )
        self.events.append(event)
        return event

    def table(self) -> list[EntryRow]:
        return [e.row for e in self.entries]
