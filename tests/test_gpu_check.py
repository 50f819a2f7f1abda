"""bench/gpu_check.py and .sh: the dry mode (what a machine without a GPU runs), the
profile's attribution read from a report, and the whole check on the CPU for one
sample, so the GPU run's code paths are verified here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from viz.fusion.profile import KernelTime, Profile
from viz.report import Report
from viz.samples import list_samples
from viz.worker.protocol import Analyzed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from gpu_check import all_profiles, profile_outcome  # noqa: E402


def run(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable}  # the script's python: this one's, venv or not
    return subprocess.run(
        list(argv), cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def rows(text: str) -> dict[str, str]:
    """item -> status, from the printed table."""
    found = {}
    for line in text.splitlines():
        for status in ("PASS", "FAIL", "SKIP", "WOULD"):
            item, sep, _ = line.partition(f"  {status} ")
            if sep:
                found[item.strip()] = status
    return found


def profiled(step_s: float, *kernel_s: float) -> Analyzed:
    kernels = [KernelTime(f"fusion.{i}", 5, t, 5 * t, t / step_s) for i, t in enumerate(kernel_s)]
    return Analyzed.of(Report(profile=Profile("jax.profiler", 5, step_s, kernels)))


def test_dry_mode_lists_every_sample_and_exits_0() -> None:
    out = run(sys.executable, "bench/gpu_check.py", "--dry")
    assert out.returncode == 0, out.stderr
    found = rows(out.stdout)
    for sample in list_samples():
        assert any(item.startswith(f"analyze {sample.name} on gpu") for item in found), sample
    assert found["cache lab hit/miss on gpu: MISS hit MISS hit"] == "WOULD"
    # the one item cheap without a GPU runs for real (its verdict is the app's)
    assert found["gpu unavailable -> device_unavailable"] in ("PASS", "FAIL")


def test_the_script_runs_the_dry_mode_without_nvidia_smi() -> None:
    out = run("bash", "bench/gpu_check.sh", "--dry")
    assert out.returncode == 0, out.stderr
    assert "dry mode" in out.stdout


def test_a_profile_passes_with_80_percent_of_its_step_in_named_kernels() -> None:
    ok, detail = profile_outcome(profiled(1e-3, 6e-4, 2.5e-4))
    assert ok and detail.startswith("85% of a 1.000 ms step in 2 kernels")
    ok, detail = profile_outcome(profiled(1e-3, 5e-4))
    assert not ok and "unattributed 0.500 ms" in detail


def test_no_per_kernel_events_fail_with_the_reason() -> None:
    reply = profiled(1e-3)
    reply.report.profile.per_kernel_events = False
    ok, detail = profile_outcome(reply)
    assert not ok and "no per-kernel events" in detail


def test_all_profiles_weigh_each_step_by_its_time() -> None:
    small, large = profiled(1e-5, 1e-6), profiled(1e-2, 9e-3)  # 10 % and 90 %
    ok, detail = all_profiles([small, large])
    assert ok and detail.startswith("90% of 10.0 ms over 2 steps")


@pytest.mark.slow
def test_the_whole_check_on_the_cpu_for_one_sample() -> None:
    """Every item of a GPU run, on the CPU: about 5 s."""
    out = run(
        sys.executable, "bench/gpu_check.py", "--device", "cpu", "--samples", "elementwise_chain"
    )
    found = rows(out.stdout)
    for item in (
        "worker on cpu",
        "two workers on cpu at once",
        "cache lab hit/miss on cpu",
        "sharded compile",
        "compile profile on cpu",
        "analyze elementwise_chain",
    ):
        assert found.get(item) == "PASS", (item, out.stdout, out.stderr[-2000:])
    # a share of wall time: on a busy shared machine it may dip, so only its reading is checked
    assert found.get("profile elementwise_chain >= 80% named") in ("PASS", "FAIL")
    assert "% of a " in out.stdout and "ms step in 1 kernels" in out.stdout
    assert "gpu unavailable -> device_unavailable" in found
    assert out.returncode == (1 if "FAIL" in found.values() else 0)
