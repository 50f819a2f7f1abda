"""One standalone, offline HTML report: texts, graphs and charts of an analysis.

No script: the charts are HTML bars and inline SVG (`viz.html_charts`, not plotly.js,
which alone would be 4.8 MB) and the graphs inline SVG (laid out by `dot`; without it
the DOT source is embedded instead), so the file is small and opens anywhere without a
network.
"""

from __future__ import annotations

import html
import json
from typing import Any

import viz.graph
from viz import html_charts
from viz.device_time import device_time_words
from viz.errors import ErrorInfo
from viz.fusion.view import coverage_text, kernel_rows
from viz.ir.model import Graph
from viz.memory.display import buffer_rows, fit_text
from viz.report import GraphSummary, Report
from viz.units import cell_text, seconds

_STYLE = (
    """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;
max-width:1200px;color:#1f2430}
h1{margin-bottom:0} .sub{color:#666;margin-top:4px}
.metrics{display:flex;gap:12px;flex-wrap:wrap} .metric{border:1px solid #ddd;border-radius:8px;
padding:10px 14px;min-width:150px} .metric b{display:block;font-size:22px}
pre{background:#f6f8fa;padding:12px;border-radius:6px;overflow:auto;max-height:480px;
font-size:12px} .graph{overflow:auto;border:1px solid #eee;max-height:800px}
table.kernels{border-collapse:collapse;font-size:12px} table.kernels td,table.kernels th{
border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
.error{background:#fdecea;border:1px solid #f5c2c0;padding:12px;border-radius:8px}
"""
    + html_charts.STYLE
)


def _metric(label: str, value: Any) -> str:
    return f'<div class="metric">{html.escape(label)}<b>{html.escape(str(value))}</b></div>'


def graph_html(model: Graph | None, summary: GraphSummary | None) -> str:
    """The graph's default view as inline SVG (also a notebook cell's, viz.notebook): the
    DOT the report holds, built from the model only for a report without one."""
    dot = summary.dot if summary else ""
    if not dot and model is not None:
        dot = viz.graph.to_dot(viz.graph.default_view(model))
    if not dot:
        return "<p>(no graph)</p>"
    try:
        return f'<div class="graph">{viz.graph.to_svg(dot)}</div>'
    except RuntimeError:
        return f"<p>Graphviz is not installed; DOT source:</p><pre>{html.escape(dot)}</pre>"


def error_html(error: ErrorInfo) -> str:
    return (
        f'<div class="error"><b>{html.escape(error.kind)}</b>: '
        f"{html.escape(error.message)}<br>Fix: {html.escape(error.hint)}</div>"
    )


def _memory_section(report: Report) -> list[str]:
    """Memory over program order (the chart), the peak in words, and its buffers."""
    memory = report.memory
    if memory is None or memory.peak_bytes is None:
        return []
    parts = [
        "<h2>Memory</h2>",
        f'<p class="sub">XLA\'s figures for this compile on {html.escape(report.device)}: '
        "its buffer assignment and schedule.</p>",
        f"<p>{html.escape(fit_text(memory) or '')}</p>",
        html_charts.memory_timeline(report),
    ]
    rows = buffer_rows(memory.at_peak)
    head = "".join(f"<th>{html.escape(k)}</th>" for k in rows[0]) if rows else ""
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in r.values()) + "</tr>"
        for r in rows
    )
    parts.append(f'<table class="kernels"><tr>{head}</tr>{body}</table>')
    return parts


def _ir_sections(report: Report) -> list[str]:
    """Each IR's graph (from its model when the report carries one) and its text."""
    parts = []
    sections = (
        ("jaxpr", "jaxpr", report.jaxpr),
        ("stablehlo", "StableHLO", report.stablehlo),
        ("compiled", "Compiled HLO", report.compiled),
    )
    for ir, title, section in sections:
        parts.append(f"<h2>{title}</h2>")
        parts.append(graph_html(report.graph_models.get(ir), report.graphs.get(ir)))
        parts.append(f"<pre>{html.escape(section.text if section else '')}</pre>")
    return parts


def html_report(report: Report) -> str:
    """The whole report as one HTML document."""
    t = report.timings
    parts = [
        f"<h1>jitscope · {html.escape(report.function)}</h1>",
        f'<p class="sub">args <code>{html.escape(report.args)}</code> · '
        f"device {html.escape(report.device)} · jax "
        f"{html.escape(report.jax_version)}</p>",
    ]
    if report.error:
        parts.append(error_html(report.error))
    counts = [
        ("jaxpr equations", report.jaxpr.eqn_count if report.jaxpr else None),
        ("StableHLO ops", report.stablehlo.op_count if report.stablehlo else None),
        ("compiled kernels", report.compiled.kernel_count if report.compiled else None),
        ("compile", seconds(t.compile_s)),
        ("run median", seconds(t.run_median_s)),
    ]
    parts.append('<div class="metrics">' + "".join(_metric(k, v) for k, v in counts) + "</div>")
    if t.run_median_s is not None and (said := device_time_words(t, report.device)):
        parts.append(f'<p class="sub">{html.escape(said)}</p>')
    parts += [
        html_charts.count_chain(report),
        html_charts.stage_waterfall(report),
        html_charts.op_counts(report),
        html_charts.run_distribution(report),
    ]
    parts.extend(_memory_section(report))
    parts.append(_fusion_section(report))  # issue #12: the map and kernel times
    parts.extend(_ir_sections(report))
    parts.append(
        "<h2>Report JSON</h2><pre>"
        + html.escape(json.dumps(report.public_dict(), indent=1, default=str))
        + "</pre>"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>jitscope · "
        f"{html.escape(report.function)}</title><style>{_STYLE}</style></head>"
        f"<body>{''.join(parts)}</body></html>"
    )


def _fusion_section(report: Report) -> str:
    """The offline HTML report's fusion map: coverage, the kernel-time chart when
    profiled, and the kernel table."""
    fusion_map = report.fusion_map
    if not fusion_map:
        return ""
    profile = report.profile
    parts = [
        "<h2>Fusion map</h2>",
        f"<p>{html.escape(coverage_text(report.fusion_map_coverage).replace('**', ''))}</p>",
    ]
    if profile and profile.kernels:
        parts.append(
            f"<p>Profiled with {html.escape(profile.source)}: {profile.runs} runs, "
            f"{seconds(profile.step_s)} per step.</p>"
        )
        parts.append(html_charts.kernel_times(profile))
    rows = kernel_rows(fusion_map, profile)
    head = "".join(f"<th>{html.escape(k)}</th>" for k in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell_text(v))}</td>" for v in r.values()) + "</tr>"
        for r in rows
    )
    parts.append(f'<table class="kernels"><tr>{head}</tr>{body}</table>')
    return "".join(parts)
