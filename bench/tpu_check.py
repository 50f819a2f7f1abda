"""The prepared TPU check (issue #58): one run on a real chip that goes through every
acceptance item of the issue and prints a table of what works; `--record DIR` also
saves the chip's real artifacts as test fixtures.

Items, each in a process of its own as a user runs them (the CLI from a folder outside
the clone; one process at a time, since one process owns a TPU chip):
- the picker offers the device: `python -m viz analyze --help` names `tpu`;
- `--profile` on the 24-layer sample times >= 100 kernels with FLOPs and bytes, the
  others each named with why XLA knows no cost for it (a Pallas kernel given no
  `cost_estimate=`); every kernel with a cost and device time placed on the chip's
  roofline, the rest named with their reason; and >= 90 % of the program's device time
  lands on named kernels;
- the run's device time is shown beside its wall time (the JSON's `timings.device_s`
  and the CLI's "host and dispatch" line; on CPU: "the same clock");
- the compile profile has XLA's spans (on TPU `XLA::TPU emitting for <kernel>`);
- a Pallas kernel (`pl.pallas_call`, interpreted on CPU) is named by its function,
  with its device time, and the fusion map counts its body as found;
- its own IR, the Mosaic module, is kept on its kernel (`kernel_ir`) for the Fusion
  view to open (TPU only: interpreted on CPU, it has none);
- after the runs, the device's own `memory_stats()` is in the report's memory section
  and the CLI, beside XLA's peak (TPU only: the CPU keeps none);
- the same through the API: `viz.analyze(..., device=D, profile=True)` in the user's
  own process, on the Pallas program;
- a second process on a held chip waits or names the holder.
Every item is caught and reported: item, PASS/FAIL/SKIP (with the reason), seconds.

`--record DIR` (after the items, the chip free again): for the 24-layer sample, the
Pallas program and an out-of-memory compile, under DIR/<program>/: the profiler's
Perfetto trace (trace.json.gz), the jaxpr, the StableHLO, the compiled HLO text, XLA's
dump files (dump/), the out-of-memory message (oom.txt) and a manifest.json with the
versions that made them; the fixtures the TPU readers' tests read
(tests/fixtures/tpu_v5e/<program>/).

Usage:
  python bench/tpu_check.py                          on tpu
  python bench/tpu_check.py --device cpu --sample mlp   every item on the CPU (the
                                                     TPU-only ones skipped, with why)
  python bench/tpu_check.py --record tests/fixtures/tpu_v5e
Exit status: 1 when an item failed, else 0.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere, installed or not
sys.path.insert(0, str(ROOT / "bench"))

from gpu_check import Outcome, Row, print_table, timed  # noqa: E402

from viz.fusion.profile import Profile  # noqa: E402
from viz.fusion.roofline import named_groups, roofline, unplaced_words  # noqa: E402
from viz.memory.model import Memory  # noqa: E402
from viz.report import Report  # noqa: E402

MIN_KERNELS = 100  # timed kernels on the 24-layer sample
ON_NAMED = 0.90  # of the program's device time
TIMEOUT_S = 600.0  # per process: opening a chip takes 6-11 s, the 24-layer compile a minute
PROFILE_SAMPLE = "transformer_24"
PALLAS_ARGS = "f32[256,512], f32[256,512]"
PALLAS_CODE = """\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + y_ref[...]


def forward(x, y):
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    z = pl.pallas_call(add_kernel, out_shape=out, interpret={interpret})(x, y)
    return jnp.tanh(z @ y.T)
"""
# issue #59's programs: a sort then a cumsum (its peak, its lines, and past the chip's
# memory its out-of-memory), and a narrow array that a TPU's tiles pad
MEMORY_CODE = """\
import jax.numpy as jnp


def sort_cumsum(x):
    y = jnp.sort(x, axis=1)
    return jnp.cumsum(y, axis=1)


def narrow(x):
    return jnp.tanh(x) * 2.0 + 1.0
"""
PEAK_ARGS = "f32[2048,8192]"
NARROW_ARGS = "f32[65536,3]"
OOM_ARGS = "f32[1000000,2048]"  # 8 GiB in, its sort 8 GiB more: past a v5e's 15.75 GiB
PEAK_WITHIN = 0.05  # of XLA's peak_memory_in_bytes
# A process that holds the chip: it tries for 30 s (a chip just given back by the last
# item's process can refuse for a few seconds), then says "held" and sleeps
HOLD_CHIP = """\
import time
for _ in range(30):
    try:
        import jax
        jax.devices("tpu")
        break
    except RuntimeError as exc:
        error = exc
        time.sleep(1)
else:
    print(f"failed: {error}", flush=True)
    raise SystemExit(1)
print("held", flush=True)
time.sleep(600)
"""
NOT_OUT_OF_MEMORY = 3  # a record child's exit status: the program compiled (it fits)


class Check:
    """One run of the items on a device, from a scratch folder outside the clone."""

    def __init__(self, device: str, sample: str) -> None:
        self.device, self.sample = device, sample
        self.platform = device.partition(":")[0]
        self.folder = Path(tempfile.mkdtemp(prefix="jitscope-tpu-check-"))
        # ahead of, not instead of, the user's path (a TPU machine's JAX is found through it)
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        self.env = {**os.environ, "PYTHONPATH": path, "JITSCOPE_HOME": str(self.folder)}
        self.pallas = self.folder / "pallas_forward.py"
        self.pallas.write_text(PALLAS_CODE.format(interpret=self.platform == "cpu"))
        self.memcase = self.folder / "memcase.py"
        self.memcase.write_text(MEMORY_CODE)
        self.reports: dict[str, Report] = {}
        self.stdout: dict[str, str] = {}

    def cli(self, *argv: str, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "viz", *argv],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def analyze(self, name: str, target: str, *extra: str) -> Report:
        """`jitscope analyze TARGET --device D --json` (kept by `name`)."""
        out = self.folder / f"{name}.json"
        proc = self.cli("analyze", target, "--device", self.device, "--json", str(out), *extra)
        if not out.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"no report (exit {proc.returncode}): {' / '.join(tail)}")
        self.stdout[name] = proc.stdout
        self.reports[name] = Report.from_dict(json.loads(out.read_text()))
        return self.reports[name]

    # -- the items ---------------------------------------------------------------------

    def picker(self) -> Outcome:
        said = self.cli("analyze", "--help", timeout=60).stdout
        line = next((x.strip() for x in said.splitlines() if x.strip().startswith("--device")), "")
        return "tpu" in said, f"--device help: {line[:120]}"

    def profiled(self) -> Report:
        report = self.reports.get("profile")
        if report is None:
            target = f"sample:{self.sample}"
            report = self.analyze("profile", target, "--profile", "--runs", "5")
        if report.error is not None:
            raise RuntimeError(f"{report.error.kind}: {report.error.message[:200]}")
        return report

    def kernels_timed(self) -> Outcome:
        profile = self.profiled().profile
        if profile is None or not profile.kernels:
            return False, "no kernel timed: " + "; ".join(self.profiled().warnings)[:200]
        least = self._least_kernels()
        top = ", ".join(f"{k.name} {k.share:.0%}" for k in profile.kernels[:3])
        return len(profile.kernels) >= least, f"{len(profile.kernels)} kernels timed ({top})"

    def flops_and_bytes(self) -> Outcome:
        """Kernels timed with FLOPs and bytes; each other one named with why it has none."""
        profile = self._profile()
        known = [k for k in profile.kernels if k.flops is not None and k.bytes_accessed is not None]
        if self.platform == "cpu":
            return None, f"the cpu trace carries no FLOPs or bytes ({len(known)} kernels have them)"
        unknown = [k for k in profile.kernels if k not in known]
        unsaid = [k.name for k in unknown if not k.no_cost]
        reasons: dict[str, list[str]] = {}
        for k in unknown:
            reasons.setdefault(k.no_cost or "no reason", []).append(k.name)
        said = "; ".join(f"{why}: {named_groups(names)}" for why, names in reasons.items())
        seen = f"{len(known):,} of {len(profile.kernels):,}" + (
            f"; no cost: {said}" if said else ""
        )
        return len(known) >= self._least_kernels() and not unsaid, seen

    def _least_kernels(self) -> int:
        return MIN_KERNELS if self.sample == PROFILE_SAMPLE else 1

    def on_roofline(self) -> Outcome:
        """Every kernel with a cost and device time is placed, or named with why not (an
        async copy's half: its time is no transfer's); every other one named with why."""
        profile = self._profile()
        line = roofline(profile)
        if self.platform == "cpu":
            return None, f"no peaks or FLOPs on cpu: {line.note}"
        placed = {p.kernel for p in line.points}
        named = {k.name for kernels in line.unplaced.values() for k in kernels}
        missing = [k.name for k in profile.kernels if k.name not in placed | named]
        costed = sum(k.flops is not None and k.mean_s > 0 for k in profile.kernels)
        bounds = {b: sum(p.bound == b for p in line.points) for b in ("memory", "compute")}
        peaks = line.peaks.chip if line.peaks else f"no peaks ({line.note})"
        seen = f"{len(placed):,} of {costed:,} costed, timed kernels on the {peaks} roofline "
        seen += f"{bounds}, the rest named: " + "; ".join(unplaced_words(line).values())
        if missing:
            seen = f"neither placed nor named: {', '.join(missing[:5])}; {seen}"
        return line.peaks is not None and not missing, seen

    def device_time_named(self) -> Outcome:
        profile = self._profile()
        if profile.device_step_s is None:
            if self.platform == "cpu":
                return None, "no device clock on cpu: the step is the wall time"
            return False, "the trace gave no program device time (XLA Modules)"
        named = sum(k.mean_s for k in profile.kernels) / profile.device_step_s
        return named >= ON_NAMED, f"{named:.0%} of {profile.device_step_s * 1e3:.3f} ms named"

    def device_beside_wall(self) -> Outcome:
        t = self.profiled().timings
        said = [x for x in self.stdout["profile"].splitlines() if "clock" in x or "device" in x]
        line = said[-1] if said else "(no device line printed)"
        if self.platform == "cpu":
            return t.device_clock == "host" and "same clock" in line, line
        return t.device_s is not None and "host and dispatch" in line, line

    def compile_spans(self) -> Outcome:
        report = self.analyze("compile", "sample:mlp", "--runs", "0", "--compile-profile")
        p = report.compile_profile
        if p is None:
            return False, "no compile profile: " + "; ".join(report.warnings)[:200]
        if p.error is not None:
            return False, p.error.message[:200]
        seen = f"{p.xla_spans} spans, {p.depth} levels, {len(p.kernels)} kernels' codegen"
        seen += f", {(p.xla_covered or 0):.0%} covered"
        return bool(p.xla) and p.depth >= 2, seen

    def pallas_kernel(self) -> Outcome:
        report = self.analyze(
            "pallas", f"{self.pallas}::forward", "--args", PALLAS_ARGS, "--profile", "--runs", "5"
        )
        if report.error is not None:
            return False, f"{report.error.kind}: {report.error.message[:200]}"
        cov = report.fusion_map_coverage.jaxpr if report.fusion_map_coverage else None
        titled = [e for e in report.fusion_map if e.title == "add_kernel"]
        seen = f"{(cov or 0):.0%} of jaxpr eqns found"
        if self.platform == "cpu":
            return cov == 1.0, seen + " (interpreted on cpu: its body is inlined, no custom call)"
        if not titled:
            return False, seen + "; no kernel titled add_kernel"
        times = {k.name: k for k in (report.profile.kernels if report.profile else [])}
        timed_kernel = times.get(titled[0].kernel)
        if timed_kernel is None:
            return False, seen + f"; {titled[0].kernel} (add_kernel) not timed"
        seen += f"; {titled[0].kernel} (add_kernel) {timed_kernel.mean_s * 1e6:.1f} µs"
        return cov == 1.0, seen

    def kernel_ir(self) -> Outcome:
        """The Pallas kernel's own IR (its Mosaic module) kept on its fusion map entry."""
        report = self.reports.get("pallas")
        if self.platform == "cpu":
            return None, "interpreted on cpu: no Mosaic module (tests/fixtures/tpu_v5e_lowered)"
        if report is None:
            return False, "no Pallas report (see the Pallas row)"
        titled = [e for e in report.fusion_map if e.title == "add_kernel"]
        text = titled[0].kernel_ir if titled else ""
        if not text:
            return False, "no kernel titled add_kernel holds its IR" if titled else "no kernel"
        first = next((x.strip() for x in text.splitlines() if "func.func" in x), "")
        return "@add_kernel" in first, f"{len(text.splitlines())} lines: {first[:100]}"

    def memory_stats(self) -> Outcome:
        """The device's own count after the runs, beside XLA's peak, in the JSON and CLI."""
        report = self.profiled()
        device = report.memory.device if report.memory else None
        said = [x for x in self.stdout["profile"].splitlines() if "memory_stats" in x]
        if self.platform == "cpu":
            return None, f"the cpu keeps no memory_stats: {device=}, {len(said)} lines printed"
        if device is None:
            return False, "no memory_stats in the report"
        return bool(said), said[0].strip()[:200] if said else "no memory_stats line printed"

    def memory_peak(self) -> Outcome:
        """#59: the sort and cumsum's peak against XLA's, its largest buffers and lines."""
        args = "--args", PEAK_ARGS, "--runs", "1"
        report = self.analyze("peak", f"{self.memcase}::sort_cumsum", *args)
        mem = report.memory
        if report.error is not None or mem is None or mem.peak_bytes is None:
            why = report.error.message if report.error else (mem and mem.profile_warning)
            return False, f"no peak: {str(why)[:200]}"
        rows = mem.at_peak[:3]
        top = ", ".join(f"{b.dtype}{b.shape} {b.where or b.argument or b.note}" for b in rows)
        if self.platform == "cpu":
            return None, f"peak {mem.peak_bytes:,} B (cpu: XLA's peak counts no temporaries); {top}"
        agrees, seen = xla_peak_agrees(mem)
        lined = all(b.where or b.argument or b.note for b in mem.at_peak if b.bytes > 1 << 20)
        return agrees and lined, f"{seen}; {top}"

    def pallas_peak(self) -> Outcome:
        """#59: the Pallas program's XLA peak (its kernel's output lives in VMEM), as ours."""
        report = self.reports.get("pallas")
        if self.platform == "cpu":
            return None, "cpu: XLA's peak counts the arguments and outputs, no memory space apart"
        if report is None or report.memory is None or report.memory.peak_bytes is None:
            return False, "no Pallas report with a memory profile (see the Pallas row)"
        return xla_peak_agrees(report.memory)

    def padding(self) -> Outcome:
        """#59: an f32[65536,3] program names its padding (TPU tiles; the CPU pads nothing)."""
        args = "--args", NARROW_ARGS, "--runs", "1"
        report = self.analyze("narrow", f"{self.memcase}::narrow", *args)
        rows = report.memory.at_peak if report.memory else []
        padded = [b for b in rows if b.padded_bytes > b.logical_bytes]
        said = [x.strip() for x in self.stdout["narrow"].splitlines() if "padding" in x]
        if self.platform == "cpu":
            return not padded and not said, f"cpu pads nothing: {len(padded)} padded, {said[:1]}"
        return bool(padded) and bool(said), said[0][:200] if said else "no padding line printed"

    def out_of_memory(self) -> Outcome:
        """#59: past the chip's memory, the refusal names the buffers, lines, and no None."""
        if self.platform == "cpu":
            return None, "the cpu worker's limit, not HBM: tests/test_memory_estimate.py"
        args = "--args", OOM_ARGS, "--runs", "1"
        report = self.analyze("oom", f"{self.memcase}::sort_cumsum", *args)
        said = self.stdout["oom"]
        if report.error is None:
            return False, f"{OOM_ARGS} compiled and ran: no out-of-memory"
        named = "memcase.py:" in said and "1000000" in said.replace(",", "")
        ok = report.error.kind == "out_of_memory" and named and "None" not in said
        return ok, f"{report.error.kind}: {report.error.message[:160]}"

    def api(self) -> Outcome:
        """`viz.analyze` in the user's own process, on the Pallas program."""
        script = (
            "import json, sys; sys.path.insert(0, sys.argv[1]); import viz; "
            "from pallas_forward import forward; "
            f"r = viz.analyze(forward, {PALLAS_ARGS!r}, device=sys.argv[2], runs=3, "
            "profile=True); p = r.profile; "
            "print(json.dumps({'error': r.error and r.error.message, "
            "'kernels': len(p.kernels) if p else 0, 'device_s': r.timings.device_s, "
            "'clock': r.timings.device_clock}))"
        )
        proc = subprocess.run(
            [sys.executable, "-c", script, str(self.folder), self.device],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        if proc.returncode != 0:
            return False, (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
        clock_ok = seen["clock"] == "host" if self.platform == "cpu" else seen["device_s"]
        return not seen["error"] and seen["kernels"] > 0 and bool(clock_ok), str(seen)

    def second_process(self) -> Outcome:
        """Hold the chip in another process, then analyze: jitscope must name the holder
        (or wait), not fail in libtpu's words or run as if the chip were free."""
        if self.platform != "tpu":
            return None, f"{self.platform} is not owned by one process"
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_CHIP], env=self.env, stdout=subprocess.PIPE, text=True
        )
        try:
            said_by_holder = holder.stdout.readline().strip()  # type: ignore[union-attr]
            if said_by_holder != "held":
                return False, f"the holder could not open the chip: {said_by_holder!r}"
            proc = self.cli("analyze", "sample:mlp", "--device", "tpu", "--runs", "0", timeout=120)
        finally:
            holder.kill()
            holder.wait()
        said = (proc.stdout + proc.stderr).strip()
        (self.folder / "second_process.txt").write_text(f"holder pid {holder.pid}\n{said}\n")
        named = str(holder.pid) in said and "holds the TPU chip" in said
        error = next((x for x in said.splitlines() if x.startswith("error")), "no error line")
        return named, error[:200]

    def _profile(self) -> Profile:
        profile = self.profiled().profile
        if profile is None:
            raise RuntimeError("no profile in the report")
        return profile


def xla_peak_agrees(memory: Memory) -> Outcome:
    """XLA's peak_memory_in_bytes against the same count made from the profile (on a
    TPU: HBM's arguments, outputs and constants plus VMEM at its peak), within 5 %,
    the HBM peak beside it."""
    parts, xla = memory.xla_peak_parts, memory.xla_peak_bytes
    if parts is None or not xla:
        return False, f"no parts of XLA's peak to compare ({xla=}, peak {memory.peak_bytes})"
    off = abs(parts.bytes - xla) / xla
    at = f" at {parts.instruction}" if parts.instruction else ""
    return off <= PEAK_WITHIN, (
        f"XLA's count made from the profile {parts.bytes:,} B (HBM {parts.held_bytes:,} + "
        f"VMEM {parts.space_bytes:,}{at}) vs XLA's {xla:,} ({off:.1%}); "
        f"HBM peak {memory.peak_bytes:,} B"
    )


def run_items(check: Check) -> list[Row]:
    d = check.device
    return [
        timed("the picker offers tpu (analyze --help)", check.picker),
        timed(f"--profile {check.sample}: kernels timed", check.kernels_timed),
        timed("timed kernels have FLOPs and bytes, or why not", check.flops_and_bytes),
        timed("every costed, timed kernel on the roofline", check.on_roofline),
        timed(f">= {ON_NAMED:.0%} of the device time on named kernels", check.device_time_named),
        timed(f"device time beside wall time on {d}", check.device_beside_wall),
        timed(f"compile profile on {d} has XLA's spans", check.compile_spans),
        timed("a Pallas kernel named, timed, its body found", check.pallas_kernel),
        timed("the Pallas kernel's Mosaic text opens", check.kernel_ir),
        timed("the device's memory_stats beside XLA's peak", check.memory_stats),
        timed(f"the API: viz.analyze(..., device={d!r}, profile=True)", check.api),
        timed("a second process on a held chip", check.second_process),
        timed(
            f"sort+cumsum {PEAK_ARGS}: XLA's peak, counted as XLA does, within 5 %",
            check.memory_peak,
        ),
        timed("the Pallas program: XLA's peak, counted as XLA does, within 5 %", check.pallas_peak),
        timed(f"{NARROW_ARGS}: its padding named", check.padding),
        timed(f"{OOM_ARGS}: the out-of-memory explained", check.out_of_memory),
    ]


# -- recording the fixtures -------------------------------------------------------------
def record(check: Check, out: Path, only: list[str]) -> list[Row]:
    """Each program recorded by a child process of its own (the chip is one process's)."""
    programs = {
        PROFILE_SAMPLE: ("sample", PROFILE_SAMPLE, ""),
        "pallas_forward": (str(check.pallas), "forward", PALLAS_ARGS),
        "sort_cumsum": (str(check.memcase), "sort_cumsum", PEAK_ARGS),
        "narrow": (str(check.memcase), "narrow", NARROW_ARGS),
        "oom": (str(check.memcase), "sort_cumsum", OOM_ARGS),
    }
    rows = []
    for name, (kind, what, spec) in programs.items():
        if only and name not in only:
            continue
        folder = out / name
        argv = [sys.executable, __file__, "--record-child", name, kind, what, spec, str(folder)]
        argv += ["--device", check.device]

        def child(argv: list[str] = argv, folder: Path = folder) -> Outcome:
            proc = subprocess.run(
                argv, env=check.env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
            )
            if proc.returncode == NOT_OUT_OF_MEMORY:
                return None, f"{check.device} compiled {OOM_ARGS} without running out of memory"
            if proc.returncode != 0:
                return False, (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
            files = sorted(p.name for p in folder.iterdir())
            return True, f"{folder}: {', '.join(files)[:160]}"

        rows.append(timed(f"record {name}", child))
    return rows


def record_child(name: str, kind: str, what: str, spec: str, folder: Path, device: str) -> None:
    """Record one program's artifacts into `folder` (in this process's own JAX)."""
    from viz.samples import get_sample
    from viz.settings import Settings
    from viz.stages import block, trace
    from viz.target import Target

    if kind == "sample":
        sample = get_sample(what)
        settings = Settings(code=sample.code, function=sample.function, static=list(sample.static))
        spec = sample.args
    else:
        settings = Settings(code=Path(kind).read_text(), function=what)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    target = Target.from_settings(replace_device(settings, device))
    traced = trace(target, target.args(spec))
    (folder / "jaxpr.txt").write_text(str(traced.jaxpr))
    lowered = traced.lower()
    (folder / "stablehlo.mlir").write_text(lowered.text())
    dump = {"xla_dump_to": str(folder / "dump"), "xla_dump_hlo_as_text": True}
    dump["xla_dump_hlo_as_proto"] = True
    try:
        compiled = lowered.compile(dump)
    except Exception as exc:  # the out-of-memory case: its message is the artifact
        (folder / "oom.txt").write_text(f"{type(exc).__name__}: {exc}\n")
        write_manifest(folder, name, device, spec)
        return
    if name == "oom":  # the out-of-memory program compiled: nothing of it to keep
        shutil.rmtree(folder)
        sys.exit(NOT_OUT_OF_MEMORY)
    (folder / "compiled.hlo.txt").write_text(compiled.text())
    memory = {"memory_analysis": compiled.memory()}
    profile_trace(compiled.runner(6), block, folder)
    memory["memory_stats_after_runs"] = compiled._memory_stats()
    (folder / "memory.json").write_text(json.dumps(memory, indent=1) + "\n")
    if name != PROFILE_SAMPLE:  # the 24-layer compile's trace is large: the small ones'
        compile_trace(lowered, folder)
    write_manifest(folder, name, device, spec)


def replace_device(settings: Any, device: str) -> Any:
    from dataclasses import replace

    return replace(settings, device=device)


def profile_trace(call: Any, block: Any, folder: Path) -> None:
    """Five calls under jax.profiler; its Perfetto trace kept as trace.json.gz."""
    import jax

    from viz.fusion.profile import newest

    block(call())
    raw = folder / "profiler"
    jax.profiler.start_trace(str(raw), create_perfetto_trace=True)
    try:
        for _ in range(5):
            block(call())
    finally:
        jax.profiler.stop_trace()
    found = newest(raw, "perfetto_trace.json.gz")
    if found is not None:
        shutil.copyfile(found, folder / "trace.json.gz")
    shutil.rmtree(raw, ignore_errors=True)


def compile_trace(lowered: Any, folder: Path) -> None:
    """The compile once more, under jax.profiler as `--compile-profile` runs it (caches
    off): its Perfetto trace kept as compile_trace.json.gz, what jitscope read of it as
    compile_profile.json."""
    from viz.compile_profile import run
    from viz.fusion.profile import newest

    raw = folder / "compile_profiler"
    with run.persistent_cache_off():
        profile = run._profiled_compile(lowered, str(raw))
    found = newest(raw, "perfetto_trace.json.gz")
    if found is not None:
        shutil.copyfile(found, folder / "compile_trace.json.gz")
    (folder / "compile_profile.json").write_text(json.dumps(profile.to_dict(), indent=1) + "\n")
    shutil.rmtree(raw, ignore_errors=True)


def write_manifest(folder: Path, name: str, device: str, spec: str) -> None:
    import jax

    def version(package: str) -> str | None:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return None

    first = jax.devices(device.partition(":")[0])[0]
    manifest = {
        "program": name,
        "args": spec,
        "device": device,
        "device_kind": first.device_kind,
        "platform": first.platform,
        "versions": {p: version(p) for p in ("jax", "jaxlib", "libtpu", "libtpu-nightly")},
        "recorded": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "by": "bench/tpu_check.py --record",
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


def main() -> int:
    args = parse_args()
    if args.record_child:
        name, kind, what, spec, folder = args.record_child
        record_child(name, kind, what, spec, Path(folder), args.device)
        return 0
    check = Check(args.device, args.sample or (PROFILE_SAMPLE if args.device == "tpu" else "mlp"))
    rows = [] if args.no_items else run_items(check)
    if args.record:
        rows += record(check, Path(args.record).resolve(), args.only or [])
    print_table(rows, f"TPU check on {args.device} ({check.folder})")
    return 1 if any(r.status == "FAIL" for r in rows) else 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=textwrap.dedent(__doc__.split("Usage:")[1]),
    )
    parser.add_argument("--device", default="tpu", help="tpu (default), or cpu to try it here")
    parser.add_argument("--sample", help=f"the sample to profile (default {PROFILE_SAMPLE} on tpu)")
    parser.add_argument("--record", metavar="DIR", help="also record the fixtures under DIR")
    parser.add_argument("--no-items", action="store_true", help="only record (with --record)")
    parser.add_argument("--only", nargs="*", help="record only these programs (with --record)")
    parser.add_argument("--record-child", nargs=5, help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(main())
