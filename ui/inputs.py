"""Explore's left column: the title and Analyze, the sample, the inputs (the function,
its arguments and how to compile it) folded into one line once a result is shown, and
the code editor, with places kept for what only the result knows (the result picker,
the line picker). Layout only: no jax here."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from ui import editor, follow, results, sharding, variants
from ui.program import program, program_from_sample, reset_inputs, samples_by_title
from ui.workers import device
from viz import demo
from viz.program import Program, join_spec, spec_rows
from viz.source import list_functions

TAGLINE = (
    ("Pick a sample" if demo.enabled() else "Paste a function")
    + ", describe its inputs, and see what `jax.jit` makes of it: "
    "trace → jaxpr, lower → StableHLO, compile → optimized HLO, run → timings."
)
RUNS = 20  # timed runs, unless the user says otherwise


def load_sample() -> None:
    name = samples_by_title()[st.session_state.sample_pick]
    st.session_state.program = program_from_sample(name)
    reset_inputs(also=(follow.LINE,))


@dataclass
class Inputs:
    """What the left column asks for, and its places for what only the result knows:
    the result picker (under the inputs) and the line picker (under the editor)."""

    analyze: bool
    runs: int
    problem: str | None  # forbids sending the request
    results_place: DeltaGenerator
    lines_place: DeltaGenerator


def draw(auto: bool, title_place: DeltaGenerator, code_place: DeltaGenerator) -> Inputs:
    """The title and Analyze; then the sample; the inputs (the function, its arguments
    and how to compile it), folded into one line once a result is shown; the code
    editor. The editor runs first (the rest reads its code) but is drawn below them;
    `auto`: an analysis starts without a click (the inputs stay folded)."""
    prog = program()
    title = title_place.container(horizontal=True, vertical_alignment="center", wrap=False)
    head, body = code_place.container(), code_place.container()
    with body:
        code, submitted = code_input(prog)
    with title:
        st.title("jitscope", help=TAGLINE, width="content")
        clicked = st.button(
            "Analyze",
            type="primary",
            icon=":material/play_arrow:",
            width="stretch" if title_place is code_place else "content",
            help=None if editor.plain() else "or Ctrl+Enter (⌘+Enter) in the editor",
        )
    with head:
        if prog.origin:  # opened from a recording: where the code came from
            st.info(prog.origin, icon=":material/radio_button_checked:")
        sample_picker(prog)
        functions = function_choices(code, prog)
        rows = argument_rows(code, prog)
        runs = st.session_state.setdefault("runs_w", RUNS)
        with st.expander(
            inputs_summary(prog, rows, runs),
            expanded=not (results.results() or auto),
            key="inputs_open",
            icon=":material/tune:",
        ):
            st.selectbox("Function", functions, key="fn_w", help="the function to jit")
            problem = settings_input(prog, rows)
        results_place = st.container()
    return Inputs(clicked or submitted, int(runs), problem, results_place, body.container())


def code_input(prog: Program) -> tuple[str, bool]:
    """The editor (demo mode: read only, the sample's code); (its code, Ctrl+Enter)."""
    code = prog.settings.code
    marks = follow.editor_marks(results.shown_result(), code)
    if demo.enabled() and editor.plain():  # no code widget: the code is the sample file's
        st.code(code, language="python", line_numbers=True, height=380)
        return code, False
    edit = editor.code_editor(
        code,
        "code_w",
        marks=marks,
        read_only=demo.enabled(),
        fold_docstring=prog.settings.sample is not None,
        lines=(12, 26),
    )
    if not demo.enabled():
        prog.edit(edit.code)
    if edit.follow is not None:
        follow.follow(edit.follow)
        st.rerun()  # the editor above marks it
    if editor.plain() and not demo.enabled():
        with st.expander("Highlighted, with line numbers"):
            st.code(edit.code, language="python", line_numbers=True)
    return prog.settings.code, edit.submitted


def sample_picker(prog: Program) -> None:
    titles = samples_by_title()
    current = next((t for t, n in titles.items() if n == prog.settings.sample), None)
    if current is None and st.session_state.get("sample_pick") is not None:
        # edited code is no sample's: set (not dropped, which the browser's own copy of
        # the widget outlives), so that the picker says so, not the sample's title
        st.session_state["sample_pick"] = None
    st.selectbox(
        "Sample",
        list(titles),
        index=list(titles).index(current) if current else None,
        key="sample_pick",
        on_change=load_sample,
        placeholder="your own code",
        label_visibility="collapsed",
    )


def function_choices(code: str, prog: Program) -> list[str]:
    """The code's functions; the program's function is the one picked (its widget is
    drawn with the inputs, after their summary names it)."""
    functions = [f.name for f in list_functions(code)]
    if prog.settings.function not in functions and functions:
        prog.settings.function = functions[-1]
    st.session_state.setdefault("fn_w", prog.settings.function)
    if st.session_state.fn_w not in functions:
        st.session_state.fn_w = prog.settings.function
    prog.settings.function = st.session_state.fn_w
    return functions


def inputs_summary(prog: Program, rows: list[tuple[str, str]], runs: int) -> str:
    """The inputs in one line, as the widgets below hold them now: `mlp(params,
    f32[32,784]) on cpu · 20 timed runs`."""
    state = st.session_state
    spec = join_spec([state[f"in_spec_{key}"] for _, key in rows])
    static = [name for name, key in rows if state[f"in_static_{key}"]]
    parts = [f"`{prog.settings.function or '?'}({spec})` on {device()}"]
    parts.append(f"{runs} runs" if runs else "compile only")
    if static:
        parts.append("static " + ", ".join(static))
    if prog.settings.compiler_options:
        parts.append(f"{len(prog.settings.compiler_options)} compiler options")
    if prog.settings.mesh:
        parts.append(f"mesh {prog.settings.mesh}")
    return " · ".join(parts)


def settings_input(prog: Program, rows: list[tuple[str, str]]) -> str | None:
    """The argument table, mesh, compiler options and timed runs; returns the problem
    that forbids sending, if any."""
    st.caption("Arguments · spec per parameter, e.g. `f32[8,128]`, `3`, `key`, `params`")
    prog.settings.args, prog.settings.static, prog.settings.donate = argument_table(rows)
    mesh_problem = sharding.mesh_input(prog, device())
    options, problem = variants.options_input(prog)
    if problem is None:
        prog.settings.compiler_options = options
    st.number_input(
        "Timed runs",
        0,
        demo.LIMITS.runs if demo.enabled() else 200,
        key="runs_w",
        help="0 = compile only: inputs are never allocated",
    )
    st.caption(variants.settings_caption(prog))
    return problem or mesh_problem


def argument_rows(code: str, prog: Program) -> list[tuple[str, str]]:
    """(parameter, its widgets' key) for each parameter of the function, each widget's
    state set from the program the first time."""
    rows = []
    for name, item in spec_rows(code, prog.settings.function, prog.settings.args):
        key = f"{prog.settings.function}_{name}"
        st.session_state.setdefault(f"in_spec_{key}", item)
        st.session_state.setdefault(f"in_static_{key}", name in prog.settings.static)
        st.session_state.setdefault(f"in_donate_{key}", name in prog.settings.donate)
        rows.append((name, key))
    return rows


def argument_table(rows: list[tuple[str, str]]) -> tuple[str, list[str], list[str]]:
    """One row per parameter: its spec, static, and donate (only for a dynamic one).
    Returns (spec, static names, donated names)."""
    widths = [5, 8, 3, 4]
    head = st.columns(widths)
    for column, text in zip(head, ("parameter", "spec", "static", "donate"), strict=True):
        column.caption(text)
    items, static, donate = [], [], []
    for name, key in rows:
        cols = st.columns(widths, vertical_alignment="center")
        cols[0].markdown(f"`{name}`")
        items.append(cols[1].text_input(name, key=f"in_spec_{key}", label_visibility="collapsed"))
        is_static = cols[2].checkbox("static", key=f"in_static_{key}", label_visibility="collapsed")
        static += [name] if is_static else []
        donated = cols[3].checkbox(
            "donate",
            key=f"in_donate_{key}",
            label_visibility="collapsed",
            disabled=is_static,
            help="a static argument is not a buffer" if is_static else "donate its buffer",
        )
        donate += [name] if donated and not is_static else []
    return join_spec(items), static, donate
