"""Which of its enclosing function's locals a function made anew on each call reads, so
that the advice asks for what can be done (stdlib only).

"Define it once, outside `train`" cannot be followed as said by a lambda that reads
`train`'s locals (`lambda v: v @ w`): moved out, it no longer sees `w`. Those locals are
its code's free variables (`co_freevars`, what its `__closure__` holds), found by
compiling the function's file, as `linecache` holds it, and picking the code object
defined at its line: a recording keeps the function's name and place, not the object.
"""

from __future__ import annotations

import functools
import linecache
import os
import re
from dataclasses import dataclass
from types import CodeType

MAX_NAMES = 4  # locals named in the advice; more: '…'


@dataclass(frozen=True)
class Locals:
    """The enclosing function's locals that a function reads."""

    names: list[str]  # ['w', 'scale']
    outer: str  # the enclosing function: 'train'
    called: tuple[str, ...] = ()  # those the function calls: functions ('kernel(key, s)')

    @property
    def all_called(self) -> bool:
        """Whether every local it reads is a function it calls (none can be an array)."""
        return set(self.names) <= set(self.called)

    @property
    def listed(self) -> str:
        """'`w`, `scale`'."""
        return self._shown("`")

    @property
    def bare(self) -> str:
        """'w, scale': as Python names them."""
        return self._shown("")

    def _shown(self, mark: str) -> str:
        shown = ", ".join(f"{mark}{n}{mark}" for n in self.names[:MAX_NAMES])
        return shown + (", …" if len(self.names) > MAX_NAMES else "")

    @property
    def as_arguments(self) -> str:
        """'`w` as an argument', '`w`, `scale` as arguments'."""
        return f"{self.listed} as {'an argument' if len(self.names) == 1 else 'arguments'}"

    @property
    def them(self) -> str:
        return "it" if len(self.names) == 1 else "them"

    @property
    def reads(self) -> str:
        """'it reads `w` of `train`'."""
        return f"it reads {self.listed} of `{self.outer}`"


def read_locals(location: str, name: str) -> Locals | None:
    """What the function `name` (its qualified name or its name) defined at `location`
    ('path:line') reads of its enclosing function's locals; None where it reads none,
    or its source cannot be found."""
    path, _, line = location.rpartition(":")
    if not line.isdigit():
        return None
    codes = [
        code
        for code in _code_objects(path)
        if code.co_firstlineno == int(line) and name in (code.co_qualname, code.co_name)
    ]
    names = list(dict.fromkeys(v for c in codes for v in c.co_freevars if v != "__class__"))
    outer = _outer(codes[0].co_qualname) if codes else ""
    if not (names and outer):
        return None
    source = "".join(_lines(path, code) for code in codes)
    called = tuple(n for n in names if re.search(rf"(?<![\w.]){re.escape(n)}\s*\(", source))
    return Locals(names, outer, called)


def _lines(path: str, code: CodeType) -> str:
    """The source lines of `code`, as linecache holds its file."""
    lines = [line for _, _, line in code.co_lines() if line is not None]
    last = max(lines, default=code.co_firstlineno)
    return "".join(linecache.getline(path, n) for n in range(code.co_firstlineno, last + 1))


def located(place: str, folders: str | tuple[str, ...]) -> str:
    """'/home/me/proj/model.py:4' for 'model.py:4' as `short_path` wrote it from one of
    the program's folders; '' where no folder holds it."""
    path, _, line = place.rpartition(":")
    for folder in (folders,) if isinstance(folders, str) else folders:
        full = os.path.join(folder, path)
        if folder and os.path.isfile(full):
            return f"{full}:{line}"
    return ""


FUNCTION_WORDS = re.compile(r"function `(\S+)` \(([^()]+)\)")  # a value's words for a function


def _outer(qualname: str) -> str:
    """'train' for 'train.<locals>.<listcomp>.<lambda>', 'fit' for
    'Model.fit.<locals>.step'."""
    enclosing = [part for part in qualname.split(".")[:-1] if not part.startswith("<")]
    return enclosing[-1] if enclosing else ""


def _code_objects(path: str) -> tuple[CodeType, ...]:
    """Every code object of the file (a notebook cell's too, which linecache holds)."""
    linecache.checkcache(path)  # a file changed since it was read: read again
    return _compiled(path, "".join(linecache.getlines(path)))


@functools.lru_cache(maxsize=32)
def _compiled(path: str, source: str) -> tuple[CodeType, ...]:
    try:
        top = compile(source, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return ()
    found, todo = [], [top]
    while todo:
        code = todo.pop()
        found.append(code)
        todo += [c for c in code.co_consts if isinstance(c, CodeType)]
    return tuple(found)
