"""The compile profile's reader on a TPU's real compile traces (recorded on a TPU v5e:
tests/fixtures/tpu_v5e/*/compile_trace.json.gz, with what jitscope read of them on the
chip in compile_profile.json beside each): XLA's `XLA::TPU emitting for <kernel>` spans
credited to their kernels, read the same here on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from viz.compile_profile.spans import read_spans

RECORDED = Path(__file__).parent / "fixtures" / "tpu_v5e"
PROGRAMS = ("pallas_forward", "sort_cumsum")


def recorded(program: str) -> tuple[Path, dict]:
    folder = RECORDED / program
    read = json.loads((folder / "compile_profile.json").read_text())
    return folder / "compile_trace.json.gz", read


@pytest.mark.parametrize("program", PROGRAMS)
def test_the_tpus_compile_spans_read_here_as_they_read_on_the_chip(program: str) -> None:
    trace, on_chip = recorded(program)
    tree = read_spans(trace, on_chip["compile_s"], platform="tpu")
    assert tree.count == on_chip["xla_spans"] > 100
    assert tree.covered == pytest.approx(on_chip["xla_covered"]) and tree.covered > 0.95
    kernels = [(k.kernel, k.seconds) for k in tree.kernels]
    assert kernels == [(k["kernel"], pytest.approx(k["seconds"])) for k in on_chip["kernels"]]


def test_the_pallas_kernels_own_codegen_is_credited_to_its_custom_call() -> None:
    """`forward.1` is the Pallas kernel (`add_kernel`'s tpu_custom_call): its Mosaic
    code generation took 39 % of the compile on the chip."""
    trace, on_chip = recorded("pallas_forward")
    compiled = (RECORDED / "pallas_forward" / "compiled.hlo.txt").read_text()
    assert 'custom_call_target="tpu_custom_call"' in compiled and "%forward.1 = " in compiled
    tree = read_spans(trace, on_chip["compile_s"], platform="tpu")
    first = tree.kernels[0]
    assert first.kernel == "forward.1" and first.seconds > 0.3 * on_chip["compile_s"]
