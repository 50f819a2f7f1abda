"""The pipeline's readers: each IR, the executable, the donation, the sharding and the
specialization, read into its section (`viz.sections`). The jaxpr, the StableHLO (a
copy of the module, in an MLIR context of its own) and the specialization's rows are
read on a thread while XLA compiles (`read_early`), then the compiled HLO from the text
XLA dumps once its passes are done (`viz.hlo_dump`); `read_executable` reads what the
compile made once it returned. Never raises for a reader's bug: the section carries a
warning instead, and the other results stay.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace

import viz.graph
from viz.donation import UNUSABLE_WARNING, read_donation
from viz.errors import ErrorInfo
from viz.fusion.map import FusionMap, fusion_map, prepare
from viz.hlo_dump import OptimizedHloDump
from viz.ir import model
from viz.ir.hlo import read_hlo_text
from viz.ir.jaxpr import JaxprReading
from viz.ir.kernels import fusion_count, kernel_count, kernels
from viz.ir.stablehlo import StableHLOReading, module_copy
from viz.memory.model import Residual
from viz.memory.profile import MemoryProfile
from viz.overlap import Background, collector_paused
from viz.plain import Later
from viz.report import Cost, Donation, FusionEntry, GraphSummary, Kernel, Memory
from viz.sections import (
    Analyses,
    CompiledRead,
    Executable,
    Found,
    IRRead,
    Specialized,
    graphs_of,
    sides_of,
)
from viz.sharding.model import ShardingSection
from viz.specialization.read import finish, read_specialization, read_traced
from viz.stages import Compiled, Traced
from viz.target import Args, Target

Seen = Callable[[IRRead], None]


def read_ir(
    name: str,
    read: Callable[[], model.Graph],
    text: Callable[[], str] = str,
    seen: Seen | None = None,
    lazy: bool = False,
    text_later: bool = False,
) -> IRRead:
    """The IR's graph, view and histogram, then its text: `seen` hears the IR before its
    text is made (a 96-layer jaxpr's takes 0.2 s), for a page to draw the graph.
    `lazy`: the view and the text are made where first read (`Later`; in a caller's
    process, where they would add to the wait: `viz.pipeline`). `text_later`: the text
    alone (in the worker, made as its part is sent, after the report's head)."""
    try:
        graph = read()
    except Exception as exc:
        warning = f"could not read the {name} graph: {type(exc).__name__}: {exc}"
        found = IRRead(name, "", warning=warning)
    else:
        view = Later(collector_paused(lambda: GraphSummary(**viz.graph.summary(graph))))
        found = IRRead(name, "", graph, view if lazy else view.value(), model.op_histogram(graph))
    if seen is not None:
        seen(found)
    later = lazy or text_later
    return replace(found, text=Later(collector_paused(text)) if later else text())


def with_side(read: IRRead) -> IRRead:
    """The IR with its side of the fusion map (none if that fails: the map, made
    without it, then says why in its warning)."""
    if read.graph is not None:
        with contextlib.suppress(Exception):
            return replace(read, side=prepare(read.graph, read.name))
    return read


def read_jaxpr_ir(
    traced: Traced, seen: Seen | None = None, lazy: bool = False, text_later: bool = False
) -> IRRead:
    """Inputs are named per leaf as JAX names them (`params[0]['w']`), where JAX has
    one name per input; else per parameter (`lazy`, `text_later`: see `read_ir`)."""
    names = traced.arg_names
    if len(names) != len(traced.jaxpr.jaxpr.invars):
        names = traced.target.param_names(len(traced.args.items))
    reading = JaxprReading(traced.jaxpr, names)
    return read_ir("jaxpr", reading.graph, reading.text, seen, lazy, text_later)


@dataclass(frozen=True)
class Early:
    """What the reader thread read beside XLA's compile: the jaxpr and the StableHLO
    (each with its side of the fusion map), the specialization as the spec and the
    trace say it (None: its reader failed, read it again after), and the compiled HLO
    from XLA's dump (None: no dump came)."""

    jaxpr: IRRead
    stablehlo: IRRead
    specialization: Specialized | None
    compiled: CompiledRead | None


def read_early(
    traced: Traced,
    bytecode: bytes,
    dump: OptimizedHloDump,
    user_file: str | None,
    seen: Seen | None = None,
    lazy: bool = False,
    texts_later: bool = False,
    compiling: Callable[[], bool] | None = None,
) -> Early:
    """The jaxpr, the StableHLO and the specialization's rows, read on the compile's
    side thread (`seen` hears each IR once its graph is read): the StableHLO from a
    copy of the module in a context of its own, which XLA never touches. Then the
    compiled HLO, once XLA dumps it, with the fusion map of all three. `lazy`: each
    IR's view and text, and its side of the fusion map, made where first read, but for
    what they can be made in while `compiling()` (`made_beside`); `texts_later`: the
    jaxpr's and the StableHLO's texts alone (`read_ir`)."""
    with traced.target.scope(traced.args):
        jaxpr = read_jaxpr_ir(traced, seen, lazy, texts_later)
        reading = StableHLOReading(module_copy(bytecode))
        stablehlo = read_ir("stablehlo", reading.graph, reading.text, seen, lazy, texts_later)
        specialization = _traced_specialization(traced)
        if not lazy:
            jaxpr, stablehlo = with_side(jaxpr), with_side(stablehlo)
        elif compiling is not None:
            jaxpr, stablehlo = made_beside(jaxpr, compiling), made_beside(stablehlo, compiling)
    text = dump.wait()
    compiled = None if text is None else read_compiled_text(text)
    if compiled is not None and compiled.read.graph is not None:
        made = _fusion_map_of(jaxpr, stablehlo, compiled.read, user_file)
        compiled = replace(compiled, fusion_map=made)
    return Early(jaxpr, stablehlo, specialization, compiled)


def made_beside(read: IRRead, compiling: Callable[[], bool]) -> IRRead:
    """An IR whose side of the fusion map, view and text are to be made where first read
    (`lazy`), with as many of them as XLA's compile leaves time for made now, on the
    reader thread beside it: the rest stay to be made where first read, and nothing is
    left running once the compile returns."""
    if compiling():
        read = with_side(read)
    for part in (read.view, read.text):
        if compiling() and type(part) is Later:
            part.value()
    return read


def _fusion_map_of(
    jaxpr: IRRead, stablehlo: IRRead, compiled: IRRead, user_file: str | None
) -> FusionMap | None:
    """The fusion map of the three IRs (None where it fails: it is made again after the
    compile, whose warning then says why)."""
    reads = (jaxpr, stablehlo, compiled)
    try:
        return fusion_map(graphs_of(reads), user_file, sides_of(reads))
    except Exception:
        return None


def _traced_specialization(traced: Traced) -> Specialized | None:
    """`read_traced`, or None where it fails (read again once the stages are done, its
    error then becomes the report's warning)."""
    try:
        return read_traced(traced.target, traced.args, traced)
    except Exception:
        return None


def read_compiled_text(text: str | None, lazy: bool = False) -> CompiledRead:
    """The compiled HLO, its kernels and counts, from an executable's text (`lazy`: its
    view made where first read)."""
    read = read_ir("compiled", lambda: read_hlo_text(_executable_text(text)), lazy=lazy)
    if read.graph is None:
        return CompiledRead(read)
    return CompiledRead(
        read,
        [Kernel(**k) for k in kernels(read.graph)],
        fusion_count(read.graph),
        kernel_count(read.graph),
    )


def _executable_text(text: str | None) -> str:
    if text is None:
        raise ValueError("XLA gives no text of this executable (as_text() is None)")
    return text


MemoryRead = tuple[dict[str, int | None], Found[MemoryProfile]]


def read_memory(compiled: Compiled) -> MemoryRead:
    """XLA's memory analysis and the memory profile without lines (on a thread of its
    own: XLA's analysis releases the GIL); a profile that cannot be read is a warning."""
    totals = compiled.memory()
    try:
        return totals, Found(compiled.memory_layout())
    except Exception as exc:
        return totals, Found.failed("could not read the memory profile", exc)


def read_executable(
    compiled: Compiled, dumped: CompiledRead | None, lazy: bool = False
) -> Executable:
    """What the compile made: the compiled HLO from XLA's dump (`dumped`), else read from
    the executable's text now (`lazy`: its view made where first read). The dump is the
    executable's module, printed by XLA once its passes were done (`viz.hlo_dump`): with
    it, the executable's own text is made where first read (the worker sends it after
    the report's head), not on the way to the report (printing it took 50 ms of a
    96-layer model's 3 s compile)."""
    from_disk, events = compiled.events.from_disk(), compiled.events.totals()
    text: str | Later
    if dumped is None:
        made = compiled.text()
        text, shown = made or "", read_compiled_text(made, lazy)
    else:
        text, shown = Later(lambda: compiled.text() or ""), dumped
    return Executable(
        text=text,
        shown=shown,
        warnings=list(compiled.warnings),
        events=events,
        from_disk=from_disk,
    )


def analyses_of(
    compiled: Compiled,
    memory: Background[MemoryRead],
    graph: model.Graph | None,
    kernels: list[FusionEntry],
) -> Analyses:
    """XLA's cost and memory analyses (`memory`: under way), the memory profile's
    buffers given their lines from the compiled `graph` shown, else from the fusion
    map's `kernels`, and the limit a run must fit in. Never raises: the worker makes
    them after the report's head is sent, and what could not be read says why."""
    try:
        cost = Cost(**compiled.cost())
        totals, layout = memory.result()
        limit = compiled.memory_limit()
    except Exception as exc:
        failed = Found.failed("could not read XLA's cost and memory analyses", exc)
        return Analyses(Cost(), Memory(profile_warning=failed.warning))
    try:
        profile = compiled.memory_profile(graph, kernels)
    except Exception:  # unreadable: the layout's warning says why
        profile = None
    memory = memory_section(Memory(**totals), profile, limit)
    return Analyses(cost, replace(memory, profile_warning=layout.warning))


def memory_section(totals: Memory, profile: MemoryProfile | None, limit: tuple[int, str]) -> Memory:
    """The report's memory: XLA's totals, the profile where read, and the limit."""
    found = {}
    if profile is not None:
        found = {
            name: getattr(profile, name)
            for name in (
                "peak_bytes",
                "peak_at",
                "timeline",
                "at_peak",
                "by_kind_at_peak",
                "library_kernels",
                "recomputed",
                "other_spaces",
                "xla_peak_parts",
            )
        }
    return replace(totals, **found, limit_bytes=limit[0], limit_of=limit[1])


def donation_of(
    compiled: Compiled, stablehlo: IRRead, executable: Executable, alias_bytes: int | None
) -> Donation | None:
    """What became of the donated arguments, from both programs' graphs and the bytes
    XLA aliased (None when a reader failed: its warning is in the report already)."""
    graph = executable.shown.read.graph
    if stablehlo.graph is None or graph is None:
        return None
    return read_donation(
        compiled.args_info(),
        compiled.out_info(),
        stablehlo.graph,
        graph,
        [w for w in compiled.warnings if UNUSABLE_WARNING in w],
        alias_bytes,
    )


def residuals_of(traced: Traced) -> Found[tuple[list[Residual], str]] | None:
    """What jax.checkpoint leaves saved for the backward pass (None: the function
    checkpoints nothing); a function JAX cannot differentiate is a warning."""
    from viz.residuals import saved_residuals

    try:
        found = saved_residuals(traced)
    except Exception as exc:
        return Found.failed("could not list the residuals jax.checkpoint saves", exc)
    return None if found is None else Found(found)


def sharding_of(
    compiled: Compiled, graph: model.Graph | None, entries: list[FusionEntry]
) -> Found[ShardingSection]:
    """How the program is split over devices (a reader bug is a warning, not a failure)."""
    from viz.sharding.read import read_sharding

    target = compiled.target
    try:
        split = read_sharding(
            compiled.compiled,
            compiled.arg_names,
            target.mesh_spec,
            graph,
            entries,
            target.user_file,
        )
    except Exception as exc:
        return Found.failed("could not read the sharding", exc)
    return Found(split)


def specialization_of(
    target: Target,
    args: Args | None,
    traced: Traced | None,
    compiled: Compiled | None,
    early: Specialized | None,
    error: ErrorInfo | None,
) -> Found[Specialized]:
    """What the executable is specialized on (a reader bug is a warning, not a failure):
    the rows read while XLA compiled, finished with what the executable says."""
    try:
        if early is not None:
            return Found(finish(*early, compiled, error))
        return Found(read_specialization(target, args, traced, compiled, error=error))
    except Exception as exc:
        return Found.failed("could not read the specialization", exc)
