"""The compile profile as plain data (`Report.compile_profile`): where one compile's
time went, read from a second trace, lower and compile of the function on cleared
caches. No jax here: the app reads it.

Report JSON (DESIGN.md; add keys, never rename):
`compile_profile{trace_s, lower_s, compile_s, trace_lines[{where, function, seconds,
self_seconds, calls, eqns}], xla[{path, seconds, self_seconds}], xla_covered,
repeated[{group, count, share}]} | null`, and beside them what the view needs
(`trace_plain_s`, `loops`, `kernels`, `trace_file`, `error`, ...).

What the numbers mean:
- `trace_s`, `lower_s`, `compile_s`: the profiled stages' wall times (the trace under
  the sampler, the compile under `jax.profiler`); `trace_plain_s`: the same trace
  without the sampler, on cleared caches too: the sampler's distortion is the ratio.
- a trace line's `seconds`: the trace time while the line was on the stack (total);
  `self_seconds`: while it was the innermost line of the user's code; `calls`: how many
  times it ran during a trace (counted in a trace of its own, not timed); `eqns`: the
  jaxpr equations made under it (a nested jaxpr's equations count, as in
  `jaxpr.eqn_count`).
- an XLA span's `seconds`: the summed length of the spans at that path (XLA's spans of
  one name under the same parents, merged); on worker threads they can overlap in
  time, so children may add up to more than their parent; `self_seconds`: the part
  of each span that none of its children cover.
- `xla_covered`: the share of `compile_s` that the top-level spans cover.
- `repeated`: the groups the graph views fold (`layer0–layer95`, ×96: the same ops
  under consecutive look-alike scopes), `share` of the ops of the jaxpr's graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from viz.errors import ErrorInfo
from viz.plain import Plain
from viz.where import split_where


@dataclass
class TraceLine(Plain):
    """One line of the user's code, as the trace spent time and made equations under it."""

    where: str  # "model.py:4", "your code, line 4" (`viz.where.user_where`)
    function: str  # the function the line is in
    seconds: float = 0.0  # of the sampled trace, with the line on the stack
    self_seconds: float = 0.0  # with the line innermost of the user's code
    calls: int = 0  # how often it ran during one trace
    eqns: int = 0  # jaxpr equations made under it (nested ones included)
    text: str = ""  # the line's source, stripped

    @property
    def line(self) -> int | None:
        return split_where(self.where)[1]


@dataclass
class XlaSpan(Plain):
    """XLA's spans at one path from the root (`["backend_compile_and_load",
    "PjRtCpuClient::Compile", ...]`), merged: `count` of them."""

    path: list[str]  # span names from the top-level span down
    seconds: float  # the merged spans' lengths, summed
    self_seconds: float  # the part of each that none of its children cover, summed
    count: int = 1  # spans merged into this node

    @property
    def name(self) -> str:
        return self.path[-1]


@dataclass
class RepeatedGroup(Plain):
    """Look-alike scopes folded into one group (`layer0–layer95`, `count` 96) and its
    `share` of the ops of the jaxpr's graph (`eqns` of them: a call's or a custom
    derivative's equation is a group of the graph, not one of its ops)."""

    group: str  # layer0–layer95, or a chain's label
    count: int  # look-alike members (at least 3)
    share: float  # of the ops of the jaxpr's graph
    eqns: int = 0  # the graph's ops under the group


@dataclass
class UnrolledLoop(Plain):
    """A Python `for`/`while` loop of the user's code that ran during the trace, so
    that each iteration became a copy of its body in the program."""

    where: str  # "path:line" of the loop's header
    function: str
    iterations: int  # of its body's first line, over the whole trace
    eqns: int  # equations made under the loop's body
    share: float  # of the jaxpr's equations


@dataclass
class KernelCodegen(Plain):
    """The time XLA spent generating one kernel's code (its `FusionCompiler::Compile`
    spans on CPU), named as the compiled HLO names the kernel."""

    kernel: str
    seconds: float
    share: float  # of compile_s (the spans run on worker threads: shares can add past 1)


@dataclass
class CompileProfileSection(Plain):
    """Where one compile's time went (None in a report: not asked for), from a second
    trace, lower and compile on cleared caches."""

    trace_s: float | None = None  # the trace under the sampler
    lower_s: float | None = None
    compile_s: float | None = None  # XLA's compile under jax.profiler
    trace_lines: list[TraceLine] = field(default_factory=list)  # the slowest first
    xla: list[XlaSpan] = field(default_factory=list)  # parents before children
    xla_covered: float | None = None  # share of compile_s inside the top-level spans
    repeated: list[RepeatedGroup] = field(default_factory=list)  # the largest share first
    # beside the contract's keys
    trace_plain_s: float | None = None  # the trace without the sampler
    trace_user_s: float = 0.0  # of trace_s, with a line of the user's code on the stack
    samples: int = 0  # stacks the sampler took
    interval_s: float = 0.0  # the sampler's period, as asked for
    eqns: int = 0  # the jaxpr's equations (nested ones included)
    loops: list[UnrolledLoop] = field(default_factory=list)
    kernels: list[KernelCodegen] = field(default_factory=list)
    xla_spans: int = 0  # spans read from the profiler's trace (before merging)
    trace_file: str | None = None  # the profiler's trace of the compile, for Perfetto
    profile_s: float = 0.0  # what the whole profile cost (its traces, lower, compile)
    persistent_cache: str = "off"  # off | bypassed (the cache was on: off for this compile)
    error: ErrorInfo | None = None  # why the XLA part is missing (the trace part stays)
    warnings: list[str] = field(default_factory=list)

    @property
    def top_spans(self) -> list[XlaSpan]:
        return [s for s in self.xla if len(s.path) == 1]

    def children(self, span: XlaSpan) -> list[XlaSpan]:
        depth = len(span.path)
        return [s for s in self.xla if len(s.path) == depth + 1 and s.path[:depth] == span.path]

    @property
    def depth(self) -> int:
        """How many levels of spans the tree has."""
        return max((len(s.path) for s in self.xla), default=0)

    @property
    def trace_user_share(self) -> float | None:
        """Share of the trace spent with the user's code on the stack."""
        return min(self.trace_user_s / self.trace_s, 1.0) if self.trace_s else None

    @property
    def distortion(self) -> float | None:
        """The sampled trace's time over the plain one's (1.0: the sampler cost nothing)."""
        if not self.trace_s or not self.trace_plain_s:
            return None
        return self.trace_s / self.trace_plain_s
