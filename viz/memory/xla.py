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
derived from these two (`viz.memory.live`). No jax: the protos arrive as bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from viz.memory.wire import Value, fields, holds, ints, text

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

    def __str__(self) -> str:
        if self.elements is not None:
            return "(" + ", ".join(map(str, self.elements)) + ")"
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


_ARRAY = Shape()


def read_shape(data: bytes, span: Value) -> Shape:
    kind, dims, elements = 0, [], []
    for number, value in fields(data, span):
        if number == 2:
            kind = value
        elif number == 3:
            dims += ints(data, value)
        elif number == 4:
            elements.append(read_shape(data, value))
    if kind == TUPLE:
        return Shape(elements=tuple(elements))
    if kind == TOKEN:
        return Shape("token")
    return Shape(DTYPES.get(kind, f"type{kind}"), tuple(dims))


@dataclass
class Instruction:
    """One instruction of a scheduled computation."""

    id: int
    name: str
    opcode: str
    computation: int
    shape: Shape = _ARRAY
    operands: list[int] = field(default_factory=list)
    called: list[int] = field(default_factory=list)  # computation ids
    tuple_index: int = 0  # get-tuple-element's
    parameter: int = 0  # a parameter's number
    library: bool = False  # a kernel a library runs, with working memory of its own


@dataclass
class Computation:
    id: int
    name: str
    root: int
    is_fusion: bool = False


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


SEQUENTIAL = frozenset(("while", "call", "conditional"))  # they run computations in turn


def read_module(data: bytes) -> Module:
    """The module's computations, the schedule, and the instructions of the computations
    that run in turn from the ENTRY (a loop's body and condition, a branch, a call);
    the rest are skipped unread: fused computations, which run inside one kernel, and
    the reducers a reduce or a sort applies element by element."""
    entry, schedule, aliased = 0, {}, set()
    computations: dict[int, Computation] = {}
    bodies: dict[int, list[Value]] = {}
    for number, value in fields(data):
        if number == 3:
            computation, instructions = _computation(data, value)
            computations[computation.id] = computation
            bodies[computation.id] = instructions
        elif number == 6:
            entry = value
        elif number == 7:
            schedule = _schedule(data, value)
        elif number == 8:
            aliased = _aliased_parameters(data, value)
    instructions: dict[int, Instruction] = {}
    waiting, seen = [entry], {entry}
    while waiting:
        cid = waiting.pop()
        for raw in bodies.get(cid, ()):
            inst = _instruction(data, raw, cid)
            instructions[inst.id] = inst
            if inst.opcode in SEQUENTIAL:
                waiting += [c for c in inst.called if c not in seen and c in schedule]
                seen.update(inst.called)
    return Module(entry, computations, instructions, schedule, aliased)


def _computation(data: bytes, span: Value) -> tuple[Computation, list[Value]]:
    name, cid, root, fusion, instructions = "", 0, 0, False, []
    for number, value in fields(data, span, COMPUTATION_FIELDS):
        if number == 1:
            name = text(data, value)
        elif number == 2:
            instructions.append(value)
        elif number == 5:
            cid = value
        elif number == 6:
            root = value
        elif number == 7:
            fusion = bool(value)
    return Computation(cid, name, root, fusion), instructions


INSTRUCTION_FIELDS = frozenset((1, 2, 3, 9, 13, 35, 36, 38, 43))  # as read below
COMPUTATION_FIELDS = frozenset((1, 2, 5, 6, 7))


def _instruction(data: bytes, span: Value, computation: int) -> Instruction:
    inst = Instruction(0, "", "", computation)
    for number, value in fields(data, span, INSTRUCTION_FIELDS):
        if number == 1:
            inst.name = text(data, value)
        elif number == 2:
            inst.opcode = text(data, value)
        elif number == 3:
            inst.shape = read_shape(data, value)
        elif number == 9:
            inst.parameter = value
        elif number == 13:
            inst.tuple_index = value
        elif number == 35:
            inst.id = value
        elif number == 36:
            inst.operands += ints(data, value)
        elif number == 38:
            inst.called += ints(data, value)
        elif number == 43:
            inst.library = any(holds(data, value, name) for name in LIBRARY_FUSIONS)
    return inst


def _schedule(data: bytes, span: Value) -> dict[int, list[int]]:
    """HloScheduleProto: map<computation id, InstructionSequence{instruction_ids}>."""
    found = {}
    for number, entry in fields(data, span):
        if number != 1:
            continue
        key, ids = 0, []
        for part, value in fields(data, entry):
            if part == 1:
                key = value
            elif part == 2:
                ids = [i for n, v in fields(data, value) if n == 1 for i in ints(data, v)]
        found[key] = ids
    return found


def _aliased_parameters(data: bytes, span: Value) -> set[tuple[int, ShapeIndex]]:
    """HloInputOutputAliasProto: the (parameter, index) of each entry."""
    found = set()
    for number, entry in fields(data, span):
        if number != 1:
            continue
        parameter, index = 0, []
        for part, value in fields(data, entry):
            if part == 2:
                parameter = value
            elif part == 3:
                index += ints(data, value)
        found.add((parameter, tuple(index)))
    return found


# An allocation's kind, as the report names buffers by it
PARAMETER, OUTPUT, TEMPORARY, CONSTANT, THREAD_LOCAL = (
    "parameter",
    "output",
    "temporary",
    "constant",
    "thread_local",
)
KINDS = (PARAMETER, OUTPUT, TEMPORARY, CONSTANT)


@dataclass
class Buffer:
    """One logical buffer: the value an instruction defines at a shape index, where it
    was placed (allocation, offset) and that allocation's kind."""

    id: int
    instruction: int
    index: ShapeIndex
    size: int
    allocation: int = -1
    offset: int = 0
    kind: str = TEMPORARY


@dataclass
class Assignment:
    """The buffer assignment: the buffers, and the groups that share one slot (an
    in-place output and its operand, a loop's state through its iterations)."""

    buffers: dict[int, Buffer]
    shared: list[tuple[int, int]]  # (buffer, buffer defined at an aliasing location)
    allocation_bytes: dict[str, int]  # kind → bytes of its allocations


def read_assignment(data: bytes) -> Assignment:
    buffers: dict[int, Buffer] = {}
    aliases: list[tuple[int, int, ShapeIndex]] = []
    allocations: list[Value] = []
    for number, value in fields(data):
        if number == 1:
            buffer = _buffer(data, value)
            buffers[buffer.id] = buffer
        elif number == 2:
            aliases.append(_alias(data, value))
        elif number == 3:
            allocations.append(value)
    totals = dict.fromkeys((*KINDS, THREAD_LOCAL), 0)
    for raw in allocations:
        _place(data, raw, buffers, totals)
    defined = {(b.instruction, b.index): b.id for b in buffers.values()}
    shared = [
        (source, defined[(inst, index)])
        for source, inst, index in aliases
        if (inst, index) in defined and source in buffers
    ]
    return Assignment(buffers, shared, totals)


def _location(data: bytes, span: Value) -> tuple[int, ShapeIndex]:
    inst, index = 0, []
    for number, value in fields(data, span):
        if number == 4:
            inst = value
        elif number == 3:
            index += ints(data, value)
    return inst, tuple(index)


def _buffer(data: bytes, span: Value) -> Buffer:
    bid, size, at = 0, 0, (0, ())
    for number, value in fields(data, span):
        if number == 1:
            bid = value
        elif number == 2:
            size = value
        elif number == 3:
            at = _location(data, value)
    return Buffer(bid, at[0], at[1], size)


def _alias(data: bytes, span: Value) -> tuple[int, int, ShapeIndex]:
    source, at = 0, (0, ())
    for number, value in fields(data, span):
        if number == 1:
            source = value
        elif number == 2:
            at = _location(data, value)
    return source, at[0], at[1]


def _place(data: bytes, span: Value, buffers: dict[int, Buffer], totals: dict[str, int]) -> None:
    """An allocation: its kind given to the buffers packed into it, with their offsets."""
    index = size = 0
    flags: dict[int, int] = {}
    assigned: list[tuple[int, int]] = []
    for number, value in fields(data, span):
        if number == 1:
            index = value
        elif number == 2:
            size = value
        elif number in (3, 5, 7, 12):
            flags[number] = value
        elif number == 9:
            bid = offset = 0
            for part, v in fields(data, value):
                if part == 1:
                    bid = v
                elif part == 2:
                    offset = v
            assigned.append((bid, offset))
    kind = (
        THREAD_LOCAL
        if flags.get(3)
        else PARAMETER
        if flags.get(5)
        else CONSTANT
        if flags.get(12)
        else OUTPUT
        if flags.get(7)
        else TEMPORARY
    )
    totals[kind] += size
    for bid, offset in assigned:
        if bid in buffers:
            buffers[bid].allocation, buffers[bid].offset, buffers[bid].kind = index, offset, kind
