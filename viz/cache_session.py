"""A live cache session: one real jitted function, called again and again.

Hits and misses are read from the jit cache itself (`_cache_size()` before and
after each call) and compile time from JAX's own compile events; the reasons
for a miss come from `viz.cache.explain_miss`. Runs in the worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from viz.cache import ArgSig, LeafSig, Signature, explain_miss
from viz.errors import ErrorInfo, UserCodeError
from viz.pipeline import (
    compile_events,
    compile_seconds,
    disk_cache_hit,
    param_names,
    static_argnums,
)
from viz.spec import DTYPES, abstract_args, concrete_args, parse_spec, resize

PLACEMENTS = ("default", "replicated", "sharded")  # plus 'device:N'


_SHORT_NAMES = {dtype: name for name, dtype in DTYPES.items()}


def dtype_name(dtype: Any) -> str:
    """numpy dtype → jaxpr spelling (float32 → f32, key<fry> stays as is)."""
    try:
        return _SHORT_NAMES.get(np.dtype(dtype), str(dtype))
    except TypeError:  # extended dtypes such as PRNG keys
        return str(dtype)


def _sharding_text(x: Any) -> tuple[str, str]:
    """(sharding, device) of a leaf as the cache sees them."""
    sharding = getattr(x, "sharding", None)
    if isinstance(sharding, NamedSharding):
        axes = ",".join(f"{k}={v}" for k, v in sharding.mesh.shape.items())
        return f"{sharding.spec} over mesh({axes})", "default"
    if getattr(x, "committed", False) and sharding is not None:
        (device,) = sharding.device_set
        return "default", f"{device.platform}:{device.id}"
    return "default", "default"


def leaf_signature(path: str, x: Any) -> LeafSig:
    python_scalar = isinstance(x, bool | int | float | complex)
    aval = jax.typeof(x)
    sharding, device = _sharding_text(x) if isinstance(x, jax.Array) else ("default", "default")
    return LeafSig(
        path,
        tuple(aval.shape),
        dtype_name(aval.dtype),
        bool(aval.weak_type),
        python_scalar,
        sharding,
        device,
    )


def call_signature(names: list[str], values: list[Any], static: tuple[int, ...]) -> Signature:
    args = []
    for i, (name, value) in enumerate(zip(names, values, strict=True)):
        if i in static:
            args.append(ArgSig(name, True, value=repr(value)))
            continue
        leaves, tree = jax.tree_util.tree_flatten_with_path(value)
        sigs = tuple(
            leaf_signature(name + jax.tree_util.keystr(path), leaf) for path, leaf in leaves
        )
        args.append(ArgSig(name, False, tree=_tree_text(tree), leaves=sigs))
    return Signature(tuple(args))


def _tree_text(tree: Any) -> str:
    text = str(tree)
    return text.removeprefix("PyTreeDef(").removesuffix(")")


def place(value: Any, placement: str) -> Any:
    """Put every array leaf of `value` where the user asked."""
    if placement == "default":
        return value
    devices = jax.devices()
    if placement.startswith("device:"):
        target: Any = devices[int(placement.split(":")[1])]
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
    signature: Signature
    compile_s: float
    created: int  # call number that compiled it
    hits: int = 0
    last_hit: int | None = None
    failed: bool = False  # tracing failed, yet jit kept a cache entry for the signature
    from_disk: bool = False  # the persistent compilation cache supplied the executable

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["signature"] = self.signature.to_dict()
        data["describe"] = self.signature.describe()
        return data


@dataclass
class CacheSession:
    fn: Callable
    static: list[str] = field(default_factory=list)
    namespace: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.static_nums = static_argnums(self.fn, self.static)
        self.jitted = jax.jit(self.fn, static_argnums=self.static_nums)
        self.entries: list[Entry] = []
        self.events: list[dict[str, Any]] = []
        self.router: BucketRouter | None = None

    def clear(self) -> None:
        self.jitted.clear_cache()
        self.entries.clear()
        self.events.clear()
        self.router = None

    def precompile(self, param: str, sizes: list[int], args: str) -> None:
        self.router = BucketRouter(self, param, sizes, args)

    def routed_call(self, args: str) -> dict[str, Any]:
        """A call served by the precompiled buckets (padding the batch)."""
        assert self.router is not None
        event = self.router.call(args)
        self.events.append(event)
        return event

    def call(
        self, args: str, placements: dict[str, str] | None = None, fail_on_recompile: bool = False
    ) -> dict[str, Any]:
        values = concrete_args(parse_spec(args, self.namespace))
        names = param_names(self.fn, len(values))
        placements = placements or {}
        values = [
            place(v, placements.get(n, "default")) if i not in self.static_nums else v
            for i, (n, v) in enumerate(zip(names, values, strict=True))
        ]
        signature = call_signature(names, values, self.static_nums)
        dynamic_before = self.jitted._cache_size()
        with compile_events() as events:
            start = time.perf_counter()
            try:
                jax.block_until_ready(self.jitted(*values))
            except Exception:
                self._record_failure(signature, dynamic_before)
                raise
            wall = time.perf_counter() - start
        hit = self.jitted._cache_size() == dynamic_before
        compile_s = 0.0 if hit else compile_seconds(events)
        event = self._record(args, signature, hit, compile_s, wall)
        if not hit and disk_cache_hit(events):
            event["from_disk"] = self.entries[-1].from_disk = True
        if fail_on_recompile and not hit and len(self.entries) > 1:
            event["guard"] = "recompiled: the cache grew while the recompile guard was on"
        return event

    def _record_failure(self, signature: Signature, size_before: int) -> None:
        """A call that failed can still leave a cache entry; keep one row per entry."""
        if self.jitted._cache_size() > size_before:
            self.entries.append(Entry(signature, 0.0, len(self.events) + 1, failed=True))

    def record_error(self, args: str, error: dict[str, Any]) -> dict[str, Any]:
        """Log a failed call, so call numbers stay unique and the timeline shows it."""
        event = {
            "call": len(self.events) + 1,
            "args": args,
            "error": error,
            "cache_size": self.jitted._cache_size(),
            "time": time.time(),
        }
        self.events.append(event)
        return event

    def _record(
        self, args: str, signature: Signature, hit: bool, compile_s: float, wall: float
    ) -> dict[str, Any]:
        number = len(self.events) + 1
        reasons: list[dict[str, str]] = []
        closest = None
        if hit:
            entry = next((e for e in self.entries if e.signature == signature), None)
            if entry is not None:
                entry.hits += 1
                entry.last_hit = number
                used = self.entries.index(entry)
            else:  # the cache matched a signature we describe differently
                used = None
        else:
            miss = explain_miss(signature, [e.signature for e in self.entries])
            reasons, closest = [r.to_dict() for r in miss.reasons], miss.closest
            self.entries.append(Entry(signature, compile_s, number))
            used = len(self.entries) - 1
        event = {
            "call": number,
            "args": args,
            "signature": signature.describe(),
            "hit": hit,
            "compile_s": compile_s,
            "wall_s": wall,
            "run_s": max(wall - compile_s, 0.0),
            "cache_size": self.jitted._cache_size(),
            "entry": used,
            "closest": closest,
            "reasons": reasons,
            "time": time.time(),
        }
        self.events.append(event)
        return event

    def table(self) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self.entries]


@dataclass
class Bucket:
    """One ahead-of-time compiled executable (`jit(f).lower(...).compile()`)."""

    size: int
    compile_s: float
    executable: Any = field(repr=False)
    calls: int = 0
    padded_rows: int = 0
    useful_rows: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "bucket": self.size,
            "compile_s": self.compile_s,
            "calls": self.calls,
            "padded_rows": self.padded_rows,
            "useful_rows": self.useful_rows,
        }


class BucketRouter:
    """Precompiled batch-size buckets for one parameter of a session's function; a
    call is padded along axis 0 to the smallest bucket that fits and runs the AOT
    executable, so the jit cache never grows."""

    def __init__(self, session: CacheSession, param: str, sizes: list[int], args: str):
        self.session, self.param = session, param
        names = param_names(session.fn, len(parse_spec(args, session.namespace)))
        self.index = names.index(param)
        self.buckets: dict[int, Bucket] = {}
        for size in sorted(set(sizes)):
            spec = resize(args, names, param, 0, size)
            abstract = abstract_args(parse_spec(spec, session.namespace))
            start = time.perf_counter()
            executable = session.jitted.lower(*abstract).compile()
            self.buckets[size] = Bucket(size, time.perf_counter() - start, executable)

    def call(self, args: str) -> dict[str, Any]:
        values = concrete_args(parse_spec(args, self.session.namespace))
        x = values[self.index]
        size = int(np.shape(x)[0])
        fits = [b for b in self.buckets if b >= size]
        if not fits:
            largest = max(self.buckets)
            raise UserCodeError(
                ErrorInfo(
                    "spec_error",
                    f"`{self.param}` has batch {size}, more than the largest bucket ({largest})",
                    "precompile a bucket at least that large",
                    stage="spec",
                )
            )
        bucket = self.buckets[min(fits)]
        pad = [(0, bucket.size - size)] + [(0, 0)] * (np.ndim(x) - 1)
        values[self.index] = jax.numpy.pad(x, pad)
        dynamic = [v for i, v in enumerate(values) if i not in self.session.static_nums]
        start = time.perf_counter()
        jax.block_until_ready(bucket.executable(*dynamic))
        wall = time.perf_counter() - start
        bucket.calls += 1
        bucket.padded_rows += bucket.size - size
        bucket.useful_rows += size
        return {
            "call": len(self.session.events) + 1,
            "args": args,
            "aot_bucket": bucket.size,
            "size": size,
            "padding": bucket.size - size,
            "run_s": wall,
            "cache_size": self.session.jitted._cache_size(),
            "time": time.time(),
        }

    def table(self) -> list[dict[str, Any]]:
        return [b.to_dict() for b in self.buckets.values()]
