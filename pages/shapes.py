"""Shape sweep: compile and run time as one dimension grows."""

import streamlit as st

import ui
from viz import charts
from viz.lessons.verdicts import break_even_reading
from viz.settings import Settings
from viz.spec import SpecError, array_item_parts, parse_sizes
from viz.worker.protocol import ShapeSweep, ShapeSweepReply

ui.leave_legacy_pages()  # a deep link may start here, without app.py

st.title("Shape sweep")
st.caption(
    "Every new shape is a new compilation. How much does each cost, how long does one "
    "call take, and after how many calls of one shape did compiling pay off (jit's time "
    "saved per call against eager mode, summed until it covers the compile)?"
)

prog = ui.program()
rows = ui.spec_rows(prog.settings.code, prog.settings.function, prog.settings.args)
arrays = {name: array_item_parts(item) for name, item in rows}
arrays = {n: p for n, p in arrays.items() if p and p[1] and n not in prog.settings.static}
ui.explored_function()
if not arrays:
    st.warning("The current function has no array argument with a dimension to sweep.")
    ui.end_page()
c = st.columns(3)
param = c[0].selectbox("argument", list(arrays))
axis = c[1].number_input("axis", 0, len(arrays[param][1]) - 1, 0)
sizes_text = c[2].text_input("sizes", "1, 4, 16, 64, 256, 1024")
try:
    sizes = parse_sizes(sizes_text)
except SpecError as exc:
    st.error(str(exc))
    ui.end_page()

if ui.lesson_controls("Sweep shapes"):
    s = prog.settings
    lesson = Settings(
        code=s.code, sample=s.sample, function=s.function, args=s.args, static=list(s.static)
    )
    request = ShapeSweep(lesson, param=param, axis=int(axis), sizes=sizes)
    st.session_state.shapes = ui.run_lesson(request, "compiling each shape")

result: ShapeSweepReply | None = st.session_state.get("shapes")
if result and not ui.show_lesson_error(result):
    data = result.rows
    st.plotly_chart(charts.shape_sweep_chart(data), width="stretch")
    ui.table(
        {
            "size": r.size,
            "spec": r.spec,
            "trace → compile": ui.seconds(r.total_s),
            "run (jit)": ui.seconds(r.run_s),
            "run (eager)": ui.seconds(r.eager_s),
            "break-even calls": f"{r.break_even_calls:,.0f}"
            if r.break_even_calls
            else "never (eager is as fast)",
        }
        for r in data
    )
    st.info(f"On {ui.device()}: {break_even_reading(data)}")
