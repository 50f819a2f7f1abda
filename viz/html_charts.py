"""The offline HTML report's charts as plain HTML bars and inline SVG: no script, so the
`--html` file stays small (plotly.js alone is 4.8 MB) and opens anywhere.

The same data as the app's plotly charts (`viz.charts`): the count chain, where the
time goes, the ops before and after fusion, the run time per call, memory over program
order and the kernel times. Numbers through `viz.units`.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from viz import units
from viz.charts import MEMORY_KINDS, STAGE_COLOURS, count_stages, stage_spans
from viz.fusion.profile import Profile
from viz.memory.model import TimelinePoint
from viz.report import Report

STYLE = """
.chart{margin:14px 0;max-width:900px} .chart h3{margin:0 0 6px;font-size:15px}
.chart .row{display:flex;align-items:center;gap:8px;font-size:12px;margin:2px 0}
.chart .label{flex:0 0 220px;text-align:right;overflow:hidden;text-overflow:ellipsis;
white-space:nowrap} .chart .track{flex:1;position:relative;height:14px}
.chart .fill{position:absolute;top:0;height:14px;border-radius:2px;min-width:1px}
.chart .value{flex:0 0 300px;color:#444} .chart svg{font-size:11px}
"""
BLUE, ORANGE, GREY = "#4C78A8", "#F58518", "#BAB0AC"
TOP_OPS = 15
TOP_KERNELS = 15


@dataclass(frozen=True)
class Bar:
    label: str
    value: float  # its length, on the chart's scale
    text: str  # the number as read
    colour: str = BLUE
    start: float = 0.0  # where it starts (a waterfall's bars follow one another)


def bar_chart(title: str, bars: Sequence[Bar]) -> str:
    """One row per bar: label, the bar to scale, the number."""
    if not bars:
        return ""
    end = max(b.start + b.value for b in bars) or 1.0
    rows = "".join(
        f'<div class="row"><span class="label" title="{_e(b.label)}">{_e(b.label)}</span>'
        f'<span class="track"><span class="fill" style="left:{b.start / end:.2%};'
        f'width:{b.value / end:.2%};background:{b.colour}"></span></span>'
        f'<span class="value">{_e(b.text)}</span></div>'
        for b in bars
    )
    return f'<div class="chart"><h3>{_e(title)}</h3>{rows}</div>'


def _e(text: object) -> str:
    return html.escape(str(text))


def count_chain(report: Report) -> str:
    bars = [Bar(label, n, units.count(n)) for label, n in count_stages(report)]
    return bar_chart("How the op count falls", bars)


def stage_waterfall(report: Report) -> str:
    bars = [
        Bar(name, s, units.seconds(s), STAGE_COLOURS[name], start)
        for name, start, s in stage_spans(report)
    ]
    return bar_chart("Where the time goes (since jit(f) was called)", bars)


def op_counts(report: Report) -> str:
    """The op types before fusion (StableHLO) and after (compiled HLO), most first."""
    parts = []
    for title, ir, colour in (
        ("StableHLO ops (before fusion)", report.stablehlo, BLUE),
        ("compiled ops (after fusion)", report.compiled, ORANGE),
    ):
        hist = ir.ops if ir else {}
        top = sorted(hist.items(), key=lambda kv: -kv[1])[:TOP_OPS]
        bars = [Bar(op.removeprefix("stablehlo."), n, units.count(n), colour) for op, n in top]
        more = len(hist) - len(top)
        tail = f" (top {len(top)}; {more} more types)" if more > 0 else ""
        parts.append(bar_chart(f"{title}: {units.count(sum(hist.values()))}{tail}", bars))
    return "".join(parts)


def run_distribution(report: Report) -> str:
    """Per-call time, jit and eager: the median's bar, min, p90 and how many samples."""
    run = report.run
    series = (("jit", run.jit, BLUE), ("eager (no jit)", run.eager, GREY)) if run else ()
    bars = [
        Bar(
            label,
            stats.median_s,
            f"median {units.seconds(stats.median_s)} (min {units.seconds(stats.min_s)}, "
            f"p90 {units.seconds(stats.p90_s)}, {stats.samples} samples)",
            colour,
        )
        for label, stats, colour in series
        if stats
    ]
    return bar_chart("Run time per call: jit vs eager", bars)


def kernel_times(profile: Profile) -> str:
    """The profiled kernels' time per step, slowest first."""
    kernels = sorted(profile.kernels, key=lambda k: -k.mean_s)
    bars = [
        Bar(k.name, k.mean_s, f"{units.seconds(k.mean_s)} ({k.share:.0%})", ORANGE)
        for k in kernels[:TOP_KERNELS]
    ]
    more = len(kernels) - len(bars)
    tail = f" (slowest {len(bars)}; {more} more)" if more > 0 else ""
    return bar_chart(f"Kernel time per step{tail}", bars)


WIDTH, HEIGHT, PAD = 860, 240, 40
Scale = Callable[[float], float]  # data to SVG coordinates


def memory_timeline(report: Report) -> str:
    """The bytes live at each step of the schedule, stacked by kind, the peak marked:
    an inline SVG of step lines."""
    memory = report.memory
    points = memory.timeline if memory else []
    if not points or memory is None:
        return ""
    top = max(p.bytes for p in points) or 1
    end = points[-1].position + 1  # the last step's right edge

    def x(position: float) -> float:
        return PAD + position / end * (WIDTH - 2 * PAD)

    def y(nbytes: float) -> float:
        return HEIGHT - PAD - nbytes / top * (HEIGHT - 2 * PAD)

    shapes, legend, below = [], [], [0] * len(points)
    for kind, label, colour in MEMORY_KINDS:  # the kinds present, stacked
        above = [b + getattr(p, kind) for b, p in zip(below, points, strict=True)]
        if above != below:
            shapes.append(_band(points, below, above, x, y, colour, label))
            legend.append(f'<span style="color:{colour}">■</span> {label}')
        below = above
    peak = _peak_line(report, x)
    axis = (
        f'<text x="{PAD}" y="{PAD - 8}">{_e(units.nbytes(top))} live at most</text>'
        f'<text x="{WIDTH - PAD}" y="{HEIGHT - 10}" text-anchor="end">step of the schedule '
        f"(program order), {len(points)} steps</text>"
    )
    svg = (
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" '
        f'xmlns="http://www.w3.org/2000/svg">{"".join(shapes)}{peak}{axis}</svg>'
    )
    if peak and memory.peak_at is not None:
        at = f"peak {units.nbytes(memory.peak_bytes)} at {memory.peak_at.instruction}"
        legend.append(f'<span style="color:#E45756">┆</span> {_e(at)}')
    return (
        f'<div class="chart"><h3>Memory over program order</h3>{svg}'
        f"<div>{' · '.join(legend)}</div></div>"
    )


def _band(
    points: list[TimelinePoint],
    below: list[int],
    above: list[int],
    x: Scale,
    y: Scale,
    colour: str,
    label: str,
) -> str:
    """One kind's band between the kinds below it and itself, as steps (a buffer's
    bytes change at a step)."""
    top_edge = []
    for p, b in zip(points, above, strict=True):
        top_edge += [f"{x(p.position):.1f},{y(b):.1f}", f"{x(p.position + 1):.1f},{y(b):.1f}"]
    bottom_edge = []
    for p, b in zip(reversed(points), reversed(below), strict=True):
        bottom_edge += [f"{x(p.position + 1):.1f},{y(b):.1f}", f"{x(p.position):.1f},{y(b):.1f}"]
    return (
        f'<polygon points="{" ".join(top_edge + bottom_edge)}" fill="{colour}" '
        f'fill-opacity="0.8"><title>{_e(label)}</title></polygon>'
    )


def _peak_line(report: Report, x: Scale) -> str:
    """The peak's step as a dashed line (its label is in the legend, off the bands)."""
    memory = report.memory
    at = memory.peak_at if memory else None
    if memory is None or at is None or memory.peak_bytes is None:
        return ""
    px = x(at.position + 0.5)
    return (
        f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{PAD:.1f}" y2="{HEIGHT - PAD:.1f}" '
        f'stroke="#E45756" stroke-dasharray="3,3"/>'
    )
