"""Where a finished recording goes: its JSON file, and history.sqlite (stdlib only);
and how the CLI names one in history (`rec:12`)."""

from __future__ import annotations

import json
import re
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


REF_PREFIX = "rec:"  # a recording in history, as the CLI names it: rec:12


def recording_id(ref: str) -> int | None:
    """The history id `rec:12` (or `rec:#12`) names; None when `ref` is not such a name."""
    match = re.fullmatch(rf"{REF_PREFIX}#?([0-9]+)", ref)
    return int(match.group(1)) if match else None
