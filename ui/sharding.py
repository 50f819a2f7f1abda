"""Explore's sharding (issue #21, part 2): the Mesh field beside the arguments, the
Overview's line, and the Sharding tab: per argument and output its sharding,
per-device shape and bytes per device, the collectives XLA inserted (count, element
type, bytes per device, time, source lines), the compiled graph with them
highlighted, and another sharding of the same function analyzed and diffed.

Layout only: the section is read in the worker (`viz.sharding.read`); rows, views and
checks come from `viz.sharding.display`.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

import viz.graph
from ui.cards import excerpt
from ui.fusion import profile_button
from ui.graphs import show_graph
from ui.results import Result
from ui.tables import table
from ui.variants import run_variant
from viz.ir.model import IR
from viz.platforms import DeviceConfig, available
from viz.program import Program
from viz.report import Report
from viz.sharding import ShardingSection
from viz.sharding.display import (
    collective_rows,
    collective_style,
    highlighted,
    kernel_time,
    leaf_rows,
    mesh_problem,
    mesh_text,
    only_collectives,
    summary,
)
from viz.units import nbytes, seconds

TAB = "Sharding"
MESH_HELP = (
    "A device mesh, NAME=SIZE per axis: `data=8`, `data=4, model=2`. Then split an "
    "argument with a suffix: `f32[64,128] @ P('data', None)`; arrays without one are "
    "replicated. `:explicit` after a size makes that axis Explicit (for "
    "`jax.sharding.reshard`). Needs that many devices: pick cpu:8 in the sidebar."
)


def mesh_input(prog: Program, device: str) -> str | None:
    """The Mesh field; returns the problem that forbids sending, if any (a mesh the
    device is too small for is sent: the worker's error card says so too)."""
    st.session_state.setdefault("in_mesh", prog.settings.mesh)
    prog.settings.mesh = st.text_input(
        "Mesh",
        key="in_mesh",
        placeholder="none · e.g. data=8, then f32[64,128] @ P('data', None)",
        help=MESH_HELP,
    ).strip()
    problem, needs = mesh_problem(prog.settings.mesh, device)
    if problem is None or needs is None:
        return problem
    bigger = [d for d in available() if (DeviceConfig.parse(d).count or 0) >= needs]
    st.warning(problem, icon=":material/grid_view:")
    if bigger:
        st.button(
            f"Use {bigger[0]} ({needs}+ devices)",
            key="mesh_device",
            icon=":material/swap_horiz:",
            on_click=_pick_device,
            args=(bigger[0],),
            help="switch the sidebar's Device",
        )
    return None


def _pick_device(device: str) -> None:
    st.session_state.device = device  # the sidebar's picker reads it on the rerun


def overview_link(r: Report, open_tab: Callable[[str], None]) -> None:
    """The Overview's line: the mesh, what is split, the collectives, and the button."""
    if r.sharding is None:
        return
    text, button = st.columns([3, 2], vertical_alignment="center")
    text.markdown(f"**Sharding**: {summary(r.sharding)}")
    button.button("Open the sharding", key="ov_sharding", on_click=open_tab, args=(TAB,))


def panel(res: Result, index: int) -> None:
    r = res.report
    s = r.sharding
    if s is None:
        st.info(
            "This run is not sharded. Give a **Mesh** (e.g. `data=8`) and split an "
            "argument with `@ P('data', None)`, on a device with enough devices (cpu:8).",
            icon=":material/grid_view:",
        )
        return
    st.markdown(
        f"**How `{r.function}` is split** · mesh {mesh_text(s)} · {s.devices} devices · "
        "read from the compiled executable (input and output shardings, shard shapes)"
    )
    metrics(res, s)
    st.markdown("**Arguments** · as the executable takes them, per leaf")
    table(leaf_rows(s.args), key=f"sh_args_{index}")
    st.markdown("**Outputs** · as the executable returns them, flat")
    table(leaf_rows(s.outputs), key=f"sh_outs_{index}")
    collectives(res, s, index)
    another_sharding(res, index)


def metrics(res: Result, s: ShardingSection) -> None:
    m = st.columns(4)
    m[0].metric("devices", s.devices, help="devices the compiled program runs on")
    m[1].metric("collectives", s.collective_count, help="collective instructions XLA inserted")
    m[2].metric(
        "moved per device",
        nbytes(s.collective_bytes),
        help="bytes of the collectives' results on each device, per call",
    )
    profile = res.kernel_profile
    spent = [t for c in s.collectives if (t := kernel_time(c, profile)) is not None]
    m[3].metric(
        "collective time / step",
        seconds(sum(spent)) if spent else "–",
        help="their kernels' mean time per call in the profile (Profile kernels)",
    )


def collectives(res: Result, s: ShardingSection, index: int) -> None:
    st.markdown(
        "**Collectives XLA inserted** · from the per-device compiled HLO: count, element "
        "type, bytes per device, and the source lines whose values they move"
    )
    if not s.collectives:
        st.success(
            "No collectives: every device computes its part without talking to the others.",
            icon=":material/check_circle:",
        )
    else:
        rows = collective_rows(s, res.kernel_profile)
        table(rows, key=f"sh_coll_{index}")
        profile_button(res, index)
        source_lines(res, s)
    collective_graph(res, s, index)


def source_lines(res: Result, s: ShardingSection) -> None:
    lines = sorted({line for c in s.collectives for line in c.lines})
    if not lines or not res.code:
        return
    with st.expander(f"Source lines of the collectives ({', '.join(map(str, lines))})"):
        for line in lines:
            kinds = ", ".join(c.kind for c in s.collectives if line in c.lines)
            st.caption(f"line {line} · {kinds}")
            st.code(excerpt(res.code, line, context=1), language="python")


def collective_graph(res: Result, s: ShardingSection, index: int) -> None:
    graph = res.report.graph_models.get(IR.COMPILED)
    if graph is None:
        st.caption("The compiled graph is not kept for older results: analyze again to see it.")
        return
    only = st.toggle(
        "Only the collectives and the ops next to them",
        key=f"sh_only_{index}",
        disabled=not s.collectives,
        help="what each collective reads and who reads its result",
    )
    view = (only and only_collectives(graph, s)) or highlighted(graph, s)
    shown, _ = viz.graph.visible(view)
    st.caption(
        f"Compiled HLO · {len(shown)} of {len(graph.nodes)} nodes · collectives filled "
        "amber and outlined red (a box holding some says how many)"
    )
    title = f"{res.function} · collectives over {mesh_text(s)}"
    show_graph(viz.graph.to_dot(view, title, collective_style(s)), len(shown), height=560)


def another_sharding(res: Result, index: int) -> None:
    """Analyze the same function with another spec or mesh, and open the diff."""
    st.markdown("**Another sharding** · the same function, split another way, then compared")
    asked = res.asked.settings
    spec_key, mesh_key = f"sh_alt_spec_{index}", f"sh_alt_mesh_{index}"
    st.session_state.setdefault(spec_key, asked.args)
    st.session_state.setdefault(mesh_key, asked.mesh)
    left, middle, right = st.columns([5, 2, 2], vertical_alignment="bottom")
    spec = left.text_input("Args spec", key=spec_key)
    mesh = middle.text_input("Mesh", key=mesh_key, help=MESH_HELP)
    same = (spec.strip(), mesh.strip()) == (asked.args, asked.mesh)
    if right.button(
        "Analyze and diff",
        key=f"sh_alt_go_{index}",
        icon=":material/difference:",
        disabled=same,
        help="change the spec's @ P(...) or the mesh first" if same else None,
        width="stretch",
    ):
        request = res.asked.with_settings(args=spec.strip(), mesh=mesh.strip())
        run_variant(res, "Another sharding", request)
