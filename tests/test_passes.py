"""Pass-by-pass op counts from XLA's own per-pass dumps."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from viz.ir.hlo import read_hlo
from viz.ir.kernels import kernel_count
from viz.ir.model import op_histogram
from viz.passes import pass_by_pass
from viz.settings import Settings
from viz.stages import trace
from viz.target import Target


def chain(x):
    for _ in range(8):
        x = jnp.sin(x) * 1.5 + 0.25
    return x


def steps_for(fn, *shapes):
    args = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
    spec = ", ".join(f"f32[{','.join(map(str, s))}]" for s in shapes)
    target = Target.from_settings(Settings(), fn)
    return jax.jit(fn).lower(*args), pass_by_pass(trace(target, target.args(spec)).lower())


def test_steps_run_from_the_unoptimized_module_to_the_final_one():
    _, steps = steps_for(chain, (64, 64))
    assert steps[0]["pass"] == "before optimizations"
    assert steps[-1]["pass"] == "after optimizations"
    assert [s["step"] for s in steps] == list(range(len(steps)))
    assert len(steps) > 3


def test_fusion_makes_the_count_fall_and_the_last_step_matches_the_compiled_program():
    lowered, steps = steps_for(chain, (64, 64))
    assert steps[0]["fusion_count"] == 0
    assert steps[-1]["op_count"] < steps[0]["op_count"]
    assert any(s["pass"] == "fusion" for s in steps)
    final = read_hlo(lowered.compile())
    assert steps[-1]["op_count"] == sum(op_histogram(final).values())
    assert kernel_count(final) <= 2
