"""The parts of XLA's protos the memory profile reads, declared to protobuf's runtime.

jaxlib hands over XLA's buffer assignment and scheduled HLO module as serialized protos
(`memory_analysis().serialized_buffer_assignment_proto`,
`hlo_modules()[0].as_serialized_hlo_module_proto()`) but ships no Python classes for
them. This module declares the few fields read, with XLA's own field numbers (from
`xla/service/hlo.proto` and `xla/xla_data.proto`), and has protobuf's runtime (upb,
in C; installed with Streamlit) parse them: the other fields are skipped. A fused
computation's instructions are kept as bytes and never parsed (`instructions` is
declared `bytes`, which the wire format allows for a message), so a 96-layer
transformer's 3 MB module parses in a few milliseconds.

    HloModuleProto      computations(3), entry_computation_id(6), schedule(7),
                        input_output_alias(8)
    HloComputationProto name(1), instructions(2, bytes), id(5), root_id(6)
    HloInstructionProto name(1), opcode(2), shape(3), parameter_number(9),
                        tuple_index(13), id(35), operand_ids(36),
                        called_computation_ids(38), backend_config(43)
    ShapeProto          element_type(2), dimensions(3), tuple_shapes(4), layout(5)
    LayoutProto         minor_to_major(1), tiles(6): {dimensions(1)},
                        element_size_in_bits(7)
    HloScheduleProto    sequences(1): map<computation id, {instruction_ids(1)}>
    HloInputOutputAliasProto entries(1): {parameter_number(2), parameter_shape_index(3)}
    BufferAssignmentProto logical_buffers(1), buffer_aliases(2), buffer_allocations(3)
    LogicalBufferProto  id(1), size(2), defined_at(3): {shape_index(3), instruction_id(4)}
    BufferAlias         source_buffer_id(1), location(2)
    BufferAllocationProto index(1), size(2), is_thread_local(3),
                        is_entry_computation_parameter(5), maybe_live_out(7),
                        color(8), assigned(9): {logical_buffer_id(1), offset(2),
                        size(3)}, is_constant(12)
    HloProto            hlo_module(1), buffer_assignment(3) (what XLA's dump writes to
                        `*after_optimizations.hlo.pb` with `xla_dump_hlo_as_proto`)
No jax.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {"int64": _F.TYPE_INT64, "bool": _F.TYPE_BOOL, "string": _F.TYPE_STRING}
_BYTES = _F.TYPE_BYTES

# message → field → (number, type, repeated): a type that is not a scalar is a message
# of this schema, or "bytes"
MESSAGES: dict[str, dict[str, tuple[int, str, bool]]] = {
    "Module": {
        "computations": (3, "Computation", True),
        "entry": (6, "int64", False),
        "schedule": (7, "Schedule", False),
        "aliasing": (8, "Aliasing", False),
    },
    "Computation": {
        "name": (1, "string", False),
        "instructions": (2, "bytes", True),
        "id": (5, "int64", False),
        "root": (6, "int64", False),
    },
    "Instruction": {
        "name": (1, "string", False),
        "opcode": (2, "string", False),
        "shape": (3, "Shape", False),
        "parameter": (9, "int64", False),
        "tuple_index": (13, "int64", False),
        "id": (35, "int64", False),
        "operands": (36, "int64", True),
        "called": (38, "int64", True),
        "backend_config": (43, "bytes", False),
    },
    "Shape": {
        "element_type": (2, "int64", False),
        "dimensions": (3, "int64", True),
        "elements": (4, "Shape", True),
        "layout": (5, "Layout", False),
    },
    "Layout": {
        "minor_to_major": (1, "int64", True),
        "tiles": (6, "Tile", True),
        "element_bits": (7, "int64", False),
    },
    "Tile": {"dimensions": (1, "int64", True)},
    "Schedule": {"sequences": (1, "Sequence", True)},  # a map: (key, value) entries
    "Sequence": {"computation": (1, "int64", False), "order": (2, "Order", False)},
    "Order": {"instructions": (1, "int64", True)},
    "Aliasing": {"entries": (1, "AliasEntry", True)},
    "AliasEntry": {"parameter": (2, "int64", False), "index": (3, "int64", True)},
    "Assignment": {
        "buffers": (1, "Buffer", True),
        "aliases": (2, "SharedSlot", True),
        "allocations": (3, "Allocation", True),
    },
    "Buffer": {"id": (1, "int64", False), "size": (2, "int64", False), "at": (3, "Place", False)},
    "Place": {"index": (3, "int64", True), "instruction": (4, "int64", False)},
    "SharedSlot": {"source": (1, "int64", False), "at": (2, "Place", False)},
    "Allocation": {
        "index": (1, "int64", False),
        "size": (2, "int64", False),
        "thread_local": (3, "bool", False),
        "parameter": (5, "bool", False),
        "live_out": (7, "bool", False),
        "color": (8, "int64", False),
        "assigned": (9, "Assigned", True),
        "constant": (12, "bool", False),
    },
    "Assigned": {"buffer": (1, "int64", False), "offset": (2, "int64", False)},
    "HloProto": {"module": (1, "bytes", False), "assignment": (3, "bytes", False)},
}
_PACKAGE = "jitscope.xla"


def _classes() -> dict[str, Any]:
    """The message classes, built once from MESSAGES in a pool of their own."""
    file = descriptor_pb2.FileDescriptorProto(
        name="jitscope_xla_subset.proto", package=_PACKAGE, syntax="proto3"
    )
    for name, fields in MESSAGES.items():
        message = file.message_type.add(name=name)
        for field_name, (number, kind, repeated) in fields.items():
            added = message.field.add(name=field_name, number=number)
            added.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
            if kind in _SCALARS:
                added.type = _SCALARS[kind]
            elif kind == "bytes":
                added.type = _BYTES
            else:
                added.type, added.type_name = _F.TYPE_MESSAGE, f".{_PACKAGE}.{kind}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name in MESSAGES
    }


_CLASSES = _classes()  # built at import: no lock needed, every thread shares them


def parse(message: str, data: bytes) -> Any:
    """`data` read as the schema's `message` (fields not declared are skipped)."""
    return _CLASSES[message].FromString(data)
