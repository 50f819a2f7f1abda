"""Where in the user's code: a file and a line, named the way the user knows them.

Every `where` jitscope shows (the fusion map's lines, the compile profile, memory,
errors, graph tooltips) is made here, from the file name JAX and Python report and a
line:

- a file the user named (`jitscope analyze model.py::loss`): the path as they gave
  it, `model.py:4` (`viz.source` compiles their code under that name);
- code typed or pasted into the app: `your code, line 4` (compiled as YOUR_CODE);
- a notebook cell: IPython's own name for it, `In [3], line 1`, never the kernel's
  temporary file (`/tmp/ipykernel_31850/2597766503.py`);
- any other file (a library's): its path, `path:line`.

Never imports jax or IPython (IPython is asked only when the process already has it).
"""

from __future__ import annotations

import functools
import os
import re
import sys

YOUR_CODE = "<your code>"  # the file name of code from the app's editor
_INSTALLED = ("site-packages", "dist-packages")  # folders pip installs packages into
_CELL = re.compile(r"In ?\[(\d+)\]")


def shown_file(file: str) -> str:
    """The name the user knows `file` by: `model.py`, `your code`, `In [3]`, or the
    path itself."""
    if file == YOUR_CODE:
        return "your code"
    cell = notebook_cell(file)
    return cell if cell is not None else file


def user_where(file: str, line: int | None) -> str:
    """The public `where` of one line: `model.py:4`, `your code, line 4`,
    `In [3], line 1`; the file alone when the line is not known."""
    shown = shown_file(file)
    if line is None:
        return shown
    return f"{shown}:{line}" if shown == file else f"{shown}, line {line}"


def split_where(where: str) -> tuple[str, int | None]:
    """`user_where`'s (shown file, line) back from its text."""
    for separator in (", line ", ":"):
        shown, found, line = where.rpartition(separator)
        if found and line.isdigit():
            return shown, int(line)
    return where, None


def notebook_cell(file: str) -> str | None:
    """`In [3]` for the file IPython compiled cell 3 into, else None."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    format_code_name = getattr(getattr(shell, "compile", None), "format_code_name", None)
    if format_code_name is None:
        return None
    named = format_code_name(file)  # ("Cell", "In[3]") for a cell's file, else None
    if not named:
        return None
    cell = _CELL.fullmatch(named[1])
    return f"In [{cell.group(1)}]" if cell else named[1]


def place(where: str, source_file: str | None) -> str:
    """`line 97` in the user's own file, else `file.py:97` (a path's last part) or the
    where itself (`In [3], line 1`)."""
    shown, line = split_where(where)
    if line is None:
        return where
    if source_file and shown == shown_file(source_file):
        return f"line {line}"
    return f"{shown.rsplit('/', 1)[-1]}:{line}" if "/" in shown else where


def installed_parts(path: str) -> list[str]:
    """The parts of `path` below the folder pip installed it into, its package's first
    (`['optax', '_src', 'numerics.py']`); [] outside installed packages."""
    parts = path.split(os.sep)
    installed = [i for i, part in enumerate(parts) if part in _INSTALLED]
    return parts[installed[-1] + 1 :] if installed else []


@functools.lru_cache(maxsize=1024)
def is_installed(file: str) -> bool:
    """Whether `file` is an installed package's (a library's, not the user's code)."""
    return bool(installed_parts(file))
