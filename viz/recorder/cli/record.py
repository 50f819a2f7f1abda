"""`jitscope record [OPTIONS] -- SCRIPT [ARGS]`, `... [--] -m MODULE [ARGS]`, `--recover`.

The program runs in a child process (`viz.recorder.capture.run`) and appends each compile to
a journal under `$JITSCOPE_HOME/recordings/`. This process waits for it, whatever
way it ends (an exception, `sys.exit(3)`, `os._exit`, SIGKILL), then reads the
journal, prints the summary on stderr, stores the recording in history (unless
`--no-history`), writes `--json OUT` and `--html OUT`, and exits with the program's own
status (128 + N when signal N ended it, as a shell reports it). One process of a
multi-process job tags its lines (`[p1] `) and writes `{process}` in OUT as its index.

`--recover` runs no program: it stores the journals that recorders whose parent was
killed left behind (`viz.recorder.storage.orphans`).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import signal
import sys
import threading
import time
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

from viz.locations import app_command, invoked_name
from viz.recorder.capture.run import BOOT, CONFIG_ENV, run_program
from viz.recorder.display.summary import summary_text
from viz.recorder.model import DEFAULT_DETAILS
from viz.recorder.storage.journal import read_journal
from viz.recorder.storage.orphans import journal_path

if TYPE_CHECKING:
    from viz.recorder.model import Process

# What the recording's end alone needs (the history), imported while the program runs,
# not before it starts. What the program's recorder needs too (the model, the journal,
# the summary) is imported before it, once: the program's process is this one forked.
FINISH_MODULES = ("viz.history", "viz.recorder.storage.recordings")

USAGE = (
    "%(prog)s [--json OUT] [--html OUT] [--no-history] [--eager] [--name NAME] "
    "[--details N] [--persistent-cache DIR] -- SCRIPT [ARGS ...]  (or: ... [--] -m MODULE "
    "[ARGS ...]);  %(prog)s --recover"
)


def add_command(sub: argparse._SubParsersAction) -> None:
    """For `python -m viz --help` only: `main` parses record's own arguments."""
    record = sub.add_parser(
        "record", help="run a program and record every compilation", usage=USAGE
    )
    record.add_argument("program", nargs=argparse.REMAINDER, help="-- SCRIPT ARGS or -m MODULE")


def _options() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{invoked_name()} record", usage=USAGE, description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--json",
        metavar="OUT",
        help="write the Recording JSON here (- = stdout); {process} in OUT: the process index",
    )
    parser.add_argument(
        "--html",
        metavar="OUT",
        help="write the recording as one self-contained HTML file ({process}: as for --json)",
    )
    parser.add_argument(
        "--persistent-cache",
        metavar="DIR",
        help="use JAX's persistent compilation cache in DIR (sets jax_compilation_cache_dir)",
    )
    parser.add_argument(
        "--recover",
        action="store_true",
        help="store the recordings left by killed recorders in history, and exit",
    )
    parser.add_argument("--no-history", action="store_true", help="do not store it in history")
    parser.add_argument(
        "--eager",
        action="store_true",
        help="keep JAX's op-by-op compiles (counted apart otherwise)",
    )
    parser.add_argument("--name", help="the recording's name (default: the script or module)")
    parser.add_argument(
        "--details",
        type=int,
        default=DEFAULT_DETAILS,
        metavar="N",
        help=f"compiles kept with details per function (default {DEFAULT_DETAILS})",
    )
    return parser


TAKE_VALUE = ("--json", "--html", "--name", "--details", "--persistent-cache")  # (above)


def split_argv(argv: list[str]) -> tuple[list[str], str | None, list[str]]:
    """(record's options, -m MODULE or None, the program's argv): the program starts at
    `--` (`-- -m MODULE` too, as `python -m` would take it), at `-m`, or at the first
    word that is not an option or an option's value."""
    for i, word in enumerate(argv):
        if word == "--":
            rest = argv[i + 1 :]
            if rest[:1] == ["-m"] and len(rest) > 1:
                return argv[:i], rest[1], rest[2:]
            return argv[:i], None, rest
        if word == "-m" and i + 1 < len(argv):
            return argv[:i], argv[i + 1], argv[i + 2 :]
        if not word.startswith("-") and (i == 0 or argv[i - 1] not in TAKE_VALUE):
            return argv[:i], None, argv[i:]
    return argv, None, []


def main(argv: list[str]) -> int:
    own, module, target = split_argv(argv)
    args = _options().parse_args(own)
    if args.recover:
        from viz.recorder.storage.orphans import recover_orphans

        return recover_orphans()
    if module is None and not target:
        _options().error("name a program: -- SCRIPT [ARGS] or -m MODULE [ARGS]")
    if module is None and not Path(target[0]).is_file():
        _options().error(f"no such file: {target[0]}")
    started = time.time()
    journal = journal_path(started, os.getpid())
    journal.parent.mkdir(parents=True, exist_ok=True)
    name = args.name or module or os.path.basename(target[0])
    config = {
        "journal": str(journal),
        "details": args.details,
        "eager": args.eager,
        "started": started,
        "name": name,
        "module": module,
        "argv": ([module] if module else []) + target,
        "persistent_cache": str(Path(args.persistent_cache).resolve())
        if args.persistent_cache
        else None,
    }
    run = _run_forked if _whole_process(argv) else _run_started
    status = run(config, target, not args.no_history)
    return _finish(journal, args, status, time.time() - started)


def _whole_process(argv: list[str]) -> bool:
    """Whether this process is `record` and nothing else (its command line, no thread
    and no JAX of its own), so that a fork of it is the program's own process."""
    return (
        hasattr(os, "fork")
        and sys.argv[1:] == ["record", *argv]
        and threading.active_count() == 1
        and "jax" not in sys.modules
    )


def _run_forked(config: dict, target: list[str], history: bool) -> int:
    """The program run in a fork of this process (an interpreter started, the
    recording's start imported: 0.05 s less than a fresh one). Ctrl+C reaches it from
    the terminal (ignored here), SIGTERM is passed on. The child never comes back: it
    ends as the program does, its exit handlers run, with the program's status."""
    interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)  # here from before the fork
    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()  # the program's collections pass over record's own objects (and leave
    # their pages shared): the full collections of JAX's import walked them all (0.05 s)
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGINT, interrupt)
        run_program(config, target)
        sys.exit(0)
    terminate = signal.signal(signal.SIGTERM, lambda n, _: os.kill(pid, n))
    try:
        _prepare_finish(history)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    finally:
        signal.signal(signal.SIGINT, interrupt)
        signal.signal(signal.SIGTERM, terminate)


def _run_started(config: dict, target: list[str], history: bool) -> int:
    """The program run in a fresh interpreter (`viz.recorder.capture.run.main`); Ctrl+C
    reaches it from the terminal, SIGTERM is passed on."""
    import subprocess

    viz_parent = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, CONFIG_ENV: json.dumps(config)}
    command = [sys.executable, "-c", BOOT.format(viz_parent=viz_parent), *target]
    child = subprocess.Popen(command, env=env)
    previous = {
        signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN),
        signal.SIGTERM: signal.signal(signal.SIGTERM, lambda n, _: child.send_signal(n)),
    }
    try:
        _prepare_finish(history)
        return child.wait()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _prepare_finish(history: bool) -> None:
    """While the program runs: the end's imports, and the history file opened (created
    or migrated: 0.01-0.03 s). A failure is met again when saving."""
    for module in FINISH_MODULES:
        import_module(module)
    if history:
        from viz.history import History, HistoryError

        with contextlib.suppress(HistoryError):
            History().prepare()


def _finish(journal: Path, args: argparse.Namespace, status: int, wall_s: float) -> int:
    from viz.history import HistoryError
    from viz.recorder.storage.recordings import save

    recording = read_journal(journal)
    recording.program.wall_s = wall_s
    exit_code = status if status >= 0 else 128 - status
    recording.program.exit_code = exit_code
    if status < 0:
        recording.program.signal = signal.Signals(-status).name
    process = recording.program.process  # one process of a multi-process job, or None
    out, html = json_path(args.json, process), json_path(args.html, process)
    print(tagged(summary_text(recording), process), file=sys.stderr)
    try:
        saved = save(recording, json_path=out, history=not args.no_history)
        if html:
            from viz.recorder.display.html import recording_html  # asked for: 0.02 s

            Path(html).write_text(recording_html(recording), encoding="utf-8")
    except (OSError, HistoryError) as exc:  # --json, --html, or the history
        message = f"jitscope: not saved ({exc}); the journal stays at {journal}"
        print(tagged(message, process), file=sys.stderr)
        return exit_code
    where = [f"recording #{saved} ({app_command()} → Recordings)"] if saved else []
    if out and out != "-":
        where.append(out)
    if html:
        where.append(html)
    if where:
        print(tagged(f"jitscope: saved as {' and '.join(where)}", process), file=sys.stderr)
    journal.unlink(missing_ok=True)
    return exit_code


# -- one process of a multi-process job --------------------------------------------------
PROCESS_FIELD = "{process}"  # in `record --json`: the process index


def tagged(text: str, process: Process | None) -> str:
    """Each line prefixed with the process index (`[p1] `), so that the summaries of a
    job's processes, printed to one terminal at once, stay apart."""
    if process is None:
        return text
    return "\n".join(f"[p{process.index}] {line}" for line in text.splitlines())


def json_path(path: str | None, process: Process | None) -> str | None:
    """`out/p{process}.json` → `out/p1.json` (process 0 when the program ran alone)."""
    if path is None or PROCESS_FIELD not in path:
        return path
    return path.replace(PROCESS_FIELD, str(process.index if process else 0))
