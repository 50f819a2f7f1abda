"""Recordings: every compile a whole program made (`jitscope record`), why, and from
where; any compile one click from Explore."""

from __future__ import annotations

import streamlit as st

import ui
from ui import compile_time
from ui.job import job_label, job_section
from viz import demo
from viz.history import HistoryError
from viz.program import Program
from viz.recorder import (
    Compile,
    Recording,
    RecordingRow,
    Recordings,
    call_tree,
    call_tree_chart,
    compile_rows,
    diff_recordings,
    diff_rows,
    diff_text,
    eager_words,
    explore_target,
    function_rows,
    need_text,
    orphans,
    recording_html,
    recording_timeline,
    recover,
    short_path,
)
from viz.units import count, nbytes, plural, seconds

ui.leave_legacy_pages()  # a deep link may start here, without app.py

st.title("Recordings")
st.caption(
    "Every compilation of a real program: run it as `jitscope record -- train.py ARGS` "
    "(or `-m pytest tests/`), and each compile it made lands here with its call site, "
    "its signature and why it missed the cache."
)


def list_table(rows: list[RecordingRow]) -> list[dict[str, object]]:
    return [
        {
            "recording": f"#{r.id}",
            "when": r.when,
            "program": r.name,
            "exit": r.exit_code,
            "wall time": seconds(r.wall_s or None),
            "compiles": r.compiles,
            "compile time": seconds(r.compile_s),
            "share": f"{r.compile_s / r.wall_s:.0%}" if r.wall_s else None,
            "functions": r.functions,
            "job": f"{r.job} · process {r.process}" if r.job else None,
        }
        for r in rows
    ]


# widths in pixels ('large': 400) of the columns of sentences, enough to read (the rest
# of a cell shows on hover), after the columns that fit their cells: those stay in view
FUNCTION_WIDTHS = {"why": 300, "advice": "large"}
COMPILE_WIDTHS = {"need": "medium", "why": "large", "jit": "medium"}


def sized(widths: dict[str, str | int]) -> dict[str, object]:
    return {c: st.column_config.TextColumn(width=w) for c, w in widths.items()}  # type: ignore[arg-type]


def overview(rec: Recording) -> None:
    s, program = rec.summary, rec.program
    row = st.container(horizontal=True, wrap=True, gap="large")  # wide values wrap, not cut
    share = s.compile_s / program.wall_s if program.wall_s else None
    top = s.largest_peak
    for label, value, said in (
        ("compiles", count(s.compiles), None),
        ("compile time", seconds(s.compile_s), None),
        ("wall time", seconds(program.wall_s) if program.wall_s else "–", None),
        ("compiling", f"{share:.0%}" if share is not None else "–", None),
        ("functions", s.functions, None),
        (
            "largest peak",
            nbytes(top["bytes"]) if top else "–",
            f"{top['function']}: the most memory live at one step of its compiled program"
            if top
            else "no compiled executable was seen",
        ),
    ):
        row.metric(label, value, help=said, width="content")
    ended = f"exit status {program.exit_code}" + (f" ({program.signal})" if program.signal else "")
    kept = any(f.eager for f in rec.functions)
    listed = "listed below" if kept else "record with --eager to list them"
    eager, advice = eager_words(s, program.wall_s or 0.0, listed) if s.eager_compiles else ("", "")
    extra = f" · {eager}" if eager else ""
    st.caption(f"`{' '.join(program.argv)}` in `{program.cwd}` · {ended}{extra}")
    if advice:
        st.info(f"Op-by-op compiles: {advice}.", icon=":material/bolt:")
    if s.compiles > s.functions:  # recompiles: how many had new inputs, how many did not
        st.caption(
            f"{need_text(s)}: a needed compile had new inputs (or was the function's "
            "first), an avoidable one the same inputs as an earlier compile (a Python "
            "scalar where an array of its dtype and shape was, a weak type, counts as the "
            "same)."
        )
    if program.process is not None:
        p = program.process
        st.caption(f"Process {p.index} of {p.count} of job `{p.job}` on {p.host}: Show → a job.")


def functions(rec: Recording) -> str | None:
    st.subheader("Functions, by compile time")
    ui.table(function_rows(rec), column_config=sized(FUNCTION_WIDTHS))
    keys = [f.key for f in rec.functions]
    if not keys:
        return None
    by_key = {f.key: f for f in rec.functions}
    return st.selectbox(
        "Function",
        keys,
        format_func=lambda k: (
            f"{by_key[k].name} · {by_key[k].compiles} compiles · "
            f"{short_path(by_key[k].defined_at, rec.program.folders)}"
        ),
        key="rec_function",
    )


def compiles_of(rec: Recording, key: str) -> list[Compile]:
    mine = rec.compiles_of(key)
    stats = rec.function(key)
    st.subheader(
        f"Compiles of {stats.name if stats else '?'}, each against the closest earlier one"
    )
    if stats and stats.advice:
        st.info("  \n".join(stats.advice.splitlines()), icon=":material/lightbulb:")
    if stats and stats.compiles > len(mine):
        st.caption(
            f"{stats.compiles - len(mine)} later compiles are counted but kept without details."
        )
    if stats:
        st.caption(f"Defined at `{short_path(stats.defined_at, rec.program.folders)}`")
    ui.table(compile_rows(mine, rec.program.folders), column_config=sized(COMPILE_WIDTHS))
    return mine


def open_in_explore(rec: Recording, mine: list[Compile]) -> None:
    if not mine:
        return
    by_seq = {c.seq: c for c in mine}
    seq = st.selectbox(
        "Compile",
        list(by_seq),
        format_func=lambda n: f"#{n} · {by_seq[n].spec or '(no spec)'}",
        key="rec_compile",
    )
    if demo.enabled():
        st.caption("Demo mode opens no files: a recording can be viewed, not opened.")
        return
    target = explore_target(by_seq[seq], rec.program)
    if target.problem:
        st.warning(target.problem, icon=":material/block:")
        return
    if target.note:
        st.warning(target.note, icon=":material/edit_note:")
    left, right = st.columns(2)
    opened = left.button(
        "Open in Explore",
        icon=":material/biotech:",
        type="primary",
        width="stretch",
        help=f"loads {target.file} with this compile's arguments; nothing runs until Analyze",
    )
    profiled = right.button(
        "Profile this compile",
        icon=":material/timer:",
        width="stretch",
        help="opens it in Explore, analyzes it and shows where its compile time went: "
        "the trace by line, XLA's own spans",
    )
    if opened or profiled:
        ui.open_program(
            Program(
                target.settings,
                origin=f"From recording #{st.session_state.rec_pick}, compile #{seq}: "
                f"`{target.file}`, its imports looking in `{target.settings.folder}`. "
                "The file runs as a module: its `if __name__ == '__main__':` block does not.",
            )
        )
        if profiled:
            compile_time.profile_on_open()
        st.switch_page("pages/explore.py")


def recover_orphans() -> None:
    """Journals of recorders whose parent was killed: offered for storing."""
    left = orphans()
    if not left:
        return
    st.warning(
        f"{plural(len(left), 'recording')} left behind by a recorder that was killed "
        "(`jitscope record --recover` does the same).",
        icon=":material/restore_page:",
    )
    if st.button("Recover them", icon=":material/restore_page:", key="rec_recover"):
        done = recover(left)
        st.success(f"Recovered {plural(len(done), 'recording')}.", icon=":material/check:")


def compare(rec: Recording, rows: list[RecordingRow], db: Recordings) -> None:
    """'Compare with…': the same diff as `jitscope diff rec:A rec:B`."""
    others = [r.id for r in rows if r.id != st.session_state.rec_pick]
    if not others:
        return
    by_id = {r.id: r for r in rows}
    with st.expander("Compare with…", icon=":material/compare_arrows:"):
        other = st.selectbox(
            "Earlier or later recording",
            others,
            format_func=lambda i: f"#{i} · {by_id[i].name} · {by_id[i].when}",
            key="rec_compare",
        )
        base = db.get(other)
        if base is None:
            st.warning("That recording is gone.")
            return
        diff = diff_recordings(base, rec, (f"rec:{other}", f"rec:{st.session_state.rec_pick}"))
        st.code(diff_text(diff), language=None)
        ui.table(diff_rows(diff))


def show_job(rows: list[RecordingRow]) -> bool:
    """Whether to show a whole multi-process job (the default when the newest is one)."""
    choices = ["a job", "one recording"]
    picked = st.radio(
        "Show", choices, index=0 if rows[0].job else 1, horizontal=True, key="rec_show"
    )
    return picked == "a job"


def page() -> None:
    try:
        db = Recordings()
        recover_orphans()
        rows = db.rows()
    except HistoryError as exc:
        st.error(f"The recordings cannot be read: {exc}", icon=":material/error:")
        return
    if not rows:
        st.info("No recordings yet: `jitscope record -- your_script.py`.")
        return
    ui.table(list_table(rows), height=min(38 + 35 * len(rows), 250))
    jobs = list(dict.fromkeys(r.job for r in rows if r.job))  # the newest first
    if jobs and show_job(rows):
        job = st.selectbox("Job", jobs, format_func=lambda j: job_label(rows, j), key="rec_job")
        job_section(db, job)
        return
    by_id = {r.id: r for r in rows}
    pick = st.selectbox(
        "Recording",
        list(by_id),
        format_func=lambda i: f"#{i} · {by_id[i].name} · {by_id[i].when}",
        key="rec_pick",
    )
    rec = db.get(pick)
    if rec is None:
        st.warning("That recording is gone (the history keeps the newest ones).")
        return
    overview(rec)
    st.download_button(
        "Download as HTML",
        recording_html(rec),
        file_name=f"recording-{pick}.html",
        mime="text/html",
        icon=":material/download:",
        help="one self-contained page (no network needed) to attach to a bug report",
    )
    compare(rec, rows, db)
    if rec.compiles:
        st.plotly_chart(recording_timeline(rec), width="stretch")
    key = functions(rec)
    if key is not None:
        open_in_explore(rec, compiles_of(rec, key))
    if rec.compiles:
        st.subheader("Call sites")
        st.plotly_chart(call_tree_chart(call_tree(rec)), width="stretch")


page()
