"""The memory profile's plain data: the report's `memory` fields beyond XLA's totals.

    peak_bytes, peak_at{position, instruction, op, where},
    timeline[{position, bytes, parameter, output, temporary, constant, instruction}],
    at_peak[{instruction, op, shape, dtype, bytes, kind, where, live[from, to], ...}],
    by_kind_at_peak{parameter, output, temporary, constant}, xla_peak_bytes,
    xla_peak_parts{bytes, held_bytes, space, space_bytes, position, instruction}

A position is a step of the schedule XLA runs the program in (`viz.memory.live`); the
bytes at a position are those of every buffer live there (read and written by that
step included), each slot counted once where XLA placed two buffers in it (an output
written over its operand). A buffer's `kind`: an argument (`parameter`), an `output`
(what the program hands back, in its own slot or written over a donated argument), a
`temporary` (anything else XLA allocates, in whatever slot it placed it), or a
`constant`. `where` is the
user's line (`model.py:12`) from the instruction's metadata. No jax.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from viz.plain import Plain


@dataclass
class PeakAt(Plain):
    """The step of the schedule where the most bytes are live."""

    position: int  # its place in the schedule, 0 first
    instruction: str  # the instruction that runs there
    op: str  # its HLO opcode
    where: str = ""  # its line in the user's code (path:line), '' where XLA names none


@dataclass
class TimelinePoint(Plain):
    """The bytes live at one step of the schedule, and their split by kind."""

    position: int  # the step, 0 first
    bytes: int  # live there, all kinds
    parameter: int = 0  # the arguments' buffers
    output: int = 0  # the outputs' (once made)
    temporary: int = 0  # XLA's temporaries
    constant: int = 0  # constants XLA keeps in buffers
    instruction: str = ""  # the step's instruction ('' past the last: the outputs handed back)


@dataclass
class PeakBuffer(Plain):
    """A buffer live at the peak (or the row `other`: the small ones, merged)."""

    instruction: str  # the instruction that defines it (the kernel, for a fusion)
    op: str  # its HLO opcode: fusion, sort, dot, parameter, ...
    shape: list[int]  # its dimensions
    dtype: str  # f32, bf16, … ('tuple' for a tuple's table of pointers)
    bytes: int  # that it alone holds at the peak
    kind: str  # parameter | output | temporary | constant (mixed: an `other` row's)
    where: str = ""  # the line that made it (path:line), '' where XLA names none
    live: list[int] = field(default_factory=list)  # [from, to], positions, inclusive
    index: list[int] = field(default_factory=list)  # its place in a tuple result
    recomputed: bool = False  # made by an op jax.checkpoint recomputes
    buffers: int = 1  # buffers the row stands for (`other`: several)
    argument: str = ""  # a parameter's argument as the user wrote it: params['w']
    note: str = ""  # how its line was found, or why it has none (a copy XLA inserted for layout)
    logical_bytes: int = 0  # its elements' bytes (its shape's)
    padded_bytes: int = 0  # as its layout's tiles lay it out (a TPU's): ≥ logical_bytes
    layout: str = ""  # its tiled layout as HLO prints it, {0,1:T(4,128)}; '' where untiled (CPU)

    @property
    def type(self) -> str:
        """`f32[2048,8192]` ('' for the `other` row)."""
        return f"{self.dtype}[{','.join(map(str, self.shape))}]" if self.dtype else ""


@dataclass
class XlaPeakParts(Plain):
    """What XLA's own peak (`peak_memory_in_bytes`) counts where the platform says (a
    TPU's), recomputed from its buffer assignment: the arguments, outputs and constants
    in the device's memory (HBM), held for the whole run, and another memory space
    (VMEM) at its own peak. HBM's temporaries are not in it. On the recorded TPU v5e
    programs it equals XLA's figure to the byte (tests/test_memory_tpu.py)."""

    bytes: int  # held_bytes + space_bytes: XLA's figure, as XLA makes it
    held_bytes: int  # arguments, outputs and constants in the device's memory
    space: str  # the other memory space counted, as XLA numbers it ('1': a TPU's VMEM)
    space_bytes: int  # live in that space at its peak
    position: int = 0  # the step of the schedule where that space peaks
    instruction: str = ""  # the instruction that runs there ('' where nothing lives in it)


@dataclass
class Residual(Plain):
    """A value the backward pass keeps from the forward pass (what
    `jax.ad_checkpoint.print_saved_residuals` prints, one line a row)."""

    shape: list[int]  # its dimensions
    dtype: str  # f32, bf16, …
    bytes: int  # its size
    source: str  # 'output of sin', 'the argument x', 'a literal', ...
    where: str = ""  # the line that made it, where JAX names one


@dataclass
class OomEstimate(Plain):
    """How the profile of a program XLA refused to compile (out of memory) was found:
    the same program compiled at smaller batches, sizes taken back to the full one
    (`viz.memory.estimate`)."""

    method: str  # 'scaled-down compile'
    batch: int  # the arguments' leading dimension asked for
    compiled_at: list[int] = field(default_factory=list)  # the batches compiled, largest first
    checked_pct: float | None = None  # the third batch's peak off the line of the first two, %
    validated_pct: float | None = None  # off the real peak on a program that fits (tests), %
    said: str = ""  # the method and its closeness, in words
    xla_required_bytes: int | None = None  # what XLA's refusal says it needs (None: it says not)
    xla_required_for: str = ""  # what that counts: 'HLO temporaries' ('' everything)


@dataclass
class DeviceMemory(Plain):
    """The device's own count (`device.memory_stats()`), read after the timed runs:
    what its runtime's allocator held in this process. None where it gives no figure."""

    peak_bytes_in_use: int | None = None  # the most it held at once since the process began
    bytes_in_use: int | None = None  # what it holds after the runs
    bytes_limit: int | None = None  # the most it may hold on the device

    @classmethod
    def of(cls, stats: dict[str, int] | None) -> DeviceMemory | None:
        """From `memory_stats()`'s dict (None: the device gives none, as the CPU)."""
        if not stats or stats.get("peak_bytes_in_use") is None:
            return None
        return cls(*(stats.get(k) for k in ("peak_bytes_in_use", "bytes_in_use", "bytes_limit")))


@dataclass
class Memory(Plain):
    """XLA's totals (`memory_analysis()`), and the memory profile (issue #54,
    `viz.memory`): the bytes live at each step of the schedule, the peak and the
    buffers live there, XLA's own peak beside it, and what a run must fit in."""

    argument_bytes: int | None = None
    output_bytes: int | None = None
    temp_bytes: int | None = None
    alias_bytes: int | None = None
    generated_code_bytes: int | None = None
    peak_bytes: int | None = None  # the most bytes live at one step of the schedule
    peak_at: PeakAt | None = None  # that step
    timeline: list[TimelinePoint] = field(default_factory=list)  # the bytes live at each step
    at_peak: list[PeakBuffer] = field(default_factory=list)  # live at the peak, largest first
    by_kind_at_peak: dict[str, int] = field(default_factory=dict)  # parameter, output, …
    xla_peak_bytes: int | None = None  # peak_memory_in_bytes (on CPU: arguments + outputs)
    xla_peak_parts: XlaPeakParts | None = None  # what XLA's peak counts (a TPU's); else None
    limit_bytes: int | None = None  # the device's bytes_limit, else the pool's budget
    limit_of: str = ""  # which of the two
    library_kernels: list[str] = field(default_factory=list)  # their memory is their own
    recomputed: list[str] = field(default_factory=list)  # kernels jax.checkpoint recomputes
    residuals: list[Residual] = field(default_factory=list)  # saved for the backward pass
    residuals_note: str = ""  # why the residuals are not listed, where they are not
    profile_warning: str = ""  # why there is no profile, where XLA's could not be read
    # bytes XLA allocated in memory spaces other than the device's memory, by space
    # (an allocation's colour: a TPU's VMEM is 1), not in the peak
    other_spaces: dict[str, int] = field(default_factory=dict)
    estimate: OomEstimate | None = None  # the figures are estimated: XLA refused the compile
    device: DeviceMemory | None = None  # memory_stats() after the runs (None: none, as on CPU)

    @property
    def arguments_at_peak(self) -> int:
        """The bytes of the program's arguments live at the peak."""
        return self.by_kind_at_peak.get("parameter", 0)
