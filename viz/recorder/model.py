"""A recording as plain data: the program, each compilation, and per-function totals.

`Recording.to_dict()` is the public Recording JSON (../shared/DESIGN.md); keys are
added, never renamed. Stdlib only: the app server reads recordings without jax.

Times: `t_s` is when a compilation started (its trace, or its lowering when the
trace was cached), in seconds since the program started; `trace_s`, `lower_s` and
`compile_s` are JAX's own monitoring durations for the three stages.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from viz.cache.signature import Reason  # the cache lab's, so both speak one vocabulary
from viz.where import installed_parts

DEFAULT_DETAILS = 100  # compiles kept with details, per function
FIRST_COMPILE = "not compiled before"  # `before` of the first compile's new_function reason
CACHE = "(cache)"  # the argument of a reason that is about the jit cache itself
CLEARED = "jax.clear_caches() emptied it"  # `after` of a recompile after a clear that was seen
NOT_FOUND = "no difference found"  # `after` when jitscope found nothing that differs
# A compile's need (`Compile.need`): its function's first, one with inputs no earlier
# compile had (new data), or one with the same inputs as an earlier compile
FIRST, NEEDED, AVOIDABLE = "first", "needed", "avoidable"


@dataclass(frozen=True)
class ArgLeaf:
    """One argument leaf as the jit cache keyed it (a static argument has only a value)."""

    arg: str  # 'x', "params['w']", 'n'
    shape: list[int] | None = None
    dtype: str | None = None
    weak_type: bool = False
    sharding: str | None = None  # None: the default placement
    static_value: str | None = None  # repr of a static argument, truncated
    python_scalar: bool = False

    @property
    def text(self) -> str:
        if self.static_value is not None:
            return f"{self.arg}={self.static_value}"
        shape = ",".join(map(str, self.shape or []))
        weak = "weak " if self.weak_type else ""
        where = f" @ {self.sharding}" if self.sharding else ""
        return f"{self.arg}: {weak}{self.dtype}[{shape}]{where}"


@dataclass(frozen=True)
class KeyChange:
    """One component of the persistent cache key that differs from an earlier compile."""

    component: str  # computation, jaxlib, backend, xla_flags, compile_options, devices, …
    before: str
    after: str


def change_text(change: KeyChange) -> str:
    """'xla_flags (`--xla_backend_optimization_level=1` added)', 'computation'."""
    if change.component != "xla_flags":
        if change.component in ("jaxlib", "backend", "compression", "hook"):
            return f"{change.component} ({change.before} → {change.after})"
        return change.component
    before = set(change.before.split()) - {"(none)"}
    after = set(change.after.split()) - {"(none)"}
    parts = [f"`{f}` added" for f in sorted(after - before)]
    parts += [f"`{f}` removed" for f in sorted(before - after)]
    return f"XLA flags ({', '.join(parts)})" if parts else "XLA flags"


@dataclass
class Persistent:
    """What the persistent compilation cache did for one compile
    (`viz.recorder.capture.persistent`).

    `state`: hit (served from disk), miss (compiled) or off (no persistent cache).
    `written`: a miss was stored; `why`: why not, or why it missed; `key`: JAX's cache key;
    `changed`: the key's components that differ from the nearest earlier compile of the
    same function and signature; `components`: this compile's components (readable values
    where JAX hashes something readable, hashes otherwise), kept to compare later runs.
    """

    state: str = "off"
    written: bool = False
    why: str = ""
    key: str = ""
    changed: list[KeyChange] = field(default_factory=list)
    components: dict[str, str] = field(default_factory=dict)
    cache_dir: str = ""
    saved_s: float = 0.0  # compile time a hit saved (the earlier miss's, when known)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Persistent:
        if not data:
            return cls()
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["changed"] = [KeyChange(**c) for c in data.get("changed") or []]
        return cls(**known)


@dataclass
class Compile:
    """One compilation of a jitted function."""

    seq: int  # 1, 2, ... in the order compilations finished
    t_s: float
    function: str  # __name__, '<lambda>' for a lambda
    defined_at: str  # 'path:line'
    call_site: str  # 'path:line': the innermost frame outside JAX and site-packages
    stack: list[str] = field(default_factory=list)  # 'path:line in name', outermost first
    signature: list[ArgLeaf] = field(default_factory=list)
    spec: str | None = None  # in the args-spec language, when it can express the call
    spec_reason: str | None = None  # why `spec` is None
    static: list[str] = field(default_factory=list)  # static parameters, by name
    reasons: list[Reason] = field(default_factory=list)
    trace_s: float = 0.0
    lower_s: float = 0.0
    compile_s: float = 0.0
    persistent_cache: bool = False  # the persistent compilation cache served the executable
    eager: bool = False  # JAX's own op-by-op compile (a primitive or a JAX helper)
    thread: str = ""
    created_at: str | None = None  # 'path:line' that called jax.jit(...) (a library's too)
    called_from: str | None = None  # the user's 'path:line' that led a library to make it
    wraps: list[str] = field(default_factory=list)  # layers around the function: jacfwd, partial
    transform: str | None = None  # compiled under a transformation: 'vmap', 'grad', …
    persistent: Persistent = field(default_factory=Persistent)
    peak_bytes: int | None = None  # the memory profile's peak, where the executable was seen
    need: str = FIRST  # 'first', 'needed' (new inputs) or 'avoidable' (inputs seen before)
    need_why: str = ""  # in words: what was new, or why the same inputs compiled again
    library: str = ""  # an op-by-op compile's: the installed package the user called that ran it

    @property
    def total_s(self) -> float:
        return self.trace_s + self.lower_s + self.compile_s

    @property
    def signature_text(self) -> str:
        """The leaves in one line, the arrays first: a framework's static leaves (an
        equinox static part, an nnx module's attributes) can number dozens."""
        leaves = sorted(self.signature, key=lambda leaf: leaf.static_value is not None)
        return " · ".join(leaf.text for leaf in leaves)

    @property
    def key(self) -> str:
        return function_key(self.function, self.defined_at)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Compile:
        known = cls.__dataclass_fields__
        values = {k: v for k, v in data.items() if k in known}
        values["signature"] = [ArgLeaf(**leaf) for leaf in data.get("signature") or []]
        values["reasons"] = [Reason(**r) for r in data.get("reasons") or []]
        values["persistent"] = Persistent.from_dict(data.get("persistent"))
        return cls(**values)


def new_data_text(reason: Reason) -> str:
    """'new data: x f32[8] → f32[9]': why a compile was needed, from its first reason
    of new data (the Recordings page leaves it out beside that reason)."""
    return f"new data: {reason.arg} {reason.before} → {reason.after}"


def cache_reason(cleared: bool, where: str = "") -> Reason:
    """A recompile with nothing different: after `jax.clear_caches()` (seen, at `where`),
    or, honestly, a difference jitscope did not find."""
    if cleared:
        return Reason(CACHE, "config", "cached", CLEARED + (f" at {where}" if where else ""))
    return Reason(
        CACHE, "config", "the same function, arguments and settings as compiled before",
        NOT_FOUND,
    )  # fmt: skip


def hidden_eager() -> FunctionStats:
    """The totals of op-by-op compiles that are counted but not listed."""
    return FunctionStats("(op-by-op)", "", eager=True)


# a lax loop run outside jit: JAX compiles the loop, with the user's function inside
LOOP_LAYERS = frozenset({"lax.scan", "lax.while_loop", "lax.cond"})
# layers that are a jit themselves (a framework's): the program is that layer, not jit(it)
JIT_LAYERS = frozenset({"jit", "filter_jit", "nnx.jit"}) | LOOP_LAYERS


def jitted(layers: list[str] | tuple[str, ...], name: str) -> str:
    """'jit(jacfwd(partial(safe_norm)))' as the user wrote it; 'filter_jit(f)' where the
    outermost layer is a framework's jit."""
    nested = "".join(f"{layer}(" for layer in layers) + name + ")" * len(layers)
    return nested if layers and layers[0] in JIT_LAYERS else f"jit({nested})"


def function_key(name: str, defined_at: str) -> str:
    return f"{name} @ {defined_at}"


@dataclass
class FunctionStats:
    """Exact totals for one function, however many of its compiles keep details."""

    name: str
    defined_at: str
    compiles: int = 0
    compile_s: float = 0.0
    reasons: dict[str, int] = field(default_factory=dict)  # kind → compiles it explained
    advice: str = ""  # a line per kind of recompile, the one explaining most compiles first
    eager: bool = False
    persistent_hits: int = 0  # compiles the persistent cache served from disk
    peak_bytes: int | None = None  # the largest memory peak among its compiles
    avoidable: int = 0  # compiles with the same inputs as an earlier one
    avoidable_s: float = 0.0  # their compile time

    @property
    def key(self) -> str:
        return function_key(self.name, self.defined_at)

    def add(
        self,
        compile_s: float,
        kinds: list[str],
        disk_hit: bool = False,
        peak_bytes: int | None = None,
        need: str = FIRST,
    ) -> None:
        self.compiles += 1
        self.compile_s += compile_s
        if need == AVOIDABLE:
            self.avoidable += 1
            self.avoidable_s += compile_s
        self.persistent_hits += int(disk_hit)
        if peak_bytes is not None:
            self.peak_bytes = max(self.peak_bytes or 0, peak_bytes)
        for kind in dict.fromkeys(kinds):  # a compile counts once per kind
            self.reasons[kind] = self.reasons.get(kind, 0) + 1


@dataclass
class Process:
    """One process of a multi-process job (`jax.distributed`), as `jax` numbers it."""

    index: int  # jax.process_index()
    count: int  # jax.process_count()
    job: str | None  # shared by every process of one job (None: it could not be learned)
    host: str  # this process's host name
    coordinator: str | None = None  # the coordinator's address, as the program gave it


@dataclass
class ProcessRun:
    """One run of the recorded program (the Recording JSON's `program`): its command,
    folder and times, how it ended, and which process of a job it was."""

    argv: list[str]
    cwd: str
    started: float  # Unix time
    wall_s: float | None = None
    exit_code: int | None = None  # None while it runs (or if the recorder never saw it end)
    name: str = ""
    path: str = ""  # the program's sys.path[0]: Open in Explore puts it on the worker's path
    signal: str | None = None  # 'SIGKILL' when a signal ended it
    process: Process | None = None  # None: the program never initialized jax.distributed

    @property
    def folders(self) -> tuple[str, ...]:
        """The folders a path is written from (`short_path`): the working folder, then
        the script's (a program run from elsewhere: `python ~/proj/train.py`)."""
        return (self.cwd, self.path) if self.path else (self.cwd,)

    def __post_init__(self) -> None:
        if isinstance(self.process, dict):  # read back from JSON
            known = Process.__dataclass_fields__
            self.process = Process(**{k: v for k, v in self.process.items() if k in known})


@dataclass
class Summary:
    compiles: int
    compile_s: float
    functions: int
    eager_compiles: int
    eager_compile_s: float = 0.0
    details_dropped: int = 0  # compiles counted in the totals but kept without details
    recorder_errors: int = 0  # compiles the recorder failed to describe (a jitscope bug)
    errors: list[dict[str, Any]] = field(default_factory=list)  # [{message, count}]
    persistent_hits: int = 0  # compiles served from the persistent cache
    persistent_misses: int = 0  # compiles that looked in it and compiled
    persistent_saved_s: float = 0.0  # compile time the hits saved
    largest_peak: dict[str, Any] | None = None  # {function, defined_at, bytes}: the most memory
    needed: int = 0  # compiles of new inputs (first compiles included)
    avoidable: int = 0  # compiles of inputs an earlier compile had
    avoidable_s: float = 0.0
    eager_libraries: dict[str, int] = field(default_factory=dict)  # see Recording's


@dataclass
class Recording:
    program: ProcessRun
    functions: list[FunctionStats]
    compiles: list[Compile]
    eager: FunctionStats = field(
        default_factory=lambda: FunctionStats("(op-by-op)", "", eager=True)
    )
    details_dropped: int = 0
    recorder_errors: int = 0
    errors: dict[str, int] = field(default_factory=dict)  # the recorder's error → compiles
    eager_libraries: dict[str, int] = field(default_factory=dict)  # package → its ops' compiles

    @property
    def summary(self) -> Summary:
        """Totals of the jitted functions; op-by-op compiles are counted apart, whether
        they are kept (`--eager`) or hidden."""
        jitted = [f for f in self.functions if not f.eager]
        eager = [self.eager, *(f for f in self.functions if f.eager)]
        return Summary(
            compiles=sum(f.compiles for f in jitted),
            compile_s=sum(f.compile_s for f in jitted),
            functions=len(jitted),
            eager_compiles=sum(f.compiles for f in eager),
            eager_compile_s=sum(f.compile_s for f in eager),
            details_dropped=self.details_dropped,
            recorder_errors=self.recorder_errors,
            errors=[{"message": m, "count": n} for m, n in self.errors.items()],
            persistent_hits=sum(f.persistent_hits for f in jitted),
            persistent_misses=sum(
                1 for c in self.compiles if not c.eager and c.persistent.state == "miss"
            ),
            persistent_saved_s=sum(c.persistent.saved_s for c in self.compiles if not c.eager),
            largest_peak=_largest_peak(jitted),
            needed=sum(f.compiles - f.avoidable for f in jitted),
            avoidable=sum(f.avoidable for f in jitted),
            avoidable_s=sum(f.avoidable_s for f in jitted),
            eager_libraries=dict(self.eager_libraries),
        )

    def function(self, key: str) -> FunctionStats | None:
        return next((f for f in self.functions if f.key == key), None)

    def compiles_of(self, key: str) -> list[Compile]:
        return [c for c in self.compiles if c.key == key]

    def to_dict(self) -> dict[str, Any]:
        return {
            "program": asdict(self.program),
            "summary": asdict(self.summary),
            "functions": [asdict(f) for f in self.functions],
            "compiles": [c.to_dict() for c in self.compiles],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Recording:
        summary = data.get("summary") or {}
        functions = [FunctionStats(**f) for f in data.get("functions") or []]
        kept = [f for f in functions if f.eager]
        eager = FunctionStats(  # the hidden op-by-op compiles: what the kept ones leave
            "(op-by-op)",
            "",
            compiles=summary.get("eager_compiles", 0) - sum(f.compiles for f in kept),
            compile_s=summary.get("eager_compile_s", 0.0) - sum(f.compile_s for f in kept),
            eager=True,
        )
        return cls(
            program=ProcessRun(**data["program"]),
            functions=functions,
            compiles=[Compile.from_dict(c) for c in data.get("compiles") or []],
            eager=eager,
            details_dropped=summary.get("details_dropped", 0),
            recorder_errors=summary.get("recorder_errors", 0),
            errors={e["message"]: e["count"] for e in summary.get("errors") or []},
            eager_libraries=dict(summary.get("eager_libraries") or {}),
        )


def _largest_peak(functions: list[FunctionStats]) -> dict[str, Any] | None:
    """The function whose compile needs the most memory at its peak (None: no peak seen)."""
    peaked = [f for f in functions if f.peak_bytes is not None]
    if not peaked:
        return None
    top = max(peaked, key=lambda f: f.peak_bytes or 0)
    return {"function": top.name, "defined_at": top.defined_at, "bytes": top.peak_bytes}


def short_path(location: str, cwd: str | tuple[str, ...]) -> str:
    """'path:line' as the user knows the file: from its package's top when it was
    installed (`optax/_src/numerics.py:106`), else relative to the first of the
    program's folders (`cwd`: the working folder, or it and the script's folder,
    `ProcessRun.folders`) that holds it; else unchanged."""
    path, sep, line = location.rpartition(":")
    if not sep:
        return location
    inside = installed_parts(path)
    if inside:
        return f"{os.sep.join(inside)}:{line}"
    for folder in (cwd,) if isinstance(cwd, str) else cwd:
        try:
            rel = os.path.relpath(path, folder)
        except ValueError:
            continue
        if folder and not rel.startswith(".."):
            return f"{rel}:{line}"
    return location
