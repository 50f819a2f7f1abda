"""Follow a line through every IR (issue #50): the line picker and its story, the rows
of each IR's text the followed line wrote, the nodes the graphs mark, and the way back
(a kernel's lines marked in the editor). What a line became is `viz.follow`'s, computed
once per result (`Result.lines`); this module lays it out. No jax here.

The followed line is session state (`LINE`): the editor's "Follow this line" button and
the picker below the editor set it, and every view of the shown result reads it.
"""

from __future__ import annotations

import html

import streamlit as st

from ui import editor
from ui.results import Result
from viz.follow import IRS, LineTrace, excerpt
from viz.units import plural

LINE = "follow_line"  # session state: the line being followed
ROW_CSS = (
    "<style>.jitscope-rows{font-family:ui-monospace,Menlo,Consolas,monospace;"
    "font-size:12.5px;line-height:1.45;overflow-y:auto;max-height:420px;"
    "border:1px solid rgba(128,128,128,.35);border-radius:6px;padding:4px 0}"
    # a long row wraps under its text (not under its number), never cut at the edge
    ".jitscope-rows .row{white-space:pre-wrap;overflow-wrap:anywhere;padding-left:4.8em;"
    "text-indent:-4.8em}"
    ".jitscope-rows .ln{opacity:.55;display:inline-block;width:4em;text-align:right;"
    "margin-right:.8em;text-indent:0}.jitscope-rows .marked{background:rgba(255,189,69,.32)}"
    ".jitscope-rows .gap{opacity:.55;padding-left:4.8em}</style>"
)


def trace(res: Result | None) -> LineTrace | None:
    """What the followed line became in `res` (None: no line followed, or no graphs)."""
    line = st.session_state.get(LINE)
    if line is None or res is None or not res.report.graph_models:
        return None
    return res.lines.trace(line)


def follow(line: int) -> None:
    """Follow `line` (the editor's button): set before the picker is drawn."""
    st.session_state[LINE] = line


def editor_marks(res: Result | None, code: str) -> list[editor.Marks]:
    """What the editor marks on `code`: the shown result's error line, the followed line
    and the lines a view picked (a kernel's), while the editor holds the code they are
    lines of."""
    if res is None or res.code != code:
        return []
    marks = []
    error = res.report.error
    if error is not None and error.line:
        marks.append(editor.Marks((error.line,), f"{error.kind}: {error.message}", "error"))
    picked = editor.marked()
    if picked is not None:
        marks.append(picked)
    followed = trace(res)
    if followed is not None:
        marks.append(editor.Marks((followed.line,), followed.summary()))
    return marks


def picker(res: Result | None, code: str) -> None:
    """The line picker, "Follow a line" (the lines that made ops), and what the followed
    line became."""
    if res is None or not res.report.graph_models or res.code != code:
        return
    lines = res.lines.lines()
    followed = st.session_state.get(LINE)
    options = sorted({*lines, *([followed] if followed is not None else [])})
    source = res.code.splitlines()
    st.selectbox(
        "Follow a line",
        options,
        index=None,
        key=LINE,
        format_func=lambda n: f"{n} · {source[n - 1].strip()}" if n <= len(source) else str(n),
        placeholder=f"{plural(len(lines), 'line')} made ops",
        help="or put the cursor on a line in the editor and press Follow this line",
    )
    shown = trace(res)
    if shown is not None:
        st.markdown(shown.summary())


def node_ids(res: Result, ir: str) -> frozenset[str]:
    """The nodes of `ir`'s graph the followed line made (to mark)."""
    followed = trace(res)
    return frozenset(followed.nodes.get(ir, ())) if followed else frozenset()


def text_rows(res: Result, ir: str, text: str) -> None:
    """The rows of `ir`'s text the followed line wrote, marked, with a row either side."""
    followed = trace(res)
    if followed is None or ir not in IRS:
        return
    rows = followed.rows.get(ir, ())
    st.markdown(f"**{followed.summary()}**")
    unknown = res.lines.rows_unknown(ir)
    if unknown:
        st.caption(unknown)
        return
    if not rows:
        st.caption("No row of this text comes from it.")
        return
    shown = excerpt(text, rows)
    st.caption(
        f"{len(rows)} rows of the text below come from line {followed.line}"
        + (f" · the first {len(rows) - shown.left_out} shown" if shown.left_out else "")
    )
    st.html(ROW_CSS + '<div class="jitscope-rows">' + _rows_html(shown.rows) + "</div>")


def _rows_html(rows: list[tuple[int, str, bool] | None]) -> str:
    out = []
    for item in rows:
        if item is None:
            out.append('<div class="gap">⋯</div>')
            continue
        number, line, marked = item
        css = "row marked" if marked else "row"
        out.append(
            f'<div class="{css}"><span class="ln">{number}</span>{html.escape(line) or " "}</div>'
        )
    return "".join(out)


def mark_node(res: Result, ir: str, node_id: str | None) -> None:
    """A callback: mark the lines behind a node of `ir`'s graph (a compiled node: its
    kernel's) in the editor."""
    if not node_id:
        editor.clear_marks()
        return
    editor.mark_lines(res.lines.node_lines(ir, node_id), f"{ir} node {node_id}")
