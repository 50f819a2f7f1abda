"""Quick variants of an analysis: the same request with one thing changed (fusion off,
the arrays donated, the batch doubled), each with why it does not apply when it does
not. Explore runs the chosen one and opens the diff view. No jax, no streamlit."""

from __future__ import annotations

from dataclasses import dataclass, replace

from viz.options import FUSION_OFF
from viz.program import join_spec, spec_rows
from viz.worker.protocol import Analyze


@dataclass(frozen=True)
class Variant:
    label: str
    icon: str
    help: str
    request: Analyze | None  # the variant's analysis; None: it does not apply
    why_not: str = ""


def options_text(options: dict[str, object]) -> str:
    return ", ".join(f"`{k}={v}`" for k, v in options.items())


def arrays(request: Analyze) -> list[tuple[str, int, str, tuple[int, ...]]]:
    """(parameter, spec index, dtype, shape) of each dynamic array parameter."""
    from viz.spec.text import array_item_parts, split_spec

    rows = spec_rows(request.code, request.function, request.args)
    items = split_spec(request.args)
    found = []
    for index, (name, _) in enumerate(rows[: len(items)]):
        parts = array_item_parts(items[index])
        if parts is not None and name not in request.static:
            found.append((name, index, *parts))
    return found


def fusion_off(request: Analyze) -> Variant:
    options = request.compiler_options
    done = all(options.get(k) == v for k, v in FUSION_OFF.items())
    return Variant(
        "Fusion off",
        ":material/call_split:",
        f"the same compile with {options_text(FUSION_OFF)}: every op its own kernel",
        None if done else replace(request, compiler_options={**options, **FUSION_OFF}),
        "this result was compiled with fusion off",
    )


def donate_arrays(request: Analyze) -> Variant:
    names = [name for name, *_ in arrays(request)]
    donate = request.donate + [n for n in names if n not in request.donate]
    applies = bool(names) and donate != request.donate
    return Variant(
        "Donate the arrays",
        ":material/recycling:",
        f"donate {', '.join(names)}: XLA may write outputs into their buffers",
        replace(request, donate=donate) if applies else None,
        "every array parameter is donated already" if names else "no array parameter",
    )


def batch_x2(request: Analyze) -> Variant:
    from viz.spec.text import array_item, split_spec

    found = [a for a in arrays(request) if a[3]]
    if not found:
        return Variant("Batch ×2", ":material/stacks:", "", None, "no array parameter with a shape")
    name, index, dtype, shape = found[0]
    items = split_spec(request.args)
    items[index] = array_item(dtype, (shape[0] * 2, *shape[1:]))
    return Variant(
        "Batch ×2",
        ":material/stacks:",
        f"`{name}`: {array_item(dtype, shape)} → {items[index]}",
        replace(request, args=join_spec(items)),
    )


def variants(request: Analyze) -> list[Variant]:
    return [fusion_off(request), donate_arrays(request), batch_x2(request)]
