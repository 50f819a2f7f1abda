"""The Recordings page's job view: the recordings of one multi-process job together
(divergences first, then one timeline with a row per process, the processes, the
stragglers). Reads nothing but history: demo mode shows it as it is."""

from __future__ import annotations

import streamlit as st

from ui.tables import table
from viz.recorder import (
    KIND_MEANING,
    JobError,
    JobView,
    RecordingRow,
    Recordings,
    divergence_title,
    ended_first_text,
    from_history,
    job_timeline,
    job_view,
    process_rows,
    processes_text,
    site_rows,
    straggler_rows,
)
from viz.units import seconds

MAX_DIVERGENCES = 12  # shown; `jitscope job --json` lists them all


def job_label(rows: list[RecordingRow], job: str) -> str:
    mine = [r for r in rows if r.job == job]
    newest = max(mine, key=lambda r: r.id)
    return f"{newest.name} · {len(mine)} processes · {newest.when} · job {job}"


def job_section(db: Recordings, job: str) -> None:
    try:
        view = job_view(from_history(db, job))
    except JobError as exc:
        st.warning(f"This job cannot be shown: {exc}", icon=":material/block:")
        return
    overview(view)
    divergences(view)
    st.plotly_chart(job_timeline(view), width="stretch")
    st.subheader("Processes")
    table(process_rows(view))
    stragglers(view)


def overview(view: JobView) -> None:
    cols = st.columns(4)
    cols[0].metric("processes", f"{len(view.processes)} of {view.count}")
    cols[1].metric("divergences", len(view.divergences))
    slowest = max(view.processes, key=lambda p: p.compile_s)
    cols[2].metric(f"most compile time (process {slowest.index})", seconds(slowest.compile_s))
    cols[3].metric("ended early", sum(p.ended_early for p in view.processes))
    hosts = sorted({p.host for p in view.processes})
    absent = f" · no recording of {processes_text(view.absent)}" if view.absent else ""
    st.caption(f"job `{view.job}` on {', '.join(hosts)}{absent}")
    ended = ended_first_text(view)
    if ended:
        st.error(ended, icon=":material/dangerous:")


def divergences(view: JobView) -> None:
    st.subheader("Where the processes diverge")
    if not view.divergences:
        st.success(
            "No divergence: every process compiled the same programs, with the same "
            "signatures, in the same order.",
            icon=":material/check_circle:",
        )
        return
    st.caption("The earliest first: a later divergence often follows from an earlier one.")
    for d in view.divergences[:MAX_DIVERGENCES]:
        with st.container(border=True):
            st.error(
                f"{divergence_title(d)}: {d.detail}  \n*{KIND_MEANING[d.kind]}*",
                icon=":material/call_split:",
            )
            if d.call_sites:
                table(site_rows(d))
    hidden = len(view.divergences) - MAX_DIVERGENCES
    if hidden > 0:
        st.caption(f"… and {hidden} more (`jitscope job --json OUT` lists them all).")


def stragglers(view: JobView) -> None:
    st.subheader("Stragglers: compile time per process")
    if not view.stragglers:
        st.caption("No function was compiled by more than one process.")
        return
    st.caption(
        "Every collective waits for the slowest process: each function's compile time "
        "(trace + lower + XLA) in every process, the slowest against the median."
    )
    table(straggler_rows(view))
