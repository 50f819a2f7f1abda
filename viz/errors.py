"""Errors are results: every failure becomes an `ErrorInfo` a user can act on.

`classify` turns an exception raised while loading, tracing, lowering, compiling
or running the user's function into a kind, a short message, the concrete fix
and the line of the user's code it came from. The worker adds the kinds only it
can see (`timeout`, `memory`, `worker_crash`).
"""

from __future__ import annotations

import itertools
import re
import traceback
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from viz.plain import Plain
from viz.units import a_or_an, nbytes
from viz.where import user_where


class ErrorKind(StrEnum):
    """Every kind of failure a result can carry (docs/guide.md lists them with their fixes)."""

    SYNTAX_ERROR = "syntax_error"
    IMPORT_ERROR = "import_error"
    FUNCTION_NOT_FOUND = "function_not_found"
    DEVICE_UNAVAILABLE = "device_unavailable"
    SPEC_ERROR = "spec_error"
    STATIC_ARG = "static_arg"
    CONTROL_FLOW = "control_flow"
    VALUE_DEPENDENT_SHAPE = "value_dependent_shape"
    SHAPE_MISMATCH = "shape_mismatch"
    COMPILE_ERROR = "compile_error"
    OUT_OF_MEMORY = "out_of_memory"  # XLA refused to compile: the program does not fit
    RUNTIME_ERROR = "runtime_error"
    USER_EXCEPTION = "user_exception"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    WORKER_CRASH = "worker_crash"
    CANCELLED = "cancelled"  # the user stopped a measurement
    DEMO_REFUSED = "demo_refused"  # demo mode runs the built-in samples only
    BAD_REQUEST = "bad_request"  # an unknown worker op: a jitscope bug
    PROFILER_UNAVAILABLE = "profiler_unavailable"  # jax.profiler would not start (a profile)
    INTERNAL_ERROR = "internal_error"  # a bug in jitscope itself, reported instead of crashing


KINDS = tuple(kind.value for kind in ErrorKind)


@dataclass
class ErrorInfo(Plain):
    """One failure: its kind (checked), a message, the fix and the user's line."""

    kind: ErrorKind
    message: str
    hint: str = ""
    line: int | None = None
    column: int | None = None
    stage: str = ""  # load | spec | trace | lower | compile | run | worker
    detail: str = ""  # the original exception, for the curious

    def __post_init__(self) -> None:
        self.kind = ErrorKind(self.kind)  # ValueError for a kind nobody documented

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kind": self.kind.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ErrorInfo | None:
        if data is None:
            return None
        known = set(cls.__dataclass_fields__)
        return cls(**{"message": "", **{k: v for k, v in data.items() if k in known}})


class UserCodeError(Exception):
    """An error that is already classified (raised at the edge where input arrives);
    `seconds` is how long the failing stage ran, when a stage failed."""

    def __init__(self, info: ErrorInfo, seconds: float | None = None):
        super().__init__(info.message)
        self.info = info
        self.seconds = seconds


def _user_exit(exc: BaseException, line: int | None, stage: str, detail: str) -> ErrorInfo:
    """sys.exit() or KeyboardInterrupt in the user's code, said as what the code did."""
    where = f" at line {line}" if line else ""
    if isinstance(exc, SystemExit):
        what = f"Your code called sys.exit({exc.code!r}){where}"
        hint = (
            "jitscope calls your function to trace, compile and time it: remove the "
            "sys.exit() call, or keep script code under `if __name__ == '__main__':`"
        )
    else:
        what = f"Your code raised KeyboardInterrupt{where}"
        hint = "raise an ordinary exception instead (KeyboardInterrupt stops a program)"
    return ErrorInfo(
        "user_exception",
        f"{what} while jitscope ran it ({stage}).",
        hint,
        line,
        None,
        stage,
        detail,
    )


def user_line(exc: BaseException, user_file: str | None) -> int | None:
    """The deepest line of the user's own file in the exception's traceback."""
    if not user_file:
        return None
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == user_file:
            line = lineno
    return line


def _argument(message: str) -> str | None:
    """The parameter JAX says a concrete value depended on, if it says."""
    found = re.search(r"depends on the value of the argument[s]? '?(\w+)", message)
    return found.group(1) if found else None


TRACEBACK = "Traceback (most recent call last):"


def _first_line(message: str) -> str:
    """The message's headline. A first line that ends in a colon announces what follows
    (JAX's "The error was:", a callback's "Traceback (most recent call last):"); the
    exception that a printed traceback ends with ("ValueError: ...", followed or not by
    more text: equinox's advice after its error_if's message), else the last line when it
    is an exception, completes the headline."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    if not lines:
        return message
    first = lines[0]
    raised = _raised_in(message)
    if raised is None and len(lines) > 1 and re.match(r"[\w.]+: ", lines[-1]):
        raised = lines[-1]
    if first.endswith(":") and raised:
        return f"{first.removesuffix(TRACEBACK).rstrip()} {raised}"
    return first


def _raised_in(message: str) -> str | None:
    """The exception a traceback printed in `message` ends with, its first paragraph in
    one line (equinox's run over lines): what follows the traceback's indented frames;
    None without a traceback."""
    _, found, after = message.rpartition(TRACEBACK)  # a chained one's: the last raised
    if not found:
        return None
    lines = after.splitlines()[1:]
    start = next((i for i, ln in enumerate(lines) if ln.strip() and not ln[0].isspace()), None)
    if start is None:
        return None
    paragraph = itertools.takewhile(str.strip, lines[start:])
    return " ".join(ln.strip() for ln in paragraph)


def _line_in_text(message: str, user_file: str | None) -> int | None:
    """The last line of the user's file named in a traceback printed into `message`
    (exceptions raised in callbacks reach us as text inside XLA's error)."""
    if not user_file:
        return None
    found = re.findall(rf'File "{re.escape(user_file)}", line (\d+)', message)
    return int(found[-1]) if found else None


def _tracer_error(exc: BaseException, message: str) -> tuple[str, str, str]:
    import jax

    arg = _argument(message)
    static_fix = f"mark `{arg}` static (static_argnames=['{arg}'])" if arg else "mark it static"
    if isinstance(exc, jax.errors.NonConcreteBooleanIndexError):
        return (
            "value_dependent_shape",
            "Boolean-mask indexing makes the output shape depend on the data.",
            "use jnp.where(mask, x, 0) to keep the shape, or pass size= to jnp.nonzero",
        )
    if "size argument" in message or "nonzero" in message or "jnp.unique" in message:
        return (
            "value_dependent_shape",
            "The output size depends on the data, which jit cannot know at trace time.",
            "pass size= (and fill_value=) so the output has a fixed length",
        )
    if isinstance(exc, jax.errors.TracerBoolConversionError):
        return (
            "control_flow",
            "Python `if`/`while` on a traced value: jit cannot know which branch to take.",
            f"use jax.lax.cond or jnp.where for data-dependent branches, or {static_fix}",
        )
    if isinstance(exc, jax.errors.TracerIntegerConversionError) or "arange" in message:
        return (
            "value_dependent_shape",
            "A traced value is used where Python needs a concrete integer (a shape, "
            "a range, a loop count).",
            f"{static_fix} if it changes rarely, or use lax.fori_loop / a fixed size with a mask",
        )
    return (
        "control_flow",
        "A traced value was used where a concrete Python value is needed.",
        f"{static_fix}, or express the logic with jax.lax (cond, while_loop, fori_loop)",
    )


# jit's refusal of an argument leaf that is no array (a function, a custom_jvp, a string
# in a model's pytree): "Error interpreting argument to <fn> as an abstract array. The
# problematic value is of type <class '...'> and was passed to the function at path p."
_NOT_AN_ARRAY_TYPE = re.compile(
    r"as an abstract array\. The problematic value is of type <class '([\w.]+)'>"
)
_NOT_AN_ARRAY_PATH = re.compile(r"passed to the function at path (\S+?)\.?$", re.M)


def _not_an_array(message: str) -> tuple[str, str] | None:
    """What jit says is not an array in a dynamic argument, and the headline and fix
    that name it; None when the message is not that refusal."""
    found = _NOT_AN_ARRAY_TYPE.search(message)
    if not found:
        return None
    kind = found.group(1).rsplit(".", 1)[-1]
    path = _NOT_AN_ARRAY_PATH.search(message)
    leaf = path.group(1) if path else "an argument leaf"
    param = re.match(r"[A-Za-z_]\w*", leaf) if path else None
    what = f"`{param.group(0)}`" if param else "the argument"
    return (
        f"{'`' + leaf + '`' if path else 'An argument leaf'} is {a_or_an(kind)}, not an array: "
        "jit traces every leaf of a dynamic argument as an array",
        f"jax.jit takes arrays only: mark {what} static if it holds no arrays, else jit "
        "the function as equinox does, with @eqx.filter_jit (jitscope then keeps what is "
        "not an array static, as filter_jit does), or analyze a function of its arrays "
        "(eqx.partition splits them off, eqx.combine joins them inside)",
    )


# XLA's refusal to compile a program that does not fit (the TPU runtime: "RESOURCE_EXHAUSTED:
# Ran out of memory in memory space hbm …", "… exceeds available HBM (15.75G)")
_OUT_OF_MEMORY = re.compile(r"RESOURCE_EXHAUSTED.*(out of memory|exceeds available)", re.I | re.S)
OUT_OF_MEMORY_FIX = (
    "lower the peak: donate the arguments the program no longer needs (donate_argnums), "
    "recompute with jax.checkpoint instead of keeping activations, use a smaller batch, "
    "or shard the arrays over more chips"
)


def out_of_memory(message: str) -> bool:
    """Whether XLA's error says the program does not fit in the device's memory."""
    return _OUT_OF_MEMORY.search(message) is not None


_AVAILABLE = re.compile(r"exceeds available \w+ \(([\d.]+)([KMGT])i?B?\)")
# what XLA says the program needs: `the total memory required for HLO temporaries
# (30.52G)`, or `Used 20.00G of 15.75G hbm` (everything)
_REQUIRED = re.compile(r"memory required for ([\w ]+?) \(([\d.]+)([KMGT])i?B?\)")
_USED = re.compile(r"Used ([\d.]+)([KMGT])i?B? of")
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}  # XLA's G is a GiB


def limit_in(message: str) -> int | None:
    """The device's memory as XLA's refusal gives it: `exceeds available HBM (15.75G)`."""
    found = _AVAILABLE.search(message)
    return _bytes(found.group(1), found.group(2)) if found else None


def required_in(message: str) -> tuple[int, str] | None:
    """What XLA's refusal says the program needs, and what that counts: `(30.52G)` for
    `HLO temporaries`, or `Used 20.00G of …` for everything (''); None: it says not."""
    found = _REQUIRED.search(message)
    if found:
        return _bytes(found.group(2), found.group(3)), found.group(1)
    found = _USED.search(message)
    return (_bytes(found.group(1), found.group(2)), "") if found else None


def _bytes(number: str, unit: str) -> int:
    return round(float(number) * _UNITS[unit])


_ALLOCATING = re.compile(r"allocating (\d+) bytes")


def eager_failure(exc: BaseException, user_file: str | None) -> str:
    """The warning of a run without jit that failed: jit's timings stand (eager is what
    they are compared with). Out of memory says how much one array asked for and where:
    op by op each intermediate is made whole, which jit's compiled program need not do
    (XLA's raw "Out of memory allocating 102400000000 bytes" said neither)."""
    line = user_line(exc, user_file)
    where = f" at {user_where(user_file, line)}" if user_file and line else ""
    message = str(exc)
    if not out_of_memory(message):
        return f"eager run failed{where}: {type(exc).__name__}: {message}"
    asked = _ALLOCATING.search(message)
    size = f" ({nbytes(int(asked.group(1)))} for one array)" if asked else ""
    return (
        f"eager run failed: out of memory{size}{where}. Op by op, each intermediate is "
        "made whole, which jit's compiled program need not do: the timings compare jit alone"
    )


RUNTIME_FIX = "check for out-of-memory or invalid inputs; the full message is below"
# an exception of Python code that the compiled program called: a runtime check (equinox's
# error_if, which diffrax, optimistix and lineax raise through, checkify) or a callback
CALLBACK_FIX = (
    "Python code that the program calls as it runs raised this (a check such as "
    "eqx.error_if or checkify, or a jax.pure_callback), on the inputs made from the args "
    "spec (normal random floats, small ints): write inputs it accepts as expressions in "
    "the spec, e.g. jnp.ones(3), or fix what the check found; the full message is below"
)

# What user code may raise that is no Exception: uncaught, either would end the worker
# and read as a crash. Every place that runs user code catches them with Exception.
USER_EXITS = (SystemExit, KeyboardInterrupt)


def classify(exc: BaseException, stage: str, user_file: str | None = None) -> ErrorInfo:
    """Explain an exception raised in `stage` of the pipeline."""
    import jax

    if isinstance(exc, UserCodeError):
        return exc.info
    message = str(exc)
    line = user_line(exc, user_file)
    detail = f"{type(exc).__name__}: {message}"
    if isinstance(exc, USER_EXITS):
        return _user_exit(exc, line, stage, detail)
    if isinstance(
        exc, jax.errors.ConcretizationTypeError | jax.errors.NonConcreteBooleanIndexError
    ):
        kind, what, hint = _tracer_error(exc, message)
        return ErrorInfo(kind, f"{what} ({_first_line(message)})", hint, line, None, stage, detail)
    if isinstance(exc, IndexError) and "static" in message:
        return ErrorInfo(
            "value_dependent_shape",
            f"Slicing with a traced bound gives a data-dependent shape ({_first_line(message)})",
            "use lax.dynamic_slice with a fixed slice size, or pad to a fixed length and mask",
            line,
            None,
            stage,
            detail,
        )
    not_an_array = _not_an_array(message) if stage == "trace" else None
    if not_an_array:
        return ErrorInfo("static_arg", *not_an_array, line, None, stage, detail)
    if (
        stage in ("trace", "lower")
        and isinstance(exc, TypeError | ValueError)
        and ("shape" in message or "dtype" in message or "dimension" in message)
    ):
        return ErrorInfo(
            "shape_mismatch",
            _first_line(message),
            "check the shapes and dtypes in the args spec against what the function expects",
            line,
            None,
            stage,
            detail,
        )
    if stage in ("trace", "lower") and "hashable" in message:
        return ErrorInfo(
            "static_arg",
            _first_line(message),
            "static arguments must be hashable (tuples, not lists or arrays); "
            "pass arrays as dynamic arguments",
            line,
            None,
            stage,
            detail,
        )
    if stage == "compile" and out_of_memory(message):
        return ErrorInfo(
            "out_of_memory",
            f"The program does not fit in the device's memory: {_first_line(message)}",
            OUT_OF_MEMORY_FIX,
            line,
            None,
            stage,
            detail,
        )
    if stage == "compile":
        return ErrorInfo(
            "compile_error",
            f"XLA could not compile the program: {_first_line(message)}",
            "simplify the failing op or try another device; the full message is below",
            line,
            None,
            stage,
            detail,
        )
    if stage == "run" and type(exc).__name__ in ("XlaRuntimeError", "JaxRuntimeError"):
        return ErrorInfo(
            "runtime_error",
            f"The compiled program failed while running: {_first_line(message)}",
            CALLBACK_FIX if TRACEBACK in message else RUNTIME_FIX,
            line or _line_in_text(message, user_file),
            None,
            stage,
            detail,
        )
    where = f" at line {line}" if line else ""
    return ErrorInfo(
        "user_exception",
        f"{type(exc).__name__}{where}: {_first_line(message)}",
        "this exception was raised by your code; fix it there",
        line,
        None,
        stage,
        detail,
    )
