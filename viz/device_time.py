"""The program's device time beside its wall time, in the words the Overview, the CLI
and the HTML export share. The wall median is the host's clock around each call
(dispatch and host work included); the device time is the program's own run on the
device's clock, read from the kernel profile's trace (`Timings.device_s`). On a
platform whose programs run on the host (CPU) the two are one clock. No jax."""

from __future__ import annotations

from viz.report import Timings
from viz.units import seconds


def host_share_s(t: Timings) -> float | None:
    """The part of the wall median the device did not spend (host and dispatch)."""
    if t.device_s is None or t.run_median_s is None:
        return None
    return max(t.run_median_s - t.device_s, 0.0)


def device_time_words(t: Timings, device: str) -> str:
    """`device time on the tpu: 250 µs per call · host and dispatch: 950 µs of the 1.2 ms
    wall median`, or why there
    is no separate device time; "" where nothing is known (no runs)."""
    if t.device_clock == "host":
        return (
            f"device time: the same clock as the wall time ({device} runs the program "
            "on the host: no separate device clock)"
        )
    if t.device_clock != "device":
        return ""
    if t.device_s is None:
        return "device time: not measured (profile the kernels to read it from the trace)"
    said = f"device time on the {device}: {seconds(t.device_s)} per call"
    host = host_share_s(t)
    if host is None:
        return said
    median = seconds(t.run_median_s)
    return f"{said} · host and dispatch: {seconds(host)} of the {median} wall median"
