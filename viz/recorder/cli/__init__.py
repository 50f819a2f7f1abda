"""The recorder's commands: `jitscope record` (`record`) and `jitscope job` (`job`).

Each parses its own arguments (`record`'s program takes the rest of the command line):
`viz.cli` adds each one's parser (`add_command`) and hands it its arguments (`main`).
Each module is imported when its command runs (`command`): `jitscope record` starts
its program without `job`'s imports (the history, the report: 0.25 s).
"""

from importlib import import_module
from types import ModuleType

COMMAND_NAMES = ("record", "job")


def command(name: str) -> ModuleType:
    """The module of the recorder's command `name` (one of COMMAND_NAMES)."""
    return import_module(f"viz.recorder.cli.{name}")
