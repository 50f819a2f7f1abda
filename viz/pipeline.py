"""`analyze`: one function through the staged pipeline, everything read into a Report.

trace → lower → compile → run, each stage from `viz.stages` (which decides x64,
the device, static arguments, compiler options and the memory limit). The jaxpr, the
StableHLO (a copy of the module, in an MLIR context of its own) and the
specialization's rows are read on a thread while XLA compiles (`viz.overlap`). In the
worker, so is the compiled HLO, from the text XLA dumps once its passes are done, while
it generates code (`viz.hlo_dump`), checked against the executable's text after the
compile (and read from that text where they differ). In a caller's own process
(`viz.analyze()`, a notebook) XLA dumps only a big program's (`CALLERS_DUMP_FROM_BYTES`),
a smaller one's is read from the executable's text after the compile, and what a caller
may never read (the fusion map, the sharding, XLA's analyses, and each IR's view and
text where the compile left no time for them) is made where first read
(`viz.plain.Later`).
`compile_s` is XLA's time alone.

Each stage and reader (`viz.readers`) returns its section (`viz.sections`); the analysis
keeps them as they come, and the Report is assembled from them once, at the end
(`viz.sections.assemble`): nothing writes into a report.

`analyze_target(..., on_stage=...)` also hands on what is known as the analysis goes
(`viz.progress`): as each stage starts, and as the reader thread finishes the jaxpr and
the StableHLO, so a page can draw each IR while XLA still compiles. Without it the
pipeline does exactly what it did.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import jax

from viz import readers
from viz.errors import USER_EXITS, ErrorKind, UserCodeError, eager_failure
from viz.fusion.map import FusionMap
from viz.fusion.report import PROFILE_RUNS, fusion_map_section, profile_section
from viz.hlo_dump import OptimizedHloDump
from viz.ir.hlo_text import module_name
from viz.ir.stablehlo import module_bytecode
from viz.memory.profile import assignment_from_dump
from viz.overlap import (
    Background,
    CompileWindow,
    IdlePriority,
    collector_paused,
    gc_paused,
    owns_process,
)
from viz.plain import Later
from viz.progress import OnStage, glimpse
from viz.readers import Early
from viz.report import Cost, Report, Subject
from viz.sections import Analyses, Found, IRRead, Sections, assemble, sides_of
from viz.settings import Settings
from viz.stages import Compiled, Lowered, Traced, block, trace
from viz.target import DEFAULT_MEMORY_LIMIT, Args, Target, spec_names
from viz.timing import RunStats

__all__ = ["DEFAULT_MEMORY_LIMIT", "analyze", "analyze_target"]

# The smallest module (StableHLO bytecode) whose compile XLA dumps for the reader: a
# dump costs XLA a fixed 10-30 ms (files, LLVM IR), which on a 24-op chain (1 KB) was a
# quarter of its compile, while reading so small an executable's text after the
# compile takes a few ms; at 1-3 transformer layers (7-13 KB) the two came out even,
# at 12 layers (44 KB) the dump saved a tenth of the analysis.
DUMP_FROM_BYTES = 16 << 10
# In a caller's process, where `compile_s` is the figure jax.jit would give, from where
# the dump's fixed cost is lost in the compile's noise (a 48-layer transformer: 165 KB,
# a compile of 1.5 s) and reading the compiled HLO after the compile is long (0.1 s).
CALLERS_DUMP_FROM_BYTES = 160 << 10


# what a run must fit in `viz.analyze` (the caller's process, no worker), in words
API_LIMIT = "analyze's memory_limit_bytes"


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
    on their next call.
    `namespace`: the names the spec reads; by default the caller's (a notebook cell's,
    a script's), then those of `fn`'s module, as `viz.show` reads them."""
    if namespace is None:  # a function imported into a notebook: `params` is the cell's
        namespace = spec_names(fn, sys._getframe(1).f_globals)
    settings = Settings(
        function=getattr(fn, "__name__", None),
        args=args,
        static=[str(s) for s in static],
        donate=[str(d) for d in donate],
        device=device,
        x64=x64,
        compiler_options=dict(compiler_options or {}),
        mesh=mesh,
    )
    target = Target.from_settings(
        settings,
        fn,
        namespace=namespace,
        user_file=user_file,
        memory_limit_bytes=memory_limit_bytes,
        memory_limit_of=API_LIMIT,  # no worker here: the caller's own process
    )
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

        _, report = record_api_run(report)  # with a warning where it could not
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
    defer_analyses: bool = False,
    defer_texts: bool = False,
) -> Report:
    """The Report of one target on one args spec (never raises for user-code problems).
    `on_stage(stage, known)`: told the stage under way and what is known so far (see
    `_Stream`), from the calling thread and from the reader thread beside the compile.
    `defer_analyses`: the report's `cost` and `memory` (XLA's analyses of the
    executable, 4-8 % of a transformer's analysis) are made where they are first read,
    not before the report is returned: the worker sends the rest first
    (`viz.worker.replies.DEFERRED`). `defer_texts`: the jaxpr's and the StableHLO's
    texts too (a 24-layer model's take 0.1-0.2 s, which on a busy machine the reader
    thread beside the compile left to after it): the worker makes each as its part is
    sent, after the head (`viz.worker.replies.LATER`)."""
    analysis = _Analysis(target, spec, on_stage, defer_analyses, defer_texts)
    try:
        analysis.run_stages(runs, budget_s, mlir=mlir, profile=profile)
    except UserCodeError as exc:
        analysis.stop(exc)
    return analysis.report(compile_profile)


class _Analysis:
    """One analysis as it goes: what it is of (`subject`), the sections found so far
    (`found`), and the stages' objects as far as they got (for the specialization)."""

    def __init__(
        self, target: Target, spec: str, on_stage: OnStage | None, defer: bool, defer_texts: bool
    ):
        self.target, self.spec, self.defer, self.defer_texts = target, spec, defer, defer_texts
        self.subject = replace(  # what its settings ask, with what it is and where it ran
            Subject.asked(target.settings),
            function=target.name,
            args=spec,
            source_file=target.user_file,
            jax_version=jax.__version__,
        )
        self.found = Sections()
        # in a caller's own process (`viz.analyze()`, a notebook) what a caller may never
        # read (each IR's view and text, where XLA's compile left no time to make them
        # beside it, the fusion map, the sharding, XLA's cost analysis and the memory
        # profile) is made where it is first read, not before analyze returns
        self.lazy = not owns_process()
        self.stream = _Stream(on_stage, self.glimpse)
        self.args: Args | None = None
        self.traced: Traced | None = None
        self.compiled: Compiled | None = None
        self.early: Early | None = None  # what the reader thread read beside the compile

    def glimpse(self, beside: list[IRRead]) -> Report:
        """What is known now, the IRs read `beside` the compile included (`viz.progress`)."""
        return glimpse(assemble(self.subject, self.found.with_beside(beside)))

    def run_stages(self, runs: int, budget_s: float, *, mlir: bool, profile: bool) -> None:
        found, stream = self.found, self.stream
        self.args = self.target.args(self.spec)
        self.subject = replace(self.subject, x64=self.args.x64)
        stream.stage("trace")
        self.traced = trace(self.target, self.args)
        found.seconds["trace"] = self.traced.seconds
        stream.stage("lower")
        with gc_paused():  # in the worker: lowering and compile too
            self.compiled = compiled = self._lower_and_compile(self.traced, mlir)
        sharding = Later(
            collector_paused(
                lambda: readers.sharding_of(compiled, found.graph("compiled"), found.fusion_entries)
            )
        )
        found.sharding = sharding if self.lazy else sharding.value()
        if runs > 0:
            found.analysed()  # the memory check before the runs reads the profile, lines given
            stream.stage("run")  # the compiled program is all known: drawn before the runs
            found.runs, found.eager = _time_runs(compiled, runs, budget_s)
            found.device_memory = compiled.device_memory()
        if profile:  # with runs=0 there is nothing to profile: profile_section says so
            call = compiled.runner(PROFILE_RUNS + 1) if runs > 0 else (lambda: None)
            program = module_name(found.executable.made_text()) if found.executable else None
            found.profile = profile_section(
                found.graph("compiled"), call, block, runs, self.target.device, program
            )

    def stop(self, exc: UserCodeError) -> None:
        """The analysis stopped where a stage failed: that stage's time (where it had
        one) and the error."""
        stage = exc.info.stage
        if exc.seconds is not None and stage in ("trace", "lower", "compile"):
            self.found.seconds[stage] = exc.seconds
        self.found.error = exc.info
        if exc.info.kind == ErrorKind.OUT_OF_MEMORY and self.traced is not None:
            from viz.memory.estimate import out_of_memory_section

            with self.target.scope(self.traced.args):
                memory, error = out_of_memory_section(self.target, self.traced.abstract, exc.info)
            self.found.analyses, self.found.error = Analyses(Cost(), memory), error

    def report(self, compile_profile: bool) -> Report:
        """The specialization, what jax.checkpoint saves (and the compile profile where
        asked for), then the report."""
        found = self.found
        found.specialization = readers.specialization_of(
            self.target,
            self.args,
            self.traced,
            self.compiled,
            self.early and self.early.specialization,
            found.error,
        )
        if self.traced is not None:
            found.residuals = readers.residuals_of(self.traced)
        if compile_profile and self.compiled is not None:
            from viz.compile_profile.run import compile_profile_section

            found.compile_profile = compile_profile_section(
                self.target, self.spec, found.graph("jaxpr")
            )
        return assemble(self.subject, found)

    def _lower_and_compile(self, traced: Traced, mlir: bool) -> Compiled:
        """Lower and compile, every IR read (see `_compile`), then what the compile made
        (`_read_executable`)."""
        found = self.found
        try:
            lowered = traced.lower()
        except UserCodeError:
            found.jaxpr = readers.read_jaxpr_ir(traced)  # what the trace learned stays
            raise
        found.seconds["lower"] = lowered.seconds
        self.stream.stage("compile")
        if mlir:  # StableHLO with locations, for Model Explorer
            found.mlir = lowered.text(debug_info=True)
        compiled, memory = self._compile(traced, lowered)
        found.seconds["compile"] = compiled.seconds
        with gc_paused(callers_too=True):  # given back however the block is left
            self._read_executable(compiled, memory)
        return compiled

    def _read_executable(self, compiled: Compiled, memory: Background[readers.MemoryRead]) -> None:
        """What the compile made: the executable's sections, the fusion map, XLA's
        analyses and the donation (in a caller's process, made where first read)."""
        found = self.found
        dumped = self.early.compiled if self.early else None
        found.executable = exe = readers.read_executable(compiled, dumped, self.lazy)
        if exe.shown.fusion_map is not None:  # made from the dump's graph, the one shown
            found.fusion_map = Found(exe.shown.fusion_map)
        else:
            fusion_map = Later(collector_paused(self._fusion_map))
            found.fusion_map = fusion_map if self.lazy else fusion_map.value()
        graph = exe.shown.read.graph
        analyses = Later(collector_paused(lambda: _analyses_of(compiled, memory, graph, found)))
        found.analyses = analyses if self.defer or self.lazy else analyses.value()
        if self.target.donate and found.stablehlo is not None:
            alias_bytes = analyses.value().memory.alias_bytes
            found.donation = readers.donation_of(compiled, found.stablehlo, exe, alias_bytes)

    def _fusion_map(self) -> Found[FusionMap] | None:
        """The fusion map of the IRs read (their sides where made beside the compile)."""
        found = self.found
        sides = sides_of(found.irs())
        return fusion_map_section(found.graphs(), self.target.user_file, sides)

    def _compile(
        self, traced: Traced, lowered: Lowered
    ) -> tuple[Compiled, Background[readers.MemoryRead]]:
        """XLA's compile, and XLA's memory analysis under way. The jaxpr and the
        StableHLO (and the specialization's rows) are read on a thread while XLA
        compiles (XLA's compile releases the GIL, and on a 96-layer model takes longer
        than both readers together); so they add nothing to the wait. `compile_s`
        stays XLA's time alone: the reader runs at idle priority, with the collector
        paused and the switch interval shortened (`viz.overlap`), in a caller's process
        too, for the compile's duration only. So is the compiled HLO, from the text XLA
        dumps once its passes are done, while it generates code (`viz.hlo_dump`), where
        the program is big enough to be worth a dump (`DUMP_FROM_BYTES`; in a caller's
        process `CALLERS_DUMP_FROM_BYTES`, and the buffer assignment alone where the
        platform needs it: `assignment_from_dump`). Where no dump came, the compiled HLO
        is read from the executable's text after the compile."""
        stream = self.stream
        bytecode = module_bytecode(lowered.mlir_module())  # read from a copy (module_copy)
        proto = assignment_from_dump(traced.target.device)
        worth_a_dump = len(bytecode) >= (CALLERS_DUMP_FROM_BYTES if self.lazy else DUMP_FROM_BYTES)
        dump = OptimizedHloDump(
            traced.target.compiler_options, wanted=worth_a_dump or proto, proto=proto
        )
        window = CompileWindow()  # the readers hold the GIL only while XLA does not
        # XLA generates code on every core: the readers take only the CPU it leaves idle,
        # but for a streamed analysis's jaxpr graph, which a page waits for (on a busy
        # machine, idle CPU came only at the end of a 96-layer model's compile)
        idle = IdlePriority(restorable_only=self.lazy)

        def seen(read: IRRead) -> None:
            stream.read(read)
            idle.lower()

        def read() -> Early:
            window.enter()
            if not stream.listening:
                idle.lower()
            told = seen if stream.listening else None
            user_file, texts_later = self.target.user_file, self.defer_texts
            return readers.read_early(
                traced, bytecode, dump, user_file, told, self.lazy, texts_later, window.compiling
            )

        # the reader allocates while XLA compiles: a collection set off there would walk
        # a caller's every object holding the GIL, which JAX's Python around XLA wants
        with gc_paused(callers_too=True):
            reader = Background(read, priority=idle)
            try:
                try:
                    window.open()
                    compiled = lowered.compile(dump.options)
                    compiled.dumped_hlo = dump.hlo_proto()  # read before the folder goes
                    memory = Background(lambda: readers.read_memory(compiled), "xla", deferred=True)
                finally:  # a failed compile keeps what the readers found
                    window.close()
                    dump.done()
                    reader.resume()  # what is left to read, the analysis now waits for
                    self._keep(reader.result())
                # XLA's memory analysis releases the GIL (its text and cost analyses
                # hardly do): in the worker it runs beside the executable's reading and
                # the report's head, once the reader is done (the profile's layout is
                # Python: beside the reader's last graphs it held the GIL they waited
                # for); in a caller's process where first read
                if not self.lazy:
                    memory.start()
            finally:
                dump.close()
        return compiled, memory

    def _keep(self, early: Early) -> None:
        self.early = early
        self.found.jaxpr, self.found.stablehlo = early.jaxpr, early.stablehlo


class _Stream:
    """What an analysis tells `on_stage` as it goes: the stage under way and a glimpse
    of the report (`known`, given the IRs the reader thread has read beside the compile
    and the analysis has not set yet). Without `on_stage`, nothing. A listener that
    fails is dropped: telling never fails the analysis."""

    def __init__(self, on_stage: OnStage | None, known: Callable[[list[IRRead]], Report]):
        self._on_stage, self._known = on_stage, known
        self._stage = "load"
        self._read: list[IRRead] = []  # read beside the compile
        self._lock = threading.Lock()  # the calling thread and the reader both tell

    @property
    def listening(self) -> bool:
        return self._on_stage is not None

    def stage(self, name: str) -> None:
        if self._on_stage is not None:
            with self._lock:
                self._stage = name
                self._tell()

    def read(self, read: IRRead) -> None:
        if self._on_stage is not None:
            with self._lock:
                self._read.append(read)
                self._tell()

    def _tell(self) -> None:
        known = self._known(self._read)
        try:
            self._on_stage(self._stage, known)  # type: ignore[misc]
        except Exception:
            self._on_stage = None


def _analyses_of(
    compiled: Compiled, memory: Background[readers.MemoryRead], graph: Any, found: Sections
) -> Analyses:
    """XLA's analyses, the memory profile's lines given by the fusion map's kernels. In
    a caller's process XLA's memory analysis is deferred to here: it starts first and
    runs (its C++ leaves the GIL) while the fusion map is made where it was not yet
    (0.1 s of each at 96 layers), and is waited for before this returns, however."""
    memory.start()
    try:
        kernels = found.fusion_entries
    finally:
        memory.get()  # nothing of jitscope's runs on once a report's part is made
    return readers.analyses_of(compiled, memory, graph, kernels)


def _time_runs(compiled: Compiled, runs: int, budget_s: float) -> tuple[RunStats, Found[RunStats]]:
    """The jit runs' times, and eager's (eager failing, for jit-only code, is a note,
    not an error)."""
    stats = compiled.time_runs(runs, budget_s)
    try:
        eager = compiled.time_eager(max(3, runs // 2), budget_s / 2)
    except (Exception, *USER_EXITS) as exc:
        return stats, Found(warning=eager_failure(exc, compiled.target.user_file))
    return stats, Found(eager)
