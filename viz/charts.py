"""Plotly figures built from typed results (no jax, no streamlit).

Every figure takes the typed data the worker returned (a `Report`, a lesson's rows,
the cache lab's events) and nothing else, so the app, the HTML export and the tests
draw the same charts.
"""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from viz import units
from viz.cache.events import CacheEvent, CallEvent, RoutedEvent
from viz.cache.planner import BucketPlan
from viz.lessons.verdicts import break_even
from viz.report import Report
from viz.worker.protocol import PassStep, PlacementRow, ScalingRow, ShapeRow

STAGE_COLOURS = {
    "trace": "#4C78A8",
    "lower": "#72B7B2",
    "compile": "#F58518",
    "first call": "#E45756",
    "steady state": "#54A24B",
}
HIT, MISS, AOT = "#54A24B", "#E45756", "#4C78A8"
WATERFALL_AXIS = "milliseconds since jit(f) was called"


def _layout(fig: go.Figure, title: str, height: int = 320) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0, "font": {"size": 15}},
        height=height,
        margin={"l": 10, "r": 10, "t": 44, "b": 10},
        template="plotly_white",
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


def stage_spans(report: Report) -> list[tuple[str, float, float]]:
    """(stage, start s, seconds) from jit(f)'s call to a steady-state call, end to end."""
    t = report.timings
    stages = [
        ("trace", t.trace_s),
        ("lower", t.lower_s),
        ("compile", t.compile_s),
        ("first call", t.first_call_s),
        ("steady state", t.run_median_s),
    ]
    spans, start = [], 0.0
    for name, seconds in stages:
        if seconds is not None:
            spans.append((name, start, seconds))
            start += seconds
    return spans


def stage_waterfall(report: Report) -> go.Figure:
    """trace → lower → compile → first call → steady-state call, end to end."""
    fig = go.Figure()
    end = 0.0
    for name, start, seconds in stage_spans(report):
        fig.add_bar(
            y=[name],
            x=[seconds * 1e3],
            base=[start * 1e3],
            orientation="h",
            marker_color=STAGE_COLOURS[name],
            name=name,
            text=[units.seconds(seconds)],
            textposition="outside",
            cliponaxis=False,
        )
        end = start + seconds
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title=WATERFALL_AXIS, range=[0, end * 1e3 * 1.18])
    return _layout(fig, "Where the time goes", 300).update_layout(showlegend=False)


def run_distribution(report: Report) -> go.Figure:
    """Per-call time of every timed sample, jit and eager side by side."""
    fig = go.Figure()
    run = report.run
    series = (("jit", run.jit, "#4C78A8"), ("eager (no jit)", run.eager, "#BAB0AC")) if run else ()
    for label, stats, colour in series:
        if stats:
            fig.add_box(
                y=[s * 1e3 for s in stats.per_call_s],
                name=label,
                boxpoints="all",
                jitter=0.4,
                marker_color=colour,
            )
    fig.update_yaxes(title="ms per call", type="log")
    return _layout(fig, "Run time per call: jit vs eager")


def op_counts(report: Report, top: int = 15) -> go.Figure:
    """Op histogram before fusion (StableHLO) and after (compiled HLO)."""
    before = report.stablehlo.ops if report.stablehlo else {}
    after = report.compiled.ops if report.compiled else {}
    fig = go.Figure()
    for label, hist, colour in (
        ("StableHLO (before)", before, "#4C78A8"),
        ("compiled (after)", after, "#F58518"),
    ):
        items = sorted(hist.items(), key=lambda kv: -kv[1])[:top]
        fig.add_bar(
            x=[v for _, v in items],
            y=[k.removeprefix("stablehlo.") for k, _ in items],
            orientation="h",
            name=f"{label}: {sum(hist.values())} ops",
            marker_color=colour,
        )
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(barmode="group")
    height = 140 + 22 * min(top, max(len(before), len(after), 1))
    return _layout(fig, "Ops before and after fusion", height)


def count_stages(report: Report) -> list[tuple[str, int]]:
    """jaxpr eqns → StableHLO ops → compiled ops → kernels, those the report has."""
    compiled = report.compiled
    stages = [
        ("jaxpr equations", report.jaxpr.eqn_count if report.jaxpr else None),
        ("StableHLO ops", report.stablehlo.op_count if report.stablehlo else None),
        ("compiled ops", compiled.op_count if compiled else None),
        ("kernels", compiled.kernel_count if compiled else None),
    ]
    return [(k, v) for k, v in stages if v is not None]


def count_chain(report: Report) -> go.Figure:
    """jaxpr eqns → StableHLO ops → compiled ops → kernels, as a funnel."""
    stages = count_stages(report)
    fig = go.Figure(
        go.Funnel(
            y=[k for k, _ in stages],
            x=[v for _, v in stages],
            textinfo="value",
            marker={"color": "#4C78A8"},
        )
    )
    return _layout(fig, "How the op count falls", 260)


def break_even_calls(report: Report) -> float | None:
    """Calls after which compiling paid off: compile cost (trace + lower + compile) over
    the time saved per call; inf when jit saves nothing, None without both run times."""
    jit, eager = report.timings.run_median_s, report.timings.eager_median_s
    if jit is None or eager is None:
        return None
    calls = break_even(report.compile_total_s, eager, jit)
    return math.inf if calls is None else calls


def cache_timeline(events: list[CacheEvent]) -> go.Figure:
    """Calls of the jitted function coloured hit/miss with the compile time of each miss,
    calls routed to a precompiled bucket (they compile nothing), cumulative costs;
    failed calls left out."""
    calls_made = [e for e in events if isinstance(e, CallEvent)]
    routed = [e for e in events if isinstance(e, RoutedEvent)]
    fig = go.Figure()
    fig.add_bar(
        x=[e.call for e in calls_made],
        y=[ms(e.compile_s) for e in calls_made],
        name="compile time (miss)",
        marker_color=[HIT if e.hit else MISS for e in calls_made],
        hovertext=[e.signature for e in calls_made],
    )
    if routed:
        fig.add_scatter(
            x=[e.call for e in routed],
            y=[0.0] * len(routed),
            name="routed to an AOT bucket",
            mode="markers",
            marker={"color": AOT, "size": 10, "symbol": "diamond"},
            hovertext=[f"batch {e.size} → bucket {e.aot_bucket}" for e in routed],
        )
    ran = sorted([*calls_made, *routed], key=lambda e: e.call)
    calls = [e.call for e in ran]
    cum_compile, cum_run, total_c, total_r = [], [], 0.0, 0.0
    for e in ran:
        total_c += e.compile_s if isinstance(e, CallEvent) else 0.0
        total_r += e.run_s
        cum_compile.append(total_c * 1e3)
        cum_run.append(total_r * 1e3)
    fig.add_scatter(
        x=calls,
        y=cum_compile,
        name="cumulative compile",
        mode="lines+markers",
        line={"color": MISS},
    )
    fig.add_scatter(
        x=calls, y=cum_run, name="cumulative run", mode="lines+markers", line={"color": "#9D755D"}
    )
    fig.update_xaxes(title="call #", dtick=1 if len(calls) <= 20 else None)
    fig.update_yaxes(title="ms")
    return _layout(fig, "Calls: green = cache hit, red = miss (recompiled), blue = AOT bucket", 340)


# -- lessons -------------------------------------------------------------------
VARIANT_COLOURS = {"unrolled": "#E45756", "scan": "#4C78A8", "fori_loop": "#72B7B2"}


def placement_chart(rows: list[PlacementRow]) -> go.Figure:
    """Compile, first-call and per-call time of each jit placement, side by side."""
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("one-time: compile and first call", "every call: steady-state time"),
    )
    names = [r.strategy for r in rows]
    bars = (
        ("compile", "compile_s", "compile", 1),
        ("first call", "first_call_s", "first call", 1),
        ("per call", "run_s", "steady state", 2),
    )
    for label, key, colour, col in bars:
        fig.add_bar(
            x=names,
            y=[getattr(r, key) * 1e3 for r in rows],
            name=label,
            marker_color=STAGE_COLOURS[colour],
            row=1,
            col=col,
            text=[f"{r.kernels_per_call} kernels" for r in rows] if col == 2 else None,
            textposition="outside",
        )
    fig.update_yaxes(title="ms", row=1, col=1)
    fig.update_yaxes(title="ms", row=1, col=2)
    return _layout(fig, "Where to put jit", 380)


def scaling_chart(rows: list[ScalingRow], metric: str, title: str, unit: str) -> go.Figure:
    """`metric` (a field of the rows: total_s, run_s, eqns…) against N on log-log axes,
    one line per loop variant."""
    fig = go.Figure()
    for variant, colour in VARIANT_COLOURS.items():
        pts = [r for r in rows if r.variant == variant]
        scale = 1e3 if unit == "ms" else 1
        fig.add_scatter(
            x=[r.n for r in pts],
            y=[getattr(r, metric) * scale for r in pts],
            name=variant,
            mode="lines+markers",
            line={"color": colour},
        )
    fig.update_xaxes(type="log", title="N (loop body repeated N times)")
    fig.update_yaxes(type="log", title=unit)
    return _layout(fig, title, 340)


def shape_sweep_chart(rows: list[ShapeRow]) -> go.Figure:
    """One-time compile cost and per-call run time (jit and eager) per shape."""
    fig = go.Figure()
    sizes = [r.size for r in rows]
    lines = (
        ("trace+lower+compile", "total_s", {"color": STAGE_COLOURS["compile"]}),
        ("run (jit)", "run_s", {"color": STAGE_COLOURS["steady state"]}),
        ("run (eager)", "eager_s", {"color": "#BAB0AC", "dash": "dot"}),
    )
    for name, key, line in lines:
        fig.add_scatter(
            x=sizes,
            y=[getattr(r, key) * 1e3 for r in rows],
            name=name,
            mode="lines+markers",
            line=line,
        )
    fig.update_xaxes(type="log", title="size")
    fig.update_yaxes(type="log", title="ms")
    return _layout(fig, "Compile once, run many: cost per shape", 360)


def bucket_chart(plans: list[BucketPlan]) -> go.Figure:
    """Compilations and padding waste of each bucketing plan."""
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("compilations", "padding waste (% of compute)")
    )
    names = [p.name for p in plans]
    fig.add_bar(
        x=names,
        y=[p.compiles for p in plans],
        marker_color="#4C78A8",
        name="compiles",
        row=1,
        col=1,
    )
    fig.add_bar(
        x=names,
        y=[p.waste_pct for p in plans],
        marker_color="#F58518",
        name="waste %",
        row=1,
        col=2,
    )
    return _layout(fig, "Bucketing plans", 340).update_layout(showlegend=False)


def pass_chart(steps: list[PassStep]) -> go.Figure:
    """Top-level op count (and fusions) after every XLA pass that changed the module."""
    fig = go.Figure()
    x = [s.step for s in steps]
    hover = [f"{s.pipeline} / {s.pass_}" for s in steps]
    fig.add_scatter(
        x=x,
        y=[s.op_count for s in steps],
        name="ops",
        mode="lines+markers",
        line={"shape": "hv", "color": "#4C78A8"},
        hovertext=hover,
    )
    fig.add_scatter(
        x=x,
        y=[s.fusion_count for s in steps],
        name="fusions",
        mode="lines+markers",
        line={"shape": "hv", "color": "#F58518"},
        hovertext=hover,
    )
    fig.update_xaxes(title="XLA pass (only passes that changed the module)")
    fig.update_yaxes(title="count")
    return _layout(fig, "How the op count falls, pass by pass", 340)


# -- recordings ----------------------------------------------------------------
FUNCTION_COLOURS = (
    "#4C78A8", "#F58518", "#E45756", "#72B7B2", "#54A24B",
    "#EECA3B", "#B279A2", "#FF9DA6", "#9D755D", "#BAB0AC",
)  # fmt: skip


def recording_timeline(recording: Any) -> go.Figure:
    """Each compile as a bar over the program's wall time, as long as its compile
    (trace + lower + XLA), one row and one colour per function."""
    fig = go.Figure()
    names = [f.name for f in recording.functions]
    for i, f in enumerate(recording.functions):
        mine = recording.compiles_of(f.key)
        if not mine:
            continue
        fig.add_bar(
            y=[f.name] * len(mine),
            x=[c.total_s for c in mine],
            base=[c.t_s for c in mine],
            orientation="h",
            name=f.name,
            marker_color=FUNCTION_COLOURS[i % len(FUNCTION_COLOURS)],
            customdata=[[c.seq, units.seconds(c.total_s)] for c in mine],
            hovertemplate="#%{customdata[0]} at %{base:.2f} s, %{customdata[1]}<extra>%{y}</extra>",
        )
    wall = recording.program.wall_s or max(
        (c.t_s + c.total_s for c in recording.compiles), default=1
    )
    fig.update_xaxes(title="seconds since the program started", range=[0, wall])
    fig.update_yaxes(categoryorder="array", categoryarray=names[::-1])
    fig.update_layout(barmode="overlay", showlegend=False, bargap=0.35)
    return _layout(fig, "Compiles over the program's run", height=max(180, 44 + 34 * len(names)))


def job_timeline(view: Any) -> go.Figure:
    """A multi-process job (`viz.recorder.job.JobView`) on one clock: a row per process,
    its life as a thin grey bar, each compile as a bar coloured by function, the points
    where the processes parted as diamonds, and an ✕ where a process ended early."""
    fig = go.Figure()
    rows = {p.index: f"process {p.index}" for p in view.processes}
    for p in view.processes:
        fig.add_bar(
            y=[rows[p.index]],
            x=[(p.ended_s if p.ended_s is not None else p.started_s) - p.started_s],
            base=[p.started_s],
            orientation="h",
            width=0.12,
            marker_color="#BAB0AC",
            showlegend=False,
            hovertemplate=f"{rows[p.index]} on {p.host}: {p.ending}<extra></extra>",
        )
    _job_compiles(fig, view, rows)
    _job_marks(fig, view, rows)
    fig.update_xaxes(title="seconds since the job's first process started", rangemode="tozero")
    fig.update_yaxes(categoryorder="array", categoryarray=list(rows.values())[::-1])
    fig = _layout(fig, "Compiles of every process", height=150 + 46 * len(rows))
    legend = {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"}
    fig.update_layout(barmode="overlay", bargap=0.35, legend=legend)
    return fig


def _job_compiles(fig: go.Figure, view: Any, rows: dict[int, str]) -> None:
    """The compiles as bars, one trace (and colour) per function across all processes."""
    bars: dict[str, list[tuple[str, float, float, list[Any]]]] = {}
    for member in view.members:
        for c in member.recording.compiles:
            if not c.eager:
                where = c.call_site.rsplit("/", 1)[-1]
                bars.setdefault(c.function, []).append(
                    (rows[member.index], c.total_s, member.offset_s + c.t_s, [c.seq, where])
                )
    for i, (function, mine) in enumerate(bars.items()):
        fig.add_bar(
            y=[b[0] for b in mine],
            x=[b[1] for b in mine],
            base=[b[2] for b in mine],
            orientation="h",
            width=0.6,
            name=function,
            marker_color=FUNCTION_COLOURS[i % len(FUNCTION_COLOURS)],
            customdata=[[*b[3], units.seconds(b[1])] for b in mine],
            hovertemplate=f"#%{{customdata[0]}} {function} at %{{base:.2f}} s, "
            "%{customdata[2]}, called from %{customdata[1]}<extra>%{y}</extra>",
        )


def _job_marks(fig: go.Figure, view: Any, rows: dict[int, str]) -> None:
    parts = [(site, d) for d in view.divergences for site in d.call_sites if site.t_s is not None]
    if parts:
        fig.add_scatter(
            y=[rows[site.process] for site, _ in parts],
            x=[site.t_s for site, _ in parts],
            mode="markers",
            marker={"symbol": "diamond", "size": 12, "color": "#222222", "line": {"width": 1}},
            name="where the processes parted",
            customdata=[[d.kind, d.function, site.note] for site, d in parts],
            hovertemplate="%{customdata[0]}: %{customdata[1]}<br>%{customdata[2]}"
            "<extra>%{y}</extra>",
        )
    early = [p for p in view.processes if p.ended_early and p.ended_s is not None]
    if early:
        fig.add_scatter(
            y=[rows[p.index] for p in early],
            x=[p.ended_s for p in early],
            mode="markers+text",
            marker={"symbol": "x", "size": 14, "color": "#B00020"},
            text=[p.signal or f"exit {p.exit_code}" for p in early],
            textposition="middle right",
            name="ended early",
            hovertemplate="ended early: %{text}<extra>%{y}</extra>",
        )


def call_tree_chart(nodes: list[Any]) -> go.Figure:
    """The call-site trie as an icicle: each code path sized by the compile time under it."""
    fig = go.Figure(
        go.Icicle(
            ids=[n.id for n in nodes],
            parents=[n.parent for n in nodes],
            labels=[n.label for n in nodes],
            values=[n.seconds for n in nodes],
            branchvalues="total",
            customdata=[[n.compiles, units.seconds(n.seconds)] for n in nodes],
            hovertemplate="%{label}<br>%{customdata[0]} compiles, %{customdata[1]}<extra></extra>",
            texttemplate="%{label}<br>%{customdata[0]} compiles · %{customdata[1]}",
            tiling={"orientation": "v"},
            root={"color": "#f4f4f4"},
        )
    )
    depth = max((n.id.count(" ← ") for n in nodes), default=0) + 1
    return _layout(
        fig,
        "Where compiles came from (call sites, outermost first)",
        height=min(120 + 70 * depth, 640),
    )


def compile_spans_chart(profile: Any, max_depth: int = 6) -> go.Figure:
    """XLA's spans of one compile as an icicle under the compile (`compile_profile.xla`),
    each sized by its seconds. Spans on worker threads run side by side, so a parent's
    children can add up to more than it: they are drawn shrunk to fit (the hover
    gives their real seconds and share of the compile); blank space is time no span
    covers."""
    compile_s = profile.compile_s or sum(s.seconds for s in profile.top_spans) or 1.0
    root = "compile"
    ids, parents, labels, values, data = (
        [root],
        [""],
        ["compile"],
        [compile_s],
        [[units.seconds(compile_s), "100%", 1, units.seconds(None)]],
    )
    heat = [0.0]  # each span's share of the compile: the colour
    below: dict[tuple[str, ...], float] = {}  # seconds of each path's children, summed
    for span in profile.xla:
        key = tuple(span.path[:-1])
        below[key] = below.get(key, 0.0) + span.seconds
    shown = {(): (root, compile_s / max(below.get((), 0.0), compile_s))}
    for span in profile.xla:  # parents come before their children
        parent = shown.get(tuple(span.path[:-1]))
        if parent is None:
            continue
        parent_id, scale = parent
        ident = f"{parent_id}/{span.name}"
        ids.append(ident)
        parents.append(parent_id)
        labels.append(span.name)
        values.append(span.seconds * scale * (1 - 1e-9))
        heat.append(min(span.seconds / compile_s, 1.0))
        data.append(
            [
                units.seconds(span.seconds),
                f"{span.seconds / compile_s:.0%}",
                span.count,
                units.seconds(span.self_seconds),
            ]
        )
        kids = below.get(tuple(span.path), 0.0)
        shown[tuple(span.path)] = (ident, scale * min(1.0, span.seconds / kids) if kids else scale)
    fig = go.Figure(
        go.Icicle(
            ids=ids,
            parents=parents,
            labels=labels,
            values=values,
            branchvalues="total",
            customdata=data,
            hovertemplate="%{label}<br>%{customdata[0]}, %{customdata[1]} of the compile"
            "<br>%{customdata[2]} span(s), %{customdata[3]} in none of its children"
            "<extra></extra>",
            texttemplate="%{label}<br>%{customdata[0]} · %{customdata[1]}",
            tiling={"orientation": "v"},
            maxdepth=max_depth,
            marker={"colors": heat, "colorscale": "YlOrRd", "cmin": 0.0, "cmax": 1.0},
        )
    )
    title = "XLA's compile, span by span: colour = share of the compile (click a box to zoom)"
    return _layout(fig, title, height=520)
