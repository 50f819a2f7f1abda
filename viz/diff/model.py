"""The diff as data: `Diff` and its parts, whose `to_dict()` is DESIGN.md's diff JSON.

`Origin` says where one side comes from (its run in the history, and whether its full
report is kept); `DiffSide` is what that side ran, for headers; `KernelDiff` and its
briefs are the kernels matched across the runs (`viz.diff.kernels`); `TextDiff` is
one IR's unified text diff (`viz.diff.text`). Plain data only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from viz.diff.deltas import Delta
from viz.diff.peak import PeakDiff
from viz.diff.sharding import ShardingDiff
from viz.plain import Plain, flat
from viz.settings import Settings


@dataclass(frozen=True)
class Origin:
    """Where one side of a diff comes from: its run in the history, and whether the
    history still keeps its full report (else it is numbers only: no texts, kernels or
    graphs). A report from elsewhere (a JSON file, this session) has the default."""

    id: int | None = None
    when: str | None = None
    full: bool = True


# what a side says of its settings: a report keeps no code, folder, file, x64 setting,
# mesh or memory limit (x64 and the mesh as it ran are in the report itself)
NOT_SAID = ("code", "sample", "folder", "file", "x64", "mesh", "memory_limit_bytes")


@dataclass
class DiffSide(Plain):
    """What one side ran, for headers (`donate`: the arguments XLA was asked to donate).

    Its JSON has its settings' keys as its own (`viz.plain.flat`)."""

    id: int | None
    when: str | None
    full: bool
    ok: bool
    settings: Settings = field(default_factory=Settings, metadata=flat(omit=NOT_SAID))


@dataclass
class KernelBrief(Plain):
    name: str
    kind: str
    ops: dict[str, int]
    lines: list[int]


@dataclass
class SameKernel(KernelBrief):
    """An unchanged kernel, with its name in A and in B."""

    a: str = ""
    b: str = ""


@dataclass
class KernelChange(Plain):
    """A kernel matched across the runs that changed: the ops that moved, and its
    source lines and kind on both sides when they differ (else `{}`)."""

    a: KernelBrief
    b: KernelBrief
    ops: dict[str, Delta]
    lines: dict[str, tuple[int, ...]]
    kind: dict[str, str]


@dataclass
class KernelDiff(Plain):
    added: list[KernelBrief] = field(default_factory=list)
    removed: list[KernelBrief] = field(default_factory=list)
    changed: list[KernelChange] = field(default_factory=list)
    unchanged: int | None = None  # None: a side's kernels are not known
    same: list[SameKernel] = field(default_factory=list)
    note: str = ""  # why the kernels are not known ('' when they are)


@dataclass
class TextDiff(Plain):
    """A unified diff of one IR's text; `kept` False (and `note`) when a side's is gone."""

    kept: bool
    diff: str | None
    added: int | None
    removed: int | None
    note: str


@dataclass
class Diff(Plain):
    """Report A → report B; `to_dict()` is DESIGN.md's diff JSON."""

    a: DiffSide
    b: DiffSide
    counts: dict[str, Delta]
    timings: dict[str, Delta]
    cost: dict[str, Delta]
    memory: dict[str, Delta]
    kernels: KernelDiff
    ops: dict[str, Delta]
    stablehlo_ops: dict[str, Delta]
    ir: dict[str, TextDiff]
    sharding: ShardingDiff | None = None  # None: neither run is sharded
    peak: PeakDiff | None = None  # None: neither run has a memory profile

    @property
    def failed(self) -> tuple[bool, bool]:
        """Whether run A, run B failed (a number it never measured reads 'failed')."""
        return not self.a.ok, not self.b.ok
