"""Explorer: paste or pick a function and see every stage of jax.jit."""

from __future__ import annotations

import sqlite3
from itertools import pairwise
from typing import Any

import streamlit as st

import ui
import viz.graph
from ui import editor, fusion
from viz import charts, demo
from viz.export import html_report
from viz.history import History, HistoryError
from viz.ir.model import Graph
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
    if "sample" in q and q["sample"] in {s for s in ui.samples_by_title().values()}:
        st.session_state.program = ui.program_from_sample(q["sample"])
    prog = ui.program()
    for field in ("code", "function", "args"):
        if field in q:
            prog[field] = q[field]
    if "static" in q:
        prog["static"] = [s for s in q["static"].split(",") if s]
    reset_inputs()
    if "code" in q:
        st.session_state.results = []  # nothing runs until the user presses Analyze
        st.toast("Code from a link: read it, then press Analyze to run it.")
        return False
    return True


def inputs() -> tuple[bool, int]:
    """The code editor and the argument table; returns (analyze clicked, runs)."""
    prog = ui.program()
    titles = ui.samples_by_title()
    current = next((t for t, n in titles.items() if n == prog.get("sample")), None)
    left, right = st.columns([3, 2], gap="large")
    with left:
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
        prog["args"], prog["static"] = argument_table(code, prog)
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
        st.caption(
            f"args spec: `{prog['args'] or '(none)'}` · static: "
            f"{', '.join(prog['static']) or 'none'}"
        )
    return clicked or submitted, int(runs)


def error_mark(code: str) -> dict[str, Any]:
    """The shown result's error line, for the editor to mark while it holds that code."""
    history = st.session_state.get("results") or []
    if not history:
        return {}
    r = history[min(st.session_state.get("shown", len(history) - 1), len(history) - 1)]
    error = r.get("error") or {}
    if not error.get("line") or r.get("_code") != code:
        return {}
    return {"error_line": error["line"], "error_text": f"{error['kind']}: {error['message']}"}


def argument_table(code: str, prog: dict[str, Any]) -> tuple[str, list[str]]:
    rows = ui.spec_rows(code, prog["function"], prog["args"])
    head = st.columns([2, 4, 1])
    head[0].caption("parameter")
    head[1].caption("spec")
    head[2].caption("static")
    items, static = [], []
    for name, item in rows:
        cols = st.columns([2, 4, 1], vertical_alignment="center")
        cols[0].markdown(f"`{name}`")
        spec_key, static_key = (
            f"in_spec_{prog['function']}_{name}",
            f"in_static_{prog['function']}_{name}",
        )
        st.session_state.setdefault(spec_key, item)
        st.session_state.setdefault(static_key, name in prog["static"])
        items.append(cols[1].text_input(name, key=spec_key, label_visibility="collapsed"))
        if cols[2].checkbox("static", key=static_key, label_visibility="collapsed"):
            static.append(name)
    return ui.join_spec(items), static


def analyze(runs: int) -> None:
    prog = ui.program()
    with st.spinner("Tracing, lowering, compiling and timing in the worker…"):
        report = ui.request(
            "analyze",
            code=prog["code"],
            function=prog["function"],
            args=prog["args"],
            static=prog["static"],
            device=ui.device(),
            runs=runs,
        )
    # a timeout or crash comes back as a bare error: give it what the history shows
    for field in ("function", "args", "static"):
        report.setdefault(field, prog[field])
    report["_code"] = prog["code"]
    report["_stamp"] = ui.stamp()
    report["_history_id"] = record(report, prog)
    history = st.session_state.setdefault("results", [])
    history.append(report)
    trim_history(history)
    st.session_state.shown = len(history) - 1
    st.query_params.from_dict(share_params(prog))
    if (report.get("error") or {}).get("line") and not editor.plain():
        st.rerun()  # the editor above was drawn before the error: mark its line


def record(report: dict[str, Any], prog: dict[str, Any]) -> int | None:
    """Every analysis goes into the run history (the History page reads it back)."""
    try:
        return History().record(report, code=prog["code"], sample=prog.get("sample"), source="app")
    except (sqlite3.Error, OSError, HistoryError) as exc:
        st.toast(f"Not recorded in the history: {exc}", icon=":material/warning:")
        return None


def vs_previous(r: dict[str, Any]) -> None:
    """This run against the previous run of the same function, in the diff view."""
    run_id = r.get("_history_id")
    if run_id is None:
        return
    try:
        previous = History().previous(run_id)
    except (sqlite3.Error, OSError, HistoryError):
        return
    if previous is not None and st.button(
        f"Diff with the previous run of {r['function']} (#{previous.id})",
        icon=":material/difference:",
        help=f"#{previous.id} {previous.function}({previous.args}) → #{run_id}",
        key=f"vs_prev_{run_id}",
    ):
        ui.open_diff(previous.id, run_id)


FULL_RESULTS = 8  # results that keep their graph models (each can be tens of MB)


def trim_history(history: list[dict[str, Any]]) -> None:
    """Older results keep their numbers and texts but drop their graph models."""
    for old in history[:-FULL_RESULTS]:
        if old.pop("graph_models", None) is not None:
            old["_trimmed"] = True


def share_params(prog: dict[str, Any]) -> dict[str, str]:
    params = {
        "function": prog["function"],
        "args": prog["args"],
        "static": ",".join(prog["static"]),
        "device": ui.device(),
    }
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
    m[2].metric("FLOPs", _si(cost.get("flops")), help="XLA's cost analysis of the program")
    total_mem = sum(mem.get(k) or 0 for k in ("argument_bytes", "output_bytes", "temp_bytes"))
    m[3].metric("memory", _bytes(total_mem), help="arguments + outputs + XLA temporaries")
    fusion_link(r)
    overview_graphs(r)
    left, right = st.columns(2)
    left.plotly_chart(charts.count_chain(r), width="stretch", key="ov_chain")
    right.plotly_chart(charts.stage_waterfall(r), width="stretch", key="ov_stages")


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
            graph = Graph.from_dict(models[ir])
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


def ir_tab(r: dict[str, Any], ir: str, index: int) -> None:
    section = r.get(ir) or {}
    if r.get("_trimmed"):
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


def fusion_tab(r: dict[str, Any], index: int) -> None:
    fusion.fusion_map_view(r, index)  # issue #12: the fusion map is the tab's main view
    st.plotly_chart(charts.op_counts(r), width="stretch", key="fu_ops")
    pass_by_pass(r, index)


def pass_by_pass(r: dict[str, Any], index: int) -> None:
    """XLA's own per-pass dumps, on request (a second, dumping compile)."""
    if demo.enabled():
        st.caption("The op count after every XLA pass is off in demo mode: it writes dumps.")
        return
    if "_passes" not in r:
        if not st.button(
            "Show the op count after every XLA pass",
            key=f"passes_{index}",
            help="compiles once more with XLA's dump options and reads each dumped module",
        ):
            return
        with st.spinner("Compiling with XLA's pass dumps…"):
            r["_passes"] = ui.request(
                "passes",
                code=r["_code"],
                function=r["function"],
                args=r["args"],
                static=r["static"],
            )
    result = r["_passes"]
    if not result.get("ok"):
        ui.error_card(result["error"], r.get("_code"))
        return
    steps = result["steps"]
    st.plotly_chart(charts.pass_chart(steps), width="stretch", key=f"fu_passes_{index}")
    changes = [(b, a) for b, a in pairwise(steps) if a["op_count"] != b["op_count"]]
    st.caption(
        " · ".join(f"{a['pass']}: {b['op_count']} → {a['op_count']}" for b, a in changes[:12])
        or "No pass changed the op count."
    )


def timing_tab(r: dict[str, Any]) -> None:
    t = r["timings"]
    m = st.columns(4)
    m[0].metric("first call", ui.seconds(t.get("first_call_s")))
    m[1].metric("jit (median)", ui.seconds(t.get("run_median_s")))
    m[2].metric("eager (median)", ui.seconds(t.get("eager_median_s")))
    calls = charts.break_even_calls(r)
    m[3].metric(
        "compile pays off after",
        "never" if calls == float("inf") else (f"{calls:,.0f} calls" if calls else "–"),
        help="trace+lower+compile time ÷ (eager − jit) time per call",
    )
    left, right = st.columns(2)
    left.plotly_chart(charts.stage_waterfall(r), width="stretch", key="ti_stages")
    right.plotly_chart(charts.run_distribution(r), width="stretch", key="ti_runs")


def cost_tab(r: dict[str, Any]) -> None:
    cost, mem = r.get("cost") or {}, r.get("memory") or {}
    flops, moved = cost.get("flops"), cost.get("bytes_accessed")
    m = st.columns(4)
    m[0].metric("FLOPs", _si(flops))
    m[1].metric("bytes accessed", _bytes(moved))
    m[2].metric(
        "arithmetic intensity",
        f"{flops / moved:.2f} FLOP/B" if flops and moved else "–",
        help="FLOPs per byte moved: low means memory-bound",
    )
    m[3].metric("transcendentals", _si(cost.get("transcendentals")))
    m = st.columns(4)
    for col, (label, key) in zip(
        m,
        (
            ("arguments", "argument_bytes"),
            ("outputs", "output_bytes"),
            ("temporaries", "temp_bytes"),
            ("generated code", "generated_code_bytes"),
        ),
        strict=True,
    ):
        col.metric(label, _bytes(mem.get(key)))


def export_tab(r: dict[str, Any], index: int) -> None:
    name = r.get("function") or "report"
    c = st.columns(3)
    c[0].download_button(
        "JSON report", ui.report_json(r), f"{name}.json", "application/json", key=f"json_{index}"
    )
    c[1].download_button(
        "HTML report (offline)",
        lambda: html_report(r),
        f"{name}.html",
        "text/html",
        key=f"html_{index}",
        on_click="ignore",
    )
    c[2].markdown("Share: copy this page's URL — it carries the code, function, args and device.")


def _si(value: float | None) -> str:
    if value is None:
        return "–"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.2f} {unit}"
    return f"{value:.0f}"


def _bytes(value: float | None) -> str:
    if value is None:
        return "–"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


def results() -> None:
    history = st.session_state.get("results") or []
    if not history:
        st.info("Pick a sample or paste your code, then press **Analyze**.")
        return
    if len(history) > 1:
        labels = [
            f"#{i + 1} · {h.get('function')}({h.get('args')}) · {h.get('_stamp')}"
            + ("" if h.get("ok") else f" · {(h.get('error') or {}).get('kind', 'error')}")
            for i, h in enumerate(history)
        ]
        st.session_state.shown = st.selectbox(
            "Result",
            range(len(history)),
            index=st.session_state.get("shown", len(history) - 1),
            format_func=lambda i: labels[i],
        )
    index = st.session_state.get("shown", len(history) - 1)
    r = history[index]
    vs_previous(r)
    if r.get("error"):
        ui.error_card(r["error"], r.get("_code"))
    for warning in r.get("warnings") or []:
        st.warning(warning)
    if r.get("stdout"):
        with st.expander("Printed by your code"):
            st.text(r["stdout"])
    if not r.get("jaxpr"):
        return
    # Stateful tabs: only the open one runs, so a big graph is drawn only when asked for.
    render = {
        "Overview": lambda: overview(r),
        "jaxpr": lambda: ir_tab(r, "jaxpr", index),
        "StableHLO": lambda: ir_tab(r, "stablehlo", index),
        "Compiled HLO": lambda: ir_tab(r, "compiled", index),
        "Fusion": lambda: fusion_tab(r, index),
        "Timing": lambda: timing_tab(r),
        "Cost & memory": lambda: cost_tab(r),
        "Export": lambda: export_tab(r, index),
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
clicked, runs = inputs()
if clicked or auto:
    analyze(runs)
st.divider()
results()
