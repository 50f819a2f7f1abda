"""Streamlit pieces shared by the pages: the worker pool, the current program,
the sidebar, error cards and graph panels. Layout only: numbers and graphs come
from `viz` as plain data; nothing here imports jax.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import streamlit as st

from viz import graph as views
from viz.charts import fmt_seconds
from viz.ir.model import Graph
from viz.samples import default_sample, get_sample, list_samples
from viz.source import list_functions
from viz.worker import WorkerPool, available_devices

IR_TITLES = {"jaxpr": "jaxpr", "stablehlo": "StableHLO", "compiled": "Compiled HLO"}


def leave_legacy_pages(*, in_app: bool = False) -> None:
    """Send this run through app.py's `st.navigation`; app.py and every page call it first.

    With a `pages/` folder beside app.py, Streamlit starts with the class-wide flag
    `PagesManager.uses_pages_directory` set (not public API; tests/test_app.py checks the
    pinned version still has it). While it is set, a run lists pages/ by file name and
    runs the page without app.py: what a deep link shows as the first request after a
    start. Clearing the flag and rerunning lands on the same page (the page hash is its
    URL path) through app.py. In a page, a registry that holds app.py itself is a legacy
    run of another session that started before the flag was cleared (in app.py the
    registry is still the previous run's, so app.py reads only the flag)."""
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    legacy = bool(PagesManager.uses_pages_directory)
    ctx = get_script_run_ctx()
    if not in_app and ctx is not None:
        main = ctx.pages_manager.main_script_path
        legacy |= any(p.get("script_path") == main for p in ctx.pages_manager.get_pages().values())
    if legacy:
        PagesManager.uses_pages_directory = False
        st.rerun()


@st.cache_resource
def pool() -> WorkerPool:
    """One worker per device for the whole server, shared by every session."""
    workers = WorkerPool()
    workers.warm("cpu")  # the first Analyze should not wait for JAX to import
    return workers


def owner() -> str:
    """This browser session's id: the worker keeps a cache session per owner."""
    if "owner" not in st.session_state:
        st.session_state.owner = uuid.uuid4().hex
    return st.session_state.owner


def device() -> str:
    return st.session_state.get("device", "cpu")


def request(op: str, **kwargs: Any) -> dict[str, Any]:
    """Send a request to the current device's worker; errors come back as data."""
    return pool().get(device()).request(op, **kwargs)


# -- the current program (shared by every page) --------------------------------
def program() -> dict[str, Any]:
    """code, function, args, static, sample: kept outside widget keys so that page
    switches (which drop widget state) lose nothing."""
    if "program" not in st.session_state:
        st.session_state.program = program_from_sample(default_sample().name)
    return st.session_state.program


def program_from_sample(name: str) -> dict[str, Any]:
    sample = get_sample(name)
    return {
        "sample": sample.name,
        "code": sample.code,
        "function": sample.function,
        "args": sample.args,
        "static": list(sample.static),
        "extra": dict(sample.extra),
    }


def spec_rows(code: str, function: str, args: str) -> list[tuple[str, str]]:
    """(parameter, spec item) for each parameter of `function` in `code`."""
    from viz.spec import split_spec  # numpy and ml_dtypes: after app.py has started the worker

    info = next((f for f in list_functions(code) if f.name == function), None)
    items = split_spec(args)
    params = list(info.params) if info else [f"arg{i}" for i in range(len(items))]
    params += [f"arg{i}" for i in range(len(params), len(items))]
    return [(p, items[i] if i < len(items) else "") for i, p in enumerate(params)]


def join_spec(items: list[str]) -> str:
    """Rows back into one spec; trailing empty rows are parameters left at their default."""
    while items and not items[-1].strip():
        items = items[:-1]
    return ", ".join(item.strip() for item in items)


# -- sidebar -------------------------------------------------------------------
def device_picker() -> None:
    devices = available_devices()
    if "device" not in st.session_state and st.query_params.get("device") in devices:
        st.session_state.device = st.query_params["device"]  # a shared link's device
    with st.sidebar:
        st.selectbox(
            "Device",
            devices,
            key="device",
            help="cpu:8 simulates 8 devices (XLA_FLAGS in the worker) for sharding",
        )


def worker_status() -> None:
    """Drawn after the page ran, so it shows the worker as the page left it."""
    with st.sidebar:
        status = pool().get(device()).status()
        memory = f"{status.rss_bytes / 2**20:.0f} MiB" if status.rss_bytes else "not started"
        state = "alive" if status.alive else "idle"
        st.caption(
            f"Worker {state} · {memory} of {status.memory_limit_bytes / 2**30:.0f} GiB · "
            f"{status.requests} requests · {status.restarts} restarts"
        )
        if st.button("Restart worker", help="kill the worker process; its jit caches go too"):
            pool().get(device()).restart()
            st.rerun()


def samples_by_title() -> dict[str, str]:
    return {s.title: s.name for s in list_samples()}


# -- results -------------------------------------------------------------------
def error_card(error: dict[str, Any], code: str | None = None) -> None:
    where = f" · line {error['line']}" if error.get("line") else ""
    st.error(
        f"**{error['kind'].replace('_', ' ')}**{where}  \n{error['message']}",
        icon=":material/error:",
    )
    if error.get("hint"):
        st.info(f"**Fix:** {error['hint']}", icon=":material/lightbulb:")
    if code and error.get("line"):
        st.code(excerpt(code, error["line"]), language="python")
    if error.get("detail"):
        with st.expander("Full message"):
            st.text(error["detail"])


def excerpt(code: str, line: int, context: int = 3) -> str:
    """The lines around `line`, the offending one marked with an arrow."""
    lines = code.splitlines()
    start, stop = max(line - 1 - context, 0), min(line + context, len(lines))
    width = len(str(stop))
    return "\n".join(
        f"{'→' if i + 1 == line else ' '} {i + 1:>{width}} | {lines[i]}" for i in range(start, stop)
    )


def seconds(value: float | None) -> str:
    return "–" if value is None else fmt_seconds(value)


def graph_panel(ir: str, model: dict[str, Any], key: str, title: str = "") -> None:
    """A graph with find, expand/collapse, neighbourhood and DOT/SVG export."""
    graph = Graph.from_dict(model)
    view = views.default_view(graph)
    groups = sorted(graph.groups, key=lambda p: (len(p), p))
    labels = {"/".join(p): p for p in groups}
    c1, c2, c3 = st.columns([2, 2, 1])
    query = c1.text_input(
        "Find", key=f"{key}_find", placeholder="op (dot), shape (f32[8,128]) or line (:12)"
    )
    opened = c2.multiselect(
        "Expand groups", list(labels), key=f"{key}_open", placeholder=f"{len(groups)} groups"
    )
    depth = c3.number_input(
        "Expand depth", 0, 12, value=None, key=f"{key}_depth", placeholder="auto"
    )
    if depth is not None:
        view = views.expand_to_depth(graph, int(depth))
    for name in opened:
        view = views.expand(view, labels[name])
    if query:
        found = views.find(graph, query)
        st.caption(f"{len(found)} matches for “{query}”")
        if found:
            view = views.neighbourhood(graph, found[0], radius=2)
            view.highlight = frozenset(found)
    focus = st.session_state.get(f"{key}_focus")
    if focus in graph.node_map():
        view = views.neighbourhood(graph, focus, radius=2)
        if st.button(
            f"Show the whole graph (now: the neighbourhood of {focus})", key=f"{key}_unfocus"
        ):
            del st.session_state[f"{key}_focus"]
            st.rerun()
    visible, _ = views.visible(view)
    if len(visible) > views.MAX_NODES:  # laying out thousands of boxes takes dot minutes
        st.warning(
            f"That view has {len(visible)} nodes; jitscope draws at most {views.MAX_NODES}. "
            "Expand fewer groups, or use Find to focus on a neighbourhood."
        )
        view = views.default_view(graph)
        visible, _ = views.visible(view)
    dot = views.to_dot(view, title)
    st.caption(
        f"Showing {len(visible)} of {len(graph.nodes)} nodes · expand a group above, "
        "or search to focus on a neighbourhood"
    )
    show_graph(dot, len(visible))
    node_details(graph, visible, key)
    d1, d2, _ = st.columns([1, 1, 4])
    d1.download_button("DOT", dot, f"{ir}.dot", "text/vnd.graphviz", key=f"{key}_dot")
    # rendered only when clicked: dot can take seconds on a large view
    d2.download_button(
        "SVG",
        lambda: views.to_svg(dot),
        f"{ir}.svg",
        "image/svg+xml",
        key=f"{key}_svg",
        on_click="ignore",
    )


def fusion_compare(before: dict[str, Any], after: dict[str, Any], key: str) -> None:
    """One name-scope region before fusion (StableHLO) and after (compiled HLO)."""
    graphs = Graph.from_dict(before), Graph.from_dict(after)
    common = [r for r in views.regions(graphs[0]) if r in set(views.regions(graphs[1]))]
    st.markdown("**Before and after fusion** · the same region of your program in both IRs")
    if not common:
        st.caption(
            "No name scope appears in both IRs: wrap parts of your function in "
            "`jax.named_scope('…')` to compare them here."
        )
        return
    region = st.selectbox("Region (name scope)", common, key=f"{key}_region")
    columns = st.columns(2)
    for column, graph, title in zip(
        columns, graphs, ("before fusion: StableHLO", "after fusion: compiled HLO"), strict=True
    ):
        view = views.region_view(graph, region)
        shown, _ = views.visible(view)
        column.caption(f"{title} · {len(shown)} nodes")
        with column:
            show_graph(views.to_dot(view, f"{region} · {title}"), len(shown), height=560)


PAN_ZOOM = Path(__file__).resolve().parent / "assets" / "pan_zoom.html"


def show_graph(dot: str, nodes: int, height: int = 680) -> None:
    """The graph as SVG (Graphviz's `dot`, or pip's graphviz-pure: viz.render) in a
    pan-and-zoom frame: wheel zooms, drag pans, double-click fits. Without either,
    Streamlit's own chart."""
    try:
        svg = views.to_svg(dot)
    except RuntimeError:
        st.graphviz_chart(dot, width="stretch" if nodes > 24 else "content")
        return
    svg = svg[svg.index("<svg") :]  # drop the XML prologue and doctype
    # the SVG is Graphviz's output (labels XML-escaped), never raw user HTML
    st.iframe(PAN_ZOOM.read_text().replace("__SVG__", svg), height=height)


def node_details(graph: Graph, visible: list[Any], key: str) -> None:
    """Op, types, attributes and source line of one node of the current view."""
    items = {
        f"{v.label.splitlines()[0]} · {v.type or v.kind}"
        + (f" · line {v.source.line}" if v.source else ""): v
        for v in visible
    }
    choice = st.selectbox(
        "Node details",
        list(items),
        index=None,
        key=f"{key}_node",
        placeholder=f"pick one of the {len(items)} shown nodes or groups",
    )
    if choice is None:
        return
    item = items[choice]
    node = graph.node_map().get(item.id)
    rows = {
        "op": item.op or item.kind,
        "type": item.type or "–",
        "group": "/".join(item.path) or "(top level)",
    }
    if item.kind == "group":
        rows["ops inside"] = ", ".join(f"{op} ×{n}" for op, n in item.top_ops) or "–"
    if node is not None:
        rows.update({k: str(v) for k, v in node.attrs.items()})
    source = item.source or (node.source if node else None)
    if source:
        rows["source"] = str(source)
    st.dataframe(
        [{"field": k, "value": v} for k, v in rows.items()], hide_index=True, width="stretch"
    )
    if node is not None and st.button("Show its neighbourhood", key=f"{key}_hood"):
        st.session_state[f"{key}_focus"] = node.id  # read before drawing, on the rerun
        st.rerun()


def report_json(report: dict[str, Any]) -> str:
    public = {k: v for k, v in report.items() if k not in ("graph_models", "stdout")}
    return json.dumps(public, indent=2, default=str)


def stamp() -> str:
    return time.strftime("%H:%M:%S")


# -- lessons: heavy jobs with a progress bar and a cancel button -----------------
def lesson_worker() -> Any:
    return pool().get(device(), role="lessons")


def run_lesson(op: str, label: str, **kwargs: Any) -> dict[str, Any]:
    """Run a lesson measurement in the lessons worker, showing progress; Cancel (rendered
    by `lesson_controls`) kills that worker."""
    bar = st.progress(0.0, f"{label}…")

    def show(p: dict[str, Any]) -> None:
        bar.progress(
            p["done"] / max(p["total"], 1), f"{p.get('label', '')} ({p['done']}/{p['total']})"
        )

    result = lesson_worker().request(op, on_progress=show, **kwargs)
    bar.empty()
    return result


def lesson_controls(run_label: str) -> bool:
    """A Run button and a Cancel button; returns True when Run was pressed."""
    c1, c2, _ = st.columns([1, 1, 4])
    run = c1.button(run_label, type="primary", width="stretch")
    if c2.button(
        "Cancel", width="stretch", help="stop the measurement (restarts the lessons worker)"
    ):
        lesson_worker().cancel()
        st.toast("Cancelled")
    return run


def show_lesson_error(result: dict[str, Any]) -> bool:
    """Render an error result; True when there was one."""
    if result.get("ok", True):
        return False
    error_card(result["error"], program()["code"])
    return True


def functions_of(code: str) -> list[str]:
    return [f.name for f in list_functions(code)]
