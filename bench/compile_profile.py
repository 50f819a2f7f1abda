"""The compile profile (issue #36) on the 24- and 96-layer transformer
(samples/transformer_24.py at both depths), in one process.

For each model, ROUNDS rounds, each after a full garbage collection, alternating which
goes first: the whole profile (`profile_compile`: a counted trace, a plain one, a
sampled one, the lowering and the profiled compile, on cleared caches) and bare
`jax.jit(f).trace().lower().compile()` on cleared caches. It prints:

- the trace attribution of the median round: the share of trace_s under the user's
  lines (target >= 80 %), the top lines, and whether the top one is in the model's file;
- the sampler's distortion: each round's sampled trace over its plain one (median,
  and the spread over rounds);
- XLA's spans: the top-level spans' cover of compile_s (target 90-110 %), both of
  the profiled compile and of the fastest bare one, and the spans two levels down;
- the repeated groups and the loop that unrolled;
- the profile's own cost: its wall time, step by step, against bare jit.

`--methods` also compares the ways to attribute a trace (`sys._current_frames()`
sampled from a thread every 1 or 2 ms, `sys.setprofile`, `sys.settrace` on the user's
frames only, `jax.profiler`'s Python tracer), each as the ratio of its trace to a
plain trace on cleared caches, interleaved, over ROUNDS rounds: which distorts less.

usage: compile_profile.py [ROUNDS] [--methods] [--only 24|96]   (ROUNDS default 3)
Exit status 1 when a target is missed.
"""

from __future__ import annotations

import gc
import itertools
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

import jax

from viz.compile_profile.model import CompileProfileSection
from viz.compile_profile.run import profile_compile
from viz.compile_profile.sampler import LineCounter, StackSampler
from viz.settings import Settings
from viz.source import find_function, load_module
from viz.stages import trace
from viz.target import Target

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "transformer_24.py"
SPEC = "params, f32[2,128,256]"
USER_SHARE = 0.80
COVER = (0.90, 1.10)


def target(layers: int) -> Target:
    code = SAMPLE.read_text()
    module = load_module(code)
    module.params = module.init_params(n_layers=layers)
    return Target.from_settings(
        Settings(),
        find_function(module, code, "forward"),
        namespace=vars(module),
        user_file=module.__file__,
    )


def bare(t: Target) -> dict[str, float]:
    args = t.args(SPEC)
    jax.clear_caches()
    traced = trace(t, args)
    lowered = traced.lower()
    compiled = lowered.compile()
    stages = {"trace": traced.seconds, "lower": lowered.seconds, "compile": compiled.seconds}
    return stages | {"total": sum(stages.values())}


def profiled(t: Target) -> tuple[CompileProfileSection, dict[str, float]]:
    """The profile, and the seconds of each of its steps (from its progress frames)."""
    marks: list[tuple[str, float]] = []
    start = time.perf_counter()
    found = profile_compile(
        t, SPEC, progress=lambda p: marks.append((p["label"], time.perf_counter()))
    )
    end = time.perf_counter()
    marks.append(("reading the trace, lines and folds", start + found.profile_s))
    steps = {}
    for (label, at), (_, after) in itertools.pairwise(marks):
        steps[label] = after - at
    steps["before the first step (spec)"] = marks[0][1] - start
    steps["total"] = end - start
    return found, steps


def measure(layers: int, rounds: int) -> bool:
    t = target(layers)
    bare(t)  # warm up: imports, JAX's first compile
    runs: list[tuple[CompileProfileSection, dict[str, float]]] = []
    bares: list[dict[str, float]] = []
    for i in range(rounds):
        gc.collect()
        if i % 2:
            bares.append(bare(t))
        gc.collect()
        runs.append(profiled(t))
        gc.collect()
        if not i % 2:
            bares.append(bare(t))
    median = sorted(runs, key=lambda r: r[1]["total"])[len(runs) // 2]
    p, steps = median
    print(f"\n== {layers}-layer transformer: {rounds} rounds (the median round below)")
    ok = trace_attribution(p, t.user_file or "")
    distortion(runs)
    ok &= spans(p, runs, bares)
    repeated(p)
    cost(steps, runs, bares)
    return ok


def trace_attribution(p: CompileProfileSection, model_file: str) -> bool:
    share = p.trace_user_share or 0.0
    top = p.trace_lines[0] if p.trace_lines else None
    in_file = top is not None and top.path == model_file
    ok = share >= USER_SHARE and in_file
    print(
        f"  trace: {p.trace_s:.3f} s sampled, {p.samples} samples every {p.interval_s * 1e3:.0f} ms"
    )
    print(
        f"    on the user's lines: {share:.1%}  (target >= {USER_SHARE:.0%})  "
        + ("OK" if share >= USER_SHARE else "MISSED")
    )
    print(f"    top line in the model's file: {'yes  OK' if in_file else 'NO  MISSED'}")
    print("    line        function     total     self   runs   eqns  code")
    for row in p.trace_lines[:6]:
        print(
            f"    {'line ' + str(row.line):<11} {row.function:<10} {row.seconds:7.3f}  "
            f"{row.self_seconds:7.3f} {row.calls:6d} {row.eqns:6d}  {row.text[:48]}"
        )
    return ok


def distortion(runs: list[tuple[CompileProfileSection, dict[str, float]]]) -> None:
    ratios = [p.distortion for p, _ in runs if p.distortion]
    if not ratios:
        return
    spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
    print(
        f"  sampler distortion: sampled / plain trace, median {statistics.median(ratios):.3f} "
        f"(rounds {spread}; plain {statistics.median(p.trace_plain_s or 0 for p, _ in runs):.3f}"
        f" s, sampled {statistics.median(p.trace_s or 0 for p, _ in runs):.3f} s)"
    )


def spans(p: CompileProfileSection, runs: list, bares: list[dict[str, float]]) -> bool:
    if p.error is not None:
        print(f"  XLA: {p.error.message}  MISSED")
        return False
    covers = [q.xla_covered or 0 for q, _ in runs]
    fastest = min(b["compile"] for b in bares)
    top = sum(s.seconds for s in p.top_spans)
    ok = all(COVER[0] <= c <= COVER[1] for c in covers) and p.depth >= 2
    print(
        f"  XLA: compile {p.compile_s:.3f} s profiled (fastest bare compile {fastest:.3f} s), "
        f"{p.xla_spans} spans, {p.depth} levels"
    )
    print(
        f"    top-level spans cover {p.xla_covered:.1%} of the profiled compile "
        f"(rounds {min(covers):.1%}-{max(covers):.1%}; target {COVER[0]:.0%}-{COVER[1]:.0%})"
        f"  {'OK' if ok else 'MISSED'};  {top / fastest:.1%} of the fastest bare compile"
    )
    xla_own = next((s for s in p.xla if s.name == "PjRtCpuClient::Compile"), None)
    if xla_own is not None:
        print(
            f"    of which PjRtCpuClient::Compile (XLA's own, below JAX's "
            f"backend_compile_and_load): {xla_own.seconds / p.compile_s:.1%}"
        )
    print("    span (two levels below the top)                      seconds  share  self")
    for s in p.xla:
        if len(s.path) <= 3 and s.seconds >= 0.01 * (p.compile_s or 1):
            name = "  " * (len(s.path) - 1) + s.name
            print(
                f"    {name[:52]:<52} {s.seconds:7.3f} {s.seconds / p.compile_s:6.1%} "
                f"{s.self_seconds:6.3f}"
            )
    return ok


def repeated(p: CompileProfileSection) -> None:
    groups = " · ".join(
        f"{g.group} ×{g.count} ({g.share:.1%} of {p.eqns:,} eqns)" for g in p.repeated[:3]
    )
    print(f"  repeated: {groups or 'none'}")
    for loop in p.loops[:2]:
        print(
            f"  loop: line {loop.where.rsplit(':', 1)[1]} ({loop.function}) ran "
            f"{loop.iterations}×, {loop.share:.1%} of the equations"
        )


def cost(steps: dict[str, float], runs: list, bares: list[dict[str, float]]) -> None:
    totals = [s["total"] for _, s in runs]
    base = statistics.median(b["total"] for b in bares)
    print(
        f"  the profile's own cost: {statistics.median(totals):.2f} s median "
        f"(rounds {min(totals):.2f}-{max(totals):.2f}) against {base:.2f} s for bare "
        f"trace+lower+compile: {statistics.median(totals) / base:.2f}×"
    )
    for label, seconds in steps.items():
        if label != "total":
            print(f"    {label:<36} {seconds:7.3f} s")


# -- how to attribute a trace: which way distorts it least ----------------------------
def methods(rounds: int) -> None:
    t = target(96)
    args = t.args(SPEC)

    def trace() -> float:
        jax.clear_caches()
        return trace(t, args).seconds

    def sampled(interval: float) -> Callable[[], float]:
        def run() -> float:
            with StackSampler(interval):
                return trace()

        return run

    def setprofile() -> float:
        sys.setprofile(lambda frame, event, arg: None)
        try:
            return trace()
        finally:
            sys.setprofile(None)

    def settrace() -> float:
        with LineCounter():
            return trace()

    def python_tracer() -> float:
        folder = tempfile.mkdtemp(prefix="jitscope-bench-")
        options = jax.profiler.ProfileOptions()
        options.python_tracer_level = 1
        jax.profiler.start_trace(folder, profiler_options=options)
        try:
            return trace()
        finally:
            jax.profiler.stop_trace()
            shutil.rmtree(folder, ignore_errors=True)

    ways: dict[str, Callable[[], float]] = {
        "plain": trace,
        "sampled, 2 ms (the profile's)": sampled(0.002),
        "sampled, 1 ms": sampled(0.001),
        "sys.setprofile (every call)": setprofile,
        "sys.settrace (user frames)": settrace,
        "jax.profiler Python tracer": python_tracer,
    }
    trace(), trace()
    times: dict[str, list[float]] = {name: [] for name in ways}
    for i in range(rounds):
        order = list(ways) if i % 2 == 0 else list(reversed(ways))
        for name in order:
            gc.collect()
            times[name].append(ways[name]())
    plain = statistics.median(times["plain"])
    print(f"\n== attributing the 96-layer trace: {rounds} interleaved rounds, trace seconds")
    print(f"  {'way':<32} {'median':>8} {'min':>8} {'max':>8} {'vs plain':>9}")
    for name, found in times.items():
        print(
            f"  {name:<32} {statistics.median(found):8.3f} {min(found):8.3f} {max(found):8.3f}"
            f" {statistics.median(found) / plain:8.2f}×"
        )
    odd, even = times["plain"][1::2], times["plain"][::2]
    if odd and even:
        print(
            "  noise: plain odd / even rounds "
            f"{statistics.median(odd) / statistics.median(even):.3f}"
        )


def main(argv: list[str]) -> int:
    if {"-h", "--help"} & set(argv):
        print(__doc__)
        return 0
    words = [w for w in argv if not w.startswith("--")]
    rounds = int(words[0]) if words and words[0].isdigit() else 3
    only = argv[argv.index("--only") + 1] if "--only" in argv else ""
    ok = True
    for layers in (24, 96):
        if not only or only == str(layers):
            ok &= measure(layers, rounds)
    if "--methods" in argv:
        methods(max(rounds, 3))
    print(f"\n{'all targets met' if ok else 'a target was MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    threading.current_thread().name = "main"
    sys.exit(main(sys.argv[1:]))
