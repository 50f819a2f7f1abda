"""Explore's Specialization panel (issue #21): what the executable is specialized on,
argument leaf by argument leaf (the three-value rule), what would recompile, asked of
the real jit cache in the worker, and the ops whose sizes came from arguments.

Layout only: the rows come in the report (`viz.specialization.read`, in the worker),
the changed specs and the reading of the cache's answer from `viz.specialization`,
the answers from the cache lab's own requests (`CacheState`, `CacheCalls`) in a cache
session of this panel's own, so the Cache lab's table is left as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import streamlit as st

from ui.results import Result
from ui.tables import table
from ui.workers import ask, owner
from viz.errors import ErrorInfo
from viz.report import Report
from viz.specialization import (
    Change,
    Outcome,
    SpecializedArg,
    changes,
    outcome,
    summary,
    variant_spec,
)
from viz.worker.protocol import CacheCalls, CacheState

STATE_TEXT = {
    "static": "static value",
    "dynamic": "dynamic, known shape",
    "untraceable": "untraceable",
}
STATE_MEANS = {
    "static": "the value is baked in: each new value compiles again",
    "dynamic": "shape, dtype and weak type are baked in; the values are free",
    "untraceable": "its value would decide a shape: jit cannot trace it as an array",
}
VERDICT = {  # how each answer reads, and the box it is shown in
    "hit": ("hit: the cached executable runs, nothing recompiles", st.success),
    "miss": ("miss: jit traces and compiles again", st.warning),
    "failed": ("miss: jit traces again, and the new trace fails", st.error),
    "error": ("no answer", st.info),
}
ROWS_WITH_BUTTONS = 6  # more leaves than this: pick one in a list
SPEC_SHOWN = 160  # characters of a changed spec shown (a big pytree's runs to kilobytes)
TAB = "Specialization"


def overview_link(r: Report, open_tab: Callable[[str], None]) -> None:
    """The Overview's line: what the executable is specialized on, and the button."""
    if not r.specialization:
        return
    text, button = st.columns([3, 2], vertical_alignment="center")
    text.markdown(f"**Specialization**: {summary(r.specialization)}, and what would recompile")
    button.button("Open the specialization", key="ov_spec", on_click=open_tab, args=(TAB,))


def panel(res: Result, index: int) -> None:
    """The whole panel: the rows, the untraceable leaves' pointer to the error card, the
    what-would-recompile checks and the ops whose sizes came from arguments."""
    r = res.report
    what = "this executable is" if r.compiled else "jit would be"  # nothing compiled yet
    st.markdown(
        f"**What {what} specialized on** · the three-value rule: per argument leaf, a "
        "static value, a dynamic value of known shape, or untraceable"
    )
    if not r.specialization:
        st.caption("No arguments were read: the args spec did not parse.")
        return
    legend = " · ".join(f"**{STATE_TEXT[s]}**: {STATE_MEANS[s]}" for s in STATE_MEANS)
    st.caption(legend)
    table(leaf_rows(r.specialization), key=f"sp_{index}")
    untraceable(r)
    if r.ok:
        what_would_recompile(res, index)
    if r.jaxpr:
        sized_ops(r, index)


def after_failed_trace(res: Result, index: int) -> None:
    """With nothing traced there are no tabs: the panel still shows, below the error
    card, when an argument's value is what stopped the trace."""
    if any(row.state == "untraceable" for row in res.report.specialization):
        panel(res, index)


def leaf_rows(rows: list[SpecializedArg]) -> list[dict[str, str | None]]:
    """One line per leaf; the note column only when a row has a note."""
    noted = any(row.note for row in rows)
    return [
        {
            "argument": row.arg,
            "state": STATE_TEXT.get(row.state, row.state),
            "baked in": row.baked_in,
            "weak type": None if row.weak_type is None else ("yes" if row.weak_type else "no"),
            "sharding": row.sharding,
            **({"note": row.note} if noted else {}),
        }
        for row in rows
    ]


def untraceable(r: Report) -> None:
    """Each untraceable leaf, pointing at the error card (just above: the trace failed)
    with its line and its fix."""
    stuck = [row for row in r.specialization if row.state == "untraceable"]
    error: ErrorInfo | None = r.error
    if not stuck or error is None:
        return
    names = ", ".join(f"`{row.arg}`" for row in stuck)
    where = f", at line {error.line}" if error.line else ""
    st.warning(
        f"**{names} cannot be traced as an array**: {stuck[0].note}{where} (the error "
        f"card above).  \n**Fix:** {error.hint}",
        icon=":material/arrow_upward:",
    )


# -- what would recompile ---------------------------------------------------------------
def what_would_recompile(res: Result, index: int) -> None:
    rows = res.report.specialization
    offered = [i for i, row in enumerate(rows) if changes(row)]
    st.markdown("**What would recompile** · each button calls the real jit cache in the worker")
    st.caption(
        "On an emptied cache: the analysed arguments, then the same with one change. The "
        "cache's answer is a hit or a miss with the fields that differ, as in the Cache lab."
    )
    if not offered:
        st.caption("No leaf here can be changed in the spec language (keys, custom pytrees).")
        return
    if len(offered) > ROWS_WITH_BUTTONS:  # a big pytree: one leaf at a time
        offered = [
            st.selectbox(
                "Argument leaf",
                offered,
                format_func=lambda i: f"{rows[i].arg} · {rows[i].baked_in}",
                key=f"sp_pick_{index}",
            )
        ]
    answers = checked(index)
    width = max(len(changes(rows[i])) for i in offered)  # the same columns on every line
    for pick in offered:
        for change in change_buttons(rows[pick], f"{index}_{pick}", width):
            with st.spinner(f"{rows[pick].arg}: {change.label}: calling the jit cache…"):
                answers[(rows[pick].arg, change.label)] = check(res, pick, change)
    for answer in reversed(answers.values()):  # the newest first
        show_outcome(answer)


def change_buttons(row: SpecializedArg, key: str, width: int) -> list[Change]:
    """One row's changes as buttons (in `width` columns), and "all" of them; returns
    those clicked."""
    options = changes(row)
    label, *columns = st.columns([2.4, *([2] * width), 1], vertical_alignment="center")
    label.markdown(f"`{row.arg}` · {row.baked_in}")
    chosen = [
        c
        for column, c in zip(columns, options, strict=False)
        if column.button(c.label, key=f"sp_try_{key}_{c.label}", width="stretch")
    ]
    if len(options) > 1 and columns[-1].button(
        "all", key=f"sp_all_{key}", width="stretch", help="try each change, one after another"
    ):
        chosen = options
    return chosen


def checked(index: int) -> dict[tuple[str, str], Outcome]:
    """This result's answers so far, newest last (they stay while the result is shown)."""
    return st.session_state.setdefault("spec_checks", {}).setdefault(index, {})


def check(res: Result, index: int, change: Change) -> Outcome:
    """Empty the panel's cache session, then call the analysed spec and the changed one."""
    r = res.report
    spec = variant_spec(r.args, r.specialization, index, change)
    settings = res.asked.settings
    lab = f"{owner()}:specialization"  # not the Cache lab's session
    ask(CacheState(settings.function_only(), lab, clear=True))
    calling = replace(settings.function_only(), x64=settings.x64)
    reply = ask(CacheCalls(calling, lab, calls=[r.args, spec]))
    return outcome(r.specialization[index], change, spec, reply.new)


def show_outcome(answer: Outcome) -> None:
    headline, box = VERDICT.get(answer.verdict, VERDICT["error"])
    lines = [f"**`{answer.arg}` · {answer.change.label}** → {headline}"]
    lines += [f"- {reason}" for reason in answer.reasons]
    lines += [f"- {answer.note}"] if answer.note else []
    lines += [f"- fix: {fix}" for fix in answer.fixes]
    spec = answer.spec if len(answer.spec) <= SPEC_SHOWN else answer.spec[:SPEC_SHOWN] + " …"
    lines.append(f"\nchanged spec: `{spec}`")
    box("\n".join(lines))


# -- sizes from arguments ---------------------------------------------------------------
def sized_ops(r: Report, index: int) -> None:
    ops = r.specialization_ops
    st.markdown("**Sizes that came from arguments** · why an argument had to be static")
    st.caption(
        "Read from the jaxpr's numbers: an op whose shape parameter (iota, broadcast, "
        "reshape, slice, …) holds a size equal to a static argument's value or to an "
        "input's dimension. The jaxpr keeps the sizes, not the Python that computed them, "
        "so an equal number can be a coincidence; sizes 0 and 1 are left out."
    )
    if not ops:
        st.caption("No op's size equals a static value or an input dimension.")
        return
    rows = [
        {
            "op": op.primitive,
            "line": op.line,
            "sizes": f"{op.param}={tuple(op.sizes)}",
            "equals": ", ".join(op.matches) + (f" (+{op.more} more)" if op.more else ""),
            "from a static value": op.static,
            "ops like it": op.count,
        }
        for op in ops
    ]
    table(rows, key=f"sp_ops_{index}")
