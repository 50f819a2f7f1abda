"""Demo mode (`JITSCOPE_DEMO=1`): a shared screen or a LAN, where only the built-in
samples run. This module only says whether it is on; the pages and the worker
requests consult it. It imports neither Streamlit nor jax."""

from __future__ import annotations

import os


def enabled() -> bool:
    """Whether the app runs in demo mode (read on every call: tests flip it)."""
    return os.environ.get("JITSCOPE_DEMO", "").strip().lower() in ("1", "true", "yes", "on")
