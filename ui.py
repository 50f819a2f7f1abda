"""Streamlit pieces shared by the pages: the worker pool, the current program,
the sidebar, error cards and graph panels. Layout only: numbers and graphs come
from `viz` as plain data; nothing here imports jax.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import streamlit as st

import viz.graph
from viz import demo
from viz.charts import fmt_seconds
from viz.ir.model import Graph
from viz.samples import default_sample, get_sample, list_samples
from viz.source import list_functions
from viz.worker import Worker, WorkerPool, available_devices

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
    """The server's worker pool (JITSCOPE_WORKERS per device), built once and shared
    by every session; each session is pinned to one of its workers."""
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


def worker(role: str = "main") -> Worker:
    """This session's worker for the current device (sessions are pinned to one)."""
    return pool().worker_for(owner(), device(), role)


def request(op: str, role: str = "main", on_progress: Any = None, **kwargs: Any) -> dict[str, Any]:
    """Send a request to this session's worker; errors come back as data. While it
    waits behind other sessions' requests, the page says its place in the queue. In
    demo mode the request names its sample: the worker reads the code from there."""
    if demo.enabled() and op != "ping":
        kwargs["sample"] = program().get("sample")
    st.session_state.pop("worker_notice", None)
    target = worker(role)
    waiting = st.empty()

    def queued(ahead: int) -> None:
        if ahead:
            waiting.info(
                f"Waiting for the worker: {ahead} request{'s' if ahead > 1 else ''} "
                "ahead of yours…",
                icon=":material/hourglass_top:",
            )
        else:
            waiting.empty()

    result = target.request(op, on_progress=on_progress, on_queue=queued, client=owner(), **kwargs)
    waiting.empty()
    seen()[f"{device()}#{role}"] = target.generation  # its own failures show as errors
    return result


def seen() -> dict[str, int]:
    """The generation of each of this session's workers when it last used it."""
    return st.session_state.setdefault("worker_seen", {})


# -- the current program (shared by every page) --------------------------------
def program() -> dict[str, Any]:
    """code, function, args, static, sample: kept outside widget keys so that page
    switches (which drop widget state) lose nothing."""
    if "program" not in st.session_state:
        st.session_state.program = program_from_sample(default_sample().name)
    prog = st.session_state.program
    if demo.enabled():  # whatever the session state says, the code is the sample's
        names = {s.name for s in list_samples()}
        if prog.get("sample") not in names:
            prog.update(program_from_sample(default_sample().name))
        prog["code"] = get_sample(prog["sample"]).code
    return prog


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
        status = worker().status()
        memory = f"{status.rss_bytes / 2**20:.0f} MiB" if status.rss_bytes else "not started"
        state = "alive" if status.alive else "idle"
        queue = f" · {status.queued} waiting" if status.queued else ""
        st.caption(
            f"Worker {pool().slot(owner()) + 1} of {pool().size} · {state} · {memory} · "
            f"pool budget {status.memory_limit_bytes / 2**30:.0f} GiB · "
            f"{status.requests} requests · {status.restarts} restarts{queue}"
        )
        if st.button(
            "Restart worker",
            help="kill your worker process; its jit caches go too (sessions sharing it are told)",
        ):
            worker().restart(reason="a session sharing it pressed Restart worker")
            seen()[f"{device()}#main"] = worker().generation
            st.rerun()


def restarted_elsewhere() -> None:
    """Tell this session when one of its workers was replaced by someone else's
    request (a restart, timeout or crash): its jit caches and cache-lab state are gone.
    Runs before the page, so the page never shows a table from the old worker."""
    for role in ("main", "lessons"):
        key, target = f"{device()}#{role}", worker(role)
        if key in seen() and seen()[key] != target.generation:
            seen()[key] = target.generation
            st.session_state.worker_notice = (
                f"Your {'lessons ' if role == 'lessons' else ''}worker was replaced "
                f"({target.reason}): its jit caches and your cache-lab table are gone."
            )
            for name in [k for k in st.session_state if re.fullmatch(r"cache_-?\d+", k)]:
                del st.session_state[name]  # the cache lab's tables of that worker
    if st.session_state.get("worker_notice"):
        st.sidebar.warning(st.session_state.worker_notice, icon=":material/restart_alt:")


def safety_notes() -> None:
    """The demo-mode banner, or a plain warning when anyone on the network can run code."""
    if demo.enabled():
        st.info(
            "**Demo mode** · only the built-in samples run, loaded from their files; "
            "arguments take the spec language and the sample's own names; sizes are bounded.",
            icon=":material/co_present:",
        )
        return
    address = st.get_option("server.address")
    if demo.exposed(address):
        where = f"address {address}" if address else "every network interface"
        st.sidebar.error(
            f"**This server listens on {where}, port {st.get_option('server.port')}.** "
            "Anyone who can reach this port can run code on this machine. Serve on "
            "127.0.0.1 (the default in .streamlit/config.toml), or set JITSCOPE_DEMO=1.",
            icon=":material/warning:",
        )


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


def graph_of(model: dict[str, Any]) -> Graph:
    """The Graph of a model dict kept in this session's results, rebuilt once: the same
    Graph object across reruns, so `viz.graph`'s index of it is reused."""
    built = st.session_state.setdefault("_graphs", {})
    hit = built.get(id(model))
    if hit is None or hit[0] is not model:
        if len(built) >= 8:
            built.clear()
        hit = built[id(model)] = (model, Graph.from_dict(model))
    return hit[1]


def graph_panel(ir: str, model: dict[str, Any], key: str, title: str = "") -> None:
    """A graph with find, expand/collapse, neighbourhood and DOT/SVG export."""
    graph = graph_of(model)
    view = viz.graph.default_view(graph)
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
        view = viz.graph.expand_to_depth(graph, int(depth))
    for name in opened:
        view = viz.graph.expand(view, labels[name])
    if query:
        found = viz.graph.find(graph, query)
        st.caption(f"{len(found)} matches for “{query}”")
        if found:
            view = viz.graph.neighbourhood(graph, found[0], radius=2)
            view.highlight = frozenset(found)
    focus = st.session_state.get(f"{key}_focus")
    if focus in graph.node_map():
        view = viz.graph.neighbourhood(graph, focus, radius=2)
        if st.button(
            f"Show the whole graph (now: the neighbourhood of {focus})", key=f"{key}_unfocus"
        ):
            del st.session_state[f"{key}_focus"]
            st.rerun()
    visible, _ = viz.graph.visible(view)
    if len(visible) > viz.graph.MAX_NODES:  # laying out thousands of boxes takes dot minutes
        st.warning(
            f"That view has {len(visible)} nodes; jitscope draws at most {viz.graph.MAX_NODES}. "
            "Expand fewer groups, or use Find to focus on a neighbourhood."
        )
        view = viz.graph.default_view(graph)
        visible, _ = viz.graph.visible(view)
    dot = viz.graph.to_dot(view, title)
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
        lambda: viz.graph.to_svg(dot),
        f"{ir}.svg",
        "image/svg+xml",
        key=f"{key}_svg",
        on_click="ignore",
    )


def fusion_compare(before: dict[str, Any], after: dict[str, Any], key: str) -> None:
    """One name-scope region before fusion (StableHLO) and after (compiled HLO)."""
    graphs = graph_of(before), graph_of(after)
    common = [r for r in viz.graph.regions(graphs[0]) if r in set(viz.graph.regions(graphs[1]))]
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
        view = viz.graph.region_view(graph, region)
        shown, _ = viz.graph.visible(view)
        column.caption(f"{title} · {len(shown)} nodes")
        with column:
            show_graph(viz.graph.to_dot(view, f"{region} · {title}"), len(shown), height=560)


PAN_ZOOM = Path(__file__).resolve().parent / "assets" / "pan_zoom.html"


def show_graph(dot: str, nodes: int, height: int = 680) -> None:
    """The graph as SVG (Graphviz's `dot`, or pip's graphviz-pure: viz.graph.render) in a
    pan-and-zoom frame: wheel zooms, drag pans, double-click fits. Without either,
    Streamlit's own chart."""
    try:
        svg = viz.graph.to_svg(dot)
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


def open_diff(a: int | dict[str, Any], b: int | dict[str, Any]) -> None:
    """Show the diff view of A → B: two history run ids, or two report dicts (e.g. a
    quick variant and its original). Switches page; does not return."""
    st.session_state.diff_pair = (a, b)
    st.switch_page("pages/diff.py")


# -- lessons: heavy jobs with a progress bar and a cancel button -----------------
def lesson_worker() -> Worker:
    return worker("lessons")


def run_lesson(op: str, label: str, **kwargs: Any) -> dict[str, Any]:
    """Run a lesson measurement in the lessons worker, showing progress; Cancel (rendered
    by `lesson_controls`) kills that worker."""
    bar = st.progress(0.0, f"{label}…")

    def show(p: dict[str, Any]) -> None:
        bar.progress(
            p["done"] / max(p["total"], 1), f"{p.get('label', '')} ({p['done']}/{p['total']})"
        )

    result = request(op, role="lessons", on_progress=show, **kwargs)
    bar.empty()
    return result


def lesson_controls(run_label: str) -> bool:
    """A Run button and a Cancel button; returns True when Run was pressed."""
    c1, c2, _ = st.columns([1, 1, 4])
    run = c1.button(run_label, type="primary", width="stretch")
    if c2.button(
        "Cancel", width="stretch", help="stop your measurement (restarts your lessons worker)"
    ):
        lesson_worker().cancel(owner())
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
