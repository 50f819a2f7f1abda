"""Where to put jit: the outer function, the inner one, both, or neither."""

import streamlit as st

import ui
from viz import charts
from viz.settings import Settings
from viz.worker.protocol import Placement, PlacementReply

ui.leave_legacy_pages()  # a deep link may start here, without app.py

st.title("Where to put jit")
st.caption(
    "An outer `g` calls an inner `f`. Jit `g` and XLA sees the whole program: it fuses "
    "across the calls and dispatches once. Jit only `f` and every call (and the glue "
    "between them) goes back through Python. Measured on your code, now."
)

prog = ui.program()
functions = ui.functions_of(prog.settings.code)
if len(functions) < 2:
    st.warning("This lesson needs two functions, an outer one that calls an inner one.")
    ui.load_sample_button("Load the outer/inner sample", "outer_inner")
    ui.end_page()
inner_default = prog.hint("INNER")
c = st.columns(3)
outer = c[0].selectbox(
    "outer function (g)",
    functions,
    index=functions.index(prog.settings.function)
    if prog.settings.function in functions
    else len(functions) - 1,
)
inner_choices = [f for f in functions if f != outer]
inner = c[1].selectbox(
    "inner function (f)",
    inner_choices,
    index=inner_choices.index(inner_default) if inner_default in inner_choices else 0,
)
args = c[2].text_input("args of the outer function", prog.settings.args)

if ui.lesson_controls("Measure the four strategies"):
    lesson = Settings(code=prog.settings.code, sample=prog.settings.sample, args=args)
    request = Placement(lesson, outer=outer, inner=inner)
    st.session_state.placement = ui.run_lesson(request, "jit placement")

result: PlacementReply | None = st.session_state.get("placement")
if result and not ui.show_lesson_error(result):
    rows = result.rows
    st.success(result.recommendation, icon=":material/place:")
    st.plotly_chart(charts.placement_chart(rows), width="stretch")
    ui.table(
        {
            "strategy": r.strategy,
            "compile": ui.seconds(r.compile_s),
            "first call": ui.seconds(r.first_call_s),
            "per call": ui.seconds(r.run_s),
            "XLA compilations": r.executables,
            "kernels per call": r.kernels_per_call,
        }
        for r in rows
    )
    st.caption(
        "XLA compilations: compiles observed during the first call (JAX's own "
        "monitoring events); eager mode compiles one small executable per primitive. "
        "Kernels per call: the compiled program's kernels, or one per eagerly "
        "dispatched primitive."
    )
