"""The current program (`viz.program.Program`), shared by every page and kept
outside widget keys so that page switches lose nothing; samples and spec rows."""

from __future__ import annotations

import streamlit as st

from viz import demo
from viz.platforms import available_with
from viz.program import Program
from viz.samples import default_sample, get_sample, list_samples
from viz.source import list_functions

# Widget keys of the program's inputs: reset whenever another program is opened
INPUT_KEYS = ("in_", "code_w", "fn_w")


def program() -> Program:
    """This session's program, kept outside widget keys so that page switches (which
    drop widget state) lose nothing."""
    if "program" not in st.session_state:  # a session's first run: a link may name a sample
        linked = st.query_params.get("sample")
        name = linked if linked in sample_names() else default_sample().name
        st.session_state.program = program_from_sample(name)
    prog: Program = st.session_state.program
    if demo.enabled() and prog.settings.sample not in sample_names():  # demo: a sample's code only
        prog = st.session_state.program = program_from_sample(default_sample().name)
    if demo.enabled():
        prog.settings.code = get_sample(prog.settings.sample or "").code
    return prog


def program_from_sample(name: str) -> Program:
    return Program.from_sample(get_sample(name))


def reset_inputs(also: tuple[str, ...] = ()) -> None:
    """Forget the program's input widgets (and the keys in `also`): they are drawn
    again from the program."""
    for key in list(st.session_state):
        if key.startswith(INPUT_KEYS) or key in also:
            del st.session_state[key]


def sample_names() -> set[str]:
    """The built-in samples' names: the only programs a link or demo mode may name."""
    return {s.name for s in list_samples()}


def samples_by_title() -> dict[str, str]:
    return {s.title: s.name for s in list_samples()}


def functions_of(code: str) -> list[str]:
    return [f.name for f in list_functions(code)]


def params_of(code: str, function: str) -> tuple[str, ...]:
    """The parameters of `function` in `code` (none when it is not there)."""
    return next((f.params for f in list_functions(code) if f.name == function), ())


def open_program(program: Program, device: str | None = None) -> None:
    """Make `program` Explore's current program, with fresh widgets and nothing run:
    Explore shows it and waits for Analyze (History and Recordings open runs this way)."""
    st.session_state.program = program
    reset_inputs(also=("sample_pick",))
    st.session_state.setdefault("results", [])  # Explore must not auto-analyze
    st.session_state.query_applied = True
    if device and device in available_with(device):
        st.session_state.device = device
