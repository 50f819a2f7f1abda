"""The args-spec language (DESIGN.md): `f32[32,784], {'w': f32[3,3]}, 3, key, params`.

One implementation for every caller. `viz.spec.text` reads specs as text and never
imports jax (the app server uses it: splitting, dtype names, size lists, resizing),
nor do `viz.spec.partition` (the `@ P(...)` suffix) and `viz.spec.expression` (an
item as Python); `viz.spec.values` evaluates a spec into argument specs, and
`viz.spec.arguments` makes them into abstract or real arguments, in the worker. All
are re-exported here, except `viz.spec.calls` (a call's values written back as a spec,
for the recorder), which imports jax.
"""

from viz.spec.arguments import (
    abstract_args,
    array_specs,
    concrete_args,
    format_spec,
    input_bytes,
    uses_x64,
)
from viz.spec.expression import python_expression
from viz.spec.text import (
    DTYPES,
    NARROWED,
    SpecError,
    array_item,
    array_item_parts,
    dtype_name,
    parse_sizes,
    resize,
    split_spec,
)
from viz.spec.values import ArraySpec, KeySpec, ValueSpec, parse_spec

__all__ = [
    "DTYPES",
    "NARROWED",
    "ArraySpec",
    "KeySpec",
    "SpecError",
    "ValueSpec",
    "abstract_args",
    "array_item",
    "array_item_parts",
    "array_specs",
    "concrete_args",
    "dtype_name",
    "format_spec",
    "input_bytes",
    "parse_sizes",
    "parse_spec",
    "python_expression",
    "resize",
    "split_spec",
    "uses_x64",
]
