"""Per-kernel time: run the compiled function under `jax.profiler` and read the
trace back with `jax.profiler.ProfileData`.

XLA names each kernel's trace event exactly as the HLO instruction: on CPU the
thunk executor emits one event per kernel it runs (`sort.0`, `ynn_fusion.2`); on
GPU the device planes carry the kernels launched for each instruction under
the same names. So the events are picked by name, from the device planes when
any of them names a kernel, else from the host planes. A kernel's events may
overlap (the same kernel seen on two threads, a kernel split across a thread
pool); its time is the length of the union of its events, so nothing is counted
twice.

`profile`: {source, runs, step_s, kernels[{name, calls, mean_s, total_s, share}],
unattributed_s, per_kernel_events, concurrent, trace_file}
- step_s: mean wall time of one call while profiled (perf_counter around each
  call, waiting for its result);
- total_s: the kernel's time over all runs; mean_s = total_s / runs, its time per
  step; calls: its events (merged where they overlap) over all runs;
- share = mean_s / step_s. Kernels that run at the same time can make the
  shares add up to more than 1; `concurrent` says so;
- unattributed_s = step_s minus the kernels' time per step, or 0.
"""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from viz.plain import Plain

SOURCE = "jax.profiler"


@dataclass
class KernelTime(Plain):
    name: str
    calls: int
    mean_s: float
    total_s: float
    share: float


@dataclass
class Profile(Plain):
    source: str
    runs: int
    step_s: float
    kernels: list[KernelTime] = field(default_factory=list)
    unattributed_s: float = 0.0
    per_kernel_events: bool = True  # False: the platform emitted none by kernel name
    concurrent: bool = False  # shares add up to more than 1
    trace_file: str | None = None  # the Chrome JSON trace (gzip) JAX's profiler wrote


def profile_kernels(
    call: Callable[[], Any],
    block: Callable[[Any], Any],
    kernel_names: Iterable[str],
    runs: int = 5,
    trace_dir: str | None = None,
) -> Profile:
    """Run `call` (already compiled and warmed up) `runs` times under the profiler.

    `kernel_names`: the compiled program's kernels (instruction names). The
    Perfetto trace JAX writes is kept under `trace_dir` (a temporary folder when
    None; `trace_file` names it). Raises what the profiler raises.
    """
    import jax

    names = set(kernel_names)
    folder = Path(trace_dir or trace_folder())
    block(call())  # warm: the first call may allocate
    steps = []
    jax.profiler.start_trace(str(folder), create_perfetto_trace=True)
    try:
        for _ in range(runs):
            start = time.perf_counter()
            block(call())
            steps.append(time.perf_counter() - start)
    finally:
        jax.profiler.stop_trace()
    xplane = newest(folder, "*.xplane.pb")
    events = read_events(xplane, names) if xplane else {}
    trace = newest(folder, "perfetto_trace.json.gz")
    result = summarize(events, runs, sum(steps) / len(steps))
    result.trace_file = str(trace) if trace else None
    return result


KEPT_TRACES = 8


def trace_folder() -> Path:
    """A new folder under $JITSCOPE_HOME/traces; only the newest KEPT_TRACES stay."""
    from viz.source import home

    root = home() / "traces"
    root.mkdir(parents=True, exist_ok=True)
    old = sorted(root.iterdir(), key=lambda p: p.stat().st_mtime)[: -(KEPT_TRACES - 1) or None]
    for folder in old:
        shutil.rmtree(folder, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix="trace-", dir=root))


def newest(folder: Path, pattern: str) -> Path | None:
    found = sorted(folder.rglob(pattern), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def read_events(xplane: Path, names: set[str]) -> dict[str, list[tuple[int, int]]]:
    """kernel name → its (start_ns, end_ns) events, from the device planes when any
    of them names a kernel, else from the host planes."""
    from jax.profiler import ProfileData

    data = ProfileData.from_file(str(xplane))
    device: dict[str, list[tuple[int, int]]] = {}
    host: dict[str, list[tuple[int, int]]] = {}
    for plane in data.planes:
        into = device if plane.name.startswith("/device:") else host
        for line in plane.lines:
            for event in line.events:
                if event.name in names:
                    start = int(event.start_ns)
                    into.setdefault(event.name, []).append((start, start + int(event.duration_ns)))
    return device or host


def summarize(events: dict[str, list[tuple[int, int]]], runs: int, step_s: float) -> Profile:
    """The Profile of per-kernel events gathered over `runs` calls."""
    kernels = []
    for name, spans in events.items():
        merged = _union(spans)
        total = sum(end - start for start, end in merged) / 1e9
        mean = total / runs
        share = mean / step_s if step_s > 0 else 0.0
        kernels.append(KernelTime(name, len(merged), mean, total, share))
    kernels.sort(key=lambda k: k.total_s, reverse=True)
    busy = sum(k.mean_s for k in kernels)
    return Profile(
        SOURCE,
        runs,
        step_s,
        kernels,
        unattributed_s=max(step_s - busy, 0.0),
        per_kernel_events=bool(kernels),
        concurrent=busy > step_s,
    )


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping spans merged into one."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def save_trace(profile: Profile, out: Path) -> None:
    """Copy the Chrome JSON trace of a profile to `out` (gzip kept when `out` ends
    in .gz, else written plain). Raises FileNotFoundError without one."""
    src = Path(profile.trace_file or "")
    if not src.is_file():
        raise FileNotFoundError("the profile kept no trace file")
    if out.suffix == ".gz":
        shutil.copyfile(src, out)
        return
    with gzip.open(src, "rt") as f:
        data = json.load(f)
    out.write_text(json.dumps(data))
