"""Every table on every page reads cleanly: integers stay integers and an absent value
reads – (one helper, `viz.units.table` through `ui.table`); no cell shows None, nan or
.000000.

The pages are driven headless with AppTest (the real worker runs the code), each on the
default sample and on a run that failed, in a JITSCOPE_HOME of this module's own."""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator
from pathlib import Path

import jax
import jax.numpy as jnp
import pandas as pd
import pytest
from streamlit import dataframe_util
from streamlit.testing.v1 import AppTest

import viz
from viz import units
from viz.samples import get_sample

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
TIMEOUT = 180
FAILED = "relu_python_if"  # a sample whose trace fails: a run that failed, kept in History
UNREADABLE = ("None", "none", "nan", "NaN", "<NA>", "NaT")

pytestmark = pytest.mark.usefixtures("navigation_mode", "plain_editor")


# ---------------------------------------------------------------- the helper


def test_an_absent_value_is_none_and_reads_as_a_dash() -> None:
    for absent in (None, math.nan, "", "  ", units.seconds(None)):
        assert units.cell(absent) is None
        assert units.cell_text(absent) == units.MISSING == "–"


def test_a_whole_float_is_an_int_and_other_values_stay_as_they_are() -> None:
    assert units.cell(2.0) == 2 and isinstance(units.cell(2.0), int)
    assert units.cell(0.25) == 0.25 and units.cell(3) == 3 and units.cell(True) is True
    assert units.cell("f32[8]") == "f32[8]"
    assert units.cell_text(4.0) == "4"


def test_rows_keep_their_columns_in_order() -> None:
    rows = units.table([{"a": 1.0, "b": None}, {"a": 2, "b": "x"}])
    assert rows == [{"a": 1, "b": None}, {"a": 2, "b": "x"}]


def _dataframe_calls(path: Path) -> list[int]:
    """Lines of `path` that call a `dataframe` (st.dataframe, column.dataframe, ...)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "dataframe"
    ]


def test_every_table_of_the_app_goes_through_ui_table() -> None:
    files = [ROOT / "app.py", *(ROOT / "pages").glob("*.py"), *(ROOT / "ui").glob("*.py")]
    calls = {str(f.relative_to(ROOT)): lines for f in files if (lines := _dataframe_calls(f))}
    assert calls == {"ui/tables.py": calls.get("ui/tables.py", [])}
    assert calls["ui/tables.py"], "ui.table calls st.dataframe"


TABLE_SCRIPT = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from ui.tables import table
rows = [{{"call": 1, "last hit": 4}}, {{"call": 3, "last hit": None}}]
table(rows)
table(rows, highlight=0)
"""


def test_ui_table_keeps_a_column_of_counts_with_a_gap_integer_and_shows_a_dash() -> None:
    at = AppTest.from_string(TABLE_SCRIPT).run()
    assert not at.exception, at.exception
    plain, styled = at.dataframe
    for element in (plain, styled):
        column = element.value["last hit"]
        assert str(column.dtype) == "Int64" and column.tolist()[0] == 4
        assert shown(element)["last hit"] == ["4", "–"]


# ---------------------------------------------------------------- what a cell shows


def shown(element) -> dict[str, list[str]]:
    """Each column's cells as the browser shows them: a Styler's display values, else the
    value, a missing one as the table's placeholder (Streamlit's default: None)."""
    styler = element.proto.arrow_data.styler
    if styler.display_values:
        frame = dataframe_util.convert_arrow_bytes_to_pandas_df(styler.display_values)
        return {str(c): [str(v) for v in frame[c]] for c in frame.columns}
    frame: pd.DataFrame = element.value
    placeholder = element.proto.placeholder if element.proto.HasField("placeholder") else "None"
    return {
        str(c): [placeholder if _absent(v) else str(v) for v in frame[c]] for c in frame.columns
    }


def _absent(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def unreadable_cells(at: AppTest, where: str) -> list[str]:
    """`where · column: cell` for every cell of every table that reads badly."""
    bad = []
    for element in at.dataframe:
        for column, cells in shown(element).items():
            bad += [
                f"{where} · {column}: {cell!r}"
                for cell in cells
                if cell.strip() in UNREADABLE or ".000000" in cell
            ]
    return bad


# ---------------------------------------------------------------- the pages


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("tables")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JITSCOPE_HOME", str(folder))
        yield folder


def run(target) -> AppTest:
    """Run the app (after a widget's change, when `target` is that widget)."""
    at = target.run()
    assert not at.exception, at.exception
    return at


def open_app() -> AppTest:
    return run(AppTest.from_file(APP, default_timeout=TIMEOUT))


def button(at: AppTest, label: str):
    return next(b for b in at.button if b.label == label)


def every_tab(at: AppTest, key: str, where: str) -> list[str]:
    """Open each tab of the tab bar `key` in turn; the unreadable cells of them all."""
    labels = [tab.label for tab in at.tabs]
    assert labels, f"{where}: no tabs"
    bad = []
    for label in labels:
        at.session_state[key] = label
        bad += unreadable_cells(run(at), f"{where} · {label}")
    return bad


def analyze_sample(at: AppTest, name: str) -> None:
    at.selectbox(key="sample_pick").select(get_sample(name).title).run()
    button(at, "Analyze").click().run()
    assert not at.exception, at.exception


def test_explore_on_the_default_sample_and_a_failed_run(home: Path) -> None:
    at = open_app()  # a first visit analyzes the default sample
    bad = every_tab(at, "result_tab", "Explore")
    analyze_sample(at, FAILED)
    assert "control flow" in at.error[0].value
    assert at.dataframe, "a failed trace still shows what jit specialized on"
    bad += unreadable_cells(at, f"Explore · {FAILED}")
    assert not bad, "\n".join(bad)


def test_history_and_diff_with_a_failed_run(home: Path) -> None:
    at = open_app()
    analyze_sample(at, FAILED)  # the newest run failed; the one before it did not
    run(at.switch_page("pages/history.py"))
    bad = unreadable_cells(at, "History")
    assert len(at.dataframe[0].value) >= 2
    run(at.switch_page("pages/diff.py"))
    bad += every_tab(at, "diff_tab", "Diff")
    assert not bad, "\n".join(bad)


def test_the_cache_lab_after_its_story_and_a_failed_call(home: Path) -> None:
    at = open_app()
    run(at.switch_page("pages/cache.py"))
    run(button(at, "Show the cache at work").click())
    bad = unreadable_cells(at, "Cache lab")
    x = next(k for k in at.session_state if str(k).startswith("c_sh_") and str(k).endswith("_x"))
    run(at.text_input(key=x).set_value("256,7"))  # x @ y no longer fits: the call fails
    run(button(at, "Call").click())
    assert at.error, "the failed call's card"
    bad += unreadable_cells(at, "Cache lab · a failed call")
    assert not bad, "\n".join(bad)


def test_recordings_of_a_program_that_failed(home: Path) -> None:
    step = jax.jit(lambda v: v * 2)
    with pytest.raises(ZeroDivisionError), viz.recording(name="fails") as rec:
        for n in (2, 3):
            step(jnp.ones(n))
        1 / 0  # noqa: B018 - the program dies after two compiles
    rec.save()
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    run(at.switch_page("pages/recordings.py"))
    assert len(at.dataframe) >= 3  # the list, the functions, one function's compiles
    bad = unreadable_cells(at, "Recordings")
    assert not bad, "\n".join(bad)


def test_the_lessons_tables(home: Path) -> None:
    from ui import program_from_sample

    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["program"] = program_from_sample("batched_model")
    at.session_state["results"] = []  # no first-visit analysis
    run(at)
    run(at.switch_page("pages/buckets.py"))
    bad = unreadable_cells(at, "Batch buckets")
    run(at.switch_page("pages/shapes.py"))
    run(at.text_input[0].set_value("1, 16"))
    run(button(at, "Sweep shapes").click())
    bad += unreadable_cells(at, "Shape sweep")
    assert at.dataframe, "the sweep's table"
    assert not bad, "\n".join(bad)
