"""Where a finished recording goes: its JSON file, and history.sqlite (stdlib only)."""

from __future__ import annotations

import json
from pathlib import Path

from viz.history import History
from viz.recorder.model import Recording


def save(
    recording: Recording, json_path: Path | str | None = None, history: bool = True
) -> int | None:
    """Write the Recording JSON to `json_path` (if given; `-` is stdout) and store the
    recording in history (if `history`); returns its history id, or None."""
    data = recording.to_dict()
    if json_path == "-":
        print(json.dumps(data, indent=2, default=str))
    elif json_path:
        Path(json_path).write_text(json.dumps(data, indent=2, default=str))
    return History().record_recording(recording) if history else None
