"""What a user waits for in jitscope, against what jax.jit alone takes.

For the 12- and 96-layer transformer (samples/transformer_24.py at other depths) and
a 24-op elementwise chain, in one process, interleaved, every measurement on a fresh
function object with JAX's caches cleared:

- bare: `jax.jit(f).trace(*args).lower().compile()`;
- jitscope: `analyze(f, spec, runs=0).to_dict()` — trace, lower, compile, the three
  IR readers, op counts, the fusion map, the default graph views and serialization.

Each figure is the minimum over the rounds (compile times are bimodal on a busy
machine: a ratio of minimums, not a minimum of ratios, which would pair a lucky run
with an unlucky one). Prints the ratio and, per model, where jitscope's time goes.

Target (issue #20): ratio <= 1.10 at 12 and at 96 layers.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jax

import viz.fusion.report
import viz.graph
import viz.pipeline
from viz.report import Report
from viz.source import find_function, load_module
from viz.spec import abstract_args, parse_spec

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
TARGET = 1.10
CHAIN = """
import jax.numpy as jnp

def chain(x):
    for _ in range(8):
        x = jnp.tanh(x) * 1.5 + 0.25
    return x
"""


def transformer(layers: int) -> Callable[[], tuple[Callable, dict]]:
    def make() -> tuple[Callable, dict]:
        """A new module (so a new function object) with `layers` layers of params."""
        code = (SAMPLES / "transformer_24.py").read_text()
        module = load_module(code)
        module.params = module.init_params(n_layers=layers)
        return find_function(module, code, "forward"), vars(module)

    return make


def chain() -> tuple[Callable, dict]:
    module = load_module(CHAIN)
    return find_function(module, CHAIN, "chain"), vars(module)


CASES = {
    "12-layer transformer": (transformer(12), "params, f32[2,128,256]"),
    "96-layer transformer": (transformer(96), "params, f32[2,128,256]"),
    "24-op elementwise chain": (chain, "f32[512,512]"),
}

# -- where jitscope's time goes: the pipeline's steps, timed where they are called ----
STEPS: dict[str, float] = defaultdict(float)
TIMED = {  # step name → (module, attribute) the pipeline calls it through
    "read jaxpr": (viz.pipeline, "read_jaxpr"),
    "read StableHLO": (viz.pipeline, "read_stablehlo"),
    "read compiled HLO": (viz.pipeline, "read_hlo"),
    "default views (3 IRs)": (viz.graph, "summary"),
    "fusion map": (viz.pipeline, "add_fusion_map"),
    "StableHLO text": (viz.pipeline.Lowered, "text"),
    "compiled HLO text": (viz.pipeline.Compiled, "text"),
}


def _timed(name: str, fn: Callable) -> Callable:
    def run(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            STEPS[name] += time.perf_counter() - start

    return run


@contextmanager
def step_timers() -> Iterator[None]:
    saved = {name: getattr(owner, attr) for name, (owner, attr) in TIMED.items()}
    for name, (owner, attr) in TIMED.items():
        setattr(owner, attr, _timed(name, saved[name]))
    try:
        yield
    finally:
        for name, (owner, attr) in TIMED.items():
            setattr(owner, attr, saved[name])


def bare(make: Callable, spec: str) -> float:
    """Seconds of jax.jit's own trace → lower → compile."""
    fn, namespace = make()
    args = abstract_args(parse_spec(spec, namespace))
    jax.clear_caches()
    start = time.perf_counter()
    jax.jit(fn).trace(*args).lower().compile()
    return time.perf_counter() - start


def with_jitscope(make: Callable, spec: str) -> tuple[float, dict[str, float]]:
    """Seconds of analyze(runs=0).to_dict(), and its steps."""
    fn, namespace = make()
    jax.clear_caches()
    STEPS.clear()
    with step_timers():
        start = time.perf_counter()
        report = viz.pipeline.analyze(fn, spec, runs=0, namespace=namespace)
        serialize = time.perf_counter()
        report.to_dict()
        end = time.perf_counter()
    assert report.ok, report.error
    steps = _stage_steps(report) | dict(STEPS)
    steps["serialization (to_dict)"] = end - serialize
    steps["total"] = end - start
    return end - start, steps


def _stage_steps(report: Report) -> dict[str, float]:
    t = report.timings
    return {"trace": t.trace_s or 0.0, "lower": t.lower_s or 0.0, "compile": t.compile_s or 0.0}


def main(rounds: int = 5) -> None:
    failed = False
    for name, (make, spec) in CASES.items():
        bare(make, spec), with_jitscope(make, spec)  # warm up imports and one-time setup
        ours: list[tuple[float, dict[str, float]]] = []
        base: list[float] = []
        for _ in range(rounds):
            base.append(bare(make, spec))
            ours.append(with_jitscope(make, spec))
        best = min(ours, key=lambda o: o[0])
        ratio = best[0] / min(base)
        verdict = "OK" if ratio <= TARGET else "MISSED"
        failed |= ratio > TARGET and "transformer" in name
        print(f"\n{name}: {rounds} interleaved rounds, minimums")
        print(f"  bare jit trace+lower+compile   {min(base):7.3f} s")
        print(f"  analyze(runs=0).to_dict()      {best[0]:7.3f} s")
        print(f"  ratio                          {ratio:7.3f}   target <= {TARGET}  {verdict}")
        print("  where jitscope's fastest round went:")
        for step, seconds in best[1].items():
            print(f"    {step:<28} {seconds:7.3f} s  {seconds / best[0]:6.1%}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
