"""The optimized HLO before XLA's compile returns.

XLA's compile runs the HLO passes, then generates code (LLVM on the CPU, PTX and
ptxas on a GPU): on a 96-layer transformer the code generation is the last 0.8 s of
a 1.8 s compile, and on a 12-layer one the last 0.17 s of 0.26 s. Asked to dump
(`xla_dump_to`, passed per compile, which the persistent cache's key ignores; the
one option that trims the dump, `xla_dump_buffer_assignment_analysis`, enters the
key, so a persistent cache keeps jitscope's executables apart from plain jit's), XLA
writes the optimized module's text (`*after_optimizations.txt`) the moment the passes
finish, so the pipeline's reader thread reads the compiled graph, its view, kernels
and fusion map while the code is generated, instead of after.

The dump is the executable's module, printed once XLA's passes were done: its text is
the executable's `as_text()` but for the key order inside `backend_config` JSON (the
tests check it), so the report's graph, kernels and fusion map are read from it, and the
executable's own text is printed where first read. A user who dumps already
(`xla_dump_to` in XLA_FLAGS or in the compiler options) keeps their dump: nothing is
redirected then, and the compiled HLO is read after the compile as before.

Where `memory_analysis()` holds no buffer assignment (a TPU's), the dump is asked for
the optimized module with its buffer assignment as an HloProto too (`proto`: then every
compile dumps, and the buffer-assignment dump is left whole), the memory profile's
source there. The compile that asked for the dump reads it (`hlo_proto`) once it
returns and before the folder is removed: nothing beside it reads a folder that is gone.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping
from typing import Any

POLL_S = 0.005  # how often the reader thread looks for the dump while XLA compiles
_PREFIX = "jitscope-hlo-"  # then the pid of the process that compiles
_SUFFIX = "after_optimizations.txt"  # cpu_after_optimizations.txt, gpu_..., ...
_PROTO_SUFFIX = "after_optimizations.hlo.pb"  # the HloProto: module and buffer assignment


@functools.cache
def _xla_trims_dumps() -> bool:
    """Whether XLA knows `xla_dump_buffer_assignment_analysis` (jaxlib >= 0.10: an
    older one refuses the whole compile for an option it does not know)."""
    import jaxlib.version

    return jaxlib.version.__version_info__ >= (0, 10)


class OptimizedHloDump:
    """A folder XLA dumps one compile's HLO into, and the wait for the optimized
    module's text. `done()` once the compile returned (or failed); `close()` after."""

    def __init__(
        self,
        compiler_options: Mapping[str, Any],
        environ: Mapping[str, str] = os.environ,
        wanted: bool = True,
        proto: bool = False,
    ):
        """`wanted`: False where the program is too small for a dump to pay (no folder,
        no options, as for a user who dumps already). `proto`: XLA also dumps the
        optimized module with its buffer assignment as an HloProto (`hlo_proto`), for
        the memory profile where `memory_analysis()` holds no assignment (a TPU's)."""
        self.proto = proto
        dumping = any(k.startswith("xla_dump") for k in compiler_options)
        dumping |= "xla_dump_to" in environ.get("XLA_FLAGS", "")
        ours = wanted and not dumping
        if ours:
            _remove_orphans()
        self.folder = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-") if ours else None
        self._done = threading.Event()

    @property
    def options(self) -> dict[str, Any]:
        """The compiler options that make XLA write the dump (none: the user dumps)."""
        if self.folder is None:
            return {}
        options: dict[str, Any] = {"xla_dump_to": self.folder, "xla_dump_hlo_as_text": True}
        if self.proto:  # the buffer assignment's dump stays whole: the profile reads it
            options["xla_dump_hlo_as_proto"] = True
        elif _xla_trims_dumps():
            # the buffers' values and live ranges, which nothing reads: on a 12-layer
            # transformer they took the dump's cost from 6.9 % of the compile to 5.3 %
            options["xla_dump_buffer_assignment_analysis"] = False
        return options

    def done(self) -> None:
        self._done.set()

    def wait(self) -> str | None:
        """The optimized module's text once XLA has written all of it; None when the
        compile ended without one (it failed, came from the persistent cache, the
        program has several modules, is too small to dump, or the user dumps)."""
        if self.folder is None:
            return None
        while True:
            finished = self._done.is_set()
            text = self._read()
            if text is not None or finished:
                return text
            self._done.wait(POLL_S)

    def _read(self) -> str | None:
        assert self.folder is not None
        found = [e.path for e in os.scandir(self.folder) if e.name.endswith(_SUFFIX)]
        if len(found) != 1:
            return None
        with open(found[0], encoding="utf-8") as file:
            text = file.read()
        return text if written_whole(text) else None

    def hlo_proto(self) -> bytes | None:
        """The optimized module and its buffer assignment (an HloProto's bytes), read
        once the compile returned and before `close()`: the compile that asked for the
        dump reads it, so nothing reads the folder once it is gone. None where XLA
        wrote none (not asked for, a failed compile, several modules)."""
        if self.folder is None or not self.proto:
            return None
        found = [e.path for e in os.scandir(self.folder) if e.name.endswith(_PROTO_SUFFIX)]
        if len(found) != 1:
            return None
        with open(found[0], "rb") as file:
            return file.read()

    def close(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


@functools.cache
def _remove_orphans() -> None:
    """The dump folders of processes that died while XLA compiled (a worker killed at
    its time or memory limit): removed once per process, before its first dump."""
    root = tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            if not entry.name.startswith(_PREFIX):
                continue
            pid = entry.name.removeprefix(_PREFIX).partition("-")[0]
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(entry.path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


def written_whole(text: str) -> bool:
    """Whether a module's text is complete, not a file XLA is still writing: the ENTRY
    computation is printed last, so a whole text ends with its closing brace."""
    at = text.rfind("\nENTRY ")
    return at >= 0 and text.rstrip().endswith("}") and text.find("\n%", at) < 0
