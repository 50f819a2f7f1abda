"""What a pick in the Fusion tab lights up (viz.fusion.selection), on a real compile."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from viz import analyze
from viz.fusion.selection import (
    Picked,
    kernel_choices,
    missing_ops,
    op_choices,
    select,
    selected_eqns,
)
from viz.report import Report


def scaled(x: jax.Array, w: jax.Array) -> jax.Array:
    y = jnp.tanh(x @ w)
    return (y * 2.0 + 1.0).sum()


@pytest.fixture(scope="module")
def report() -> Report:
    return analyze(scaled, "f32[16,32], f32[32,32]", runs=0)


def test_picking_a_kernel_lights_its_ops_lines_and_equations(report: Report) -> None:
    fmap, stablehlo = report.fusion_map, report.graph_models["stablehlo"]
    choices = kernel_choices(fmap)
    assert len(choices) == sum(1 for e in fmap if e.stablehlo_ops or e.is_kernel)
    kernel = next(e for e in fmap if e.is_kernel and e.jaxpr_eqns)
    picked = select(fmap, stablehlo, kernel=kernel.kernel)
    assert picked.picked is Picked.KERNEL and picked.kernels == [kernel.kernel]
    assert picked.ops == [o["id"] for o in kernel.stablehlo_ops] and picked.lines == set(
        kernel.lines
    )
    eqns = selected_eqns(picked, fmap, report.graph_models["jaxpr"])
    assert sorted(n.id for n in eqns) == sorted(e["id"] for e in kernel.jaxpr_eqns)


def test_picking_an_op_finds_its_kernel_and_a_line_finds_both(report: Report) -> None:
    fmap, stablehlo = report.fusion_map, report.graph_models["stablehlo"]
    tanh = next(i for label, i in op_choices(stablehlo).items() if "tanh" in label)
    by_op = select(fmap, stablehlo, op=tanh)
    assert by_op.picked is Picked.OP and by_op.ops == [tanh] and by_op.kernels
    assert any(
        tanh in [o["id"] for o in e.stablehlo_ops] for e in fmap if e.kernel in by_op.kernels
    )
    assert selected_eqns(by_op, fmap, report.graph_models["jaxpr"]) == []  # ops map to kernels
    (line,) = by_op.lines
    by_line = select(fmap, stablehlo, line=line)
    assert tanh in by_line.ops and set(by_op.kernels) <= set(by_line.kernels)


def test_no_pick_lights_nothing_and_every_op_is_found(report: Report) -> None:
    nothing = select(report.fusion_map, report.graph_models["stablehlo"])
    assert not nothing and nothing.picked is Picked.NOTHING and nothing.ops == []
    assert missing_ops(report.fusion_map, report.graph_models["stablehlo"]) == []
