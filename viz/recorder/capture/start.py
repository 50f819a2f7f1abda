"""`recording()`: record every compilation made in this process while a block runs
(`viz.recording()`, the notebook's `%%jitscope_record`). Importing it imports no jax:
jax comes with the `Recorder`, when a recording starts.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from viz.recorder.model import DEFAULT_DETAILS, ProcessRun

if TYPE_CHECKING:
    from viz.recorder.capture.recorder import Recorder


@contextlib.contextmanager
def recording(
    details: int | None = None,
    eager: bool = False,
    journal: Path | str | None = None,
    name: str | None = None,
) -> Iterator[Recorder]:
    """Record every compilation made while the block runs (any thread). `details`:
    compiles kept with details per function (counts stay exact); `eager`: keep JAX's
    op-by-op compiles too; `journal`: also append each compile to this file."""
    from viz.recorder.capture.recorder import Recorder  # jax: only once recording starts

    kernel = _kernel_program()
    program = ProcessRun(
        argv=kernel[1] if kernel else list(sys.argv),
        cwd=os.getcwd(),
        started=time.time(),
        name=name or (kernel[0] if kernel else _program_name()),
        path=sys.path[0] if sys.path else "",
    )
    recorder = Recorder(
        program,
        Path(journal) if journal else None,
        DEFAULT_DETAILS if details is None else details,
        eager,
    ).start()
    try:
        yield recorder
    finally:
        recorder.stop()


def _program_name() -> str:
    """The script's name."""
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"


def _kernel_program() -> tuple[str, list[str]] | None:
    """(name, argv) in a Jupyter kernel, whose own argv is its launcher's command line
    (`ipykernel_launcher.py -f kernel-….json`): the notebook, where the kernel knows it
    (Jupyter server's JPY_SESSION_NAME, VS Code's `__vsc_ipynb_file__`), and the cell:
    ('train.ipynb, cell In [5]', ['/home/me/train.ipynb']). None outside a kernel."""
    if not sys.argv or "ipykernel" not in os.path.basename(sys.argv[0]):
        return None
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    namespace = getattr(shell, "user_ns", None) or {}
    notebook = os.environ.get("JPY_SESSION_NAME") or namespace.get("__vsc_ipynb_file__") or ""
    cell = getattr(getattr(shell, "displayhook", None), "prompt_count", None)  # its In [n]
    name = os.path.basename(notebook) or "notebook"
    return (f"{name}, cell In [{cell}]" if cell else name), [notebook or "notebook"]
