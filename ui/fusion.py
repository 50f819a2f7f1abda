"""The Fusion tab's main view: which ops became which kernel, where each came
from, and where the time goes. Layout only: the map and the profile come from
the worker in the report; colours, tints and tables from `viz.fusion_view`.
Nothing here imports jax.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd
import streamlit as st

import viz.fusion.view
import viz.graph
from ui.cards import error_card
from ui.graphs import graph_of, show_graph
from ui.results import Result
from ui.workers import request
from viz.format import seconds
from viz.ir.model import Graph

PROFILE_RUNS = 5


def fusion_map_view(res: Result, index: int) -> None:
    """Coverage, selection, both graphs coloured by kernel, tinted source, kernel
    table and (when profiled) the time per kernel."""
    r, profile = res.report, res.profile or res.report.get("profile")
    fmap, models = r.get("fusion_map") or [], r.get("graph_models") or {}
    if not fmap or not {"stablehlo", "compiled"} <= set(models):
        st.info("No fusion map for this result (it did not compile).")
        return
    st.markdown(viz.fusion.view.coverage_text(r.get("fusion_map_coverage")))
    profile_button(res, index)
    stablehlo, compiled = graph_of(models["stablehlo"]), graph_of(models["compiled"])
    jaxpr = graph_of(models["jaxpr"]) if "jaxpr" in models else Graph("jaxpr")
    colours = viz.fusion.view.kernel_colours(e["kernel"] for e in fmap if e["kind"] != "no_kernel")
    chosen = selection(r, fmap, stablehlo, index)
    graphs(profile, fmap, stablehlo, compiled, colours, chosen, index)
    left, right = st.columns([3, 2], gap="medium")
    with left:
        st.markdown("**Your code**, each line tinted by the kernel(s) its ops went into")
        st.html(viz.fusion.view.tinted_source(res.code, fmap, colours, chosen["lines"]))
    with right:
        details(fmap, stablehlo, jaxpr, chosen)
    kernel_table(profile, fmap, r.get("device") or "This platform", index)


def profile_button(res: Result, index: int) -> None:
    """'Profile kernels': analyze again in the worker under jax.profiler, with the
    analysed run's settings (another compile would have other kernels)."""
    p = res.profile or res.report.get("profile")
    if p:
        st.caption(
            f"Profiled with {p['source']}: {p['runs']} runs, "
            f"{seconds(p['step_s'])} per step, {seconds(p['unattributed_s'])} outside "
            "any kernel"
            + (" · kernels overlapped: shares add up to more than 1" if p.get("concurrent") else "")
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
        result = request("analyze", **res.settings(), runs=PROFILE_RUNS, profile=True)
    res.profile = result.get("profile") or res.profile
    for warning in result.get("warnings") or []:
        if warning.startswith("profile"):
            st.warning(warning)
    if result.get("error"):
        error_card(result["error"], res.code)
    if res.profile:
        st.rerun()


def selection(
    r: dict[str, Any], fmap: list[dict[str, Any]], stablehlo: Graph, index: int
) -> dict[str, Any]:
    """Kernel picker, op search and line picker; the last one changed wins."""
    key = f"fm_{index}"
    kernels = [e for e in fmap if e["stablehlo_ops"] or e["kind"] != "no_kernel"]
    k_labels = {
        f"{e['kernel']} · {e['kind']} · {len(e['stablehlo_ops'])} ops"
        + (f" · lines {', '.join(map(str, e['lines'][:6]))}" if e["lines"] else ""): e["kernel"]
        for e in kernels
    }
    ops = [n for n in stablehlo.nodes if n.kind == "op" and n.op != "stablehlo.constant"]
    o_labels = {
        f"{n.label or n.op} · {n.id}"
        + (f" · line {n.source.line}" if n.source else "")
        + (f" · {'/'.join(n.scope)}" if n.scope else ""): n.id
        for n in ops
    }
    lines = sorted(viz.fusion.view.line_kernels(fmap))
    c1, c2, c3 = st.columns([3, 3, 1])

    def keep(which: str) -> None:  # one selection at a time
        for other in ("kernel", "op", "line"):
            if other != which:
                st.session_state[f"{key}_{other}"] = None

    pick = c1.selectbox(
        "Kernel",
        list(k_labels),
        index=None,
        key=f"{key}_kernel",
        on_change=keep,
        args=("kernel",),
        placeholder=f"{len(k_labels)} kernels: pick one to light up its ops",
    )
    op = c2.selectbox(
        "StableHLO op",
        list(o_labels),
        index=None,
        key=f"{key}_op",
        on_change=keep,
        args=("op",),
        placeholder="find an op (type to search) to see its kernel",
    )
    line = c3.selectbox(
        "Line",
        lines,
        index=None,
        key=f"{key}_line",
        on_change=keep,
        args=("line",),
        placeholder="line",
    )
    return _resolve(fmap, stablehlo, k_labels.get(pick or ""), o_labels.get(op or ""), line)


def _resolve(
    fmap: list[dict[str, Any]],
    stablehlo: Graph,
    kernel: str | None,
    op: str | None,
    line: int | None,
) -> dict[str, Any]:
    """What the selection lights up: kernels, StableHLO op ids, source lines."""
    by_kernel = {e["kernel"]: e for e in fmap}
    chosen: dict[str, Any] = {"kernels": [], "ops": [], "lines": set(), "what": ""}
    if kernel:
        entry = by_kernel[kernel]
        chosen.update(
            kernels=[kernel],
            ops=[o["id"] for o in entry["stablehlo_ops"]],
            lines=set(entry["lines"]),
            what=f"kernel {kernel}",
        )
    elif op:
        kernels = viz.fusion.view.ops_by_kernel(fmap, "stablehlo").get(op, [])
        node = stablehlo.node_map()[op]
        chosen.update(
            kernels=kernels,
            ops=[op],
            lines={node.source.line} if node.source else set(),
            what=f"op {node.label or node.op} ({op})",
        )
    elif line is not None:
        ops = [n.id for n in stablehlo.nodes if n.source and n.source.line == line]
        chosen.update(
            kernels=viz.fusion.view.line_kernels(fmap).get(line, []),
            ops=ops,
            lines={line},
            what=f"line {line}",
        )
    return chosen


def graphs(
    profile: dict[str, Any] | None,
    fmap: list[dict[str, Any]],
    stablehlo: Graph,
    compiled: Graph,
    colours: dict[str, str],
    chosen: dict[str, Any],
    index: int,
) -> None:
    """StableHLO (before) and compiled HLO (after), side by side, one colour per kernel."""
    t1, t2 = st.columns(2)
    focus = bool(chosen["what"]) and t1.toggle(
        "Only the selection and its neighbours", value=True, key=f"fm_focus_{index}"
    )
    heat = bool(profile) and t2.toggle(
        "Heat: colour the compiled graph by time per kernel",
        value=True,
        key=f"fm_heat_{index}",
    )
    node_kernels = viz.fusion.view.compiled_kernels(compiled)
    lit = [n for n, ks in node_kernels.items() if set(ks) & set(chosen["kernels"])]
    left, right = st.columns(2, gap="small")
    panels = (
        (
            left,
            stablehlo,
            viz.fusion.view.ops_by_kernel(fmap, "stablehlo"),
            colours,
            chosen["ops"],
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
                + (f" · {chosen['what']} lit" if chosen["what"] else "")
            )
            show_graph(viz.fusion.view.paint(view, kernels_of, fills), len(shown), height=600)


def details(
    fmap: list[dict[str, Any]], stablehlo: Graph, jaxpr: Graph, chosen: dict[str, Any]
) -> None:
    """The selection's ops in each IR and its kernels."""
    if not chosen["what"]:
        st.markdown("**Selection**")
        st.caption("Pick a kernel, an op or a line above: its ops light up in red in both graphs.")
        not_found(fmap, stablehlo)
        return
    st.markdown(f"**{chosen['what']}**")
    nodes = stablehlo.node_map()
    by_kernel = {e["kernel"]: e for e in fmap}
    rows = [
        {
            "kernel": k,
            "kind": by_kernel[k]["kind"] if k in by_kernel else "",
            "jaxpr eqns": ", ".join(
                e["primitive"] for e in by_kernel.get(k, {}).get("jaxpr_eqns", [])
            )[:200],
            "lines": ", ".join(map(str, by_kernel.get(k, {}).get("lines", []))),
        }
        for k in chosen["kernels"]
    ]
    st.caption(f"{len(chosen['kernels'])} kernel(s)")
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    ops = [nodes[i] for i in chosen["ops"] if i in nodes]
    st.caption(f"{len(ops)} StableHLO op(s)")
    if ops:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "op": n.op.removeprefix("stablehlo."),
                        "id": n.id,
                        "type": n.type,
                        "line": n.source.line if n.source else None,
                        "scope": "/".join(n.scope),
                    }
                    for n in ops
                ]
            ),
            hide_index=True,
            width="stretch",
            height=min(36 + 35 * len(ops), 320),
        )
    eqns = _eqns(fmap, jaxpr, chosen)
    if eqns:
        st.caption(
            f"{len(eqns)} jaxpr equation(s): "
            + ", ".join(f"{p} ×{n}" for p, n in Counter(e.op for e in eqns).most_common())
        )
    if not chosen["kernels"]:
        st.warning("Not found in the optimized program: XLA folded or removed it.")


def _eqns(fmap: list[dict[str, Any]], jaxpr: Graph, chosen: dict[str, Any]) -> list[Any]:
    """The jaxpr equations of the selection: the kernel's, or those on the line."""
    nodes = jaxpr.node_map()
    if chosen["what"].startswith("kernel"):
        entry = next(e for e in fmap if e["kernel"] == chosen["kernels"][0])
        return [nodes[e["id"]] for e in entry["jaxpr_eqns"] if e["id"] in nodes]
    if chosen["what"].startswith("line"):
        return [
            n
            for n in jaxpr.nodes
            if n.kind == "op" and n.source and n.source.line in chosen["lines"]
        ]
    return []


def not_found(fmap: list[dict[str, Any]], stablehlo: Graph) -> None:
    found = viz.fusion.view.ops_by_kernel(fmap, "stablehlo")
    missing = [
        n
        for n in stablehlo.nodes
        if n.kind == "op" and n.op not in ("stablehlo.constant", "func.call") and n.id not in found
    ]
    with st.expander(f"{len(missing)} StableHLO ops not found in the optimized program"):
        st.caption("XLA folded them into constants or removed them.")
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "op": n.op.removeprefix("stablehlo."),
                        "id": n.id,
                        "line": n.source.line if n.source else None,
                    }
                    for n in missing
                ]
            ),
            hide_index=True,
            width="stretch",
        )


def kernel_table(
    profile: dict[str, Any] | None, fmap: list[dict[str, Any]], device: str, index: int
) -> None:
    if profile and profile.get("kernels"):
        st.plotly_chart(
            viz.fusion.view.kernel_time_chart(profile), width="stretch", key=f"fm_chart_{index}"
        )
    elif profile:
        st.info(f"{device} emitted no per-kernel events in the trace.")
    rows = viz.fusion.view.kernel_rows(fmap, profile)
    kernels = sum(1 for e in fmap if e["kind"] != "no_kernel")
    st.markdown(
        f"**{kernels} kernels** · the StableHLO ops and jaxpr equations each absorbed, "
        "and the source lines they came from" + (" · slowest first" if profile else "")
    )
    st.dataframe(
        pd.DataFrame(rows), hide_index=True, width="stretch", height=min(38 + 35 * len(rows), 460)
    )
