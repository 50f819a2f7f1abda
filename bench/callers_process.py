"""viz.analyze() in a caller's own process against bare jit, in wall and CPU seconds
(issue #60).

The 12- and 96-layer transformer (bench/overhead.py's cases), compile only (runs=0), on
JAX's default backend as the bare run is (a TPU's where the machine has one),
each round on a fresh function object with JAX's caches cleared after a full
collection, interleaved with a bare `jax.jit(f).trace(...).lower().compile()`:

- returned: until `viz.analyze()` returned (the parts a caller may never read, views,
  texts, the fusion map, XLA's cost analysis and memory profile, are made where first
  read);
- whole: then `to_dict()`, every part made;
- compile_s: the report's XLA compile against the bare one's.

Each as the median and range of the ratios to the bare run of the same round, in wall
time and in the process's CPU time (all threads: on a machine others load, CPU time
moves far less than wall time). `--against DIR` runs the same measurement with
another checkout's viz (`PYTHONPATH=DIR`, main's code for a before) in processes that
alternate with this checkout's, `--pairs` times, and prints both.

    python bench/callers_process.py [--rounds 5] [--layers 12 96] [--against /work/main]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = 1.20  # analyze() in a caller's process against bare jit (issue #60)
COMPILE_TARGET = 1.05  # its compile_s against a bare compile (issue #51)
SPEC = "params, f32[2,128,256]"


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = clock()
    return wall - start[0], cpu - start[1]


def one_round(make, layers: int) -> dict[str, float]:
    """A bare compile, then an analysis, each after a full collection."""
    import jax

    import viz
    from viz.spec import abstract_args, parse_spec

    fn, namespace = make()
    args = abstract_args(parse_spec(SPEC, namespace))
    jax.clear_caches()
    gc.collect()
    start = clock()
    traced = jax.jit(fn).trace(*args)
    lowered = traced.lower()
    compile_start = time.perf_counter()
    lowered.compile()
    bare_compile = time.perf_counter() - compile_start
    del traced, lowered
    bare_wall, bare_cpu = since(start)
    fn, namespace = make()
    jax.clear_caches()
    gc.collect()
    start = clock()
    report = viz.analyze(fn, SPEC, runs=0, namespace=namespace, device=jax.default_backend())
    returned_wall, returned_cpu = since(start)
    report.to_dict()
    whole_wall, whole_cpu = since(start)
    assert report.ok, report.error
    return {
        "returned (wall)": returned_wall / bare_wall,
        "whole (wall)": whole_wall / bare_wall,
        "returned (CPU)": returned_cpu / bare_cpu,
        "whole (CPU)": whole_cpu / bare_cpu,
        "compile_s": report.timings.compile_s / bare_compile,
        "bare (wall s)": bare_wall,
    }


def measure(rounds: int, layers: list[int]) -> dict[str, dict[str, list[float]]]:
    import viz  # this checkout's, or --against's (its PYTHONPATH)

    sys.path.insert(0, str(Path(viz.__file__).resolve().parent.parent / "bench"))
    from overhead import transformer  # the models of the viz measured

    found: dict[str, dict[str, list[float]]] = {}
    for n in layers:
        make = transformer(n)
        one_round(make, n)  # warm up
        for _ in range(rounds):
            for name, value in one_round(make, n).items():
                found.setdefault(f"{n} layers", {}).setdefault(name, []).append(value)
    return found


def spread(values: list[float]) -> str:
    ordered = sorted(values)
    return f"{statistics.median(ordered):.3f} ({ordered[0]:.3f}-{ordered[-1]:.3f})"


def print_found(label: str, found: dict[str, dict[str, list[float]]]) -> None:
    print(f"\n{label}: each against the bare run of its round, median (range)")
    for case, figures in found.items():
        print(f"  {case}")
        for name, values in figures.items():
            print(f"    {name:<16} {spread(values)}")


def against(other: str, rounds: int, layers: list[int], pairs: int) -> None:
    """This checkout and `other` in alternating processes, `pairs` times each."""
    ways = {"this checkout": str(HERE.parent), f"--against {other}": other}
    merged: dict[str, dict[str, dict[str, list[float]]]] = {name: {} for name in ways}
    for i in range(pairs):
        order = list(ways.items())
        for name, root in order if i % 2 == 0 else order[::-1]:
            command = [sys.executable, __file__, "--json", "--rounds", str(rounds), "--layers"]
            # the checkout first, what else PYTHONPATH held after it (JAX, on some machines)
            path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
            env = {**os.environ, "PYTHONPATH": path}
            out = subprocess.run(
                [*command, *map(str, layers)], env=env, capture_output=True, text=True, check=True
            )
            for case, figures in json.loads(out.stdout.splitlines()[-1]).items():
                for figure, values in figures.items():
                    merged[name].setdefault(case, {}).setdefault(figure, []).extend(values)
    for name, found in merged.items():
        print_found(f"{name}, {pairs} processes of {rounds} rounds", found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--layers", type=int, nargs="+", default=[12, 96])
    parser.add_argument("--against", help="another checkout's root, in alternating processes")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.json:  # run directly: this checkout's viz
        sys.path.insert(0, str(HERE.parent))
    if args.against:
        against(args.against, args.rounds, args.layers, args.pairs)
    elif args.json:  # one process of --against's
        print(json.dumps(measure(args.rounds, args.layers)))
        return
    else:
        print_found("viz.analyze() in this process", measure(args.rounds, args.layers))
    print(f"\ntargets: returned <= {TARGET} (#60), compile_s <= {COMPILE_TARGET} (#51)")


if __name__ == "__main__":
    main()
