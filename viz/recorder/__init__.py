"""Record a whole program: every compilation, why it happened, and where.

`python -m viz record -- train.py ARGS` runs the program as `python train.py ARGS`
would, in a child process whose compilations are appended to a journal as they happen;
the parent prints the summary at exit and stores the recording in history. In a
notebook or a test:

    with viz.recording() as rec:
        train()
    rec.compiles, rec.summary(), rec.save()

This module is the recorder's one public surface: `recording()`, and every name the app,
the command line and the notebook use (`__all__`), each imported from its module on first
use (a page that reads recordings loads neither jax nor the code that records). The
package is laid out by its jobs:

- `model` (the Recording JSON as dataclasses), `tally` (journal lines → a Recording,
  ranked, with each function's `advice`): what every job below shares;
- `capture/`: what runs inside the recorded program's own process (the one part that
  imports jax);
- `storage/`: where recordings are kept: the journal, the history file's recordings
  table, a JSON file, the journals of killed recorders;
- `display/`: a recording read and shown: the Recordings page's rows, the summary, the
  HTML page, two recordings compared, a multi-process job, the charts;
- `cli/`: `jitscope record` and `jitscope job`.

Imports run one way, each folder to those after it: `cli/`, `capture/`, `display/`,
`storage/`, then `model`, `tally` and `advice` (tests/test_house_rules.py: no circle).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# module → the public names it holds (none of them imports jax)
_PUBLIC: dict[str, tuple[str, ...]] = {
    "viz.recorder.capture.start": ("recording",),
    "viz.recorder.model": ("Compile", "Recording", "short_path"),
    "viz.recorder.storage.recordings": ("REF_PREFIX", "RecordingRow", "Recordings", "recording_id"),
    "viz.recorder.storage.orphans": ("orphans", "recover"),
    "viz.recorder.display.views": ("call_tree", "compile_rows", "explore_target", "function_rows"),
    "viz.recorder.display.html": ("RECORDING_STYLE", "recording_html", "recording_section"),
    "viz.recorder.display.compare": ("diff_recordings", "diff_rows", "diff_text"),
    "viz.recorder.display.summary": ("eager_words", "need_text"),
    "viz.recorder.display.charts": ("call_tree_chart", "job_timeline", "recording_timeline"),
    "viz.recorder.display.divergence": ("processes_text",),
    "viz.recorder.display.job": ("JobError", "JobView", "from_history", "job_view"),
    "viz.recorder.display.job_views": (
        "KIND_MEANING",
        "divergence_title",
        "ended_first_text",
        "process_rows",
        "site_rows",
        "straggler_rows",
    ),
}
_MODULE_OF = {name: module for module, names in _PUBLIC.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    if name in _MODULE_OF:
        return getattr(import_module(_MODULE_OF[name]), name)
    raise AttributeError(f"module 'viz.recorder' has no attribute {name!r}")
