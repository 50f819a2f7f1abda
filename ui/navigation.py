"""Page plumbing: leaving Streamlit's legacy pages/ mode, opening the diff view."""

from __future__ import annotations

import streamlit as st

from viz.report import Report


def leave_legacy_pages(*, in_app: bool = False) -> None:
    """Send this run through app.py's `st.navigation`; app.py and every page call it first.

    With a `pages/` folder beside app.py, Streamlit starts with the class-wide flag
    `PagesManager.uses_pages_directory` set (not public API; tests/test_app.py checks the
    pinned version still has it). While it is set, a run lists pages/ by file name and
    runs the page without app.py: what a deep link shows as the first request after a
    start. Clearing the flag and rerunning lands on the same page (the page hash is its
    URL path) through app.py. In a page, a registry that holds app.py itself is a legacy
    run of another session that started before the flag was cleared (in app.py the
    registry is still the previous run's, so app.py reads only the flag)."""
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    legacy = bool(PagesManager.uses_pages_directory)
    ctx = get_script_run_ctx()
    if not in_app and ctx is not None:
        main = ctx.pages_manager.main_script_path
        legacy |= any(p.get("script_path") == main for p in ctx.pages_manager.get_pages().values())
    if legacy:
        PagesManager.uses_pages_directory = False
        st.rerun()


def navigation_from_the_start() -> None:
    """At server start, before any session: settle Streamlit's pages/ flag (see
    `leave_legacy_pages`) as `st.navigation` would, so no first request, deep link or
    not, runs in legacy mode or pays the rerun that leaves it."""
    from streamlit.runtime.pages_manager import PagesManager

    PagesManager.uses_pages_directory = False


def open_diff(a: int | Report, b: int | Report) -> None:
    """Show the diff view of A → B: each side a history run id or a `Report` (e.g. a
    quick variant that was not recorded). Switches page; does not return."""
    st.session_state.diff_pair = (a, b)
    st.switch_page("pages/diff.py")
