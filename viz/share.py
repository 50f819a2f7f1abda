"""Share links: a program as URL query parameters, and a link back into a program.

A link runs at once only for a built-in sample: a link that carries code fills the
editor and waits for the user to press Analyze (code from a link is a stranger's).
No jax, no streamlit: the page hands in the query parameters and shows the notices."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from viz.options import parse_option
from viz.program import Program
from viz.samples import get_sample

Params = Mapping[str, list[str]]  # every value of each query parameter, in order


def link(program: Program, device: str, demo: bool) -> dict[str, str | list[str]]:
    """The query parameters that reopen `program`: the sample's name when it is a
    sample's code (and always in demo mode), else the code itself."""
    params: dict[str, str | list[str]] = {
        "function": program.function,
        "args": program.args,
        "static": ",".join(program.static),
        "device": device,
    }
    if program.donate:
        params["donate"] = ",".join(program.donate)
    if program.mesh:
        params["mesh"] = program.mesh
    if program.compiler_options:
        params["option"] = [f"{k}={v}" for k, v in program.compiler_options.items()]
    if program.sample or demo:
        params["sample"] = program.sample or ""
    else:
        params["code"] = program.code
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
    program = replace(program, **{k: last[k] for k in ("function", "args", "mesh") if k in last})
    for name in ("static", "donate"):
        if name in last:
            setattr(program, name, [s for s in last[name].split(",") if s])
    notices = []
    if "option" in params:
        try:
            program.compiler_options = dict(parse_option(o) for o in params["option"])
        except ValueError as exc:
            notices.append(f"This link's compiler options are ignored: {exc}")
    if "code" not in last:
        return Opened(program, run_now=True, notices=notices)
    if last["code"] != program.code:  # another code than the sample's: it is not the sample
        program = replace(program, code=last["code"], sample=None, extra={})
    notices.append("Code from a link: read it, then press Analyze to run it.")
    return Opened(program, run_now=False, notices=notices)
