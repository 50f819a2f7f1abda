"""A sharded analysis as plain data: the report's `sharding` section.

    sharding{mesh{axis: size}, args[{arg, spec, per_device_shape, bytes_per_device}],
             outputs[{index, spec, per_device_shape, bytes_per_device}],
             collectives[{kind, count, dtype, bytes_per_device, lines[int], kernels[str]}]}

`spec` is the compiled executable's sharding of the leaf (`P('data', None)`,
`replicated`), `per_device_shape` the shape of one device's shard (the sharding's
`shard_shape`) and `bytes_per_device` its bytes. A collective row groups the
collectives of one kind (the HLO opcode) and element type: how many instructions,
the bytes of their results on each device, the source lines and the kernels they
run as (`nodes`: their ids in the compiled graph, for highlighting). No jax here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from viz.plain import Plain


@dataclass
class ShardedArg(Plain):
    """One dynamic argument leaf as the compiled executable takes it."""

    arg: str  # the leaf as JAX names it: x, params[0]['w']
    spec: str  # P('data', None), replicated, single device
    per_device_shape: list[int]
    bytes_per_device: int
    shape: list[int] = field(default_factory=list)  # the global (logical) shape
    dtype: str = ""


@dataclass
class ShardedOutput(Plain):
    """One flat output as the compiled executable returns it."""

    index: int
    spec: str
    per_device_shape: list[int]
    bytes_per_device: int
    shape: list[int] = field(default_factory=list)
    dtype: str = ""
    path: str = ""  # where in the returned pytree: [0]['w'] ('' for a lone array)


@dataclass
class Collective(Plain):
    """The collectives of one kind and element type XLA put into the program."""

    kind: str  # the HLO opcode: all-reduce, all-gather, reduce-scatter, all-to-all, ...
    count: int  # instructions
    dtype: str  # element type(s) of their results: f32, or f32+i32 for a mixed tuple
    bytes_per_device: int  # bytes of their results on each device, all instructions
    lines: list[int] = field(default_factory=list)  # user source lines (the fusion map's)
    kernels: list[str] = field(default_factory=list)  # the kernels they run as
    nodes: list[str] = field(default_factory=list)  # their ids in the compiled graph
    jaxpr_eqns: list[str] = field(default_factory=list)  # the equations they came from


@dataclass
class ShardingSection(Plain):
    """How the compiled program is split over devices (None in a report: not sharded)."""

    mesh: dict[str, int] = field(default_factory=dict)
    args: list[ShardedArg] = field(default_factory=list)
    outputs: list[ShardedOutput] = field(default_factory=list)
    collectives: list[Collective] = field(default_factory=list)
    devices: int = 1  # devices the program runs on (the mesh's, or the executable's)

    @property
    def collective_nodes(self) -> frozenset[str]:
        """Every collective's node id in the compiled graph."""
        return frozenset(n for c in self.collectives for n in c.nodes)

    @property
    def collective_count(self) -> int:
        return sum(c.count for c in self.collectives)

    @property
    def collective_bytes(self) -> int:
        return sum(c.bytes_per_device for c in self.collectives)
