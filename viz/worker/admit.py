"""Demo mode's admission (`viz.demo`): the request demo mode runs instead of the one
asked, or a refusal that says why. Applied twice: by the server's `Worker.ask` before
anything is sent, and by the child before a handler runs. Imports neither Streamlit
nor jax.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import replace
from typing import Any, TypeVar

from viz.demo import DEMO_COMPILER_OPTIONS, LIMITS
from viz.samples import get_sample
from viz.source import list_functions, parse_python
from viz.spec import DTYPES, split_spec
from viz.worker.protocol import Analyze, CacheCalls, Ping, Request, Scaling

R = TypeVar("R", bound=Request)


class Refused(ValueError):
    """A request demo mode does not run; the message says why, `hint` what to do."""

    def __init__(self, message: str, hint: str = "demo mode runs the built-in samples only"):
        super().__init__(message)
        self.hint = hint


def admit(request: R) -> R:
    """The request demo mode runs instead of `request` (code read from the sample's
    file, bounds applied); raises Refused. Which fields a demo request may set is the
    request type's own `DEMO`."""
    if not request.DEMO:
        raise Refused(f"Demo mode does not offer `{request.OP}`.")
    unknown = sorted(request.changed() - request.DEMO)
    if unknown:
        raise Refused(f"Demo mode does not accept {', '.join(unknown)} for `{request.OP}`.")
    if isinstance(request, Ping):
        return request
    code = _sample_code(request.sample_name())
    out = request.running(code)  # never the code the request carried; keeps `sample`
    defined = {f.name for f in list_functions(code)}
    for name in out.functions():
        if name not in defined:
            raise Refused(f"`{name}` is not a function of this sample.")
    names = assigned_names(code)
    for spec in out.specs():
        check_spec(spec, names)
    _bound(out)
    check_compiler_options(out.options() or {})
    if getattr(out, "persistent_cache", False):
        out = replace(out, persistent_cache=False)  # it writes files
    return out


def _sample_code(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise Refused("Demo mode runs only the built-in samples, not your own code.")
    try:
        return get_sample(name).code
    except KeyError:
        raise Refused(f"There is no sample called {name!r}.") from None


def _bound(request: Request) -> None:
    """Refuse requests beyond LIMITS (a clear refusal beats a silent clamp)."""
    if isinstance(request, Analyze):
        _at_most("timed runs", request.runs, LIMITS.runs)
    if isinstance(request, CacheCalls):
        _at_most("calls in one sweep", len(request.calls), LIMITS.calls)
    sizes = request.swept()
    if not isinstance(sizes, list | tuple):
        raise Refused("Sizes must be a list of numbers.")
    _at_most("sizes in one sweep", len(sizes), LIMITS.sizes)
    largest = LIMITS.loop_n if isinstance(request, Scaling) else LIMITS.size
    for size in sizes:
        _at_most("a size", size, largest)


def _at_most(what: str, value: Any, limit: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refused(f"{what.capitalize()} must be a whole number, not {value!r}.")
    if value > limit:
        raise Refused(
            f"Demo mode allows at most {limit} for {what} (asked: {value}).",
            f"use {limit} or fewer",
        )


def check_compiler_options(options: dict[str, Any]) -> None:
    for key, value in options.items():
        allowed = DEMO_COMPILER_OPTIONS.get(key)
        if key.startswith("xla_dump") or allowed is None or str(value) not in allowed:
            raise Refused(f"Demo mode does not allow the compiler option {key}={value}.")


def assigned_names(code: str) -> set[str]:
    """Names the module assigns at its top level (`params = ...`): what a demo spec
    may refer to. Imports and functions are not values a spec passes."""
    names: set[str] = set()
    for node in parse_python(code).body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        for target in targets:
            names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


_EMPTY = re.compile(r"\[\s*\]")


def check_spec(spec: Any, names: set[str]) -> None:
    """Raise Refused unless every item of `spec` is the spec language (arrays, `key`,
    literals, containers of them) or a bare name in `names`."""
    if not isinstance(spec, str):
        raise Refused("An args spec must be text.")
    for index, item in enumerate(split_spec(spec), 1):
        try:
            tree = parse_python(_EMPTY.sub("[()]", item), "eval")
        except (SyntaxError, ValueError, RecursionError):
            continue  # not Python at all: the spec parser reports it, nothing runs
        bad = _first_expression(tree.body, names)
        if bad is not None:
            raise Refused(
                f"item {index} {item!r}: demo mode takes the spec language and the "
                f"sample's own names ({', '.join(sorted(names)) or 'none'}), not `{bad}`.",
                "write arrays as f32[8,128], literals as 3 or 'relu'",
            )


def _first_expression(node: ast.expr, names: set[str]) -> str | None:
    """The first part of `node` that is an expression beyond the spec language."""
    if isinstance(node, ast.Constant):
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return None if isinstance(node.operand, ast.Constant) else ast.unparse(node)
    if isinstance(node, ast.Name):
        return None if node.id in names or node.id == "key" else node.id
    if isinstance(node, ast.Tuple | ast.List):
        return next((b for e in node.elts if (b := _first_expression(e, names))), None)
    if isinstance(node, ast.Dict):
        parts = [*node.keys, *node.values]
        if None in parts:
            return ast.unparse(node)
        return next((b for e in parts if e and (b := _first_expression(e, names))), None)
    if isinstance(node, ast.Subscript):
        return _array_expression(node, names)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "key":
        seed_ok = len(node.args) <= 1 and all(isinstance(a, ast.Constant) for a in node.args)
        return None if seed_ok and not node.keywords else ast.unparse(node)
    return ast.unparse(node)


def _array_expression(node: ast.Subscript, names: set[str]) -> str | None:
    if not (isinstance(node.value, ast.Name) and node.value.id in DTYPES):
        return ast.unparse(node)
    dims = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    known = []
    for dim in dims:
        if isinstance(dim, ast.Name) and dim.id in names:
            continue
        if not (isinstance(dim, ast.Constant) and isinstance(dim.value, int)):
            return ast.unparse(node)
        known.append(dim.value)
    if math.prod(known) > LIMITS.elements:
        return f"{ast.unparse(node)} (more than {LIMITS.elements:,} elements)"
    return None
