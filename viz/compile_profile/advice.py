"""What drives a compile, in words, with the numbers of this function: the repeated
structure (and the `lax.scan` that would compile it once), the Python loop that
unrolled it, the trace's hottest line, XLA's phases and the kernels whose code took
longest to generate. Plain data in, plain data out: the app, the CLI and the HTML
export share it. No jax."""

from __future__ import annotations

from dataclasses import dataclass

from viz.compile_profile.model import CompileProfileSection, XlaSpan
from viz.units import seconds
from viz.where import place

REPEATED_SHARE = 0.25  # a fold or loop holding less of the program is not what drives it
TRACE_SHARE = 0.25  # of trace + lower + compile: the trace is worth a word
KERNELS_SHARE = 0.10  # of the compile: the top kernels' code generation is worth a word
UNSPANNED_SHARE = 0.10  # of the compile, outside every XLA span
KERNELS_NAMED = 3


@dataclass(frozen=True)
class Driver:
    """One thing that drives the compile time: a title, the numbers and the fix;
    `lesson`: the *Compile vs program size* lesson measures it on the user's code."""

    kind: str  # repeated | loop | trace | phases | unspanned | kernels
    title: str
    text: str
    lesson: bool = False


def what_drives_it(p: CompileProfileSection, source_file: str | None = None) -> list[Driver]:
    """The drivers this profile shows, the ones that name a fix first."""
    found = [_repeated(p), _loop(p, source_file), _trace(p, source_file), _phases(p)]
    found += _unspanned(p)
    found.append(_kernels(p))
    return [d for d in found if d is not None]


def _repeated(p: CompileProfileSection) -> Driver | None:
    top = next((g for g in p.repeated if g.share >= REPEATED_SHARE), None)
    if top is None:
        return None
    return Driver(
        "repeated",
        f"`{top.group}` ×{top.count}: {top.share:.0%} of the program "
        f"({top.eqns:,} of its graph's {round(top.eqns / top.share):,} ops)",
        f"XLA optimizes and generates code for each of the {top.count} copies, so the "
        "compile grows with their number. Stack the copies' parameters and run one of "
        "them under `jax.lax.scan`: XLA then compiles it once, whatever the count.",
        lesson=True,
    )


def _loop(p: CompileProfileSection, source_file: str | None) -> Driver | None:
    top = next((loop for loop in p.loops if loop.share >= REPEATED_SHARE), None)
    if top is None:
        return None
    return Driver(
        "loop",
        f"The Python loop at {place(top.where, source_file)} ({top.function}) unrolled "
        f"{top.iterations} times",
        f"The trace ran its body {top.iterations} times and each turn became a copy in "
        f"the program: {top.eqns:,} of the {p.eqns:,} equations ({top.share:.0%}). "
        "`jax.lax.scan` (or `lax.fori_loop`) traces the body once.",
        lesson=True,
    )


def _trace(p: CompileProfileSection, source_file: str | None) -> Driver | None:
    total = sum(v or 0.0 for v in (p.trace_s, p.lower_s, p.compile_s))
    if not p.trace_s or total <= 0 or p.trace_s < TRACE_SHARE * total:
        return None
    heavy = [line for line in p.trace_lines if line.self_seconds > 0]
    hottest = max(heavy, key=lambda line: line.self_seconds, default=None)
    where = ""
    if hottest is not None:
        where = (
            f" Most of it runs in {place(hottest.where, source_file)} ({hottest.function}): "
            f"{seconds(hottest.self_seconds)} over {hottest.calls:,} runs."
        )
    return Driver(
        "trace",
        f"Tracing takes {p.trace_s / total:.0%} of trace + lower + compile",
        f"JAX runs your Python once per compile: {seconds(p.trace_s)}.{where}",
    )


def _phases(p: CompileProfileSection) -> Driver | None:
    """The chain of the longest span at each level, while it holds a good part of its
    parent and is one span (spans merged from many, a pool's tasks, are work, not a
    phase)."""
    tops = p.top_spans
    if not tops or not p.compile_s:
        return None
    chain: list[XlaSpan] = [max(tops, key=lambda s: s.seconds)]
    while True:
        kids = p.children(chain[-1])
        if not kids:
            break
        big = max(kids, key=lambda s: s.seconds)
        if big.count > 1 or big.seconds < 0.3 * min(chain[-1].seconds, p.compile_s):
            break
        chain.append(big)
    if len(chain) < 2:
        return None
    steps = " → ".join(f"{s.name} {s.seconds / p.compile_s:.0%}" for s in chain)
    return Driver(
        "phases",
        f"XLA's compile ({seconds(p.compile_s)}): the longest chain of spans ends in "
        f"{chain[-1].name} ({chain[-1].seconds / p.compile_s:.0%})",
        f"The longest span at each level, as a share of the compile: {steps}.",
    )


def _unspanned(p: CompileProfileSection) -> list[Driver]:
    """The top span's time before XLA's first span, and the one other span with the
    most time in none of its children (a step XLA does not span any further)."""
    if not p.top_spans or not p.compile_s:
        return []
    compile_s = p.compile_s
    top = max(p.top_spans, key=lambda s: s.seconds)
    found = []
    if top.self_seconds >= UNSPANNED_SHARE * compile_s:
        found.append(
            Driver(
                "unspanned",
                f"{seconds(top.self_seconds)} ({top.self_seconds / compile_s:.0%}) of "
                f"{top.name} is in no XLA span",
                "On CPU that is mostly the conversion of the StableHLO module to XLA's HLO "
                "before its passes start; it grows with the size of the program, like the "
                "rest.",
            )
        )
    inner = [s for s in p.xla if len(s.path) > 1 and s.count == 1]
    most = max(inner, key=lambda s: s.self_seconds, default=None)
    if most is not None and most.self_seconds >= UNSPANNED_SHARE * compile_s:
        found.append(
            Driver(
                "unspanned",
                f"{seconds(most.self_seconds)} ({most.self_seconds / compile_s:.0%}) of "
                f"{most.name} is in none of its child spans",
                f"XLA spans none of the steps {most.name} takes there, so the trace cannot "
                "split this time further; it grows with the size of the program.",
            )
        )
    return found


def _kernels(p: CompileProfileSection) -> Driver | None:
    if not p.kernels or not p.compile_s:
        return None
    top = p.kernels[:KERNELS_NAMED]
    spent = sum(k.seconds for k in top)
    if spent < KERNELS_SHARE * p.compile_s:
        return None
    named = ", ".join(f"`{k.kernel}` {seconds(k.seconds)}" for k in top)
    return Driver(
        "kernels",
        f"Generating code for {len(top)} kernels took {seconds(spent)}",
        f"{named}, of {len(p.kernels)} kernels compiled (on worker threads, beside "
        "the rest of the compile). The fusion map shows what went into each.",
    )
