"""Where one compile's time goes: the trace by the user's source lines, XLA's compile
by its own spans, and the repeated structure that drives both (issue #36).

- `model`: the plain data (`Report.compile_profile`), no jax;
- `run`: `profile_compile(target, spec)`, which traces, lowers and compiles again on
  cleared caches (`sampler`, `lines`: the trace; `spans`: XLA's spans; `repeated`:
  the graph folds);
- `advice`: what drives the compile, in words, from the plain data (no jax).
"""

from viz.compile_profile.model import (
    CompileProfileSection,
    KernelCodegen,
    RepeatedGroup,
    TraceLine,
    UnrolledLoop,
    XlaSpan,
)

__all__ = [
    "CompileProfileSection",
    "KernelCodegen",
    "RepeatedGroup",
    "TraceLine",
    "UnrolledLoop",
    "XlaSpan",
]
