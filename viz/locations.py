"""Where jitscope's own files are, and the command that opens the app from here.

The app (``app.py``, ``ui/``, ``pages/``, ``samples/``, ``assets/`` and Streamlit's
``.streamlit/config.toml``) sits beside the ``viz`` folder in a clone, and so after
``pip install -e .``; a wheel installs the same files as the ``jitscope_app`` folder
beside ``viz`` (see pyproject.toml). Never raises.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
APP_DIR = _ROOT if (_ROOT / "app.py").is_file() else _ROOT / "jitscope_app"
APP_SCRIPT = APP_DIR / "app.py"
SAMPLES_DIR = APP_DIR / "samples"


def home() -> Path:
    """Where jitscope keeps its files (user sources, history, recordings, the persistent
    cache)."""
    return Path(os.environ.get("JITSCOPE_HOME", Path.home() / ".cache" / "jitscope"))


def command_name() -> str:
    """This command as the user can type it again, by its name, never a full path (a
    venv's `…/bin/jitscope` typed whole reads `jitscope`): `jitscope` where it was
    called so or is on PATH (an activated venv; also from `python -m viz` or a
    notebook), else `python -m viz`."""
    script = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return "jitscope" if script == "jitscope" or shutil.which("jitscope") else "python -m viz"


def invoked_name() -> str:
    """This command as it was called, for its `--help`: `jitscope` run as the console
    script, else `python -m viz`."""
    script = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return "jitscope" if script == "jitscope" else "python -m viz"


def app_command() -> str:
    """How to open the app from the current folder."""
    return f"{command_name()} app"
