"""Quick variants of an analysis: the same request with one thing changed (fusion off,
the arrays donated, the CPU schedule that favours memory, the batch doubled), each with
why it does not apply when it does not. Explore runs the chosen one and opens the diff
view. No jax, no streamlit."""

from __future__ import annotations

from dataclasses import dataclass

from viz.options import FUSION_OFF, MEMORY_SCHEDULE
from viz.platforms import memory_schedule_of
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

    s = request.settings
    rows = spec_rows(s.code, s.function, s.args)
    items = split_spec(s.args)
    found = []
    for index, (name, _) in enumerate(rows[: len(items)]):
        parts = array_item_parts(items[index])
        if parts is not None and name not in s.static:
            found.append((name, index, *parts))
    return found


def fusion_off(request: Analyze) -> Variant:
    options = request.settings.compiler_options
    done = all(options.get(k) == v for k, v in FUSION_OFF.items())
    return Variant(
        "Fusion off",
        ":material/call_split:",
        f"the same compile with {options_text(FUSION_OFF)}: every op its own kernel",
        None if done else request.with_settings(compiler_options={**options, **FUSION_OFF}),
        "this result was compiled with fusion off",
    )


def donate_arrays(request: Analyze) -> Variant:
    names = [name for name, *_ in arrays(request)]
    asked = request.settings.donate
    donate = asked + [n for n in names if n not in asked]
    applies = bool(names) and donate != asked
    return Variant(
        "Donate the arrays",
        ":material/recycling:",
        f"donate {', '.join(names)}: XLA may write outputs into their buffers",
        request.with_settings(donate=donate) if applies else None,
        "every array parameter is donated already" if names else "no array parameter",
    )


def memory_schedule(request: Analyze) -> Variant:
    settings = request.settings
    options = settings.compiler_options
    done = all(options.get(k) == v for k, v in MEMORY_SCHEDULE.items())
    offered = bool(memory_schedule_of(settings.device))
    return Variant(
        "Memory-first schedule",
        ":material/low_priority:",
        f"the same compile with {options_text(MEMORY_SCHEDULE)}: XLA orders the program "
        "to keep fewer buffers live; the diff shows both peaks",
        request.with_settings(compiler_options={**options, **MEMORY_SCHEDULE})
        if offered and not done
        else None,
        "this result was compiled with it" if done else "an option of XLA's CPU compiler",
    )


def batch_x2(request: Analyze) -> Variant:
    from viz.spec.text import array_item, split_spec

    found = [a for a in arrays(request) if a[3]]
    if not found:
        return Variant("Batch ×2", ":material/stacks:", "", None, "no array parameter with a shape")
    name, index, dtype, shape = found[0]
    items = split_spec(request.settings.args)
    items[index] = array_item(dtype, (shape[0] * 2, *shape[1:]))
    return Variant(
        "Batch ×2",
        ":material/stacks:",
        f"`{name}`: {array_item(dtype, shape)} → {items[index]}",
        request.with_settings(args=join_spec(items)),
    )


def variants(request: Analyze) -> list[Variant]:
    return [
        fusion_off(request),
        donate_arrays(request),
        memory_schedule(request),
        batch_x2(request),
    ]
