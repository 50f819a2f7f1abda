"""bench/tpu_check.py on the CPU: every item of issue #58's acceptance runs (those only a
TPU can pass are skipped, each with its reason), and `--record` writes fixtures the
readers read back: the check a TPU session runs is known to work before it gets a chip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_gpu_check import rows
from test_memory_tpu import chip_report, with_parts

from viz.fusion.profile import profile_of
from viz.ir.hlo import read_hlo_text
from viz.ir.kernels import kernel_names
from viz.platforms.trace import read_trace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from tpu_check import xla_peak_agrees

ROOT = Path(__file__).resolve().parent.parent
TPU_ONLY = (
    "every timed kernel has FLOPs and bytes",
    "every timed kernel on the roofline",
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


def test_the_peak_items_compare_xlas_count_with_the_same_count_on_the_chips_reports() -> None:
    """On the chip's Pallas report, given the parts its dump makes: XLA's 1,835,008 B is
    HBM's 1,310,720 plus the kernel's VMEM output, 524,288; the HBM peak alone is 29 % off."""
    assert xla_peak_agrees(with_parts("pallas").memory) == (
        True,
        "XLA's count made from the profile 1,835,008 B (HBM 1,310,720 + VMEM 524,288 at "
        "forward.1) vs XLA's 1,835,008 (0.0%); HBM peak 1,310,720 B",
    )
    agrees, said = xla_peak_agrees(chip_report("pallas").memory)  # recorded before the parts
    assert not agrees and said.startswith("no parts of XLA's peak")
