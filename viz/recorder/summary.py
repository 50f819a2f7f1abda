"""The recording in a few lines, for stderr at the program's exit (stdlib only)."""

from __future__ import annotations

from viz.format import seconds
from viz.recorder.model import Recording, short_path

MAX_FUNCTIONS = 12  # rows of the ranking


def summary_text(recording: Recording) -> str:
    s, program = recording.summary, recording.program
    wall = program.wall_s or 0.0
    share = f" ({s.compile_s / wall:.0%})" if wall > 0 else ""
    plural = "" if s.compiles == 1 else "s"
    lines = [
        f"jitscope: {s.compiles} compile{plural} of {s.functions} function(s) took "
        f"{seconds(s.compile_s)} of {seconds(wall)} wall time{share}"
    ]
    if s.eager_compiles:
        lines.append(
            f"  plus {s.eager_compiles} op-by-op compile(s) of JAX's own "
            f"({seconds(s.eager_compile_s)}; --eager lists them)"
        )
    if s.details_dropped:
        lines.append(f"  {s.details_dropped} compile(s) kept in the counts only (--details N)")
    if s.recorder_errors:
        lines.append(
            f"  {s.recorder_errors} compile(s) the recorder failed to describe: a jitscope "
            "bug, please report it (the journal's error lines say what failed)"
        )
    ranked = [f for f in recording.functions if not f.eager][:MAX_FUNCTIONS]
    if ranked:
        width = max(len(f.name) for f in ranked)
        lines.append(f"  {'function':<{width}}  compiles   compile  defined at")
        for f in ranked:
            lines.append(
                f"  {f.name:<{width}}  {f.compiles:>8}  {seconds(f.compile_s):>8}  "
                f"{short_path(f.defined_at, program.cwd)}"
            )
            if f.advice:
                lines.append(f"  {'':<{width}}  ↳ {f.advice}")
    hidden = len(recording.functions) - len(ranked)
    if hidden > 0 and len(ranked) == MAX_FUNCTIONS:
        lines.append("  … and more functions (the JSON and the Recordings page list them all)")
    return "\n".join(lines)
