"""Journal lines → a `Recording`: exact totals per function, the compiles kept with
details, each function's advice. The live recorder keeps one (`rec.recording()`), and a
journal file read back (`viz.recorder.storage.journal`) is one. Stdlib only.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

from viz.recorder.advice import advise
from viz.recorder.model import (
    Compile,
    FunctionStats,
    Process,
    ProcessRun,
    Recording,
    function_key,
    hidden_eager,
)


class Tally:
    """Exact totals and the kept details, from journal lines in order."""

    def __init__(self, program: ProcessRun | None = None):
        self.program = program or ProcessRun(argv=[], cwd=os.getcwd(), started=0.0)
        self.functions: dict[str, FunctionStats] = {}
        self.compiles: list[Compile] = []
        self.eager = hidden_eager()
        self.details_dropped = 0
        self.recorder_errors = 0  # compiles the recorder failed to describe (counted only)
        self.errors: dict[str, int] = {}  # what failed → how many compiles
        self.eager_libraries: dict[str, int] = {}  # package → op-by-op compiles its code ran

    def add(self, line: dict[str, Any]) -> None:
        kind = line.get("type")
        if kind == "program":
            self.program = ProcessRun(**{k: v for k, v in line.items() if k != "type"})
        elif kind == "compile":
            self.add_compile(Compile.from_dict(line))
        elif kind == "count":
            self.add_count(line)
        elif kind == "error":  # journals of earlier versions: the compile went uncounted
            self._error(str(line.get("message", "")))
        elif kind == "process":  # the program joined a multi-process job
            self.program.process = Process(**{k: v for k, v in line.items() if k != "type"})
        elif kind == "end":
            self.program.exit_code = line.get("exit_code", self.program.exit_code)
            self.program.wall_s = line.get("wall_s", self.program.wall_s)

    def add_compile(self, compile: Compile) -> None:
        self.compiles.append(compile)
        self._library(compile.eager, compile.library)
        self._stats(compile.function, compile.defined_at, compile.eager).add(
            compile.total_s,
            [r.kind for r in compile.reasons],
            compile.persistent.state == "hit",
            compile.peak_bytes,
            compile.need,
        )

    def add_count(self, line: dict[str, Any]) -> None:
        stats = (
            self.eager
            if line.get("hidden")
            else self._stats(line["function"], line["defined_at"], bool(line.get("eager")))
        )
        stats.add(
            float(line.get("total_s", 0.0)),
            list(line.get("kinds", [])),
            bool(line.get("disk_hit")),
            line.get("peak_bytes"),
            str(line.get("need", "")),
        )
        self._library(bool(line.get("eager")), str(line.get("library", "")))
        if line.get("error"):
            self._error(str(line["error"]))
        elif not line.get("hidden"):
            self.details_dropped += 1

    def _library(self, eager: bool, library: str) -> None:
        if eager and library:
            self.eager_libraries[library] = self.eager_libraries.get(library, 0) + 1

    def _error(self, message: str) -> None:
        self.recorder_errors += 1
        self.errors[message] = self.errors.get(message, 0) + 1

    def _stats(self, name: str, defined_at: str, eager: bool) -> FunctionStats:
        key = function_key(name, defined_at)
        stats = self.functions.get(key)
        if stats is None:
            stats = self.functions[key] = FunctionStats(name, defined_at, eager=eager)
        return stats

    def recording(self) -> Recording:
        """The recording so far: functions ranked by compile time, each with advice."""
        functions = sorted(self.functions.values(), key=lambda f: (-f.compile_s, f.name))
        by_key: dict[str, list[Compile]] = {}
        for c in self.compiles:
            by_key.setdefault(c.key, []).append(c)
        ranked = []
        for stats in functions:
            copy = FunctionStats(**asdict(stats))
            copy.advice = advise(copy, by_key.get(copy.key, []), self.program.folders)
            ranked.append(copy)
        return Recording(
            program=ProcessRun(**asdict(self.program)),
            functions=ranked,
            compiles=list(self.compiles),
            eager=FunctionStats(**asdict(self.eager)),
            details_dropped=self.details_dropped,
            recorder_errors=self.recorder_errors,
            errors=dict(self.errors),
            eager_libraries=dict(self.eager_libraries),
        )
