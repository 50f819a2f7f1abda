"""The Overview's Vega-Lite charts and the tabs' Plotly charts draw the same numbers."""

from __future__ import annotations

import math
from dataclasses import replace
from itertools import pairwise

import pytest

from viz import charts, vega
from viz.cache.events import CallEvent, FailedEvent, RoutedEvent
from viz.errors import ErrorInfo
from viz.report import (
    CompiledSection,
    JaxprSection,
    Report,
    Runs,
    StableHLOSection,
    Timings,
)
from viz.timing import RunStats
from viz.worker.protocol import PassStep, ScalingRow, ShapeRow

TIMINGS = Timings(
    trace_s=0.004, lower_s=0.02, compile_s=0.05, first_call_s=0.003, run_median_s=0.0008
)
REPORT = Report(
    jaxpr=JaxprSection(eqn_count=12),
    stablehlo=StableHLOSection(op_count=15),
    compiled=CompiledSection(op_count=9, kernel_count=3),
    timings=TIMINGS,
)


def stats(median_s: float, samples: int) -> RunStats:
    return RunStats(median_s, median_s, median_s, median_s, samples, 1, [median_s] * samples)


def with_eager(eager_median_s: float, eager_samples: int = 7) -> Report:
    run = Runs(jit=stats(TIMINGS.run_median_s, 20), eager=stats(eager_median_s, eager_samples))
    return Report(timings=replace(TIMINGS, eager_median_s=eager_median_s), run=run)


def rows(spec: dict) -> list[dict]:
    return spec["data"]["values"]


def test_the_op_count_chain_lists_every_stage_in_order() -> None:
    chain = rows(vega.count_chain(REPORT))
    assert [(r["stage"], r["count"]) for r in chain] == [
        ("jaxpr equations", 12),
        ("StableHLO ops", 15),
        ("compiled kernels", 3),
    ]
    # the axis does not call them all ops: each bar says what it counts
    assert "ops" not in vega.count_chain(REPORT)["encoding"]["x"]["title"]
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
    partial = Report(jaxpr=JaxprSection(eqn_count=3), timings=Timings(trace_s=0.001, lower_s=0.002))
    assert [r["stage"] for r in rows(vega.count_chain(partial))] == ["jaxpr equations"]
    spans = rows(vega.stage_waterfall(partial))
    assert [r["stage"] for r in spans] == ["trace", "lower"]
    assert rows(vega.stage_waterfall(Report())) == []


def test_each_stage_keeps_its_colour() -> None:
    colour = vega.stage_waterfall(REPORT)["layer"][0]["encoding"]["color"]["scale"]
    assert dict(zip(colour["domain"], colour["range"], strict=True)) == charts.STAGE_COLOURS


def test_compiling_pays_off_after_the_compile_cost_over_the_time_saved_per_call() -> None:
    report = with_eager(0.0018)  # jit saves 1 ms a call
    # trace + lower + compile = 74 ms, paid back at 1 ms a call
    assert report.compile_total_s == pytest.approx(0.074)
    assert charts.break_even_calls(report) == pytest.approx(74.0)


def test_compiling_never_pays_off_when_eager_is_as_fast() -> None:
    assert charts.break_even_calls(with_eager(0.0008)) == math.inf


def test_there_is_no_break_even_without_an_eager_time() -> None:
    assert charts.break_even_calls(REPORT) is None
    assert charts.pays_off_after(REPORT) == "–"


def test_the_verdict_reads_in_calls_or_never() -> None:
    assert charts.pays_off_after(with_eager(0.0018)) == "74 calls"
    assert charts.pays_off_after(with_eager(0.0008)) == "never"
    assert charts.samples(with_eager(0.0008)) == (20, 7)


def test_one_eager_sample_is_too_few_for_a_verdict() -> None:
    # the attention sample: eager's op-by-op compiles left it one sample, "never" was noise
    report = with_eager(0.0008, eager_samples=1)
    assert charts.break_even_calls(report) is None
    assert charts.pays_off_after(report) == "too few eager samples to tell"
    assert charts.pays_off_after(with_eager(0.0018, eager_samples=3)) == "74 calls"


def call(n: int, hit: bool, compile_s: float = 0.0) -> CallEvent:
    return CallEvent(n, "f32[3]", "x: f32[3]", hit, compile_s, 0.0, 0.001, 1, 0)


def traces(fig) -> dict:
    """A figure's traces by the first word of their names."""
    return {trace.name.split(":")[0]: trace for trace in fig.data}


def test_the_cache_timeline_draws_a_miss_as_its_compile_and_a_hit_as_its_run() -> None:
    failed = FailedEvent(2, "nosuch", ErrorInfo("spec_error", "no"), 1)
    fig = charts.cache_timeline([call(1, False, 0.02), failed, call(3, True)])
    drawn = traces(fig)
    misses, hits, compile_line = drawn["miss"], drawn["hit"], drawn["cumulative compile"]
    assert list(misses.x) == [1] and list(misses.y) == pytest.approx([20.0])
    assert misses.marker.color == charts.MISS
    assert list(hits.x) == [3] and list(hits.y) == pytest.approx([1.0])  # its run, in ms
    assert hits.marker.color == charts.HIT and hits.mode == "markers"
    assert list(compile_line.x) == [1, 3]  # the failed call is left out
    assert list(compile_line.y) == pytest.approx([20.0, 20.0])  # cumulative compile, ms


def test_the_cache_timelines_legend_lists_only_what_is_drawn_and_its_axis_starts_at_call_1() -> (
    None
):
    fig = charts.cache_timeline([call(1, False, 0.02), call(2, False, 0.01)])
    assert list(traces(fig)) == ["miss", "cumulative compile", "cumulative run"]
    assert fig.layout.xaxis.range == (0.5, 2.5)  # no call 0


def test_calls_routed_to_a_bucket_are_drawn_and_add_run_time_but_no_compile() -> None:
    routed = RoutedEvent(2, "f32[5]", aot_bucket=8, size=5, padding=3, run_s=0.004, cache_size=1)
    fig = charts.cache_timeline([call(1, False, 0.02), routed, call(3, True)])
    drawn = traces(fig)
    misses, hits, marks = drawn["miss"], drawn["hit"], drawn["AOT bucket"]
    compile_line, run_line = drawn["cumulative compile"], drawn["cumulative run"]
    assert list(misses.x) == [1] and list(hits.x) == [3] and list(marks.x) == [2]
    assert list(marks.y) == pytest.approx([4.0])
    assert marks.marker.color == charts.AOT and "bucket 8" in marks.hovertext[0]
    assert list(compile_line.x) == [1, 2, 3]
    assert list(compile_line.y) == pytest.approx([20.0, 20.0, 20.0])
    assert list(run_line.y) == pytest.approx([1.0, 5.0, 6.0])  # ms: each call's run time


def test_the_pass_chart_names_each_pass_and_counts_ops_and_fusions() -> None:
    steps = [PassStep(0, "opt", "dce", 12, 0), PassStep(1, "fusion", "fusion", 7, 3)]
    ops, fusions = charts.pass_chart(steps).data
    assert list(ops.y) == [12, 7] and list(fusions.y) == [0, 3]
    assert list(ops.hovertext) == ["opt / dce", "fusion / fusion"]


def test_the_run_distribution_has_one_box_per_timed_mode() -> None:
    jit = RunStats(0.01, 0.002, 0.001, 0.003, samples=2, number=1, per_call_s=[0.001, 0.002])
    assert [b.name for b in charts.run_distribution(Report(run=Runs(jit=jit))).data] == ["jit"]
    assert list(charts.run_distribution(Report(run=Runs(jit=jit))).data[0].y) == [1.0, 2.0]
    assert charts.run_distribution(Report()).data == ()


def axis_ticks(axis) -> dict[float, str]:
    return dict(zip(axis.tickvals, axis.ticktext, strict=True))


def test_the_run_time_axis_labels_its_ticks_with_full_times_and_says_it_is_log_scale() -> None:
    # the Timing tab read "4 5 … 9 1 2 …": the lower 4 was 0.4 ms, the 410 µs jit median
    jit = stats(0.00041, 20)
    eager = RunStats(0.1, 0.0019, 0.0004, 0.006, 3, 1, [0.0004, 0.0019, 0.006])
    axis = charts.run_distribution(Report(run=Runs(jit=jit, eager=eager))).layout.yaxis
    assert axis.type == "log" and axis.title.text.endswith("(log scale)")
    ticks = axis_ticks(axis)
    assert ticks[0.5] == "500 µs" and ticks[1] == "1 ms" and ticks[5] == "5 ms"
    assert ticks[0.2] == "200 µs" and ticks[10] == "10 ms"  # the decades around the samples


def compiled(total_s: float) -> dict:
    return {"trace_s": 0.0, "lower_s": 0.0, "compile_s": total_s, "total_s": total_s}


def test_every_log_axis_says_so_and_labels_its_decades_in_full() -> None:
    shapes = [
        ShapeRow(**compiled(0.2 / size), eqns=3, stablehlo_lines=9, run_s=1e-4 * size, size=size)
        for size in (1, 10, 100, 1000)
    ]
    sweep = charts.shape_sweep_chart(shapes).layout
    assert axis_ticks(sweep.xaxis)[100] == "100" and axis_ticks(sweep.xaxis)[1] == "1"
    assert axis_ticks(sweep.yaxis)[0.1] == "100 µs" and axis_ticks(sweep.yaxis)[100] == "100 ms"
    loops = [
        ScalingRow(
            **compiled(0.01 * n), eqns=n, stablehlo_lines=9, run_s=0.001, n=n, variant="scan"
        )
        for n in (1, 10, 100)
    ]
    timed = charts.scaling_chart(loops, "total_s", "compile", "ms").layout
    counted = charts.scaling_chart(loops, "eqns", "equations", "equations").layout
    assert axis_ticks(timed.yaxis)[1000] == "1 s" and axis_ticks(counted.yaxis)[20] == "20"
    for axis in (sweep.xaxis, sweep.yaxis, timed.xaxis, timed.yaxis, counted.yaxis):
        assert axis.type == "log" and axis.title.text.endswith("(log scale)")


def test_log_ticks_fall_to_one_a_decade_over_a_wide_span() -> None:
    assert charts.log_ticks([0.3, 4.0]) == [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50]
    assert charts.log_ticks([0.01, 1e6]) == [10.0**e for e in range(-2, 7)]
    assert charts.log_ticks([0.0, -1.0]) == []  # nothing a log axis can draw


def test_log_ticks_within_one_decade_are_finer() -> None:
    """The 24-layer model's jit and eager calls, 130 to 300 ms: 1, 2 and 5 a decade left
    one tick, '200 ms', on the run-time chart's axis."""
    ticks = [t for t in charts.log_ticks([130.0, 300.0]) if 130 <= t <= 300]
    assert ticks == [150, 200, 300]
    assert [charts.tick_text(t) for t in ("1.00 T", "100.0 ms", "500 µs", "0.5")] == [
        "1 T",
        "100 ms",
        "500 µs",
        "0.5",
    ]
