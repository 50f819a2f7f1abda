"""What the fusion-map views draw: one colour per kernel on the StableHLO and the
compiled graphs, heat by kernel time, tinted source lines, the kernel table and
the kernel-time chart. Plain data in (the report's `fusion_map` / `profile`, graph
models), DOT / HTML / rows / plotly figures out; no jax, no streamlit.

Colouring is a style hook of the DOT writer (`viz.graph.DotStyle`): each drawn
item gets a fill (one kernel) or stripes (a collapsed group holding ops of several
kernels, largest share first), each open fusion its kernel's colour; the layout is
the writer's own.
"""

from __future__ import annotations

import colorsys
import html
from collections import Counter
from collections.abc import Iterable
from typing import Any

import plotly.graph_objects as go

import viz.graph
from viz.fusion.model import FusionCoverage, FusionEntry
from viz.fusion.profile import Profile
from viz.ir.kernels import kernel_of
from viz.ir.model import Graph, Path
from viz.units import count, plural

MAX_STRIPES = 6  # a group's fill shows at most this many kernels' colours
NOT_FOUND = "#ffffff"


def kernel_colours(kernels: Iterable[str]) -> dict[str, str]:
    """A light colour per kernel; hues a golden angle apart, so neighbours differ."""
    out = {}
    for i, name in enumerate(kernels):
        hue = (i * 0.381966) % 1.0
        lightness = 0.80 if i % 2 == 0 else 0.72
        r, g, b = colorsys.hls_to_rgb(hue, lightness, 0.65)
        out[name] = f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"
    return out


def heat_colours(profile: Profile | None) -> dict[str, str]:
    """kernel → white (no time) … deep red (the slowest kernel), by time per step."""
    kernels = profile.kernels if profile else []
    top = max((k.mean_s for k in kernels), default=0.0)
    out = {}
    for k in kernels:
        t = (k.mean_s / top) ** 0.5 if top > 0 else 0.0  # sqrt: small ones stay visible
        g = int(255 - 190 * t)
        out[k.name] = f"#ff{g:02x}{g:02x}" if t > 0 else NOT_FOUND
    return out


def ops_by_kernel(fusion_map: list[FusionEntry], ir: str) -> dict[str, list[str]]:
    """op id → kernels it went into, for 'stablehlo' or 'jaxpr' ops."""
    out: dict[str, list[str]] = {}
    for entry in fusion_map:
        for op in entry.stablehlo_ops if ir == "stablehlo" else entry.jaxpr_eqns:
            out.setdefault(op["id"], []).append(entry.kernel)
    return out


def compiled_kernels(graph: Graph) -> dict[str, list[str]]:
    """compiled node id → [its kernel] (plumbing outside kernels: [])."""
    of = kernel_of(graph)
    out = {}
    for node in graph.nodes:
        ref = of(node)
        out[node.id] = [] if ref.kind == "no_kernel" else [ref.name]
    return out


def paint(view: viz.graph.View, node_kernels: dict[str, list[str]], colours: dict[str, str]) -> str:
    """The view's DOT, each item filled with its kernels' colours, and each open
    fusion's cluster with its kernel's colour."""

    def item_fill(item: viz.graph.VisibleNode) -> dict[str, str]:
        return _fill(_kernels_of(view, item, node_kernels), colours)

    def cluster_fill(path: Path) -> dict[str, str]:
        group = view.graph.groups.get(path)
        if group is not None and group.kind == "fusion" and path[-1] in colours:
            return {"fillcolor": colours[path[-1]]}
        return {}

    return viz.graph.to_dot(view, style=viz.graph.DotStyle(item_fill, cluster_fill))


def _kernels_of(
    view: viz.graph.View, item: viz.graph.VisibleNode, node_kernels: dict[str, list[str]]
) -> Counter[str]:
    """How many ops of each kernel an item stands for."""
    if item.kind != "group":
        return Counter(node_kernels.get(item.id, ()))
    path, n = item.path, len(item.path)
    counts: Counter[str] = Counter()
    for node in view.graph.nodes:
        if node.scope[:n] == path:
            counts.update(node_kernels.get(node.id, ()))
    return counts


def _fill(counts: Counter[str], colours: dict[str, str]) -> dict[str, str]:
    ranked = [(k, n) for k, n in counts.most_common() if k in colours]
    if not ranked:
        return {}
    if len(ranked) == 1:
        return {"fillcolor": colours[ranked[0][0]], "style": "rounded,filled"}
    top = ranked[:MAX_STRIPES]
    total = sum(n for _, n in top)
    stripes = ":".join(f"{colours[k]};{n / total:.3f}" for k, n in top[:-1])
    return {"fillcolor": f"{stripes}:{colours[top[-1][0]]}", "style": "striped"}


FRAME = (540, 480)  # the Fusion tab's graph frames, CSS pixels (beside the code)


def selection_view(graph: Graph, ids: Iterable[str], focus: bool = False) -> viz.graph.View:
    """The default view that reads in the tab's frame (`viz.graph.framed_view`: a
    24-layer model's layers folded) with `ids` highlighted and their
    groups opened, when that stays drawable (at most viz.graph.MAX_NODES items); else
    only highlighted.

    focus: show only `ids` and their direct neighbours, every group on the way open.
    """
    view = viz.graph.framed_view(graph, FRAME)
    wanted = frozenset(ids)
    view.highlight = wanted
    if not wanted:
        return view
    nodes = graph.node_map()
    if focus:
        shown = set(wanted)
        for edge in graph.edges:
            if edge.src in wanted or edge.dst in wanted:
                shown.update((edge.src, edge.dst))
        if len(shown) <= viz.graph.MAX_NODES:
            opened = {
                n.scope[:d]
                for i in shown
                if (n := nodes.get(i))
                for d in range(1, len(n.scope) + 1)
            }
            return viz.graph.View(graph, frozenset(opened), wanted, frozenset(shown))
    opened = set(view.expanded)
    for node_id in wanted:
        scope = nodes[node_id].scope if node_id in nodes else ()
        opened.update(scope[:d] for d in range(1, len(scope) + 1))
    wider = viz.graph.View(view.graph, frozenset(opened), wanted)
    if len(viz.graph.visible(wider)[0]) <= viz.graph.MAX_NODES:
        return wider
    return view


def line_kernels(fusion_map: list[FusionEntry]) -> dict[int, list[str]]:
    """source line → the kernels its ops went into (largest first)."""
    counts: dict[int, Counter[str]] = {}
    for entry in fusion_map:
        if not entry.is_kernel:
            continue
        weight = len(entry.stablehlo_ops) + len(entry.jaxpr_eqns) or 1
        for line in entry.lines:
            counts.setdefault(line, Counter())[entry.kernel] += weight
    return {line: [k for k, _ in c.most_common()] for line, c in counts.items()}


def tinted_source(
    code: str,
    fusion_map: list[FusionEntry],
    colours: dict[str, str],
    selected: set[int] = frozenset(),  # type: ignore[assignment]
) -> str:
    """The user's code as HTML, each line tinted by its kernels (Compiler Explorer
    style: stripes when a line went into several), selected lines outlined."""
    tints = line_kernels(fusion_map)
    lines = code.splitlines()
    first, last = _span(tints, len(lines))
    rows = []
    for number, text in enumerate(lines[first - 1 : last], first):
        kernels = [k for k in tints.get(number, []) if k in colours][:MAX_STRIPES]
        style = _tint(kernels, colours)
        if number in selected:
            style += "outline:2px solid #d7263d;"
        title = html.escape(", ".join(tints.get(number, [])) or "no kernel")
        rows.append(
            f'<div style="{style}" title="{title}"><span class="chips">'
            f'{_chips(kernels[1:], colours)}</span><span class="ln">{number:>4}</span> '
            f"{html.escape(text) or ' '}</div>"
        )
    return (
        '<div class="tinted" style="font-family:ui-monospace,Menlo,Consolas,monospace;'
        "font-size:12.5px;line-height:1.45;white-space:pre;overflow:auto;max-height:560px;"
        'border:1px solid #e6e6e6;border-radius:6px;padding:6px 0">'
        "<style>.tinted .ln{color:#777;display:inline-block;width:3.2em;text-align:right;"
        "margin-right:.8em}.tinted .chips{display:inline-block;width:4.6em;text-align:right}"
        ".tinted .chip{display:inline-block;width:.55em;height:.9em;margin-left:1px;"
        "vertical-align:middle;border:1px solid #0003}</style>" + "".join(rows) + "</div>"
    )


def _span(tints: dict[int, list[str]], n_lines: int, context: int = 3) -> tuple[int, int]:
    """The lines worth showing: from a little before the first tinted line to a
    little after the last (the whole file when nothing is tinted)."""
    inside = [line for line in tints if 1 <= line <= n_lines]
    if not inside:
        return 1, n_lines
    return max(min(inside) - context, 1), min(max(inside) + context, n_lines)


def _tint(kernels: list[str], colours: dict[str, str]) -> str:
    """The line's background: its main kernel's colour (Compiler Explorer style)."""
    return f"background:{colours[kernels[0]]};" if kernels else ""


def _chips(kernels: list[str], colours: dict[str, str]) -> str:
    """One small square per kernel of a line, so lines shared by several show it."""
    return "".join(f'<span class="chip" style="background:{colours[k]}"></span>' for k in kernels)


def kernel_rows(fusion_map: list[FusionEntry], profile: Profile | None) -> list[dict[str, Any]]:
    """The kernel table: kernel, kind, StableHLO ops by name, jaxpr eqns, source
    lines, and time per step and share when profiled (slowest first then)."""
    times = {k.name: k for k in profile.kernels} if profile else {}
    rows = []
    for entry in fusion_map:
        ops = Counter(o["name"].removeprefix("stablehlo.") for o in entry.stablehlo_ops)
        eqns = Counter(e["primitive"] for e in entry.jaxpr_eqns)
        row: dict[str, Any] = {
            "kernel": f"{entry.kernel} ({entry.title})" if entry.title else entry.kernel,
            "kind": entry.kind,
            "StableHLO ops": ", ".join(f"{op} ×{n}" for op, n in ops.most_common()),
            "jaxpr eqns": ", ".join(f"{p} ×{n}" for p, n in eqns.most_common()),
            "source lines": ", ".join(str(x) for x in entry.lines),
        }
        if profile:
            t = times.get(entry.kernel)
            row["time / step (ms)"] = round(t.mean_s * 1e3, 4) if t else None
            row["share"] = round(t.share, 4) if t else None
            row["FLOPs"] = t.flops if t else None
            row["bytes"] = t.bytes_accessed if t else None
        rows.append(row)
    if profile:
        rows.sort(key=lambda r: -(r["time / step (ms)"] or 0))
    return rows


def kernel_irs(fusion_map: list[FusionEntry]) -> list[tuple[str, str]]:
    """(title, text) of each kernel whose own IR the platform gave (a Pallas kernel's
    Mosaic module on TPU), for the Fusion view to open."""
    said = "the kernel's own IR, as the platform lowered it"
    return [
        (f"{e.title or e.kernel} ({e.kernel}): {said}", e.kernel_ir)
        for e in fusion_map
        if e.kernel_ir
    ]


def kernel_time_chart(profile: Profile, top: int = 25) -> go.Figure:
    """Time per step of the slowest kernels, sorted, as horizontal bars."""
    kernels = profile.kernels[:top]
    fig = go.Figure(
        go.Bar(
            x=[k.mean_s * 1e3 for k in kernels],
            y=[k.name for k in kernels],
            orientation="h",
            marker_color=list(heat_colours(profile).get(k.name, "#ccc") for k in kernels),
            marker_line={"color": "#b03030", "width": 1},
            text=[f"{k.share:.1%}" for k in kernels],
            textposition="outside",
            hovertemplate="%{y}: %{x:.3f} ms per step<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title="ms per step")
    fig.update_layout(
        title={"text": f"Where the time goes: {len(kernels)} slowest kernels", "x": 0},
        height=140 + 22 * max(len(kernels), 1),
        margin={"l": 10, "r": 40, "t": 44, "b": 10},
        template="plotly_white",
    )
    return fig


def coverage_text(coverage: FusionCoverage | None) -> str:
    """One line: how much of each IR the map found, and how."""
    if not coverage:
        return "No fusion map (the function did not compile)."
    parts = []
    for ir, title in (("stablehlo", "StableHLO ops"), ("jaxpr", "jaxpr equations")):
        share, counts = getattr(coverage, ir), coverage.counts.get(ir) or {}
        if share is None:
            continue
        meta, flow = counts.get("by_metadata", 0), counts.get("by_dataflow", 0)
        missing = counts.get("ops", 0) - meta - flow
        parts.append(
            f"**{share:.0%}** of {count(counts.get('ops', 0))} {title} "
            f"({count(meta)} by XLA's metadata, {count(flow)} by dataflow, "
            f"{count(missing)} not found)"
        )
    folded = coverage.counts.get("stablehlo", {}).get("folded", 0)
    return (
        "Found in the compiled program: "
        + " · ".join(parts)
        + (f" · {plural(folded, 'StableHLO op')} folded into constants" if folded else "")
    )


def left_out_text(stablehlo: Graph, coverage: FusionCoverage | None, op_count: int | None) -> str:
    """Why the map counts fewer StableHLO ops than the Overview (`op_count`), in words:
    which ops it leaves out and how many of each (one fact, one number: each count
    says what it counts). '' when the two agree or either is unknown."""
    counts = (coverage.counts.get("stablehlo") if coverage else None) or {}
    mapped = counts.get("ops")
    if mapped is None or op_count is None or op_count == mapped:
        return ""
    ops = [n.op for n in stablehlo.nodes if n.kind == "op"]
    holders = Counter(g.op for g in stablehlo.groups.values() if g.op and not g.opaque)
    regions = ", ".join(op.removeprefix("stablehlo.") for op in sorted(holders))
    parts = [
        (ops.count("stablehlo.constant"), "constant", "(no kernel computes them)"),
        (counts.get("folded", 0), "op", "XLA folded into constants"),
        (ops.count("func.call"), "func.call op", "(the called functions' ops are counted)"),
        (sum(holders.values()), "op", f"with regions ({regions}: their regions' ops are counted)"),
    ]
    said = [f"{plural(n, word)} {why}" for n, word, why in parts if n]
    other = op_count - mapped - sum(n for n, _, _ in parts)
    if other > 0:
        said.append(f"{plural(other, 'other op')}")
    return (
        f"The map counts {count(mapped)} of the program's {count(op_count)} StableHLO ops "
        f"(the Overview's count): it leaves out " + "; ".join(said) + "."
    )


def jaxpr_left_out_text(
    jaxpr: Graph, coverage: FusionCoverage | None, eqn_count: int | None
) -> str:
    """Why the map counts fewer jaxpr equations than the Overview (`eqn_count`, which
    counts every equation at every level): the wrappers (a `jit` or `custom_jvp_call`
    equation holding a jaxpr, whose own equations the map counts instead) and what XLA
    folded into constants. '' when the two agree or either is unknown."""
    counts = (coverage.counts.get("jaxpr") if coverage else None) or {}
    mapped = counts.get("ops")
    if mapped is None or eqn_count is None or eqn_count == mapped:
        return ""
    wrappers = Counter(g.op for g in jaxpr.groups.values() if g.op and not g.opaque)
    kinds = ", ".join(f"{op} ×{n}" for op, n in wrappers.most_common())
    parts = [
        (
            sum(wrappers.values()),
            "wrapper equation",
            f"({kinds}: the equations inside are counted)",
        ),
        (counts.get("folded", 0), "equation", "XLA folded into constants"),
    ]
    said = [f"{plural(n, word)} {why}" for n, word, why in parts if n]
    other = eqn_count - mapped - sum(n for n, _, _ in parts)
    if other > 0:
        said.append(plural(other, "other equation"))
    return (
        f"The map counts {count(mapped)} of the program's {count(eqn_count)} jaxpr "
        f"equations (the Overview's count): it leaves out " + "; ".join(said) + "."
    )
