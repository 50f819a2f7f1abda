"""The fusion map's plain data, as the report keeps it: each kernel and what went into
it (`FusionEntry`), and how much of each IR the map found (`FusionCoverage`). No jax."""

from __future__ import annotations

from dataclasses import dataclass, field

from viz.plain import Plain


@dataclass
class FusionEntry(Plain):
    """One kernel (or one `no_kernel` instruction) and what went into it."""

    kernel: str
    kind: str
    stablehlo_ops: list[dict[str, str]] = field(default_factory=list)  # {id, name}
    jaxpr_eqns: list[dict[str, str]] = field(default_factory=list)  # {id, primitive}
    lines: list[int] = field(default_factory=list)
    title: str = ""  # the name the user gave the kernel: a Pallas kernel's function
    kernel_ir: str = ""  # the user's kernel's own IR text, where lowered to one (Mosaic on TPU)

    @property
    def is_kernel(self) -> bool:
        return self.kind != "no_kernel"

    @property
    def primitives(self) -> list[str]:
        """The primitive of each jaxpr equation in it, in order."""
        return [eqn["primitive"] for eqn in self.jaxpr_eqns]


@dataclass
class FusionCoverage(Plain):
    """Share of each IR's ops found in the optimized program (None: it had no ops), and
    per IR how they were found: {ops, by_metadata, by_dataflow, folded}."""

    stablehlo: float | None = None
    jaxpr: float | None = None
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
