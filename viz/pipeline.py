"""`analyze`: one function through the staged pipeline, everything read into a Report.

trace → lower → compile → run, each stage from `viz.stages` (which decides x64,
the device, static arguments, compiler options and the memory limit). The IRs
are read after XLA has compiled, so `compile_s` is XLA's time alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax

import viz.graph
from viz.donation import UNUSABLE_WARNING, read_donation
from viz.errors import USER_EXITS, UserCodeError
from viz.fusion.report import PROFILE_RUNS, add_fusion_map, add_profile
from viz.ir import model
from viz.ir.hlo import read_hlo
from viz.ir.jaxpr import read_jaxpr
from viz.ir.kernels import fusion_count, kernel_count, kernels
from viz.ir.stablehlo import read_stablehlo
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
from viz.specialization.read import read_specialization
from viz.stages import DEFAULT_MEMORY_LIMIT, Compiled, Lowered, Target, Traced, block

__all__ = ["DEFAULT_MEMORY_LIMIT", "analyze", "analyze_target"]


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
) -> Report:
    """Analyze `fn` on the args spec. Never raises for problems in user code: they are
    reported in `report.error` with `report.ok == False`, keeping what was learned.

    `profile`: also time each kernel under `jax.profiler` (needs runs > 0).
    `mlir`: also keep the StableHLO with its locations (`report.mlir`), for Model Explorer.
    `history`: also record the run in `viz.history` (the CLI and the app always do)."""
    settings: dict[str, Any] = {"static": tuple(static), "device": device, "x64": x64}
    settings.update(donate=tuple(donate), compiler_options=dict(compiler_options or {}))
    settings["memory_limit_bytes"] = memory_limit_bytes
    if namespace is not None:
        settings["namespace"] = namespace
    if user_file is not None:
        settings["user_file"] = user_file
    target = Target.load(fn, **settings)
    report = analyze_target(target, args, runs, time_budget_s, profile=profile, mlir=mlir)
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
) -> Report:
    """The Report of one target on one args spec (never raises for user-code problems)."""
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
    try:
        args = target.args(spec)
        report.x64 = args.x64
        traced = target.trace(args)
        report.timings.trace_s = traced.seconds
        _read_jaxpr(report, traced)
        lowered = traced.lower()
        report.timings.lower_s = lowered.seconds
        _read_stablehlo(report, lowered)
        if mlir:  # StableHLO with locations, for Model Explorer
            report.mlir = lowered.text(debug_info=True)
        compiled = lowered.compile()
        _read_compiled(report, compiled)
        add_fusion_map(report)
        if runs > 0:
            _time_runs(report, compiled, runs, budget_s)
        if profile:  # with runs=0 there is nothing to profile: add_profile says so
            call = compiled.runner(PROFILE_RUNS + 1) if runs > 0 else (lambda: None)
            add_profile(report, call, block, runs)
    except UserCodeError as exc:
        if exc.seconds is not None and exc.info.stage in ("trace", "lower", "compile"):
            setattr(report.timings, f"{exc.info.stage}_s", exc.seconds)
        report.fail(exc.info)
    _read_specialization(report, target, args, traced, compiled)
    return report


def _read_specialization(report: Report, target: Target, *stages: Any) -> None:
    """What the executable is specialized on (a reader bug is a warning, not a failure)."""
    try:
        report.specialization, report.specialization_ops = read_specialization(
            target, *stages, error=report.error
        )
    except Exception as exc:
        report.warnings.append(f"could not read the specialization: {type(exc).__name__}: {exc}")


def _read_jaxpr(report: Report, traced: Traced) -> None:
    names = traced.target.param_names(len(traced.args.items))
    report.jaxpr = JaxprSection(text=str(traced.jaxpr))
    hist = _read_graph(report, "jaxpr", lambda: read_jaxpr(traced.jaxpr, names))
    if hist is not None:
        report.jaxpr.eqn_count, report.jaxpr.primitives = sum(hist.values()), hist


def _read_stablehlo(report: Report, lowered: Lowered) -> None:
    report.stablehlo = StableHLOSection(text=lowered.text() or "")
    hist = _read_graph(report, "stablehlo", lambda: read_stablehlo(lowered.mlir_module()))
    if hist is not None:
        report.stablehlo.op_count, report.stablehlo.ops = sum(hist.values()), hist


def _read_compiled(report: Report, compiled: Compiled) -> None:
    report.timings.compile_s = compiled.seconds
    report.timings.compile_from_disk = compiled.events.from_disk()
    report.compile_events = compiled.events.totals()
    report.compiled = section = CompiledSection(text=compiled.text() or "")
    hist = _read_graph(report, "compiled", lambda: read_hlo(compiled.compiled))
    if hist is not None:
        graph = report.graph_models["compiled"]
        section.op_count, section.ops = sum(hist.values()), hist
        section.fusion_count, section.kernel_count = fusion_count(graph), kernel_count(graph)
        report.kernels = [Kernel(**k) for k in kernels(graph)]
    report.cost = Cost(**compiled.cost())
    report.memory = Memory(**compiled.memory())
    report.warnings.extend(compiled.warnings)
    if compiled.target.donate:
        _read_donation(report, compiled)


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


def _read_graph(report: Report, ir: str, read: Callable[[], model.Graph]) -> dict[str, int] | None:
    """One IR's graph and default view into the report; its op histogram (None if the
    reader failed: a reader bug must not hide the other results)."""
    try:
        graph = read()
    except Exception as exc:
        report.warnings.append(f"could not read the {ir} graph: {type(exc).__name__}: {exc}")
        return None
    report.graphs[ir] = GraphSummary(**viz.graph.summary(graph))
    report.graph_models[ir] = graph
    return model.op_histogram(graph)


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
