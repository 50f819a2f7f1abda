"""Plotly figures of recordings (no jax, no streamlit): the Recordings page's compiles
over a program's run and its call-site icicle, and a multi-process job on one clock.
The Explore and lesson charts are `viz.charts`, whose layout these share.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import plotly.graph_objects as go

from viz import units
from viz.charts import layout
from viz.recorder.display.job import JobView
from viz.recorder.display.views import TreeNode
from viz.recorder.model import Recording

FUNCTION_COLOURS = (
    "#4C78A8", "#F58518", "#E45756", "#72B7B2", "#54A24B",
    "#EECA3B", "#B279A2", "#FF9DA6", "#9D755D", "#BAB0AC",
)  # fmt: skip


def recording_timeline(recording: Recording) -> go.Figure:
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
    return layout(fig, "Compiles over the program's run", height=max(180, 44 + 34 * len(names)))


def job_timeline(view: JobView) -> go.Figure:
    """A multi-process job (`viz.recorder.display.job.JobView`) on one clock: a row per process,
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
    fig = layout(fig, "Compiles of every process", height=150 + 46 * len(rows))
    legend = {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"}
    fig.update_layout(barmode="overlay", bargap=0.35, legend=legend)
    return fig


def _job_compiles(fig: go.Figure, view: JobView, rows: dict[int, str]) -> None:
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


def _job_marks(fig: go.Figure, view: JobView, rows: dict[int, str]) -> None:
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


CALL_ROW_PX = 34  # one frame of the call-site chart: a line of text
ALL_SITES = "(all call sites)"  # the chart's root, over the program's outermost frames


def call_tree_chart(nodes: list[TreeNode]) -> go.Figure:
    """The call-site trie as an icicle: each code path sized by the compile time under it,
    its place in one line of dark text (its function, compiles and seconds on hover); a
    frame too narrow for its place at a readable size keeps it for its hover."""
    roots = [n for n in nodes if not n.parent]
    compiles, took = sum(n.compiles for n in roots), sum(n.seconds for n in roots)
    top = TreeNode(ALL_SITES, "", f"{ALL_SITES}: {compiles} compiles", compiles, took)
    shown = [top, *(replace(n, parent=n.parent or ALL_SITES) for n in nodes)]
    fig = go.Figure(
        go.Icicle(
            ids=[n.id for n in shown],
            parents=[n.parent for n in shown],
            labels=[n.label for n in shown],
            text=[n.label.partition(" in ")[0] for n in shown],  # the place; its function on hover
            values=[n.seconds for n in shown],
            branchvalues="total",
            customdata=[[n.compiles, units.seconds(n.seconds)] for n in shown],
            hovertemplate="%{label}<br>%{customdata[0]} compiles, %{customdata[1]}<extra></extra>",
            texttemplate="%{text}",
            textfont={"size": 13, "color": "#1f1f1f"},
            tiling={"orientation": "v", "pad": 1},
            root={"color": "#f4f4f4"},
        )
    )
    fig.update_layout(uniformtext={"minsize": 10, "mode": "hide"})
    depth = max((n.id.count(" ← ") for n in nodes), default=0) + 2
    return layout(  # one line of text per frame: compact rows
        fig,
        "Where compiles came from (call sites, outermost first)",
        height=min(90 + CALL_ROW_PX * depth, 560),
    )
