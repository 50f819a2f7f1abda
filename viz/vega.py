"""The Overview's two charts as Vega-Lite specs (no jax, no streamlit).

The first screen draws them with Streamlit's own chart engine rather than Plotly:
Plotly's 4.7 MB bundle takes ~1.5 s of a fresh tab's main thread on a 2-core
machine, a third of the first screen's budget (bench/cold_start.py). The tabs, the
lessons and the HTML export keep Plotly (viz/charts.py); the data comes from the
same functions there, so both draw the same numbers.
"""

from __future__ import annotations

from typing import Any

from viz.charts import STAGE_COLOURS, count_stages, stage_spans
from viz.report import Report
from viz.units import seconds

BAR = "#4C78A8"
LABEL = "#8c8c8c"  # the numbers at the bars' ends: legible on a light and a dark theme
SHORT_AXIS = "ms since jit(f) was called"  # charts.WATERFALL_AXIS, for a half-width chart
HEIGHT = 200  # the whole chart's, title and axes too: the first screen holds it
# one row per stage, in the order given, every label shown
STAGE_AXIS = {
    "field": "stage",
    "type": "nominal",
    "sort": None,
    "title": None,
    "axis": {"labelOverlap": False, "labelLimit": 160},
}


def _title(text: str) -> dict[str, Any]:
    return {"text": text, "anchor": "start", "fontSize": 15}


def _room_for_labels(largest: float) -> dict[str, Any]:
    """An x scale that ends past the longest bar, so the label at its end fits."""
    return {"domain": [0, max(largest, 1e-9) * 1.6], "nice": False}


def count_chain(report: Report) -> dict[str, Any]:
    """How the op count falls: one bar per stage, its count at its end."""
    rows = [{"stage": name, "count": n} for name, n in count_stages(report)]
    return {
        "title": _title("How the op count falls"),
        "height": HEIGHT,
        "data": {"values": rows},
        "encoding": {
            "y": STAGE_AXIS,
            "x": {
                "field": "count",
                "type": "quantitative",
                "title": "count",  # each bar names what it counts: not all are ops
                "axis": {"tickMinStep": 1, "format": "d", "labelFlush": True},
                "scale": _room_for_labels(max((r["count"] for r in rows), default=0)),
            },
        },
        "layer": [
            {"mark": {"type": "bar", "color": BAR}},
            {
                "mark": {"type": "text", "align": "left", "dx": 4, "color": LABEL},
                "encoding": {"text": {"field": "count", "type": "quantitative"}},
            },
        ],
    }


def stage_waterfall(report: Report) -> dict[str, Any]:
    """Where the time goes: each stage from its start to its end, in milliseconds."""
    rows = [
        {
            "stage": name,
            "start": start * 1e3,
            "end": (start + took) * 1e3,
            "label": seconds(took),
        }
        for name, start, took in stage_spans(report)
    ]
    return {
        "title": _title("Where the time goes"),
        "height": HEIGHT,
        "data": {"values": rows},
        "encoding": {
            "y": STAGE_AXIS,
            "x": {
                "field": "start",
                "type": "quantitative",
                "title": SHORT_AXIS,
                "axis": {"labelFlush": True},
                "scale": _room_for_labels(max((r["end"] for r in rows), default=0)),
            },
        },
        "layer": [
            {
                "mark": "bar",
                "encoding": {
                    "x2": {"field": "end"},
                    "color": {
                        "field": "stage",
                        "type": "nominal",
                        "scale": {
                            "domain": list(STAGE_COLOURS),
                            "range": list(STAGE_COLOURS.values()),
                        },
                        "legend": None,
                    },
                },
            },
            {
                "mark": {"type": "text", "align": "left", "dx": 4, "color": LABEL},
                "encoding": {
                    "x": {"field": "end", "type": "quantitative"},
                    "text": {"field": "label"},
                },
            },
        ],
    }
