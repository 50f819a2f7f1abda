"""The worker's requests: one dataclass per operation, its fields the operation's
arguments, its reply type its parameter: `Ping(Request["viz.worker.replies.PingReply"])`
is answered by a `PingReply`, so `Worker.ask(Ping())` is a `PingReply` to a type checker
too (`viz.worker.protocol` reads the same parameter as `REPLY`). No jax."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, TypeVar

from viz.plain import FLAT, Plain, flat, wire_names
from viz.settings import Settings

if TYPE_CHECKING:  # the replies import the requests: here they are named by their full
    import viz  # path, never imported (an import circle, even for the type checker)

ReplyT = TypeVar("ReplyT", bound="viz.worker.replies.Reply")


class BadRequest(ValueError):
    """Fields an operation does not take, or a request for an unknown operation."""


# -- requests -------------------------------------------------------------------------
@dataclass
class Request(Plain, Generic[ReplyT]):
    """An operation's arguments, answered by a `ReplyT`. `OP` names it on the wire (the
    one place its name is written), `REPLY` is `ReplyT` at run time (set by
    `viz.worker.protocol`), `DEMO` the fields a demo-mode request may set (any other
    must keep its default)."""

    OP: ClassVar[str] = ""
    REPLY: ClassVar[type]  # a `viz.worker.replies.Reply`: ReplyT at run time
    DEMO: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def from_wire(cls, kwargs: dict[str, Any]) -> Self:
        unknown = sorted(set(kwargs) - wire_names(cls))
        if unknown:
            raise BadRequest(f"`{cls.OP}` takes no {', '.join(unknown)}")
        try:
            return cls.from_dict(kwargs)
        except TypeError as exc:  # a required field is missing
            raise BadRequest(f"`{cls.OP}`: {exc}") from None

    def changed(self) -> set[str]:
        """The fields set to something other than their defaults, by their names on
        the wire (a flat field's by its own: `function`, not `settings`)."""
        return _changed(self)

    def specs(self) -> list[str]:
        """The argument specs the request will evaluate (demo mode checks each)."""
        return []

    def sample_name(self) -> str | None:
        """The built-in sample it names: in demo mode its code is read from that file."""
        return None

    def running(self, code: str) -> Self:
        """This request with `code` as the code it runs (demo mode: the sample's)."""
        return self

    def options(self) -> dict[str, Any]:
        """The XLA compiler options it compiles with (demo mode checks each)."""
        return {}

    def naming(self, sample: str | None) -> Self:
        """This request naming the built-in sample `sample` (see `sample_name`)."""
        return self

    def swept(self) -> list[int]:
        """The sizes a sweep will try (demo mode bounds them)."""
        return []

    def functions(self) -> list[str]:
        """The names of the code's functions the request uses."""
        return []


def _changed(data: Any) -> set[str]:
    changed = set()
    for f in fields(data):
        value = getattr(data, f.name)
        if FLAT in f.metadata:
            changed |= _changed(value)
        elif not _is_default(f, value):
            changed.add(f.name)
    return changed


def _is_default(f: Any, value: Any) -> bool:
    if f.default is not MISSING:
        return value == f.default
    if f.default_factory is not MISSING:
        return value == f.default_factory()
    return False


@dataclass
class CodeRequest(Request[ReplyT]):
    """A request that runs a user's code: what it runs and how (`viz.settings`). On
    the wire the settings' fields are the request's own (`code`, `function`, …).
    `settings.sample` names the built-in sample in demo mode, where the worker reads
    the code from that file."""

    settings: Settings = field(default_factory=Settings, metadata=flat())

    def functions(self) -> list[str]:
        function = self.settings.function
        return [] if function is None else [function]

    def specs(self) -> list[str]:
        return [self.settings.args]

    def sample_name(self) -> str | None:
        return self.settings.sample

    def running(self, code: str) -> Self:
        return self.with_settings(code=code)

    def naming(self, sample: str | None) -> Self:
        return self.with_settings(sample=sample)

    def with_settings(self, **changes: Any) -> Self:
        """This request with some of its settings changed (a variant, another spec)."""
        return replace(self, settings=replace(self.settings, **changes))

    def options(self) -> dict[str, Any]:
        return self.settings.compiler_options


@dataclass
class Ping(Request["viz.worker.replies.PingReply"]):
    warm: bool = False  # also run the pipeline once, so the first Analyze measures no start-up

    OP = "ping"
    DEMO = frozenset({"warm"})


@dataclass
class Analyze(CodeRequest["viz.worker.replies.Analyzed"]):
    runs: int = 20
    profile: bool = False
    mlir: bool = False
    # also where the compile time went; it clears JAX's caches, so the app asks the lessons
    # worker (CompileProfile) and only the CLI's worker of its own gets this
    compile_profile: bool = False
    stream: bool = False  # a Progress frame as each stage starts, with what is known so far

    OP = "analyze"
    DEMO = frozenset(
        {"sample", "code", "function", "static", "device", "args", "runs", "donate"}
        | {"compiler_options", "x64", "profile", "mlir", "mesh", "stream"}
    )


@dataclass
class Passes(CodeRequest["viz.worker.replies.PassesReply"]):
    """Op and fusion counts after every XLA pass, compiled with the analysed settings."""

    OP = "passes"  # never in demo mode: it writes dumps


@dataclass
class CompileProfile(CodeRequest["viz.worker.replies.CompileProfiled"]):
    """Where the compile time went: trace, lower and compile once more on cleared caches,
    with the analysed run's settings (`viz.compile_profile`). It clears JAX's caches:
    the app sends it to the lessons worker."""

    OP = "compile_profile"
    DEMO = frozenset(
        {"sample", "code", "function", "static", "device", "args", "donate"}
        | {"compiler_options", "x64", "mesh"}
    )


@dataclass
class CacheRequest(CodeRequest["viz.worker.replies.CacheReply"]):
    """The cache lab's function: the worker keeps one real jitted function per owner
    (its settings' code, function, static arguments and device)."""

    owner: str = ""

    DEMO = frozenset({"sample", "code", "function", "static", "device", "owner"})


@dataclass
class CallOptions(CacheRequest):
    """How the cache lab calls the function (Call and Sweep alike): its settings' x64,
    and the mesh a `P(...)` placement splits over (default: x over all devices)."""

    placements: dict[str, str] | None = None
    fail_on_recompile: bool = False
    persistent_cache: bool = False  # demo mode admits it, and turns it off: it writes files
    route: bool = False  # through the precompiled buckets

    DEMO = CacheRequest.DEMO | {
        "mesh",
        "placements",
        "fail_on_recompile",
        "persistent_cache",
        "route",
        "x64",
    }


@dataclass
class CacheCalls(CallOptions):
    """A sweep: many calls in one request, progress after each; `fresh`: the cache
    emptied first (the one-click story starts from a first compile)."""

    calls: list[str] = field(default_factory=list)
    fresh: bool = False

    OP = "cache_calls"
    DEMO = CallOptions.DEMO | {"calls", "fresh"}

    def specs(self) -> list[str]:
        return list(self.calls)


@dataclass
class CacheCall(CallOptions):
    """One call, on its settings' args; the reply's `event` is what it did."""

    OP = "cache_call"
    DEMO = CallOptions.DEMO | {"args"}


@dataclass
class CacheState(CacheRequest):
    clear: bool = False

    OP = "cache_state"
    DEMO = CacheRequest.DEMO | {"clear"}


@dataclass
class CachePrecompile(CacheRequest):
    """Compile the session's function ahead of time at each batch-size bucket (its
    settings' args, `param` resized to each)."""

    param: str = ""
    sizes: list[int] = field(default_factory=list)

    OP = "cache_precompile"
    DEMO = CacheRequest.DEMO | {"args", "param", "sizes"}

    def swept(self) -> list[int]:
        return list(self.sizes)


@dataclass
class Placement(CodeRequest["viz.worker.replies.PlacementReply"]):
    """Where to put jit: the outer function, the inner one, or both (its settings' code,
    and args: the outer function's)."""

    outer: str = ""
    inner: str = ""

    OP = "placement"
    DEMO = frozenset({"sample", "code", "outer", "inner", "args"})

    def functions(self) -> list[str]:
        return [self.outer, self.inner]


@dataclass
class Scaling(CodeRequest["viz.worker.replies.ScalingReply"]):
    """Compile time against program size: its settings' function (the step) unrolled,
    scanned and fori-looped N times."""

    sizes: list[int] = field(default_factory=list)  # loop lengths N

    OP = "scaling"
    DEMO = frozenset({"sample", "code", "function", "args", "sizes"})

    def swept(self) -> list[int]:
        return list(self.sizes)


@dataclass
class ShapeSweep(CodeRequest["viz.worker.replies.ShapeSweepReply"]):
    """Compile and run time as one axis of one argument grows."""

    param: str = ""
    axis: int = 0
    sizes: list[int] = field(default_factory=list)

    OP = "shape_sweep"
    DEMO = frozenset({"sample", "code", "function", "static", "args", "param", "axis", "sizes"})

    def swept(self) -> list[int]:
        return list(self.sizes)


@dataclass
class BucketCosts(CodeRequest["viz.worker.replies.BucketCostsReply"]):
    """Compile and run time of the function AOT-compiled at each batch-size bucket."""

    batch_arg: str = ""
    buckets: list[int] = field(default_factory=list)

    OP = "bucket_costs"
    DEMO = frozenset({"sample", "code", "function", "args", "batch_arg", "buckets"})

    def swept(self) -> list[int]:
        return list(self.buckets)
