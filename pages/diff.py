"""Diff: any two runs side by side — counts, timings, cost, memory, kernels, ops, IR text
and the two compiled graphs. The numbers come from `viz.diff`; this page only lays them out."""

from __future__ import annotations

import sqlite3
from typing import Any

import pandas as pd
import streamlit as st

import ui
from viz import demo
from viz.diff import COUNT_PATHS, LABELS, diff_reports, human, rows
from viz.history import History, HistoryError, Run, sample_runs

ui.leave_legacy_pages()  # a deep link may start here, without app.py

st.title("Diff")
st.caption(
    "Two runs side by side: B compared with A, every Δ is B − A. Kernels are matched by "
    "kind, the ops inside and their source lines, not by name (XLA renumbers names)."
)


def runs_to_pick(db: History) -> list[Run]:
    runs = db.runs(limit=2000)
    return sample_runs(runs) if demo.enabled() else runs


def resolve(db: History, item: int | dict[str, Any]) -> dict[str, Any] | None:
    """A report: one handed over as a dict, or a history run by id (cached per session)."""
    if isinstance(item, dict):
        return item
    cache = st.session_state.setdefault("diff_cache", {})
    if item not in cache:
        cache[item] = db.report(item)
    return cache[item]


def take_request() -> None:
    """A pair handed over by `ui.open_diff` or a link (?a=3&b=5) becomes the picks."""
    pair = st.session_state.pop("diff_pair", None)
    if pair is None and "diff_a" not in st.session_state:
        q = st.query_params
        if q.get("a", "").isdigit() and q.get("b", "").isdigit():
            pair = (int(q["a"]), int(q["b"]))
    if pair is None:
        return
    if any(isinstance(x, dict) for x in pair):
        st.session_state.diff_dicts = pair
        return
    st.session_state.pop("diff_dicts", None)
    st.session_state.diff_a, st.session_state.diff_b = pair


def pickers(runs: list[Run]) -> tuple[int, int]:
    by_id = {r.id: r for r in runs}
    ids = list(by_id)
    for key, default in (("diff_a", ids[min(1, len(ids) - 1)]), ("diff_b", ids[0])):
        if st.session_state.get(key) not in by_id:
            st.session_state[key] = default

    def label(i: int) -> str:
        r = by_id[i]
        return f"#{r.id} · {r.function}({r.args}) · {r.when}" + (
            f" · {r.options_text}" if r.options_text else ""
        )

    c1, c2 = st.columns(2)
    a = c1.selectbox("A (before)", ids, format_func=label, key="diff_a")
    b = c2.selectbox("B (after)", ids, format_func=label, key="diff_b")
    st.query_params.from_dict({"a": str(a), "b": str(b)})
    return a, b


def header(d: dict[str, Any], named: bool) -> None:
    """Device and options of each side (and what ran, unless the pickers above say it)."""
    for column, name in zip(st.columns(2), ("a", "b"), strict=True):
        s = d[name]
        options = [f"`{k}={v}`" for k, v in s["compiler_options"].items()]
        options += [f"static `{x}`" for x in s["static"]] + [f"donate `{x}`" for x in s["donate"]]
        call = f"`{s['function']}({s['args']})` " if named else ""
        column.caption(
            f"**{name.upper()}** · {call}on {s['device']} · "
            + ("options: " + ", ".join(options) if options else "default options")
            + ("" if s.get("full", True) else " · numbers only: the full report was not kept")
            + ("" if s.get("ok", True) else " · this run failed")
        )


def count_metrics(d: dict[str, Any]) -> None:
    for column, name in zip(st.columns(len(COUNT_PATHS)), COUNT_PATHS, strict=True):
        c = d["counts"][name]
        column.metric(
            LABELS[name],
            f"{human('counts', name, c['a'])} → {human('counts', name, c['b'])}",
            delta=c["delta"],  # a number: Streamlit reads its sign for the arrow
            delta_color="inverse",
            help="A → B; fewer is green",
        )


def numbers_tab(d: dict[str, Any]) -> None:
    for group, title in (("timings", "Timings"), ("cost", "Cost"), ("memory", "Memory")):
        st.markdown(f"**{title}**")
        st.dataframe(pd.DataFrame(rows(d, group)), hide_index=True, width="stretch")


def kernels_tab(d: dict[str, Any]) -> None:
    k = d["kernels"]
    if k["note"]:
        st.info(k["note"].capitalize() + ".")
        return
    st.markdown(
        f"**{len(k['changed'])} changed · {len(k['added'])} added · {len(k['removed'])} "
        f"removed** · {k['unchanged']} unchanged"
    )

    def ops(kernel: dict[str, Any]) -> str:
        return ", ".join(f"{op} ×{n}" for op, n in kernel["ops"].items())

    table = []
    for c in k["changed"]:
        change = [f"{op} {x['delta']:+d}" for op, x in c["ops"].items()]
        if c["lines"]:
            gone = sorted(set(c["lines"]["a"]) - set(c["lines"]["b"]))
            new = sorted(set(c["lines"]["b"]) - set(c["lines"]["a"]))
            change.append(
                "source lines " + ", ".join([*(f"−{x}" for x in gone), *(f"+{x}" for x in new)])
            )
        if c["kind"]:
            change.append(f"kind {c['kind']['a']} → {c['kind']['b']}")
        table.append(
            {
                "": "changed",
                "A": c["a"]["name"],
                "B": c["b"]["name"],
                "kind": c["b"]["kind"],
                "what changed": "; ".join(change),
                "ops inside": ops(c["b"]),
            }
        )
    for status, side, items in (("added", "B", k["added"]), ("removed", "A", k["removed"])):
        for kernel in items:
            table.append(
                {
                    "": status,
                    "A": kernel["name"] if side == "A" else "",
                    "B": kernel["name"] if side == "B" else "",
                    "kind": kernel["kind"],
                    "what changed": "lines " + ", ".join(map(str, kernel["lines"])),
                    "ops inside": ops(kernel),
                }
            )
    for same in k["same"]:
        table.append(
            {
                "": "unchanged",
                "A": same["a"],
                "B": same["b"],
                "kind": same["kind"],
                "what changed": "",
                "ops inside": ops(same),
            }
        )
    if table:
        st.dataframe(pd.DataFrame(table), hide_index=True, width="stretch")


def ops_tab(d: dict[str, Any]) -> None:
    every = st.toggle("Show unchanged ops too", key="diff_all_ops")
    for column, key, title in zip(
        st.columns(2),
        ("ops", "stablehlo_ops"),
        ("Compiled HLO ops by type", "StableHLO ops by type"),
        strict=True,
    ):
        table = [
            {"op": op, "A": x["a"], "B": x["b"], "Δ": x["delta"]}
            for op, x in d[key].items()
            if every or x["delta"]
        ]
        column.markdown(f"**{title}**")
        if table:
            column.dataframe(pd.DataFrame(table), hide_index=True, width="stretch")
        else:
            column.caption("No op type changed its count.")


def ir_tab(d: dict[str, Any]) -> None:
    for ir, x in d["ir"].items():
        title = ui.IR_TITLES[ir]
        if not x["kept"]:
            st.markdown(f"**{title}**")
            st.info(x["note"].capitalize() + ".")
            continue
        summary = f"+{x['added']} −{x['removed']} lines" + (f" · {x['note']}" if x["note"] else "")
        with st.expander(f"{title} · {summary}", expanded=ir == "jaxpr"):
            if x["diff"]:
                st.code(x["diff"], language="diff", height=420)
            else:
                st.caption("The two texts are identical.")


def graphs_tab(reports: tuple[dict[str, Any], dict[str, Any]]) -> None:
    panels = st.toggle(
        "Find, expand and inspect nodes in each graph",
        key="diff_panels",
        help="the full graph panel for each run, instead of the default view",
    )
    for column, name, report in zip(st.columns(2), "AB", reports, strict=True):
        graph = (report.get("graphs") or {}).get("compiled")
        model = (report.get("graph_models") or {}).get("compiled")
        with column:
            if not graph:
                st.info(f"{name}: the full report was not kept, so its graph is gone.")
                continue
            title = f"{name} · {report.get('function')}({report.get('args')})"
            if panels and model:
                ui.graph_panel("compiled", model, key=f"diff_graph_{name}", title=title)
                continue
            st.markdown(
                f"**{title}** · {graph.get('visible_nodes')} of {graph.get('total_nodes')} nodes"
            )
            ui.show_graph(graph["dot"], graph.get("visible_nodes") or 0, height=560)


def show(a: dict[str, Any], b: dict[str, Any], named: bool = True) -> None:
    d = diff_reports(a, b)
    header(d, named)
    count_metrics(d)
    render = {
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
    except (sqlite3.Error, OSError, HistoryError) as exc:
        st.error(f"The history cannot be read: {exc}", icon=":material/error:")
        return
    take_request()
    handed = st.session_state.get("diff_dicts")
    if handed:
        reports = [resolve(db, x) for x in handed]
        if st.button("Pick two runs from the history instead"):
            del st.session_state.diff_dicts
            st.rerun()
    elif not runs:
        st.info("No runs yet: analyze something in **Explore**, and it appears here.")
        return
    else:
        reports = [resolve(db, i) for i in pickers(runs)]
    if any(r is None for r in reports):
        st.warning("That run is no longer in the history.")
        return
    show(*reports, named=bool(handed))


page()
