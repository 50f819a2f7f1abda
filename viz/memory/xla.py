"""What XLA says about a compiled program's memory, decoded from its two protos.

- The scheduled HLO module (`HloModuleProto`, `hlo.proto`): every computation XLA
  runs in order (the ENTRY, loop bodies and conditions, branches, calls; not the
  fused computations, which run inside one kernel) with its instructions (name,
  opcode, shape, operands, called computations) and the schedule, the order they
  run in. Also which parameters an output may overwrite (`input_output_alias`).
- The buffer assignment (`BufferAssignmentProto`): each logical buffer (a value one
  instruction defines at one shape index: its id, size and defining instruction),
  which buffers share one slot (`buffer_aliases`), and the allocations they were
  packed into, each buffer at an offset (parameter, constant, output, temporary, or
  thread-local: the scalars of a reducer, on a stack).

On CPU (jax 0.10) the buffer assignment holds no heap-simulator trace and XLA's
`peak_memory_in_bytes` counts the arguments and outputs only; the live ranges are
derived from these two (`viz.memory.live`). The protos arrive as bytes and are read
with the fields `viz.memory.schema` declares. No jax.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from viz.memory.padding import UNTILED, Layout, logical_bytes, padded_bytes
from viz.memory.schema import parse

ShapeIndex = tuple[int, ...]

# xla_data.proto's PrimitiveType, as jaxprs spell the dtypes
DTYPES = {
    1: "bool",
    2: "i8",
    3: "i16",
    4: "i32",
    5: "i64",
    6: "u8",
    7: "u16",
    8: "u32",
    9: "u64",
    10: "f16",
    11: "f32",
    12: "f64",
    15: "c64",
    16: "bf16",
    18: "c128",
    19: "f8_e5m2",
    20: "f8_e4m3fn",
    21: "i4",
    22: "u4",
    28: "f8_e4m3",
}
TUPLE, TOKEN = 13, 17
# The CPU compiler's fusions that a library runs (their backend_config names it): it
# allocates their intermediates itself, outside XLA's buffer assignment
LIBRARY_FUSIONS = (b'"__ynn_fusion"', b'"__onednn_fusion"')


@dataclass(frozen=True)
class Shape:
    """An HLO shape: an array's dtype and dimensions, or a tuple of shapes."""

    dtype: str = ""  # '' for a tuple or a token
    dims: tuple[int, ...] = ()
    elements: tuple[Shape, ...] | None = None  # a tuple's
    layout: Layout = UNTILED  # its tiles, where the platform tiles (a TPU's)

    def at(self, index: ShapeIndex) -> Shape:
        """The subshape at a shape index ({} is the shape itself)."""
        shape = self
        for i in index:
            if shape.elements is None or i >= len(shape.elements):
                return Shape()
            shape = shape.elements[i]
        return shape

    def indices(self) -> list[ShapeIndex]:
        """Every shape index of the shape, the tuple itself first ({} for an array)."""
        found: list[ShapeIndex] = [()]
        for i, element in enumerate(self.elements or ()):
            found += [(i, *rest) for rest in element.indices()]
        return found

    @property
    def logical_bytes(self) -> int:
        """Its elements' bytes (0 for a tuple)."""
        return logical_bytes(self.dtype, self.dims) if self.elements is None else 0

    @property
    def padded_bytes(self) -> int:
        """The bytes its layout's tiles take (its logical bytes where untiled)."""
        return padded_bytes(self.dtype, self.dims, self.layout) if self.elements is None else 0

    def __str__(self) -> str:
        if self.elements is not None:
            return "(" + ", ".join(map(str, self.elements)) + ")"
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


_ARRAY = Shape()


def read_shape(message: Any) -> Shape:
    """A parsed ShapeProto as a Shape."""
    kind = message.element_type
    if kind == TUPLE:
        return Shape(elements=tuple(read_shape(e) for e in message.elements))
    if kind == TOKEN:
        return Shape("token")
    layout = message.layout
    found = Layout(
        tuple(layout.minor_to_major),
        tuple(tuple(t.dimensions) for t in layout.tiles),
        layout.element_bits,
    )
    return Shape(DTYPES.get(kind, f"type{kind}"), tuple(message.dimensions), layout=found)


@dataclass
class Instruction:
    """One instruction of a scheduled computation."""

    id: int
    name: str
    opcode: str
    computation: int
    operands: list[int] = field(default_factory=list)
    called: list[int] = field(default_factory=list)  # computation ids
    tuple_index: int = 0  # get-tuple-element's
    parameter: int = 0  # a parameter's number
    library: bool = False  # a kernel a library runs, with working memory of its own
    tuple_shaped: bool = False  # its result is a tuple
    parsed_shape: Any = field(default=None, repr=False)  # its ShapeProto, as parsed

    @functools.cached_property
    def shape(self) -> Shape:
        """Its result's shape, converted when first asked for (a few rows need it)."""
        return read_shape(self.parsed_shape) if self.parsed_shape is not None else _ARRAY

    def indices(self) -> list[ShapeIndex]:
        """Every shape index of its result ({} alone for an array)."""
        return self.shape.indices() if self.tuple_shaped else [()]


@dataclass
class Computation:
    id: int
    name: str
    root: int


@dataclass
class Module:
    """The scheduled HLO module: its sequential computations, their instructions and
    their order (`schedule`: computation id → instruction ids)."""

    entry: int
    computations: dict[int, Computation]
    instructions: dict[int, Instruction]
    schedule: dict[int, list[int]]
    # (parameter number, shape index) of the parameters an output may overwrite
    aliased_parameters: set[tuple[int, ShapeIndex]] = field(default_factory=set)


# they run computations in turn (an async-start, the computation it wraps: a TPU's
# async slices and copies)
SEQUENTIAL = frozenset(("while", "call", "conditional", "async-start"))


def read_module(data: bytes) -> Module:
    """The module's computations, the schedule, and the instructions of the computations
    that run in turn from the ENTRY (a loop's body and condition, a branch, a call);
    the rest stay unread bytes: fused computations, which run inside one kernel, and
    the reducers a reduce or a sort applies element by element."""
    module = parse("Module", data)
    entry = module.entry
    records = {c.id: c for c in module.computations}
    schedule = {s.computation: list(s.order.instructions) for s in module.schedule.sequences}
    aliased = {(e.parameter, tuple(e.index)) for e in module.aliasing.entries}
    instructions: dict[int, Instruction] = {}
    waiting, seen = [entry], {entry}
    while waiting:
        cid = waiting.pop()
        for raw in records[cid].instructions if cid in records else ():
            inst = _instruction(parse("Instruction", raw), cid)
            instructions[inst.id] = inst
            if inst.opcode in SEQUENTIAL:
                waiting += [c for c in inst.called if c not in seen and c in schedule]
                seen.update(inst.called)
    computations = {  # the sequential ones: fused computations have no schedule
        cid: Computation(cid, c.name, c.root) for cid, c in records.items() if cid in schedule
    }
    return Module(entry, computations, instructions, schedule, aliased)


def _instruction(message: Any, computation: int) -> Instruction:
    shape, config = message.shape, message.backend_config
    return Instruction(
        id=message.id,
        name=message.name,
        opcode=message.opcode,
        computation=computation,
        operands=list(message.operands),
        called=list(message.called),
        tuple_index=message.tuple_index,
        parameter=message.parameter,
        library=bool(config) and any(name in config for name in LIBRARY_FUSIONS),
        tuple_shaped=shape.element_type == TUPLE,
        parsed_shape=shape,
    )


# An allocation's kind, as the report names buffers by it
PARAMETER, OUTPUT, TEMPORARY, CONSTANT, THREAD_LOCAL = (
    "parameter",
    "output",
    "temporary",
    "constant",
    "thread_local",
)
KINDS = (PARAMETER, OUTPUT, TEMPORARY, CONSTANT)
# The memory space (an allocation's colour) of the device's own memory: a TPU's HBM, a
# GPU's, the CPU's RAM; a TPU also places buffers in VMEM (1) and chip-internal memory (2)
DEVICE_MEMORY = 0


@dataclass(slots=True)
class Buffer:
    """One logical buffer: the value an instruction defines at a shape index, where it
    was placed (allocation, offset) and that allocation's kind."""

    id: int
    instruction: int
    index: ShapeIndex
    size: int
    allocation: int = -1  # -1: in no allocation of the program's own (thread-local)
    offset: int = 0
    kind: str = THREAD_LOCAL
    space: int = DEVICE_MEMORY  # its allocation's memory space (colour): a TPU's VMEM is 1


@dataclass
class Assignment:
    """The buffer assignment: the buffers, and the groups that share one slot (an
    in-place output and its operand, a loop's state through its iterations)."""

    buffers: dict[int, Buffer]
    shared: list[tuple[int, int]]  # (buffer, buffer defined at an aliasing location)
    allocation_bytes: dict[str, int]  # kind → bytes of its allocations (device memory)
    # memory space (colour) → bytes of its allocations, for the spaces other than the
    # device's memory (a TPU's VMEM, 1, and its chip-internal space, 2)
    other_spaces: dict[int, int] = field(default_factory=dict)


def read_assignment(data: bytes) -> Assignment:
    """The buffer assignment; an allocation in a memory space other than the device's
    memory is counted in `other_spaces`, its buffers placed with their space (the
    profile keeps them out of the device memory's peak)."""
    message = parse("Assignment", data)
    buffers = {
        b.id: Buffer(b.id, (at := b.at).instruction, tuple(at.index), b.size)
        for b in message.buffers
    }
    totals = dict.fromkeys((*KINDS, THREAD_LOCAL), 0)
    other_spaces: dict[int, int] = {}
    for allocation in message.allocations:
        kind = _kind(allocation)
        if allocation.color != DEVICE_MEMORY:  # counted apart
            other_spaces[allocation.color] = other_spaces.get(allocation.color, 0) + allocation.size
        else:
            totals[kind] += allocation.size
        if kind == THREAD_LOCAL:  # a reducer's scalars, on a stack: no slot of the program's
            continue
        for assigned in allocation.assigned:
            buffer = buffers.get(assigned.buffer)
            if buffer is not None:
                buffer.allocation, buffer.offset, buffer.kind = (
                    allocation.index,
                    assigned.offset,
                    kind,
                )
                buffer.space = allocation.color
    defined = {(b.instruction, b.index): b.id for b in buffers.values()}
    shared = [
        (alias.source, defined[at])
        for alias in message.aliases
        if (at := (alias.at.instruction, tuple(alias.at.index))) in defined
        and alias.source in buffers
    ]
    return Assignment(buffers, shared, totals, other_spaces)


def _kind(allocation: Any) -> str:
    """An allocation's kind: thread-local, an argument's, a constant's, an output's, or
    XLA's temporaries."""
    if allocation.thread_local:
        return THREAD_LOCAL
    if allocation.parameter:
        return PARAMETER
    if allocation.constant:
        return CONSTANT
    return OUTPUT if allocation.live_out else TEMPORARY
