"""Plotly figures built from typed results (no jax, no streamlit).

Every figure takes the typed data the worker returned (a `Report`, a lesson's rows,
the cache lab's events) and nothing else, so the app, the HTML export and the tests
draw the same charts. A recording's charts are `viz.recorder.display.charts`; the
Overview's two charts in Vega-Lite are `viz.vega`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import plotly.graph_objects as go

from viz import units
from viz.cache.events import CacheEvent, CallEvent, RoutedEvent
from viz.cache.planner import BucketPlan
from viz.compile_profile.model import CompileProfileSection
from viz.fusion.roofline import Roofline, attainable, drawn
from viz.lessons.verdicts import break_even
from viz.report import Report
from viz.timing import MIN_EAGER_SAMPLES
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


def layout(fig: go.Figure, title: str, height: int = 320) -> go.Figure:
    """`fig` titled and sized in the house style (every chart here and in
    `viz.recorder.display.charts`)."""
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


def ms_label(value: float) -> str:
    """A value in milliseconds as the project writes times: 500 µs, 2.0 ms, 1.00 s."""
    return units.seconds(value / 1e3)


AxisLabel = tuple[str, Callable[[float], str]]  # a log axis's title and its ticks' format
LOG_DECADES_WITH_2_AND_5 = 3  # past this many decades, ticks at each decade alone
# within one decade, finer steps: 1, 2 and 5 leave a single tick between 120 and 300 ms
ONE_DECADE_STEPS = (1, 1.5, 2, 3, 4, 5, 6, 8)


def log_ticks(values: list[float]) -> list[float]:
    """1, 2 and 5 of each decade the positive `values` span (each decade alone over a
    wide span, finer steps within one): a log axis's ticks (Plotly leaves out those
    outside the drawn range)."""
    shown = [v for v in values if v is not None and v > 0]
    if not shown:
        return []
    low = math.floor(math.log10(min(shown)))
    high = math.ceil(math.log10(max(shown)))
    steps: tuple[float, ...] = (1, 2, 5) if high - low <= LOG_DECADES_WITH_2_AND_5 else (1,)
    if high - low <= 1:
        steps = ONE_DECADE_STEPS
    return [float(f"{step}e{decade}") for decade in range(low, high + 1) for step in steps]


def tick_text(text: str) -> str:
    """A tick's label without the zero decimals of a round value: "1 ms", not "1.0 ms"."""
    return re.sub(r"\.0+(?=\D|$)", "", text)


def log_axes(fig: go.Figure, x: AxisLabel | None = None, y: AxisLabel | None = None) -> go.Figure:
    """`fig`'s x and/or y axes made log scale, said so in their titles, with full values
    at their ticks (Plotly's own log ticks read "4 5 … 9 1 2", 0.4 and 4 alike)."""
    for axis, spec, update in (("x", x, fig.update_xaxes), ("y", y, fig.update_yaxes)):
        if spec is None:
            continue
        title, label = spec
        ticks = log_ticks([v for t in fig.data for v in (getattr(t, axis, None) or ())])
        update(
            type="log",
            title=f"{title} (log scale)",
            tickvals=ticks,
            ticktext=[tick_text(label(t)) for t in ticks],
        )
    return fig


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
    return layout(fig, "Where the time goes", 300).update_layout(showlegend=False)


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
    log_axes(fig, y=("time per call", ms_label))
    return layout(fig, "Run time per call: jit vs eager")


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
    return layout(fig, "Ops before and after fusion", height)


def count_stages(report: Report) -> list[tuple[str, int]]:
    """jaxpr eqns → StableHLO ops → compiled kernels, those the report has: each named as
    the Overview's counts name it (one fact, one name). The compiled HLO's instruction
    count sits between the last two, a near-synonym of the kernels (the kernels and a
    few bitcasts and tuples): left out here, the Compiled HLO tab has it."""
    compiled = report.compiled
    stages = [
        ("jaxpr equations", report.jaxpr.eqn_count if report.jaxpr else None),
        ("StableHLO ops", report.stablehlo.op_count if report.stablehlo else None),
        ("compiled kernels", compiled.kernel_count if compiled else None),
    ]
    return [(k, v) for k, v in stages if v is not None]


def count_chain(report: Report) -> go.Figure:
    """jaxpr eqns → StableHLO ops → compiled kernels, as a funnel."""
    stages = count_stages(report)
    fig = go.Figure(
        go.Funnel(
            y=[k for k, _ in stages],
            x=[v for _, v in stages],
            textinfo="value",
            marker={"color": "#4C78A8"},
        )
    )
    return layout(fig, "How the op count falls", 260)


MEMORY_KINDS = (  # stacked bottom up: what lives longest first
    ("parameter", "arguments", "#4C78A8"),
    ("constant", "constants", "#B279A2"),
    ("output", "outputs", "#54A24B"),
    ("temporary", "temporaries", "#F58518"),
)


def memory_timeline(report: Report) -> go.Figure:
    """The bytes live at each step of the program XLA scheduled, stacked by kind, the
    peak marked; where arguments were donated, where their buffers stop counting."""
    from viz.memory.display import where_text

    memory = report.memory
    points = memory.timeline if memory else []
    fig = go.Figure()
    x = [p.position for p in points]
    names = [p.instruction or "(the outputs handed back)" for p in points]
    for kind, label, colour in MEMORY_KINDS:
        ys = [getattr(p, kind) / 2**20 for p in points]
        if not any(ys):
            continue
        fig.add_scatter(
            x=x,
            y=ys,
            name=label,
            stackgroup="live",
            mode="lines",
            line={"width": 0.5, "color": colour, "shape": "hv"},  # bytes change at a step
            customdata=names,
            hovertemplate=f"{label} %{{y:.1f}} MiB<br>step %{{x}}: %{{customdata}}<extra></extra>",
        )
    if memory and memory.peak_at is not None and memory.peak_bytes is not None:
        at = memory.peak_at
        line = where_text(at.where)
        fig.add_vline(x=at.position, line={"color": "#E45756", "dash": "dot"})
        # beside the peak's line, never on it: on the side with more room
        right = at.position <= (points[-1].position if points else at.position) / 2
        fig.add_annotation(
            x=at.position,
            y=memory.peak_bytes / 2**20,
            text=f"peak {units.nbytes(memory.peak_bytes)} at {at.instruction}"
            + (f" ({line})" if line else ""),
            showarrow=True,
            arrowcolor="#E45756",
            ax=36 if right else -36,
            ay=-22,
            xanchor="left" if right else "right",
        )
    freed = _donation_frees(report)
    if freed is not None:
        position, nbytes = freed
        fig.add_annotation(
            x=position,
            y=0,
            yanchor="bottom",
            text=f"donated arguments: {units.nbytes(nbytes)} reused from here",
            showarrow=True,
            ax=0,
            ay=-50,
        )
    fig.update_xaxes(title="step of the schedule (program order)")
    fig.update_yaxes(title="MiB live", rangemode="tozero")
    return layout(fig, "Memory over program order", 360)


def _donation_frees(report: Report) -> tuple[int, int] | None:
    """(the step after which the donated arguments' buffers are outputs' or free, the
    bytes they held) for a report with donation; None without."""
    memory = report.memory
    if not report.donate or memory is None or not memory.timeline:
        return None
    start = memory.timeline[0].parameter
    for point in memory.timeline:
        if point.parameter < start:
            return point.position, start - point.parameter
    return None


def samples(report: Report) -> tuple[int, int]:
    """How many timed samples the jit and the eager medians rest on (0: not timed)."""
    run = report.run
    jit, eager = (run.jit, run.eager) if run else (None, None)
    return (jit.samples if jit else 0, eager.samples if eager else 0)


def break_even_calls(report: Report) -> float | None:
    """Calls after which compiling paid off: compile cost (trace + lower + compile) over
    the time saved per call; inf when jit saves nothing, None without both run times
    or with fewer than MIN_EAGER_SAMPLES eager samples."""
    jit, eager = report.timings.run_median_s, report.timings.eager_median_s
    if jit is None or eager is None or samples(report)[1] < MIN_EAGER_SAMPLES:
        return None
    calls = break_even(report.compile_total_s, eager, jit)
    return math.inf if calls is None else calls


def pays_off_after(report: Report) -> str:
    """The Timing tab's verdict: "74 calls", "never", "too few eager samples to tell",
    or MISSING without an eager time."""
    calls = break_even_calls(report)
    if calls is not None:
        return "never" if calls == math.inf else f"{calls:,.0f} calls"
    if report.timings.eager_median_s is not None and report.timings.run_median_s is not None:
        return "too few eager samples to tell"
    return units.MISSING


def cache_timeline(events: list[CacheEvent]) -> go.Figure:
    """Each call of the jitted function: a miss as a bar of its compile time, a hit as a
    marker at its run time (it compiled nothing), a call routed to a precompiled bucket
    as a diamond at its run time; the cumulative compile and run time. Failed calls are
    left out. The legend lists only what is drawn; the x axis spans the calls made."""
    calls_made = [e for e in events if isinstance(e, CallEvent)]
    hits = [e for e in calls_made if e.hit]
    misses = [e for e in calls_made if not e.hit]
    routed = [e for e in events if isinstance(e, RoutedEvent)]
    fig = go.Figure()
    if misses:
        fig.add_bar(
            x=[e.call for e in misses],
            y=[ms(e.compile_s) for e in misses],
            name="miss: compile time",
            marker_color=MISS,
            width=0.6,  # in calls: two misses far apart would each spread over the calls between
            hovertext=[e.signature for e in misses],
        )
    if hits:
        fig.add_scatter(
            x=[e.call for e in hits],
            y=[ms(e.run_s) for e in hits],
            name="hit: run time",
            mode="markers",
            marker={"color": HIT, "size": 11, "line": {"color": "white", "width": 1}},
            hovertext=[e.signature for e in hits],
        )
    if routed:
        fig.add_scatter(
            x=[e.call for e in routed],
            y=[ms(e.run_s) for e in routed],
            name="AOT bucket: run time",
            mode="markers",
            marker={"color": AOT, "size": 11, "symbol": "diamond"},
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
        mode="lines",
        line={"color": MISS, "dash": "dot"},
    )
    fig.add_scatter(
        x=calls, y=cum_run, name="cumulative run", mode="lines", line={"color": "#9D755D"}
    )
    fig.update_xaxes(
        title="call #",
        dtick=1 if len(calls) <= 20 else None,
        # the calls made, from the first: no call 0 (the axis would start there for a bar)
        range=[min(calls) - 0.5, max(calls) + 0.5] if calls else None,
    )
    fig.update_yaxes(title="ms")
    return layout(fig, "Calls: a miss compiles, a hit only runs", 340)


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
    return layout(fig, "Where to put jit", 380)


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
    y_label = ms_label if unit == "ms" else units.count
    log_axes(fig, ("N (loop body repeated N times)", units.count), (unit, y_label))
    return layout(fig, title, 340)


def shape_sweep_chart(rows: list[ShapeRow]) -> go.Figure:
    """One-time compile cost and per-call run time (jit and eager) per shape."""
    fig = go.Figure()
    sizes = [r.size for r in rows]
    lines = (
        ("trace → compile", "total_s", {"color": STAGE_COLOURS["compile"]}),
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
    log_axes(fig, ("size", units.count), ("time", ms_label))
    return layout(fig, "Compile once, run many: cost per shape", 360)


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
    return layout(fig, "Bucketing plans", 340).update_layout(showlegend=False)


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
    return layout(fig, "How the op count falls, pass by pass", 340)


def compile_spans_chart(profile: CompileProfileSection, max_depth: int = 6) -> go.Figure:
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
    return layout(fig, title, height=520)


BOUND_COLOURS = {"memory": "#4C78A8", "compute": "#E45756", "": "#888888"}


def roofline_chart(line: Roofline) -> go.Figure:
    """Each kernel's achieved FLOP/s against its arithmetic intensity (log-log), under
    the chip's roof: its bandwidth slope up to the ridge point, then its compute peak."""
    fig = go.Figure()
    points = [p for p in line.points if drawn(p)]
    intensities = [p.intensity for p in points if p.intensity is not None]
    peaks = line.peaks
    if peaks is not None:
        xs = [min([peaks.ridge / 100, *intensities]), peaks.ridge]
        xs.append(max([peaks.ridge * 10, *intensities]))
        fig.add_scatter(
            x=xs,
            y=[attainable(x, peaks) for x in xs],
            name=f"{peaks.chip} roof",
            mode="lines",
            line={"color": "#333333", "width": 2},
            hovertemplate="%{x:.3g} FLOP/B: at most %{y:.3s}FLOP/s<extra></extra>",
        )
    for bound in dict.fromkeys(p.bound for p in points):
        mine = [p for p in points if p.bound == bound]
        fig.add_scatter(
            x=[p.intensity for p in mine],
            y=[p.flops_per_s for p in mine],
            name=f"{bound}-bound" if bound else "kernels",
            mode="markers",
            marker={"color": BOUND_COLOURS[bound], "size": 9},
            text=[p.kernel for p in mine],
            hovertemplate="%{text}: %{x:.3g} FLOP/B, %{y:.3s}FLOP/s<extra></extra>",
        )
    intensity = ("arithmetic intensity (FLOPs per byte)", units.count)
    log_axes(fig, intensity, ("achieved FLOP/s", units.si))
    return layout(fig, "Roofline: each kernel's FLOP/s against its intensity", 380)
