"""jitscope in a notebook cell: a Report and a recording that display themselves,
`viz.show`, and the `%jitscope` / `%%jitscope_record` magics (`%load_ext viz`).

The cell's HTML is self-contained and small: no script, no stylesheet or font from
the web, no plotly.js (the stage bar is HTML), graphs as inline SVG laid out by the same
`dot` path as the app and the `--html` export, whose pieces (graph, error card) it
shares. It is scoped under one class, coloured with JupyterLab's and VS Code's theme
variables (light and dark) with fallbacks, and at most FRAME_PX tall, scrolling inside:
Colab cuts an output frame at about 1000 px.

IPython is optional: this module imports it only inside `show` and the magics.
"""

from __future__ import annotations

import argparse
import html
import linecache
import shlex
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from viz.charts import STAGE_COLOURS, stage_spans
from viz.export import error_html, graph_html
from viz.memory.display import buffer_rows, peak_line
from viz.report import Report
from viz.units import cell_text, count, nbytes, seconds, si

FRAME_PX = 900
TOP_KERNELS = 10

# Table cells as `.jitscope.jitscope table td`: more specific than JupyterLab's right-aligning
# `:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon td`.
# --jp-* are JupyterLab's and Notebook 7's theme variables, --vscode-* VS Code's; Colab
# has neither and gets the fallbacks. Graphs keep a white card: dot draws black on white.
STYLE = """
.jitscope{--fg:var(--jp-ui-font-color1,var(--vscode-editor-foreground,#1f2430));
--muted:var(--jp-ui-font-color2,var(--vscode-descriptionForeground,#667));
--line:var(--jp-border-color2,var(--vscode-panel-border,#d8dbe2));
--panel:var(--jp-layout-color2,var(--vscode-editorWidget-background,#f4f5f8));
color:var(--fg);font:13px/1.45 var(--jp-ui-font-family,-apple-system,Segoe UI,Helvetica,
Arial,sans-serif);max-height:FRAMEpx;overflow:auto;padding:4px 2px}
.jitscope h3{margin:2px 0 4px;font-size:15px} .jitscope .sub{color:var(--muted)}
.jitscope code{font-family:var(--jp-code-font-family,monospace);font-size:12px}
.jitscope .chain{margin:6px 0;font-size:14px} .jitscope .chain b{font-size:17px}
.jitscope .bar{display:flex;height:18px;border-radius:4px;overflow:hidden;margin:4px 0;
max-width:720px;border:1px solid var(--line)}
.jitscope .bar span{color:#fff;font-size:11px;white-space:nowrap;overflow:hidden;
padding:1px 4px;min-width:2px}
.jitscope .graph{background:#fff;border:1px solid var(--line);border-radius:6px;
overflow:auto;max-height:560px;margin:6px 0}
.jitscope .graph svg{max-width:100%;height:auto}
.jitscope details{margin:6px 0} .jitscope summary{cursor:pointer;font-weight:600}
.jitscope table{border-collapse:collapse;font-size:12px;margin:4px 0}
.jitscope.jitscope table td,.jitscope.jitscope table th{border:1px solid var(--line);
padding:2px 6px;text-align:left;vertical-align:top} .jitscope th{background:var(--panel)}
.jitscope .error{background:#fdecea;color:#5f2120;border:1px solid #f5c2c0;padding:10px;
border-radius:6px} .jitscope .error pre{margin:6px 0 0;white-space:pre-wrap}
.jitscope .foot{color:var(--muted);margin-top:6px}
""".replace("FRAME", str(FRAME_PX))

STEADY = "steady state"  # `stage_spans`' last stage: a note under the bar, not a span


def report_html(report: Report, history_id: int | None = None) -> str:
    """The Overview of one analysis as one self-contained HTML fragment."""
    parts = [_header(report)]
    if report.error:
        parts.append(_error_card(report))
    if report.jaxpr:
        parts.append(_chain(report))
    if report.compiled:
        parts.append(_graph(report, "compiled"))
    parts.append(_stage_bar(report))
    parts.append(_cost_line(report))
    parts.extend(_details(report))
    parts.append(_footer(history_id))
    return f'<div class="jitscope"><style>{STYLE}</style>{"".join(p for p in parts if p)}</div>'


def _e(value: Any) -> str:
    return html.escape(str(value))


def _header(report: Report) -> str:
    static = f" · static {_e(', '.join(report.static))}" if report.static else ""
    return (
        f"<h3>jitscope · <code>{_e(report.function)}({_e(report.args)})</code></h3>"
        f'<div class="sub">on {_e(report.device)}{static} · jax {_e(report.jax_version)}</div>'
    )


def _error_card(report: Report) -> str:
    """The app's error card: what failed, the user's line, and the fix."""
    error = report.error
    assert error is not None
    where = ""
    if error.line and report.source_file:
        code = linecache.getline(report.source_file, error.line).rstrip()  # IPython's cells too
        where = f"<pre>line {error.line}: {_e(code.strip())}</pre>" if code else ""
    return error_html(error).replace("</div>", f"{where}</div>", 1)


def _chain(report: Report) -> str:
    links = [
        (report.jaxpr.eqn_count if report.jaxpr else None, "jaxpr equations"),
        (report.stablehlo.op_count if report.stablehlo else None, "StableHLO ops"),
        (report.compiled.kernel_count if report.compiled else None, "compiled kernels"),
    ]
    shown = [f"<b>{count(n)}</b> {label}" for n, label in links if n is not None]
    return f'<div class="chain">{" → ".join(shown)}</div>'


def _graph(report: Report, ir: str) -> str:
    return graph_html(report.graph_models.get(ir), report.graphs.get(ir))


def _stage_bar(report: Report) -> str:
    """The stages before the first result in the app's order and colours (`viz.charts`),
    so a cell and the app read alike."""
    times = [(name, s) for name, _, s in stage_spans(report) if name != STEADY and s]
    total = sum(s for _, s in times)
    if not total:
        return ""
    spans = "".join(
        f'<span style="flex:{s / total:.4f};background:{STAGE_COLOURS[name]}" '
        f'title="{name} {seconds(s)}">{name} {seconds(s)}</span>'
        for name, s in times
    )
    run = report.timings.run_median_s
    steady = f" · steady state {seconds(run)} per call" if run else ""
    note = f"{seconds(total)} before the first result{steady}"
    return f'<div class="bar">{spans}</div><div class="sub">{note}</div>'


def _cost_line(report: Report) -> str:
    items = []
    if report.cost and report.cost.flops is not None:
        items.append(f"{si(report.cost.flops)}FLOP")
    if report.cost and report.cost.bytes_accessed is not None:
        items.append(f"{nbytes(report.cost.bytes_accessed)} accessed")
    if report.cost and report.cost_note:
        items.append(report.cost_note)
    if report.memory_total_bytes is not None:
        m = report.memory
        assert m is not None
        items.append(
            f"memory {nbytes(report.memory_total_bytes)} (arguments {nbytes(m.argument_bytes)}, "
            f"outputs {nbytes(m.output_bytes)}, temporaries {nbytes(m.temp_bytes)})"
        )
    line = f'<div class="sub">{" · ".join(items)}</div>' if items else ""
    peak = peak_line(report.memory) if report.memory else None
    return line + (f'<div class="sub">{_e(peak)}</div>' if peak else "")


def _details(report: Report) -> list[str]:
    sections = []
    for ir, title in (("jaxpr", "jaxpr graph"), ("stablehlo", "StableHLO graph")):
        if ir in report.graphs or ir in report.graph_models:
            sections.append((title, _graph(report, ir)))
    if report.memory and report.memory.at_peak:
        sections.append(("Memory at the peak: the buffers live there", _peak_table(report)))
    if report.fusion_map:
        sections.append(("Fusion map: top kernels", _kernel_table(report)))
    if report.specialization:
        sections.append(("Specialization", _specialization_table(report)))
    return [f"<details><summary>{_e(t)}</summary>{body}</details>" for t, body in sections]


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    head = "".join(f"<th>{_e(k)}</th>" for k in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{_e(cell_text(v))}</td>" for v in r.values()) + "</tr>" for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _kernel_table(report: Report) -> str:
    from viz.fusion.view import kernel_rows

    rows = kernel_rows(report.fusion_map, report.profile)
    more = len(rows) - TOP_KERNELS
    tail = f'<div class="sub">… {more} more kernels in the app</div>' if more > 0 else ""
    return _table(rows[:TOP_KERNELS]) + tail


def _peak_table(report: Report) -> str:
    assert report.memory is not None
    return _table(buffer_rows(report.memory.at_peak))


def _specialization_table(report: Report) -> str:
    rows = [
        {
            "argument": r.arg,
            "baked in": "value " + r.value if r.state == "static" else r.baked_in,
            "kind": {"static": "static value", "dynamic": "dynamic value"}.get(r.state, r.state),
            "sharding": r.sharding,
        }
        for r in report.specialization
    ]
    return _table(rows)


def _footer(history_id: int | None) -> str:
    from viz.locations import app_command

    where = (
        f"run #{history_id} in History"
        if history_id
        else "History, after <code>viz.show(...)</code> or <code>analyze(..., history=True)</code>"
    )
    return (
        f'<div class="foot">The full view (every IR as text and graph, fusion map, cache lab): '
        f"<code>{_e(app_command())}</code> → {where}. This analysis ran in this kernel's "
        "own process, without the app's worker limits.</div>"
    )


def recording_cell_html(recording: Any) -> str:
    """A recording (`viz.recording()`, `%%jitscope_record`) in a cell: the HTML that
    `record --html` writes (viz.recorder.display.html), in this module's frame and theme."""
    from viz.recorder import RECORDING_STYLE, recording_section

    body = recording_section(recording)
    return f'<div class="jitscope"><style>{STYLE}{RECORDING_STYLE}</style>{body}</div>'


# ----------------------------------------------------------------------------- show


def show(fn: Callable, args: str = "", *positional: Any, history: bool = True, **kwargs: Any):
    """Analyze `fn` on the args spec and display its Overview in the notebook now;
    returns the Report. Takes `viz.analyze`'s arguments; `history` defaults to True
    here, so the run waits in the app's History. The spec's names are the calling
    cell's, then those of `fn`'s module."""
    from viz.history import record_api_run
    from viz.pipeline import analyze
    from viz.target import spec_names

    if kwargs.get("namespace") is None:  # the calling cell's (analyze would read show's)
        kwargs["namespace"] = spec_names(fn, sys._getframe(1).f_globals)
    report = analyze(fn, args, *positional, **kwargs)
    history_id, report = record_api_run(report) if history else (None, report)
    _SHOWN[id(report)] = (_execution_count(), history_id)
    weakref.finalize(report, _SHOWN.pop, id(report), None)
    _display_html(report_html(report, history_id), repr(report))
    return report


# id(report) → (the cell that showed it, its history id), while the report lives
_SHOWN: dict[int, tuple[int | None, int | None]] = {}


def repr_html(report: Report) -> str:
    """`Report._repr_html_`. A report `show` displayed in this same cell is that cell's
    value too (`viz.show(f, "f32[8]")` as the last line): it is not drawn twice."""
    if _shown_here(report):
        return ""
    return report_html(report, _SHOWN.get(id(report), (None, None))[1])


def display_report(report: Report) -> None:
    """`Report._ipython_display_`: the Overview with the one-line repr, or nothing at all
    for the report `show` drew in this cell, so no empty `Out[n]:` prompt is left."""
    if not _shown_here(report):
        _display_html(repr_html(report), repr(report))


def _shown_here(report: Report) -> bool:
    cell = _SHOWN.get(id(report), (None, None))[0]
    return cell is not None and cell == _execution_count()


def _execution_count() -> int | None:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return shell.execution_count if shell is not None else None


def _display_html(markup: str, text: str) -> None:
    """One output with the HTML and, for a frontend that shows text only, `text`."""
    from IPython.display import display

    display({"text/html": markup, "text/plain": text}, raw=True)


# ----------------------------------------------------------------------------- magics


class _MagicParser(argparse.ArgumentParser):
    def error(self, message: str):  # a magic's mistake must not exit the kernel
        raise ValueError(message)


def _magic_parser() -> argparse.ArgumentParser:
    parser = _MagicParser(prog="%jitscope", add_help=False)
    parser.add_argument("function")
    parser.add_argument("args", nargs="?", default="")
    parser.add_argument("--static", nargs="*", default=[])
    parser.add_argument("--donate", nargs="*", default=[])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-history", action="store_true")
    return parser


def jitscope_line(line: str, namespace: dict[str, Any]) -> None:
    """`%jitscope f "f32[8,128]" [--static n] [--device cpu] [--runs N] [--no-history]`:
    `viz.show` on the function named `f` in the notebook's namespace."""
    try:
        options = _magic_parser().parse_args(shlex.split(line))
    except ValueError as exc:
        raise ValueError(f"%jitscope: {exc}. Usage: {_usage()}") from None
    fn = namespace.get(options.function)
    if not callable(fn):
        raise NameError(f"%jitscope: no function named {options.function!r} in this notebook")
    from viz.target import spec_names

    show(
        fn,
        options.args,
        namespace=spec_names(fn, namespace),  # the names the notebook's cells define
        static=options.static,
        donate=options.donate,
        device=options.device,
        runs=options.runs,
        history=not options.no_history,
    )


def _usage() -> str:
    return '%jitscope FUNCTION "ARGS SPEC" [--static NAME ...] [--device cpu] [--runs N]'


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext viz`: the `%jitscope` line magic and the `%%jitscope_record` cell magic."""

    def jitscope(line: str) -> None:
        jitscope_line(line, ipython.user_ns)

    def jitscope_record(line: str, cell: str) -> Any:
        from viz.recorder import recording

        magic_cell = sys._getframe(1)  # the cell that holds `%%jitscope_record`
        with recording(name=line.strip() or None) as rec:
            rec.hide_stack(magic_cell)  # not a call site
            ipython.run_cell(cell)
        return rec

    ipython.register_magic_function(jitscope, "line", "jitscope")
    ipython.register_magic_function(jitscope_record, "cell", "jitscope_record")


__all__: Sequence[str] = ("load_ipython_extension", "report_html", "show")
