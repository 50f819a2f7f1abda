"""Hostile inputs through the worker: the server side must never raise, every input
must come back as a result or a structured error within its time limit + 2 s, and no
process the user's code started may outlive its worker.

Generated (seeded) inputs: garbage specs; infinite loops, sys.exit and os._exit;
signals the code sends to itself; garbage written to the worker's protocol pipe;
subprocesses left sleeping (some in sessions of their own); closed file descriptors;
huge allocations and huge outputs; deep recursion; threads left spinning. Each input
that kills the worker costs a JAX re-import, hence a short per-input limit and a
total budget. Prints the counts by error kind.

Usage: python bench/fuzz.py [--inputs 1000] [--timeout 2] [--budget-s 900] [--seed 0]
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path

from viz.cache.events import FailedEvent
from viz.errors import ErrorInfo
from viz.settings import Settings
from viz.worker import Worker
from viz.worker.protocol import Analyze, CacheCall, CacheReply, Ping, Reply, Request

ROOT = Path(__file__).resolve().parent.parent


OK = "def f(x):\n    return x * 2.0\n"
MARK = "98765{:04d}"  # every sleeper's argument: sleep 98765NNNN, found again by cmdline
DTYPES = ["f32", "bf16", "i32", "u8", "bool", "c64", "f64", "zz", "f", ""]
IMPORTS = "import os, sys, signal, time, threading, subprocess\n"
SIGNALS = ["SIGTERM", "SIGKILL", "SIGSEGV", "SIGINT", "SIGUSR1", "SIGABRT", "SIGSTOP", "SIGPIPE"]
WRITE_ALL = (
    "for fd in range(3, 200):\n"
    "    try:\n        os.write(fd, {data!r})\n    except OSError:\n        pass"
)
DAEMON = "subprocess.Popen(['sh', '-c', '(sleep {s} &) ; sleep {s}'], start_new_session=True)"
SPIN = (
    "def spin():\n    while True:\n        pass\nthreading.Thread(target=spin, daemon=True).start()"
)
CLOSERS = [
    "os.close(0)\nos.close(1)",
    "sys.stdout.close()\nsys.stdin.close()",
    "os.closerange(3, 4096)",
    "os.close(2)",
    "os.dup2(os.open(os.devnull, os.O_WRONLY), 101)",
]
HOGS = [
    "b = bytearray(10**12)",
    "import numpy as np\nkeep = np.ones(2**28)\nkeep2 = np.ones(2**28)",
    "keep = [0] * 10**10",
]
FLOODS = ["print('x' * 10**7)", "raise ValueError('y' * 10**7)", "os.write(2, b'z' * 10**6)"]
RECURSE = "def g(n):\n    return g(n + 1)\ng(0)"


def func(body: str, head: str = "") -> str:
    """A module whose `f(x)` runs `body` (indented) and returns x."""
    lines = "\n".join("    " + line for line in body.splitlines())
    return f"{IMPORTS}{head}\n\ndef f(x):\n{lines}\n    return x\n"


# -- generators: each returns (category, typed request) --------------------------------
def _array(rng: random.Random) -> str:
    dims = ",".join(
        str(rng.randint(-3, 10 ** rng.randint(0, 12))) for _ in range(rng.randint(0, 5))
    )
    return f"{rng.choice(DTYPES)}[{dims}]"


def garbage_spec(rng: random.Random, i: int) -> tuple[str, Request]:
    pieces = [
        lambda: _array(rng),
        lambda: "[" * rng.randint(1, 3000) + "f32[2]" + "]" * rng.randint(0, 3000),
        lambda: "".join(rng.choice(string.printable) for _ in range(rng.randint(1, 60))),
        lambda: rng.choice(["key", "key(7)", "key(-1)", "None", "'relu'", "1e999", "-0", "{}"]),
        lambda: "{" + f"'a': f32[{rng.randint(0, 9)}], 3: [i32[], key]" + "}",
        lambda: "f32[" + ",".join(["1"] * rng.randint(1, 200)) + "]",
        lambda: rng.choice(["__import__('os')", "x.y", "lambda: 0", "f32[2]**2", "\x00", "é[3]"]),
        lambda: "f32[2]" + "," * rng.randint(0, 5),
    ]
    spec = ", ".join(rng.choice(pieces)() for _ in range(rng.randint(1, 3)))
    op = rng.choice(["analyze", "analyze", "cache_call"])
    request: Request
    if op == "analyze":
        request = Analyze(Settings(code=OK, function="f", args=spec), runs=rng.choice([0, 1]))
    else:
        request = CacheCall(Settings(code=OK, function="f", args=spec), owner="fuzz")
    return "garbage spec", request


def hostile_code(rng: random.Random, i: int) -> tuple[str, Request]:
    sleeper = MARK.format(i)
    cases: list[tuple[str, Callable[[], str]]] = [
        ("infinite loop", lambda: func("while True:\n    pass")),
        ("infinite loop", lambda: "while True:\n    pass\n" + OK),
        ("sys.exit", lambda: func(f"sys.exit({rng.choice([0, 1, 'bye', None])!r})")),
        ("os._exit", lambda: func(f"os._exit({rng.randint(0, 255)})")),
        ("own signal", lambda: func(f"os.kill(os.getpid(), signal.{rng.choice(SIGNALS)})")),
        ("own signal", lambda: func("signal.alarm(1)\ntime.sleep(3)")),
        (
            "protocol garbage",
            lambda: func(WRITE_ALL.format(data=rng.randbytes(rng.randint(1, 64)))),
        ),
        (
            "protocol garbage",
            lambda: func("sys.__stdout__.write('x' * 100)\nos.write(1, b'\\0' * 16)"),
        ),
        ("sleeping subprocess", lambda: func(f"subprocess.Popen(['sleep', '{sleeper}'])")),
        (
            "sleeping subprocess",
            lambda: func("", f"subprocess.Popen(['sleep', '{sleeper}'], start_new_session=True)"),
        ),
        ("sleeping subprocess", lambda: func(DAEMON.format(s=sleeper) + "\ntime.sleep(0.2)")),
        ("closed fds", lambda: func(rng.choice(CLOSERS))),
        ("huge allocation", lambda: func(rng.choice(HOGS))),
        ("huge output", lambda: func(rng.choice(FLOODS))),
        ("deep recursion", lambda: func(RECURSE)),
        ("deep recursion", lambda: func("sys.setrecursionlimit(10**7)\n" + RECURSE)),
        ("deep recursion", lambda: "x = " + "[" * 200000 + "]" * 200000 + "\n" + OK),
        ("spinning thread", lambda: func(SPIN)),
    ]
    category, make = rng.choice(cases)
    if category == "huge allocation" and rng.random() < 0.5:
        return category, Analyze(Settings(code=OK, function="f", args="f32[100000,100000]"), runs=1)
    return category, Analyze(Settings(code=make(), function="f", args="f32[4]"), runs=0)


# -- checks ---------------------------------------------------------------------------
def error_kind(reply: Reply) -> str:
    """ "ok", or the kind of the failure (the worker's, the handler's or the call's)."""
    if reply.ok:
        return "ok"
    error: ErrorInfo | None = reply.error
    if error is None and isinstance(reply, CacheReply) and isinstance(reply.event, FailedEvent):
        error = reply.event.error
    return str(error.kind) if error else "?"


def sleepers() -> list[int]:
    """Live processes whose command line carries a fuzz marker."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state != "Z" and ("sleep\x0098765" in cmd or "sleep 98765" in cmd):
            found.append(int(entry))
    return found


def _below(pid: int, root: int | None) -> bool:
    """Whether `pid` descends from `root` (following parent pids in /proc)."""
    seen = 0
    while root and pid > 1 and seen < 64:
        if pid == root:
            return True
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        seen += 1
    return False


def outlived(live_child: int | None, within_s: float = 2.0) -> list[int]:
    """Marked processes not below the worker's live child, after a grace period for
    SIGKILL to land."""
    deadline = time.monotonic() + within_s
    while True:
        left = [pid for pid in sleepers() if not _below(pid, live_child)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=2.0, help="per-input limit (s)")
    parser.add_argument("--budget-s", type=float, default=900, help="stop after this long")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--memory-gb", type=float, default=1.5)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    null = os.open(os.devnull, os.O_WRONLY)  # the workers' stderr: floods, on purpose
    os.dup2(null, 2)
    worker = Worker(
        "cpu", timeout_s=args.timeout, memory_limit_bytes=int(args.memory_gb * 2**30), demo=False
    )
    worker.ask(Ping(), timeout_s=60)
    kinds: collections.Counter[str] = collections.Counter()
    by_category: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    late, raised, orphans, start = [], 0, [], time.monotonic()
    done, surprises = 0, []
    for i in range(args.inputs):
        if time.monotonic() - start > args.budget_s:
            break
        category, request = (garbage_spec if rng.random() < 0.62 else hostile_code)(rng, i)
        generation = worker.generation
        t0 = time.monotonic()
        try:
            kind = error_kind(worker.ask(request))
        except BaseException as exc:  # the server side must never raise
            raised += 1
            kind = f"RAISED {type(exc).__name__}"
        # the limit counts from when the child picks the request up (after a fresh
        # child's JAX import), as in the app
        elapsed = time.monotonic() - t0 - worker.startup_s
        if elapsed > args.timeout + 2:
            late.append((category, kind, round(elapsed, 2)))
        if kind in ("internal_error", "?") or (
            kind == "worker_crash" and category == "garbage spec"
        ):
            surprises.append((category, kind, repr(getattr(request, "args", None))[:120]))
        kinds[kind] += 1
        by_category[category][kind] += 1
        done += 1
        if worker.generation != generation:  # the old child's processes must be gone
            orphans += outlived(worker.pid())
    worker.close()
    orphans += outlived(None)
    total = time.monotonic() - start
    print(
        f"{done} inputs in {total:.0f} s (per-input limit {args.timeout:.0f} s, "
        f"{worker.restarts} worker restarts)"
    )
    print("by error kind:")
    for kind, n in kinds.most_common():
        print(f"  {kind:<16} {n:5d}")
    print("by input category:")
    for category, counter in sorted(by_category.items()):
        print(f"  {category:<20} " + ", ".join(f"{k} {n}" for k, n in counter.most_common()))
    for surprise in surprises[:10]:
        print("  worth a look:", *surprise)
    print(f"server-side exceptions: {raised}")
    print(f"answers later than limit + 2 s: {len(late)} {late[:5]}")
    print(f"processes that outlived their worker: {len(set(orphans))}")
    ok = raised == 0 and not late and not orphans and done >= 1000
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
