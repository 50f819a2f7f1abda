"""Demo mode (`JITSCOPE_DEMO=1`): a shared screen or a LAN, where only the built-in
samples run: whether it is on, and its bounds.

`viz.worker.admit` applies the policy to every worker request twice: by the server's
`Worker.ask` before anything is sent, and again by the child before a handler
runs. A request names its sample (`sample='mlp'`); the code is then read from that
sample's file, whatever code the request carried, so a forged widget value, session
state or link can never run. Specs may use the spec language and bare names the
sample itself assigns, never other expressions; function names must be functions the
sample defines; sizes, sweep lengths and run counts are bounded; nothing that writes
files (dump options, the persistent compilation cache, the pass-by-pass view) is
allowed. This module imports neither Streamlit nor jax.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from viz.options import COMMON_OPTIONS


def enabled() -> bool:
    """Whether the app runs in demo mode (read on every call: tests flip it)."""
    return os.environ.get("JITSCOPE_DEMO", "").strip().lower() in ("1", "true", "yes", "on")


def exposed(address: str | None) -> bool:
    """Whether a server bound to `address` (Streamlit's server.address) is reachable
    from other machines. Unset means every interface."""
    if not address or not address.strip():
        return True
    host = address.strip().strip("[]").lower()
    return not (host == "localhost" or host == "::1" or host.startswith("127."))


@dataclass(frozen=True)
class Limits:
    """How big a demo request may be (a shared machine, an audience waiting)."""

    runs: int = 50  # timed runs per analysis
    calls: int = 32  # calls in one cache-lab sweep
    sizes: int = 32  # sizes in a lesson's sweep, buckets measured at once
    size: int = 4096  # the largest swept dimension or bucket
    loop_n: int = 256  # the longest loop in "compile vs program size"
    elements: int = 1 << 24  # elements of one array in a spec (64 MiB of f32)


LIMITS = Limits()

# Compiler options a demo may set, with the values it may give them: the ones the app
# offers (viz.options). Options that write files (xla_dump_*) are never allowed.
DEMO_COMPILER_OPTIONS: dict[str, frozenset[str]] = {
    option.key: frozenset(str(value) for value in option.values) for option in COMMON_OPTIONS
}
