"""What `jitscope record -- script.py` adds to a script's wall time (issue #60).

Two scripts: one that prints "hi" and never imports JAX (target: at most 0.3 s added),
and one that imports JAX and compiles and runs a small function (target: at most 10 %
added). Each round runs the script alone (`python script.py`), then under `python -m
viz record --` with this checkout's viz (the history in a temporary JITSCOPE_HOME), and,
with `--against DIR`, under another checkout's (`PYTHONPATH=DIR`: main's code, for a
before), in an order that turns each round; wall clock from the parent's start to its
end, a fresh process every time. Printed: each one's median and range, and what
recording added against the script alone of the same round (median and range of the
differences and of the ratios).

    python bench/record_start.py [--rounds 7] [--against /work/main]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SCRIPTS = {
    "no JAX (prints hi)": 'print("hi")\n',
    "JAX (import, jit, run)": (
        "import jax, jax.numpy as jnp\n"
        "f = jax.jit(lambda x: jnp.tanh(x) @ x.T)\n"
        "print(float(f(jnp.ones((64, 64))).sum()))\n"
    ),
}
TARGETS = {"no JAX (prints hi)": ("added_s", 0.3), "JAX (import, jit, run)": ("ratio", 1.10)}


def wall(command: list[str], env: dict[str, str], folder: str) -> float:
    """Run from the scripts' folder: `python -m viz` finds viz on PYTHONPATH alone."""
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, cwd=folder)
    return time.perf_counter() - start


def spread(values: list[float], unit: str = " s") -> str:
    ordered = sorted(values)
    return f"{statistics.median(ordered):.3f}{unit} ({ordered[0]:.3f}-{ordered[-1]:.3f})"


def measure(script: Path, rounds: int, against: str | None, home: str) -> dict[str, list[float]]:
    # bytecode cached as an installed package has it (in a folder of the bench's own:
    # with PYTHONDONTWRITEBYTECODE, every start compiled viz's sources again)
    env = {**os.environ, "JITSCOPE_HOME": home, "PYTHONPYCACHEPREFIX": f"{home}/pycache"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    recorded = [sys.executable, "-m", "viz", "record", "--", str(script)]  # history in a temp home
    ways = {"alone": ([sys.executable, str(script)], env)}
    ways["recorded (this checkout)"] = (recorded, {**env, "PYTHONPATH": _first(str(HERE))})
    if against:
        ways["recorded (--against)"] = (recorded, {**env, "PYTHONPATH": _first(against)})
    for command, environment in ways.values():  # warm the file cache
        wall(command, environment, home)
    found: dict[str, list[float]] = {name: [] for name in ways}
    order = list(ways.items())
    for i in range(rounds):
        for name, (command, environment) in order[i % len(order) :] + order[: i % len(order)]:
            found[name].append(wall(command, environment, home))
    return found


def _first(root: str) -> str:
    """PYTHONPATH with `root` first (where JAX is found on PYTHONPATH, it still is)."""
    return os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)


def report(name: str, found: dict[str, list[float]]) -> None:
    print(f"\n{name}: wall seconds, median (range) of {len(found['alone'])} rounds")
    alone = found["alone"]
    print(f"  {'alone':<28} {spread(alone)}")
    kind, target = TARGETS[name]
    for way, times in found.items():
        if way == "alone":
            continue
        added = [t - a for t, a in zip(times, alone, strict=True)]
        ratios = [t / a for t, a in zip(times, alone, strict=True)]
        figure = statistics.median(added) if kind == "added_s" else statistics.median(ratios)
        verdict = "OK" if figure <= target else "MISSED"
        print(
            f"  {way:<28} {spread(times)}  added {spread(added)}  ratio {spread(ratios, '×')}"
            f"  target {kind} <= {target}: {verdict}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--against", help="another checkout's root, timed the same way")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for name, code in SCRIPTS.items():
            script = Path(folder) / f"script_{len(code)}.py"
            script.write_text(code)
            report(name, measure(script, args.rounds, args.against, folder))


if __name__ == "__main__":
    main()
