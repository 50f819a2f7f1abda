"""Every table the app shows: rows of plain values, their cells read through
`viz.units.table`, in Streamlit's dataframe. Integers stay integers (a column of counts
with a gap is pandas' nullable Int64, not float), an absent value reads –, and a column
keeps its type, so it sorts as numbers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
import streamlit as st

from viz import units

HIGHLIGHT = "background-color: #fff3cd"


def table(
    rows: Iterable[Mapping[str, object]], highlight: int | None = None, **options: Any
) -> Any:
    """`rows` as a table, without the index, as wide as its container; `highlight`: the
    row to mark (the cache entry the last call used). `options` go to `st.dataframe`
    (height, key, column_config, on_select, ...); returns what it returns."""
    frame = pd.DataFrame(units.table(rows)).convert_dtypes()
    shown: Any = frame
    if highlight is not None:  # a Styler's cells show as it formats them
        shown = frame.style.format(na_rep=units.MISSING).apply(
            lambda row: [HIGHLIGHT if row.name == highlight else "" for _ in row], axis=1
        )
    options = {"hide_index": True, "width": "stretch", **options}
    return st.dataframe(shown, placeholder=units.MISSING, **options)
