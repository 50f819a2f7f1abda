"""The Overview's Vega-Lite charts and the tabs' Plotly charts draw the same numbers."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest

from viz import charts, vega

REPORT = {
    "jaxpr": {"eqn_count": 12},
    "stablehlo": {"op_count": 15},
    "compiled": {"op_count": 9, "kernel_count": 3},
    "timings": {
        "trace_s": 0.004,
        "lower_s": 0.02,
        "compile_s": 0.05,
        "first_call_s": 0.003,
        "run_median_s": 0.0008,
    },
}


def rows(spec: dict) -> list[dict]:
    return spec["data"]["values"]


def test_the_op_count_chain_lists_every_stage_in_order() -> None:
    chain = rows(vega.count_chain(REPORT))
    assert [(r["stage"], r["count"]) for r in chain] == [
        ("jaxpr equations", 12),
        ("StableHLO ops", 15),
        ("compiled ops", 9),
        ("kernels", 3),
    ]
    plotly = charts.count_chain(REPORT).data[0]
    assert list(plotly.x) == [r["count"] for r in chain]


def test_the_waterfall_puts_each_stage_where_the_previous_one_ended() -> None:
    spans = rows(vega.stage_waterfall(REPORT))
    assert [r["stage"] for r in spans] == list(charts.STAGE_COLOURS)
    assert spans[0]["start"] == 0
    for before, after in pairwise(spans):
        assert after["start"] == pytest.approx(before["end"])
    assert spans[-1]["end"] == pytest.approx(77.8)  # ms: the five stages end to end
    assert [r["label"] for r in spans] == ["4.0 ms", "20.0 ms", "50.0 ms", "3.0 ms", "800 µs"]
    bars = charts.stage_waterfall(REPORT).data  # the Timing tab's Plotly version
    assert [b.base[0] for b in bars] == pytest.approx([r["start"] for r in spans])


def test_stages_without_a_number_are_left_out() -> None:
    partial = {"jaxpr": {"eqn_count": 3}, "timings": {"trace_s": 0.001, "lower_s": 0.002}}
    assert [r["stage"] for r in rows(vega.count_chain(partial))] == ["jaxpr equations"]
    spans = rows(vega.stage_waterfall(partial))
    assert [r["stage"] for r in spans] == ["trace", "lower"]
    assert rows(vega.stage_waterfall({})) == []


def test_each_stage_keeps_its_colour() -> None:
    colour = vega.stage_waterfall(REPORT)["layer"][0]["encoding"]["color"]["scale"]
    assert dict(zip(colour["domain"], colour["range"], strict=True)) == charts.STAGE_COLOURS


def test_compiling_pays_off_after_the_compile_cost_over_the_time_saved_per_call() -> None:
    timings = {**REPORT["timings"], "eager_median_s": 0.0018}  # jit saves 1 ms a call
    # trace + lower + compile = 74 ms, paid back at 1 ms a call
    assert charts.break_even_calls({"timings": timings}) == pytest.approx(74.0)


def test_compiling_never_pays_off_when_eager_is_as_fast() -> None:
    timings = {**REPORT["timings"], "eager_median_s": 0.0008}
    assert charts.break_even_calls({"timings": timings}) == math.inf


def test_there_is_no_break_even_without_an_eager_time() -> None:
    assert charts.break_even_calls(REPORT) is None
