"""What a platform gives, server side: the `Platform` protocol each of `cpu`, `gpu` and
`tpu` implements, and the words every platform shares. No jax here: the server reads
these (the picker, the pool, a worker's environment); only `present()` runs in a child
that has imported jax (`viz.platforms.probe`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from viz.platforms import DeviceConfig
    from viz.platforms.trace import TraceRules


@dataclass(frozen=True)
class Peaks:
    """A chip's published peaks (`Platform.peaks`), for the roofline."""

    chip: str
    flops_per_s: float  # the bf16 matrix peak
    bytes_per_s: float  # the HBM bandwidth
    int8_ops_per_s: float | None = None
    source: str = ""  # where the figures are published

    @property
    def ridge(self) -> float:
        """The ridge point, in FLOPs per byte."""
        return self.flops_per_s / self.bytes_per_s


@dataclass(frozen=True)
class Unavailable:
    """Why a platform's backend cannot start, in that platform's own terms."""

    message: str
    hint: str
    held: bool = False  # another process owns the device: waiting may help (`--wait`)


class Platform(Protocol):
    name: str  # what a user writes: cpu, gpu, tpu
    jax_platform: str  # what JAX_PLATFORMS and jax.devices() call it
    max_processes: int | None  # how many processes may open it at once (None: any)
    offered: tuple[str, ...]  # the picker's device configurations on a machine that has it
    # compiler options for XLA's schedule that keeps fewer buffers live (none: not offered)
    memory_schedule: tuple[tuple[str, str], ...]
    trace_rules: TraceRules  # how its `jax.profiler` trace reads (`viz.platforms.trace`)
    # whether a compile's `memory_analysis()` holds XLA's buffer assignment (else the
    # memory profile is read from XLA's dump of the compile, `viz.hlo_dump`)
    assignment_in_analysis: bool
    # its memory spaces, as XLA numbers them in a buffer's colour and a layout's S(n),
    # each with its name (the main memory, space 0, where the platform names it)
    memory_spaces: tuple[tuple[str, str], ...]
    # the memory space besides the device's main memory that XLA's own peak
    # (`peak_memory_in_bytes`) counts at its peak, with the main memory's arguments,
    # outputs and constants (a TPU's VMEM); None where XLA makes its figure otherwise
    xla_peak_space: str | None

    def detect(self) -> bool:
        """Whether this machine may have the device: cheap, without jax (a file, a
        command). The probe child asks JAX only about the platforms that pass."""
        ...

    def present(self) -> bool:
        """Whether JAX sees the device (in a child that imported jax); a device
        another process holds counts as present."""
        ...

    def worker_env(self, config: DeviceConfig, env: dict[str, str]) -> None:
        """Set what a worker for `config` needs in its environment before JAX starts."""
        ...

    def unavailable(self, version: str, error: str) -> Unavailable:
        """Why JAX `version` could not start this backend (`error`: JAX's exception
        text), and what to do about it."""
        ...

    def peaks(self, device_kind: str) -> Peaks | None:
        """The published peaks of a device kind as JAX names it (`TPU v5 lite`); None
        where none are known."""
        ...


def backend_failed(name: str, version: str, error: str) -> str:
    """The message every platform starts from: JAX could not start its backend."""
    return f"JAX {version} cannot start its {name} backend in this worker ({error})"
