"""Explore's Memory tab (issue #54): where the bytes go. The bytes live along the
program XLA scheduled, the peak and the buffers that fill it (a row opens its kernel
in the fusion map), whether a run fits, and what would lower the peak: donation, the
schedule that favours memory, and what jax.checkpoint saves and recomputes.
Layout only: the numbers come from the report's `memory` (`viz.memory`), the chart
from `viz.charts`, the words from `viz.memory.display`. Nothing here imports jax.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from ui.fusion import show_in_map_button
from ui.results import Result
from ui.tables import table
from ui.variants import variant_button
from viz import charts
from viz.errors import required_in
from viz.ir.model import IR
from viz.memory.display import (
    buffer_rows,
    describe_made_by,
    device_memory_text,
    donation_text,
    fit_text,
    kinds_text,
    padding_text,
    residual_rows,
    spaces_text,
    two_peaks_text,
    where_text,
    xla_disagrees_text,
    xla_peak_text,
)
from viz.memory.model import Memory
from viz.memory.profile import OTHER
from viz.options import MEMORY_SCHEDULE
from viz.platforms import memory_schedule_of
from viz.report import Report
from viz.units import listed, natural, nbytes, plural
from viz.variants import options_text

TAB = "Memory"
XLA_TOTALS: tuple[tuple[str, Callable[[Memory], int | None]], ...] = (
    ("arguments", lambda m: m.argument_bytes),
    ("outputs", lambda m: m.output_bytes),
    ("temporaries", lambda m: m.temp_bytes),
    ("generated code", lambda m: m.generated_code_bytes),
)


def panel(res: Result, index: int) -> None:
    r = res.report
    memory = r.memory
    if memory is None:
        st.info("No memory figures: the function did not compile.")
        return
    st.caption(
        f"XLA's figures for this compile on **{r.device}**: its buffer assignment and the "
        "order it scheduled the program in. Another device schedules and fuses "
        "otherwise (a GPU's peak is not the CPU's)."
    )
    if memory.peak_bytes is None:
        st.info(
            "XLA gave no buffer assignment for this executable: its totals only."
            + (f" ({memory.profile_warning})" if memory.profile_warning else "")
        )
    else:
        metrics(r)
        fits(r)
        st.plotly_chart(charts.memory_timeline(r), width="stretch", key=f"mem_chart_{index}")
        at_peak(res, index)
        lower_it(res)
    device_count = device_memory_text(memory)
    if device_count:
        st.caption(device_count)
    totals(r)


def metrics(r: Report) -> None:
    memory = r.memory
    assert memory is not None
    m = st.columns(4)
    estimated = memory.estimate is not None
    m[0].metric(
        "peak (estimated)" if estimated else "peak",
        nbytes(memory.peak_bytes),
        help="the most bytes live at one step of the schedule: arguments, outputs, "
        "temporaries and constants, each slot counted once"
        + (" (XLA refused the compile: from smaller compiles, scaled up)" if estimated else ""),
    )
    xla = required_in(r.error.detail) if estimated and r.error else None
    if xla is not None:
        m[1].metric(
            f"XLA's figure ({xla[1] or 'all'})",
            nbytes(xla[0]),
            help="what XLA's refusal says the program needs, laid out at full size",
        )
    else:
        m[1].metric(
            "XLA's peak",
            nbytes(memory.xla_peak_bytes),
            help="memory_analysis().peak_memory_in_bytes: "
            + (
                xla_peak_text(memory, r.device)
                or "on CPU it counts the arguments and outputs, not the temporaries"
            )
            + "; none where XLA refused the compile",
        )
    m[2].metric(
        "temporaries (one block)",
        nbytes(memory.temp_bytes),
        help="XLA packs the temporaries into one block of this size for the whole call",
    )
    m[3].metric(
        memory.limit_of or "limit",  # lower case, as its neighbours
        nbytes(memory.limit_bytes),
        help="what a run must fit in: the device's bytes_limit where it reports one, "
        "else the memory budget the app's workers share (the sidebar's pool budget): a "
        "request stops when the workers together hold more",
    )
    st.caption("At the peak: " + kinds_text(memory))
    st.caption(
        "Temporaries (one block): XLA allocates all the program's intermediates as one "
        "block for the whole call and reuses its slots as values die; the peak counts the "
        "slots in use at its step."
    )
    said = two_peaks_text(memory, r.device)
    if said:
        st.caption(said)


def fits(r: Report) -> None:
    """Whether a run fits, with what fills the peak: the same words as the `memory`
    error a run too big gets, before anything runs."""
    memory = r.memory
    assert memory is not None
    said = fit_text(memory, method=False)  # the method, and XLA's own figure, apart
    if said is None:
        return
    too_big = memory.limit_bytes is not None and (memory.peak_bytes or 0) > memory.limit_bytes
    if too_big:
        st.error(said, icon=":material/memory:")
    else:
        st.success(said, icon=":material/memory:")
    versus = xla_disagrees_text(memory, r.error.detail if r.error else "")
    if versus:
        st.warning(versus, icon=":material/compare_arrows:")
    if memory.estimate:
        st.caption(f"How: {memory.estimate.said}.")
    for note in filter(None, (padding_text(memory), spaces_text(memory, r.device))):
        st.caption(note)
    if memory.library_kernels:
        st.caption(
            f"{plural(len(memory.library_kernels), 'kernel')} run in a library (YNNPACK on "
            f"CPU: {listed(memory.library_kernels, 4)}), which allocates their "
            "intermediates itself: XLA does not assign them, so they are not in these figures. "
            "A `ynn_fusion` is a kernel XLA hands to YNNPACK: the peak shown leaves out its "
            "scratch, so a run can need somewhat more."
        )


def at_peak(res: Result, index: int) -> None:
    r = res.report
    memory = r.memory
    assert memory is not None and memory.peak_at is not None
    at = memory.peak_at
    line = where_text(at.where)
    st.markdown(
        f"#### Live at the peak · step {at.position}, `{at.instruction}`"
        + (f" ({line})" if line else "")
    )
    # largest first, 'smaller buffers' last; ties by name, numbers as numbers (layers[2]
    # before layers[10])
    rows = sorted(
        memory.at_peak,
        key=lambda b: (b.instruction == OTHER, -b.bytes, natural(describe_made_by(b))),
    )
    picked = table(
        buffer_rows(rows),
        height=min(38 + 35 * len(rows), 460),
        on_select="rerun",
        selection_mode="single-row",
        key=f"mem_rows_{index}",
        column_config={
            "live": st.column_config.TextColumn(help="steps of the schedule, first to last"),
            "padding": st.column_config.TextColumn(
                help="the bytes its layout's tiles add to its elements' own (a TPU lays "
                "arrays out in tiles such as 8×128), and how many times its size it takes"
            ),
        },
    )
    chosen = picked.selection.rows if picked else []
    if not chosen:
        st.caption("Pick a row to open the kernel that made it in the fusion map.")
        return
    row = rows[chosen[0]]
    kernel = row.instruction
    if row.instruction == OTHER or not any(e.kernel == kernel for e in r.fusion_map):
        st.caption(f"`{kernel}` is not a kernel of the fusion map (an argument or a constant).")
        return
    # the Fusion tab lights the kernel's lines in the code beside the map
    show_in_map_button(r.fusion_map, kernel, index, key=f"mem_fusion_{index}")


def lower_it(res: Result) -> None:
    """What would lower the peak: donation, the memory-first schedule (each with its
    Quick variant's button, here), jax.checkpoint."""
    r = res.report
    memory = r.memory
    assert memory is not None
    st.markdown("#### What would lower it")
    arguments = memory.arguments_at_peak
    if r.donate:
        saved = memory.alias_bytes or 0
        st.markdown(
            f"- **Donation**: {', '.join(f'`{d}`' for d in r.donate)} donated; XLA writes "
            f"{nbytes(saved)} of outputs into their buffers (the chart marks where their "
            "bytes stop counting as arguments)."
        )
    elif arguments and (compiled := r.graph_models.get(IR.COMPILED)) is not None:
        said, helps = donation_text(memory, compiled)
        st.markdown(f"- {said}")
        if helps:
            variant_button(res, "Donate the arrays", key="mem_")
    if memory_schedule_of(r.device):
        st.markdown(
            f"- **Schedule**: this button compiles again with "
            f"{options_text(MEMORY_SCHEDULE)} (XLA's CPU scheduler that keeps fewer "
            "buffers live) and shows both peaks in the diff."
        )
        variant_button(res, "Memory-first schedule", key="mem_")
    checkpoint(r)
    donation_panel(r)


def checkpoint(r: Report) -> None:
    """What jax.checkpoint saves for the backward pass, and which kernels it recomputes."""
    memory = r.memory
    assert memory is not None
    if memory.residuals:
        total = sum(x.bytes for x in memory.residuals)
        st.markdown(
            f"- **jax.checkpoint** saves {plural(len(memory.residuals), 'residual')}, "
            f"{nbytes(total)}, for the backward pass (`print_saved_residuals`):"
        )
        table(residual_rows(memory.residuals))
    elif memory.residuals_note:
        st.markdown(f"- **jax.checkpoint**: {memory.residuals_note}")
    if memory.recomputed:
        shown = listed((f"`{k}`" for k in memory.recomputed), 8)
        st.markdown(
            f"- **Recomputed**: {plural(len(memory.recomputed), 'kernel')} recompute what "
            f"jax.checkpoint did not save ({shown}); the table marks their buffers."
        )


def donation_panel(report: Report) -> None:
    """Which donated leaves XLA reused for an output (and why not), JAX's warnings, and
    the program's memory with and without the reuse (memory_analysis: no recompile)."""
    donation = report.donation
    if not donation:
        return
    st.markdown("**Donation** · a donated input's buffer may become an output's")
    rows = [
        {
            "argument": a.name,
            "donated": a.donated,
            "aliased output": None if a.aliased_output is None else f"#{a.aliased_output}",
            "not reused because": a.reason,
        }
        for a in donation.args
    ]
    table(rows)
    for warning in donation.warnings:
        st.warning(f"JAX: {warning}", icon=":material/warning:")
    without = report.memory_total_bytes or 0
    alias = (report.memory.alias_bytes if report.memory else None) or 0
    m = st.columns(3)
    m[0].metric(
        "memory without donation",
        nbytes(without),
        help="arguments + outputs + temporaries, as if no buffer were reused",
    )
    m[1].metric(
        "with donation",
        nbytes(without - alias),
        delta=f"-{nbytes(alias)}" if alias else None,
        delta_color="inverse",
        help="minus XLA's alias bytes: outputs written into donated inputs",
    )
    m[2].metric("reused in place", nbytes(alias), help="memory_analysis: alias_size_in_bytes")


def totals(r: Report) -> None:
    st.markdown("#### XLA's totals · `compiled.memory_analysis()`")
    for col, (label, total) in zip(st.columns(4), XLA_TOTALS, strict=True):
        col.metric(label, nbytes(total(r.memory) if r.memory else None))
