"""Explore's compile settings and their variants (issue #13): XLA compiler options (the
offered ones and free-form KEY=VALUE lines), the Donation panel, and the quick
variants that re-run a result with one thing changed and land in the diff view.
No jax here: the worker compiles; this module builds requests and lays out answers.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from ui.navigation import open_diff
from ui.results import Result, add, record
from ui.workers import ask
from viz import demo
from viz.options import COMMON_OPTIONS, OPTIONS_BY_KEY, parse_options
from viz.platforms.cpu import EXAMPLE_OPTION
from viz.program import Program
from viz.report import Report
from viz.variants import Variant, options_text, variants
from viz.worker.protocol import Analyze

FREE_KEY = "in_opt_free"  # "in_" keys are reset with the program's other inputs


# -- the settings of the next analysis -------------------------------------------
def split_options(options: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """(offered options with an offered value, the rest as KEY=VALUE lines)."""
    picked = {
        k: v for k, v in options.items() if k in OPTIONS_BY_KEY and v in OPTIONS_BY_KEY[k].values
    }
    free = "\n".join(f"{k}={v}" for k, v in options.items() if k not in picked)
    return picked, free


def options_input(prog: Program) -> tuple[dict[str, Any], str | None]:
    """The compiler-options expander: (the options to send, an error for a bad free-form
    line, in which case nothing may be sent)."""
    picked, free = split_options(prog.settings.compiler_options)
    count = len(prog.settings.compiler_options)
    title = "Compiler options" + (f" · {count} set" if count else "")
    options: dict[str, Any] = {}
    with st.expander(title, expanded=bool(count), icon=":material/tune:"):
        st.caption("For this compile only: `Lowered.compile(compiler_options=…)`")
        for option in COMMON_OPTIONS:
            on_key, value_key = f"in_opt_on_{option.key}", f"in_opt_val_{option.key}"
            st.session_state.setdefault(on_key, option.key in picked)
            st.session_state.setdefault(value_key, picked.get(option.key, option.values[0]))
            on = st.checkbox(f"`{option.key}`", key=on_key)
            value_column, text_column = st.columns([2, 3])
            value = value_column.selectbox(
                option.key,
                option.values,
                key=value_key,
                format_func=str,
                label_visibility="collapsed",
                disabled=not on,
            )
            text_column.caption(option.explanation)
            if on:
                options[option.key] = value
        if demo.enabled():  # demo mode: only the offered options, with their values
            return options, None
        st.session_state.setdefault(FREE_KEY, free)
        text = st.text_area(
            "Other options, one `KEY=VALUE` per line",
            key=FREE_KEY,
            height=80,
            placeholder=EXAMPLE_OPTION,
            help="values parse as Python literals (True, 3, 0.5), else as text",
        )
        try:
            options.update(parse_options(text))
        except ValueError as exc:
            error = f"Compiler options: {exc}. Write one `KEY=VALUE` per line."
            st.error(error, icon=":material/error:")
            return options, error
    return options, None


def settings_caption(prog: Program) -> str:
    parts = [
        f"args spec: `{prog.settings.args or '(none)'}`",
        f"static: {', '.join(prog.settings.static) or 'none'}",
    ]
    if prog.settings.donate:
        parts.append(f"donate: {', '.join(prog.settings.donate)}")
    if prog.settings.compiler_options:
        parts.append(f"options: {options_text(prog.settings.compiler_options)}")
    return " · ".join(parts)


# -- results ----------------------------------------------------------------------
def compile_settings_caption(report: Report) -> None:
    """The Overview's line saying which options and donations this compile used."""
    options, donate = report.compiler_options, report.donate
    if not (options or donate):
        return
    parts = [f"compiler options {options_text(options)}"] if options else []
    if donate:
        parts.append("donated " + ", ".join(f"`{d}`" for d in donate))
    st.caption("Compiled with " + " · ".join(parts), help="report.compiler_options, report.donate")


# -- quick variants -----------------------------------------------------------------
def quick_variants(res: Result) -> None:
    """One click re-runs the shown result with one change and opens the diff view."""
    st.markdown("**Quick variants** · re-run with one change, then compare")
    row = st.container(horizontal=True, wrap=True, gap="small")  # whole labels, wrapped
    for variant in variants(res.request(runs=res.report.timings.runs)):
        with row:
            variant_button(res, variant)


def variant_button(res: Result, variant: Variant | str, key: str = "") -> None:
    """The button that re-runs `res` with `variant` (or the variant of that label) and
    opens the diff; `key`: a prefix for a second place on the page."""
    if isinstance(variant, str):
        found = variants(res.request(runs=res.report.timings.runs))
        variant = next((v for v in found if v.label == variant), None)
        if variant is None:
            return
    if (
        st.button(
            variant.label,
            icon=variant.icon,
            key=f"{key}variant_{variant.label}",
            disabled=variant.request is None,
            help=variant.help if variant.request else variant.why_not,
        )
        and variant.request is not None
    ):
        run_variant(res, variant.label, variant.request)


def run_variant(original: Result, label: str, request: Analyze) -> None:
    """Analyze, record and keep the variant like any run, then diff it with the original
    (a failed variant stays in Explore with its error card)."""
    with st.spinner(f"{label}: tracing, lowering, compiling and timing in the worker…"):
        reply = ask(request)
    variant = Result(request, reply.report, reply.stdout)
    record(variant)
    add(variant)
    if not variant.ok:
        st.rerun()
    open_diff(original.diff_side(), variant.diff_side())
