"""Precompiled batch-size buckets: `lower().compile()` once per bucket, and calls
padded along axis 0 to the smallest bucket that fits, so the jit cache never grows.

A router knows only the staged pipeline's `Target`; the cache session that owns one
(`viz.cache.session`) numbers its calls."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from viz.cache.events import BucketRow, RoutedEvent
from viz.errors import ErrorInfo, ErrorKind, UserCodeError
from viz.spec import resize
from viz.stages import block, trace
from viz.target import Target


@dataclass
class Bucket:
    """One ahead-of-time compiled executable (`jit(f).lower(...).compile()`)."""

    size: int
    compile_s: float
    executable: Any = field(repr=False)
    calls: int = 0
    padded_rows: int = 0
    useful_rows: int = 0

    def row(self) -> BucketRow:
        return BucketRow(self.size, self.compile_s, self.calls, self.padded_rows, self.useful_rows)


class BucketRouter:
    """Precompiled batch-size buckets for one parameter of a target's function; a
    call is padded along axis 0 to the smallest bucket that fits and runs the AOT
    executable, so the target's jit cache never grows."""

    def __init__(self, target: Target, param: str, sizes: list[int], args: str):
        self.target, self.param = target, param
        names = target.param_names(len(target.args(args).items))
        if param not in names:
            raise UserCodeError(
                ErrorInfo(ErrorKind.SPEC_ERROR, f"`{param}` is not a parameter", stage="spec")
            )
        self.index = names.index(param)
        self.buckets: dict[int, Bucket] = {}
        for size in sorted(set(sizes)):
            spec = resize(args, names, param, 0, size)
            compiled = trace(target, target.args(spec)).lower().compile()
            self.buckets[size] = Bucket(size, compiled.seconds, compiled.compiled)

    def call(self, number: int, spec: str, x64: bool | None = None) -> RoutedEvent:
        """Serve call `number` (the session's count) from the smallest bucket that fits."""
        target = self.target
        args = target.args(spec, x64)
        with target.scope(args):
            values = args.concrete()
            x = values[self.index]
            size = int(np.shape(x)[0])
            bucket = self._bucket(size)
            pad = [(0, bucket.size - size)] + [(0, 0)] * (np.ndim(x) - 1)
            values[self.index] = jax.numpy.pad(x, pad)
            start = time.perf_counter()
            block(bucket.executable(*target.dynamic(values)))
            wall = time.perf_counter() - start
        bucket.calls += 1
        bucket.padded_rows += bucket.size - size
        bucket.useful_rows += size
        return RoutedEvent(
            call=number,
            args=spec,
            aot_bucket=bucket.size,
            size=size,
            padding=bucket.size - size,
            run_s=wall,
            cache_size=target.jitted._cache_size(),
        )

    def _bucket(self, size: int) -> Bucket:
        fits = [b for b in self.buckets if b >= size]
        if not fits:
            largest = max(self.buckets)
            raise UserCodeError(
                ErrorInfo(
                    ErrorKind.SPEC_ERROR,
                    f"`{self.param}` has batch {size}, more than the largest bucket ({largest})",
                    "precompile a bucket at least that large",
                    stage="spec",
                )
            )
        return self.buckets[min(fits)]

    def table(self) -> list[BucketRow]:
        return [b.row() for b in self.buckets.values()]
