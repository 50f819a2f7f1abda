"""Buffer donation: which donated inputs XLA reused for which output, and why not.

Read from the programs themselves, never guessed:
- which leaves were donated: `Lowered.args_info` (JAX's own record, per leaf);
- which leaves reached XLA: the StableHLO `main` arguments, named by their debug
  locations (`loc("x")`, `loc("y['a']")`); jit prunes unused arguments;
- which parameter each output reuses: the compiled module's `input_output_alias`
  (`{0}: (1, {}, may-alias)` → flat output 0 reuses parameter 1).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import jax

from viz.report import DonatedArg, Donation

_ALIAS = re.compile(r"\{([\d,\s]*)\}:\s*\((\d+),")
_LOC_NAME = re.compile(r'^loc\("((?:[^"\\]|\\.)*)"')
UNUSABLE_WARNING = "Some donated buffers were not usable"


def output_aliases(hlo_text: str) -> dict[int, int]:
    """parameter number → flat output index, from the module's `input_output_alias`."""
    header = hlo_text.split("\n", 1)[0]
    start = header.find("input_output_alias={")
    if start < 0:
        return {}
    body = header[start : header.find(" }", start) + 2]
    found = {}
    for index, param in _ALIAS.findall(body):
        output = int(index.split(",")[0]) if index.strip() else 0
        found[int(param)] = output
    return found


def kept_arguments(module: Any) -> list[str]:
    """Names of the leaves that reached XLA, in parameter order (main's arguments)."""
    main = next(
        op
        for op in module.body.operations
        if "sym_name" in op.attributes and str(op.attributes["sym_name"]) == '"main"'
    )
    names = []
    for argument in main.arguments:
        found = _LOC_NAME.match(str(argument.location))
        names.append(found.group(1).replace('\\"', '"') if found else "")
    return names


def read_donation(
    lowered: Any,
    module: Any,
    hlo_text: str,
    arg_names: Sequence[str],
    warnings: list[str],
    saved_bytes: int | None,
) -> Donation:
    """The donation section for one compiled program (see the module docstring).
    `arg_names`: JAX's names of the dynamic argument leaves, in order (`x`, `xs[0]`,
    `params['w']`: the traced jaxpr's debug info)."""
    positional, _ = lowered.args_info
    kept = kept_arguments(module)
    aliases = output_aliases(hlo_text)
    outputs = [(tuple(o.shape), str(o.dtype)) for o in jax.tree.leaves(lowered.out_info)]
    args = []
    for leaf, info in zip(arg_names, jax.tree.leaves(positional), strict=False):
        param = kept.index(leaf) if leaf in kept else None
        aliased = aliases.get(param) if param is not None else None
        reason = _why_not(info, param, outputs) if info.donated and aliased is None else ""
        args.append(DonatedArg(leaf, bool(info.donated), aliased, reason))
    return Donation(args, warnings, saved_bytes)


def _why_not(info: Any, param: int | None, outputs: list[tuple[tuple, str]]) -> str:
    shape, dtype = tuple(info.shape), str(info.dtype)
    typed = f"{dtype}{list(shape)}"
    if param is None:
        return "unused: the function never reads it, so jit pruned it"
    if (shape, dtype) not in outputs:
        return f"no output has its shape and dtype ({typed})"
    return f"every output of shape and dtype {typed} already reuses another input"
