"""A recording as one self-contained HTML page, to attach to a bug report or keep.

`recording_html(recording)` returns the whole page as a string: the summary, the
timeline of compiles (inline SVG), the functions, each function's compiles with their
reasons, and the call-site tree (nested <details>). No script, no stylesheet or font
from elsewhere: it opens from disk with no network and no server. Paths are shown short
(`optax/_src/numerics.py:106`), the full path in the hover text. Stdlib only, so the
app's download button, `python -m viz record --html OUT` and a notebook can all use it.
"""

from __future__ import annotations

import datetime
import html
from collections import defaultdict

from viz.recorder.display.summary import summary_text
from viz.recorder.display.views import (
    TreeNode,
    avoidable_text,
    call_tree,
    disk_text,
    jit_text,
    need_words,
    plain,
    reason_words,
    why_text,
)
from viz.recorder.model import Compile, Recording, short_path
from viz.units import seconds

COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d")
ROW_PX, LABEL_PX, PLOT_PX = 22, 180, 820  # the timeline's geometry

# Scoped under one class, so a notebook cell can hold it without restyling the notebook;
# --fg, --muted, --line and --panel are a notebook theme's (viz.notebook), else these
RECORDING_STYLE = """
.jitscope-rec{color:var(--fg,#1f2430);font-family:-apple-system,Segoe UI,Helvetica,Arial,
sans-serif} .jitscope-rec h1{margin-bottom:0;font-size:1.6em}
.jitscope-rec .sub{color:var(--muted,#666);margin-top:4px;word-break:break-all}
.jitscope-rec .metrics{display:flex;gap:12px;flex-wrap:wrap;margin:16px 0}
.jitscope-rec .metric{border:1px solid var(--line,#ddd);border-radius:8px;padding:10px 14px;
min-width:130px} .jitscope-rec .metric b{display:block;font-size:22px}
.jitscope-rec pre{background:var(--panel,#f6f8fa);padding:12px;border-radius:6px;
overflow:auto;font-size:12px}
.jitscope-rec table{border-collapse:collapse;font-size:12px;margin:8px 0}
.jitscope-rec td,.jitscope-rec th{border:1px solid var(--line,#ddd);padding:3px 6px;
text-align:left;vertical-align:top} .jitscope-rec th{background:var(--panel,#f6f8fa)}
.jitscope-rec details{margin:4px 0} .jitscope-rec summary{cursor:pointer}
.jitscope-rec .tree ul{list-style:none;padding-left:18px;margin:0}
.jitscope-rec .tree summary,.jitscope-rec .tree li>span{font-family:monospace;font-size:12px}
.jitscope-rec .advice{color:#b07000} .jitscope-rec .muted{color:var(--muted,#888)}
"""
PAGE_STYLE = "body{margin:24px auto;max-width:1200px;padding:0 16px}"


def recording_html(recording: Recording) -> str:
    """The whole page."""
    program = recording.program
    title = f"jitscope recording: {program.name or ' '.join(program.argv)}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        f"<style>{PAGE_STYLE}{RECORDING_STYLE}</style></head><body>"
        f"{recording_section(recording)}</body></html>"
    )


def recording_section(recording: Recording) -> str:
    """The recording as one fragment scoped under `.jitscope-rec` (style:
    `RECORDING_STYLE`): the page's body, and a notebook cell's (viz.notebook)."""
    program = recording.program
    title = f"jitscope recording: {program.name or ' '.join(program.argv)}"
    parts = [
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="sub">{_program_line(recording)}</p>',
        _metrics(recording),
        "<h2>Summary</h2>",
        f"<pre>{html.escape(summary_text(recording))}</pre>",
        "<h2>Compiles over the program's run</h2>",
        _timeline(recording),
        "<h2>Functions, by compile time</h2>",
        _functions(recording),
        "<h2>Each function's compiles, against the closest earlier one</h2>",
        _compiles(recording),
        "<h2>Where compiles came from (call sites, outermost first)</h2>",
        _tree(recording),
    ]
    return '<div class="jitscope-rec">' + "\n".join(parts) + "</div>"


def _esc(value: object) -> str:
    return html.escape(str(value))


def _place(location: str, cwd: str | tuple[str, ...]) -> str:
    """The short path, with the full one as hover text."""
    return f'<span title="{_esc(location)}">{_esc(short_path(location, cwd))}</span>'


def _program_line(recording: Recording) -> str:
    p = recording.program
    started = datetime.datetime.fromtimestamp(p.started).strftime("%Y-%m-%d %H:%M:%S")
    if p.exit_code is None:  # a program still running or killed; `viz.recording()`'s block
        ended = "no exit status"
    else:
        ended = f"exit status {p.exit_code}" + (f" ({p.signal})" if p.signal else "")
    return (
        f"<code>{_esc(' '.join(p.argv))}</code> in <code>{_esc(p.cwd)}</code> · {started} · {ended}"
    )


def _metrics(recording: Recording) -> str:
    s, wall = recording.summary, recording.program.wall_s
    values = [
        ("compiles", s.compiles),
        ("compile time", seconds(s.compile_s)),
        ("wall time", seconds(wall) if wall else "–"),
        ("compiling", f"{s.compile_s / wall:.0%}" if wall else "–"),
        ("functions", s.functions),
        ("op-by-op compiles", s.eager_compiles),
    ]
    if s.compiles > s.functions:
        values.insert(1, ("needed · avoidable", f"{s.needed} · {s.avoidable}"))
    if s.persistent_hits + s.persistent_misses:
        values.append(
            ("from disk", f"{s.persistent_hits} of {s.persistent_hits + s.persistent_misses}")
        )
    cells = "".join(f'<div class="metric">{_esc(k)}<b>{_esc(v)}</b></div>' for k, v in values)
    return f'<div class="metrics">{cells}</div>'


def _timeline(recording: Recording) -> str:
    """One row per function, one bar per compile kept with details, over the wall time."""
    rows = [f for f in recording.functions if recording.compiles_of(f.key)]
    if not rows:
        return '<p class="muted">No compile was kept with details.</p>'
    wall = recording.program.wall_s or max(c.t_s + c.total_s for c in recording.compiles) or 1.0
    scale = PLOT_PX / wall
    height = ROW_PX * len(rows) + 24
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{LABEL_PX + PLOT_PX + 10}" '
        f'height="{height}" font-family="sans-serif" font-size="11" fill="currentColor">'
    ]
    for i, f in enumerate(rows):
        y = i * ROW_PX
        svg.append(
            f'<text x="{LABEL_PX - 6}" y="{y + 15}" text-anchor="end">{_esc(f.name[:28])}</text>'
        )
        for c in recording.compiles_of(f.key):
            x, width = LABEL_PX + c.t_s * scale, max(c.total_s * scale, 1.5)
            hover = f"#{c.seq} {c.function} at {c.t_s:.2f} s, {seconds(c.total_s)}"
            svg.append(
                f'<rect x="{x:.1f}" y="{y + 4}" width="{width:.1f}" height="{ROW_PX - 8}" '
                f'fill="{COLOURS[i % len(COLOURS)]}"><title>{_esc(hover)}</title></rect>'
            )
    axis_y = ROW_PX * len(rows) + 14
    svg.append(f'<text x="{LABEL_PX}" y="{axis_y}">0 s</text>')
    svg.append(
        f'<text x="{LABEL_PX + PLOT_PX}" y="{axis_y}" text-anchor="end">{seconds(wall)}</text>'
    )
    svg.append("</svg>")
    return "".join(svg)


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _functions(recording: Recording) -> str:
    cwd = recording.program.folders
    rows = [
        [
            _esc(f.name),
            _place(f.defined_at, cwd),
            _esc(f.compiles),
            _esc(seconds(f.compile_s)),
            _esc(avoidable_text(f.avoidable, f.avoidable_s)),
            _esc(f.persistent_hits),
            _esc(why_text(f)),
            _advice_html(f.advice),
        ]
        for f in recording.functions
    ]
    header = ["function", "defined at", "compiles", "compile time", "avoidable", "from disk"]
    header += ["why", "advice"]
    return _table(header, rows)


def _advice_html(advice: str) -> str:
    """A function's advice, a line per kind of recompile; '–' for none."""
    if not advice:
        return "–"
    lines = "<br>".join(_esc(plain(line)) for line in advice.splitlines())
    return f'<span class="advice">{lines}</span>'


def _compiles(recording: Recording) -> str:
    cwd = recording.program.folders
    parts = []
    for f in recording.functions:  # the top function's compiles open
        mine = recording.compiles_of(f.key)
        if not mine:
            continue
        more = f.compiles - len(mine)
        note = f' <span class="muted">({more} more counted without details)</span>' if more else ""
        rows = [_compile_row(c, cwd) for c in mine]
        header = ["#", "at", "need", "why", "called from", "signature", "trace", "lower"]
        header += ["compile"]
        header += ["disk cache", "jit"]
        opened = " open" if not parts else ""
        parts.append(
            f"<details{opened}><summary><b>{_esc(f.name)}</b> · {f.compiles} compiles · "
            f"{_place(f.defined_at, cwd)}{note}</summary>{_table(header, rows)}</details>"
        )
    return "\n".join(parts) or '<p class="muted">No compile was kept with details.</p>'


def _compile_row(c: Compile, cwd: str | tuple[str, ...]) -> list[str]:
    return [
        _esc(c.seq),
        _esc(f"{c.t_s:.2f} s"),
        _esc(need_words(c)),
        _esc(plain("; ".join(reason_words(r) for r in c.reasons))),
        _place(c.call_site, cwd),
        _esc(plain(c.signature_text) or "–"),
        _esc(seconds(c.trace_s)),
        _esc(seconds(c.lower_s)),
        _esc(seconds(c.compile_s)),
        _esc(disk_text(c)),
        f'<span title="{_esc(c.created_at or "")}">{_esc(jit_text(c, cwd))}</span>',
    ]


def _tree(recording: Recording) -> str:
    """The call-site trie as nested <details>, each frame with its compiles and seconds."""
    nodes = call_tree(recording)
    if not nodes:
        return '<p class="muted">No call site was recorded.</p>'
    children: dict[str, list[TreeNode]] = defaultdict(list)
    for node in nodes:
        children[node.parent].append(node)

    def render(node: TreeNode) -> str:
        label = f"{_esc(node.label)} · {node.compiles} compiles · {seconds(node.seconds)}"
        kids = sorted(children.get(node.id, []), key=lambda n: -n.seconds)
        if not kids:
            return f"<li><span>{label}</span></li>"
        inner = "".join(render(k) for k in kids)
        return f"<li><details open><summary>{label}</summary><ul>{inner}</ul></details></li>"

    roots = sorted(children.get("", []), key=lambda n: -n.seconds)
    return '<div class="tree"><ul>' + "".join(render(r) for r in roots) + "</ul></div>"
