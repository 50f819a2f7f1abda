"""How the op count falls pass by pass, from XLA's own dumps (runs in the worker).

The program is compiled once more with XLA's dump options (passed per compile
through `Lowered.compile(compiler_options=...)`): XLA writes the HLO module after
every pass that changed it. Each dump is read by the same reader as the compiled
HLO, so a step's count means exactly what `compiled.op_count` means.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from viz.ir.hlo import read_hlo_text
from viz.ir.kernels import fusion_count
from viz.ir.model import op_histogram
from viz.stages import Lowered

# module_0004.jit_f.0014.HLO_passes_after_layout_assignment.after_fusion.before_fusion-wrapper.txt
_STEP = re.compile(
    r"\.(\d{4})\.(?P<pipeline>[^.]+)\.after_(?P<pass>[^.]+)(?:\.before_[^.]+)?\.txt$"
)
DUMP_OPTIONS = {"xla_dump_hlo_pass_re": ".*", "xla_dump_hlo_as_text": True}


def dumps_in_order(folder: Path) -> list[tuple[str, str, Path]]:
    """(pipeline, pass, file) from the unoptimized module to the final one."""
    steps: list[tuple[int, str, str, Path]] = []
    first = last = None
    for path in folder.glob("*.txt"):
        if path.name.endswith(".before_optimizations.txt"):
            first = ("input", "before optimizations", path)
        elif path.name.endswith("_after_optimizations.txt"):
            last = ("output", "after optimizations", path)
        elif found := _STEP.search(path.name):
            steps.append((int(found.group(1)), found["pipeline"], found["pass"], path))
    ordered = [(p, name, f) for _, p, name, f in sorted(steps)]
    return [s for s in (first, *ordered, last) if s is not None]


def count(text: str) -> dict[str, int]:
    graph = read_hlo_text(text)
    return {"op_count": sum(op_histogram(graph).values()), "fusion_count": fusion_count(graph)}


def pass_by_pass(lowered: Lowered) -> list[dict[str, Any]]:
    """One row per HLO pass that changed the module: its pipeline, name and counts."""
    with tempfile.TemporaryDirectory(prefix="jitscope-xla-dump-") as folder:
        lowered.compile({"xla_dump_to": folder, **DUMP_OPTIONS})
        rows = []
        for step, (pipeline, name, path) in enumerate(dumps_in_order(Path(folder))):
            rows.append(
                {"step": step, "pipeline": pipeline, "pass": name, **count(path.read_text())}
            )
    return rows
