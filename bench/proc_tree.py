"""CPU time and resident memory of a process tree, read from /proc (no psutil: it is
not among the project's dependencies). The load benchmarks measure the server this
way: `streamlit run` and its worker processes, never the client driving it."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Proc:
    ppid: int
    comm: str
    ticks: int  # utime + stime, plus cutime + cstime of its reaped children
    rss: int  # bytes


def parse_stat(stat: str, statm: str = "0 0") -> Proc:
    """One process from its /proc/PID/stat and /proc/PID/statm lines. The command
    name may hold spaces and parentheses, so fields are counted from the last ')'."""
    head, _, tail = stat.rpartition(")")
    fields = tail.split()
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return Proc(int(fields[1]), head.partition("(")[2], ticks, int(statm.split()[1]) * PAGE)


def processes() -> dict[int, Proc]:
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat, open(f"/proc/{entry}/statm") as statm:
                found[int(entry)] = parse_stat(stat.read(), statm.read())
        except (OSError, IndexError, ValueError):  # it exited while being read
            continue
    return found


def descendants(root: int, procs: dict[int, Proc]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, proc in procs.items():
        children.setdefault(proc.ppid, []).append(pid)
    found, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def tree_seconds(root: int) -> float:
    """CPU seconds used so far by `root` and every process below it."""
    procs = processes()
    pids = [root, *descendants(root, procs)]
    return sum(procs[p].ticks for p in pids if p in procs) / TICKS


def browser_seconds() -> float:
    """CPU seconds of every Chromium process on the machine (the browser mode)."""
    comms = ("chrom", "headless")
    return sum(p.ticks for p in processes().values() if any(c in p.comm for c in comms)) / TICKS


class PeakMemory:
    """Samples the resident memory of a server and of the processes below it (its
    workers) in a thread, keeping the peaks: the peak of the workers' sum, which is
    what the pool's memory budget bounds, not the sum of their separate peaks."""

    def __init__(self, root: int, every_s: float = 0.25):
        self.root, self.every_s = root, every_s
        self.server = self.workers = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        procs = processes()
        if self.root in procs:
            self.server = max(self.server, procs[self.root].rss)
        below = sum(procs[p].rss for p in descendants(self.root, procs) if p in procs)
        self.workers = max(self.workers, below)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every_s)
