"""The recorded program's own process: run SCRIPT (or -m MODULE) as `python` would.

`viz.recorder.cli.record` forks itself and runs the program in the copy (`run_program`):
its interpreter is started already, and what the recording needs from the start is
imported once, before the fork. Where it cannot (no fork on this platform, or record
called inside a process that holds threads or JAX), it starts `python -c BOOT ARGS...`
(`main`), with its settings in the environment variable CONFIG_ENV (removed before the
program starts, so the program's own subprocesses are not recorded twice). Either way
the program sees its own `sys.argv`,
`__main__` and `sys.path[0]` (the script's folder, or the working folder for -m);
stdin, stdout and stderr are inherited. An uncaught exception prints as Python prints
it (without this module's frames) and exits 1; `sys.exit(n)` exits n.

The recorder stays subscribed until the process ends, so compiles made by `atexit`
handlers and by threads that outlive the main script are recorded too.
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import signal
import sys
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from viz.recorder.model import ProcessRun
    from viz.recorder.storage.journal import Journal

CONFIG_ENV = "JITSCOPE_RECORD_CONFIG"
BOOT = (
    "import sys; sys.path.insert(0, {viz_parent!r}); "
    "from viz.recorder.capture.run import main; main()"
)


def main() -> None:
    """The program in a fresh interpreter (`python -c BOOT ARGS...`)."""
    config = json.loads(os.environ.pop(CONFIG_ENV))
    sys.path.pop(0)  # the folder BOOT put first to find viz; viz is imported now
    run_program(config, sys.argv[1:])


def run_program(config: dict, target: list[str]) -> None:
    """Run the program in this process, recorded: returns as it ends; SystemExit for
    its `sys.exit(n)`, and exit status 1 for an uncaught exception (printed first)."""
    module = config.get("module")
    script = None if module else os.path.abspath(target[0])
    sys.path[0] = os.path.dirname(script) if script else os.getcwd()
    _start_recorder(config, sys.path[0], sys._getframe())
    try:
        if script:
            sys.argv = list(target)
            runpy.run_path(script, run_name="__main__")
        else:
            sys.argv = [module, *target]
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit:
        raise
    except BaseException as exc:  # as Python prints it: the program's frames only
        tb = _from_program(exc.__traceback__, script)
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        if isinstance(exc, KeyboardInterrupt):  # die of SIGINT, as python does
            sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        sys.exit(1)


def _start_recorder(config: dict, path: str, launcher: FrameType) -> None:
    """The journal opened and the program's line written now; the recorder itself
    (and JAX's import, which it needs) once the program imports JAX: a program that
    never does pays nothing for either, and every compile comes after that import.
    `launcher`: the frame that runs the program, under which a forked `record`'s own
    frames are (`viz/__main__.py`, the CLI): no call site of the program's."""
    from viz.recorder.capture.when_imported import when_imported
    from viz.recorder.model import ProcessRun
    from viz.recorder.storage.journal import Journal

    program = ProcessRun(
        argv=list(config["argv"]),
        cwd=os.getcwd(),
        started=float(config["started"]),
        name=config.get("name") or "",
        path=path,
    )
    journal = Journal(Path(config["journal"]))  # held (locked) while the program lives
    journal.write({"type": "program", **program.__dict__})
    when_imported("jax", lambda: _recorder_on_jax(config, program, journal, launcher))


def _recorder_on_jax(
    config: dict, program: ProcessRun, journal: Journal, launcher: FrameType
) -> None:
    """The recorder started on the journal the program's line is in (`--persistent-cache
    DIR`: JAX's cache set first, before any compile)."""
    from viz.recorder.capture.recorder import Recorder

    if config.get("persistent_cache"):
        import jax

        jax.config.update("jax_compilation_cache_dir", config["persistent_cache"])
    recorder = Recorder(program, None, int(config["details"]), bool(config["eager"]))
    recorder.journal = journal  # the program's line is in it already
    recorder.hide_stack(launcher)
    recorder.start()
    # before JAX's own exit handler shuts jax.distributed down (registered earlier, run later)
    atexit.register(recorder.process_watch.stop)


def _from_program(tb: TracebackType | None, script: str | None) -> TracebackType | None:
    """Drop the frames of this module and runpy above the program's first frame."""
    skip = {os.path.abspath(__file__), os.path.abspath(runpy.__file__)}
    first = tb
    while first is not None:
        filename = os.path.abspath(first.tb_frame.f_code.co_filename)
        if (script and filename == script) or (not script and filename not in skip):
            return first
        first = first.tb_next
    return tb
