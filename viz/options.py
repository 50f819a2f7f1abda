"""The XLA compiler options jitscope offers by name, each with what it does.

Passed per compile through `Lowered.compile(compiler_options=...)`; free-form
options are allowed too (outside demo mode, which offers only these, with these
values), and an option XLA does not know comes back as a `compile_error` naming
it. Nothing here writes files: dump options are never offered. No jax here.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from viz.platforms import cpu


@dataclass(frozen=True)
class CompilerOption:
    key: str
    values: tuple[Any, ...]  # what the app offers (the first: the one worth trying)
    explanation: str


COMMON_OPTIONS = (
    CompilerOption(
        "xla_disable_hlo_passes",
        ("fusion", "fusion,cse", "algsimp"),
        "HLO passes to skip (comma-separated). `fusion`: every op becomes its own kernel.",
    ),
    *(CompilerOption(*option) for option in cpu.COMPILER_OPTIONS),
    CompilerOption(
        "xla_backend_optimization_level",
        (0, 1, 2, 3),
        "Backend (LLVM) optimization level: 0 compiles fastest, 3 (default) runs fastest.",
    ),
    CompilerOption(
        "xla_llvm_disable_expensive_passes",
        (True, False),
        "Skip LLVM's costliest passes: shorter compiles, possibly slower code.",
    ),
    CompilerOption(*cpu.SCHEDULER_OPTION),
)
OPTIONS_BY_KEY = {option.key: option for option in COMMON_OPTIONS}
FUSION_OFF = {"xla_disable_hlo_passes": "fusion"}
MEMORY_SCHEDULE = cpu.MEMORY_SCHEDULE  # the CPU schedule that favours memory


def parse_value(text: str) -> Any:
    """A Python literal (True, 3, 0.5), else the text itself."""
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        return text.strip()


def parse_option(text: str) -> tuple[str, Any]:
    """'KEY=VALUE' → (key, value); ValueError without a key and an '='."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), parse_value(value)


def parse_options(text: str) -> dict[str, Any]:
    """One KEY=VALUE per line (blank lines and # comments skipped)."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return dict(parse_option(line) for line in lines if line)


def offered(options: dict[str, Any]) -> bool:
    """Whether every option is one of COMMON_OPTIONS with one of its offered values."""
    return all(
        key in OPTIONS_BY_KEY and value in OPTIONS_BY_KEY[key].values
        for key, value in options.items()
    )
