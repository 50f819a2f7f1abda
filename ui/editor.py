"""The code editor: Ace (streamlit-code-editor) with Python highlighting, line numbers,
the error line marked, and Ctrl+Enter (⌘+Enter) to Analyze.

The component sends its text when it loses focus and on the shortcut, never while
typing, so a keystroke does not rerun the page. `JITSCOPE_EDITOR=plain` (AppTest
sets it; so can a user whose browser blocks the component) gives Streamlit's
`text_area` instead, under the same key.

An editor that is `read_only` shows the code and returns it unchanged: whatever the
browser sends back is ignored (demo mode's guarantee that code never comes from the
widget).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import streamlit as st

ERROR_CSS = ".jitscope-error{position:absolute;background:rgba(255,43,43,.16)}"
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


@dataclass(frozen=True)
class Edit:
    """What the editor holds after this run, and whether the Analyze shortcut fired."""

    code: str
    submitted: bool = False


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
    error_line: int | None = None,
    error_text: str = "",
    read_only: bool = False,
    lines: tuple[int, int] = (12, 20),
) -> Edit:
    """An editor holding `code`. A `code` that differs from what the editor last sent
    (a sample was loaded, a link was opened) replaces the editor's contents."""
    if plain():
        return _text_area(code, key, read_only)
    from code_editor import code_editor as ace

    state = st.session_state
    # not under `key`: pages drop widget keys by prefix to reset them, and a reset
    # generation would reuse the mounted editor, which ignores a new `code`
    base, gen, sent, text = (f"editor:{key}:{part}" for part in ("base", "gen", "sent", "text"))
    if state.get(base) is None or code not in (state.get(base), state.get(text)):
        state[base], state[gen] = code, state.get(gen, -1) + 1  # remount with the new code
    props: dict[str, Any] = {"readOnly": read_only}
    rows = list(lines)
    if error_line:
        # the component cannot scroll to a line: grow until the marked one shows
        # (wrapped lines take extra rows), up to a page
        rows[1] = min(max(rows[1], error_line + error_line // 3 + 4), 80)
        row = error_line - 1
        props["annotations"] = [{"row": row, "column": 0, "type": "error", "text": error_text}]
        props["markers"] = [
            {"startRow": row, "endRow": row, "startCol": 0, "endCol": 1}
            | {"className": "jitscope-error", "type": "fullLine"}
        ]
    value = ace(
        state[base],
        lang="python",
        height=rows,
        response_mode=["blur"],
        options=OPTIONS,
        props=props,
        component_props={"css": ERROR_CSS},
        key=f"editor:{key}:{state[gen]}",
    )
    if not read_only:
        st.caption("Ctrl+Enter (⌘+Enter) analyzes; the code is read when the editor loses focus")
    event = value.get("id") if isinstance(value, dict) else None
    if read_only or not event or event == state.get(sent):
        return Edit(code)
    state[sent], state[text] = event, value["text"]
    return Edit(value["text"], submitted=value.get("type") == "submit")


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
