"""The host CPU: always there, as many processes as like, and `cpu:N` simulated by
XLA's host platform device count. Its compiler options (`xla_cpu_…`) live here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from viz.platforms import trace
from viz.platforms.base import Peaks, Unavailable, backend_failed

if TYPE_CHECKING:
    from viz.platforms import DeviceConfig

DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"

# (key, values offered (the first: the one worth trying), what it does): the CPU's
# own options among those `viz.options` offers by name.
COMPILER_OPTIONS: tuple[tuple[str, tuple[Any, ...], str], ...] = (
    (
        "xla_cpu_enable_fast_math",
        (True, False),
        "CPU: let LLVM reassociate and approximate floating point (faster, less exact).",
    ),
    (
        "xla_cpu_fast_math_honor_nans",
        (False, True),
        "CPU fast math: whether NaNs must be honoured.",
    ),
    (
        "xla_cpu_fast_math_honor_infs",
        (False, True),
        "CPU fast math: whether infinities must be honoured.",
    ),
)
SCHEDULER_OPTION: tuple[str, tuple[Any, ...], str] = (
    "xla_cpu_scheduler_type",
    ("CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED", "CPU_SCHEDULER_TYPE_CONCURRENCY_OPTIMIZED"),
    "CPU: the order XLA runs the program in. Memory-optimized keeps fewer buffers "
    "live at once; the default favours running independent kernels side by side.",
)
# The CPU schedule that favours memory. (`xla_cpu_enable_concurrency_optimized_scheduler
# =False` changed no schedule on jax 0.10's XLA, measured: the scheduler type does.)
MEMORY_SCHEDULE = {SCHEDULER_OPTION[0]: SCHEDULER_OPTION[1][0]}
EXAMPLE_OPTION = "xla_cpu_use_thunk_runtime=False"  # a free-form option, as a placeholder


class Cpu:
    name = "cpu"
    jax_platform = "cpu"
    max_processes: int | None = None
    offered = ("cpu", "cpu:8")
    memory_schedule = tuple(MEMORY_SCHEDULE.items())
    assignment_in_analysis = True
    memory_spaces: tuple[tuple[str, str], ...] = ()
    xla_peak_space: str | None = None
    trace_rules = trace.TraceRules(
        trace.named_kernel_events,
        trace.no_device_clock,
        trace.cpu_codegen_kernel,
        trace.gpu_span_name,
        device_clock=False,
    )

    def detect(self) -> bool:
        return True

    def present(self) -> bool:
        return True

    def worker_env(self, config: DeviceConfig, env: dict[str, str]) -> None:
        flags = [f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f]
        if config.count:
            flags.append(f"{DEVICE_COUNT_FLAG}={config.count}")
        env["XLA_FLAGS"] = " ".join(flags)

    def unavailable(self, version: str, error: str) -> Unavailable:
        return Unavailable(
            backend_failed(self.name, version, error),
            "JAX's CPU backend ships with jaxlib: reinstall jax and jaxlib at one version "
            "(pip install -r requirements.txt), and check XLA_FLAGS for a flag it rejects",
        )

    def peaks(self, device_kind: str) -> Peaks | None:
        return None  # a host CPU's peaks depend on its model and cores: none are kept


PLATFORM = Cpu()
