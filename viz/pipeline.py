"""`analyze`: one function through the staged pipeline, everything read into a Report.

trace → lower → compile → run, each stage from `viz.stages` (which decides x64,
the device, static arguments, compiler options and the memory limit). The jaxpr,
the StableHLO (a copy of the module, in an MLIR context of its own) and the
specialization's rows are read on a thread while XLA compiles, then the compiled HLO
from the text XLA dumps once its passes are done, while it generates code
(`viz.hlo_dump`), checked against the executable's text after the compile (and read
from that text where they differ); `compile_s` is XLA's time alone.

`analyze_target(..., on_stage=...)` also hands on what is known as the analysis goes
(`viz.progress`): as each stage starts, and as the reader thread finishes the jaxpr and
the StableHLO, so a page can draw each IR while XLA still compiles. Without it the
pipeline does exactly what it did.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import jax

import viz.graph
from viz.donation import UNUSABLE_WARNING, read_donation
from viz.errors import USER_EXITS, UserCodeError
from viz.fusion.map import FusionMap, Side, fusion_map, prepare
from viz.fusion.report import PROFILE_RUNS, add_fusion_map, add_profile, put_fusion_map
from viz.hlo_dump import OptimizedHloDump, same_program
from viz.ir import model
from viz.ir.hlo import read_hlo_text
from viz.ir.jaxpr import read_jaxpr
from viz.ir.kernels import fusion_count, kernel_count, kernels
from viz.ir.stablehlo import module_bytecode, module_copy, module_text, read_stablehlo
from viz.overlap import Background, CompileWindow, IdlePriority, gc_paused
from viz.progress import OnStage, glimpse
from viz.report import (
    CompiledSection,
    Cost,
    GraphSummary,
    JaxprSection,
    Kernel,
    Memory,
    Report,
    Runs,
    StableHLOSection,
)
from viz.settings import Settings
from viz.specialization.read import Specialization, finish, read_specialization, read_traced
from viz.stages import Compiled, Traced, block
from viz.target import DEFAULT_MEMORY_LIMIT, Target

__all__ = ["DEFAULT_MEMORY_LIMIT", "analyze", "analyze_target"]

# The smallest module (StableHLO bytecode) whose compile XLA dumps for the reader: a
# dump costs XLA a fixed 10-30 ms (files, LLVM IR), which on a 24-op chain (1 KB) was a
# quarter of its compile, while reading so small an executable's text after the
# compile takes a few ms; at 1-3 transformer layers (7-13 KB) the two came out even,
# at 12 layers (44 KB) the dump saved a tenth of the analysis.
DUMP_FROM_BYTES = 16 << 10


def analyze(
    fn: Callable,
    args: str = "",
    static: Sequence[str | int] = (),
    device: str = "cpu",
    runs: int = 20,
    *,
    donate: Sequence[str | int] = (),
    compiler_options: dict[str, Any] | None = None,
    x64: bool | None = None,
    namespace: dict[str, Any] | None = None,
    user_file: str | None = None,
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT,
    time_budget_s: float = 2.0,
    profile: bool = False,
    mlir: bool = False,
    history: bool = False,
    mesh: str = "",
    compile_profile: bool = False,
) -> Report:
    """Analyze `fn` on the args spec. Never raises for problems in user code: they are
    reported in `report.error` with `report.ok == False`, keeping what was learned.

    `profile`: also time each kernel under `jax.profiler` (needs runs > 0).
    `mlir`: also keep the StableHLO with its locations (`report.mlir`), for Model Explorer.
    `history`: also record the run in `viz.history` (the CLI and the app always do).
    `mesh`: a device mesh, `"data=4, model=2"`, that the spec's `@ P(...)` suffixes split
    arrays over (needs that many devices: `cpu:8` in the worker); `report.sharding`.
    `compile_profile`: also trace, lower and compile once more to see where the compile
    time goes (`report.compile_profile`; `viz.compile_profile.run`). It clears JAX's
    in-memory caches (`jax.clear_caches()`): the process's jitted functions retrace
    on their next call."""
    settings = Settings(
        function=getattr(fn, "__name__", None),
        args=args,
        static=[str(s) for s in static],
        donate=[str(d) for d in donate],
        device=device,
        x64=x64,
        compiler_options=dict(compiler_options or {}),
        mesh=mesh,
        memory_limit_bytes=memory_limit_bytes,
    )
    where = {"namespace": namespace, "user_file": user_file}
    target = Target.from_settings(settings, fn, **{k: v for k, v in where.items() if v is not None})
    report = analyze_target(
        target,
        args,
        runs,
        time_budget_s,
        profile=profile,
        mlir=mlir,
        compile_profile=compile_profile,
    )
    if history:
        from viz.history import record_api_run

        record_api_run(report)
    return report


def analyze_target(
    target: Target,
    spec: str,
    runs: int = 20,
    budget_s: float = 2.0,
    *,
    profile: bool = False,
    mlir: bool = False,
    compile_profile: bool = False,
    on_stage: OnStage | None = None,
) -> Report:
    """The Report of one target on one args spec (never raises for user-code problems).
    `on_stage(stage, known)`: told the stage under way and what is known so far (see
    `_Stream`), from the calling thread and from the reader thread beside the compile."""
    report = Report(
        device=target.device,
        jax_version=jax.__version__,
        function=target.name,
        args=spec,
        static=[str(s) for s in target.static],
        donate=[str(d) for d in target.donate],
        compiler_options=dict(target.compiler_options),
        source_file=target.user_file,
    )
    args = traced = compiled = None  # as far as the stages got, for the specialization
    early = _Early()
    stream = _Stream(report, on_stage)
    try:
        args = target.args(spec)
        report.x64 = args.x64
        stream.stage("trace")
        traced = target.trace(args)
        report.timings.trace_s = traced.seconds
        stream.stage("lower")
        with gc_paused():
            compiled = _lower_and_compile(report, traced, mlir, early, stream)
        _read_sharding(report, compiled)
        if runs > 0:
            stream.stage("run")  # the compiled program is all known: drawn before the runs
            _time_runs(report, compiled, runs, budget_s)
        if profile:  # with runs=0 there is nothing to profile: add_profile says so
            call = compiled.runner(PROFILE_RUNS + 1) if runs > 0 else (lambda: None)
            add_profile(report, call, block, runs)
    except UserCodeError as exc:
        if exc.seconds is not None and exc.info.stage in ("trace", "lower", "compile"):
            setattr(report.timings, f"{exc.info.stage}_s", exc.seconds)
        report.fail(exc.info)
    _read_specialization(report, target, args, traced, compiled, early.specialization)
    if compile_profile and compiled is not None:
        from viz.compile_profile.run import add_compile_profile

        add_compile_profile(report, target, spec)
    return report


@dataclass
class _Early:
    """What the reader thread learned beside the IRs: the specialization as the spec and
    the trace say it (None: not read there, or its reader failed: read it again after)."""

    specialization: Specialization | None = None


class _Stream:
    """What an analysis tells `on_stage` as it goes: the stage under way and a glimpse
    of the report (`viz.progress.glimpse`), with the IRs the reader thread has read
    beside the compile and not yet put into the report. Without `on_stage`, nothing. A
    listener that fails is dropped: telling never fails the analysis."""

    def __init__(self, report: Report, on_stage: OnStage | None):
        self._report, self._on_stage = report, on_stage
        self._stage = "load"
        self._read: list[_IR] = []  # read beside the compile, not in the report yet
        self._lock = threading.Lock()  # the calling thread and the reader both tell

    @property
    def listening(self) -> bool:
        return self._on_stage is not None

    def stage(self, name: str) -> None:
        if self._on_stage is not None:
            with self._lock:
                self._stage = name
                self._tell()

    def read(self, read: _IR) -> None:
        if self._on_stage is not None:
            with self._lock:
                self._read.append(read)
                self._tell()

    def _tell(self) -> None:
        known = glimpse(self._report)
        for read in self._read:
            if getattr(known, read.name) is None:
                _put_counts(known, read)
        try:
            self._on_stage(self._stage, known)  # type: ignore[misc]
        except Exception:
            self._on_stage = None


def _put_counts(report: Report, read: _IR) -> None:
    """An IR's counts and default view into a glimpse (no text, no graph model)."""
    put = _put_jaxpr if read.name == "jaxpr" else _put_stablehlo
    put(report, replace(read, text=""))
    report.graph_models.pop(read.name, None)


def _read_specialization(
    report: Report,
    target: Target,
    args: Any,
    traced: Traced | None,
    compiled: Compiled | None,
    early: Specialization | None,
) -> None:
    """What the executable is specialized on (a reader bug is a warning, not a failure):
    the rows read while XLA compiled, finished with what the executable says."""
    try:
        if early is not None:
            found = finish(*early, compiled, report.error)
        else:
            found = read_specialization(target, args, traced, compiled, error=report.error)
        report.specialization, report.specialization_ops = found
    except Exception as exc:
        report.warnings.append(f"could not read the specialization: {type(exc).__name__}: {exc}")


def _read_sharding(report: Report, compiled: Compiled) -> None:
    """How the program is split over devices (a reader bug is a warning, not a failure)."""
    from viz.sharding.read import read_sharding

    target = compiled.target
    try:
        report.sharding = read_sharding(
            compiled.compiled,
            compiled.arg_names,
            target.mesh_spec,
            report.graph_models.get("compiled"),
            report.fusion_map,
            target.user_file,
        )
    except Exception as exc:
        report.warnings.append(f"could not read the sharding: {type(exc).__name__}: {exc}")


def _lower_and_compile(
    report: Report, traced: Traced, mlir: bool, early: _Early, stream: _Stream
) -> Compiled:
    """Lower and compile, every IR read into the report. The jaxpr and the StableHLO (and
    the specialization's rows, into `early`) are read on a thread while XLA compiles
    (XLA's compile releases the GIL, and on a 96-layer model takes longer than both
    readers together), and so is the compiled HLO, from the text XLA dumps once its
    passes are done, while it generates code (`viz.hlo_dump`); so they add nothing to
    the wait. `compile_s` stays XLA's time alone. Where the dump did not come, or does
    not match the executable's text, or the program is too small to be worth a dump
    (`DUMP_FROM_BYTES`), the compiled HLO is read after."""
    try:
        lowered = traced.lower()
    except UserCodeError:
        _put_jaxpr(report, _read_jaxpr(traced))  # what the trace learned stays
        raise
    report.timings.lower_s = lowered.seconds
    stream.stage("compile")
    if mlir:  # StableHLO with locations, for Model Explorer
        report.mlir = lowered.text(debug_info=True)
    bytecode = module_bytecode(lowered.mlir_module())  # a copy for the thread (see module_copy)
    dump = OptimizedHloDump(traced.target.compiler_options, wanted=len(bytecode) >= DUMP_FROM_BYTES)
    window = CompileWindow()  # the readers hold the GIL only while XLA does not
    # XLA generates code on every core: the readers take only the CPU it leaves idle,
    # but for a streamed analysis's jaxpr graph, which a page waits for (on a busy
    # machine, idle CPU came only at the end of a 96-layer model's compile)
    idle = IdlePriority()

    def seen(read: _IR) -> None:
        stream.read(read)
        idle.lower()

    def read() -> tuple[_IR, _IR, Specialization | None, _CompiledRead | None]:
        window.enter()
        if not stream.listening:
            idle.lower()
        return _read_early(
            traced, bytecode, dump, report.source_file, seen if stream.listening else None
        )

    reader = Background(read, priority=idle)
    try:
        try:
            window.open()
            compiled = lowered.compile(dump.options)
            # XLA's memory analysis releases the GIL (its text and cost analyses hardly
            # do): it runs beside the rest of the reading, the check of the dump included
            memory = Background(compiled.memory, "xla")
        finally:  # a failed compile keeps what the readers found, in the order they read
            window.close()
            dump.done()
            reader.resume()  # what is left to read, the analysis now waits for
            jaxpr, stablehlo, early.specialization, dumped = reader.result()
            _put_jaxpr(report, jaxpr)
            _put_stablehlo(report, stablehlo)
    finally:
        dump.close()
    shown = _read_compiled(report, compiled, dumped, memory)
    if shown.fusion_map is not None:  # made from the dump's graph, which is the one shown
        put_fusion_map(report, shown.fusion_map)
    else:
        add_fusion_map(report, {r.name: r.side for r in (jaxpr, stablehlo) if r.side is not None})
    return compiled


@dataclass
class _IR:
    """One IR as read: its text, graph, default view and op histogram (no graph, but a
    warning, when the reader failed: a reader bug must not hide the other results)."""

    name: str
    text: str
    graph: model.Graph | None = None
    view: GraphSummary | None = None
    hist: dict[str, int] = field(default_factory=dict)
    warning: str = ""
    side: Side | None = None  # its side of the fusion map, for the jaxpr and StableHLO


def _read_ir(
    name: str,
    read: Callable[[], model.Graph],
    text: Callable[[], str] = str,
    seen: Callable[[_IR], None] | None = None,
) -> _IR:
    """The IR's graph, view and histogram, then its text: `seen` hears the IR before its
    text is made (a 96-layer jaxpr's takes 0.2 s), for a page to draw the graph."""
    try:
        graph = read()
    except Exception as exc:
        warning = f"could not read the {name} graph: {type(exc).__name__}: {exc}"
        found = _IR(name, "", warning=warning)
    else:
        view = GraphSummary(**viz.graph.summary(graph))
        found = _IR(name, "", graph, view, model.op_histogram(graph))
    if seen is not None:
        seen(found)
    found.text = text()
    return found


def _with_side(read: _IR) -> _IR:
    """The IR with its side of the fusion map (none if that fails: the map, made
    without it, then says why in its warning)."""
    if read.graph is not None:
        with contextlib.suppress(Exception):
            read.side = prepare(read.graph, read.name)
    return read


def _read_early(
    traced: Traced,
    bytecode: bytes,
    dump: OptimizedHloDump,
    user_file: str | None,
    seen: Callable[[_IR], None] | None = None,
) -> tuple[_IR, _IR, Specialization | None, _CompiledRead | None]:
    """The jaxpr, the StableHLO and the specialization's rows (`_Early`), read on the
    compile's side thread (`seen` hears each IR once its graph is read): the StableHLO
    from a copy of the module in a context of its own, which XLA never touches. Then the
    compiled HLO, once XLA dumps it, with the fusion map of all three."""
    with traced.target.scope(traced.args):
        jaxpr = _with_side(_read_jaxpr(traced, seen))
        module = module_copy(bytecode)
        stablehlo = _read_ir(
            "stablehlo", lambda: read_stablehlo(module), lambda: module_text(module), seen
        )
        stablehlo, specialization = _with_side(stablehlo), _traced_specialization(traced)
    text = dump.wait()
    compiled = None if text is None else _read_compiled_text(text)
    if compiled is not None and compiled.read.graph is not None:
        compiled.fusion_map = _fusion_map_of(jaxpr, stablehlo, compiled.read, user_file)
    return jaxpr, stablehlo, specialization, compiled


def _fusion_map_of(
    jaxpr: _IR, stablehlo: _IR, compiled: _IR, user_file: str | None
) -> FusionMap | None:
    """The fusion map of the three IRs (None where it fails: it is made again after the
    compile, whose warning then says why)."""
    graphs = {r.name: r.graph for r in (jaxpr, stablehlo, compiled) if r.graph is not None}
    sides = {r.name: r.side for r in (jaxpr, stablehlo) if r.side is not None}
    try:
        return fusion_map(graphs, user_file, sides)
    except Exception:
        return None


def _traced_specialization(traced: Traced) -> Specialization | None:
    """`read_traced`, or None where it fails (read again once the stages are done, its
    error then becomes the report's warning)."""
    try:
        return read_traced(traced.target, traced.args, traced)
    except Exception:
        return None


def _read_jaxpr(traced: Traced, seen: Callable[[_IR], None] | None = None) -> _IR:
    """Inputs are named per leaf as JAX names them (`params[0]['w']`), where JAX has
    one name per input; else per parameter."""
    names = traced.arg_names
    if len(names) != len(traced.jaxpr.jaxpr.invars):
        names = traced.target.param_names(len(traced.args.items))
    return _read_ir(
        "jaxpr", lambda: read_jaxpr(traced.jaxpr, names), lambda: str(traced.jaxpr), seen
    )


def _put_graph(report: Report, read: _IR) -> dict[str, int] | None:
    """The IR's graph and view into the report; its op histogram (None: no graph)."""
    if read.graph is None:
        report.warnings.append(read.warning)
        return None
    report.graphs[read.name] = read.view
    report.graph_models[read.name] = read.graph
    return read.hist


def _put_jaxpr(report: Report, read: _IR) -> None:
    report.jaxpr = JaxprSection(text=read.text)
    hist = _put_graph(report, read)
    if hist is not None:
        report.jaxpr.eqn_count, report.jaxpr.primitives = sum(hist.values()), hist


def _put_stablehlo(report: Report, read: _IR) -> None:
    report.stablehlo = StableHLOSection(text=read.text or "")
    hist = _put_graph(report, read)
    if hist is not None:
        report.stablehlo.op_count, report.stablehlo.ops = sum(hist.values()), hist


@dataclass
class _CompiledRead:
    """The compiled HLO as read from one text: the IR, and its kernels and counts."""

    text: str
    read: _IR
    kernels: list[Kernel] = field(default_factory=list)
    fusion_count: int = 0
    kernel_count: int = 0
    fusion_map: FusionMap | None = None  # with the jaxpr and StableHLO, where made early


def _read_compiled_text(text: str | None) -> _CompiledRead:
    read = _read_ir("compiled", lambda: read_hlo_text(_executable_text(text)))
    found = _CompiledRead(text or "", read)
    if read.graph is not None:
        found.kernels = [Kernel(**k) for k in kernels(read.graph)]
        found.fusion_count, found.kernel_count = fusion_count(read.graph), kernel_count(read.graph)
    return found


def _read_compiled(
    report: Report,
    compiled: Compiled,
    dumped: _CompiledRead | None,
    memory: Background[dict[str, int | None]],
) -> _CompiledRead:
    """The compiled section, graph, kernels and `memory` (the analysis under way): from
    XLA's dump where it says what the executable's text says (`dumped`), else read from
    that text now; returns the read shown."""
    report.timings.compile_s = compiled.seconds
    report.timings.compile_from_disk = compiled.events.from_disk()
    report.compile_events = compiled.events.totals()
    text = compiled.text()
    shown = dumped
    if shown is None or not same_program(shown.text, text or ""):
        shown = _read_compiled_text(text)
    report.compiled = section = CompiledSection(text=text or "")
    hist = _put_graph(report, shown.read)
    if hist is not None:
        section.op_count, section.ops = sum(hist.values()), hist
        section.fusion_count, section.kernel_count = shown.fusion_count, shown.kernel_count
        report.kernels = shown.kernels
    report.cost = Cost(**compiled.cost())
    report.memory = Memory(**memory.result())
    report.warnings.extend(compiled.warnings)
    if compiled.target.donate:
        _read_donation(report, compiled)
    return shown


def _executable_text(text: str | None) -> str:
    if text is None:
        raise ValueError("XLA gives no text of this executable (as_text() is None)")
    return text


def _read_donation(report: Report, compiled: Compiled) -> None:
    """What became of the donated arguments, from both programs' graphs (none when a
    reader failed: its warning is in the report already)."""
    graphs = report.graph_models
    if "stablehlo" not in graphs or "compiled" not in graphs:
        return
    report.donation = read_donation(
        compiled.args_info(),
        compiled.out_info(),
        graphs["stablehlo"],
        graphs["compiled"],
        [w for w in compiled.warnings if UNUSABLE_WARNING in w],
        compiled.memory().get("alias_bytes"),
    )


def _time_runs(report: Report, compiled: Compiled, runs: int, budget_s: float) -> None:
    stats = compiled.time_runs(runs, budget_s)
    t = report.timings
    t.first_call_s, t.run_median_s, t.run_min_s = stats.first_call_s, stats.median_s, stats.min_s
    t.run_p90_s, t.runs = stats.p90_s, stats.samples
    report.run = Runs(jit=stats)
    try:
        eager = compiled.time_eager(max(3, runs // 2), budget_s / 2)
    except (Exception, *USER_EXITS) as exc:  # eager failing (jit-only code) is a note, not an error
        report.warnings.append(f"eager run failed: {type(exc).__name__}: {exc}")
        return
    t.eager_median_s = eager.median_s
    report.run.eager = eager
