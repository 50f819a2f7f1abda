"""The sharding section as Explore shows it: table rows, the Overview's sentence, a
graph view of the collectives, and the check that a mesh fits the picked device.
Formats only: every number comes from the report. No jax, no streamlit.
"""

from __future__ import annotations

from typing import Any

from viz import units
from viz.fusion.profile import Profile
from viz.graph import DotStyle, View, VisibleNode, default_view, neighbourhood
from viz.ir.model import Graph
from viz.platforms import DeviceConfig, DeviceError
from viz.sharding.model import Collective, ShardedArg, ShardedOutput, ShardingSection
from viz.spec import SpecError
from viz.spec.mesh import parse_mesh


def mesh_text(section: ShardingSection) -> str:
    """`data=4 × model=2`."""
    return " × ".join(f"{k}={v}" for k, v in section.mesh.items()) or "the function's own"


def summary(section: ShardingSection) -> str:
    """The Overview's line: the mesh, what is split, and the collectives."""
    split = sum(1 for a in section.args if a.spec not in ("replicated", "single device"))
    kinds = " · ".join(f"{c.kind} ×{c.count}" for c in section.collectives) or "no collectives"
    return (
        f"mesh {mesh_text(section)} over {section.devices} devices, {split} of "
        f"{len(section.args)} argument leaves split · {kinds}"
    )


def _split(shape: list[int], local: list[int]) -> str:
    """How many pieces each dimension is cut into: `÷8 · ÷1`, or `whole`."""
    cuts = [g // loc if loc else 1 for g, loc in zip(shape, local, strict=False)]
    return " · ".join(f"÷{c}" for c in cuts) if any(c > 1 for c in cuts) else "whole"


def leaf_rows(leaves: list[ShardedArg] | list[ShardedOutput]) -> list[dict[str, Any]]:
    """One row per argument leaf or output: sharding, global and per-device shape,
    how it is cut, bytes per device."""
    return [
        {
            "argument" if isinstance(x, ShardedArg) else "output": (
                x.arg if isinstance(x, ShardedArg) else f"{x.index}: out{x.path}"
            ),
            "sharding": x.spec,
            "global shape": f"{x.dtype}{x.shape}",
            "per device": f"{x.dtype}{x.per_device_shape}",
            "split": _split(x.shape, x.per_device_shape),
            "bytes/device": units.nbytes(x.bytes_per_device),
        }
        for x in leaves
    ]


def kernel_time(c: Collective, profile: Profile | None) -> float | None:
    """Mean seconds per step its kernels took in the profile (None: not profiled)."""
    if profile is None or not profile.kernels:
        return None
    times = {k.name: k.mean_s for k in profile.kernels}
    found = [times[k] for k in c.kernels if k in times]
    return sum(found) if found else None


def collective_rows(section: ShardingSection, profile: Profile | None) -> list[dict[str, Any]]:
    """One row per kind of collective and element type."""
    return [
        {
            "collective": c.kind,
            "count": c.count,
            "dtype": c.dtype,
            "bytes/device": units.nbytes(c.bytes_per_device),
            "time/step": units.seconds(kernel_time(c, profile)),
            "lines": ", ".join(map(str, c.lines)),
            "from (jaxpr)": ", ".join(c.jaxpr_eqns[:4]) + (" …" if len(c.jaxpr_eqns) > 4 else ""),
            "kernels": ", ".join(c.kernels),
        }
        for c in section.collectives
    ]


def highlighted(graph: Graph, section: ShardingSection) -> View:
    """The compiled graph's default view with every collective highlighted (a box that
    holds some says how many)."""
    view = default_view(graph)
    view.highlight = frozenset(section.collective_nodes) & frozenset(graph.node_map())
    return view


def only_collectives(graph: Graph, section: ShardingSection) -> View | None:
    """Only the collectives and the ops next to them (what each reads and who reads
    it), collectives highlighted; None when there are none."""
    ids = [i for i in section.collective_nodes if i in graph.node_map()]
    if not ids:
        return None
    views = [neighbourhood(graph, i, radius=1) for i in ids]
    focus = frozenset().union(*(v.focus or frozenset() for v in views))
    expanded = frozenset().union(*(v.expanded for v in views))
    return View(graph, expanded, highlight=frozenset(ids), focus=focus)


COLLECTIVE_FILL = "#ffd166"  # collectives stand out from the fusions' pastel clusters


def collective_style(section: ShardingSection) -> DotStyle:
    """DOT attributes that fill each collective's box (and a box holding some)."""
    ids = section.collective_nodes

    def node(item: VisibleNode) -> dict[str, str]:
        if item.id in ids or (item.kind == "group" and item.highlighted):
            return {"fillcolor": COLLECTIVE_FILL, "style": "rounded,filled,bold"}
        return {}

    return DotStyle(node=node)


def devices_of(device: str) -> int | None:
    """Devices a device configuration has: `cpu` 1, `cpu:8` 8 (None: not known here)."""
    try:
        return DeviceConfig.parse(device).devices
    except DeviceError:
        return None


def mesh_problem(mesh: str, device: str) -> tuple[str | None, int | None]:
    """(what is wrong with `mesh` on `device`, or None; the devices it needs)."""
    try:
        spec = parse_mesh(mesh)
    except SpecError as exc:
        return f"Mesh: {exc}", None
    if spec is None:
        return None, None
    have = devices_of(device)
    if have is not None and have < spec.devices:
        return (
            f"The mesh {spec} needs {spec.devices} devices, and {device} has {have}.",
            spec.devices,
        )
    return None, spec.devices
