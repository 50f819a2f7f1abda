"""The platforms jitscope runs on, behind one seam: a device configuration as a type of
its own (`DeviceConfig`: `cpu`, `cpu:8`, `gpu`, `tpu`), the module of each platform
(`cpu`, `gpu`, `tpu`: the `Platform` of `base`), and the devices this machine offers
(`available()`). Platform names and flags live here only (tests/test_house_rules.py).

No jax here: the server asks a short child (`viz.platforms.probe`) which platforms JAX
sees, once, and only about those whose device files or tools this machine has; on a
machine with none the answer is `cpu` and `cpu:8` at once, with no child."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass

from viz.platforms import cpu, gpu, tpu
from viz.platforms.base import Platform, Unavailable

PLATFORMS: dict[str, Platform] = {p.name: p for p in (cpu.PLATFORM, gpu.PLATFORM, tpu.PLATFORM)}
# A test hook: platforms to treat as owned by one process (`cpu` in CI stands for a TPU).
ONE_PROCESS_ENV = "JITSCOPE_ONE_PROCESS"
DEVICE_ENV = "JITSCOPE_DEVICE"  # a worker's device configuration, set before it starts
PROBE_TIMEOUT_S = 60.0  # a TPU takes 6-11 s to open
# How long a page waits for JAX's answer when a link or a run names a device: only
# an accelerator's name waits (the CPU's are known at once), and only once.
NAMED_WAIT_S = 15.0


class DeviceError(ValueError):
    """A device configuration that is not one: its message says what to write."""


@dataclass(frozen=True)
class DeviceConfig:
    """A device configuration: a platform and, for `cpu:8`, how many devices (on the CPU
    simulated by XLA; elsewhere, how many the analysis needs). Its text (`str()`) is
    what Settings, share links and the history keep."""

    platform: str
    count: int | None = None

    @classmethod
    def parse(cls, text: str) -> DeviceConfig:
        name, sep, count = str(text).strip().partition(":")
        if name not in PLATFORMS or (sep and not (count.isdigit() and int(count) > 0)):
            raise DeviceError(f"`{text}` is not a device: write {written(examples())}")
        return cls(name, int(count) if sep else None)

    def __str__(self) -> str:
        return self.platform if self.count is None else f"{self.platform}:{self.count}"

    @property
    def module(self) -> Platform:
        return PLATFORMS[self.platform]

    @property
    def jax_platform(self) -> str:
        """What JAX calls it (JAX_PLATFORMS, `jax.devices(...)`): `gpu` is `cuda`."""
        return self.module.jax_platform

    @property
    def devices(self) -> int | None:
        """How many devices it has: `cpu` 1, `cpu:8` 8; None when only JAX knows."""
        if self.count is not None:
            return self.count
        return 1 if self.platform == cpu.PLATFORM.name else None

    @property
    def max_processes(self) -> int | None:
        """How many processes may open it at once (None: any)."""
        if self.platform in os.environ.get(ONE_PROCESS_ENV, "").split(","):
            return 1
        return self.module.max_processes

    def worker_env(self, env: dict[str, str]) -> None:
        env["JAX_PLATFORMS"] = self.jax_platform
        env[DEVICE_ENV] = str(self)
        self.module.worker_env(self, env)

    @classmethod
    def of_worker(cls) -> DeviceConfig:
        """The configuration this worker process was started for (`cpu` outside one)."""
        return cls.parse(os.environ.get(DEVICE_ENV) or "cpu")

    def unavailable(self, version: str, error: str) -> Unavailable:
        return self.module.unavailable(version, error)


def examples() -> list[str]:
    """Every configuration the platforms offer, for messages and help: cpu, cpu:8, …"""
    return [c for p in PLATFORMS.values() for c in p.offered]


def written(names: list[str]) -> str:
    """`cpu, cpu:8, gpu or tpu`."""
    return " or ".join(filter(None, (", ".join(names[:-1]), names[-1]))) if names else ""


def held(message: str) -> bool:
    """Whether an unavailable device's message says another process holds it (waiting
    for that process may help)."""
    return message.startswith(tpu.HELD)


def memory_schedule_of(device: str) -> dict[str, str]:
    """The options of `device`'s memory-first schedule ({}: its platform offers none, or
    the text is no device, as an old run's may be)."""
    try:
        return dict(DeviceConfig.parse(device).module.memory_schedule)
    except DeviceError:
        return {}


def memory_space_name(device: str, space: str) -> str:
    """A memory space of `device`'s platform by its name: `VMEM, the core's vector
    memory`; `memory space 6` where the platform names it not."""
    return dict(platform_of(device).memory_spaces).get(space, f"memory space {space}")


def platform_of(device: str) -> Platform:
    """The platform of a device configuration (`tpu`, `gpu`, `cpu:8`) or of JAX's name
    for its platform (`cuda`); an unknown one is the CPU."""
    try:
        return DeviceConfig.parse(device).module
    except DeviceError:
        by_jax = {p.jax_platform: p for p in PLATFORMS.values()}
        return by_jax.get(device.lower(), cpu.PLATFORM)


class _Probe:
    """JAX's answer to which platforms it sees, asked once per process in a child and
    kept. Thread-safe; a caller waits for it at most as long as it says."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._started = False
        self.seen: list[str] = []

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
            candidates = [p.name for p in PLATFORMS.values() if p.name != "cpu" and p.detect()]
            if not candidates:  # nothing to ask JAX about: no child
                self._done.set()
                return
        threading.Thread(
            target=self._ask, args=(candidates,), name="jitscope-probe", daemon=True
        ).start()

    def _ask(self, candidates: list[str]) -> None:
        try:
            self.seen = ask_jax(candidates)
        finally:
            self._done.set()

    def result(self, wait_s: float) -> list[str]:
        self.start()
        self._done.wait(wait_s)
        return list(self.seen)


def ask_jax(candidates: list[str]) -> list[str]:
    """The platforms among `candidates` that JAX sees, asked in a child (it imports
    jax, which the server must not); [] when the child fails."""
    env = {**os.environ, "JAX_PLATFORMS": "", "TF_CPP_MIN_LOG_LEVEL": "3"}
    command = [sys.executable, "-m", "viz.platforms.probe", *candidates]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=PROBE_TIMEOUT_S
        )
        seen = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return []
    return [p for p in candidates if p in seen]


_PROBE = _Probe()


def start_probe() -> None:
    """Ask JAX in the background now (the server's start), so the picker has its
    answer when the first visitor needs it."""
    _PROBE.start()


def available(wait_s: float = 0.0) -> list[str]:
    """The device configurations this machine offers: each accelerator JAX sees, then
    `cpu` and `cpu:8`. Waits at most `wait_s` for JAX's answer (the first screen does
    not wait: until the answer comes, the CPU's alone)."""
    seen = _PROBE.result(wait_s)
    accelerators = [c for name in seen for c in PLATFORMS[name].offered]
    return accelerators + list(cpu.PLATFORM.offered)


def available_with(named: str | None) -> list[str]:
    """`available()`; where `named` (the device a link or a run names) is not among
    them yet, after waiting for JAX's answer (at most NAMED_WAIT_S)."""
    devices = available()
    if named and named not in devices:
        devices = available(wait_s=NAMED_WAIT_S)
    return devices


__all__ = [
    "PLATFORMS",
    "DeviceConfig",
    "DeviceError",
    "Platform",
    "Unavailable",
    "available",
    "available_with",
    "examples",
    "held",
    "memory_schedule_of",
    "memory_space_name",
    "platform_of",
    "start_probe",
    "written",
]
