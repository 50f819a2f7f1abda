"""The recorder's commands: `jitscope record` (`record`) and `jitscope job` (`job`).

Each parses its own arguments (`record`'s program takes the rest of the command line):
`viz.cli` adds each one's parser (`add_command`) and hands it its arguments (`main`).
"""

from types import ModuleType

from viz.recorder.cli import job, record

RECORDER_COMMANDS: dict[str, ModuleType] = {"record": record, "job": job}
