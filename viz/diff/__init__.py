"""The diff of two analyses: what changed between report A and report B.

`diff_reports(a, b)` takes two `Report`s (an analysis, a report JSON file decoded with
`Report.from_dict`, `History.report(id)`) and returns a `Diff`, whose `to_dict()` is
DESIGN.md's diff JSON: every number as `{a, b, delta}` with `delta = b − a` (None when
either side lacks it):

- `counts{jaxpr.eqn_count, stablehlo.op_count, compiled.op_count,
  compiled.kernel_count, compiled.fusion_count}`, `timings{…}`, `cost{…}`, `memory{…}`;
- `kernels{added, removed, changed, unchanged, same}`: fused kernels matched across the
  runs by kind, the ops inside and their source lines, never by name (XLA renumbers
  `fusion.12` freely). A changed kernel kept its kind and lines but not its ops, its
  kind and ops but not its lines, or its kind and most of its ops and lines. `same`
  lists the unchanged ones (their names in A and in B), `unchanged` counts them;
- `ops{op: {a, b, delta}}` (the compiled program's ops by type) and
  `stablehlo_ops{…}`;
- `ir{jaxpr|stablehlo|compiled: {kept, diff, added, removed, note}}`: a unified text
  diff of each IR, when both reports still carry the text. The compiled HLO is
  compared without its `metadata={…}` and stack-frame tables: they hold file paths
  (user code is named by its hash) and jitscope's own frames, which differ between
  any two runs;
- `sharding{mesh_a, mesh_b, args[{arg, a, b}], collectives[{kind, dtype, count,
  bytes_per_device, lines_a, lines_b}]}` (count and bytes as `{a, b, delta}`), or
  None when neither run is sharded (`viz.diff.sharding`);
- `peak{a, b, a_buffers, b_buffers, said}`: each run's memory peak, the largest buffers
  live there, and what the change did to it ("donation saved 64 MiB at the peak"), or
  None when neither run has a memory profile (`viz.diff.peak`);
- `a`, `b`: what each side ran (function, args, static, device, options) and, for a
  run of the history, its `Origin` (id, when, whether its full report is kept).

A run whose full report the history no longer keeps is numbers only: pass its
`Origin` (`full=False`) and the diff says its texts and kernels are gone instead of
comparing empty ones. Typed data in, typed data out; no jax.

Modules: `deltas` (a report's summary numbers, `Delta`), `model` (`Diff` and its
parts, `Origin`), `kernels` (matching kernels across the runs), `text` (the IR text
diffs), `peak` (the memory peaks), `compare` (`diff_reports`, from those), `display`
(the Diff page's rows and the terminal summary).
"""

from viz.diff.compare import diff_reports, side
from viz.diff.deltas import (
    COST_KEYS,
    COUNT_PATHS,
    MEMORY_KEYS,
    TIMING_KEYS,
    Delta,
    Number,
    delta,
    donated_names,
    numbers,
)
from viz.diff.display import (
    LABELS,
    arg_change_rows,
    clock_note,
    collective_rows,
    collectives_line,
    human,
    kernel_rows,
    op_rows,
    rows,
    shown,
    summarize,
)
from viz.diff.kernels import SIMILAR, Pairs, diff_kernels
from viz.diff.model import (
    Diff,
    DiffSide,
    KernelBrief,
    KernelChange,
    KernelDiff,
    Origin,
    SameKernel,
    TextDiff,
)
from viz.diff.peak import PeakDiff
from viz.diff.sharding import ArgChange, CollectiveDelta, ShardingDiff, diff_sharding
from viz.diff.text import MAX_DIFF_LINES, comparable, diff_text, failure, label
from viz.ir.model import IRS

__all__ = [
    "COST_KEYS",
    "COUNT_PATHS",
    "IRS",
    "LABELS",
    "MAX_DIFF_LINES",
    "MEMORY_KEYS",
    "SIMILAR",
    "TIMING_KEYS",
    "ArgChange",
    "CollectiveDelta",
    "Delta",
    "Diff",
    "DiffSide",
    "KernelBrief",
    "KernelChange",
    "KernelDiff",
    "Number",
    "Origin",
    "Pairs",
    "PeakDiff",
    "SameKernel",
    "ShardingDiff",
    "TextDiff",
    "arg_change_rows",
    "clock_note",
    "collective_rows",
    "collectives_line",
    "comparable",
    "delta",
    "diff_kernels",
    "diff_reports",
    "diff_sharding",
    "diff_text",
    "donated_names",
    "failure",
    "human",
    "kernel_rows",
    "label",
    "numbers",
    "op_rows",
    "rows",
    "shown",
    "side",
    "summarize",
]
