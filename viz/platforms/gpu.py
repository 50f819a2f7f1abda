"""An NVIDIA GPU through JAX's CUDA plugin (`cuda` to JAX, `gpu` to a user). Several
processes may share it when none preallocates its memory."""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from viz.platforms import trace
from viz.platforms.base import Peaks, Unavailable, backend_failed

if TYPE_CHECKING:
    from viz.platforms import DeviceConfig

SMI = "nvidia-smi"
DEVICE_FILES = ("/dev/nvidia0", "/dev/nvidiactl")


class Gpu:
    name = "gpu"
    jax_platform = "cuda"
    max_processes: int | None = None
    offered = ("gpu",)
    memory_schedule: tuple[tuple[str, str], ...] = ()
    assignment_in_analysis = False
    memory_spaces: tuple[tuple[str, str], ...] = ()
    xla_peak_space: str | None = None
    trace_rules = trace.TraceRules(
        trace.named_kernel_events,
        trace.device_module_times("/device:GPU"),
        trace.cpu_codegen_kernel,
        trace.gpu_span_name,
        device_clock=True,
    )

    def detect(self) -> bool:
        return shutil.which(SMI) is not None or any(os.path.exists(f) for f in DEVICE_FILES)

    def present(self) -> bool:
        import jax

        try:
            return bool(jax.devices(self.jax_platform))
        except RuntimeError:
            return False

    def worker_env(self, config: DeviceConfig, env: dict[str, str]) -> None:
        # JAX takes 75% of a GPU at start: a pool's second worker could not
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

    def unavailable(self, version: str, error: str) -> Unavailable:
        return Unavailable(
            backend_failed(self.name, version, error),
            "install the CUDA plugin that matches jax (pip install -r requirements-gpu.txt), "
            f"and check that {SMI} sees the GPU; else pick cpu",
        )

    def peaks(self, device_kind: str) -> Peaks | None:
        return None  # no GPU's peaks are kept yet (none was measured here)


PLATFORM = Gpu()
