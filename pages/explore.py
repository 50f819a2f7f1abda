"""Explorer: paste or pick a function and see every stage of jax.jit."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

import ui
import viz.graph
from ui import (
    compile_time,
    editor,
    follow,
    fusion,
    inputs,
    memory,
    results,
    sharding,
    specialization,
    variants,
)
from ui.results import FULL_RESULTS, Result
from viz import charts, demo, share, vega
from viz.device_time import device_time_words
from viz.history import History, HistoryError
from viz.ir.model import IR, Graph
from viz.progress import STAGES
from viz.report import CompiledSection, Count, Report, Subject
from viz.units import listed
from viz.worker.protocol import Analyze

ui.leave_legacy_pages()  # a deep link may start here, without app.py


def apply_query_params() -> bool:
    """A shared link carries the program (viz.share); True when it should run now."""
    if st.session_state.get("query_applied"):
        return False
    st.session_state.query_applied = True  # only a session's first run reads the link
    params = {k: st.query_params.get_all(k) for k in st.query_params}
    opened = share.open_link(params, ui.program(), ui.sample_names(), demo.enabled())
    for notice in opened.notices:
        st.toast(notice)
    if opened.program is None:
        return False
    st.session_state.program = opened.program
    ui.reset_inputs(also=("sample_pick", follow.LINE))
    if not opened.run_now:
        st.session_state.results = []  # nothing runs until the user presses Analyze
    return opened.run_now


def analyze(runs: int, automatic: bool = False) -> None:
    """Analyze the program, each stage drawn as the worker sends it; `automatic`: a
    first visit's or a link's run, kept in History once only."""
    prog = ui.program()
    request = Analyze(prog.settings_on(ui.device()), runs=runs)
    s = request.settings
    asked = Report(subject=Subject.asked(s))
    stages = STAGES if runs else tuple(s for s in STAGES if s != "run")
    live = ui.LiveAnalysis(lambda known: overview(known, key="live"), asked, stages)
    reply = ui.ask(replace(request, stream=True), on_progress=live.progress, on_tick=live.tick)
    res = Result(request, reply.report, reply.stdout, automatic=automatic)
    results.add(res)
    live.close()  # a rerun asked for meanwhile happens here (it records the result)
    st.query_params.from_dict(share.link(prog, ui.device(), demo.enabled()))
    if res.report.error_line and not editor.plain():
        st.rerun()  # the editor above was drawn before the error: mark its line


def result_picker() -> None:
    """Which result the right side shows, when there are several, and the diff with the
    previous run: drawn once the page knows the newest result."""
    shown = results.shown()
    if shown is None:
        return
    index, res = shown
    history = results.results()
    if len(history) > 1:
        st.session_state.result_pick = index  # the newest, once an analysis adds one
        st.selectbox(
            "Result",
            range(len(history)),
            key="result_pick",
            format_func=lambda i: history[i].label(i),
            on_change=lambda: setattr(st.session_state, "shown", st.session_state.result_pick),
        )
    vs_previous(res)


def vs_previous(res: Result) -> None:
    """This run against the previous run of the same function, in the diff view."""
    run_id = res.history_id
    if run_id is None:
        return
    try:
        previous = History().previous(run_id)
    except HistoryError:
        return
    if previous is not None and st.button(
        f"Diff with the previous run of {res.function} (#{previous.id})",
        icon=":material/difference:",
        help=f"#{previous.id} {previous.settings.function}({previous.settings.args}) → #{run_id}",
        key=f"vs_prev_{run_id}",
    ):
        ui.open_diff(previous.id, run_id)


def overview(r: Report, key: str = "ov", res: Result | None = None) -> None:
    """A result's first screen, the counts, the graph and the two charts, then its
    times, the links to the other tabs and the quick variants: of a finished result
    (`res`), or, while the analysis runs, of what is known so far (`key`: a prefix of
    its own)."""
    j, h, c = r.jaxpr, r.stablehlo, r.compiled
    m = st.columns(3)
    m[0].metric("jaxpr equations", ui.count(j and j.eqn_count), help=r.definition(Count.JAXPR_EQNS))
    m[1].metric("StableHLO ops", ui.count(h and h.op_count), help=r.definition(Count.STABLEHLO_OPS))
    m[2].metric(
        "compiled kernels",
        ui.count(c and c.kernel_count),
        help=f"{r.definition(Count.KERNELS)}. {fused_words(c)}",
    )
    overview_graph(r, res)
    left, right = st.columns(2)
    left.vega_lite_chart(vega.count_chain(r), width="stretch", key=f"{key}_chain")
    right.vega_lite_chart(vega.stage_waterfall(r), width="stretch", key=f"{key}_stages")
    m = st.columns(3)
    m[0].metric(
        "trace → compile",
        # while XLA compiles, a sum of the stages so far would read as the whole cost
        ui.seconds(r.compile_total_s) if r.timings.compile_s is not None or r.error else None,
        help="trace + lower + compile: the one-time cost of the first call with these shapes",
    )
    m[1].metric(
        "run (median)",
        ui.seconds(r.timings.run_median_s),
        help="steady-state time per call of the compiled program",
    )
    flops = r.cost.flops if r.cost else None
    looped = r.cost_note  # XLA counts a loop's body once: one pass's FLOPs, said so
    m[2].metric(
        "FLOPs, one loop pass" if looped else "FLOPs",
        ui.si(flops),
        help="XLA's cost analysis of the program (the Cost tab)"
        + (f". {looped}" if looped else ""),
    )
    if r.timings.run_median_s is not None and (said := device_time_words(r.timings, r.device)):
        st.caption(said)
    m = st.columns(3)
    memory_metric(r, m[0])
    variants.compile_settings_caption(r)
    fusion_link(r)
    specialization.overview_link(r, _open_tab)
    sharding.overview_link(r, _open_tab)
    if res is not None:
        variants.quick_variants(res)


def memory_metric(r: Report, place: DeltaGenerator) -> None:
    """The Memory tab's peak, under its name (a sum of XLA's totals, 75.0 MiB beside the
    tab's peak of 74.7 MiB and XLA's 72.7 MiB, read as a third figure); XLA's totals
    where it gave no buffer assignment."""
    memory = r.memory
    if memory is None or memory.peak_bytes is None:
        place.metric(
            "memory",
            ui.nbytes(r.memory_total_bytes),
            help="arguments + outputs + XLA temporaries: XLA gave no buffer assignment",
        )
        return
    estimated = " (estimated)" if memory.estimate is not None else ""
    place.metric(
        f"memory peak{estimated}",
        ui.nbytes(memory.peak_bytes),
        help="the most bytes live at one step of the compiled program: arguments, outputs, "
        "temporaries and constants (the Memory tab shows what fills it)",
    )


def fused_words(c: CompiledSection | None) -> str:
    """How many of the kernels are XLA's fusions, said with the kernels count (two
    counts side by side, kernels and fusions, read as synonyms)."""
    if c is None or c.kernel_count is None or c.fusion_count is None:
        return ""
    if not c.fusion_count:
        return "None of them is a fusion."
    n = "All" if c.fusion_count == c.kernel_count else ui.count(c.fusion_count)
    return f"{n} of them are fusions: each one kernel for the ops XLA fused into it."


def fusion_link(r: Report) -> None:
    """Overview → the Fusion tab's map of which ops became which kernel."""
    coverage = r.fusion_map_coverage
    if coverage is None or coverage.stablehlo is None:
        return
    text, button = st.columns([3, 2], vertical_alignment="center")
    text.markdown(
        f"**Fusion map**: {coverage.stablehlo:.0%} of the StableHLO ops that compute "
        f"(constants and calls aside) traced to the {r.mapped_kernels} kernels XLA runs, "
        "each with its source lines"
    )
    button.button("Open the fusion map", key="ov_fusion", on_click=_open_tab, args=("Fusion",))


def _open_tab(tab: str) -> None:
    st.session_state.result_tab = tab


GRAPH_TITLES = {
    IR.COMPILED: ("After fusion: compiled HLO", "fusions are the filled clusters"),
    IR.STABLEHLO: ("Before fusion: StableHLO", "what XLA was given"),
    IR.JAXPR: ("As traced: jaxpr", "the equations JAX recorded"),
}
LAST_IR = "last_ir"  # session state: the IR tab the user last opened
GRAPH_HEIGHT = 240  # the first screen holds the counts, this graph and the charts (and the
# result tabs, two rows of them beside the code)
GRAPH_WIDTH = 540  # about, beside the code at 1280 and 1440 pixels


def overview_graph(r: Report, res: Result | None) -> None:
    """One program graph in its default (collapsed) view: the IR whose tab the user
    last opened, else the compiled program (while XLA compiles, the jaxpr), the
    followed line's nodes marked. Drawn from the graph model folded and named to read
    in the frame (`viz.graph.glance`), else (while the models come from the worker) the
    report's own default view (`report.graphs`, which a glimpse carries too)."""
    wanted = st.session_state.get(LAST_IR, IR.COMPILED)
    ir = next((i for i in (wanted, IR.COMPILED, IR.STABLEHLO, IR.JAXPR) if i in r.graphs), None)
    if ir is None:
        return
    summary, (title, note) = r.graphs[ir], GRAPH_TITLES[ir]
    marked = follow.node_ids(res, ir) if res is not None else frozenset()
    line = st.session_state.get(follow.LINE)
    dot, shown = summary.dot, summary.visible_nodes
    model = r.graph_models.get(ir)
    if model:
        dot, shown = glance(model, summary.dot, marked) or (dot, shown)
    st.markdown(
        f"**{title}** · {shown} of {summary.total_nodes} nodes"
        + (f" · line {line} marked" if marked else ""),
        help=f"{note}; the {ui.IR_TITLES[ir]} tab expands, searches and exports it",
    )
    ui.show_graph(dot, shown, height=GRAPH_HEIGHT)


def glance(model: Graph, drawn: str, marked: frozenset[str]) -> tuple[str, int] | None:
    """The graph as it reads in the frame beside the code (`viz.graph.glance`): its DOT
    and the items it shows. Without a renderer, the default view with the followed
    line's nodes marked (None: unmarked, the worker's DOT as it is), for Streamlit's own
    chart."""
    try:
        seen = viz.graph.glance(model, (GRAPH_WIDTH, GRAPH_HEIGHT), drawn, marked)
    except RuntimeError:
        if not marked:
            return None
        view = viz.graph.default_view(model)
        view.highlight = marked  # folded groups say how many they hold
        return viz.graph.to_dot(view), len(viz.graph.visible(view)[0])
    return seen.dot, seen.shown


def ir_tab(res: Result, ir: IR, index: int) -> None:
    st.session_state[LAST_IR] = ir  # the Overview shows this IR's graph from now on
    r = res.report
    models = r.graph_models
    section = r.section(ir)
    text = section.text if section else ""  # a failed lower or compile has no section
    if res.trimmed:
        st.caption(
            f"Only the last {FULL_RESULTS} results keep their graphs: analyze again to see it."
        )
    follow.text_rows(res, ir, text)
    if ir in models:
        collectives = r.sharding.collective_nodes if ir == IR.COMPILED and r.sharding else None
        ui.graph_panel(
            ir,
            models[ir],
            key=f"g_{ir}_{index}",
            title=f"{r.function} · {ui.IR_TITLES[ir]}",
            highlight=(collectives or frozenset()) | follow.node_ids(res, ir),
            drawn=r.graphs[ir].dot if ir in r.graphs else "",  # the worker's default view
            on_pick=lambda node: follow.mark_node(res, ir, node),
        )
    if ir == IR.COMPILED and {IR.STABLEHLO, IR.COMPILED} <= set(models):
        ui.fusion_compare(models[IR.STABLEHLO], models[IR.COMPILED], key=f"fc_{index}")
    with st.expander(
        f"{ui.IR_TITLES[ir]} text ({len(text.splitlines())} lines)", expanded=ir == IR.JAXPR
    ):
        st.code(
            text, language="python" if ir == IR.JAXPR else "rust", line_numbers=True, height=420
        )


def fusion_tab(res: Result, index: int) -> None:
    fusion.fusion_map_view(res, index)  # issue #12: the fusion map is the tab's main view
    st.plotly_chart(charts.op_counts(res.report), width="stretch", key="fu_ops")
    pass_by_pass(res, index)


def pass_by_pass(res: Result, index: int) -> None:
    """XLA's own per-pass dumps, on request (a second, dumping compile with the
    analysed run's device, x64, donations and compiler options)."""
    if demo.enabled():
        st.caption("The op count after every XLA pass is off in demo mode: it writes dumps.")
        return
    reply = res.passes
    if reply is None:
        if not st.button(
            "Show the op count after every XLA pass",
            key=f"passes_{index}",
            help="compiles once more with XLA's dump options and reads each dumped module",
        ):
            return
        with st.spinner("Compiling with XLA's pass dumps…"):
            reply = res.passes = ui.ask(res.passes_request())
    if reply.error:
        ui.error_card(reply.error, res.code)
        return
    steps = reply.steps
    st.plotly_chart(charts.pass_chart(steps), width="stretch", key=f"fu_passes_{index}")
    changes = [(b, a) for b, a in pairwise(steps) if a.op_count != b.op_count]
    st.caption(
        listed((f"{a.pass_}: {b.op_count} → {a.op_count}" for b, a in changes), 12, " · ")
        or "No pass changed the op count."
    )


def show_results() -> None:
    if not results.results():
        st.info("Pick a sample or paste your code, then press **Analyze**.")
        return
    index, res = results.shown()
    r = res.report
    if r.error:
        ui.error_card(r.error, res.code)
    for warning in r.warnings:
        st.warning(warning)
    if res.stdout:
        with st.expander("Printed by your code"):
            st.text(res.stdout)
    if not r.jaxpr:
        specialization.after_failed_trace(res, index)
        return
    # Stateful tabs: only the open one runs, so a big graph is drawn only when asked for.
    render = {
        "Overview": lambda: overview(r, res=res),
        specialization.TAB: lambda: specialization.panel(res, index),
        **({sharding.TAB: lambda: sharding.panel(res, index)} if r.sharding else {}),
        "jaxpr": lambda: ir_tab(res, IR.JAXPR, index),
        "StableHLO": lambda: ir_tab(res, IR.STABLEHLO, index),
        "Compiled HLO": lambda: ir_tab(res, IR.COMPILED, index),
        "Fusion": lambda: fusion_tab(res, index),
        "Timing": lambda: results.timing_tab(r, res.asked.runs),
        compile_time.TAB: lambda: compile_time.panel(res, index),
        "Cost": lambda: results.cost_tab(r),
        memory.TAB: lambda: memory.panel(res, index),
        "Export": lambda: results.export_tab(r, index),
    }
    tabs = st.tabs(list(render), key="result_tab", on_change="rerun")
    for draw, tab in zip(render.values(), tabs, strict=True):
        if tab.open:
            with tab:
                draw()


# the views a line is followed in, and a kernel picked whose lines the editor marks
BESIDE_THE_CODE = ("Overview", "jaxpr", "StableHLO", "Compiled HLO", "Fusion")


def places() -> tuple[DeltaGenerator, DeltaGenerator, DeltaGenerator]:
    """Where the title, the code and the result go: the code and inputs on the left and
    the result on the right, as Compiler Explorer has them (the counts, a graph and the
    charts on the first screen), while the Overview, an IR tab or the fusion map is
    open; the other tabs take the whole width, the code folded above them, one click
    away."""
    if not results.results() or st.session_state.get("result_tab") in (None, *BESIDE_THE_CODE):
        code_side, result_side = st.columns([5, 7], gap="medium")
        return code_side, code_side, result_side
    title = st.container()
    code = st.expander("Code and inputs", icon=":material/code:", key="code_open")
    return title, code, st.container()


# A shared link runs its analysis on open; so does a first visit, on the default sample.
if "reopened" in st.session_state:  # the History page loaded a run: it waits for Analyze
    st.toast(f"Run #{st.session_state.pop('reopened')} loaded: press Analyze to run it.")
auto = apply_query_params() or "results" not in st.session_state
profile = compile_time.pending()  # a recording's "Profile this compile"
title_place, code_place, result_side = places()
asked = inputs.draw(auto or bool(profile), title_place, code_place)
with result_side:
    if asked.problem and (asked.analyze or auto or profile):
        st.error(f"Nothing was sent. {asked.problem}", icon=":material/error:")
    elif asked.analyze or auto or profile:
        analyze(asked.runs, automatic=auto and not (asked.analyze or profile))
        if profile:
            compile_time.profile_shown_result()
    show_results()
    results.record_new()  # after the first screen: the graph models follow it from the worker
with asked.results_place:
    result_picker()
with asked.lines_place:
    follow.picker(results.shown_result(), ui.program().settings.code)
