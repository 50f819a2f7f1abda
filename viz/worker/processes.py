"""Processes of a worker: resident memory, and killing a child with everything it
left behind (its process group, and the descendants it reaped as a subreaper)."""

from __future__ import annotations

import contextlib
import os
import signal


def process_rss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def kill_group(pgid: int) -> None:
    """SIGKILL every process in the group (the child and whatever it started)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _stat(pid: int | str) -> tuple[int, int] | None:
    """(parent pid, start time) of a process, from /proc; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return int(fields[1]), int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def descendants_of(root: int) -> dict[int, int]:
    """pid -> start time of every process below `root`. The child is a subreaper, so
    even daemons that left its process group still hang below it while it lives."""
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(entry)):
            children.setdefault(stat[0], []).append((int(entry), stat[1]))
    found: dict[int, int] = {}
    stack = list(children.get(root, []))
    while stack:
        pid, started = stack.pop()
        found[pid] = started
        stack.extend(children.get(pid, []))
    return found


def kill_family(family: dict[int, int]) -> None:
    """SIGKILL each process that is still the one seen (same pid and start time)."""
    for pid, started in family.items():
        stat = _stat(pid)
        if stat and stat[1] == started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
