"""Buffer donation: which donated inputs XLA reused for which output, and why not.

Read from the programs themselves, never guessed:
- which leaves were donated: the compiled stage's `args_info` (JAX's own record,
  per leaf, named by the jaxpr's debug info);
- which leaves reached XLA: the StableHLO graph's `input_names` (main's arguments,
  in parameter order); jit prunes unused arguments;
- which parameter each output reuses: the compiled graph's `output_aliases` (the
  module's `input_output_alias`: parameter number → flat output index).
"""

from __future__ import annotations

from viz.ir.model import Graph
from viz.report import DonatedArg, Donation
from viz.stages import ArgLeaf

UNUSABLE_WARNING = "Some donated buffers were not usable"


def read_donation(
    args: list[ArgLeaf],
    outputs: list[tuple[tuple[int, ...], str]],
    stablehlo: Graph,
    compiled: Graph,
    warnings: list[str],
    saved_bytes: int | None,
) -> Donation:
    """The donation section for one compiled program (see the module docstring).
    `outputs`: the (shape, dtype) of each flat output."""
    kept = stablehlo.input_names
    found = []
    for leaf in args:
        param = kept.index(leaf.name) if leaf.name in kept else None
        aliased = compiled.output_aliases.get(param) if param is not None else None
        reason = _why_not(leaf, param, outputs) if leaf.donated and aliased is None else ""
        found.append(DonatedArg(leaf.name, leaf.donated, aliased, reason))
    return Donation(found, warnings, saved_bytes)


def _why_not(leaf: ArgLeaf, param: int | None, outputs: list[tuple[tuple[int, ...], str]]) -> str:
    typed = f"{leaf.dtype}{list(leaf.shape)}"
    if param is None:
        return "unused: the function never reads it, so jit pruned it"
    if (leaf.shape, leaf.dtype) not in outputs:
        return f"no output has its shape and dtype ({typed})"
    return f"every output of shape and dtype {typed} already reuses another input"
