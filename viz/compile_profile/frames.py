"""Which frames are the user's own code: a file outside JAX (and jaxlib), installed
packages (site-packages, dist-packages), Python's standard library and jitscope's own
`viz`. A trace is attributed to the innermost such frame: the line of the user's code
that was running when JAX was (`jax._src.source_info_util.user_frame` does the same
for JAX alone; a flax or optax frame is not the user's either)."""

from __future__ import annotations

import functools
import importlib.util
import linecache
import os
import sysconfig
from pathlib import Path
from types import CodeType

_PACKAGE_DIRS = ("site-packages", "dist-packages")


VIZ = str(Path(__file__).resolve().parent.parent) + os.sep


@functools.cache
def _excluded_roots() -> tuple[str, ...]:
    roots = {VIZ.rstrip(os.sep)}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(os.path.realpath(path))
    for name in ("jax", "jaxlib"):  # a source checkout of jax is not the user's either
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            roots.update(os.path.realpath(p) for p in spec.submodule_search_locations)
    return tuple(root.rstrip(os.sep) + os.sep for root in roots)


@functools.lru_cache(maxsize=4096)
def is_user_file(filename: str) -> bool:
    """Whether code from `filename` is the user's (see the module docstring). Code
    without a file is the user's where its source is in `linecache` (`<your code>`, an
    IPython cell); not `<string>` (a namedtuple's `__new__`), nor a frozen module."""
    if filename.startswith("<"):
        return bool(linecache.getlines(filename))
    path = os.path.realpath(filename)
    if any(part in _PACKAGE_DIRS for part in Path(path).parts):
        return False
    return not path.startswith(_excluded_roots())


USER, OTHER, CALLER = 1, 0, 2  # what a frame is, to a profile


class UserCode:
    """What each code object is to a profile, remembered (a sampler asks for every
    frame of every stack it takes): USER code, OTHER code (JAX, libraries), or
    jitscope's own, which called the trace: the frames beyond it are the CALLER's
    (the script or notebook that asked for the profile), not part of the trace. Not
    locked: a miss only computes the answer twice."""

    def __init__(self) -> None:
        self.known: dict[CodeType, int] = {}  # read directly where every call counts

    def __call__(self, code: CodeType) -> int:
        found = self.known.get(code)
        if found is None:
            found = self.known[code] = _kind(code.co_filename)
        return found


def _kind(filename: str) -> int:
    if os.path.realpath(filename).startswith(VIZ):
        return CALLER
    return USER if is_user_file(filename) else OTHER
