"""The house rules of DESIGN.md, read from the source with `ast`:

- the server side (app.py, pages/, ui/) never imports jax, neither directly nor through
  the project modules it imports at module level, however deep;
- viz/ never imports Streamlit, at any level (function bodies included);
- no import circle among modules, nor among viz/'s packages (each folder one node, each
  module at its top one node), and an import inside a function closes a loop of
  module-level imports only where it is a declared hook (`DECLARED_HOOKS`).

Every module of app.py, pages/, ui/ and viz/ is walked; nothing is listed by hand. A
module-level import is one outside every function body; one under `if TYPE_CHECKING:`
never runs, so it does not count for jax. `from pkg import name` also follows what a
package's `__getattr__` imports for that name.

Three tests run real code in a fresh interpreter, for what `ast` cannot see: one imports
every module the walk finds jax-free (a third-party package that imports jax), one shows
every page and result tab (a function that imports jax when a page calls it), and one
shows the Recordings page with recordings and a job to show (on an empty history it
shows next to nothing).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import types
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVER_SIDE = ("app.py", "pages", "ui")  # runs in the Streamlit server process
ENGINE = "viz"
JAX = ("jax", "jaxlib", "flax", "optax")
STREAMLIT = ("streamlit",)
IMPORTERS = ("import_module", "__import__")  # importlib.import_module("x"), __import__("x")

# Known breaks of a rule: module (as a chain names it) -> the chain that breaks it. Each
# is marked xfail(strict) until the module itself is fixed; none at present.
KNOWN: dict[str, str] = {}


@dataclass(frozen=True)
class Module:
    """One project module: its dotted name, its file (relative to the project's root),
    whether it is a package."""

    name: str
    path: Path
    is_package: bool

    @property
    def is_script(self) -> bool:
        """app.py and the pages are run by Streamlit, never imported."""
        return self.name == "app" or self.name.startswith("pages.")

    @property
    def shown(self) -> str:
        """How a chain names it: a script by its file, a module by its dotted name."""
        return self.path.as_posix() if self.is_script else self.name

    @property
    def package(self) -> str:
        """The package a relative import starts from."""
        return self.name if self.is_package else self.name.rpartition(".")[0]


@dataclass(frozen=True)
class Import:
    """One imported module (absolute name), its line, and where the import sits."""

    target: str
    line: int
    in_function: bool  # runs when the function is called
    type_checking: bool  # under `if TYPE_CHECKING:`: never runs
    function: str = ""  # the innermost function it sits in ('' outside every function)

    @property
    def module_level(self) -> bool:
        """Runs when the module that holds it is imported."""
        return not self.in_function and not self.type_checking


def _parents(target: str) -> list[str]:
    """`import a.b.c` runs a, a.b and a.b.c."""
    parts = target.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _importer_call(node: ast.AST) -> ast.expr | None:
    """The argument of `importlib.import_module(x)` or `__import__(x)`, else None."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return node.args[0] if called in IMPORTERS else None


def _constant_string(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class Project:
    """The modules of app.py, pages/, ui/ and viz/ under one root, and their imports."""

    def __init__(self, root: Path) -> None:
        self.root = root
        files = [root / "app.py"] if (root / "app.py").exists() else []
        for folder in ("pages", "ui", ENGINE):
            files += sorted((root / folder).rglob("*.py"))
        self.modules: dict[str, Module] = {}
        for path in files:
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            self.modules[name] = Module(name, path.relative_to(root), is_package)
        self._trees: dict[str, ast.Module] = {}
        self._imports: dict[str, tuple[Import, ...]] = {}

    def in_folder(self, folder: str) -> list[Module]:
        """The modules of one of SERVER_SIDE or ENGINE."""
        return [m for m in self.modules.values() if m.path.parts[0] == folder]

    def tree(self, name: str) -> ast.Module:
        if name not in self._trees:
            path = self.root / self.modules[name].path
            self._trees[name] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        return self._trees[name]

    def imports(self, name: str) -> tuple[Import, ...]:
        """Every import of one project module, in source order."""
        if name not in self._imports:
            collector = _Imports(self, self.modules[name])
            collector.visit(self.tree(name))
            self._imports[name] = tuple(collector.found)
        return self._imports[name]

    def from_name(self, base: str, name: str) -> list[str]:
        """What `from base import name` imports beyond `base`: the submodule
        `base.name`, or what `base`'s module-level `__getattr__` imports for `name`."""
        if f"{base}.{name}" in self.modules:
            return [f"{base}.{name}"]
        if base not in self.modules or name in self._bound_names(base):
            return []
        lazy = [
            node
            for node in self.tree(base).body
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
        ]
        return self._lazy_imports(self.modules[base], lazy[0], name) if lazy else []

    def _bound_names(self, name: str) -> set[str]:
        """Names a module binds at module level (`__getattr__` is never asked for them)."""
        bound = set()
        for node in self.tree(name).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bound.add(node.name)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound |= {t.id for t in targets if isinstance(t, ast.Name)}
        return bound - {"__getattr__"}

    def _lazy_imports(self, module: Module, getattr_: ast.FunctionDef, name: str) -> list[str]:
        """The imports a package's `__getattr__` makes for `name`: those under
        `if name == "<name>":`; where it looks names up otherwise, every import in it
        and, for `import_module(<not a constant>)`, every project module its package
        names in a string."""
        branch = [
            node
            for node in getattr_.body
            if isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and _constant_string(node.test.comparators[0]) == name
        ]
        scope = ast.Module(body=branch, type_ignores=[]) if branch else getattr_
        collector = _Imports(self, module)
        collector.visit(scope)
        targets = [i.target for i in collector.found]
        calls = [_importer_call(node) for node in ast.walk(scope)]
        if any(arg is not None and _constant_string(arg) is None for arg in calls):
            strings = {_constant_string(node) for node in ast.walk(self.tree(module.name))}
            targets += sorted(s for s in strings if s in self.modules)
        return targets

    def chain(self, start: str, packages: tuple[str, ...]) -> list[str] | None:
        """The shortest chain of module-level imports from project module `start` to one
        of `packages`, in the names a reader knows (`pages/explore.py`, `viz.x`, `jax`)."""
        came_from: dict[str, str | None] = {start: None}
        queue = deque([start])
        while queue:
            name = queue.popleft()
            for imp in self.imports(name):
                if not imp.module_level:
                    continue
                if _outside(imp.target, packages):
                    chain, at = [imp.target.split(".")[0]], name
                    while at is not None:
                        chain.append(self.modules[at].shown)
                        at = came_from[at]
                    return chain[::-1]
                if imp.target in self.modules and imp.target not in came_from:
                    came_from[imp.target] = name
                    queue.append(imp.target)
        return None

    def circles(self) -> list[list[str]]:
        """Import circles among project modules, through imports that run at import time
        or under `if TYPE_CHECKING:` (an import in a function body is the deliberate,
        lazy kind). A module importing its own package does not count. One circle per
        knot, as `[a, b, a]`."""
        return _knots({name: sorted(targets) for name, targets in self.module_edges().items()})

    def module_edges(self) -> dict[str, set[str]]:
        """Module → the project modules it imports at module level (or under `if
        TYPE_CHECKING:`), its own enclosing packages left out."""
        return {
            name: {
                i.target
                for i in self.imports(name)
                if not i.in_function
                and i.target in self.modules
                and not f"{name}.".startswith(f"{i.target}.")
            }
            for name in self.modules
        }

    def package_of(self, name: str, whole_top: bool = False) -> str:
        """A module of viz/'s node in the graph of packages: its folder (`viz.cache` for
        viz/cache/keys.py, `viz.recorder.capture` for a module of viz/recorder/capture/;
        with `whole_top`, the folder at the top of viz/ whole: `viz.recorder`), or, a
        module at the top of viz/, the module itself (`viz.report`)."""
        module = self.modules[name]
        folder = name.split(".") if module.is_package else name.split(".")[:-1]
        if len(folder) == 1:
            return name
        return ".".join(folder[:2] if whole_top else folder)

    def package_imports(self, whole_top: bool = False) -> dict[tuple[str, str], list[str]]:
        """The graph of viz/'s packages: (package, package it imports) -> where (`viz/x.py:
        12`), for every import of a module of one that runs at module level or under `if
        TYPE_CHECKING:`. Importing one's own enclosing package (its `__init__`) does not
        count, nor does an import within one package."""
        edges: dict[tuple[str, str], list[str]] = {}
        for module in self.in_folder(ENGINE):
            for i in self.imports(module.name):
                if i.in_function or i.target not in self.modules:
                    continue
                if f"{module.name}.".startswith(f"{i.target}."):
                    continue
                pair = self.package_of(module.name, whole_top), self.package_of(i.target, whole_top)
                where = f"{module.path.as_posix()}:{i.line}"
                if pair[0] != pair[1] and where not in edges.get(pair, []):
                    edges.setdefault(pair, []).append(where)
        return edges

    def package_cycles(self, whole_top: bool = False) -> list[list[str]]:
        """Cycles among viz/'s packages, one per knot, as `[a, b, a]`."""
        edges = self._package_edges(whole_top)
        return _knots(edges)

    def _package_edges(self, whole_top: bool) -> dict[str, list[str]]:
        edges: dict[str, list[str]] = {
            self.package_of(m.name, whole_top): [] for m in self.in_folder(ENGINE)
        }
        for a, b in sorted(self.package_imports(whole_top)):
            edges[a].append(b)
        return edges

    def loop_closing_imports(self) -> set[tuple[str, str, str]]:
        """(module, function, module it imports) for each import inside a function of
        viz/ that closes a loop: the module it imports reaches back to the importing one
        through imports that run at module level (or under `if TYPE_CHECKING:`), module
        by module, or package by package (each folder, or each top folder, one node). Such
        an import hides a cycle from the rules above; it is allowed as a declared hook."""
        modules = self.module_edges()
        packages = {top: self._package_edges(top) for top in (False, True)}
        found = set()
        for module in self.in_folder(ENGINE):
            for i in self.imports(module.name):
                if not i.in_function or i.target not in self.modules:
                    continue
                if f"{module.name}.".startswith(f"{i.target}."):
                    continue  # its own package: imported before it anyway
                back = _reaches(i.target, module.name, modules) or any(
                    self.package_of(i.target, top) != self.package_of(module.name, top)
                    and _reaches(
                        self.package_of(i.target, top), self.package_of(module.name, top), edges
                    )
                    for top, edges in packages.items()
                )
                if back:
                    found.add((module.name, i.function, i.target))
        return found


def _reaches(start: str, goal: str, edges: Mapping[str, Iterable[str]]) -> bool:
    """Whether a path of `edges` leads from `start` to `goal`."""
    seen, todo = {start}, [start]
    while todo:
        name = todo.pop()
        if name == goal:
            return True
        for nxt in edges.get(name, ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def _knots(edges: dict[str, list[str]]) -> list[list[str]]:
    """One cycle of `edges` per knot of nodes that reach each other, as `[a, b, a]`."""
    found, seen = [], set()
    for start in sorted(edges):
        if start in seen:
            continue
        loop = _loop_back(start, edges)
        if loop:
            found.append(loop)
            seen |= set(loop)
    return found


def _loop_back(start: str, edges: dict[str, list[str]]) -> list[str] | None:
    """The shortest path of imports from `start` back to itself, if any."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        name = queue.popleft()
        for nxt in edges[name]:
            if nxt == start:
                path = [name]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*path[::-1], start]
            if nxt not in came_from:
                came_from[nxt] = name
                queue.append(nxt)
    return None


class _Imports(ast.NodeVisitor):
    """Collects every import of one module, tagged module-level or not."""

    def __init__(self, project: Project, module: Module) -> None:
        self.project = project
        self.module = module
        self.found: list[Import] = []
        self.functions: list[str] = []  # the functions the visit is in, innermost last
        self.in_type_checking = 0

    def _add(self, targets: list[str], node: ast.stmt | ast.expr) -> None:
        where = bool(self.functions), bool(self.in_type_checking)
        function = self.functions[-1] if self.functions else ""
        self.found += [Import(target, node.lineno, *where, function) for target in targets]

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(_parents(alias.name), node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:  # relative: from the package, up level - 1 packages
            package = self.module.package.split(".")
            package = package[: len(package) - (node.level - 1)]
            base = ".".join(package + ([node.module] if node.module else []))
        self._add(_parents(base), node)
        for alias in node.names:
            self._add(self.project.from_name(base, alias.name), node)

    def visit_Call(self, node: ast.Call) -> None:
        target = _constant_string(_importer_call(node))
        if target:
            self._add(_parents(target), node)
        self.generic_visit(node)

    def _in_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self.functions.append(getattr(node, "name", "<lambda>"))
        self.generic_visit(node)
        self.functions.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _in_function

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        self.in_type_checking += 1
        for child in node.body:
            self.visit(child)
        self.in_type_checking -= 1
        for child in node.orelse:
            self.visit(child)


def _outside(target: str, packages: tuple[str, ...]) -> bool:
    return target.split(".")[0] in packages


PROJECT = Project(ROOT)


def _cases(folders: tuple[str, ...]) -> list[pytest.ParameterSet]:
    """One test case per module, a known break marked xfail (strict: it must break)."""
    cases = []
    for folder in folders:
        for module in PROJECT.in_folder(folder):
            reason = KNOWN.get(module.shown)
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            cases.append(pytest.param(module.name, id=module.shown, marks=marks))
    return cases


# --------------------------------------------------------------------------- the walk itself


def _write(root: Path, files: dict[str, str]) -> Project:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return Project(root)


def test_the_walk_finds_every_module_of_the_app_and_the_engine() -> None:
    names = set(PROJECT.modules)
    assert {"app", "pages.explore", "ui", "ui.results", "viz", "viz.cache.router"} <= names
    assert len(PROJECT.in_folder("pages")) == len(list((ROOT / "pages").glob("*.py")))
    assert len(PROJECT.in_folder(ENGINE)) == len(list((ROOT / ENGINE).rglob("*.py")))


def test_a_chain_follows_module_level_imports_through_project_modules(tmp_path: Path) -> None:
    project = _write(
        tmp_path,
        {
            "pages/explore.py": "import ui\n",
            "ui/__init__.py": "from ui.cards import card\n",
            "ui/cards.py": "from viz import x\n",
            "viz/__init__.py": "",
            "viz/x.py": "from .y import z\n",
            "viz/y.py": "import numpy\nimport jax.numpy as jnp\n",
        },
    )
    chain = project.chain("pages.explore", JAX)
    assert chain == ["pages/explore.py", "ui", "ui.cards", "viz.x", "viz.y", "jax"]


def test_imports_in_a_function_or_under_type_checking_do_not_count(tmp_path: Path) -> None:
    project = _write(
        tmp_path,
        {
            "ui/__init__.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    import jax\nelse:\n    import json\n"
                "def run():\n    import jax\n"
                "class Lazy:\n    def go(self):\n        from viz import heavy\n"
            ),
            "viz/__init__.py": "",
            "viz/heavy.py": "import jax\n",
        },
    )
    assert project.chain("ui", JAX) is None
    assert {(i.target, i.module_level) for i in project.imports("ui")} == {
        ("typing", True),
        ("jax", False),
        ("json", True),
        ("viz", False),
        ("viz.heavy", False),
    }


def test_a_class_body_and_a_dynamic_import_run_at_module_level(tmp_path: Path) -> None:
    project = _write(
        tmp_path,
        {
            "ui/__init__.py": "class Panel:\n    import viz.a\n",
            "ui/b.py": "import importlib\nJAX = importlib.import_module('jax.numpy')\n",
            "viz/__init__.py": "",
            "viz/a.py": "import flax\n",
        },
    )
    assert project.chain("ui", JAX) == ["ui", "viz.a", "flax"]
    assert project.chain("ui.b", JAX) == ["ui.b", "jax"]


def test_relative_imports_resolve_from_the_package(tmp_path: Path) -> None:
    project = _write(
        tmp_path,
        {
            "viz/__init__.py": "",
            "viz/cache/__init__.py": "from . import keys\n",
            "viz/cache/keys.py": "from ..spec import parse\nfrom .. import errors\n",
            "viz/spec.py": "",
            "viz/errors.py": "",
        },
    )
    targets = {i.target for i in project.imports("viz.cache")}
    assert targets == {"viz.cache", "viz", "viz.cache.keys"}
    assert {i.target for i in project.imports("viz.cache.keys")} == {
        "viz",
        "viz.spec",
        "viz.errors",
    }


def test_a_lazy_package_attribute_follows_its_getattr_branch(tmp_path: Path) -> None:
    project = _write(
        tmp_path,
        {
            "viz/__init__.py": (
                "def __getattr__(name):\n"
                "    if name == 'analyze':\n        from viz.pipeline import analyze\n"
                "        return analyze\n"
                "    if name == 'history':\n        from viz.store import history\n"
                "        return history\n"
                "    raise AttributeError(name)\n"
            ),
            "viz/ir/__init__.py": (
                "from importlib import import_module\n"
                "_READERS = {'read_hlo': 'viz.ir.hlo'}\n"
                "def __getattr__(name):\n"
                "    return getattr(import_module(_READERS[name]), name)\n"
            ),
            "viz/ir/hlo.py": "import jaxlib\n",
            "viz/pipeline.py": "import jax\n",
            "viz/store.py": "",
            "ui/a.py": "from viz import analyze\n",
            "ui/b.py": "from viz import history\n",
            "ui/c.py": "from viz.ir import read_hlo\n",
        },
    )
    assert project.chain("ui.a", JAX) == ["ui.a", "viz.pipeline", "jax"]
    assert project.chain("ui.b", JAX) is None
    assert project.chain("ui.c", JAX) == ["ui.c", "viz.ir.hlo", "jaxlib"]


def test_a_circle_counts_type_checking_imports_but_not_function_bodies(tmp_path: Path) -> None:
    project = _write(
        tmp_path,
        {
            "viz/__init__.py": "from viz import a\n",  # a package importing its own module
            "viz/a.py": "import viz.b\n",
            "viz/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import viz.a\n",
            "viz/c.py": "import viz.d\n",
            "viz/d.py": "def later():\n    import viz.c\n",
        },
    )
    assert project.circles() == [["viz.a", "viz.b", "viz.a"]]


# --------------------------------------------------------------------------- the rules


@pytest.mark.parametrize("name", _cases(SERVER_SIDE))
def test_the_server_side_imports_no_jax(name: str) -> None:
    chain = PROJECT.chain(name, JAX)
    assert chain is None, "imports jax at module level: " + " -> ".join(chain or [])


@pytest.mark.parametrize("name", _cases((ENGINE,)))
def test_the_engine_never_imports_streamlit(name: str) -> None:
    found = [i for i in PROJECT.imports(name) if _outside(i.target, STREAMLIT)]
    where = PROJECT.modules[name].path
    assert not found, "; ".join(f"{where}:{i.line} imports {i.target}" for i in found)


def jax_free_modules() -> list[str]:
    """Every importable project module the walk finds jax-free at module level (not
    the scripts Streamlit runs, not the `__main__` entry points)."""
    return sorted(
        m.name
        for m in PROJECT.modules.values()
        if not m.is_script
        and not m.name.endswith("__main__")
        and PROJECT.chain(m.name, JAX) is None
    )


def test_every_module_the_walk_finds_jax_free_imports_without_jax() -> None:
    """Real imports, in a fresh interpreter: name the first module that brings jax in."""
    names = jax_free_modules()
    server_side = {
        m.name
        for folder in SERVER_SIDE
        for m in PROJECT.in_folder(folder)
        if not m.is_script and m.shown not in KNOWN
    }
    assert server_side <= set(names)
    check = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "    assert 'jax' not in sys.modules, f'importing {name} imported jax'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


# Run in a fresh interpreter: open the app (Explore analyses its default sample in the
# worker), open every result tab it offers, then every page.
RENDER_EVERYTHING = """
import sys
from streamlit.testing.v1 import AppTest

at = AppTest.from_file({app!r}, default_timeout=180)
at.run()
assert not at.exception, at.exception
tabs = [tab.label for tab in at.tabs]
assert tabs, "Explore shows no result tabs"
for tab in tabs:
    at.session_state["result_tab"] = tab
    at.run()
    assert not at.exception, (tab, at.exception)
    assert "jax" not in sys.modules, f"showing the {{tab}} tab imported jax"
for page in {pages!r}:
    at.switch_page(page).run()
    assert not at.exception, (page, at.exception)
    assert "jax" not in sys.modules, f"showing {{page}} imported jax"
"""


def test_showing_every_page_and_result_tab_leaves_jax_out_of_the_server() -> None:
    """What `ast` cannot see: a page that calls a viz function importing jax when it runs."""
    pages = [str(ROOT / m.path) for m in PROJECT.in_folder("pages")]
    _show_in_a_fresh_server(RENDER_EVERYTHING.format(app=str(ROOT / "app.py"), pages=pages))


def _show_in_a_fresh_server(check: str) -> None:
    """Run an AppTest script in a fresh interpreter: a server process that has imported
    nothing yet."""
    env = {**os.environ, "JITSCOPE_EDITOR": "plain"}  # AppTest cannot drive the component
    proc = subprocess.run(
        [sys.executable, "-c", check],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


# Run in a fresh interpreter, on a history that holds recordings: the Recordings page
# shows one recording whole (compared with the others, its charts, its download, what
# Open in Explore would load), then a multi-process job.
RENDER_RECORDINGS = """
import sys
from streamlit.testing.v1 import AppTest

at = AppTest.from_file({app!r}, default_timeout=180)
at.switch_page({page!r}).run()
assert not at.exception, at.exception
assert at.radio(key="rec_show").value == "one recording"
assert [b for b in at.button if b.label == "Open in Explore"], "no compile to open"
assert [b for b in at.get("download_button") if b.label == "Download as HTML"]
assert [c for c in at.code if c.value.startswith("recordings rec:")], "no comparison"
assert len(at.get("plotly_chart")) == 2, "the timeline and the call sites"
assert "jax" not in sys.modules, "showing a recording imported jax"
at.radio(key="rec_show").set_value("a job").run()
assert not at.exception, at.exception
assert [h for h in at.subheader if h.value == "Processes"], "no job shown"
assert "jax" not in sys.modules, "showing a job imported jax"
"""


def _record_a_program(folder: Path) -> None:
    """`jitscope record` a real program (a compile of a top-level function, from a file
    Open in Explore can read) into the history."""
    program = folder / "steps.py"
    program.write_text(
        "import jax\nimport jax.numpy as jnp\n\n\ndef step(x):\n    return x * 2\n\n\n"
        "for n in (2, 3):\n    jax.jit(step)(jnp.ones(n))\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "viz", "record", "--name", "steps", "--", str(program)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_showing_recordings_and_a_job_leaves_jax_out_of_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Recordings page with something to show: its every view, in a server process
    that has never imported jax (the page above finds no recording at all)."""
    from test_job import alike

    from viz.recorder import Recordings

    monkeypatch.setenv("JITSCOPE_HOME", str(tmp_path))
    for recording in alike():  # a job of two processes
        Recordings().add(recording)
    _record_a_program(tmp_path)  # the newest: the page opens on it
    _show_in_a_fresh_server(
        RENDER_RECORDINGS.format(app=str(ROOT / "app.py"), page="pages/recordings.py")
    )


def test_no_import_circles() -> None:
    circles = [" -> ".join(c) for c in PROJECT.circles()]
    assert not circles, "; ".join(circles)


@pytest.mark.parametrize("whole_top", [False, True], ids=["each folder", "each top folder"])
def test_no_cycle_between_packages(whole_top: bool) -> None:
    """Each folder of viz/ one node (or each folder at its top, subfolders in it), each
    module at its top one node: the imports between them run one way."""
    imports = PROJECT.package_imports(whole_top)
    cycles = [
        " -> ".join(cycle)
        + " ("
        + "; ".join(f"{a} -> {b}: {', '.join(imports[a, b])}" for a, b in pairwise(cycle))
        + ")"
        for cycle in PROJECT.package_cycles(whole_top)
    ]
    assert not cycles, "\n".join(cycles)


# The imports inside a function that close a loop of module-level imports, each a hook
# declared here: (module, function, module it imports).
DECLARED_HOOKS = {
    # a Report draws itself in a notebook cell (`_repr_html_`, `_ipython_display_`) with
    # viz.notebook, which reads reports: imported when a notebook first draws one
    ("viz.report", "_notebook", "viz.notebook"),
}


def test_the_imports_inside_functions_that_close_a_loop_are_the_declared_hooks() -> None:
    found = PROJECT.loop_closing_imports()
    assert found - DECLARED_HOOKS == set(), "closes a loop of imports: break the loop"
    assert DECLARED_HOOKS - found == set(), "a declared hook that is gone: drop it here"


def test_a_package_cycle_is_found_between_folders_and_top_modules(tmp_path: Path) -> None:
    project = _write(
        tmp_path,
        {
            "viz/__init__.py": "",
            "viz/report.py": "from viz.fusion.model import Entry\n",
            "viz/fusion/__init__.py": "",
            "viz/fusion/model.py": "",
            "viz/fusion/view.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from viz.report import Report\n",
            "viz/lessons/__init__.py": "",
            "viz/lessons/measure.py": "def later():\n    import viz.report\n",
            "viz/recorder/__init__.py": "def __getattr__(name):\n    import viz.recorder.cli.run\n",
            "viz/recorder/model.py": "",
            "viz/recorder/cli/__init__.py": "",
            "viz/recorder/cli/run.py": "import viz.recorder.model\n",
        },
    )
    assert project.package_cycles() == [["viz.fusion", "viz.report", "viz.fusion"]]
    assert project.package_imports()["viz.fusion", "viz.report"] == ["viz/fusion/view.py:3"]
    assert ("viz.recorder.cli", "viz.recorder") in project.package_imports()
    assert project.package_cycles(whole_top=True) == project.package_cycles()


def test_an_import_in_a_function_closes_a_loop_of_modules_or_of_packages(tmp_path: Path) -> None:
    project = _write(
        tmp_path,
        {
            "viz/__init__.py": "def __getattr__(name):\n    from viz.target import Target\n",
            "viz/target.py": "def trace():\n    from viz import stages\n",
            "viz/stages.py": "import viz.target\n",
            "viz/demo.py": "import viz.worker.protocol\n",
            "viz/worker/__init__.py": "",
            "viz/worker/protocol.py": "",
            "viz/worker/client.py": "def ask():\n    import viz.demo\n",
            "viz/lessons/__init__.py": "",
            "viz/lessons/rows.py": "",
            "viz/worker/handlers.py": "import viz.lessons.rows\n"
            "def lesson():\n    from viz.lessons import rows\n",
        },
    )
    assert project.loop_closing_imports() == {
        ("viz.target", "trace", "viz.stages"),  # stages imports target
        ("viz.worker.client", "ask", "viz.demo"),  # demo imports the worker's protocol
    }


def test_the_wheel_lists_every_package_of_viz():
    """pyproject lists its packages by name (the app is mapped beside viz): a new
    subpackage of viz missing there would be missing from the wheel."""
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "viz").rglob("__init__.py")
    }
    assert found <= listed, f"add to pyproject.toml's packages: {sorted(found - listed)}"


# Private JAX: `jax._src…` and jaxlib's underscored modules (`jaxlib._jax`), reached
# through viz/jax_private.py alone (its version guards and fallbacks are in one place).
PRIVATE_JAX = re.compile(r"(jax\._src|jaxlib\._\w+)(\.\w+)*")
PRIVATE_JAX_HOME = ROOT / "viz" / "jax_private.py"
CHECKED_FOR_PRIVATE_JAX = ("app.py", "pages", "ui", "viz", "bench", "tests")


def _private_jax_uses(path: Path) -> list[str]:
    """`line: name` for each import of private JAX in a file, and each string that names
    a private module (`sys.modules.get("jax._src.distributed")`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        else:
            continue
        private = [n for n in names if PRIVATE_JAX.fullmatch(n)]
        found += [f"{node.lineno}: {private[-1]}"] if private else []
    return found


def _python_files(names: tuple[str, ...]) -> list[Path]:
    files = []
    for name in names:
        path = ROOT / name
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


@pytest.mark.parametrize(
    "path",
    [p for p in _python_files(CHECKED_FOR_PRIVATE_JAX) if p != PRIVATE_JAX_HOME],
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_private_jax_is_reached_through_jax_private_only(path: Path) -> None:
    found = _private_jax_uses(path)
    assert not found, f"{path.relative_to(ROOT)}: use viz.jax_private for " + ", ".join(found)


def test_the_private_jax_rule_sees_imports_and_module_names(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import jax\nfrom jax._src import core\nfrom jaxlib import _jax\nimport jaxlib._jax\n"
        "import sys\nsys.modules.get('jax._src.distributed')\n"
        "'''A docstring naming jax._src.core is no use of it.'''\nfrom jax.extend import core\n"
    )
    assert [u.split(": ")[0] for u in _private_jax_uses(source)] == ["2", "3", "4", "6"]


# Platform internals: a platform's kernel names, flags, trace names, tools and library
# live in viz/platforms/ alone (its modules say what each platform gives). A device's
# name (cpu, gpu, tpu) in settings and help text is no internal.
PLATFORM_INTERNALS = (
    "__ynn_fusion",
    "xla_cpu_",
    "tpu_custom_call",
    "/device:TPU:0",
    "XLA::TPU",
    "nvidia-smi",
    "libtpu",
)
PLATFORMS_HOME = ROOT / "viz" / "platforms"
# Files other issues were editing when the rule came (#59: viz/memory/): their strings
# move into viz/platforms/ when those branches merge. Each must still hold one.
PLATFORM_INTERNALS_KNOWN = {
    "viz/memory/xla.py": "the CPU's library fusions (`__ynn_fusion`), read by #59's reader",
}


def _platform_internals(path: Path) -> list[str]:
    """`line: string` for each platform internal a file writes (code, strings, comments)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [f"{n}: {s}" for n, line in enumerate(lines, 1) for s in PLATFORM_INTERNALS if s in line]


@pytest.mark.parametrize(
    "path",
    [
        p
        for p in _python_files(("app.py", "pages", "ui", "viz"))
        if not p.is_relative_to(PLATFORMS_HOME)
    ],
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_platform_internals_live_in_viz_platforms_only(path: Path) -> None:
    found = _platform_internals(path)
    if path.relative_to(ROOT).as_posix() in PLATFORM_INTERNALS_KNOWN:
        assert found, "a known exception that no longer holds an internal: remove it"
        return
    assert not found, f"{path.relative_to(ROOT)}: move into viz/platforms/: " + ", ".join(found)


def test_the_platform_rule_sees_a_planted_internal(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        'DEVICE = "tpu"  # a device\'s name is no internal\n'
        'flags = {"xla_cpu_enable_fast_math": True}\n'
        "# the chip is held: libtpu's lockfile\n"
    )
    assert _platform_internals(source) == ["2: xla_cpu_", "3: libtpu"]
    assert all((ROOT / known).is_file() for known in PLATFORM_INTERNALS_KNOWN)


def _report_mappings() -> set[str]:
    """The names of the report's fields, at every level, that hold a mapping or a list
    of mappings (`graphs`, `graph_models`, `ops`, `by_kind_at_peak`, `jaxpr_eqns`, …):
    read by a key, they are read by a name."""
    import collections.abc
    import dataclasses
    import typing

    from viz.report import Report

    found: set[str] = set()
    seen: set[type] = set()

    def holds_mappings(hint: object) -> bool:
        origin = typing.get_origin(hint) or hint
        if dataclasses.is_dataclass(origin):
            return False  # a section: read by its attributes (a Plain reads by key too)
        if isinstance(origin, type) and issubclass(origin, collections.abc.Mapping):
            return True
        return origin is list and any(holds_mappings(a) for a in typing.get_args(hint))

    def visit(cls: type) -> None:
        if cls in seen or not dataclasses.is_dataclass(cls):
            return
        seen.add(cls)
        for name, hint in typing.get_type_hints(cls).items():
            parts = typing.get_args(hint) if typing.get_origin(hint) is types.UnionType else ()
            for part in parts or (hint,):
                if holds_mappings(part):
                    found.add(name)
                for inner in (part, *typing.get_args(part)):
                    if isinstance(inner, type):
                        visit(inner)

    visit(Report)
    return found


REPORT_MAPPINGS = _report_mappings()


def _reads_by_name(tree: ast.Module) -> list[str]:
    """`line: code` for each place that reads a report by a name rather than an
    attribute: `getattr(...)`, and a string key (`x["compiled"]`, `x.get("parameter")`)
    on one of the report's mappings, or on a name bound to one (`models =
    r.graph_models`, `for e in entry.jaxpr_eqns`) in the same function."""
    found = []
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))]
    for scope in scopes:
        bound = _bound_to_mappings(scope)
        for node in ast.walk(scope):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "getattr":
                found.append(f"{node.lineno}: {ast.unparse(node)}")
            key = _string_key_read(node)
            if key is not None and _is_mapping(key, bound):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return sorted(set(found), key=lambda f: int(f.split(":")[0]))


def _string_key_read(node: ast.AST) -> ast.expr | None:
    """What `node` reads a string key of: `x` of `x["k"]` or `x.get("k", …)`."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        return node.value if _constant_string(node.slice) is not None else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        key = _constant_string(node.args[0])
        return node.func.value if node.func.attr == "get" and key is not None else None
    return None


def _is_mapping(node: ast.expr, bound: set[str]) -> bool:
    """Whether `node` is one of the report's mappings (or an item of a list of them)."""
    while isinstance(node, ast.Subscript | ast.Call):  # an item of it, or what .get gives
        node = node.value if isinstance(node, ast.Subscript) else node.func
        if isinstance(node, ast.Attribute) and node.attr == "get":
            node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr in REPORT_MAPPINGS
    return isinstance(node, ast.Name) and node.id in bound


def _bound_to_mappings(scope: ast.AST) -> set[str]:
    """The names a scope binds to one of the report's mappings, or to an item of one."""
    bound: set[str] = set()
    for _ in range(3):  # a name bound from a name bound from a mapping
        for node in ast.walk(scope):
            pairs: list[tuple[ast.expr, ast.expr]] = []
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                        pairs += list(zip(target.elts, node.value.elts, strict=False))
                    else:
                        pairs.append((target, node.value))
            elif isinstance(node, ast.For | ast.comprehension):
                pairs.append((node.target, node.iter))
            for target, value in pairs:
                if isinstance(target, ast.Name) and _is_mapping(value, bound):
                    bound.add(target.id)
    return bound


@pytest.mark.parametrize(
    "path",
    _python_files(("pages", "ui")),
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_pages_read_a_report_by_attribute_never_by_name(path: Path) -> None:
    found = _reads_by_name(ast.parse(path.read_text(encoding="utf-8")))
    assert not found, f"{path.relative_to(ROOT)} reads a report by name: " + "; ".join(found)


def test_a_read_by_name_is_seen_through_a_mapping_and_the_names_bound_to_it() -> None:
    source = (
        "def tab(r, res, ir, st):\n"
        "    a = r.graphs['compiled'].dot\n"  # 2
        "    models = res.report.graph_models\n"
        "    b = models.get('jaxpr')\n"  # 4
        "    for e in r.fusion_map[0].jaxpr_eqns:\n"
        "        c = e['primitive']\n"  # 6
        "    d = getattr(r, ir)\n"  # 7
        "    e = r.memory.by_kind_at_peak.get('parameter', 0)\n"  # 8
        "    fine = st.session_state['result_tab'], r.graphs[ir], r.compiled.ops\n"
        "    rows = {'source': 1}\n"
        "    return rows['source']\n"
    )
    found = _reads_by_name(ast.parse(source))
    assert [f.split(":")[0] for f in found] == ["2", "4", "6", "7", "8"]
