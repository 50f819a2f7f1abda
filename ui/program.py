"""The current program (code, function, args, static), shared by every page and kept
outside widget keys so that page switches lose nothing; samples and spec rows."""

from __future__ import annotations

from typing import Any

import streamlit as st

from viz import demo
from viz.samples import default_sample, get_sample, list_samples
from viz.source import list_functions


def program() -> dict[str, Any]:
    """code, function, args, static, sample: kept outside widget keys so that page
    switches (which drop widget state) lose nothing."""
    if "program" not in st.session_state:  # a session's first run: a link may name a sample
        linked = st.query_params.get("sample")
        name = linked if linked in sample_names() else default_sample().name
        st.session_state.program = program_from_sample(name)
    prog = st.session_state.program
    if demo.enabled():  # whatever the session state says, the code is the sample's
        if prog.get("sample") not in sample_names():
            prog.update(program_from_sample(default_sample().name))
        prog["code"] = get_sample(prog["sample"]).code
    return prog


def program_from_sample(name: str) -> dict[str, Any]:
    sample = get_sample(name)
    return {
        "sample": sample.name,
        "code": sample.code,
        "function": sample.function,
        "args": sample.args,
        "static": list(sample.static),
        "extra": dict(sample.extra),
    }


def spec_rows(code: str, function: str, args: str) -> list[tuple[str, str]]:
    """(parameter, spec item) for each parameter of `function` in `code`."""
    from viz.spec import split_spec  # numpy and ml_dtypes: after app.py has started the worker

    info = next((f for f in list_functions(code) if f.name == function), None)
    items = split_spec(args)
    params = list(info.params) if info else [f"arg{i}" for i in range(len(items))]
    params += [f"arg{i}" for i in range(len(params), len(items))]
    return [(p, items[i] if i < len(items) else "") for i, p in enumerate(params)]


def join_spec(items: list[str]) -> str:
    """Rows back into one spec; trailing empty rows are parameters left at their default."""
    while items and not items[-1].strip():
        items = items[:-1]
    return ", ".join(item.strip() for item in items)


def sample_names() -> set[str]:
    """The built-in samples' names: the only programs a link or demo mode may name."""
    return {s.name for s in list_samples()}


def samples_by_title() -> dict[str, str]:
    return {s.title: s.name for s in list_samples()}


def functions_of(code: str) -> list[str]:
    return [f.name for f in list_functions(code)]


def open_program(program: dict[str, Any], device: str | None = None) -> None:
    """Make `program` Explore's current program, with fresh widgets and nothing run:
    Explore shows it and waits for Analyze (History and Recordings open runs this way)."""
    from viz.worker import available_devices

    st.session_state.program = program
    for key in list(st.session_state):
        if key.startswith(("in_", "code_w", "fn_w")) or key == "sample_pick":
            del st.session_state[key]
    st.session_state.setdefault("results", [])  # Explore must not auto-analyze
    st.session_state.query_applied = True
    if device in available_devices():
        st.session_state.device = device
