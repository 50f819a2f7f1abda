"""A click's round trip through the worker, phase by phase, against the compile alone
(issue #52).

For samples/transformer_24.py at 24 and at 96 layers, in one run, `--rounds` rounds
interleaved (which side goes first alternates):

- bare: in this warm process, the module exec'd (its parameters made), then
  `jax.jit(forward).trace(params, x).lower().compile()`, JAX's caches cleared;
- the page: Explore in AppTest, its real worker, compile only (Timed runs 0): the code
  (new each round, so the worker loads it), then Analyze. The round trip is the page's
  `Worker.ask` (the streamed stages drawn as they come, the reply decoded), then the
  page's own work until it is drawn (the history, the first screen);
- again: the same code with other arguments (`x` half as long), Analyze, against a bare
  trace + lower + compile of those arguments on the module already loaded here.

Phases are stamped on the monotonic clock, which the worker and this process share:
the worker runs this file (`--child`) with its steps timed, this process times its
own. Printed per model: every phase (min, median, max over the rounds), the ratios,
and the reply's size on the wire. Within the worker's pipeline: each stage as the
report times it (the compile is XLA's, with the dump it writes for the reader), the
wait for the reader thread once XLA returned (its last graphs, where the compile left
it no idle CPU), and the steps from its result to the report; the bare side's stages
beside them. It runs on the code before #52 too (a hook whose
function is not there times nothing): `git archive REV | tar -x -C /tmp/x`, copy this
file to /tmp/x/bench/ and run it there. Take the bench lock:

    flock /tmp/bench.lock python bench/round_trip.py [--rounds 5] [--layers 24 96]

What it found (December 2026, 5 rounds, the code before and after #52 in alternation;
docs/performance.md has the phases): at 96 layers Analyze went from 1.78x the bare
exec + compile to 1.05x, a second Analyze with other arguments from 2.21x the bare
compile to 1.10x; at 24 layers from 1.53x to 1.09x and from 2.08x to 1.14x. The reply's
first frame went from 22.2 MB to 0.78 MB, its parts following. Then XLA's analyses
following the head and the worker's frames out of the user's IR: a second Analyze at 24
layers 1.15-1.17x -> 1.11-1.12x (three pairs), at 96 layers 1.14x -> 1.05x; the first
frame 0.12 MB at 24 layers, 0.25 MB at 96.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere

STAMPS = "JITSCOPE_ROUND_TRIP_STAMPS"  # the file the worker appends its stamps to
ARGS = "params, f32[2,128,256]"
AGAIN = "f32[2,64,256]"  # the second Analyze's `x`
TARGET_FIRST, TARGET_AGAIN = 1.20, 1.10


# -- stamps: (label, start, end) on the monotonic clock --------------------------------
Stamp = tuple[str, float, float]


def stamped(fn: Callable, label: Callable[..., str | None], note: Callable[[Stamp], None]):
    """`fn`, noting each call's start and end under `label(*args, result=...)`."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        start = time.monotonic()
        result = fn(*args, **kwargs)
        name = label(*args, result=result)
        if name:
            note((name, start, time.monotonic()))
        return result

    return run


def named(name: str) -> Callable[..., str]:
    return lambda *args, result: name


def hook(owner: Any, attr: str, label: Callable[..., str | None], note) -> None:
    """Time `owner.attr` where it exists (the code before and after #52 differ)."""
    if hasattr(owner, attr):
        setattr(owner, attr, stamped(getattr(owner, attr), label, note))


# -- the worker's side -----------------------------------------------------------------
def child() -> None:
    """`python -m viz.worker`, its steps stamped into $JITSCOPE_ROUND_TRIP_STAMPS."""
    import viz.pipeline
    import viz.stages
    from viz.worker import child as serving
    from viz.worker import handlers, replies

    out = open(os.environ[STAMPS], "a", buffering=1)  # noqa: SIM115 (the child's lifetime)

    def note(stamp: Stamp) -> None:
        out.write(json.dumps(stamp) + "\n")

    def kind_of(message: Any, *rest: Any, result: Any) -> str | None:
        kind = message.get("kind") if isinstance(message, dict) else None
        return f"worker encode {kind}" if kind not in (None, "started") else None

    def sent(channel: Any, message: Any, *rest: Any, result: Any) -> str | None:
        kind = message.get("kind") if isinstance(message, dict) else None
        return f"worker send {kind}" if kind not in (None, "started") else None

    hook(serving._Channel, "receive", named("worker received"), note)
    hook(serving._Channel, "send", sent, note)
    hook(serving, "encode", kind_of, note)
    hook(handlers, "_target_of", named("worker load"), note)
    hook(viz.pipeline, "analyze_target", named("worker pipeline"), note)
    hook(replies.Analyzed, "to_dict", named("worker to_dict"), note)  # the reply before #52
    hook(replies.Analyzed, "wire", named("worker to_dict"), note)  # its head since
    hook(viz.stages.Lowered, "compile", named("worker compile"), note)
    hook(viz.pipeline._Analysis, "_keep", named("worker reader joined"), note)
    serving.serve()


# -- this side -------------------------------------------------------------------------
@dataclass
class Trip:
    """One Analyze through the page: its stamps, both sides, and what came back."""

    stamps: list[Stamp] = field(default_factory=list)
    head_bytes: int = 0  # the reply's first frame: the whole report before #52
    parts_bytes: int = 0  # the frames that follow it
    compile_total_s: float = 0.0  # trace + lower + compile, as the report times them
    stages_s: tuple[float, float, float] = (0.0, 0.0, 0.0)  # each, as the report times it

    def first(self, label: str) -> Stamp | None:
        return next((s for s in self.stamps if s[0] == label), None)

    def last(self, label: str) -> Stamp | None:
        return next((s for s in reversed(self.stamps) if s[0] == label), None)

    def span(self, label: str) -> float:
        return sum(end - start for name, start, end in self.stamps if name == label)


@contextmanager
def page_hooks(trip: list[Trip]) -> Iterator[None]:
    """Stamp this process's steps into the trip under way."""
    import importlib

    import ui.follow
    import ui.live
    import ui.results
    from viz.worker import client, frames, protocol

    def note(stamp: Stamp) -> None:
        if trip:  # not the pool's own warm-up
            trip[-1].stamps.append(stamp)

    def decoded(data: Any, *rest: Any, result: Any) -> str:
        kind = result.get("kind") if isinstance(result, dict) else None
        if kind == "result" and trip:
            trip[-1].head_bytes += len(data)
        elif kind == "part" and trip:
            trip[-1].parts_bytes += len(data)
        return f"page json {kind}"

    parts = importlib.util.find_spec("viz.worker.parts")  # since #52
    hooks = {
        (client, "encode"): named("page request encode"),
        (frames, "decode"): decoded,
        (protocol, "decode_reply"): named("page reply decode"),
        (client.Worker, "ask"): named("page ask"),
        (ui.results, "record"): named("page history"),
        (ui.results, "record_new"): named("page drawn"),  # since #52: after the first screen
        (ui.follow, "picker"): named("page end"),
        (ui.live.LiveAnalysis, "_show"): named("page glimpse"),
    }
    if parts is not None:
        hooks[importlib.import_module("viz.worker.parts").Parts, "close"] = named("page parts in")
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr in hooks if hasattr(owner, attr)]
    for (owner, attr), label in hooks.items():
        hook(owner, attr, label, note)
    try:
        yield
    finally:
        for owner, attr, original in saved:
            setattr(owner, attr, original)


def read_stamps(path: Path, since: float) -> list[Stamp]:
    found = []
    for line in path.read_text().splitlines():
        name, start, end = json.loads(line)
        if end >= since:  # the worker's wait for a request started before
            found.append((name, start, end))
    return found


def phases(trip: Trip) -> dict[str, float]:
    """The round trip's phases, in the order they happen (seconds)."""
    ask = trip.first("page ask")
    encode = trip.first("page request encode")
    received = trip.first("worker received")
    result_json = trip.last("worker encode result")
    frame_read = trip.last("page json result")
    reply = trip.last("page reply decode")
    end = trip.last("page end")
    assert ask and encode and received and result_json and frame_read and reply and end
    drawn = trip.first("page drawn")  # since #52; before, the history came first
    history = trip.first("page history")
    parts_in = trip.last("page parts in")  # since #52: the graph models after the report
    found = {
        "request encode": encode[2] - encode[1],
        "request to the worker": received[2] - encode[2],
        "worker: load the module": trip.span("worker load"),
        "worker: pipeline (stages streamed)": trip.span("worker pipeline"),
        "  of which trace + lower + compile": trip.compile_total_s,
        "    trace": trip.stages_s[0],
        "    lower": trip.stages_s[1],
        "    compile (XLA, with its dump)": trip.stages_s[2],
        "  the reader's wait once XLA returned": _reader_wait(trip),
        "  from the reader's result to the report": _to_report(trip),
        "worker: the reply's to_dict": trip.span("worker to_dict"),
        "worker: its JSON (frame)": result_json[2] - result_json[1],
        "transfer (worker writes → page has the frame)": frame_read[1] - result_json[2],
        "page: frame JSON decode": frame_read[2] - frame_read[1],
        "page: reply decode (Report)": reply[2] - reply[1],
    }
    counted = sum(v for k, v in found.items() if not k.startswith("  "))
    found["worker and client steps not above"] = ask[2] - encode[1] - counted
    found["= Analyze through the worker (Worker.ask)"] = ask[2] - ask[1]
    found["  of which the page drew the stages as they came"] = trip.span("page glimpse")
    first_screen = drawn[1] if drawn else end[1]
    before = history[2] - history[1] if history and history[1] < first_screen else 0.0
    found["page: draw the first screen"] = first_screen - ask[2] - before
    found["page: history record, before the first screen"] = before
    found["= click to the first screen drawn"] = first_screen - ask[1]
    whole = max(parts_in[2] if parts_in else 0.0, ask[2])
    found["graph models: in after the reply (encoded, sent)"] = whole - ask[2]
    found["= click to the whole reply in"] = whole - ask[1]
    found["page: history record, after it"] = trip.span("page history") - before
    found["= click to the page's run done"] = end[2] - ask[1]
    return found


def _reader_wait(trip: Trip) -> float:
    """From XLA's compile's return to the reader thread's result (0: not stamped)."""
    compiled, joined = trip.last("worker compile"), trip.last("worker reader joined")
    return joined[1] - compiled[2] if compiled and joined else 0.0


def _to_report(trip: Trip) -> float:
    """From the reader thread's result to the pipeline's report (0: not stamped)."""
    joined, pipeline = trip.last("worker reader joined"), trip.last("worker pipeline")
    return pipeline[2] - joined[1] if joined and pipeline else 0.0


# -- the bare side -----------------------------------------------------------------------
Stages = tuple[float, float, float]  # trace, lower, compile (seconds)


def bare(code: str, x: str, module: Any = None) -> tuple[float, Stages, Any]:
    """(exec seconds, each stage's seconds, the module): `module` given, no exec (the
    second Analyze's bare side)."""
    import jax

    from viz.source import load_module
    from viz.spec import abstract_args, parse_spec

    gc.collect()
    jax.clear_caches()
    start = time.perf_counter()
    if module is None:
        module = load_module(code)
    loaded = time.perf_counter()
    args = abstract_args(parse_spec(f"params, {x}", vars(module)))
    begun = time.perf_counter()
    traced = jax.jit(module.forward).trace(*args)
    trace_end = time.perf_counter()
    lowered = traced.lower()
    lower_end = time.perf_counter()
    lowered.compile()
    end = time.perf_counter()
    return loaded - start, (trace_end - begun, lower_end - trace_end, end - lower_end), module


# -- the page's side -----------------------------------------------------------------------
def open_page(code: str) -> Any:
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.testing.v1 import AppTest

    from viz.program import Program
    from viz.settings import Settings

    init = PagesManager.__init__

    def init_then_clear(self: PagesManager, *args: object, **kwargs: object) -> None:
        init(self, *args, **kwargs)  # a started server's second run (tests/conftest.py)
        PagesManager.uses_pages_directory = False

    PagesManager.__init__ = init_then_clear  # type: ignore[method-assign]
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.session_state["program"] = Program(Settings(code=code, function="forward", args=ARGS))
    at.session_state["results"] = []  # no first-visit analysis
    at.session_state["query_applied"] = True
    at.session_state["runs_w"] = 0
    at.run()
    assert not at.exception, at.exception
    return at


def analyze(at: Any, trips: list[Trip], stamps: Path) -> Trip:
    import viz.graph.render

    viz.graph.render._layout.cache_clear()  # each round's graphs laid out, as a new program's
    trips.append(Trip())
    since = time.monotonic()
    next(b for b in at.button if b.label == "Analyze").click().run()
    assert not at.exception, at.exception
    report = at.session_state["results"][-1].report
    assert report.ok, report.error
    trips[-1].compile_total_s = report.compile_total_s
    timings = report.timings
    trips[-1].stages_s = (timings.trace_s or 0.0, timings.lower_s or 0.0, timings.compile_s or 0.0)
    trips[-1].stamps += read_stamps(stamps, since)
    trips[-1].stamps.sort(key=lambda s: s[1])
    return trips[-1]


# -- one model -------------------------------------------------------------------------------
def spread(values: list[float]) -> str:
    return f"{min(values):7.3f} {statistics.median(values):7.3f} {max(values):7.3f}"


def one_model(layers: int, rounds: int, at: Any, stamps: Path) -> bool:
    from viz.samples import get_sample

    code = get_sample("transformer_24").code.replace("N_LAYERS = 24", f"N_LAYERS = {layers}")
    assert f"N_LAYERS = {layers}" in code
    firsts: list[Trip] = []
    agains: list[Trip] = []
    bare_exec: list[float] = []
    bare_compile: list[float] = []
    stages_again: list[Stages] = []
    with page_hooks(firsts):  # a warm-up: this size's first compile in both processes
        bare(code, "f32[2,128,256]")
        at.text_area(key="code_w").set_value(code + "\n# warm-up\n")
        at.text_input(key="in_spec_forward_x").set_value("f32[2,128,256]")
        analyze(at, firsts, stamps)
    firsts.clear()
    for number in range(rounds):
        fresh = code + f"\n# round {number}\n"  # new code: the worker loads it
        if number % 2:
            loaded, stages, module = bare(fresh, "f32[2,128,256]")
        at.text_area(key="code_w").set_value(fresh)
        at.text_input(key="in_spec_forward_x").set_value("f32[2,128,256]")
        with page_hooks(firsts):
            analyze(at, firsts, stamps)
        if not number % 2:
            loaded, stages, module = bare(fresh, "f32[2,128,256]")
        bare_exec.append(loaded)
        bare_compile.append(sum(stages))
        at.text_input(key="in_spec_forward_x").set_value(AGAIN)
        with page_hooks(agains):
            analyze(at, agains, stamps)
        stages_again.append(bare(fresh, AGAIN, module)[1])
        del module
    bare_sides = (bare_exec, bare_compile, stages_again)
    return report(layers, rounds, firsts, agains, *bare_sides)


def report(
    layers: int,
    rounds: int,
    firsts: list[Trip],
    agains: list[Trip],
    bare_exec: list[float],
    bare_compile: list[float],
    stages_again: list[Stages],
) -> bool:
    print(f"\n{layers}-layer transformer, {rounds} rounds: seconds, min median max")
    bare_total = [e + c for e, c in zip(bare_exec, bare_compile, strict=True)]
    bare_again = [sum(stages) for stages in stages_again]
    print(f"  {'bare: exec (module, params)':<48} {spread(bare_exec)}")
    print(f"  {'bare: trace + lower + compile':<48} {spread(bare_compile)}")
    print(f"  {'= bare exec + trace + lower + compile':<48} {spread(bare_total)}")
    for title, trips in (("first Analyze (new code)", firsts), ("again, other args", agains)):
        print(f"  {title}:")
        found = [phases(t) for t in trips]
        for name in found[0]:
            print(f"    {name:<46} {spread([f[name] for f in found])}")
    first = [phases(t)["= Analyze through the worker (Worker.ask)"] for t in firsts]
    again = [phases(t)["= Analyze through the worker (Worker.ask)"] for t in agains]
    loads = [t.span("worker load") for t in agains]
    ratio = min(first) / min(bare_total)
    ratio_again = min(again) / min(bare_again)
    paired = statistics.median(f / b for f, b in zip(first, bare_total, strict=True))
    paired_again = statistics.median(a / b for a, b in zip(again, bare_again, strict=True))
    print(f"  {'bare trace + lower + compile, other args':<48} {spread(bare_again)}")
    for number, name in enumerate(("trace", "lower", "compile")):
        print(f"    {name:<46} {spread([stages[number] for stages in stages_again])}")
    for title, trips in (("first", firsts), ("again", agains)):  # paired within each trip:
        beyond = [  # what the machine's load does to the bare side in this process is out
            phases(t)["= Analyze through the worker (Worker.ask)"] - t.compile_total_s
            for t in trips
        ]
        print(f"  {title + ': Analyze beyond its own trace+lower+compile':<48} {spread(beyond)}")
    ok = ratio <= TARGET_FIRST and ratio_again <= TARGET_AGAIN
    print(
        f"  Analyze / bare exec+trace+lower+compile: {ratio:.3f} (ratio of minimums; paired "
        f"median {paired:.3f})   target <= {TARGET_FIRST}"
    )
    print(
        f"  again / bare trace+lower+compile:        {ratio_again:.3f} (paired median "
        f"{paired_again:.3f})   target <= {TARGET_AGAIN}; the worker's load again: "
        f"{spread(loads)}"
    )
    head, rest = max(t.head_bytes for t in firsts), max(t.parts_bytes for t in firsts)
    print(
        f"  the reply on the wire: {(head + rest) / 1e6:.1f} MB; its first frame "
        f"{head / 1e6:.2f} MB, the parts after it {rest / 1e6:.1f} MB"
    )
    print(f"  {'OK' if ok else 'MISSED'}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--layers", type=int, nargs="+", default=[24, 96])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child()
        return
    home = Path(tempfile.mkdtemp(prefix="jitscope-round-trip-"))
    stamps = home / "stamps.jsonl"
    stamps.touch()
    os.environ.update({"JITSCOPE_HOME": str(home), STAMPS: str(stamps), "JITSCOPE_EDITOR": "plain"})
    os.environ.setdefault("JITSCOPE_WORKERS", "1")
    from viz.worker import client

    def start(self: Any, start: Callable = client.Worker._start) -> None:
        """The worker, its steps stamped: this file as `--child`."""
        command = [sys.executable, __file__, "--child"]
        with patched_command(command):
            start(self)

    client.Worker._start = start  # type: ignore[method-assign]
    from viz.samples import get_sample

    at = open_page(get_sample("transformer_24").code)
    verdicts = [one_model(n, args.rounds, at, stamps) for n in args.layers]
    sys.exit(0 if all(verdicts) else 1)


@contextmanager
def patched_command(command: list[str]) -> Iterator[None]:
    """subprocess.Popen given `command` instead of `python -m viz.worker`."""
    import subprocess

    popen = subprocess.Popen

    def instead(argv: list[str], *args: Any, **kwargs: Any) -> Any:
        return popen(command if argv[1:] == ["-m", "viz.worker"] else argv, *args, **kwargs)

    subprocess.Popen = instead  # type: ignore[misc]
    try:
        yield
    finally:
        subprocess.Popen = popen  # type: ignore[misc]


if __name__ == "__main__":
    main()
