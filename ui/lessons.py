"""Lesson pages' shared controls: run/cancel and their error display."""

from __future__ import annotations

import streamlit as st

from ui.cards import error_card
from ui.program import program, program_from_sample
from ui.workers import lesson_worker, owner
from viz.worker.protocol import Reply


def lesson_controls(run_label: str) -> bool:
    """A Run button and a Cancel button; returns True when Run was pressed."""
    row = st.container(horizontal=True)  # buttons as wide as their labels, side by side
    run = row.button(run_label, type="primary")
    if row.button("Cancel", help="stop your measurement (restarts your lessons worker)"):
        lesson_worker().cancel(owner())
        st.toast("Cancelled")
    return run


def explored_function() -> None:
    """The function a lesson measures, and its args: Explore's (the lessons that take it
    whole say so alike)."""
    s = program().settings
    st.markdown(f"Function **`{s.function}`** with args `{s.args}` (from Explore)")


def load_sample_button(label: str, sample: str) -> None:
    """A button that makes the built-in `sample` the current program (a lesson's own
    sample, when the code at hand does not suit it)."""
    if st.button(label):
        st.session_state.program = program_from_sample(sample)
        st.rerun()


def show_lesson_error(reply: Reply) -> bool:
    """Render a failed reply's error card; True when it failed."""
    if reply.ok or reply.error is None:
        return False
    error_card(reply.error, program().settings.code)
    return True
