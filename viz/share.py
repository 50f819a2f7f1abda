"""Share links: a program as URL query parameters, and a link back into a program.

A link runs at once only for a built-in sample: a link that carries code fills the
editor and waits for the user to press Analyze (code from a link is a stranger's).
No jax, no streamlit: the page hands in the query parameters and shows the notices."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from viz.options import parse_option
from viz.program import Program
from viz.samples import get_sample

Params = Mapping[str, list[str]]  # every value of each query parameter, in order


def link(program: Program, device: str, demo: bool) -> dict[str, str | list[str]]:
    """The query parameters that reopen `program` on `device`: the sample's name when
    it is a sample's code (and always in demo mode), else the code itself."""
    s = program.settings
    params: dict[str, str | list[str]] = {
        "function": s.function or "",
        "args": s.args,
        "static": ",".join(s.static),
        "device": device,
    }
    if s.donate:
        params["donate"] = ",".join(s.donate)
    if s.mesh:
        params["mesh"] = s.mesh
    if s.compiler_options:
        params["option"] = [f"{k}={v}" for k, v in s.compiler_options.items()]
    if s.sample or demo:
        params["sample"] = s.sample or ""
    else:
        params["code"] = s.code
    return params


@dataclass
class Opened:
    """What a link opens: the program (None: the link names none), whether to analyze
    it at once, and what to tell the user."""

    program: Program | None = None
    run_now: bool = False
    notices: list[str] = field(default_factory=list)


def open_link(params: Params, current: Program, samples: set[str], demo: bool) -> Opened:
    """The program a link describes, starting from its sample (or `current`)."""
    last = {k: v[-1] for k, v in params.items() if v}
    if not ("sample" in last or "code" in last):
        return Opened()
    if demo and "code" in last:
        return Opened(notices=["Demo mode: links cannot carry code; this one is ignored."])
    program = current
    if last.get("sample") in samples:
        program = Program.from_sample(get_sample(last["sample"]))
    changes: dict[str, Any] = {k: last[k] for k in ("function", "args", "mesh") if k in last}
    for name in ("static", "donate"):
        if name in last:
            changes[name] = [s for s in last[name].split(",") if s]
    notices = []
    if "option" in params:
        try:
            changes["compiler_options"] = dict(parse_option(o) for o in params["option"])
        except ValueError as exc:
            notices.append(f"This link's compiler options are ignored: {exc}")
    extra = program.extra
    if "code" in last and last["code"] != program.settings.code:  # then it is not the sample
        changes.update(code=last["code"], sample=None)
        extra = {}
    program = replace(program, settings=replace(program.settings, **changes), extra=extra)
    if "code" not in last:
        return Opened(program, run_now=True, notices=notices)
    notices.append("Code from a link: read it, then press Analyze to run it.")
    return Opened(program, run_now=False, notices=notices)
