"""A Google TPU through libtpu. One process at a time owns a chip: a second one that
opens it fails in about 2 s on libtpu's lockfile, so the pool gives a TPU one worker
and a chip held by another process is said as such, with the holder when /proc shows
it (a process with the chip's device file open)."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from viz.platforms import trace
from viz.platforms.base import Peaks, Unavailable, backend_failed

if TYPE_CHECKING:
    from viz.platforms import DeviceConfig

LIBRARY = "libtpu"
# libtpu's words when another process holds the chip: the lockfile's, or (seen on a v5e
# where the holder was still opening it) the device's own
HELD_MARKS = ("multi-process lockfile", "TPU is already in use by process")
DEVICE_FILES = ("/dev/accel*", "/dev/vfio/[0-9]*")  # a chip's file (v4 and v5e / v5p)
LOCKFILE = "/tmp/libtpu_lockfile"  # the file libtpu locks while a process holds the chip
HELD = "Another process holds the TPU chip"
COMMAND_CHARS = 80  # of a holder's command, in the message
# The memory spaces XLA's memory-usage report names on a TPU v5e (`Memory Space: vmem
# (color=1)`, `smem (color=2)`; space 6 it calls only `color_6`, so it has no name here)
MEMORY_SPACES = (
    ("0", "HBM, the chip's high-bandwidth memory"),
    ("1", "VMEM, the core's on-chip vector memory"),
    ("2", "SMEM, the core's on-chip scalar memory"),
)
# XLA's peak_memory_in_bytes on a TPU: HBM's arguments, outputs and constants, plus VMEM
# at its own peak (HBM's temporaries not in it): to the byte on every program recorded on
# a v5e (tests/test_memory_tpu.py)
XLA_PEAK_SPACE = "1"

# Google's published TPU v5e figures (per chip): 197 TFLOP/s bf16, 394 TOP/s int8,
# 819 GB/s HBM bandwidth. Source: https://cloud.google.com/tpu/docs/v5e
V5E = Peaks("TPU v5e", 197e12, 819e9, 394e12, "https://cloud.google.com/tpu/docs/v5e")
PEAKS = {"tpu v5 lite": V5E, "tpu v5e": V5E}  # by JAX's device_kind, lower case


@dataclass(frozen=True)
class Holder:
    pid: int
    command: str

    def __str__(self) -> str:
        """`pid 2139: python3 -c import time…`: the command's first line, shortened (a
        `python -c` holder's command is its whole script)."""
        first = self.command.splitlines()[0] if self.command else ""
        if len(first) > COMMAND_CHARS or first != self.command:
            first = first[:COMMAND_CHARS].rstrip() + "…"
        return f"pid {self.pid}: {first}" if first else f"pid {self.pid}"


def _chip_file(target: str) -> bool:
    return target.startswith(("/dev/accel", "/dev/vfio/")) or target == LOCKFILE


def _command(proc: str, pid: str) -> str:
    try:
        with open(os.path.join(proc, pid, "cmdline"), "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _opens_chip(proc: str, pid: str) -> bool:
    fds = os.path.join(proc, pid, "fd")
    try:
        names = os.listdir(fds)
    except OSError:  # gone, or another user's
        return False
    for name in names:
        try:
            if _chip_file(os.readlink(os.path.join(fds, name))):
                return True
        except OSError:
            continue
    return False


def holders(proc: str = "/proc", me: int | None = None) -> list[Holder]:
    """The processes (other than `me`, default this one) with a TPU chip's device file
    open, read from `proc`'s fd links: those /proc lets this user see."""
    me = os.getpid() if me is None else me
    try:
        pids = sorted((p for p in os.listdir(proc) if p.isdigit()), key=int)
    except OSError:
        return []
    return [
        Holder(int(pid), _command(proc, pid))
        for pid in pids
        if int(pid) != me and _opens_chip(proc, pid)
    ]


def _held(error: str) -> bool:
    return any(mark in error for mark in HELD_MARKS)


def held_message(found: list[Holder]) -> str:
    who = f" ({'; '.join(str(h) for h in found)})" if found else ""
    return f"{HELD}{who}: one process at a time can open a TPU chip"


class Tpu:
    name = "tpu"
    jax_platform = "tpu"
    max_processes: int | None = 1
    offered = ("tpu",)
    memory_schedule: tuple[tuple[str, str], ...] = ()
    assignment_in_analysis = False
    memory_spaces = MEMORY_SPACES
    xla_peak_space: str | None = XLA_PEAK_SPACE
    trace_rules = trace.TraceRules(
        trace.tpu_kernel_events,
        trace.device_module_times("/device:TPU"),
        trace.tpu_codegen_kernel,
        trace.own_name,
        device_clock=True,
    )

    def detect(self) -> bool:
        return any(glob.glob(pattern) for pattern in DEVICE_FILES)

    def present(self) -> bool:
        import jax

        try:
            return bool(jax.devices(self.jax_platform))
        except RuntimeError as exc:
            return _held(str(exc))  # there, held by another process

    def worker_env(self, config: DeviceConfig, env: dict[str, str]) -> None:
        return None

    def unavailable(self, version: str, error: str) -> Unavailable:
        if _held(error):
            return Unavailable(
                held_message(holders()),
                "wait until it ends (jitscope analyze --wait waits for the chip), or pick cpu",
                held=True,
            )
        return Unavailable(
            backend_failed(self.name, version, error),
            f"check that {LIBRARY} matches jax (pip install 'jax[tpu]') and that this "
            "machine has a TPU chip; else pick cpu",
        )

    def peaks(self, device_kind: str) -> Peaks | None:
        return PEAKS.get(device_kind.strip().lower())


PLATFORM = Tpu()
