"""The Fusion tab's main view: which ops became which kernel, where each came
from, and where the time goes. Layout only: the map and the profile come from
the worker in the report; colours, tints and tables from `viz.fusion.view`, what a
pick lights up from `viz.fusion.selection`.
Nothing here imports jax.
"""

from __future__ import annotations

from collections import Counter

import streamlit as st

import viz.fusion.view
import viz.graph
from ui.cards import error_card
from ui.editor import clear_marks, mark_lines
from ui.follow import LINE as FOLLOWED
from ui.graphs import show_graph
from ui.results import Result
from ui.tables import table
from ui.workers import ask
from viz.charts import roofline_chart
from viz.fusion.model import FusionEntry
from viz.fusion.profile import Profile
from viz.fusion.report import PROFILE_RUNS
from viz.fusion.roofline import (
    PALLAS,
    past_hbm_words,
    peaks_words,
    roofline,
    undrawn_words,
    unplaced_words,
)
from viz.fusion.roofline import rows as roofline_rows
from viz.fusion.selection import (
    Picked,
    Selection,
    kernel_choices,
    missing_ops,
    op_choices,
    select,
    selected_eqns,
)
from viz.ir.model import IR, Graph
from viz.units import listed, plural, seconds


def fusion_map_view(res: Result, index: int) -> None:
    """Coverage, selection, both graphs coloured by kernel, tinted source, kernel
    table and (when profiled) the time per kernel."""
    r, profile = res.report, res.kernel_profile
    fmap, models = r.fusion_map, r.graph_models
    if not fmap or not {IR.STABLEHLO, IR.COMPILED} <= set(models):
        st.info("No fusion map for this result (it did not compile).")
        return
    stablehlo, compiled = models[IR.STABLEHLO], models[IR.COMPILED]
    st.markdown(viz.fusion.view.coverage_text(r.fusion_map_coverage))
    op_count = r.stablehlo.op_count if r.stablehlo else None
    left_out = viz.fusion.view.left_out_text(stablehlo, r.fusion_map_coverage, op_count)
    jaxpr = models.get(IR.JAXPR) or Graph(IR.JAXPR)
    eqn_count = r.jaxpr.eqn_count if r.jaxpr else None
    jaxpr_left_out = viz.fusion.view.jaxpr_left_out_text(jaxpr, r.fusion_map_coverage, eqn_count)
    for said in filter(None, (left_out, jaxpr_left_out)):
        st.caption(said)
    profile_button(res, index)
    colours = viz.fusion.view.kernel_colours(e.kernel for e in fmap if e.is_kernel)
    chosen = selection(fmap, stablehlo, index)
    graphs(profile, fmap, stablehlo, compiled, colours, chosen, index)
    left, right = st.container(), st.container()  # beside the code: one above the other
    with left:
        st.markdown("**Your code**, each line tinted by the kernels its ops went into")
        st.html(viz.fusion.view.tinted_source(res.code, fmap, colours, chosen.lines))
    with right:
        details(fmap, stablehlo, jaxpr, chosen)
    kernel_table(profile, fmap, r.device or "This platform", index)


def profile_button(res: Result, index: int) -> None:
    """'Profile kernels': analyze again in the worker under jax.profiler, with the
    analysed run's settings (another compile would have other kernels)."""
    p = res.kernel_profile
    if p:
        on_device = (
            "" if p.device_step_s is None else f" ({seconds(p.device_step_s)} on the device)"
        )
        st.caption(
            f"Profiled with {p.source}: {p.runs} runs, "
            f"{seconds(p.step_s)} per step{on_device}, {seconds(p.unattributed_s)} outside "
            "any kernel"
            + (" · kernels overlapped: shares add up to more than 1" if p.concurrent else "")
        )
        return
    if not st.button(
        "Profile kernels",
        key=f"fm_profile_{index}",
        help=f"runs the compiled function {PROFILE_RUNS} times under jax.profiler and reads "
        "each kernel's time from the trace",
    ):
        return
    with st.spinner("Running under jax.profiler…"):
        reply = ask(res.request(runs=PROFILE_RUNS, profile=True))
    res.profile = reply.report.profile or res.profile
    for warning in reply.report.warnings:
        if warning.startswith("profile"):
            st.warning(warning)
    if reply.error:
        error_card(reply.error, res.code)
    if res.profile:
        st.rerun()


def pick_kernel(fmap: list[FusionEntry], kernel: str, index: int) -> bool:
    """Pick `kernel` in result `index`'s fusion map, as its kernel picker would (for a
    view elsewhere that names kernels); False when the map has no such kernel."""
    label = next((k for k, v in kernel_choices(fmap).items() if v == kernel), None)
    if label is None:
        return False
    key = f"fm_{index}"
    for other in Picked:
        if other:
            st.session_state[f"{key}_{other}"] = label if other == Picked.KERNEL else None
    mark_kernel(fmap, kernel)
    return True


def mark_kernel(fmap: list[FusionEntry], kernel: str | None) -> None:
    """Mark the lines `kernel` came from in the code editor (None: unmark)."""
    entry = next((e for e in fmap if e.kernel == kernel), None)
    if entry is None:
        clear_marks()
        return
    lines = sorted(entry.lines)
    mark_lines(lines, f"kernel {kernel}" + ("" if lines else ": no line of your code"))


def show_in_map_button(fmap: list[FusionEntry], kernel: str, index: int, key: str) -> None:
    """A button that opens the Fusion tab with `kernel` picked in result `index`'s map
    (for a view elsewhere whose rows name kernels)."""
    st.button(
        f"Show `{kernel}` in the fusion map",
        key=key,
        on_click=_open_in_map,
        args=(fmap, kernel, index),
    )


def _open_in_map(fmap: list[FusionEntry], kernel: str, index: int) -> None:
    """Before the rerun draws the tabs: pick the kernel in the map, open its tab."""
    if pick_kernel(fmap, kernel, index):
        st.session_state.result_tab = "Fusion"


def selection(fmap: list[FusionEntry], stablehlo: Graph, index: int) -> Selection:
    """Kernel picker, op search and line picker; the last one changed wins."""
    key = f"fm_{index}"
    kernels, ops = kernel_choices(fmap), op_choices(stablehlo)
    lines = sorted(viz.fusion.view.line_kernels(fmap))
    c1, c2, c3 = st.columns([3, 3, 2])

    def keep(which: str) -> None:  # one selection at a time
        for other in Picked:
            if other and other != which:
                st.session_state[f"{key}_{other}"] = None
        if which == Picked.KERNEL:  # the way back: its lines, marked in the editor
            mark_kernel(fmap, kernels.get(st.session_state[f"{key}_kernel"] or ""))

    pick = c1.selectbox(
        "Kernel",
        list(kernels),
        index=None,
        key=f"{key}_kernel",
        on_change=keep,
        args=(Picked.KERNEL,),
        placeholder=plural(len(kernels), "kernel"),
        help="pick one to light up its ops in both graphs and its lines in your code",
    )
    op = c2.selectbox(
        "StableHLO op",
        list(ops),
        index=None,
        key=f"{key}_op",
        on_change=keep,
        args=(Picked.OP,),
        placeholder="type to find an op",
        help="type to search; a picked op shows the kernel it went into",
    )
    line = c3.selectbox(
        "Line",
        lines,
        index=None,
        key=f"{key}_line",
        on_change=keep,
        args=(Picked.LINE,),
        placeholder="line",
        help="a line of your code: the kernels its ops went into",
    )
    if not (pick or op or line):  # nothing picked here: the line followed elsewhere
        line = st.session_state.get(FOLLOWED)
    return select(fmap, stablehlo, kernels.get(pick or ""), ops.get(op or ""), line)


def graphs(
    profile: Profile | None,
    fmap: list[FusionEntry],
    stablehlo: Graph,
    compiled: Graph,
    colours: dict[str, str],
    chosen: Selection,
    index: int,
) -> None:
    """StableHLO (before) and compiled HLO (after), one above the other, one colour per
    kernel."""
    t1, t2 = st.columns(2)
    focus = bool(chosen) and t1.toggle(
        "Only the selection and its neighbours", value=True, key=f"fm_focus_{index}"
    )
    heat = bool(profile) and t2.toggle(
        "Heat: colour the compiled graph by time per kernel",
        value=True,
        key=f"fm_heat_{index}",
    )
    node_kernels = viz.fusion.view.compiled_kernels(compiled)
    lit = [n for n, ks in node_kernels.items() if set(ks) & set(chosen.kernels)]
    left, right = st.container(), st.container()  # beside the code: one above the other
    panels = (
        (
            left,
            stablehlo,
            viz.fusion.view.ops_by_kernel(fmap, "stablehlo"),
            colours,
            chosen.ops,
            "StableHLO (before fusion)",
        ),
        (
            right,
            compiled,
            node_kernels,
            viz.fusion.view.heat_colours(profile) if heat else colours,
            lit,
            "compiled HLO (after fusion)" + (": heat = time per step" if heat else ""),
        ),
    )
    for column, graph, kernels_of, fills, ids, title in panels:
        view = viz.fusion.view.selection_view(graph, ids, focus)
        shown, _ = viz.graph.visible(view)
        with column:
            st.caption(
                f"{title} · {len(shown)} of {len(graph.nodes)} nodes"
                + (f" · {chosen.title} lit" if chosen else "")
            )
            show_graph(viz.fusion.view.paint(view, kernels_of, fills), len(shown), height=480)


def details(fmap: list[FusionEntry], stablehlo: Graph, jaxpr: Graph, chosen: Selection) -> None:
    """The selection's ops in each IR and its kernels."""
    if not chosen:
        st.markdown("**Selection**")
        st.caption("Pick a kernel, an op or a line above: its ops light up in red in both graphs.")
        not_found(fmap, stablehlo)
        return
    st.markdown(f"**{chosen.title}**")
    nodes = stablehlo.node_map()
    by_kernel = {e.kernel: e for e in fmap}
    rows = [
        {
            "kernel": k,
            "kind": by_kernel[k].kind,
            "jaxpr eqns": listed(by_kernel[k].primitives, 12),
            "lines": ", ".join(map(str, by_kernel[k].lines)),
        }
        for k in chosen.kernels
        if k in by_kernel
    ]
    st.caption(plural(len(chosen.kernels), "kernel"))
    if rows:
        table(rows)
    ops = [nodes[i] for i in chosen.ops if i in nodes]
    st.caption(plural(len(ops), "StableHLO op"))
    if ops:
        table(
            [
                {
                    "op": n.op.removeprefix("stablehlo."),
                    "id": n.id,
                    "type": n.type,
                    "line": n.source.line if n.source else None,
                    "scope": "/".join(n.scope),
                }
                for n in ops
            ],
            height=min(36 + 35 * len(ops), 320),
        )
    eqns = selected_eqns(chosen, fmap, jaxpr)
    if eqns:
        st.caption(
            f"{plural(len(eqns), 'jaxpr equation')}: "
            + ", ".join(f"{p} ×{n}" for p, n in Counter(e.op for e in eqns).most_common())
        )
    if not chosen.kernels:
        st.warning("Not found in the optimized program: XLA folded or removed it.")


def not_found(fmap: list[FusionEntry], stablehlo: Graph) -> None:
    missing = missing_ops(fmap, stablehlo)
    if not missing:  # every op reached a kernel: nothing to list
        return
    with st.expander(f"{len(missing)} StableHLO ops not found in the optimized program"):
        st.caption("XLA folded them into constants or removed them.")
        table(
            {
                "op": n.op.removeprefix("stablehlo."),
                "id": n.id,
                "line": n.source.line if n.source else None,
            }
            for n in missing
        )


def kernel_table(profile: Profile | None, fmap: list[FusionEntry], device: str, index: int) -> None:
    if profile and profile.kernels:
        st.plotly_chart(
            viz.fusion.view.kernel_time_chart(profile), width="stretch", key=f"fm_chart_{index}"
        )
    elif profile:
        st.info(f"{device} emitted no per-kernel events in the trace.")
    if profile and profile.kernels:
        roofline_view(profile, {e.kernel: e.title for e in fmap if e.title}, index)
    rows = viz.fusion.view.kernel_rows(fmap, profile)
    kernels = sum(1 for e in fmap if e.is_kernel)
    st.markdown(
        f"**{kernels} kernels** · the StableHLO ops and jaxpr equations each absorbed, "
        "and the source lines they came from" + (" · slowest first" if profile else "")
    )
    table(rows, height=min(38 + 35 * len(rows), 460))
    for title, text in viz.fusion.view.kernel_irs(fmap):
        with st.expander(title):
            st.code(text, language="mlir")


def roofline_view(profile: Profile, titles: dict[str, str], index: int) -> None:
    """The kernels on the chip's roofline, what it leaves out and why, or why there is
    none."""
    line = roofline(profile)
    if line.points:
        st.plotly_chart(roofline_chart(line), width="stretch", key=f"fm_roofline_{index}")
    if line.peaks is not None:
        st.caption(f"Peaks of the {peaks_words(line.peaks)} ({line.peaks.source})")
    if line.note:
        st.caption(f"Roofline: {line.note}.")
    said = unplaced_words(line, titles)
    if PALLAS in said:  # a Pallas kernel's missing cost is the user's to give
        st.warning(f"Roofline: {said.pop(PALLAS)}.")
    notes = [*said.values(), past_hbm_words(line), undrawn_words(line)]
    if notes := [f"- {words}." for words in notes if words]:
        st.caption("\n".join(["Read the roofline with these in mind:", *notes]))
    if line.points:
        table(roofline_rows(line), height=min(38 + 35 * len(line.points), 320))
