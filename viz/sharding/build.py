"""The jax side of a mesh: `MeshSpec` (text, `viz.spec.mesh`) → `jax.sharding.Mesh` on
the analysis's devices. Runs in the worker; a mesh larger than the devices there is
a classified error that says how many it needs and how many there are."""

from __future__ import annotations

import jax
import numpy as np

from viz.errors import ErrorInfo, ErrorKind, UserCodeError
from viz.platforms import DeviceConfig
from viz.spec.mesh import MeshSpec
from viz.units import plural


def platform_devices(device: str) -> list[jax.Device]:
    """Every device of the platform that `device` ('cpu', 'cpu:8', 'gpu', 'tpu') names."""
    return jax.devices(DeviceConfig.parse(device).jax_platform)


def device_mesh(spec: MeshSpec, device: str) -> jax.sharding.Mesh:
    """The mesh on the first `spec.devices` devices of `device`'s platform, axes in
    order; UserCodeError (device_unavailable) when there are fewer."""
    devices = platform_devices(device)
    if len(devices) < spec.devices:
        raise UserCodeError(_too_few(spec, device, len(devices)))
    grid = np.array(devices[: spec.devices]).reshape([a.size for a in spec.axes])
    types = tuple(
        jax.sharding.AxisType.Explicit if a.explicit else jax.sharding.AxisType.Auto
        for a in spec.axes
    )
    return jax.sharding.Mesh(grid, tuple(a.name for a in spec.axes), axis_types=types)


def _too_few(spec: MeshSpec, device: str, have: int) -> ErrorInfo:
    platform = DeviceConfig.parse(device).platform
    there = f"{device} has {plural(have, 'device')}"
    hint = (
        f"pick {platform}:{spec.devices} or more as the device (the sidebar's Device, "
        f"--device {platform}:{spec.devices}), or a smaller mesh"
        if platform == "cpu"
        else "pick a smaller mesh: it may span at most the devices there are"
    )
    return ErrorInfo(
        ErrorKind.DEVICE_UNAVAILABLE,
        f"The mesh {spec} needs {spec.devices} devices, and {there}.",
        hint,
        stage="spec",
    )
