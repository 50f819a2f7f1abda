"""Load user code as a module of its own and find its functions.

The code is compiled under the name the user knows its file by (`model.py` as they
typed it; `viz.where.YOUR_CODE` for code from the app's editor), and its lines are put
in `linecache` under that name: tracebacks, JAX's source locations (jaxpr, StableHLO,
HLO metadata) and every `where` then name the user's own file and line, never a copy.
`list_functions` reads the code with `ast` only: the app server uses it without
ever running user code.
"""

from __future__ import annotations

import ast
import hashlib
import linecache
import os
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from viz.errors import USER_EXITS, ErrorInfo, UserCodeError
from viz.where import YOUR_CODE


@dataclass(frozen=True)
class FunctionInfo:
    name: str
    params: tuple[str, ...]
    line: int


_PARSE_LOCK = threading.Lock()


def parse_python(text: str, mode: str = "exec") -> ast.AST:
    """`ast.parse`, one thread at a time. CPython 3.11 keeps the AST converter's
    recursion depth in global state: concurrent parses in the app server's session
    threads fail with `SystemError: AST constructor recursion depth mismatch`."""
    with _PARSE_LOCK:
        return ast.parse(text, mode=mode)


def check_syntax(code: str) -> ast.Module:
    try:
        return parse_python(code)
    except SyntaxError as exc:
        raise UserCodeError(
            ErrorInfo(
                "syntax_error",
                f"SyntaxError at line {exc.lineno}, column {exc.offset}: {exc.msg}",
                "fix the syntax at that position",
                exc.lineno,
                exc.offset,
                "load",
            )
        ) from None


def list_functions(code: str) -> list[FunctionInfo]:
    """Top-level functions in definition order (no code is run). [] on a syntax error."""
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError):
        return []
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            a = node.args
            params = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
            found.append(FunctionInfo(node.name, tuple(params), node.lineno))
    return found


@dataclass(frozen=True)
class Docstring:
    """A module's docstring: its text (indentation cleaned) and its last line."""

    text: str
    last_line: int


def module_docstring(code: str) -> Docstring | None:
    """The docstring that opens `code` (None: none, or the code does not parse). Read
    with `ast` only: no code is run."""
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError):
        return None
    text = ast.get_docstring(tree)  # type: ignore[arg-type]
    if text is None:
        return None
    return Docstring(text, tree.body[0].end_lineno or 1)  # type: ignore[attr-defined]


# A long-running worker sees many programs: older user modules leave sys.modules
# (their cache sessions keep their own references).
MAX_USER_MODULES = 32
_loaded: OrderedDict[str, None] = OrderedDict()  # names this process added, oldest first


def _register_module(name: str, module: ModuleType) -> None:
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    _loaded[name] = None
    _loaded.move_to_end(name)
    while len(_loaded) > MAX_USER_MODULES:
        old, _ = _loaded.popitem(last=False)
        sys.modules.pop(old, None)


def remember_module(module: ModuleType, code: str) -> None:
    """Put `module` in `sys.modules` under its name and its `code`'s lines in `linecache`
    under its file's name, as a load does (a module used again is put back: other
    code with that file's name may have been loaded since)."""
    filename = module.__file__ or YOUR_CODE
    _register_module(module.__name__, module)
    # mtime None: `linecache.checkcache` keeps the lines (IPython does the same for cells)
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)


def add_import_folder(folder: str | None) -> None:
    """Put the folder a program's file lives in first on `sys.path`, as `python FILE`
    does, so its own imports (a sibling module, a package beside it) work. It stays:
    a function may import lazily when it is called."""
    if folder:
        folder = os.path.abspath(folder)
        if folder not in sys.path:
            sys.path.insert(0, folder)


def load_module(code: str, folder: str | None = None, file: str | None = None) -> ModuleType:
    """Run `code` as a fresh module (a new module object on every call); `folder` is
    where the code's file lives, for its imports; `file` the file as the user named it
    (None: the app's editor)."""
    check_syntax(code)
    add_import_folder(folder)
    filename = file or YOUR_CODE
    module = ModuleType(f"jitscope_user_{hashlib.sha256(code.encode()).hexdigest()[:16]}")
    module.__file__ = filename
    remember_module(module, code)
    try:
        exec(compile(code, filename, "exec"), vars(module))
    except (Exception, *USER_EXITS) as exc:
        from viz.errors import classify, user_line

        if isinstance(exc, USER_EXITS):
            raise UserCodeError(classify(exc, "load", filename)) from None
        line = user_line(exc, filename)
        raise UserCodeError(
            ErrorInfo(
                "import_error",
                f"Running your module failed at line {line}: {type(exc).__name__}: {exc}",
                "fix the module-level code (imports, parameter setup)",
                line,
                None,
                "load",
                f"{type(exc).__name__}: {exc}",
            )
        ) from None
    return module


def find_function(module: ModuleType, code: str, name: str | None) -> Any:
    """The function called `name`, or the last function the code defines."""
    defined = [f.name for f in list_functions(code)]
    if not name:
        if not defined:
            raise UserCodeError(
                ErrorInfo(
                    "function_not_found",
                    "The code defines no function.",
                    "define a function with `def`",
                    stage="load",
                )
            )
        name = defined[-1]
    fn = getattr(module, name, None)
    if not callable(fn):
        choices = ", ".join(defined) or "none"
        raise UserCodeError(
            ErrorInfo(
                "function_not_found",
                f"No function named `{name}` in the code.",
                f"pick one of: {choices}",
                stage="load",
            )
        )
    return fn


def load_function(
    code: str, name: str | None, folder: str | None = None, file: str | None = None
) -> tuple[ModuleType, Any]:
    """The user's module, freshly loaded, and its function `name` (classified errors)."""
    module = load_module(code, folder, file)
    return module, find_function(module, code, name)
