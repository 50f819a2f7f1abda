"""Batch-size bucketing planner: fewer compilations for a little padding."""

import streamlit as st

import ui
from viz import charts
from viz.cache import planner
from viz.cache.snippet import precompile_snippet
from viz.settings import Settings
from viz.spec import SpecError, array_item_parts, parse_sizes
from viz.units import listed
from viz.worker.protocol import BucketCosts, BucketCostsReply

ui.leave_legacy_pages()  # a deep link may start here, without app.py

st.title("Batch-size buckets")
st.caption(
    "A server sees many batch sizes; each new one compiles again. Precompile a few "
    "bucket sizes with `lower().compile()` and pad each request up to its bucket. Which "
    "buckets? Paste the batch sizes you observe, or draw them from a distribution."
)

prog = ui.program()
rows = ui.spec_rows(prog.settings.code, prog.settings.function, prog.settings.args)
batch_default = prog.hint("BATCH_ARG")
ui.explored_function()  # whose compiles the plans count, as the shape sweep says it
arrays = [n for n, item in rows if (p := array_item_parts(item)) and p[1]]
if not arrays:
    st.warning("The current function has no batched array argument.")
    ui.load_sample_button("Load the batched model sample", "batched_model")
    ui.end_page()

left, right = st.columns([3, 2], gap="large")
with left:
    source = st.radio(
        "Request batch sizes", ["draw from a distribution", "type or paste"], horizontal=True
    )
    if source == "type or paste":
        text = st.text_area("sizes", "1 3 3 5 8 8 8 12 17 17 24 31 32 33 45 64 64 100", height=90)
        try:
            sizes = parse_sizes(text, "batch size")
        except SpecError as exc:
            st.error(str(exc))
            ui.end_page()
    else:
        d = st.columns(3)
        dist = d[0].selectbox("distribution", ["lognormal", "uniform", "zipf"])
        count = d[1].number_input("requests", 10, 100_000, 1000)
        largest = d[2].number_input("largest batch", 2, 4096, 128)
        sizes = planner.draw_sizes(dist, int(count), int(largest), seed=0)
with right:
    batch_arg = st.selectbox(
        "batch argument (axis 0)",
        arrays,
        index=arrays.index(batch_default) if batch_default in arrays else 0,
    )
    k = st.number_input(
        "k (best k buckets)", 1, 64, value=None, placeholder="as many as powers of two"
    )
    user_text = st.text_input("your buckets", "8, 32, 128")

if not sizes:
    st.info("Enter at least one batch size.")
    ui.end_page()
try:
    user = parse_sizes(user_text, "bucket") or None
except SpecError as exc:
    st.error(str(exc))
    ui.end_page()
plans = planner.compare_plans(sizes, user, int(k) if k else None)
st.plotly_chart(charts.bucket_chart(plans), width="stretch")

measured: BucketCostsReply | None = st.session_state.get("bucket_costs")
costs = {r.bucket: r for r in measured.rows} if measured and measured.ok else {}


SHOWN_BUCKETS = 10  # a plan's buckets a row lists; the rest it counts (the snippet has all)
CHAR_PX, CELL_PAD_PX = 8, 18  # a table cell's character (wide), its padding: pixels


def columns(plans: list[planner.BucketPlan]) -> dict:
    """Short headers that fit beside each other at 1280 pixels, what each means in its
    tooltip; the plan's name as wide as the longest, ten buckets beside it."""
    name_px = CHAR_PX * max(len(p.name) for p in plans) + CELL_PAD_PX
    text = st.column_config.TextColumn
    return {
        "plan": text(width=name_px),
        "buckets": text(width=300, help="the batch sizes it compiles"),
        "compiles": st.column_config.NumberColumn(help="compilations: one per bucket"),
        "padding": text(help="padding waste: % of the compute on padded rows"),
        "compile time": text(help="measured: every bucket of the plan compiled ahead of time"),
        "latency": text(
            help="expected per request: each request padded to its bucket, at its measured run time"
        ),
    }


def plan_row(plan: planner.BucketPlan) -> dict:
    row = {
        "plan": plan.name,
        "buckets": listed(map(str, plan.buckets), SHOWN_BUCKETS),
        "compiles": plan.compiles,
        "padding": f"{plan.waste_pct:.1f} %",
    }
    if costs and all(b in costs for b in plan.buckets):
        row["compile time"] = ui.seconds(sum(costs[b].compile_s for b in plan.buckets))
        row["latency"] = ui.seconds(planner.expected_latency(plan, lambda b: costs[b].run_s))
    return row


ui.table((plan_row(p) for p in plans), column_config=columns(plans))
if costs:
    st.caption(
        f"Measured {len(costs)} bucket sizes: ahead-of-time compile "
        f"{ui.seconds(sum(c.compile_s for c in costs.values()))} in all; expected "
        "latency routes each request to its bucket and uses the measured run time there."
    )

# every plan's buckets; the exact-shapes plan only when it is small enough to compile
all_buckets = sorted({b for p in plans for b in p.buckets if p.compiles <= 128})
st.caption(
    f"{len(sizes)} requests, {len(set(sizes))} distinct sizes. Measuring compiles "
    f"`{prog.settings.function}` ahead of time at each of the {len(all_buckets)} bucket sizes "
    "and times one call at each."
)
if ui.lesson_controls("Measure compile and run time per bucket"):
    s = prog.settings
    lesson = Settings(code=s.code, sample=s.sample, function=s.function, args=s.args)
    request = BucketCosts(lesson, batch_arg=batch_arg, buckets=all_buckets)
    st.session_state.bucket_costs = ui.run_lesson(request, "compiling buckets")
    st.rerun()
if measured:
    ui.show_lesson_error(measured)

st.subheader("Precompile your buckets")
chosen = st.selectbox("plan", [p.name for p in plans], index=len(plans) - 1)
plan = next(p for p in plans if p.name == chosen)
names = [n for n, _ in rows]
st.code(
    precompile_snippet(
        prog.settings.function, batch_arg, names, [i for _, i in rows], plan.buckets
    ),
    language="python",
)
