"""Cache lab: vary the arguments and watch the real jit cache hit, miss and explain."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

import ui
from viz import charts, demo
from viz.cache.events import CallEvent, FailedEvent
from viz.cache.signature import reason_fix, reason_text
from viz.cache.story import cache_story
from viz.platforms import DeviceConfig
from viz.spec import DTYPES, SpecError, array_item, array_item_parts, parse_sizes, resize
from viz.units import plural
from viz.worker.protocol import CacheCall, CacheCalls, CachePrecompile, CacheReply, CacheState

SHOWN_MISSES = 8  # 'Why it recompiled': the latest misses, oldest first

ui.leave_legacy_pages()  # a deep link may start here, without app.py

st.title("Cache lab")
st.caption(
    "Why does my function recompile? Every call below goes to the **real** jitted "
    "function kept alive in the worker; hits and misses are read from its jit cache."
)

prog = ui.program()
titles = ui.samples_by_title()
sample_title = next((t for t, n in titles.items() if n == prog.settings.sample), None)
with st.expander(  # the sample by its title, as Explore's picker names it
    f"Function: `{prog.settings.function}` from "
    f"{f'the sample *{sample_title}*' if sample_title else 'your code'} "
    "(change it on the Explore page or pick a sample)"
):
    pick = st.selectbox("Use a sample", ["(keep current)", *titles], key="cache_sample")
    if pick != "(keep current)" and st.button("Load sample"):
        st.session_state.program = ui.program_from_sample(titles[pick])
        st.rerun()
    st.code(prog.settings.code, language="python", line_numbers=True, height=240)

# the one-click story and Clear: drawn here, filled once the next call's spec is known
story_row = st.container(horizontal=True, vertical_alignment="center")

# the worker keeps one live jitted function per browser session (owner) and program
lab = replace(prog.settings.function_only(), device=ui.device())
key = f"{hash((prog.settings.code, prog.settings.function, tuple(prog.settings.static)))}"
X64_CHOICES = {"auto": None, "on": True, "off": False}
PLACEMENTS = ("default", "replicated", "sharded", "P('x')", "P(None, 'x')")


def argument_controls() -> tuple[str, dict[str, str]]:
    """One row per parameter, with the control that fits it; returns (spec, placements)."""
    multi = (DeviceConfig.parse(ui.device()).devices or 1) > 1
    items, placements = [], {}
    for name, item in ui.spec_rows(prog.settings.code, prog.settings.function, prog.settings.args):
        cols = st.columns([1.2, 1, 2.2, 1.4, 1.6], vertical_alignment="bottom")
        cols[0].markdown(f"`{name}`" + (" · static" if name in prog.settings.static else ""))
        parts = array_item_parts(item)
        if parts and name not in prog.settings.static:
            dtype, shape = parts
            dtype = cols[1].selectbox(
                "dtype", list(DTYPES), index=list(DTYPES).index(dtype), key=f"c_dt_{key}_{name}"
            )
            shape_text = cols[2].text_input(
                "shape", ",".join(map(str, shape)), key=f"c_sh_{key}_{name}"
            )
            kind = "array"
            if not shape:
                kind = cols[3].radio(
                    "as",
                    ["array", "Python scalar"],
                    key=f"c_k_{key}_{name}",
                    horizontal=True,
                    help="a Python scalar is weakly typed: jit keys it apart",
                )
            try:
                dims = tuple(parse_sizes(shape_text, "dimension", minimum=0))
            except SpecError as exc:
                cols[2].error(str(exc))
                dims = shape
            if kind == "Python scalar":
                items.append("1.0" if dtype.startswith(("f", "bf")) else "1")
            else:
                items.append(array_item(dtype, dims))
        else:
            items.append(cols[2].text_input("value", item, key=f"c_v_{key}_{name}"))
        if multi and name not in prog.settings.static:
            placements[name] = (
                cols[4].selectbox(
                    "placement",
                    [*PLACEMENTS, *(f"device:{i}" for i in range(8))],
                    key=f"c_pl_{key}_{name}",
                    accept_new_options=True,
                    help="sharded: split the leading axis over all devices. Or type the spec's "
                    "sharding suffix, P('x', None), over the mesh below (default: x over every "
                    "device)",
                )
                or "default"
            )
    return ui.join_spec(items), placements


def remember(reply: CacheReply) -> None:
    st.session_state[f"cache_{key}"] = reply


with st.container(border=True):
    st.markdown("**Next call**")
    spec, placements = argument_controls()
    st.caption(f"args spec: `{spec}`")
    mesh = ""
    if any(p.lstrip("@ ").startswith("P") for p in placements.values()):  # the spec's suffix
        mesh = st.text_input(
            "Mesh",
            key="cache_mesh",
            placeholder="x over every device",
            help="the mesh a P(...) placement splits over: NAME=SIZE per axis, data=4, model=2",
        ).strip()
    c = st.columns([1, 1.8, 1.9, 1.4])
    x64_choice = c[3].selectbox(
        "x64",
        list(X64_CHOICES),
        key="cache_x64",
        help="auto: 64-bit exactly when the spec uses f64/i64 (as Explore does). off: JAX "
        "canonicalizes 64-bit inputs to 32-bit. JAX keys its cache on this setting.",
    )
    x64 = X64_CHOICES[x64_choice]
    disk = c[2].toggle(
        "Persistent cache (disk)",
        key="cache_disk",
        disabled=demo.enabled(),  # it writes files
        help="JAX's on-disk compilation cache in a project-local folder: restart the worker "
        "(sidebar) and the next misses load from disk instead of compiling",
    )
    guard = c[1].toggle(
        "Fail on recompile",
        key="cache_guard",
        help="turn any miss after the first compile into an error, like a guard in your own code",
    )
    calling = replace(lab, mesh=mesh, x64=x64)
    call_options = {
        "owner": ui.owner(),
        "placements": placements,
        "fail_on_recompile": guard,
        "persistent_cache": disk,
        "route": st.session_state.get("cache_route", False),  # the toggle is with the buckets
    }
    if c[0].button("Call", type="primary", width="stretch"):
        remember(ui.ask(CacheCall(replace(calling, args=spec), **call_options)))

# the next call's parameters, and those that are arrays with at least one dimension
call_rows = ui.spec_rows(prog.settings.code, prog.settings.function, spec)
story = cache_story(call_rows, prog.settings.static)
with story_row:
    told = st.button(
        "Show the cache at work",
        icon=":material/play_circle:",
        disabled=story is None,
        help="empties the cache, then calls the function four times from the next call "
        "below: a first compile, a hit, a change that recompiles, and the first call again",
    )
    if told and story is not None:
        remember(ui.ask(CacheCalls(calling, **call_options, calls=story.calls, fresh=True)))
    if st.button("Clear cache", icon=":material/delete_sweep:"):
        remember(ui.ask(CacheState(lab, ui.owner(), clear=True)))
    st.caption(
        f"Four calls of `{prog.settings.function}`: compile, hit, recompile ({story.change}), hit"
        if story
        else "No argument to vary for a story: give the function an array argument."
    )
names = [n for n, _ in call_rows]
arrays = {n: p for n, i in call_rows if (p := array_item_parts(i)) and p[1]}

with st.expander("Sweep: many calls in one go (e.g. batch sizes 1…64)"):
    if arrays:
        s = st.columns(3)
        param = s[0].selectbox("parameter", list(arrays), key="sweep_param")
        axis = s[1].number_input("axis", 0, max(len(arrays[param][1]) - 1, 0), 0, key="sweep_axis")
        values = s[2].text_input("sizes", "1, 2, 4, 8, 16, 32, 64", key="sweep_sizes")
        if st.button("Run sweep"):
            try:
                sizes = parse_sizes(values)
            except SpecError as exc:
                st.error(str(exc))
                ui.end_page()
            calls = [resize(spec, names, param, int(axis), size) for size in sizes]
            bar = st.progress(0.0, "sweeping…")
            remember(
                ui.ask(
                    CacheCalls(calling, **call_options, calls=calls),
                    on_progress=lambda p: bar.progress(p.share, f"call {p.done} of {p.total}"),
                )
            )
            bar.empty()
    else:
        st.caption("No array argument to sweep.")

with st.expander("Precompile buckets: `lower().compile()` ahead of time, pad to the nearest"):
    batched = list(arrays)
    if batched:
        b = st.columns(3)
        bucket_param = b[0].selectbox("batch argument (axis 0)", batched, key="aot_param")
        bucket_sizes = b[1].text_input("bucket sizes", "8, 16, 32, 64", key="aot_sizes")
        if b[2].button("Compile buckets", width="stretch"):
            try:
                sizes = parse_sizes(bucket_sizes, "bucket")
            except SpecError as exc:
                st.error(str(exc))
                ui.end_page()
            precompile = CachePrecompile(
                replace(lab, args=spec), ui.owner(), param=bucket_param, sizes=sizes
            )
            remember(ui.ask(precompile))
        st.toggle(
            "Route calls to the buckets",
            key="cache_route",
            help="Call and Sweep pad the batch up to the smallest bucket that fits and run "
            "its precompiled executable: the jit cache does not grow",
        )

result: CacheReply | None = st.session_state.get(f"cache_{key}")
if result is None:
    st.info(
        "Make a call to fill the cache table, or press **Show the cache at work** for "
        "a first compile, a hit and a recompile in one click."
    )
    ui.end_page()
if result.error:
    ui.error_card(result.error, prog.settings.code)
events = result.events
last = events[-1] if events else None
if isinstance(last, FailedEvent):
    ui.error_card(last.error, prog.settings.code)
if isinstance(last, CallEvent):
    for note in last.notes:
        st.info(f"Call {last.call} {'hit' if last.hit else 'missed'}: {note}")
    if last.guard:
        st.error(f"🛡️ {last.guard}")
        st.code(
            "before = f._cache_size()\ny = f(x)\nassert f._cache_size() == before, "
            "'f recompiled: check shapes, dtypes and static args'",
            language="python",
        )

table = result.table
st.subheader(f"Cache table · {len(table)} compiled entries · jit cache size {result.cache_size}")
if table:
    ui.table(
        [
            {
                "#": i + 1,
                "signature": e.describe,
                "hits": e.hits,
                "compile": ui.seconds(e.compile_s),
                "created at call": e.created,
                "last hit at call": e.last_hit,
                "status": e.status,
            }
            for i, e in enumerate(table)
        ],
        highlight=last.entry if isinstance(last, CallEvent) else None,
    )

if result.buckets:
    st.subheader(
        f"AOT buckets · {len(result.buckets)} precompiled executables (not in the jit cache)"
    )
    ui.table(
        {
            "bucket": b.bucket,
            "compile (AOT)": ui.seconds(b.compile_s),
            "calls served": b.calls,
            "padded rows": b.padded_rows,
            "padding waste": f"{100 * b.waste:.1f} %",
        }
        for b in result.buckets
    )

st.subheader("Why it recompiled")
misses = [e for e in events if isinstance(e, CallEvent) and not e.hit]
if len(misses) > SHOWN_MISSES:
    st.caption(
        f"The last {SHOWN_MISSES} of {len(misses)} misses, oldest first: "
        f"{plural(len(misses) - SHOWN_MISSES, 'earlier miss', 'earlier misses')} not shown."
    )
elif misses:
    st.caption("Oldest first.")
for e in misses[-SHOWN_MISSES:]:
    with st.container(border=True):
        st.markdown(
            f"**Call {e.call}** · miss · {e.status} {ui.seconds(e.compile_s)} · `{e.signature}`"
        )
        for r in e.reasons:
            fix = reason_fix(r)
            st.markdown(f"- {reason_text(r)}" + (f"  \n  *fix:* {fix}" if fix else ""))

if events:
    st.plotly_chart(charts.cache_timeline(events), width="stretch")
