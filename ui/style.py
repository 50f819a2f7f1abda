"""The app's few layout rules, as CSS, for every page: nothing cut off at 1280×800 and
1440×900, in the light and the dark theme (tests/test_browser_layout.py walks the pages
and measures it)."""

from __future__ import annotations

import streamlit as st

CSS = """<style>
/* the result tabs wrap onto a second row instead of hiding the last ones behind a
   sideways scroll ("Comp›") */
[data-testid=stTabs] [role=tablist] { flex-wrap: wrap; overflow-x: visible; row-gap: 0; }
</style>"""


def page_style() -> None:
    """The rules above, for this run's page (a style-only element takes no room)."""
    st.html(CSS)
