"""Diff: any two runs side by side — counts, timings, cost, memory, kernels, ops, IR text
and the two compiled graphs. The numbers come from `viz.diff`; this page only lays them out."""

from __future__ import annotations

import streamlit as st

import ui
from viz import demo
from viz.diff import (
    COUNT_PATHS,
    LABELS,
    Diff,
    Origin,
    PeakDiff,
    ShardingDiff,
    arg_change_rows,
    clock_note,
    collective_rows,
    collectives_line,
    diff_reports,
    failure,
    kernel_rows,
    op_rows,
    rows,
    shown,
)
from viz.history import History, HistoryError, Run, default_pair, sample_runs
from viz.ir.model import IR
from viz.memory.display import buffer_rows
from viz.report import Report

ui.leave_legacy_pages()  # a deep link may start here, without app.py

st.title("Diff")
st.caption(
    "Two runs side by side: B compared with A, every Δ is B − A. Kernels are matched by "
    "kind, the ops inside and their source lines, not by name (XLA renumbers names)."
)

Side = tuple[Report, Origin | None]  # a report, and its run when it is from the history


def runs_to_pick(db: History) -> list[Run]:
    runs = db.runs(limit=2000)
    return sample_runs(runs) if demo.enabled() else runs


def resolve(db: History, item: int | Report) -> Side | None:
    """A report handed over as it is, or a history run by id (cached per session)."""
    if isinstance(item, Report):
        return item, None
    cache = st.session_state.setdefault("diff_cache", {})
    if item not in cache:
        cache[item] = db.recorded(item)
    recorded = cache[item]
    return (recorded.report, recorded.origin) if recorded else None


def take_request() -> None:
    """A pair handed over by `ui.open_diff` or a link (?a=3&b=5) becomes the picks."""
    pair = st.session_state.pop("diff_pair", None)
    if pair is None and "diff_a" not in st.session_state:
        a, b = st.query_params.get("a", ""), st.query_params.get("b", "")
        if a.isdigit() and b.isdigit():
            pair = (int(a), int(b))
    if pair is None:
        return
    if any(isinstance(x, Report) for x in pair):
        st.session_state.diff_handed = pair
        return
    st.session_state.pop("diff_handed", None)
    st.session_state.diff_a, st.session_state.diff_b = pair


def pickers(runs: list[Run]) -> tuple[int, int]:
    """A and B; until picked, the two newest successful runs of one function."""
    by_id = {r.id: r for r in runs}
    ids = list(by_id)
    first_a, first_b, why = default_pair(runs)
    for key, default in (("diff_a", first_a.id), ("diff_b", first_b.id)):
        if st.session_state.get(key) not in by_id:
            st.session_state[key] = default

    def label(i: int) -> str:
        r = by_id[i]
        return f"#{r.id} · {r.settings.function}({r.settings.args}) · {r.when}" + (
            f" · {r.options_text}" if r.options_text else ""
        )

    c1, c2 = st.columns(2)
    a = c1.selectbox("A (before)", ids, format_func=label, key="diff_a")
    b = c2.selectbox("B (after)", ids, format_func=label, key="diff_b")
    if why and (a, b) == (first_a.id, first_b.id):
        st.caption(why[0].upper() + why[1:] + ".")
    st.query_params.from_dict({"a": str(a), "b": str(b)})
    return a, b


def header(d: Diff, sides: tuple[Side, Side], named: bool) -> None:
    """Device and options of each side (and what ran, unless the pickers above say it);
    a failed run, how it failed."""
    for column, name, side, (report, origin) in zip(
        st.columns(2), "AB", (d.a, d.b), sides, strict=True
    ):
        s = side.settings
        options = [f"`{k}={v}`" for k, v in s.compiler_options.items()]
        options += [f"static `{x}`" for x in s.static] + [f"donate `{x}`" for x in s.donate]
        call = f"`{s.function}({s.args})` " if named else ""
        column.caption(
            f"**{name}** · {call}on {s.device} · "
            + ("options: " + ", ".join(options) if options else "default options")
            + ("" if side.full else " · numbers only: the full report was not kept")
            + ("" if side.ok else f" · **{failure(report, origin, name)}**")
        )


def count_metrics(d: Diff) -> None:
    row = st.container(horizontal=True, wrap=True, gap="large")  # wide counts wrap, not cut
    fa, fb = d.failed
    for name in COUNT_PATHS:
        c = d.counts[name]
        row.metric(
            LABELS[name],
            f"{shown('counts', name, c.a, fa)} → {shown('counts', name, c.b, fb)}",
            delta=c.delta,  # a number: Streamlit reads its sign for the arrow
            delta_color="inverse",
            help="A → B; fewer is green",
            width="content",
        )


def numbers_tab(d: Diff) -> None:
    for group, title, deltas in (
        ("timings", "Timings", d.timings),
        ("cost", "Cost", d.cost),
        ("memory", "Memory", d.memory),
    ):
        st.markdown(f"**{title}**")
        ui.table(rows(group, deltas, d.failed))
        if group == "timings" and clock_note(d):
            st.caption(clock_note(d))
    if d.peak is not None:
        peak_buffers(d.peak)


def peak_line(d: Diff) -> None:
    """The two peaks in one sentence, under the counts: what the change did to memory."""
    if d.peak is not None and d.peak.said:
        st.markdown(f"**Memory peak** · {d.peak.said[0].upper()}{d.peak.said[1:]}")


def peak_buffers(p: PeakDiff) -> None:
    """The largest buffers at each run's peak, side by side."""
    sides = zip(st.columns(2), "AB", (p.a_buffers, p.b_buffers), strict=True)
    for column, name, buffers in sides:
        column.markdown(f"**{name}** · live at the peak, largest first")
        if buffers:
            with column:
                ui.table(buffer_rows(buffers))
        else:
            column.caption("Not kept: this run has its numbers only.")


def kernels_tab(d: Diff) -> None:
    k = d.kernels
    if k.note:
        st.info(k.note.capitalize() + ".")
        return
    st.markdown(
        f"**{len(k.changed)} changed · {len(k.added)} added · {len(k.removed)} "
        f"removed** · {k.unchanged} unchanged"
    )
    table = kernel_rows(k)
    if table:
        ui.table(table)


def ops_tab(d: Diff) -> None:
    every = st.toggle("Show unchanged ops too", key="diff_all_ops")
    for column, deltas, title in zip(
        st.columns(2),
        (d.ops, d.stablehlo_ops),
        ("Compiled HLO ops by type", "StableHLO ops by type"),
        strict=True,
    ):
        table = op_rows(deltas, every, d.failed)
        column.markdown(f"**{title}**")
        if table:
            with column:
                ui.table(table)
        else:
            column.caption("No op type changed its count.")


def ir_tab(d: Diff) -> None:
    for ir, x in d.ir.items():
        title = ui.IR_TITLES[ir]
        if not x.kept:
            st.markdown(f"**{title}**")
            st.info(x.note.capitalize() + ".")
            continue
        summary = f"+{x.added} −{x.removed} lines" + (f" · {x.note}" if x.note else "")
        with st.expander(f"{title} · {summary}", expanded=ir == IR.JAXPR):
            if x.diff:
                st.code(x.diff, language="diff", height=420)
            else:
                st.caption("The two texts are identical.")


def sharding_tab(s: ShardingDiff) -> None:
    """The two meshes, the argument leaves split differently, the collectives' delta."""
    for column, name, mesh in zip(st.columns(2), "AB", (s.mesh_a, s.mesh_b), strict=True):
        axes = " × ".join(f"{k}={v}" for k, v in mesh.items()) or "not sharded"
        column.markdown(f"**{name}** · mesh {axes}")
    st.markdown(f"**Collectives** · {collectives_line(s).removeprefix('collectives: ')}")
    table = collective_rows(s)
    if table:
        ui.table(table)
    else:
        st.caption("Neither run has collectives.")
    st.markdown("**Arguments split differently** · sharding · per-device shape")
    if s.args:
        ui.table(arg_change_rows(s))
    else:
        st.caption("Every argument leaf is split the same way in both runs.")


def graphs_tab(sides: tuple[Side, Side]) -> None:
    panels = st.toggle(
        "Find, expand and inspect nodes in each graph",
        key="diff_panels",
        help="the full graph panel for each run, instead of the default view",
    )
    kept = [(origin is None or origin.full) and IR.COMPILED in r.graphs for r, origin in sides]
    dots = [r.graphs[IR.COMPILED].dot for (r, _), k in zip(sides, kept, strict=True) if k]
    box = ui.shared_box(dots)  # both at one scale
    for column, name, (report, origin), has_graph in zip(
        st.columns(2), "AB", sides, kept, strict=True
    ):
        with column:
            if not has_graph:
                failed = failure(report, origin, name)
                why = f"{failed}: it has no compiled graph" if failed else None
                st.info(f"{name}: {why or 'the full report was not kept, so its graph is gone'}.")
                continue
            title = f"{name} · {report.function}({report.args})"
            if panels and IR.COMPILED in report.graph_models:
                model = report.graph_models[IR.COMPILED]
                marked = report.sharding.collective_nodes if report.sharding else frozenset()
                ui.graph_panel(
                    IR.COMPILED,
                    model,
                    key=f"diff_graph_{name}",
                    title=title,
                    highlight=marked,
                    drawn=report.graphs[IR.COMPILED].dot,
                )
                continue
            graph = report.graphs[IR.COMPILED]
            st.markdown(f"**{title}** · {graph.visible_nodes} of {graph.total_nodes} nodes")
            ui.show_graph(graph.dot, graph.visible_nodes, height=560, box=box)


def show(a: Side, b: Side, named: bool = True) -> None:
    d = diff_reports(a[0], b[0], origins=(a[1], b[1]))
    header(d, (a, b), named)
    count_metrics(d)
    peak_line(d)
    render = {
        **({"Sharding": lambda: sharding_tab(d.sharding)} if d.sharding else {}),
        "Timings, cost, memory": lambda: numbers_tab(d),
        "Kernels": lambda: kernels_tab(d),
        "Ops by type": lambda: ops_tab(d),
        "IR text": lambda: ir_tab(d),
        "Compiled graphs": lambda: graphs_tab((a, b)),
    }
    tabs = st.tabs(list(render), key="diff_tab", on_change="rerun")  # only the open one draws
    for draw, tab in zip(render.values(), tabs, strict=True):
        if tab.open:
            with tab:
                draw()


def page() -> None:
    try:
        db = History()
        runs = runs_to_pick(db)
    except HistoryError as exc:
        st.error(f"The history cannot be read: {exc}", icon=":material/error:")
        return
    take_request()
    handed = st.session_state.get("diff_handed")
    if handed:
        sides = [resolve(db, x) for x in handed]
        if st.button("Pick two runs from the history instead"):
            del st.session_state.diff_handed
            st.rerun()
    elif not runs:
        st.info("No runs yet: analyze something in **Explore**, and it appears here.")
        return
    else:
        sides = [resolve(db, i) for i in pickers(runs)]
    a, b = sides
    if a is None or b is None:
        st.warning("That run is no longer in the history.")
        return
    show(a, b, named=bool(handed))


page()
