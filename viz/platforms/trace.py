"""The one reader of a `jax.profiler` trace, for the kernel profile
(`viz.fusion.profile`) and the compile profile (`viz.compile_profile.spans`) alike.

`read_trace(path)` reads the Chrome/Perfetto JSON trace JAX writes beside its
`.xplane.pb` (`start_trace(..., create_perfetto_trace=True)`: `perfetto_trace.json.gz`)
into plain `TraceEvent`s: process, thread, name, start, end (ns) and args. Its
`traceEvents` hold metadata events (`ph: M`) naming each process and thread, and one
complete event (`ph: X`, `ts` and `dur` in µs) per span.

What the events mean differs by platform: each platform module names its `TraceRules`
(`Platform.trace_rules`, found by `viz.platforms.platform_of(device)`) from the parts here:
- **cpu**: the thunk executor emits one event per kernel it runs, named exactly as
  the HLO instruction (`sort.0`, `ynn_fusion.2`), on host threads; a kernel's code
  generation is a `FusionCompiler::Compile` span whose `module` arg is
  `<kernel>_kernel_module`. There is no device clock: the program runs on the host.
- **gpu**: the device processes (`/device:GPU:N`) carry the kernels launched for each
  instruction under its name; XLA's passes are `XlaPass` ranges named by their
  `name` arg.
- **tpu**: the process `/device:TPU:N`, thread `XLA Ops`: one event per executed HLO
  instruction, named by the instruction (`fusion.3`; jax 0.10.2 with libtpu 0.0.42,
  recorded) or by its whole text (`%fusion.3 = f32[256]{0} fusion(...), ...`, as the
  text is in `long_name`: both read), with args `device_duration_ps`, `bytes_accessed`,
  `model_flops`, `hlo_category`, `long_name`, `shape_with_layout`; thread
  `XLA Modules`: one event per program run, its device time; thread
  `Async XLA Ops`: copy-start/copy-done. Code generation reads
  `XLA::TPU emitting for <kernel>`. XLA's cost analysis has no cost for a custom call:
  its events say `model_flops: "0"` and `bytes_accessed: "0"` (a Pallas kernel's, a
  `tpu_custom_call`, unless given `cost_estimate=`; XLA's own, `ConcatBitcast`), where
  every instruction XLA costs moves bytes (a copy: 0 FLOPs, its bytes). Both zero reads
  as unknown (None), with the reason (`no_cost`).
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEVICE_PREFIX = "/device:"
MODULES_THREAD = "XLA Modules"  # one event per program run, on a device's clock
OPS_THREAD = "XLA Ops"  # one event per executed instruction (TPU)
# an HLO custom call's target in its text (the HLO reader's too, `viz.ir.hlo_text`)
CUSTOM_CALL_TARGET = re.compile(r'\bcustom_call_target="([^"]*)"')
PALLAS_TARGET = "tpu_custom_call"  # the custom call a Pallas kernel lowers to on TPU
# ...and XLA's TPU compiler's own kernels too (the 24-layer sample's attention became 24
# `online-softmax` ones): a Pallas kernel's op is the user's `pallas_call`
PALLAS_OP = "pallas_call"
# A kernel's `no_cost` reason when it is a Pallas kernel given no `cost_estimate=`
# (others: the custom call's target, as `ConcatBitcast`, or the instruction's category).
PALLAS = "pallas"
# The categories of the two halves of an asynchronous op (TPU: hlo_category): a half's
# device time is the start of a transfer or the wait for it, not the transfer, which runs
# beside other kernels; its bytes are the whole transfer's.
ASYNC_HALVES = frozenset({"copy-start", "copy-done", "async-start", "async-done"})


@dataclass(slots=True)  # not frozen: a 24-layer model's trace makes 15,000 of them
class TraceEvent:
    """One complete span of the trace."""

    process: str  # "/host:CPU", "/device:TPU:0"
    thread: str  # the thread's (line's) name: "XLA Ops", "tf_xla-cpu-codegen/…"
    tid: int  # tells apart threads of one name
    name: str
    start_ns: int
    end_ns: int
    args: Mapping[str, Any] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9

    @property
    def on_device(self) -> bool:
        return self.process.startswith(DEVICE_PREFIX)


def read_trace(path: Path | str) -> list[TraceEvent]:
    """Every complete event of the Chrome/Perfetto JSON trace at `path` (gzip when its
    name ends in .gz), in file order. Raises OSError / ValueError on an unreadable file."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return trace_events(data.get("traceEvents", []) if isinstance(data, dict) else data)


def trace_events(raw: Iterable[Mapping[str, Any]]) -> list[TraceEvent]:
    """The complete events (`ph: X`) of a trace's event list, each with the names its
    metadata events give its process and thread."""
    raw = list(raw)
    processes: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for e in raw:
        if e.get("ph") != "M":
            continue
        name = (e.get("args") or {}).get("name")
        if e.get("name") == "process_name" and name is not None:
            processes[e.get("pid")] = str(name)
        elif e.get("name") == "thread_name" and name is not None:
            threads[(e.get("pid"), e.get("tid"))] = str(name)
    events = []
    for e in raw:
        if e.get("ph") != "X" or "ts" not in e:
            continue
        pid, tid = e.get("pid"), e.get("tid")
        start = round(e["ts"] * 1000)
        events.append(
            TraceEvent(
                processes.get(pid) or str(pid),
                threads.get((pid, tid)) or str(tid),
                tid or 0,
                e.get("name", ""),
                start,
                start + round(e.get("dur", 0) * 1000),
                e.get("args") or {},
            )
        )
    return events


@dataclass(slots=True)
class KernelEvent:
    """One run of one kernel, as the platform's trace tells it."""

    name: str  # the HLO instruction's name
    start_ns: int
    end_ns: int
    flops: float | None = None  # None: the platform's trace does not say
    bytes_accessed: float | None = None
    text: str = ""  # the instruction's text, where the trace carries it
    category: str = ""  # the platform's class of the instruction (TPU: hlo_category)
    # why the trace knows no FLOPs or bytes for it: PALLAS, a custom call's target, or
    # its category; "" where they are known, or where the platform gives none at all
    no_cost: str = ""


KernelEvents = Callable[[list[TraceEvent], set[str], str | None], list[KernelEvent]]


@dataclass(frozen=True)
class TraceRules:
    """How one platform's trace reads: its kernels, its program's device time and
    its compile spans."""

    kernel_events: KernelEvents  # (events, kernel names, program name) → runs
    # (events, program name) → the program's device time per run, in s ([]: no device
    # clock, or none recorded)
    device_times: Callable[[list[TraceEvent], str | None], list[float]]
    codegen_kernel: Callable[[TraceEvent], str]  # a compile span → the kernel it generates
    span_name: Callable[[TraceEvent], str]  # how a compile span is shown
    device_clock: bool  # False: the program runs on the host (one clock)


# -- the kernels ----------------------------------------------------------------------


def named_kernel_events(
    events: list[TraceEvent], names: set[str], program: str | None = None
) -> list[KernelEvent]:
    """Events named exactly as a kernel, from the device processes when any of them
    names one, else from the host's (CPU, GPU)."""
    device: list[KernelEvent] = []
    host: list[KernelEvent] = []
    for e in events:
        if e.name in names:
            (device if e.on_device else host).append(KernelEvent(e.name, e.start_ns, e.end_ns))
    return device or host


INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=")


def instruction_name(text: str) -> str:
    """The instruction's name in its text (`%fusion.3 = f32[...] fusion(...)` →
    `fusion.3`); a text that is a name already is returned as it is."""
    match = INSTRUCTION.match(text)
    return match.group(1) if match else text.strip().lstrip("%")


def tpu_kernel_events(
    events: list[TraceEvent], names: set[str], program: str | None = None
) -> list[KernelEvent]:
    """The `XLA Ops` events of the TPU's device processes, each named by the
    instruction its text names, with its FLOPs, bytes and device duration; only those
    inside a run of `program` (its `XLA Modules` events) where the trace has any."""
    runs = _module_runs(events, program, "/device:TPU")
    found = []
    for e in events:
        if e.thread != OPS_THREAD or not e.process.startswith("/device:TPU"):
            continue
        if runs and not _inside_any(e.start_ns, runs):
            continue
        text = str(e.args.get("long_name") or e.name)
        name = instruction_name(e.name)
        if name not in names:
            name = instruction_name(text)
        if name not in names:
            continue
        found.append(_tpu_kernel_event(e, name, text))
    return found


def _tpu_kernel_event(e: TraceEvent, name: str, text: str) -> KernelEvent:
    """One `XLA Ops` event as a kernel's run: no FLOPs and no bytes is no cost known."""
    flops, moved = _number(e.args.get("model_flops")), _number(e.args.get("bytes_accessed"))
    category = str(e.args.get("hlo_category", ""))
    no_cost = ""
    if flops == 0 and moved == 0:
        flops = moved = None
        no_cost = _no_cost_reason(text, category, str(e.args.get("tf_op", "")))
    return KernelEvent(name, e.start_ns, e.start_ns + _device_ns(e), flops, moved, text,
                       category, no_cost)  # fmt: skip


def _no_cost_reason(text: str, category: str, op: str) -> str:
    """Why XLA has no cost for an instruction: PALLAS for a Pallas kernel (its op the
    user's `pallas_call`), else its custom call's target (`ConcatBitcast`, or
    `tpu_custom_call` for a kernel XLA's TPU compiler wrote itself), else its category."""
    target = CUSTOM_CALL_TARGET.search(text)
    if target is None:
        return category or "unknown"
    pallas = target.group(1) == PALLAS_TARGET and PALLAS_OP in op
    return PALLAS if pallas else target.group(1)


def _device_ns(e: TraceEvent) -> int:
    """The event's time on the device: `device_duration_ps` where given, else its span."""
    ps = _number(e.args.get("device_duration_ps"))
    return round(ps / 1000) if ps is not None else e.end_ns - e.start_ns


def _number(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


# -- the program's device time --------------------------------------------------------


def _module_runs(
    events: list[TraceEvent], program: str | None, process: str
) -> list[tuple[int, int]]:
    """The (start, end) of each run of `program` on the `XLA Modules` thread of the
    processes starting with `process`; every program's runs when None, or when none
    is named `program` (a platform that names its programs otherwise)."""
    runs = [e for e in events if e.thread == MODULES_THREAD and e.process.startswith(process)]
    mine = [e for e in runs if module_name(e.name) == program]
    return [(e.start_ns, e.end_ns) for e in (mine or runs)]


def module_name(event_name: str) -> str:
    """`jit_forward(12345)` → `jit_forward`: the program an `XLA Modules` event ran."""
    return event_name.split("(", 1)[0].strip()


def _inside_any(ns: int, spans: list[tuple[int, int]]) -> bool:
    return any(start <= ns < end for start, end in spans)


def device_module_times(process: str) -> Callable[[list[TraceEvent], str | None], list[float]]:
    def times(events: list[TraceEvent], program: str | None = None) -> list[float]:
        return [(end - start) / 1e9 for start, end in _module_runs(events, program, process)]

    return times


def no_device_clock(events: list[TraceEvent], program: str | None = None) -> list[float]:
    return []


# -- the compile's spans --------------------------------------------------------------

CPU_KERNEL_SPAN = "FusionCompiler::Compile"
CPU_KERNEL_SUFFIX = "_kernel_module"
TPU_EMITTING = "XLA::TPU emitting for "


def cpu_codegen_kernel(e: TraceEvent) -> str:
    """A CPU (or GPU) kernel's code generation: its `module` arg names the kernel."""
    if e.name != CPU_KERNEL_SPAN and not e.name.startswith("XlaPass"):
        return ""
    module = str(e.args.get("module", ""))
    return module.removesuffix(CPU_KERNEL_SUFFIX) if module.endswith(CPU_KERNEL_SUFFIX) else ""


def tpu_codegen_kernel(e: TraceEvent) -> str:
    return e.name.removeprefix(TPU_EMITTING).strip() if e.name.startswith(TPU_EMITTING) else ""


def gpu_span_name(e: TraceEvent) -> str:
    """GPU: one `XlaPass` range per HLO pass, its pass in the `name` arg."""
    if e.name.startswith("XlaPass") and "name" in e.args:
        return f"XlaPass {e.args['name']}"
    return e.name


def own_name(e: TraceEvent) -> str:
    return e.name
