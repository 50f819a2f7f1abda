"""The trace by the user's source lines: time from the sampler's stacks, runs from the
line counter, equations from the jaxpr (each equation's `source_info` holds the stack
that made it), and the Python loops that unrolled into copies of their body."""

from __future__ import annotations

import ast
import linecache
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from viz.compile_profile.frames import CALLER, USER, UserCode
from viz.compile_profile.model import TraceLine, UnrolledLoop
from viz.compile_profile.sampler import Line, Stack, Step
from viz.where import user_where

LOOP_MIN = 3  # fewer iterations than this are not worth folding (viz.graph.fold.FOLD_MIN)
Where = tuple[str, int]  # (file, line)


@dataclass
class LoopSpan:
    """A `for` or `while` loop of a user's file: its header and its body's lines."""

    file: str
    header: int
    first: int  # the body's first line: how often it ran is how often the loop turned
    last: int
    function: str


@dataclass
class EqnCounts:
    """Equations of a jaxpr (nested ones included) by the user's lines above them."""

    total: int = 0
    by_line: Counter[Where] = field(default_factory=Counter)  # every user line on its stack
    by_loop: Counter[int] = field(default_factory=Counter)  # index into the loops given


def statement_runs(steps: Counter[Step]) -> Counter[Line]:
    """How often each statement ran, on its first line, from a frame's moves between
    lines (`LineCounter`): a move onto a statement's first line counts, unless it
    comes from inside that statement (a `with` line again on the way out, a `for` line
    again for the next turn, a statement spread over lines). A file without source
    counts every move."""
    runs: Counter[Line] = Counter()
    spans: dict[str, dict[int, int] | None] = {}
    for (code, before, line), n in steps.items():
        file = code.co_filename
        if file not in spans:
            spans[file] = _statement_ends(file)
        if _starts_statement(spans[file], before, line):
            runs[(code, line)] += n
    return runs


def _starts_statement(ends: dict[int, int] | None, before: int | None, line: int) -> bool:
    if ends is None:
        return True
    inside = before is not None and line <= before <= ends.get(line, -1)
    return line in ends and not inside


def _statement_ends(file: str) -> dict[int, int] | None:
    """First line → last line of the outermost statement starting there (None: the
    file has no source that parses)."""
    try:
        tree = ast.parse("".join(linecache.getlines(file)))
    except (SyntaxError, ValueError):
        return None
    ends: dict[int, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            last = node.end_lineno or node.lineno
            ends[node.lineno] = max(ends.get(node.lineno, last), last)
    return ends or None


def where_of(line: Line) -> Where:
    code, number = line
    return code.co_filename, number


def count_eqns(closed_jaxpr: Any, user: UserCode, loops: list[LoopSpan]) -> EqnCounts:
    """Every equation of `closed_jaxpr` and of the jaxprs inside it, each counted once
    on every user line of the stack that made it (and on each loop around one). An
    equation inside a nested jaxpr also counts on the lines of the equation that holds
    it: JAX cuts the stack of a jitted function's equations at its own boundary (one
    traced function serves every call site), so `jnp.where`'s equations name no line
    of the user's, while the `pjit` that holds them does."""
    from viz.jax_private import code_line_finder, jaxprs_in_params

    addr2line = code_line_finder()
    counts = EqnCounts()
    loops_by_file: dict[str, list[tuple[int, LoopSpan]]] = {}
    for k, loop in enumerate(loops):
        loops_by_file.setdefault(loop.file, []).append((k, loop))
    todo: list[tuple[Any, frozenset[Where]]] = [(_jaxpr_of(closed_jaxpr), frozenset())]
    while todo:
        jaxpr, outer = todo.pop()
        for eqn in jaxpr.eqns:
            counts.total += 1
            lines = outer | _user_lines(eqn.source_info.traceback, user, addr2line)
            counts.by_line.update(lines)
            inside = {
                k
                for file, number in lines
                for k, loop in loops_by_file.get(file, ())
                if loop.first <= number <= loop.last
            }
            counts.by_loop.update(inside)
            todo.extend((_jaxpr_of(j), lines) for j in jaxprs_in_params(eqn.params))
    return counts


def _jaxpr_of(jaxpr: Any) -> Any:
    return getattr(jaxpr, "jaxpr", jaxpr)  # a ClosedJaxpr's, or the Jaxpr itself


def _user_lines(traceback: Any, user: UserCode, addr2line: Any) -> frozenset[Where]:
    """The user's lines of a traceback (innermost first), up to jitscope's own frames:
    the ones beyond are the caller's, not the trace's."""
    if traceback is None:
        return frozenset()
    lines = set()
    codes, lastis = traceback.raw_frames()
    for code, lasti in zip(codes, lastis, strict=False):
        kind = user(code)
        if kind == USER:
            lines.add((code.co_filename, addr2line(code, lasti)))
        elif kind == CALLER:
            break
    return frozenset(lines)


def trace_lines(
    stacks: Counter[Stack], runs: Counter[Line], eqns: EqnCounts
) -> tuple[list[TraceLine], float]:
    """One row per user line that the sampler saw or that made equations, the slowest
    first; and the time with any user line on the stack."""
    total: Counter[Where] = Counter()
    own: Counter[Where] = Counter()
    names: dict[Where, str] = {}
    user_s = 0.0
    for stack, seconds in stacks.items():
        if not stack:
            continue
        user_s += seconds
        for where in {where_of(line) for line in stack}:
            total[where] += seconds
        own[where_of(stack[-1])] += seconds
        names.update((where_of(line), line[0].co_name) for line in stack)
    calls: Counter[Where] = Counter()
    for line, n in runs.items():
        calls[where_of(line)] += n
        names.setdefault(where_of(line), line[0].co_name)
    rows = [
        TraceLine(
            where=user_where(file, number),
            function=names.get((file, number), ""),
            seconds=float(total[(file, number)]),
            self_seconds=float(own[(file, number)]),
            calls=calls[(file, number)],
            eqns=eqns.by_line[(file, number)],
            text=linecache.getline(file, number).strip(),
        )
        for file, number in set(total) | set(eqns.by_line)
    ]
    rows.sort(key=lambda r: (-r.seconds, -r.eqns, r.where))
    return rows, user_s


def find_loops(files: Iterable[str]) -> list[LoopSpan]:
    """The `for` and `while` loops of each file (none for a file that does not parse
    or is not on disk)."""
    found = []
    for file in sorted(set(files)):
        source = "".join(linecache.getlines(file))
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            continue
        found.extend(_loops(tree, file))
    return found


def _loops(tree: ast.AST, file: str) -> Iterator[LoopSpan]:
    functions: list[tuple[str, ast.AST]] = [("<module>", tree)]
    while functions:
        name, scope = functions.pop()
        for node in _walk_scope(scope):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                functions.append((node.name, node))
            elif isinstance(node, ast.For | ast.AsyncFor | ast.While) and node.body:
                last = node.body[-1].end_lineno or node.body[-1].lineno
                yield LoopSpan(file, node.lineno, node.body[0].lineno, last, name)


def _walk_scope(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of one function's body (a nested function's body is its own scope)."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            todo.extend(ast.iter_child_nodes(node))


def unrolled_loops(
    loops: list[LoopSpan], runs: Counter[Line], eqns: EqnCounts
) -> list[UnrolledLoop]:
    """The loops whose body ran LOOP_MIN times or more during the trace and made
    equations, the one that made most first."""
    by_where: Counter[Where] = Counter()
    for line, n in runs.items():
        by_where[where_of(line)] += n
    found = []
    for k, loop in enumerate(loops):
        iterations = by_where[(loop.file, loop.first)]
        made = eqns.by_loop[k]
        if iterations >= LOOP_MIN and made:
            share = made / eqns.total if eqns.total else 0.0
            where = user_where(loop.file, loop.header)
            found.append(UnrolledLoop(where, loop.function, iterations, made, share))
    found.sort(key=lambda loop: (-loop.eqns, loop.where))
    return found


def user_files(stacks: Iterable[Stack], runs: Iterable[Line]) -> set[str]:
    """The files of every user line seen that have source (the loops are looked for in
    these): `<your code>` and a notebook's cells have theirs in `linecache`."""
    files = {code.co_filename for stack in stacks for code, _ in stack}
    files.update(code.co_filename for code, _ in runs)
    return {f for f in files if linecache.getlines(f)}
