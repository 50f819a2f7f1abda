"""Explorer: paste or pick a function and see every stage of jax.jit."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from typing import Any

import streamlit as st

import ui
from ui import compile_time, editor, fusion, memory, results, sharding, specialization, variants
from ui.results import FULL_RESULTS, Result
from viz import charts, demo, share, vega
from viz.history import History, HistoryError
from viz.program import Program
from viz.progress import STAGES
from viz.report import Report
from viz.source import list_functions

ui.leave_legacy_pages()  # a deep link may start here, without app.py

st.title("jitscope")
st.caption(
    ("Pick a sample" if demo.enabled() else "Paste a function")
    + ", describe its inputs, and see what `jax.jit` makes of it: "
    "trace → jaxpr, lower → StableHLO, compile → optimized HLO, run → timings."
)


def load_sample() -> None:
    name = ui.samples_by_title()[st.session_state.sample_pick]
    st.session_state.program = ui.program_from_sample(name)
    ui.reset_inputs()


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
    ui.reset_inputs(also=("sample_pick",))
    if not opened.run_now:
        st.session_state.results = []  # nothing runs until the user presses Analyze
    return opened.run_now


def inputs() -> tuple[bool, int, str | None]:
    """The code editor, the argument table and the compiler options; returns (analyze
    clicked, runs, an error that forbids sending the request)."""
    prog = ui.program()
    titles = ui.samples_by_title()
    current = next((t for t, n in titles.items() if n == prog.settings.sample), None)
    left, right = st.columns([3, 2], gap="large")
    with left:
        if prog.origin:  # opened from a recording: where the code came from
            st.info(prog.origin, icon=":material/radio_button_checked:")
        st.selectbox(
            "Sample",
            list(titles),
            index=list(titles).index(current) if current else None,
            key="sample_pick",
            on_change=load_sample,
            placeholder="your own code",
        )
        submitted = False
        if demo.enabled():  # no code widget: the code is the sample file's
            code = prog.settings.code
            st.code(code, language="python", line_numbers=True, height=380)
        else:
            edit = editor.code_editor(
                prog.settings.code, "code_w", **error_mark(prog.settings.code)
            )
            code, submitted = edit.code, edit.submitted
            prog.edit(code)
            if editor.plain():
                with st.expander("Highlighted, with line numbers"):
                    st.code(code, language="python", line_numbers=True)
    with right:
        functions = [f.name for f in list_functions(code)]
        if prog.settings.function not in functions and functions:
            prog.settings.function = functions[-1]
        st.session_state.setdefault("fn_w", prog.settings.function)
        if st.session_state.fn_w not in functions:
            st.session_state.fn_w = prog.settings.function
        prog.settings.function = st.selectbox(
            "Function", functions, key="fn_w", help="the function to jit"
        )
        st.markdown("**Arguments** · spec per parameter, e.g. `f32[8,128]`, `3`, `key`, `params`")
        prog.settings.args, prog.settings.static, prog.settings.donate = argument_table(code, prog)
        mesh_problem = sharding.mesh_input(prog, ui.device())
        options, problem = variants.options_input(prog)
        if problem is None:
            prog.settings.compiler_options = options
        problem = problem or mesh_problem
        runs = st.number_input(
            "Timed runs",
            0,
            demo.LIMITS.runs if demo.enabled() else 200,
            20,
            key="runs_w",
            help="0 = compile only: inputs are never allocated",
        )
        clicked = st.button(
            "Analyze",
            type="primary",
            width="stretch",
            help=None if editor.plain() else "or Ctrl+Enter (⌘+Enter) in the editor",
        )
        st.caption(variants.settings_caption(prog))
    return clicked or submitted, int(runs), problem


def error_mark(code: str) -> dict[str, Any]:
    """The shown result's error line, for the editor to mark while it holds that code."""
    shown = results.shown()
    if shown is None:
        return {}
    res = shown[1]
    error = res.report.error
    if error is None or not error.line or res.code != code:
        return {}
    return {"error_line": error.line, "error_text": f"{error.kind}: {error.message}"}


def argument_table(code: str, prog: Program) -> tuple[str, list[str], list[str]]:
    """One row per parameter: its spec, static, and donate (only for a dynamic one).
    Returns (spec, static names, donated names)."""
    rows = ui.spec_rows(code, prog.settings.function, prog.settings.args)
    widths = [5, 8, 3, 4]
    head = st.columns(widths)
    for column, text in zip(head, ("parameter", "spec", "static", "donate"), strict=True):
        column.caption(text)
    items, static, donate = [], [], []
    for name, item in rows:
        cols = st.columns(widths, vertical_alignment="center")
        cols[0].markdown(f"`{name}`")
        key = f"{prog.settings.function}_{name}"
        st.session_state.setdefault(f"in_spec_{key}", item)
        st.session_state.setdefault(f"in_static_{key}", name in prog.settings.static)
        st.session_state.setdefault(f"in_donate_{key}", name in prog.settings.donate)
        items.append(cols[1].text_input(name, key=f"in_spec_{key}", label_visibility="collapsed"))
        is_static = cols[2].checkbox("static", key=f"in_static_{key}", label_visibility="collapsed")
        static += [name] if is_static else []
        donated = cols[3].checkbox(
            "donate",
            key=f"in_donate_{key}",
            label_visibility="collapsed",
            disabled=is_static,
            help="a static argument is not a buffer" if is_static else "donate its buffer",
        )
        donate += [name] if donated and not is_static else []
    return ui.join_spec(items), static, donate


def analyze(runs: int, automatic: bool = False) -> None:
    """Analyze the program, each stage drawn as the worker sends it; `automatic`: a
    first visit's or a link's run, kept in History once only."""
    prog = ui.program()
    request = prog.analysis(ui.device(), runs)
    s = request.settings
    asked = Report(function=s.function or "", args=s.args, device=s.device)
    stages = STAGES if runs else tuple(s for s in STAGES if s != "run")
    live = ui.LiveAnalysis(lambda known: overview(known, key="live"), asked, stages)
    reply = ui.ask(replace(request, stream=True), on_progress=live.progress, on_tick=live.tick)
    res = Result(request, reply.report, reply.stdout)
    res.history_id = results.record(res.report, res.code, res.sample, automatic)
    results.add(res)
    live.close()  # a rerun asked for meanwhile happens here, the result recorded
    st.query_params.from_dict(share.link(prog, ui.device(), demo.enabled()))
    if res.report.error_line and not editor.plain():
        st.rerun()  # the editor above was drawn before the error: mark its line


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


def overview(r: Report, key: str = "ov") -> None:
    """The numbers, the program's graph and the two charts: of a finished report, or,
    while the analysis runs, of what is known so far (`key`: a prefix of its own)."""
    j, h, c, defs = r.jaxpr, r.stablehlo, r.compiled, r.count_definitions
    m = st.columns(4)
    m[0].metric("jaxpr equations", j and j.eqn_count, help=defs.get("jaxpr.eqn_count"))
    m[1].metric("StableHLO ops", h and h.op_count, help=defs.get("stablehlo.op_count"))
    m[2].metric("compiled kernels", c and c.kernel_count, help=defs.get("compiled.kernel_count"))
    m[3].metric("fusions", c and c.fusion_count, help=defs.get("compiled.fusion_count"))
    variants.compile_settings_caption(r)
    m = st.columns(4)
    m[0].metric(
        "trace + lower + compile",
        # while XLA compiles, a sum of the stages so far would read as the whole cost
        ui.seconds(r.compile_total_s) if r.timings.compile_s is not None or r.error else None,
        help="one-time cost of the first call with these shapes",
    )
    m[1].metric(
        "run (median)",
        ui.seconds(r.timings.run_median_s),
        help="steady-state time per call of the compiled program",
    )
    flops = r.cost.flops if r.cost else None
    m[2].metric("FLOPs", ui.si(flops), help="XLA's cost analysis of the program")
    m[3].metric(
        "memory", ui.nbytes(r.memory_total_bytes), help="arguments + outputs + XLA temporaries"
    )
    fusion_link(r)
    specialization.overview_link(r, _open_tab)
    sharding.overview_link(r, _open_tab)
    overview_graphs(r)
    left, right = st.columns(2)
    left.vega_lite_chart(vega.count_chain(r), width="stretch", key=f"{key}_chain")
    right.vega_lite_chart(vega.stage_waterfall(r), width="stretch", key=f"{key}_stages")


def fusion_link(r: Report) -> None:
    """Overview → the Fusion tab's map of which ops became which kernel."""
    coverage = r.fusion_map_coverage
    if coverage is None or coverage.stablehlo is None:
        return
    text, button = st.columns([4, 1], vertical_alignment="center")
    text.markdown(
        f"**Fusion map**: {coverage.stablehlo:.0%} of the StableHLO ops traced to the "
        f"{r.mapped_kernels} kernels XLA runs, each with its source lines"
    )
    button.button("Open the fusion map", key="ov_fusion", on_click=_open_tab, args=("Fusion",))


def _open_tab(tab: str) -> None:
    st.session_state.result_tab = tab


OVERVIEW_GRAPHS = (
    ("compiled", "After fusion: compiled HLO", "fusions are the filled clusters"),
    ("stablehlo", "Before fusion: StableHLO", "what XLA was given"),
)
# while XLA compiles, the jaxpr is all there is to see
TRACED_GRAPH = ("jaxpr", "As traced: jaxpr", "the equations JAX recorded; XLA compiles")
SIDE_BY_SIDE_NODES = 40  # two views this small fit side by side; larger: compiled alone


def overview_graphs(r: Report) -> None:
    """The compiled program in its default (collapsed) view, and beside it the StableHLO
    it came from when both are small enough to read at half width (before either is
    known, the jaxpr); the IR tabs expand, search and export them. Drawn from the
    report's own default views (`report.graphs`), which a glimpse carries too."""
    shown = [(ir, title, note) for ir, title, note in OVERVIEW_GRAPHS if ir in r.graphs]
    if not shown and TRACED_GRAPH[0] in r.graphs:
        shown = [TRACED_GRAPH]
    if len(shown) == 2 and max(r.graphs[ir].visible_nodes for ir, *_ in shown) > SIDE_BY_SIDE_NODES:
        shown = shown[:1]
    for column, (ir, title, note) in zip(st.columns(len(shown) or 1), shown, strict=False):
        summary = r.graphs[ir]
        with column:
            st.markdown(f"**{title}** · {note}")
            st.caption(
                f"{summary.visible_nodes} of {summary.total_nodes} nodes · "
                f"open the {ui.IR_TITLES[ir]} tab"
            )
            ui.show_graph(summary.dot, summary.visible_nodes, height=440)


def ir_tab(res: Result, ir: str, index: int) -> None:
    r = res.report
    models = r.graph_models
    section = getattr(r, ir)
    text = section.text if section else ""  # a failed lower or compile has no section
    if res.trimmed:
        st.caption(
            f"Only the last {FULL_RESULTS} results keep their graphs: analyze again to see it."
        )
    if ir in models:
        collectives = r.sharding.collective_nodes if ir == "compiled" and r.sharding else None
        ui.graph_panel(
            ir,
            models[ir],
            key=f"g_{ir}_{index}",
            title=f"{r.function} · {ui.IR_TITLES[ir]}",
            highlight=collectives or frozenset(),
            drawn=r.graphs[ir].dot if ir in r.graphs else "",  # the worker's default view
        )
    if ir == "compiled" and {"stablehlo", "compiled"} <= set(models):
        ui.fusion_compare(models["stablehlo"], models["compiled"], key=f"fc_{index}")
    with st.expander(
        f"{ui.IR_TITLES[ir]} text ({len(text.splitlines())} lines)", expanded=ir == "jaxpr"
    ):
        st.code(text, language="python" if ir == "jaxpr" else "rust", line_numbers=True, height=420)


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
        " · ".join(f"{a.pass_}: {b.op_count} → {a.op_count}" for b, a in changes[:12])
        or "No pass changed the op count."
    )


def show_results() -> None:
    history = results.results()
    if not history:
        st.info("Pick a sample or paste your code, then press **Analyze**.")
        return
    if len(history) > 1:
        st.session_state.shown = st.selectbox(
            "Result",
            range(len(history)),
            index=results.shown()[0],
            format_func=lambda i: history[i].label(i),
        )
    index, res = results.shown()
    r = res.report
    vs_previous(res)
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
    variants.quick_variants(res)
    # Stateful tabs: only the open one runs, so a big graph is drawn only when asked for.
    render = {
        "Overview": lambda: overview(r),
        specialization.TAB: lambda: specialization.panel(res, index),
        **({sharding.TAB: lambda: sharding.panel(res, index)} if r.sharding else {}),
        "jaxpr": lambda: ir_tab(res, "jaxpr", index),
        "StableHLO": lambda: ir_tab(res, "stablehlo", index),
        "Compiled HLO": lambda: ir_tab(res, "compiled", index),
        "Fusion": lambda: fusion_tab(res, index),
        "Timing": lambda: results.timing_tab(r),
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


# A shared link runs its analysis on open; so does a first visit, on the default sample.
if "reopened" in st.session_state:  # the History page loaded a run: it waits for Analyze
    st.toast(f"Run #{st.session_state.pop('reopened')} loaded: press Analyze to run it.")
auto = apply_query_params() or "results" not in st.session_state
profile = compile_time.pending()  # a recording's "Profile this compile"
clicked, runs, problem = inputs()
st.divider()
if problem and (clicked or auto or profile):
    st.error(f"Nothing was sent. {problem}", icon=":material/error:")
elif clicked or auto or profile:
    analyze(runs, automatic=auto and not (clicked or profile))
    if profile:
        compile_time.profile_shown_result()
show_results()
