"""History: every analysis recorded in history.sqlite; re-open one in Explore, or diff two."""

from __future__ import annotations

import streamlit as st

import ui
from viz import demo
from viz.history import History, HistoryError, Run, sample_runs

ui.leave_legacy_pages()  # a deep link may start here, without app.py

st.title("History")


def load_runs(db: History) -> list[Run]:
    runs = db.runs(limit=2000)
    return sample_runs(runs) if demo.enabled() else runs


def table(runs: list[Run]) -> list[dict[str, object]]:
    """One row per run: what ran and whether it failed; its times (trace → compile as
    on the Overview, none for a run that never compiled; run median) and memory peak,
    what a regression shows in, in view beside it; key counts (jaxpr equations,
    StableHLO ops, compiled kernels and fusions); its options, device and source."""
    records = []
    for r in runs:
        n = r.numbers
        result = "ok" if r.ok else "failed: " + (r.error_kind or "error").replace("_", " ")
        compiled = n.timings.compile_s is not None
        records.append(
            {
                "run": f"#{r.id}",
                "when": r.when,
                "function": r.settings.function,
                "result": result,
                "args": r.settings.args,
                "trace → compile": ui.seconds(n.compile_total_s if compiled else None),
                "run time": ui.seconds(n.timings.run_median_s),
                "peak": ui.nbytes(n.memory.peak_bytes if n.memory else None),
                "jaxpr": n.jaxpr.eqn_count,
                "StableHLO": n.stablehlo.op_count,
                "kernels": n.compiled.kernel_count,
                "fusions": n.compiled.fusion_count,
                "options": r.options_text,
                "device": r.settings.device,
                "source": f"{r.source} · " + ("full report" if r.full else "numbers only"),
            }
        )
    return records


def run_label(run: Run) -> str:
    return f"#{run.id} · {run.settings.function}({run.settings.args}) · {run.when}"


def reopen(run: Run) -> None:
    """Load the run's code and arguments into Explore; nothing runs until Analyze.
    In demo mode the code comes from the sample by name, never from the database."""
    ui.open_program(History().program(run, sample_only=demo.enabled()), run.settings.device)
    st.session_state.reopened = run.id


def actions(db: History, runs: list[Run]) -> None:
    by_id = {r.id: r for r in runs}
    pick = st.selectbox(
        "Run", list(by_id), format_func=lambda i: run_label(by_id[i]), key="hist_pick"
    )
    run = by_id[pick]
    c1, c2, c3 = st.columns(3)
    can_open = demo.enabled() or db.code(run.id) is not None
    if c1.button(
        "Open in Explore",
        on_click=reopen,
        args=(run,),
        disabled=not can_open,
        width="stretch",
        help="loads its code and arguments; nothing runs until you press Analyze"
        if can_open
        else "this run was recorded without its code",
    ):
        st.switch_page("pages/explore.py")
    previous = next(
        (r for r in runs if r.id < run.id and r.settings.function == run.settings.function), None
    )
    if c2.button(
        f"Diff with the previous run of {run.settings.function}",
        disabled=previous is None,
        width="stretch",
        help=f"#{previous.id} → #{run.id}" if previous else "no earlier run of this function",
    ):
        ui.open_diff(previous.id, run.id)
    if c3.button("Diff two runs…", width="stretch"):
        ui.open_diff(previous.id if previous else run.id, run.id)


def page() -> None:
    try:
        db = History()
        runs = load_runs(db)
    except HistoryError as exc:
        st.error(f"The history cannot be read: {exc}", icon=":material/error:")
        return
    keep = db.keep_reports
    st.caption(
        f"Every analysis from this app and from `jitscope analyze`, kept in "
        f"`{db.path}`. The newest {keep} runs keep their full report (IR texts, kernels, "
        "graphs); older ones keep their numbers."
    )
    if demo.enabled():
        st.info("Demo mode: only runs of the built-in samples are listed.", icon=":material/info:")
    if not runs:
        st.info("No runs yet: analyze something in **Explore**, and it appears here.")
        return
    functions = sorted({r.settings.function for r in runs})
    only = st.selectbox(
        "Function", ["all functions", *functions], key="hist_function", help="filter the list"
    )
    if only != "all functions":
        runs = [r for r in runs if r.settings.function == only]
    ui.table(table(runs), height=min(38 + 35 * len(runs), 460))
    actions(db, runs)


page()
