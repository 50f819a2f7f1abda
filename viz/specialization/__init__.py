"""What a compiled executable is specialized on: the three-value rule (issue #21).

For each argument leaf, a static value (baked in: each new value compiles again), a
dynamic value of known shape (shape, dtype and weak type baked in, values free), or
untraceable (its value would have decided a shape). `model` holds the plain rows,
`changes` the what-would-recompile specs and how to read the cache's answer (both
jax-free, for the app), `read` fills the rows from the pipeline's stages (the worker;
import it as `viz.specialization.read`, it imports jax).
"""

from viz.specialization.changes import Change, Outcome, changes, outcome, variant_spec
from viz.specialization.model import STATES, ShapeOp, SpecializedArg, summary

__all__ = [
    "STATES",
    "Change",
    "Outcome",
    "ShapeOp",
    "SpecializedArg",
    "changes",
    "outcome",
    "summary",
    "variant_spec",
]
