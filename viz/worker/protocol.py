"""The worker protocol, typed: one request dataclass and one reply dataclass per
operation. On the wire a request is `{op, kwargs}` (its fields) and a reply is its
JSON (`frames` carries both); `Worker.ask(request)` sends one and decodes the answer
once, into `request.REPLY`, so the app, the CLI and demo mode read fields, not keys.

Every reply may be a failure (`ok` False, `error` an ErrorInfo): the worker's own
(timeout, crash, memory) come back in the same shape as the handler's. Nothing here
imports jax.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar

from viz.cache.events import BucketRow, CacheEvent, EntryRow, event_from_dict
from viz.errors import ErrorInfo, ErrorKind
from viz.plain import Plain
from viz.report import Report


class BadRequest(ValueError):
    """Fields an operation does not take, or a request for an unknown operation."""


# -- requests -------------------------------------------------------------------------
@dataclass
class Request(Plain):
    """An operation's arguments. `OP` names it on the wire, `REPLY` is what answers it,
    `DEMO` the fields a demo-mode request may set (any other must keep its default)."""

    OP: ClassVar[str] = ""
    REPLY: ClassVar[type[Reply]]
    DEMO: ClassVar[frozenset[str]] = frozenset()
    FUNCTION_FIELDS: ClassVar[tuple[str, ...]] = ()  # fields that name a function of the code

    @classmethod
    def from_wire(cls, kwargs: dict[str, Any]) -> Request:
        unknown = sorted(set(kwargs) - {f.name for f in fields(cls)})
        if unknown:
            raise BadRequest(f"`{cls.OP}` takes no {', '.join(unknown)}")
        try:
            return cls.from_dict(kwargs)
        except TypeError as exc:  # a required field is missing
            raise BadRequest(f"`{cls.OP}`: {exc}") from None

    def changed(self) -> set[str]:
        """The fields set to something other than their defaults."""
        return {f.name for f in fields(self) if not _is_default(f, getattr(self, f.name))}

    def specs(self) -> list[str]:
        """The argument specs the request will evaluate (demo mode checks each)."""
        spec = getattr(self, "args", None)
        return [spec] if isinstance(spec, str) else []

    def swept(self) -> list[int]:
        """The sizes a sweep will try (demo mode bounds them)."""
        return []

    def functions(self) -> list[str]:
        """The names of the code's functions the request uses."""
        return [n for n in (getattr(self, f) for f in self.FUNCTION_FIELDS) if n]


def _is_default(f: Any, value: Any) -> bool:
    if f.default is not MISSING:
        return value == f.default
    if f.default_factory is not MISSING:
        return value == f.default_factory()
    return False


@dataclass
class CodeRequest(Request):
    """The fields of every request that runs a user's code. `sample` names the
    built-in sample in demo mode, where the worker reads the code from that file."""

    code: str = ""
    function: str | None = None
    static: list[str] = field(default_factory=list)
    device: str = "cpu"
    sample: str | None = None

    FUNCTION_FIELDS: ClassVar[tuple[str, ...]] = ("function",)


@dataclass
class Ping(Request):
    warm: bool = False  # also run the pipeline once, so the first Analyze measures no start-up

    OP = "ping"
    DEMO = frozenset({"warm"})


@dataclass
class Analyze(CodeRequest):
    args: str = ""
    runs: int = 20
    donate: list[str] = field(default_factory=list)
    compiler_options: dict[str, Any] = field(default_factory=dict)
    x64: bool | None = None
    profile: bool = False
    mlir: bool = False
    memory_limit_bytes: int | None = None
    folder: str | None = None  # the program's folder, for its sibling imports

    OP = "analyze"
    DEMO = frozenset(
        {"sample", "code", "function", "static", "device", "args", "runs", "donate"}
        | {"compiler_options", "x64", "profile", "mlir"}
    )


@dataclass
class Passes(CodeRequest):
    """Op and fusion counts after every XLA pass, compiled with the analysed settings."""

    args: str = ""
    donate: list[str] = field(default_factory=list)
    compiler_options: dict[str, Any] = field(default_factory=dict)
    x64: bool | None = None

    OP = "passes"  # never in demo mode: it writes dumps


@dataclass
class CacheRequest(CodeRequest):
    """The cache lab's function: the worker keeps one real jitted function per owner."""

    owner: str = ""

    DEMO = frozenset({"sample", "code", "function", "static", "device", "owner"})


@dataclass
class CacheCalls(CacheRequest):
    """A sweep: many calls in one request, progress after each."""

    calls: list[str] = field(default_factory=list)
    placements: dict[str, str] | None = None
    fail_on_recompile: bool = False
    persistent_cache: bool = False
    route: bool = False  # through the precompiled buckets
    x64: bool | None = None
    folder: str | None = None

    OP = "cache_calls"
    DEMO = (
        CacheRequest.DEMO
        | {"calls", "placements", "fail_on_recompile", "route", "x64"}
        | {
            "persistent_cache"  # admitted, and turned off: it writes files
        }
    )

    def specs(self) -> list[str]:
        return list(self.calls)


@dataclass
class CacheCall(CacheRequest):
    """One call; the reply's `event` is what it did."""

    args: str = ""
    placements: dict[str, str] | None = None
    fail_on_recompile: bool = False
    persistent_cache: bool = False
    route: bool = False
    x64: bool | None = None
    folder: str | None = None

    OP = "cache_call"
    DEMO = CacheCalls.DEMO - {"calls"} | {"args"}


@dataclass
class CacheState(CacheRequest):
    clear: bool = False

    OP = "cache_state"
    DEMO = CacheRequest.DEMO | {"clear"}


@dataclass
class CachePrecompile(CacheRequest):
    """Compile the session's function ahead of time at each batch-size bucket."""

    args: str = ""
    param: str = ""
    sizes: list[int] = field(default_factory=list)

    OP = "cache_precompile"
    DEMO = CacheRequest.DEMO | {"args", "param", "sizes"}

    def swept(self) -> list[int]:
        return list(self.sizes)


@dataclass
class Placement(Request):
    """Where to put jit: the outer function, the inner one, or both."""

    code: str = ""
    outer: str = ""
    inner: str = ""
    args: str = ""
    sample: str | None = None

    OP = "placement"
    DEMO = frozenset({"sample", "code", "outer", "inner", "args"})
    FUNCTION_FIELDS = ("outer", "inner")


@dataclass
class Scaling(Request):
    """Compile time against program size: a step unrolled, scanned and fori-looped N times."""

    code: str = ""
    step: str = ""
    args: str = ""
    sizes: list[int] = field(default_factory=list)  # loop lengths N
    sample: str | None = None

    OP = "scaling"
    DEMO = frozenset({"sample", "code", "step", "args", "sizes"})
    FUNCTION_FIELDS = ("step",)

    def swept(self) -> list[int]:
        return list(self.sizes)


@dataclass
class ShapeSweep(Request):
    """Compile and run time as one axis of one argument grows."""

    code: str = ""
    function: str = ""
    static: list[str] = field(default_factory=list)
    sample: str | None = None
    args: str = ""
    param: str = ""
    axis: int = 0
    sizes: list[int] = field(default_factory=list)

    OP = "shape_sweep"
    DEMO = frozenset({"sample", "code", "function", "static", "args", "param", "axis", "sizes"})
    FUNCTION_FIELDS = ("function",)

    def swept(self) -> list[int]:
        return list(self.sizes)


@dataclass
class BucketCosts(Request):
    """Compile and run time of the function AOT-compiled at each batch-size bucket."""

    code: str = ""
    function: str = ""
    sample: str | None = None
    args: str = ""
    batch_arg: str = ""
    buckets: list[int] = field(default_factory=list)

    OP = "bucket_costs"
    DEMO = frozenset({"sample", "code", "function", "args", "batch_arg", "buckets"})
    FUNCTION_FIELDS = ("function",)

    def swept(self) -> list[int]:
        return list(self.buckets)


# -- replies ----------------------------------------------------------------------------
@dataclass
class Reply(Plain):
    """What every answer carries: whether it worked and, if not, why."""

    ok: bool = True
    error: ErrorInfo | None = None
    stdout: str = ""  # what the user's code printed while the worker ran it (sent if any)

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        if not data["stdout"]:
            del data["stdout"]
        return data

    @classmethod
    def failure(cls, error: ErrorInfo) -> Reply:
        return cls(ok=False, error=error)

    def answering(self, request: Request) -> Reply:
        """This reply, completed from the request it answers (see Analyzed)."""
        return self


@dataclass
class PingReply(Reply):
    jax_version: str = ""
    platform: str = ""
    devices: list[str] = field(default_factory=list)
    device_count: int = 0


@dataclass
class Analyzed(Reply):
    """An analysis: the report, and beside it what the user's code printed. On the
    wire it is the report's JSON (graph models included) plus `stdout`."""

    report: Report = field(default_factory=Report)

    def to_dict(self) -> dict[str, Any]:
        data = self.report.to_dict(include_models=True)
        return {**data, "stdout": self.stdout} if self.stdout else data

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Analyzed:
        data = dict(data or {})
        stdout = data.pop("stdout", "") or ""
        report = Report.from_dict(data)
        return cls(ok=report.ok, error=report.error, stdout=stdout, report=report)

    @classmethod
    def failure(cls, error: ErrorInfo) -> Analyzed:
        return cls(ok=False, error=error, report=Report().fail(error))

    def answering(self, request: Request) -> Analyzed:
        """A failure the worker itself saw (a timeout, a crash) has a bare report: it
        still names what was asked, as the history and the result list show it."""
        r = self.report
        if isinstance(request, Analyze) and not r.function:
            r.function, r.args, r.static = request.function or "", request.args, request.static
            r.device, r.donate = request.device, request.donate
            r.compiler_options = dict(request.compiler_options)
        return self


@dataclass
class PassStep(Plain):
    step: int
    pipeline: str
    pass_: str
    op_count: int
    fusion_count: int

    # `pass` is a Python keyword: the JSON key is `pass`, the field `pass_`
    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        data["pass"] = data.pop("pass_")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> PassStep | None:
        if data is None:
            return None
        data = dict(data)
        data["pass_"] = data.pop("pass", "")
        return super().from_dict(data)


@dataclass
class PassesReply(Reply):
    steps: list[PassStep] = field(default_factory=list)


@dataclass
class CacheReply(Reply):
    """The cache lab's state after a request: its rows, every event so far, and for
    calls the new events (`event`: the one call of `cache_call`)."""

    table: list[EntryRow] = field(default_factory=list)
    events: list[CacheEvent] = field(default_factory=list)
    cache_size: int = 0
    buckets: list[BucketRow] = field(default_factory=list)
    new: list[CacheEvent] = field(default_factory=list)
    event: CacheEvent | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> CacheReply:
        data = dict(data or {})
        events = {k: data.pop(k, None) or [] for k in ("events", "new")}
        event = data.pop("event", None)
        reply = super().from_dict(data)
        reply.events = [event_from_dict(e) for e in events["events"]]
        reply.new = [event_from_dict(e) for e in events["new"]]
        reply.event = event_from_dict(event) if event else None
        return reply


@dataclass
class PlacementRow(Plain):
    strategy: str
    compile_s: float
    first_call_s: float
    run_s: float
    executables: int
    kernels_per_call: int


@dataclass
class PlacementReply(Reply):
    rows: list[PlacementRow] = field(default_factory=list)
    outer: str = ""
    inner: str = ""
    recommendation: str = ""


@dataclass
class StageTimes(Plain):
    """One compile of a lesson's program, stage by stage, and its size."""

    trace_s: float
    lower_s: float
    compile_s: float
    total_s: float
    eqns: int
    stablehlo_lines: int
    run_s: float


@dataclass
class ScalingRow(StageTimes):
    n: int = 0
    variant: str = ""  # unrolled | scan | fori_loop


@dataclass
class ScalingReply(Reply):
    rows: list[ScalingRow] = field(default_factory=list)
    exponents: dict[str, float | None] = field(default_factory=dict)  # by variant


@dataclass
class ShapeRow(StageTimes):
    size: int = 0
    spec: str = ""
    eager_s: float = 0.0
    break_even_calls: float | None = None
    rule_of_thumb: bool = False


@dataclass
class ShapeSweepReply(Reply):
    rows: list[ShapeRow] = field(default_factory=list)


@dataclass
class BucketCostRow(Plain):
    bucket: int
    compile_s: float
    run_s: float


@dataclass
class BucketCostsReply(Reply):
    rows: list[BucketCostRow] = field(default_factory=list)


for _request, _reply in (
    (Ping, PingReply),
    (Analyze, Analyzed),
    (Passes, PassesReply),
    (CacheCalls, CacheReply),
    (CacheCall, CacheReply),
    (CacheState, CacheReply),
    (CachePrecompile, CacheReply),
    (Placement, PlacementReply),
    (Scaling, ScalingReply),
    (ShapeSweep, ShapeSweepReply),
    (BucketCosts, BucketCostsReply),
):
    _request.REPLY = _reply

REQUESTS: dict[str, type[Request]] = {
    r.OP: r
    for r in (
        Ping,
        Analyze,
        Passes,
        CacheCalls,
        CacheCall,
        CacheState,
        CachePrecompile,
        Placement,
        Scaling,
        ShapeSweep,
        BucketCosts,
    )
}


def decode_request(op: str, kwargs: dict[str, Any]) -> Request:
    """The typed request of a wire message; BadRequest for anything else."""
    kind = REQUESTS.get(op)
    if kind is None:
        raise BadRequest(f"unknown op {op!r}")
    return kind.from_wire(kwargs)


def decode_reply(request: Request, payload: dict[str, Any]) -> Reply:
    """The reply to `request` from its JSON (failures included)."""
    try:
        return request.REPLY.from_dict(payload).answering(request)
    except (TypeError, KeyError, ValueError) as exc:
        return request.REPLY.failure(
            ErrorInfo(
                ErrorKind.INTERNAL_ERROR,
                f"The worker's answer to `{request.OP}` did not decode: {exc}",
                "this is a jitscope bug; please report it",
                stage="worker",
            )
        )
