"""Explore's compile settings and their variants (issue #13): XLA compiler options (the
offered ones and free-form KEY=VALUE lines), the Donation panel, and the quick
variants that re-run a result with one thing changed and land in the diff view.
No jax here: the worker compiles; this module builds requests and lays out answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from ui.navigation import open_diff
from ui.program import join_spec, spec_rows
from ui.results import Result, add, record
from ui.workers import request
from viz import demo
from viz.options import COMMON_OPTIONS, FUSION_OFF, OPTIONS_BY_KEY, parse_options

FREE_KEY = "in_opt_free"  # "in_" keys are reset with the program's other inputs


# -- the settings of the next analysis -------------------------------------------
def settings_of(prog: dict[str, Any]) -> dict[str, Any]:
    """The program's donated parameters and compiler options (older program dicts,
    from a link or the History page, may lack them)."""
    prog.setdefault("donate", [])
    prog.setdefault("compiler_options", {})
    return prog


def split_options(options: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """(offered options with an offered value, the rest as KEY=VALUE lines)."""
    picked = {
        k: v for k, v in options.items() if k in OPTIONS_BY_KEY and v in OPTIONS_BY_KEY[k].values
    }
    free = "\n".join(f"{k}={v}" for k, v in options.items() if k not in picked)
    return picked, free


def options_text(options: dict[str, Any]) -> str:
    return ", ".join(f"`{k}={v}`" for k, v in options.items())


def options_input(prog: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The compiler-options expander: (the options to send, an error for a bad free-form
    line, in which case nothing may be sent)."""
    picked, free = split_options(prog["compiler_options"])
    count = len(prog["compiler_options"])
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
            placeholder="xla_cpu_use_thunk_runtime=False",
            help="values parse as Python literals (True, 3, 0.5), else as text",
        )
        try:
            options.update(parse_options(text))
        except ValueError as exc:
            error = f"Compiler options: {exc}. Write one `KEY=VALUE` per line."
            st.error(error, icon=":material/error:")
            return options, error
    return options, None


def settings_caption(prog: dict[str, Any]) -> str:
    parts = [
        f"args spec: `{prog['args'] or '(none)'}`",
        f"static: {', '.join(prog['static']) or 'none'}",
    ]
    if prog["donate"]:
        parts.append(f"donate: {', '.join(prog['donate'])}")
    if prog["compiler_options"]:
        parts.append(f"options: {options_text(prog['compiler_options'])}")
    return " · ".join(parts)


# -- results ----------------------------------------------------------------------
def compile_settings_caption(report: dict[str, Any]) -> None:
    """The Overview's line saying which options and donations this compile used."""
    options, donate = report.get("compiler_options") or {}, report.get("donate") or []
    if not (options or donate):
        return
    parts = [f"compiler options {options_text(options)}"] if options else []
    if donate:
        parts.append("donated " + ", ".join(f"`{d}`" for d in donate))
    st.caption("Compiled with " + " · ".join(parts), help="report.compiler_options, report.donate")


# -- quick variants -----------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    label: str
    icon: str
    help: str
    settings: dict[str, Any] | None  # the request for the variant; None: not applicable
    why_not: str = ""


def arrays(settings: dict[str, Any]) -> list[tuple[str, int, str, tuple[int, ...]]]:
    """(parameter, spec index, dtype, shape) of each dynamic array parameter."""
    from viz.spec.text import array_item_parts, split_spec

    rows = spec_rows(settings["code"], settings["function"], settings["args"])
    items = split_spec(settings["args"])
    found = []
    for index, (name, _) in enumerate(rows[: len(items)]):
        parts = array_item_parts(items[index])
        if parts is not None and name not in settings["static"]:
            found.append((name, index, *parts))
    return found


def fusion_off(settings: dict[str, Any]) -> Variant:
    options = settings["compiler_options"]
    done = all(options.get(k) == v for k, v in FUSION_OFF.items())
    return Variant(
        "Fusion off",
        ":material/call_split:",
        f"the same compile with {options_text(FUSION_OFF)}: every op its own kernel",
        None if done else {**settings, "compiler_options": {**options, **FUSION_OFF}},
        "this result was compiled with fusion off",
    )


def donate_arrays(settings: dict[str, Any]) -> Variant:
    names = [name for name, *_ in arrays(settings)]
    donate = settings["donate"] + [n for n in names if n not in settings["donate"]]
    applies = bool(names) and donate != settings["donate"]
    return Variant(
        "Donate the arrays",
        ":material/recycling:",
        f"donate {', '.join(names)}: XLA may write outputs into their buffers",
        {**settings, "donate": donate} if applies else None,
        "every array parameter is donated already" if names else "no array parameter",
    )


def batch_x2(settings: dict[str, Any]) -> Variant:
    from viz.spec.text import array_item, split_spec

    found = [a for a in arrays(settings) if a[3]]
    if not found:
        return Variant("Batch ×2", ":material/stacks:", "", None, "no array parameter with a shape")
    name, index, dtype, shape = found[0]
    items = split_spec(settings["args"])
    items[index] = array_item(dtype, (shape[0] * 2, *shape[1:]))
    return Variant(
        "Batch ×2",
        ":material/stacks:",
        f"`{name}`: {array_item(dtype, shape)} → {items[index]}",
        {**settings, "args": join_spec(items)},
    )


def quick_variants(res: Result) -> None:
    """One click re-runs the shown result with one change and opens the diff view."""
    settings = res.settings()
    options = [fusion_off(settings), donate_arrays(settings), batch_x2(settings)]
    text, *columns = st.columns([3, 2, 3, 2], vertical_alignment="center")
    text.markdown("**Quick variants** · re-run with one change, then compare")
    chosen = None
    for column, variant in zip(columns, options, strict=True):
        if column.button(
            variant.label,
            icon=variant.icon,
            key=f"variant_{variant.label}",
            disabled=variant.settings is None,
            help=variant.help if variant.settings else variant.why_not,
            width="stretch",
        ):
            chosen = variant
    if chosen is not None and chosen.settings is not None:
        run_variant(res, chosen.label, chosen.settings)


def run_variant(original: Result, label: str, settings: dict[str, Any]) -> None:
    """Analyze, record and keep the variant like any run, then diff it with the original
    (a failed variant stays in Explore with its error card)."""
    runs = int((original.report.get("timings") or {}).get("runs") or 0)
    with st.spinner(f"{label}: tracing, lowering, compiling and timing in the worker…"):
        report = request("analyze", runs=runs, **settings)
    for field in ("function", "args", "static"):  # a crash comes back as a bare error
        report.setdefault(field, settings[field])
    variant = Result(report, settings["code"], sample=original.sample)
    variant.history_id = record(report, variant.code, variant.sample)
    add(variant)
    if not variant.ok:
        st.rerun()
    open_diff(original.diff_side(), variant.diff_side())
