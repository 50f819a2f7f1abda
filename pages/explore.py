"""Explorer: paste or pick a function and see every stage of jax.jit."""

from __future__ import annotations

import sqlite3
from itertools import pairwise
from typing import Any

import streamlit as st

import ui
import viz.graph
from ui import editor, fusion, results, variants
from ui.results import FULL_RESULTS, Result
from viz import charts, demo, vega
from viz.history import History, HistoryError
from viz.options import parse_option
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
    reset_inputs()


def reset_inputs() -> None:
    for key in list(st.session_state):
        if key.startswith(("in_", "code_w", "fn_w")):
            del st.session_state[key]


def apply_query_params() -> bool:
    """A shared link carries the program. It runs at once only for a built-in sample: a
    link that carries code fills the editor and waits for Analyze (code from a link is
    code from a stranger)."""
    q = st.query_params
    if st.session_state.get("query_applied"):
        return False
    st.session_state.query_applied = True  # only a session's first run reads the link
    if not ("sample" in q or "code" in q):
        return False
    if demo.enabled() and "code" in q:
        st.toast("Demo mode: links cannot carry code; this one is ignored.")
        return False
    if "sample" in q and q["sample"] in ui.sample_names():
        st.session_state.program = ui.program_from_sample(q["sample"])
    prog = variants.settings_of(ui.program())
    for field in ("code", "function", "args"):
        if field in q:
            prog[field] = q[field]
    for field in ("static", "donate"):
        if field in q:
            prog[field] = [s for s in q[field].split(",") if s]
    if "option" in q:
        try:
            prog["compiler_options"] = dict(parse_option(o) for o in q.get_all("option"))
        except ValueError as exc:
            st.toast(f"This link's compiler options are ignored: {exc}")
    reset_inputs()
    if "code" in q:
        st.session_state.results = []  # nothing runs until the user presses Analyze
        st.toast("Code from a link: read it, then press Analyze to run it.")
        return False
    return True


def inputs() -> tuple[bool, int, str | None]:
    """The code editor, the argument table and the compiler options; returns (analyze
    clicked, runs, an error that forbids sending the request)."""
    prog = variants.settings_of(ui.program())
    titles = ui.samples_by_title()
    current = next((t for t, n in titles.items() if n == prog.get("sample")), None)
    left, right = st.columns([3, 2], gap="large")
    with left:
        if prog.get("origin"):  # opened from a recording: where the code came from
            st.info(prog["origin"], icon=":material/radio_button_checked:")
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
            code = prog["code"]
            st.code(code, language="python", line_numbers=True, height=380)
        else:
            edit = editor.code_editor(prog["code"], "code_w", **error_mark(prog["code"]))
            code, submitted = edit.code, edit.submitted
            if code != prog["code"]:
                prog.update(code=code, sample=None)
            if editor.plain():
                with st.expander("Highlighted, with line numbers"):
                    st.code(code, language="python", line_numbers=True)
    with right:
        functions = [f.name for f in list_functions(code)]
        if prog["function"] not in functions and functions:
            prog["function"] = functions[-1]
        st.session_state.setdefault("fn_w", prog["function"])
        if st.session_state.fn_w not in functions:
            st.session_state.fn_w = prog["function"]
        prog["function"] = st.selectbox(
            "Function", functions, key="fn_w", help="the function to jit"
        )
        st.markdown("**Arguments** · spec per parameter, e.g. `f32[8,128]`, `3`, `key`, `params`")
        prog["args"], prog["static"], prog["donate"] = argument_table(code, prog)
        options, problem = variants.options_input(prog)
        if problem is None:
            prog["compiler_options"] = options
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
    error = res.report.get("error") or {}
    if not error.get("line") or res.code != code:
        return {}
    return {"error_line": error["line"], "error_text": f"{error['kind']}: {error['message']}"}


def argument_table(code: str, prog: dict[str, Any]) -> tuple[str, list[str], list[str]]:
    """One row per parameter: its spec, static, and donate (only for a dynamic one).
    Returns (spec, static names, donated names)."""
    rows = ui.spec_rows(code, prog["function"], prog["args"])
    widths = [5, 8, 3, 4]
    head = st.columns(widths)
    for column, text in zip(head, ("parameter", "spec", "static", "donate"), strict=True):
        column.caption(text)
    items, static, donate = [], [], []
    for name, item in rows:
        cols = st.columns(widths, vertical_alignment="center")
        cols[0].markdown(f"`{name}`")
        key = f"{prog['function']}_{name}"
        st.session_state.setdefault(f"in_spec_{key}", item)
        st.session_state.setdefault(f"in_static_{key}", name in prog["static"])
        st.session_state.setdefault(f"in_donate_{key}", name in prog["donate"])
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


def analyze(runs: int) -> None:
    prog = ui.program()
    with st.spinner("Tracing, lowering, compiling and timing in the worker…"):
        report = ui.request(
            "analyze",
            code=prog["code"],
            function=prog["function"],
            args=prog["args"],
            static=prog["static"],
            donate=prog["donate"],
            compiler_options=prog["compiler_options"],
            device=ui.device(),
            runs=runs,
            **({"folder": prog["folder"]} if prog.get("folder") else {}),  # a file on disk
        )
    # a timeout or crash comes back as a bare error: give it what the history shows
    for field in ("function", "args", "static"):
        report.setdefault(field, prog[field])
    res = Result(report, prog["code"], sample=prog.get("sample"))
    res.history_id = results.record(report, res.code, res.sample)
    results.add(res)
    st.query_params.from_dict(share_params(prog))
    if (report.get("error") or {}).get("line") and not editor.plain():
        st.rerun()  # the editor above was drawn before the error: mark its line


def vs_previous(res: Result) -> None:
    """This run against the previous run of the same function, in the diff view."""
    run_id = res.history_id
    if run_id is None:
        return
    try:
        previous = History().previous(run_id)
    except (sqlite3.Error, OSError, HistoryError):
        return
    if previous is not None and st.button(
        f"Diff with the previous run of {res.function} (#{previous.id})",
        icon=":material/difference:",
        help=f"#{previous.id} {previous.function}({previous.args}) → #{run_id}",
        key=f"vs_prev_{run_id}",
    ):
        ui.open_diff(previous.id, run_id)


def share_params(prog: dict[str, Any]) -> dict[str, str | list[str]]:
    params: dict[str, str | list[str]] = {
        "function": prog["function"],
        "args": prog["args"],
        "static": ",".join(prog["static"]),
        "device": ui.device(),
    }
    if prog["donate"]:
        params["donate"] = ",".join(prog["donate"])
    if prog["compiler_options"]:
        params["option"] = [f"{k}={v}" for k, v in prog["compiler_options"].items()]
    if prog.get("sample") or demo.enabled():
        params["sample"] = prog["sample"]
    else:
        params["code"] = prog["code"]
    return params


def overview(r: dict[str, Any]) -> None:
    j, s, c = r.get("jaxpr") or {}, r.get("stablehlo") or {}, r.get("compiled") or {}
    t, cost, mem = r["timings"], r.get("cost") or {}, r.get("memory") or {}
    defs = r.get("count_definitions", {})
    m = st.columns(4)
    m[0].metric("jaxpr equations", j.get("eqn_count"), help=defs.get("jaxpr.eqn_count"))
    m[1].metric("StableHLO ops", s.get("op_count"), help=defs.get("stablehlo.op_count"))
    m[2].metric("compiled kernels", c.get("kernel_count"), help=defs.get("compiled.kernel_count"))
    m[3].metric("fusions", c.get("fusion_count"), help=defs.get("compiled.fusion_count"))
    variants.compile_settings_caption(r)
    m = st.columns(4)
    compile_total = sum(t.get(k) or 0 for k in ("trace_s", "lower_s", "compile_s"))
    m[0].metric(
        "trace + lower + compile",
        ui.seconds(compile_total),
        help="one-time cost of the first call with these shapes",
    )
    m[1].metric(
        "run (median)",
        ui.seconds(t.get("run_median_s")),
        help="steady-state time per call of the compiled program",
    )
    m[2].metric("FLOPs", ui.si(cost.get("flops")), help="XLA's cost analysis of the program")
    total_mem = sum(mem.get(k) or 0 for k in ("argument_bytes", "output_bytes", "temp_bytes"))
    m[3].metric("memory", ui.nbytes(total_mem), help="arguments + outputs + XLA temporaries")
    fusion_link(r)
    overview_graphs(r)
    left, right = st.columns(2)
    left.vega_lite_chart(vega.count_chain(r), width="stretch", key="ov_chain")
    right.vega_lite_chart(vega.stage_waterfall(r), width="stretch", key="ov_stages")


def fusion_link(r: dict[str, Any]) -> None:
    """Overview → the Fusion tab's map of which ops became which kernel."""
    cov = r.get("fusion_map_coverage") or {}
    if cov.get("stablehlo") is None:
        return
    kernels = sum(1 for e in r.get("fusion_map") or [] if e["kind"] != "no_kernel")
    text, button = st.columns([4, 1], vertical_alignment="center")
    text.markdown(
        f"**Fusion map**: {cov['stablehlo']:.0%} of the StableHLO ops traced to the "
        f"{kernels} kernels XLA runs, each with its source lines"
    )
    button.button("Open the fusion map", key="ov_fusion", on_click=_open_tab, args=("Fusion",))


def _open_tab(tab: str) -> None:
    st.session_state.result_tab = tab


OVERVIEW_GRAPHS = (
    ("compiled", "After fusion: compiled HLO", "fusions are the filled clusters"),
    ("stablehlo", "Before fusion: StableHLO", "what XLA was given"),
)
SIDE_BY_SIDE_NODES = 40  # two views this small fit side by side; larger: compiled alone


def overview_graphs(r: dict[str, Any]) -> None:
    """The compiled program in its default (collapsed) view, and beside it the StableHLO
    it came from when both are small enough to read at half width; the IR tabs expand,
    search and export them."""
    models = r.get("graph_models") or {}
    shown = []
    for ir, title, note in OVERVIEW_GRAPHS:
        if ir in models:
            graph = ui.graph_of(models[ir])
            view = viz.graph.default_view(graph)
            shown.append((ir, title, note, graph, view, len(viz.graph.visible(view)[0])))
    if len(shown) == 2 and max(item[-1] for item in shown) > SIDE_BY_SIDE_NODES:
        shown = shown[:1]
    for column, (ir, title, note, graph, view, count) in zip(
        st.columns(len(shown) or 1), shown, strict=False
    ):
        with column:
            st.markdown(f"**{title}** · {note}")
            st.caption(f"{count} of {len(graph.nodes)} nodes · open the {ui.IR_TITLES[ir]} tab")
            ui.show_graph(viz.graph.to_dot(view), count, height=440)


def ir_tab(res: Result, ir: str, index: int) -> None:
    r = res.report
    section = r.get(ir) or {}
    if res.trimmed:
        st.caption(
            f"Only the last {FULL_RESULTS} results keep their graphs: analyze again to see it."
        )
    if ir in r.get("graph_models", {}):
        ui.graph_panel(
            ir,
            r["graph_models"][ir],
            key=f"g_{ir}_{index}",
            title=f"{r['function']} · {ui.IR_TITLES[ir]}",
        )
    if ir == "compiled" and {"stablehlo", "compiled"} <= set(r.get("graph_models", {})):
        ui.fusion_compare(
            r["graph_models"]["stablehlo"], r["graph_models"]["compiled"], key=f"fc_{index}"
        )
    with st.expander(
        f"{ui.IR_TITLES[ir]} text ({len(section.get('text', '').splitlines())} lines)",
        expanded=ir == "jaxpr",
    ):
        st.code(
            section.get("text", ""),
            language="python" if ir == "jaxpr" else "rust",
            line_numbers=True,
            height=420,
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
    if res.passes is None:
        if not st.button(
            "Show the op count after every XLA pass",
            key=f"passes_{index}",
            help="compiles once more with XLA's dump options and reads each dumped module",
        ):
            return
        with st.spinner("Compiling with XLA's pass dumps…"):
            res.passes = ui.request("passes", **res.settings())
    result = res.passes
    if not result.get("ok"):
        ui.error_card(result["error"], res.code)
        return
    steps = result["steps"]
    st.plotly_chart(charts.pass_chart(steps), width="stretch", key=f"fu_passes_{index}")
    changes = [(b, a) for b, a in pairwise(steps) if a["op_count"] != b["op_count"]]
    st.caption(
        " · ".join(f"{a['pass']}: {b['op_count']} → {a['op_count']}" for b, a in changes[:12])
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
    if r.get("error"):
        ui.error_card(r["error"], res.code)
    for warning in r.get("warnings") or []:
        st.warning(warning)
    if r.get("stdout"):
        with st.expander("Printed by your code"):
            st.text(r["stdout"])
    if not r.get("jaxpr"):
        return
    variants.quick_variants(res)
    # Stateful tabs: only the open one runs, so a big graph is drawn only when asked for.
    render = {
        "Overview": lambda: overview(r),
        "jaxpr": lambda: ir_tab(res, "jaxpr", index),
        "StableHLO": lambda: ir_tab(res, "stablehlo", index),
        "Compiled HLO": lambda: ir_tab(res, "compiled", index),
        "Fusion": lambda: fusion_tab(res, index),
        "Timing": lambda: results.timing_tab(r),
        "Cost & memory": lambda: results.cost_tab(r),
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
clicked, runs, problem = inputs()
if problem and (clicked or auto):
    st.error(f"Nothing was sent. {problem}", icon=":material/error:")
elif clicked or auto:
    analyze(runs)
st.divider()
show_results()
