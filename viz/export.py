"""One standalone, offline HTML report: texts, graphs and charts of an analysis.

plotly.js is inlined once and the graphs are inline SVG (rendered with the
graphviz `dot` binary; without it the DOT source is embedded instead), so the
file opens anywhere without a network.
"""

from __future__ import annotations

import html
import json
from typing import Any

import viz.fusion.view
import viz.graph
from viz import charts
from viz.format import seconds
from viz.ir.model import Graph

_STYLE = """
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


def _metric(label: str, value: Any) -> str:
    return f'<div class="metric">{html.escape(label)}<b>{html.escape(str(value))}</b></div>'


def _graph_html(model: dict[str, Any] | None, summary: dict[str, Any] | None) -> str:
    dot = (summary or {}).get("dot")
    if model is not None:
        dot = viz.graph.to_dot(viz.graph.default_view(Graph.from_dict(model)))
    if not dot:
        return "<p>(no graph)</p>"
    try:
        return f'<div class="graph">{viz.graph.to_svg(dot)}</div>'
    except RuntimeError:
        return f"<p>Graphviz is not installed; DOT source:</p><pre>{html.escape(dot)}</pre>"


def html_report(report: dict[str, Any]) -> str:
    """The whole report as one HTML document."""
    t = report.get("timings") or {}
    parts = [
        f"<h1>jitscope · {html.escape(report.get('function', ''))}</h1>",
        f'<p class="sub">args <code>{html.escape(report.get("args", ""))}</code> · '
        f"device {html.escape(report.get('device', ''))} · jax "
        f"{html.escape(report.get('jax_version', ''))}</p>",
    ]
    if report.get("error"):
        e = report["error"]
        parts.append(
            f'<div class="error"><b>{html.escape(e["kind"])}</b>: '
            f"{html.escape(e['message'])}<br>Fix: {html.escape(e.get('hint', ''))}</div>"
        )
    counts = [
        ("jaxpr equations", (report.get("jaxpr") or {}).get("eqn_count")),
        ("StableHLO ops", (report.get("stablehlo") or {}).get("op_count")),
        ("compiled kernels", (report.get("compiled") or {}).get("kernel_count")),
        ("compile", seconds(t.get("compile_s"))),
        ("run median", seconds(t.get("run_median_s"))),
    ]
    parts.append('<div class="metrics">' + "".join(_metric(k, v) for k, v in counts) + "</div>")
    figures = [
        charts.count_chain(report),
        charts.stage_waterfall(report),
        charts.op_counts(report),
        charts.run_distribution(report),
    ]
    for i, fig in enumerate(figures):
        parts.append(fig.to_html(full_html=False, include_plotlyjs="inline" if i == 0 else False))
    parts.append(viz.fusion.view.html_section(report))  # issue #12: the map and kernel times
    models = report.get("graph_models") or {}
    for ir, title in (("jaxpr", "jaxpr"), ("stablehlo", "StableHLO"), ("compiled", "Compiled HLO")):
        section = report.get(ir) or {}
        parts.append(f"<h2>{title}</h2>")
        parts.append(_graph_html(models.get(ir), (report.get("graphs") or {}).get(ir)))
        parts.append(f"<pre>{html.escape(section.get('text', ''))}</pre>")
    public = {
        k: v for k, v in report.items() if k not in ("graph_models",) and not k.startswith("_")
    }
    parts.append(
        "<h2>Report JSON</h2><pre>"
        + html.escape(json.dumps(public, indent=1, default=str))
        + "</pre>"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>jitscope · "
        f"{html.escape(report.get('function', ''))}</title><style>{_STYLE}</style></head>"
        f"<body>{''.join(parts)}</body></html>"
    )
