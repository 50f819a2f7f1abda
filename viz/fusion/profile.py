"""Per-kernel time: run the compiled function under `jax.profiler` and read the
Perfetto trace it writes through `viz.platforms.trace` (the one reader of a trace).

Which events are kernels is the platform's (`Platform.trace_rules`, made of
`viz.platforms.trace`'s parts): on CPU the thunk executor emits one event per kernel it
runs, named exactly as the HLO instruction (`sort.0`, `ynn_fusion.2`); on GPU the device
processes carry the kernels launched for each instruction under the same names; on TPU
the thread `XLA Ops` of the chip's device process has one event per executed
instruction, named by its whole text, with its device time, FLOPs and bytes. A kernel's
events may overlap (the same kernel seen on two threads, a kernel split across a thread
pool); its time is the length of the union of its events, so nothing is counted twice.

`profile`: {source, runs, step_s, kernels[{name, calls, mean_s, total_s, share, flops,
bytes_accessed, category, no_cost}], unattributed_s, per_kernel_events, concurrent, trace_file,
platform, device_kind, device_step_s}
- step_s: mean wall time of one call while profiled (perf_counter around each
  call, waiting for its result);
- total_s: the kernel's time over all runs; mean_s = total_s / runs, its time per
  step; calls: its events (merged where they overlap) over all runs;
- flops, bytes_accessed: the kernel's per step, where the platform's trace carries them
  (TPU: `model_flops`, `bytes_accessed`); None where it does not (CPU), or where XLA
  has no cost for the kernel (TPU: a custom call), `no_cost` then saying why;
- share = mean_s / step_s (device_step_s where the platform has a device clock).
  Kernels that run at the same time can make the shares add up to more than 1;
  `concurrent` says so;
- unattributed_s = the step (device_step_s where known) minus the kernels' time per
  step, or 0;
- device_step_s: the program's own time per call on the device's clock (the trace's
  `XLA Modules` runs); None where the platform has no device clock (CPU: the program
  runs on the host, the wall clock is its clock) or the trace holds none.
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
from viz.platforms import platform_of
from viz.platforms.trace import KernelEvent, TraceEvent, read_trace

SOURCE = "jax.profiler"


@dataclass
class KernelTime(Plain):
    name: str
    calls: int
    mean_s: float
    total_s: float
    share: float
    flops: float | None = None  # per step; None: the platform's trace does not say
    bytes_accessed: float | None = None  # per step
    category: str = ""  # the platform's class of the kernel (TPU: hlo_category)
    # why its FLOPs and bytes are unknown where the trace gives other kernels' ("" where
    # known, or where it gives none, as on CPU)
    no_cost: str = ""  # "pallas" (no cost_estimate), else a custom call's target


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
    platform: str = ""  # cpu, gpu, tpu
    device_kind: str = ""  # as JAX names it: "TPU v5 lite", "cpu"
    device_step_s: float | None = None  # the program's time per call on the device's clock

    @property
    def busy_step_s(self) -> float:
        """The step the kernels' shares are of: the device's where it has a clock."""
        return self.device_step_s if self.device_step_s is not None else self.step_s


def profile_kernels(
    call: Callable[[], Any],
    block: Callable[[Any], Any],
    kernel_names: Iterable[str],
    runs: int = 5,
    trace_dir: str | None = None,
    device: str = "cpu",
    program: str | None = None,
) -> Profile:
    """Run `call` (already compiled and warmed up) `runs` times under the profiler.

    `kernel_names`: the compiled program's kernels (instruction names); `device`: the
    device configuration it runs on (`cpu`, `cpu:8`, `tpu`); `program`: its HLO
    module's name (the trace's program runs are picked by it). The Perfetto trace JAX
    writes is kept under `trace_dir` (a temporary folder when None; `trace_file` names
    it). Raises what the profiler raises.
    """
    import jax

    from viz.target import resolve_device

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
    trace = newest(folder, "perfetto_trace.json.gz")
    events = read_trace(trace) if trace else []
    result = profile_of(events, set(kernel_names), runs, sum(steps) / len(steps), device, program)
    result.trace_file = str(trace) if trace else None
    result.device_kind = resolve_device(device).device_kind
    return result


def profile_of(
    events: list[TraceEvent],
    names: set[str],
    runs: int,
    step_s: float,
    device: str = "cpu",
    program: str | None = None,
) -> Profile:
    """The Profile of a trace's events over `runs` calls of `program` on `device`."""
    platform = platform_of(device)
    rules = platform.trace_rules
    times = rules.device_times(events, program)
    device_step = sum(times) / runs if times and runs else None
    by_kernel: dict[str, list[KernelEvent]] = {}
    for event in rules.kernel_events(events, names, program):
        by_kernel.setdefault(event.name, []).append(event)
    result = summarize(by_kernel, runs, step_s, device_step)
    result.platform = platform.name
    return result


KEPT_TRACES = 8


def trace_folder() -> Path:
    """A new folder under $JITSCOPE_HOME/traces; only the newest KEPT_TRACES stay."""
    from viz.locations import home

    root = home() / "traces"
    root.mkdir(parents=True, exist_ok=True)
    old = sorted(root.iterdir(), key=lambda p: p.stat().st_mtime)[: -(KEPT_TRACES - 1) or None]
    for folder in old:
        shutil.rmtree(folder, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix="trace-", dir=root))


def newest(folder: Path, pattern: str) -> Path | None:
    found = sorted(folder.rglob(pattern), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def summarize(
    events: dict[str, list[KernelEvent]],
    runs: int,
    step_s: float,
    device_step_s: float | None = None,
) -> Profile:
    """The Profile of per-kernel events gathered over `runs` calls; `device_step_s`:
    the program's time per call on the device's clock, where the platform has one."""
    step = device_step_s if device_step_s is not None else step_s
    kernels = [_kernel_time(name, runs_of, runs, step) for name, runs_of in events.items()]
    kernels.sort(key=lambda k: k.total_s, reverse=True)
    busy = sum(k.mean_s for k in kernels)
    return Profile(
        SOURCE,
        runs,
        step_s,
        kernels,
        unattributed_s=max(step - busy, 0.0),
        per_kernel_events=bool(kernels),
        concurrent=busy > step,
        device_step_s=device_step_s,
    )


def _kernel_time(name: str, events: list[KernelEvent], runs: int, step_s: float) -> KernelTime:
    merged = _union([(e.start_ns, e.end_ns) for e in events])
    total = sum(end - start for start, end in merged) / 1e9
    mean = total / runs
    flops = _per_step([e.flops for e in events], runs)
    moved = _per_step([e.bytes_accessed for e in events], runs)
    return KernelTime(
        name,
        len(merged),
        mean,
        total,
        mean / step_s if step_s > 0 else 0.0,
        flops,
        moved,
        next((e.category for e in events if e.category), ""),
        "" if flops is not None else next((e.no_cost for e in events if e.no_cost), ""),
    )


def _per_step(values: list[float | None], runs: int) -> float | None:
    """The sum of the events' values per run; None when none of them says."""
    known = [v for v in values if v is not None]
    return sum(known) / runs if known and runs else None


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
