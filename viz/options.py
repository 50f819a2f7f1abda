"""The XLA compiler options jitscope offers by name, each with what it does.

Passed per compile through `Lowered.compile(compiler_options=...)`; free-form
options are allowed too (outside demo mode), and an option XLA does not know
comes back as a `compile_error` naming it. Nothing here writes files: dump
options are not offered.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CompilerOption:
    key: str
    example: str  # a value worth trying, as text (parsed like the CLI's --option)
    explanation: str


COMMON_OPTIONS = (
    CompilerOption(
        "xla_disable_hlo_passes",
        "fusion",
        "Comma-separated HLO passes to skip. `fusion` shows what the program costs when "
        "every op is its own kernel.",
    ),
    CompilerOption(
        "xla_cpu_enable_fast_math",
        "True",
        "CPU: let LLVM reassociate and approximate floating point (faster, less exact).",
    ),
    CompilerOption(
        "xla_cpu_fast_math_honor_nans",
        "False",
        "CPU fast math: assume no NaNs appear.",
    ),
    CompilerOption(
        "xla_cpu_fast_math_honor_infs",
        "False",
        "CPU fast math: assume no infinities appear.",
    ),
    CompilerOption(
        "xla_backend_optimization_level",
        "0",
        "Backend (LLVM) optimization level: 0 compiles fastest, 3 (default) runs fastest.",
    ),
    CompilerOption(
        "xla_llvm_disable_expensive_passes",
        "True",
        "Skip LLVM's costliest passes: shorter compiles, possibly slower code.",
    ),
)
OPTIONS_BY_KEY = {option.key: option for option in COMMON_OPTIONS}
