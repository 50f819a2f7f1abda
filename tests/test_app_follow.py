"""Following a line in Explore (issue #50), driven headless with AppTest (the real worker
runs the code): the line picker tells what the line became, the Overview's graph and
each IR tab mark it, and a kernel picked in the fusion map marks its lines for the
editor."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui.editor import MARKED
from viz.samples import get_sample

APP = str(Path(__file__).resolve().parent.parent / "app.py")
SAMPLE = get_sample("dot_plus_one")
RETURN = next(n for n, t in enumerate(SAMPLE.code.splitlines(), 1) if "jnp.dot(x, y)" in t)

pytestmark = pytest.mark.usefixtures("navigation_mode", "plain_editor")


def followed() -> AppTest:
    """Explore on the default sample, its `return jnp.dot(x, y) + 1.0` line followed."""
    at = AppTest.from_file(APP, default_timeout=180).run()
    assert not at.exception, at.exception
    at.selectbox(key="follow_line").select(RETURN).run()
    assert not at.exception, at.exception
    return at


def test_the_line_picker_tells_what_the_line_became() -> None:
    at = followed()
    story = [m.value for m in at.markdown if m.value.startswith(f"line {RETURN} →")]
    assert story and story[0].startswith(f"line {RETURN} → 2 equations → ")
    assert "kernel" in story[0]
    assert any(f"line {RETURN} marked" in m.value for m in at.markdown)  # on the graph
    picker = at.selectbox(key="follow_line")
    assert RETURN in picker.options or str(RETURN) in " ".join(map(str, picker.options))


@pytest.mark.parametrize("tab", ["jaxpr", "StableHLO", "Compiled HLO"])
def test_each_ir_tab_marks_the_rows_the_line_wrote(tab: str) -> None:
    at = followed()
    at.session_state["result_tab"] = tab
    at.run()
    assert not at.exception, at.exception
    rows = [h.proto.body for h in at.get("html") if "jitscope-rows" in h.proto.body]
    assert rows and 'class="row marked"' in rows[0]


def test_a_kernel_picked_in_the_fusion_map_marks_its_lines_for_the_editor() -> None:
    at = followed()
    at.session_state["result_tab"] = "Fusion"
    at.run()
    picker = next(s for s in at.selectbox if s.label == "Kernel")
    picker.select(next(o for o in picker.options if "fusion" in o)).run()
    assert not at.exception, at.exception
    marked = at.session_state[MARKED]
    assert marked.lines == (RETURN,) and marked.note.startswith("kernel ")


def test_a_node_picked_in_the_compiled_graph_marks_its_kernels_lines() -> None:
    at = followed()
    at.session_state["result_tab"] = "Compiled HLO"
    at.run()
    picker = next(s for s in at.selectbox if s.label == "Node details")
    picker.select(next(o for o in picker.options if o.startswith("add"))).run()
    assert not at.exception, at.exception
    marked = at.session_state[MARKED]
    assert marked.lines == (RETURN,) and "compiled node" in marked.note
