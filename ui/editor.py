"""The code editor: Ace (streamlit-code-editor) with Python highlighting, line numbers,
marked lines, a "Follow this line" button and Ctrl+Enter (⌘+Enter) to Analyze.

The component sends its text when it loses focus, on the shortcut and on the button,
never while typing, so a keystroke does not rerun the page. `JITSCOPE_EDITOR=plain`
(AppTest sets it; so can a user whose browser blocks the component) gives Streamlit's
`text_area` instead, under the same key: no marks, no button.

Marked lines are Ace markers (a band across the line) with a note in the gutter: the
error's line, the line being followed, a kernel's lines. A view elsewhere marks lines
with `mark_lines`, from a widget's callback (which runs before the page draws the
editor).

A sample's docstring and its metadata constants (`TITLE = …`, `ORDER = …`: the app's,
not the user's code; `viz.samples.metadata_end`) are folded out of the editor
(`fold_docstring`): the editor holds the code from the line after them, numbered as in
the file (Ace's `firstLineNumber`), and the docstring sits above it as the sample's
explanation, one click from the editor. What the editor returns is always the whole code.

An editor that is `read_only` shows the code and returns it unchanged: whatever the
browser sends back is ignored (demo mode's guarantee that code never comes from the
widget).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st

from viz.samples import metadata_end
from viz.source import module_docstring

MARK_CSS = (
    ".jitscope-error{position:absolute;background:rgba(255,43,43,.16)}"
    ".jitscope-mark{position:absolute;background:rgba(255,189,69,.30)}"
)
OPTIONS = {
    "showLineNumbers": True,
    "wrap": True,  # a half-width column: long lines wrap rather than hide
    "tabSize": 4,
    "fontSize": 13,
    "useSoftTabs": True,
    # Ace completes on Enter: typing a newline would insert a keyword instead
    "enableLiveAutocompletion": False,
    "enableBasicAutocompletion": False,
    "enableSnippets": False,
}
FOLLOW = "follow"  # the event the "Follow this line" button sends
FOLLOW_BUTTON = {
    "name": "Follow this line",
    "feather": "Crosshair",
    "hasText": True,
    "alwaysOn": True,
    "commands": [["response", FOLLOW]],
    "style": {"top": "0.25rem", "right": "0.4rem"},  # in the bar above the code, not on it
}
# a bar above the code that holds the Follow button (floating on the code, the button
# covered a line)
BAR = {
    "name": "jitscope bar",
    "style": {
        "order": "-1",
        "display": "flex",
        "alignItems": "center",
        "width": "100%",
        "height": "2.1rem",
        "padding": "0 0.75rem",
    },
    "info": [{"name": " "}],  # the button says it all; a text here met it in a narrow column
}
FOLD_FROM = 3  # a docstring this long or longer is folded out of the editor
MARKED = "editor:marks"  # session state: the lines a view asked to mark


@dataclass(frozen=True)
class Marks:
    """Lines to mark, the note the gutter shows for them, and how: 'error' (red band,
    error icon) or 'mark'."""

    lines: tuple[int, ...]
    note: str
    kind: str = "mark"


@dataclass(frozen=True)
class Edit:
    """What the editor holds after this run, whether the Analyze shortcut fired, and the
    line "Follow this line" asked for (None: not this run)."""

    code: str
    submitted: bool = False
    follow: int | None = None


def mark_lines(lines: Iterable[int], note: str) -> None:
    """Mark `lines` of the code in the editor (a band across each, `note` in the gutter)
    from its next drawing on, until the next call or `clear_marks`. Call it from a
    widget's callback (`on_change`, `on_select`): callbacks run before the page, so the
    editor drawn in that run shows them."""
    st.session_state[MARKED] = Marks(tuple(sorted(set(lines))), note)


def clear_marks() -> None:
    st.session_state.pop(MARKED, None)


def marked() -> Marks | None:
    """The lines `mark_lines` asked for."""
    return st.session_state.get(MARKED)


def plain() -> bool:
    """Streamlit's text_area instead of the component (also when it is not installed)."""
    if os.environ.get("JITSCOPE_EDITOR", "").strip().lower() == "plain":
        return True
    try:
        import code_editor  # noqa: F401
    except ImportError:
        return True
    return False


def code_editor(
    code: str,
    key: str,
    *,
    marks: Sequence[Marks] = (),
    read_only: bool = False,
    fold_docstring: bool = False,
    lines: tuple[int, int] = (12, 20),
) -> Edit:
    """An editor holding `code`. A `code` that differs from what the editor last sent
    (a sample was loaded, a link was opened) replaces the editor's contents; the
    docstring is folded out of it then, if `fold_docstring`."""
    if plain():
        return _text_area(code, key, read_only)
    from code_editor import code_editor as ace

    state = st.session_state
    # not under `key`: pages drop widget keys by prefix to reset them, and a reset
    # generation would reuse the mounted editor, which ignores a new `code`
    base, gen, sent, text, first = (
        f"editor:{key}:{part}" for part in ("base", "gen", "sent", "text", "first")
    )
    if state.get(base) is None or code not in (state.get(base), state.get(text)):
        state[base], state[gen] = code, state.get(gen, -1) + 1  # remount with the new code
        state[first] = _after_head(code) if fold_docstring else 1
    # the code as it is now: what a mounted editor ignores, and one mounted again (the
    # page moved it) shows
    head, shown = _split(code, state[first])
    if head:
        _folded_docstring(code, state[first], key)
    props, rows = _marked(marks, state[first], lines)
    value = ace(
        shown,
        lang="python",
        height=rows,
        response_mode=["blur"],
        options={**OPTIONS, "firstLineNumber": state[first]},
        props={"readOnly": read_only, **props},
        buttons=[] if read_only else [FOLLOW_BUTTON],
        info={} if read_only else BAR,
        component_props={"css": MARK_CSS},
        key=f"editor:{key}:{state[gen]}",
    )
    if not read_only:
        st.caption("Ctrl+Enter (⌘+Enter) analyzes; the code is read when the editor loses focus")
    event = value.get("id") if isinstance(value, dict) else None
    if not event or event == state.get(sent):
        return Edit(code)
    state[sent] = event
    follow = None
    if value.get("type") == FOLLOW and isinstance(value.get("cursor"), dict):
        follow = int(value["cursor"].get("row", 0)) + state[first]
    if read_only:
        return Edit(code, follow=follow)
    state[text] = head + value["text"]
    return Edit(state[text], submitted=value.get("type") == "submit", follow=follow)


def _after_head(code: str) -> int:
    """The first line of the user's code: after the docstring (when long) and a
    sample's metadata constants (TITLE = …, ORDER = …, the app's, not the code's)."""
    return max(_after_docstring(code), metadata_end(code))


def _after_docstring(code: str) -> int:
    """The first line after the code's docstring and the blank lines after it (1: no
    docstring worth folding)."""
    docstring = module_docstring(code)
    if docstring is None or docstring.last_line < FOLD_FROM:
        return 1
    lines = code.splitlines()
    first = docstring.last_line + 1
    while first <= len(lines) and not lines[first - 1].strip():
        first += 1
    return first if first <= len(lines) else 1


def _split(code: str, first: int) -> tuple[str, str]:
    """(the lines before line `first`, the rest)."""
    if first <= 1:
        return "", code
    at = 0
    for _ in range(first - 1):
        at = code.find("\n", at) + 1
        if at == 0:
            return code, ""
    return code[:at], code[at:]


def _folded_docstring(code: str, first: int, key: str) -> None:
    """The docstring the editor does not hold, above it: its first paragraph, the rest
    one click away, and a button that puts it back in the editor."""
    docstring = module_docstring(code)
    if docstring is None:
        return
    summary, _, rest = docstring.text.partition("\n\n")
    row = st.container(horizontal=True, vertical_alignment="center", gap="small", wrap=False)
    row.caption(f":material/menu_book: {' '.join(summary.split())}", width="stretch")
    settings = metadata_end(code) > 1
    folded = "the docstring" + (" and the sample's title and settings" if settings else "")
    with row.popover("More", type="tertiary", help=f"lines 1–{first - 1}: {folded}"):
        st.markdown(rest or summary)
        st.button(
            f"Show lines 1–{first - 1} in the editor",
            key=f"editor:{key}:unfold",
            on_click=_unfold,
            args=(key, code),
        )


def _unfold(key: str, code: str) -> None:
    """Remount the editor with the whole of `code`, from line 1."""
    state = st.session_state
    state[f"editor:{key}:base"], state[f"editor:{key}:first"] = code, 1
    state[f"editor:{key}:gen"] += 1


def _marked(
    marks: Sequence[Marks], first: int, lines: tuple[int, int]
) -> tuple[dict[str, Any], list[int]]:
    """Ace's markers and gutter notes for `marks` (rows counted from line `first`), and
    the editor's height in rows: grown until the last marked line shows (the component
    cannot scroll to a line; wrapped lines take extra rows), up to a page."""
    markers, notes, rows = [], [], list(lines)
    for mark in marks:
        for line in mark.lines:
            row = line - first
            if row < 0:
                continue  # in the folded docstring
            rows[1] = min(max(rows[1], row + row // 3 + 4), 80)
            css = "jitscope-error" if mark.kind == "error" else "jitscope-mark"
            markers.append({"startRow": row, "endRow": row, "startCol": 0, "endCol": 1})
            markers[-1] |= {"className": css, "type": "fullLine"}
            kind = "error" if mark.kind == "error" else "info"
            notes.append({"row": row, "column": 0, "type": kind, "text": mark.note})
    props: dict[str, Any] = {"markers": markers, "annotations": notes} if markers else {}
    return props, rows


def _text_area(code: str, key: str, read_only: bool) -> Edit:
    st.session_state.setdefault(key, code)
    text = st.text_area(
        "Code",
        key=key,
        height=380,
        disabled=read_only,
        help="A Python module: imports, helpers, the function to jit",
    )
    return Edit(code if read_only else text)
