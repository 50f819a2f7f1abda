"""`when_imported(name, then)`: call `then()` once module `name` is imported, by
whoever imports it first, right after its own code has run and before the importer
goes on; at once where it is imported already.

`jitscope record` starts its recorder this way (`viz.recorder.capture.run`): a program
pays for JAX's import, and for the recorder's, only if it imports JAX, and its first
compile comes after that import. Nothing of the module changes: its loader runs its
code as it would, and its `__loader__` and `__spec__` are the loader's own.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType


def when_imported(name: str, then: Callable[[], None]) -> None:
    if name in sys.modules:
        then()
        return
    sys.meta_path.insert(0, _Watch(name, then))


class _Watch(importlib.abc.MetaPathFinder):
    """A finder that finds nothing itself: for `name`, it asks the finders after it
    and wraps the spec's loader so that `then` follows the module's execution."""

    def __init__(self, name: str, then: Callable[[], None]):
        self._name, self._then = name, then
        self._lock = threading.Lock()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self._name:
            return None
        with self._lock:  # once: the watch leaves the path as it fires
            if self not in sys.meta_path:
                return None
            sys.meta_path.remove(self)
        spec = _spec_from_others(fullname, path, target)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _ThenLoader(spec.loader, self._then)
        return spec


def _spec_from_others(
    fullname: str, path: Sequence[str] | None, target: ModuleType | None
) -> importlib.machinery.ModuleSpec | None:
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = None if find is None else find(fullname, path, target)
        if spec is not None:
            return spec
    return None


class _ThenLoader(importlib.abc.Loader):
    """The module's own loader, then `then()` once its code ran without an error."""

    def __init__(self, loader: importlib.abc.Loader, then: Callable[[], None]):
        self._loader, self._then = loader, then

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self._loader  # the module keeps its own loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        self._then()
