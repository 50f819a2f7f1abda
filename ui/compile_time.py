"""Explore's Compile time view (issue #36): where one compile's time went. The trace by
the lines of the user's code, XLA's compile as an icicle of its own spans, the
repeated structure and what drives it all, each with the fix it calls for. The
profile comes from the lessons worker (`CompileProfile`: it clears JAX's caches), or
with the analysis itself (`Analyze(compile_profile=True)`: the CLI, a recording's
"Profile this compile"). Layout only: the numbers come from `viz.compile_profile`,
the icicle from `viz.charts`. Nothing here imports jax.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui.cards import error_card
from ui.fusion import show_in_map_button
from ui.results import Result
from ui.tables import table
from ui.workers import run_lesson
from viz.charts import compile_spans_chart
from viz.compile_profile.advice import place, what_drives_it
from viz.compile_profile.model import CompileProfileSection
from viz.units import MISSING, plural, seconds

TAB = "Compile time"
BUTTON = "Where did the compile time go?"
SHOWN_LINES = 30
SPAN_TABLE_DEPTH = 3
LESSON_PAGE = "pages/scaling.py"


def profile_of(res: Result) -> CompileProfileSection | None:
    """The profile asked for from this view, else the one the analysis made."""
    asked = res.compile_profiled
    if asked is not None and asked.profile is not None:
        return asked.profile
    return res.report.compile_profile


def run_profile(res: Result) -> None:
    """Ask the lessons worker for the profile, with a progress bar; kept on the result."""
    res.compile_profiled = run_lesson(res.compile_profile_request(), "Profiling the compile")


def panel(res: Result, index: int) -> None:
    profile = profile_of(res)
    asked = res.compile_profiled
    if asked is not None and asked.error is not None:
        error_card(asked.error, res.code)
    if profile is None:
        ask_button(res, index)
        return
    view(res, profile, index)


def ask_button(res: Result, index: int) -> None:
    st.markdown(
        "Trace, lower and compile this function once more, on cleared caches: the trace "
        "sampled by the lines of your code, XLA's compile under `jax.profiler`, read back "
        "span by span."
    )
    if st.button(BUTTON, key=f"ct_ask_{index}", type="primary", icon=":material/timer:"):
        run_profile(res)
        st.rerun()


def view(res: Result, p: CompileProfileSection, index: int) -> None:
    source = res.report.source_file
    metrics(p)
    drivers(p, source)
    st.markdown("#### Trace · by line of your code")
    trace_table(p, source)
    st.markdown("#### XLA compile · its own spans")
    if p.error is not None:
        error_card(p.error)  # the trace above does not need the profiler
    elif p.xla:
        st.plotly_chart(compile_spans_chart(p), width="stretch", key=f"ct_icicle_{index}")
        span_table(p)
    kernel_table(res, p, index)
    repeated_table(p)
    trace_download(p, index)


def metrics(p: CompileProfileSection) -> None:
    m = st.columns(4)
    ratio = p.distortion
    m[0].metric(
        "trace (sampled)",
        seconds(p.trace_s),
        delta=f"×{ratio:.2f} vs {seconds(p.trace_plain_s)} unprofiled" if ratio else None,
        delta_color="off",
        help=f"sampled every {p.interval_s * 1e3:.0f} ms ({p.samples} samples); the same "
        "trace without the sampler took the time beside it",
    )
    m[1].metric("lower", seconds(p.lower_s))
    m[2].metric(
        "compile (profiled)",
        seconds(p.compile_s),
        help="XLA's compile under jax.profiler"
        + (", with the persistent cache off for it" if p.persistent_cache == "bypassed" else ""),
    )
    spanned = inside_named_steps(p)
    m[3].metric(
        "in XLA's named steps",
        f"{spanned:.0%}" if spanned is not None else MISSING,
        help=f"share of the compile inside a span below XLA's top-level ones "
        f"({', '.join(s.name for s in p.top_spans) or 'none'}, which hold "
        f"{p.xla_covered or 0:.0%} of it); the rest is in no XLA span. {p.xla_spans} spans "
        f"read, {p.depth} levels deep",
    )
    user = p.trace_user_share
    st.caption(
        f"Traced, lowered and compiled once more on cleared caches; the whole profile took "
        f"{seconds(p.profile_s)}. "
        + (f"{user:.0%} of the trace ran under your code. " if user is not None else "")
        + (
            "The persistent compilation cache was on: it was off for this compile."
            if p.persistent_cache == "bypassed"
            else ""
        )
    )


def inside_named_steps(p: CompileProfileSection) -> float | None:
    """The share of the compile inside a span below the top-level ones: the top spans'
    time less their own time outside every child (what "in no XLA span" counts)."""
    if p.xla_covered is None or not p.compile_s:
        return None
    return max(0.0, p.xla_covered - sum(s.self_seconds for s in p.top_spans) / p.compile_s)


def drivers(p: CompileProfileSection, source: str | None) -> None:
    found = what_drives_it(p, source)
    if not found:
        return
    st.markdown("#### What drives it")
    for driver in found:
        st.info(f"**{driver.title}**  \n{driver.text}", icon=":material/lightbulb:")
    if any(d.lesson for d in found):
        st.page_link(
            LESSON_PAGE,
            label="Compile vs program size: unrolled vs scan vs fori_loop, measured on your code",
            icon=":material/trending_up:",
        )


def trace_table(p: CompileProfileSection, source: str | None) -> None:
    if not p.trace_lines:
        st.caption("No line of your code was on the stack while JAX traced.")
        return
    trace_s = p.trace_s or 1.0
    rows = [
        {
            "line": place(row.where, source),
            "function": row.function,
            "code": row.text,
            "total": milliseconds(row.seconds),
            "self": milliseconds(row.self_seconds),
            # the sampler's stacks can add past the trace's own clock by a sample or two
            "share of the trace": min(100.0, 100 * row.seconds / trace_s),
            "runs": row.calls,
            "equations": row.eqns,
        }
        for row in p.trace_lines[:SHOWN_LINES]
    ]
    unseen = f"; – : between the sampler's looks (every {seconds(p.interval_s)})"
    table(
        rows,
        column_config={
            "code": st.column_config.TextColumn(width="medium"),
            "total": time_column("time on the stack" + unseen),
            "self": time_column("time as the innermost line of your code" + unseen),
            "share of the trace": share_column(),
            "runs": count_column("how often it ran during one trace"),
            "equations": count_column("jaxpr equations made under it"),
        },
    )
    more_lines(len(p.trace_lines) - SHOWN_LINES, "line")


def milliseconds(value: float) -> float | None:
    """Seconds as the tables' milliseconds; None (shown –) for a time never measured
    (a line the sampler never caught on the stack)."""
    return value * 1e3 if value > 0 else None


def time_column(help: str | None = None) -> st.column_config.NumberColumn:
    """A table's time column: milliseconds, one decimal (as `viz.units.seconds` writes
    a headline's ms)."""
    return st.column_config.NumberColumn(format="%.1f ms", help=help)


def share_column(help: str | None = None) -> st.column_config.ProgressColumn:
    """A share (0–100) as a bar and a whole percentage."""
    return st.column_config.ProgressColumn(
        format="%.0f %%", min_value=0.0, max_value=100.0, help=help
    )


def count_column(help: str | None = None) -> st.column_config.NumberColumn:
    """A count with thousands separators, as `viz.units.count` writes one."""
    return st.column_config.NumberColumn(format="localized", help=help)


def more_lines(more: int, word: str) -> None:
    if more > 0:
        st.caption(f"and {plural(more, word)} more, below these")


def span_table(p: CompileProfileSection) -> None:
    compile_s = p.compile_s or 1.0
    rows = [
        {
            "span": "\u2003" * (len(s.path) - 1) + s.name,
            "time": milliseconds(s.seconds),
            "share of the compile": 100 * s.seconds / compile_s,
            "self": milliseconds(s.self_seconds),
            "spans": s.count,
        }
        for s in p.xla
        if len(s.path) <= SPAN_TABLE_DEPTH and s.seconds >= 0.005 * compile_s
    ]
    with st.expander(f"The spans {SPAN_TABLE_DEPTH} levels down, as a table"):
        table(
            rows,
            column_config={
                "time": time_column(),
                "self": time_column("in none of its children"),
                "share of the compile": share_column(),
                "spans": count_column(),
            },
        )


def kernel_table(res: Result, p: CompileProfileSection, index: int) -> None:
    if not p.kernels:
        return
    st.markdown("#### Code generation by kernel")
    rows = [
        {"kernel": k.kernel, "time": milliseconds(k.seconds), "share of the compile": 100 * k.share}
        for k in p.kernels
    ]
    picked = table(
        rows,
        height=min(38 + 35 * len(rows), 280),
        on_select="rerun",
        selection_mode="single-row",
        key=f"ct_kernels_{index}",
        column_config={
            "time": time_column(),
            "share of the compile": st.column_config.NumberColumn(
                format="%.0f %%", help="kernels compile on worker threads, side by side"
            ),
        },
    )
    chosen = picked.selection.rows if picked else []
    if not chosen:
        st.caption("Pick a kernel to see it in the fusion map.")
        return
    kernel = p.kernels[chosen[0]].kernel
    fmap = res.report.fusion_map
    if not any(e.kernel == kernel for e in fmap):  # this compile named its kernels otherwise
        st.caption(f"`{kernel}` is not in this result's fusion map.")
        return
    show_in_map_button(fmap, kernel, index, key=f"ct_fusion_{index}")


def repeated_table(p: CompileProfileSection) -> None:
    if not p.repeated:
        return
    st.markdown("#### Repeated structure")
    table(
        [
            {"group": g.group, "copies": g.count, "equations": g.eqns, "share": 100 * g.share}
            for g in p.repeated
        ],
        column_config={
            "copies": count_column(),
            "equations": count_column(),
            "share": share_column(),
        },
    )


def trace_download(p: CompileProfileSection, index: int) -> None:
    path = Path(p.trace_file) if p.trace_file else None
    if path is None or not path.is_file():
        return
    st.download_button(
        "Download the compile's trace (open it in ui.perfetto.dev)",
        path.read_bytes(),
        "compile_trace.json.gz",
        "application/gzip",
        key=f"ct_trace_{index}",
        icon=":material/download:",
    )


# -- a recording's "Profile this compile": Explore opens, analyzes, then profiles ------
PENDING = "compile_profile_on_open"


def profile_on_open() -> None:
    """Ask Explore to profile the compile of the program it opens (Recordings)."""
    st.session_state[PENDING] = True


def pending() -> bool:
    """Whether Explore was opened to profile a compile (asked once)."""
    return bool(st.session_state.pop(PENDING, False))


def profile_shown_result() -> None:
    """Profile the result on screen (just analyzed) and open its Compile time tab."""
    from ui.results import shown

    found = shown()
    if found is None or found[1].report.compiled is None:
        return  # the analysis failed before compiling: its error card says why
    run_profile(found[1])
    st.session_state.result_tab = TAB
