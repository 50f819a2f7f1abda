"""Compile cost vs program size: an unrolled Python loop vs lax.scan vs lax.fori_loop."""

import streamlit as st

import ui
from viz import charts, demo
from viz.lessons.rows import UnrollVerdict
from viz.lessons.verdicts import unroll_break_even
from viz.settings import Settings
from viz.units import plural
from viz.worker.protocol import Scaling, ScalingReply

ui.leave_legacy_pages()  # a deep link may start here, without app.py

st.title("Compile time vs program size")
st.caption(
    "A Python `for` loop is unrolled at trace time: N iterations become N copies of the "
    "body, and tracing, lowering and compiling grow with N. `lax.scan` and "
    "`lax.fori_loop` stage the body once. The body below is your function, repeated."
)

prog = ui.program()
functions = ui.functions_of(prog.settings.code)
step_default = prog.hint("LOOP_STEP")
if not functions:
    ui.end_page()
c = st.columns(2)
step = c[0].selectbox(
    "loop body step(x) → x",
    functions,
    index=functions.index(step_default) if step_default in functions else 0,
)
args = c[1].text_input("args of step", "f32[64,64]" if step_default else prog.settings.args)
largest = demo.LIMITS.loop_n if demo.enabled() else 512
sizes = st.pills(  # every N in view, the chosen ones lit (a multiselect cut the last off)
    "N",
    [n for n in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if n <= largest],
    selection_mode="multi",
    default=[n for n in (1, 2, 4, 8, 16, 32, 64, 128, 256) if n <= largest],
)
params = ui.params_of(prog.settings.code, step)
one_argument = len(params) == 1
if not one_argument:
    st.warning(  # guidance, as the other lessons' (nothing ran, nothing failed)
        f"This lesson needs a loop body `step(x) → x`, one argument and a result of its "
        f"shape and dtype (the loop feeds each result back in as the next `x`): "
        f"`{step}({', '.join(params)})` takes {plural(len(params), 'argument')}."
    )
if not step_default:
    st.caption("Tip: the *Unrolled loop vs scan* sample has a ready `step`.")
    ui.load_sample_button("Load the unrolled loop sample", "unrolled_loop")
if not one_argument:
    ui.end_page()

if ui.lesson_controls("Sweep N"):
    lesson = Settings(
        code=prog.settings.code, sample=prog.settings.sample, function=step, args=args
    )
    request = Scaling(lesson, sizes=sorted(sizes))
    st.session_state.scaling = ui.run_lesson(request, "compiling")


def pays_off_text(v: UnrollVerdict) -> str:
    """After how many calls unrolling paid off: 'at once' where it compiled no slower
    than scan (it read '0 calls' beside a negative extra cost, noise in the compile)."""
    if v.pays_off_after_calls is None:
        return "never"
    if v.extra_compile_s <= 0:
        return "at once (it compiled no slower)"
    return f"{v.pays_off_after_calls:,.0f} calls"


result: ScalingReply | None = st.session_state.get("scaling")
if result and not ui.show_lesson_error(result):
    rows, exps = result.rows, result.exponents
    m = st.columns(3)
    for col, variant in zip(m, ("unrolled", "scan", "fori_loop"), strict=True):
        e = exps.get(variant)
        col.metric(
            f"{variant}: one-time cost ∝ N^k",
            "–" if e is None else f"k = {e:.2f}",
            help="least-squares slope of log(trace + lower + compile) vs log(N), N ≥ 4",
        )
    left, right = st.columns(2)
    left.plotly_chart(
        charts.scaling_chart(rows, "total_s", "trace → compile", "ms"), width="stretch"
    )
    right.plotly_chart(
        charts.scaling_chart(rows, "run_s", "run time per call", "ms"), width="stretch"
    )
    st.plotly_chart(
        charts.scaling_chart(rows, "eqns", "jaxpr equations", "equations"), width="stretch"
    )
    verdicts = unroll_break_even(rows)
    st.subheader("Does unrolling pay off?")
    ui.table(
        {
            "N": v.n,
            "extra one-time cost of unrolling": ui.seconds(v.extra_compile_s),
            "saved per call": ui.seconds(v.saved_per_call_s)
            if v.saved_per_call_s > 0
            else "none (scan is as fast)",
            "pays off after": pays_off_text(v),
        }
        for v in verdicts
    )
