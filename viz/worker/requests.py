"""The worker's requests: one dataclass per operation, its fields the operation's
arguments (`viz.worker.protocol` pairs each with its reply). No jax."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar

from viz.plain import Plain


class BadRequest(ValueError):
    """Fields an operation does not take, or a request for an unknown operation."""


# -- requests -------------------------------------------------------------------------
@dataclass
class Request(Plain):
    """An operation's arguments. `OP` names it on the wire, `REPLY` is what answers it,
    `DEMO` the fields a demo-mode request may set (any other must keep its default)."""

    OP: ClassVar[str] = ""
    REPLY: ClassVar[type]  # its viz.worker.replies type, paired in viz.worker.protocol
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
        return [] if spec is None else [spec]  # not text: check_spec refuses it

    def swept(self) -> list[int]:
        """The sizes a sweep will try (demo mode bounds them)."""
        return []

    def functions(self) -> list[str]:
        """The names of the code's functions the request uses."""
        return [n for n in (getattr(self, f) for f in self.FUNCTION_FIELDS) if n is not None]


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
    mesh: str = ""  # `data=4, model=2`: the device mesh `@ P(...)` splits over
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
class Passes(CodeRequest):
    """Op and fusion counts after every XLA pass, compiled with the analysed settings."""

    args: str = ""
    donate: list[str] = field(default_factory=list)
    compiler_options: dict[str, Any] = field(default_factory=dict)
    x64: bool | None = None
    mesh: str = ""  # the analysed run's mesh: its `@ P(...)` specs need it
    folder: str | None = None  # the program's folder, for its sibling imports

    OP = "passes"  # never in demo mode: it writes dumps


@dataclass
class CompileProfile(CodeRequest):
    """Where the compile time went: trace, lower and compile once more on cleared caches,
    with the analysed run's settings (`viz.compile_profile`). It clears JAX's caches:
    the app sends it to the lessons worker."""

    args: str = ""
    donate: list[str] = field(default_factory=list)
    compiler_options: dict[str, Any] = field(default_factory=dict)
    x64: bool | None = None
    folder: str | None = None
    mesh: str = ""

    OP = "compile_profile"
    DEMO = frozenset(
        {"sample", "code", "function", "static", "device", "args", "donate"}
        | {"compiler_options", "x64", "mesh"}
    )


@dataclass
class CacheRequest(CodeRequest):
    """The cache lab's function: the worker keeps one real jitted function per owner."""

    owner: str = ""

    DEMO = frozenset({"sample", "code", "function", "static", "device", "owner"})


@dataclass
class CallOptions(CacheRequest):
    """How the cache lab calls the function (Call and Sweep alike)."""

    placements: dict[str, str] | None = None
    fail_on_recompile: bool = False
    persistent_cache: bool = False  # demo mode admits it, and turns it off: it writes files
    route: bool = False  # through the precompiled buckets
    x64: bool | None = None
    folder: str | None = None
    mesh: str = ""  # the mesh a `P(...)` placement splits over (default: x over all devices)

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
    """A sweep: many calls in one request, progress after each."""

    calls: list[str] = field(default_factory=list)

    OP = "cache_calls"
    DEMO = CallOptions.DEMO | {"calls"}

    def specs(self) -> list[str]:
        return list(self.calls)


@dataclass
class CacheCall(CallOptions):
    """One call; the reply's `event` is what it did."""

    args: str = ""

    OP = "cache_call"
    DEMO = CallOptions.DEMO | {"args"}


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
