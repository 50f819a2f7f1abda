"""Numbers as people read them (stdlib only)."""

from __future__ import annotations


def seconds(value: float) -> str:
    """1.23 s, 45.6 ms, 789 µs."""
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.1f} ms"
    return f"{value * 1e6:.0f} µs"
