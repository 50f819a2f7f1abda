"""XLA's own spans of one compile, read back from the trace `jax.profiler` wrote (its
Perfetto JSON, through `viz.platforms.trace`, the one reader of a trace) as a tree.

The compile runs inside a span of ours (`WINDOW`), on the calling thread. XLA works on
threads of its own: on CPU, `PjRtCpuClient::Compile` → `CpuCompiler::RunBackend` on a
compiler thread, and each kernel's code generation (`FusionCompiler::Compile` and its
MLIR passes) on worker threads. Spans nest by time on each thread; a thread's outermost
span hangs under the span that was innermost on a driving thread (the calling thread,
then the compiler thread: the one with the longest span) when it started, which is
the span that handed it the work. Spans of one name under the same parents merge into
one node (`XlaSpan.count`). On CPU the part of `backend_compile_and_load` before XLA's
first span is the StableHLO → HLO conversion, which XLA does not span. Which span
generates which kernel is the platform's (`Platform.trace_rules`: on CPU a
`FusionCompiler::Compile` span, on TPU the emitter's span named for the kernel).

A thread none of whose spans falls inside the compile is left out (a TPU's trace holds
`main/…` and `Grpc*` threads busy only before or after it).

`ThreadpoolListener` events (thread-pool bookkeeping) are left out, and so are the
Python tracer's (`$file.py:line name`), which the profile turns off.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from viz.compile_profile.model import KernelCodegen, XlaSpan
from viz.platforms import platform_of
from viz.platforms.trace import TraceEvent, TraceRules, read_trace

WINDOW = "jitscope: compile"  # the span the profile puts around the compile
NOISE = ("ThreadpoolListener::", "$")
HOST_PREFIX = "/host:"


@dataclass
class _Span:
    name: str
    start: int  # ns
    end: int
    thread: str
    kernel: str = ""  # the kernel whose code this span generates, if it names one
    children: list[_Span] = field(default_factory=list)
    depth: int = 0

    @property
    def seconds(self) -> float:
        return (self.end - self.start) / 1e9


@dataclass
class SpanTree:
    """What one compile's trace holds: the merged spans, the share of the compile
    their top level covers, the time spent generating each kernel, and how many spans
    were read."""

    spans: list[XlaSpan]
    covered: float | None
    kernels: list[KernelCodegen]
    count: int


def read_spans(trace: Path, compile_s: float, platform: str = "cpu") -> SpanTree:
    """The spans inside `WINDOW` of the Perfetto JSON trace at `trace`, read by
    `platform`'s rules (ValueError: no window)."""
    return spans_of(read_trace(trace), compile_s, platform)


def spans_of(events: list[TraceEvent], compile_s: float, platform: str = "cpu") -> SpanTree:
    """`read_spans` of a trace's events already read."""
    lines = _host_lines(events, platform_of(platform).trace_rules)
    window = next((s for spans in lines.values() for s in spans if s.name == WINDOW), None)
    if window is None:
        raise ValueError(f"the profiler's trace has no `{WINDOW}` span")
    inside = {thread: _inside(spans, window) for thread, spans in lines.items()}
    lines = {thread: spans for thread, spans in inside.items() if spans}
    top = _tree(lines, window.thread)
    return SpanTree(
        _merged(top),
        _covered(top) / compile_s if compile_s > 0 else None,
        _kernels(top, compile_s),
        sum(len(spans) for spans in lines.values()),
    )


def _host_lines(events: list[TraceEvent], platform: TraceRules) -> dict[str, list[_Span]]:
    """thread → its spans, from the host processes (a device's holds kernels run,
    not compiled)."""
    lines: dict[str, list[_Span]] = {}
    for event in events:
        if not event.process.startswith(HOST_PREFIX) or event.name.startswith(NOISE):
            continue
        thread = f"{event.process}/{event.tid}:{event.thread}"
        lines.setdefault(thread, []).append(_span(event, thread, platform))
    return lines


def _span(event: TraceEvent, thread: str, platform: TraceRules) -> _Span:
    return _Span(
        platform.span_name(event),
        event.start_ns,
        event.end_ns,
        thread,
        kernel=platform.codegen_kernel(event),
    )


def _inside(spans: list[_Span], window: _Span) -> list[_Span]:
    """The spans that overlap the window, cut to it (the window itself left out)."""
    kept = []
    for span in spans:
        if span is window or span.end <= window.start or span.start >= window.end:
            continue
        span.start, span.end = max(span.start, window.start), min(span.end, window.end)
        kept.append(span)
    return kept


def _nest(spans: list[_Span]) -> list[_Span]:
    """One thread's spans as a forest (they nest by time); returns its roots."""
    roots: list[_Span] = []
    stack: list[_Span] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        while stack and span.start >= stack[-1].end:
            stack.pop()
        if stack:
            span.depth = stack[-1].depth + 1
            stack[-1].children.append(span)
        else:
            roots.append(span)
        stack.append(span)
    return roots


def _tree(lines: dict[str, list[_Span]], main: str) -> list[_Span]:
    """The top-level spans, every thread's hung under the span that drove it."""
    roots = {thread: _nest(spans) for thread, spans in lines.items()}
    others = [t for t in lines if t != main]
    compiler = max(others, key=lambda t: max(s.end - s.start for s in lines[t]), default=None)
    top = list(roots.get(main, []))
    drivers = list(lines.get(main, []))
    if compiler is not None:
        _adopt(roots[compiler], drivers, top)
        drivers += lines[compiler]
    for thread in others:
        if thread != compiler:
            _adopt(roots[thread], drivers, top)
    return sorted(top, key=lambda s: s.start)


def _adopt(roots: Iterable[_Span], drivers: list[_Span], top: list[_Span]) -> None:
    """Each root under the innermost driver span open when it started, else on top."""
    for root in roots:
        open_then = [d for d in drivers if d.start <= root.start < d.end]
        if not open_then:
            top.append(root)
            continue
        parent = max(open_then, key=lambda d: (d.depth, d.start))
        parent.children.append(root)
        _deepen(root, parent.depth + 1)


def _deepen(span: _Span, depth: int) -> None:
    todo = [(span, depth)]
    while todo:
        node, d = todo.pop()
        node.depth = d
        todo.extend((child, d + 1) for child in node.children)


def _union_ns(intervals: Iterable[tuple[int, int]]) -> int:
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def _self_seconds(span: _Span) -> float:
    """The part of the span none of its children cover."""
    covered = _union_ns(
        (max(c.start, span.start), min(c.end, span.end))
        for c in span.children
        if c.end > span.start and c.start < span.end
    )
    return max(span.end - span.start - covered, 0) / 1e9


def _merged(top: list[_Span]) -> list[XlaSpan]:
    """Spans of one name under the same parents as one node; parents before children,
    siblings the longest first."""
    nodes: dict[tuple[str, ...], XlaSpan] = {}
    todo: list[tuple[tuple[str, ...], _Span]] = [((), s) for s in top]
    while todo:
        parent, span = todo.pop()
        path = (*parent, span.name)
        node = nodes.get(path)
        if node is None:
            node = nodes[path] = XlaSpan(list(path), 0.0, 0.0, 0)
        node.seconds += span.seconds
        node.self_seconds += _self_seconds(span)
        node.count += 1
        todo.extend((path, child) for child in span.children)
    return _ordered(nodes)


def _ordered(nodes: dict[tuple[str, ...], XlaSpan]) -> list[XlaSpan]:
    children: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for path in nodes:
        children.setdefault(path[:-1], []).append(path)
    out: list[XlaSpan] = []
    todo = sorted(children.get((), []), key=lambda p: nodes[p].seconds)
    while todo:
        path = todo.pop()
        out.append(nodes[path])
        todo.extend(sorted(children.get(path, []), key=lambda p: nodes[p].seconds))
    return out


def _covered(top: list[_Span]) -> float:
    return _union_ns((s.start, s.end) for s in top) / 1e9


def _kernels(top: list[_Span], compile_s: float) -> list[KernelCodegen]:
    seconds: dict[str, float] = {}
    todo = list(top)
    while todo:
        span = todo.pop()
        if span.kernel:
            seconds[span.kernel] = seconds.get(span.kernel, 0.0) + span.seconds
        todo.extend(span.children)
    found = [
        KernelCodegen(k, s, s / compile_s if compile_s > 0 else 0.0) for k, s in seconds.items()
    ]
    found.sort(key=lambda k: (-k.seconds, k.kernel))
    return found
