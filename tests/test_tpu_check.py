"""bench/tpu_check.py on the CPU: every item of issue #58's acceptance runs (those only a
TPU can pass are skipped, each with its reason), and `--record` writes fixtures the
readers read back: the check a TPU session runs is known to work before it gets a chip."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_device_kernels import LAYERS_24, recorded_profile
from test_gpu_check import rows
from test_memory_tpu import chip_report, with_parts

from viz.fusion.profile import profile_of
from viz.ir.hlo import read_hlo_text
from viz.ir.kernels import kernel_names
from viz.platforms.trace import ASYNC_HALVES, read_trace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from tpu_check import xla_peak_agrees

ROOT = Path(__file__).resolve().parent.parent
TPU_ONLY = (
    "timed kernels have FLOPs and bytes, or why not",
    "every costed, timed kernel on the roofline",
    ">= 90% of the device time on named kernels",
    "a second process on a held chip",
    "the Pallas kernel's Mosaic text opens",
    "the device's memory_stats beside XLA's peak",
    "the Pallas program: XLA's peak, counted as XLA does, within 5 %",
)


def test_every_item_runs_on_the_cpu_and_the_recorded_fixtures_read_back(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "bench/tpu_check.py", "--device", "cpu", "--sample", "dot_plus_one",
         "--record", str(tmp_path)],
        cwd=ROOT, env={**os.environ}, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    found = rows(out.stdout)
    assert found, out.stdout + out.stderr
    for item in TPU_ONLY:
        assert found[item] == "SKIP", item
    for item in (
        "--profile dot_plus_one: kernels timed",
        "device time beside wall time on cpu",
        "compile profile on cpu has XLA's spans",
        "a Pallas kernel named, timed, its body found",
        "the API: viz.analyze(..., device='cpu', profile=True)",
        "record pallas_forward",
    ):
        assert found[item] == "PASS", (item, out.stdout)
    # until the platform seam lists tpu, the picker's row fails: it must not crash
    assert found["the picker offers tpu (analyze --help)"] in ("PASS", "FAIL")
    recorded = tmp_path / "pallas_forward"
    manifest = json.loads((recorded / "manifest.json").read_text())
    assert manifest["versions"]["jax"] and manifest["device_kind"]
    names = set(kernel_names(read_hlo_text((recorded / "compiled.hlo.txt").read_text())))
    profile = profile_of(read_trace(recorded / "trace.json.gz"), names, runs=5, step_s=1e-3)
    assert profile.per_kernel_events
    assert (recorded / "jaxpr.txt").read_text().count("pallas_call") == 1
    assert any((recorded / "dump").iterdir())


@pytest.fixture
def recorded_check():
    """The check's roofline items as on the chip: its 24-layer report holding the profile
    read from the trace recorded there (tests/fixtures/tpu_v5e)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import tpu_check

    from viz.report import Report

    made = []

    def check_of(profile):
        made.append(tpu_check.Check("tpu", tpu_check.PROFILE_SAMPLE))
        made[-1].reports["profile"] = Report(profile=profile)
        return made[-1]

    yield check_of
    for check in made:
        shutil.rmtree(check.folder, ignore_errors=True)


def test_the_roofline_items_pass_on_the_recorded_chip_and_name_xlas_own_kernels(
    recorded_check,
) -> None:
    profile = recorded_profile(LAYERS_24)
    check = recorded_check(profile)
    passed, said = check.flops_and_bytes()
    assert passed and "tpu_custom_call: online-softmax ×24" in said, said
    passed, said = check.on_roofline()
    costed = sum(k.flops is not None and k.mean_s > 0 for k in profile.kernels)
    halves = sum(k.category in ASYNC_HALVES for k in profile.kernels)
    assert passed and said.startswith(f"{costed - halves:,} of {costed:,} costed, timed"), said
    assert "24 kernels that XLA's TPU compiler wrote itself (online-softmax ×24" in said, said
    assert "cost_estimate" not in said, said  # no Pallas kernel of the user's
    assert f"{halves} kernels (copy-done ×" in said and "asynchronous copies" in said, said


def test_the_roofline_items_fail_on_a_kernel_left_out_without_a_reason(recorded_check) -> None:
    profile = recorded_profile(LAYERS_24)
    silent = next(k for k in profile.kernels if k.no_cost)
    silent.no_cost = ""  # no cost, and no word why
    passed, said = recorded_check(profile).flops_and_bytes()
    assert not passed and f"no reason: {silent.name}" in said
    profile.device_kind = "a chip nobody published"  # no peaks: nothing is placed
    passed, said = recorded_check(profile).on_roofline()
    assert not passed and "no peaks" in said


def test_the_peak_items_compare_xlas_count_with_the_same_count_on_the_chips_reports() -> None:
    """On the chip's Pallas report: XLA's 1,835,008 B is HBM's 1,310,720 plus the
    kernel's VMEM output, 524,288; the HBM peak alone is 29 % off. The parts the chip's
    run counted are those its recorded dump gives here."""
    on_chip = chip_report("pallas").memory
    assert on_chip.xla_peak_parts == with_parts("pallas").memory.xla_peak_parts
    assert xla_peak_agrees(on_chip) == (
        True,
        "XLA's count made from the profile 1,835,008 B (HBM 1,310,720 + VMEM 524,288 at "
        "forward.1) vs XLA's 1,835,008 (0.0%); HBM peak 1,310,720 B",
    )
    older = dataclasses.replace(on_chip, xla_peak_parts=None)  # a report from before the parts
    agrees, said = xla_peak_agrees(older)
    assert not agrees and said.startswith("no parts of XLA's peak")
