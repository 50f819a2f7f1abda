"""The ready-made sample functions in ``samples/``.

Each sample is a plain Python file with literal metadata constants at module level
(``TITLE``, ``DESCRIPTION``, ``FUNCTION``, ``ARGS``, ``STATIC``, ``ORDER`` and optionally
``EXPECT_ERROR``, ``INNER``, ``LOOP_STEP``, ``BATCH_ARG``). They are read here with
:mod:`ast` only: this module never imports jax and never executes a sample, so the
Streamlit server can list samples safely and cheaply.
"""

from __future__ import annotations

import ast
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from viz.locations import SAMPLES_DIR
from viz.source import parse_python

REQUIRED_KEYS = ("TITLE", "DESCRIPTION", "FUNCTION", "ARGS", "STATIC", "ORDER")
EXTRA_KEYS = ("EXPECT_ERROR", "INNER", "LOOP_STEP", "BATCH_ARG")
ERROR_KINDS = ("control_flow", "value_dependent_shape")


@dataclass(frozen=True)
class Sample:
    name: str  # file stem
    title: str
    description: str
    function: str
    args: str
    static: tuple[str, ...]
    order: int
    code: str  # the full file text
    path: Path
    extra: dict[str, Any] = field(default_factory=dict)  # EXPECT_ERROR, INNER, LOOP_STEP, BATCH_ARG

    @property
    def expect_error(self) -> str | None:
        return self.extra.get("EXPECT_ERROR")


def read_metadata(code: str) -> dict[str, Any]:
    """The literal UPPERCASE constants assigned at the top level of ``code``.

    Only plain literals are returned (``ast.literal_eval``); assignments whose value is
    not a literal (``W = jnp.ones(3)``) are skipped. Source that does not parse gives
    ``{}``.
    """
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError):
        return {}
    meta: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        names = [t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper()]
        if not names:
            continue
        try:
            literal = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        for name in names:
            meta[name] = literal
    return meta


def _sample_from_file(path: Path) -> Sample | None:
    """Build a Sample from one file, or None when its metadata is unusable."""
    try:
        code = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    meta = read_metadata(code)
    function, args = meta.get("FUNCTION"), meta.get("ARGS")
    if not isinstance(function, str) or not function or not isinstance(args, str):
        return None
    static = meta.get("STATIC", ())
    if isinstance(static, str):
        static = (static,)
    if not isinstance(static, list | tuple) or not all(isinstance(s, str) for s in static):
        return None
    order = meta.get("ORDER", 1000)
    if isinstance(order, bool) or not isinstance(order, int):
        order = 1000
    title = meta.get("TITLE")
    description = meta.get("DESCRIPTION")
    return Sample(
        name=path.stem,
        title=title if isinstance(title, str) and title else path.stem.replace("_", " "),
        description=description if isinstance(description, str) else "",
        function=function,
        args=args,
        static=tuple(static),
        order=order,
        code=code,
        path=path,
        extra={k: meta[k] for k in EXTRA_KEYS if isinstance(meta.get(k), str)},
    )


_cache: dict[Path, tuple[tuple[tuple[str, int, int], ...], list[Sample]]] = {}
_cache_lock = threading.Lock()


def _signature(directory: Path) -> tuple[tuple[str, int, int], ...]:
    """Name, mtime and size of each sample file: a change means read them again."""
    found = []
    for path in directory.glob("*.py"):
        if path.name.startswith("_"):
            continue
        try:
            stat = path.stat()
        except OSError:
            continue
        found.append((path.name, stat.st_mtime_ns, stat.st_size))
    return tuple(sorted(found))


def list_samples(directory: Path | None = None) -> list[Sample]:
    """All samples in ``directory`` (default: the app's ``samples/``), by ORDER then name.

    Files whose names start with ``_`` and files without a usable FUNCTION/ARGS are
    skipped. Read once and kept until a file changes; thread-safe (the app server
    calls this from every session's thread). Returns a new list each call.
    """
    directory = (Path(directory) if directory is not None else SAMPLES_DIR).resolve()
    if not directory.is_dir():
        return []
    with _cache_lock:
        signature = _signature(directory)
        cached = _cache.get(directory)
        if cached is None or cached[0] != signature:
            cached = signature, _read_samples(directory, signature)
            _cache[directory] = cached
        return list(cached[1])


def _read_samples(directory: Path, signature: tuple[tuple[str, int, int], ...]) -> list[Sample]:
    samples = []
    for name, _, _ in signature:
        sample = _sample_from_file(directory / name)
        if sample is not None:
            samples.append(sample)
    samples.sort(key=lambda s: (s.order, s.name))
    return samples


def get_sample(name: str, directory: Path | None = None) -> Sample:
    """The sample whose file stem is ``name`` (a trailing ``.py`` is ignored)."""
    stem = name.removesuffix(".py")
    samples = list_samples(directory)
    for sample in samples:
        if sample.name == stem:
            return sample
    known = ", ".join(s.name for s in samples) or "(none)"
    raise KeyError(f"unknown sample {name!r}; available samples: {known}")


def default_sample(directory: Path | None = None) -> Sample:
    """The sample with the smallest ORDER (ties broken by name)."""
    samples = list_samples(directory)
    if not samples:
        where = directory if directory is not None else SAMPLES_DIR
        raise LookupError(f"no samples found in {where}")
    return samples[0]


def metadata_end(code: str) -> int:
    """The first line after the sample's metadata constants (TITLE = …, ORDER = …) that
    follow its docstring, blank lines between them skipped: the lines before it are the
    app's, not the user's code (the editor folds them). 1: no docstring and no metadata
    at the top."""
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError):
        return 1
    keys = {*REQUIRED_KEYS, *EXTRA_KEYS}
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring: the editor folds it when it is long
    last = 0
    for node in body:
        names = [t.id for t in getattr(node, "targets", ()) if isinstance(t, ast.Name)]
        if not (isinstance(node, ast.Assign) and names and set(names) <= keys):
            break
        last = node.end_lineno or node.lineno
    if not last:
        return 1
    lines = code.splitlines()
    while last < len(lines) and not lines[last].strip():
        last += 1
    return last + 1
