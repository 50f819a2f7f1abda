"""The prepared GPU check (issue #21, part 3): one short run that verifies the GPU
path whenever a GPU machine is at hand. `bench/gpu_check.sh` installs the CUDA plugin
first and runs this.

Items, each through the worker as the app runs it (a `python -m viz.worker` child
with JAX_PLATFORMS=cuda), so a failure here is what a user of the app would see:
- the device: a worker starts on it and JAX lists its devices;
- two workers on it at once: the pool runs several per device;
- every sample analyzed on it, with the per-kernel profile (`profile=True`); a
  sample that must fail (EXPECT_ERROR) passes when it fails with that error kind;
- each profile attributes >= 80 % of the step time to named kernels;
- the cache lab's hit and miss sequence (miss, hit, miss naming shape and
  static_value, hit), as tests/test_cache.py and the CLI run it;
- one sharded compile with 2 or more devices: `jax.jit` of a gradient over a
  `NamedSharding` mesh, in a child process; XLA must insert an all-reduce and the
  result must match the unsharded one;
- the compile profile (issue #36) of one sample: XLA's spans of its compile read back
  from `jax.profiler`'s trace as a tree (on GPU also the `XlaPass` range of each HLO
  pass), whose top level covers 90-110 % of the compile, at least two levels deep;
- the device made unavailable (no CUDA backend, or CUDA_VISIBLE_DEVICES=""): Explore's
  Analyze must say `device_unavailable`, not show a traceback.
Every item is caught and reported; the table gives item, PASS/FAIL/SKIP, seconds.

Usage:
  python bench/gpu_check.py                 gpu when nvidia-smi exists, else the dry mode
  python bench/gpu_check.py --dry           list the items; run the cheap one (unavailable gpu)
  python bench/gpu_check.py --device cpu    every item on the CPU (sharded on 2 host devices)
  options: --samples a,b  --budget SECONDS (no sample starts later than that)
  (bench/gpu_check.sh passes how its install went: --install-status/-s/-detail)
Exit status: 0 in the dry mode; else 1 when an item failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere, installed or not

from viz.compile_profile.model import CompileProfileSection  # noqa: E402
from viz.errors import ErrorInfo  # noqa: E402
from viz.program import Program  # noqa: E402
from viz.samples import Sample, get_sample, list_samples  # noqa: E402
from viz.settings import Settings  # noqa: E402
from viz.worker import Worker  # noqa: E402
from viz.worker.protocol import (  # noqa: E402
    Analyze,
    Analyzed,
    CacheCalls,
    CacheState,
    CompileProfile,
    CompileProfiled,
    Ping,
)

ATTRIBUTED = 0.80  # of the step time, in named kernels
TIMEOUT_S = 240.0  # per request: transformer_24 compiles for about a minute on a small CPU
RUNS = 10  # timed runs per analysis (the profile adds its own 5)
# the cache lab's sequence on arange_static (tests/test_cache.py, the CLI's test)
CACHE_SAMPLE = "arange_static"
CACHE_CALLS = ["f32[16], 16", "f32[16], 16", "f32[8], 8", "f32[8], 8"]
CACHE_HITS = [False, True, False, True]
CACHE_REASONS = [("x", "shape"), ("n", "static_value")]  # of the third call


@dataclass
class Row:
    item: str
    status: str  # PASS, FAIL, SKIP, or WOULD (the dry mode's list)
    seconds: float
    detail: str = ""


Outcome = tuple[bool | None, str]  # passed (None: skipped), what was seen


def timed(item: str, check: Callable[[], Outcome]) -> Row:
    """Run one check; whatever it raises is its failure, reported, never a traceback."""
    start = time.perf_counter()
    try:
        ok, detail = check()
    except Exception as exc:  # the check must go on to the next item
        ok, detail = False, f"{type(exc).__name__}: {exc}"
    status = "SKIP" if ok is None else "PASS" if ok else "FAIL"
    return Row(item, status, time.perf_counter() - start, detail)


# -- the device and its workers ---------------------------------------------------------
def ping(worker: Worker, device: str) -> tuple[Outcome, int]:
    """A warm ping: the worker starts, imports JAX and analyzes a tiny program there."""
    reply = worker.ask(Ping(warm=True), timeout_s=TIMEOUT_S)
    if not reply.ok:
        return (False, describe_error(reply.error)), 0
    want = device.partition(":")[0]
    ok = reply.platform == want
    seen = f"jax {reply.jax_version}, {reply.device_count} x {reply.platform}: "
    return (ok, seen + ", ".join(reply.devices[:4])), reply.device_count


def two_workers(first: Worker, device: str) -> Outcome:
    """A second worker beside the first, both alive, as the pool runs them."""
    second = Worker(device, TIMEOUT_S)
    try:
        (ok, detail), _ = ping(second, device)
        again = first.ask(Ping(warm=True), timeout_s=TIMEOUT_S)
        return ok and again.ok, f"second worker: {detail}" + ("" if again.ok else "; first died")
    finally:
        second.close()


def describe_error(error: ErrorInfo | None) -> str:
    """The error kind and the first line of its message, as the app's card heads it."""
    if error is None:
        return "no error, but no answer either"
    first = (error.message or "").splitlines()[:1]
    return f"{kind_of(error)}: {first[0][:200] if first else ''}"


def kind_of(error: ErrorInfo | None) -> str | None:
    return None if error is None else getattr(error.kind, "value", str(error.kind))


# -- samples and their profiles ---------------------------------------------------------
def analyze(worker: Worker, sample: Sample, device: str) -> Analyzed:
    request = Analyze(Program.from_sample(sample).settings_on(device), runs=RUNS)
    request.profile = sample.expect_error is None
    return worker.ask(request, timeout_s=TIMEOUT_S)


def analysis_outcome(reply: Analyzed, sample: Sample, device: str) -> Outcome:
    report, error = reply.report, reply.report.error
    if sample.expect_error:
        kind = kind_of(error)
        return kind == sample.expect_error, f"error {kind} (expected {sample.expect_error})"
    if error is not None:
        return False, describe_error(error)
    missing = [
        name for name in ("jaxpr", "stablehlo", "compiled", "memory") if not getattr(report, name)
    ]
    t = report.timings
    seen = (
        f"device {report.device}, compile {t.compile_s or 0:.2f} s, run {t.run_median_s or 0:.2e} s"
        f", {report.compiled.kernel_count if report.compiled else '?'} kernels"
    )
    if missing:
        return False, f"{seen}; missing: {', '.join(missing)}"
    return report.device.startswith(device.partition(":")[0]), seen


def profile_outcome(reply: Analyzed) -> Outcome:
    """>= 80 % of the profiled step time in kernels the profile could name."""
    profile = reply.report.profile
    if profile is None:
        return False, "no profile in the report: " + "; ".join(reply.report.warnings)[:200]
    if not profile.per_kernel_events:
        return False, "the platform emitted no per-kernel events under the kernels' names"
    named = sum(k.mean_s for k in profile.kernels)
    share = named / profile.step_s if profile.step_s else 0.0
    top = ", ".join(f"{k.name} {k.share:.0%}" for k in profile.kernels[:3])
    seen = f"{share:.0%} of a {profile.step_s * 1e3:.3f} ms step in {len(profile.kernels)} kernels"
    seen += f" ({top})" if top else ""
    seen += f"; unattributed {(profile.step_s - named) * 1e3:.3f} ms" if share < ATTRIBUTED else ""
    unnamed = unnamed_events(profile.trace_file, profile.kernels) if share < ATTRIBUTED else ""
    seen += f"; unnamed device events: {unnamed}" if unnamed else ""
    return share >= ATTRIBUTED, seen


def unnamed_events(trace_file: str | None, kernels: list) -> str:
    """The longest device events the profile did not match to a kernel, with their
    `hlo_op` stat when XLA attached one: what a fix of the name matching needs ("" on
    a platform without device planes, the CPU)."""
    from jax.profiler import ProfileData  # reads the file; starts no backend

    if not trace_file:
        return ""
    folder = Path(trace_file).parent
    while folder.parent != folder and not folder.name.startswith("trace-"):
        folder = folder.parent
    planes = sorted(folder.rglob("*.xplane.pb"), key=lambda p: p.stat().st_mtime)
    if not planes:
        return "no xplane file"
    names, time_of = {k.name for k in kernels}, {}
    for plane in ProfileData.from_file(str(planes[-1])).planes:
        if plane.name.startswith("/device:"):
            for line in plane.lines:
                for event in line.events:
                    if event.name not in names:
                        hlo = dict(event.stats).get("hlo_op", "")
                        key = f"{event.name[:60]}" + (f" [hlo_op {hlo}]" if hlo else "")
                        time_of[key] = time_of.get(key, 0.0) + float(event.duration_ns)
    longest = sorted(time_of, key=time_of.get, reverse=True)[:4]
    return "; ".join(longest)


def sample_rows(worker: Worker, sample: Sample, device: str, replies: list[Analyzed]) -> list[Row]:
    """The sample's analysis and its profile's row; its reply joins `replies`."""

    def analysis() -> Outcome:
        replies.append(analyze(worker, sample, device))
        return analysis_outcome(replies[-1], sample, device)

    before = len(replies)
    rows = [timed(f"analyze {sample.name}", analysis)]
    if sample.expect_error is None:  # the profile ran inside the analysis: reading it is quick
        mine = replies[before:]
        rows.append(timed(f"profile {sample.name} >= 80% named", lambda: profile_of(mine)))
    return rows


def profile_of(replies: list[Analyzed]) -> Outcome:
    if not replies or replies[0].report.error is not None:
        return None, "no analysis to read"
    return profile_outcome(replies[0])


def all_profiles(replies: list[Analyzed]) -> Outcome:
    """Every profiled step together, time-weighted: tells names that do not match (near
    0 %) from small programs whose step is mostly dispatch (each of them below 80 %)."""
    profiles = [r.report.profile for r in replies if r.report.profile is not None]
    if not profiles:
        return None, "no profile came back"
    named = sum(sum(k.mean_s for k in p.kernels) for p in profiles)
    steps = sum(p.step_s for p in profiles)
    share = named / steps if steps else 0.0
    return share >= ATTRIBUTED, f"{share:.0%} of {steps * 1e3:.1f} ms over {len(profiles)} steps"


# -- the compile profile ----------------------------------------------------------------
PROFILED_SAMPLE = "mlp"
COVER = (0.90, 1.10)


def compile_profile(worker: Worker, device: str) -> Outcome:
    """XLA's spans of one compile, read back as a tree that covers the compile."""
    sample = get_sample(PROFILED_SAMPLE)
    program = Program.from_sample(sample)
    request = CompileProfile(replace(program.settings, device=device))
    reply = worker.ask(request, timeout_s=TIMEOUT_S)
    if not isinstance(reply, CompileProfiled) or reply.profile is None:
        return False, describe_error(reply.error)
    return profile_spans(reply.profile)


def profile_spans(p: CompileProfileSection) -> Outcome:
    if p.error is not None:
        return False, describe_error(p.error)
    covered, depth, spans = p.xla_covered or 0.0, p.depth, p.xla
    passes = sum(1 for s in spans if s.name.startswith("XlaPass"))
    ok = COVER[0] <= covered <= COVER[1] and depth >= 2
    names = ", ".join(s.name for s in spans if len(s.path) == 2)[:120]
    return ok, (
        f"{covered:.0%} of {(p.compile_s or 0) * 1e3:.0f} ms covered, {depth} levels, "
        f"{len(spans)} spans ({passes} XlaPass); under the top: {names}"
    )


# -- the cache lab ----------------------------------------------------------------------
def cache_lab(worker: Worker, device: str) -> Outcome:
    sample = get_sample(CACHE_SAMPLE)
    base = Settings(
        code=sample.code, function=sample.function, static=list(sample.static), device=device
    )
    worker.ask(CacheState(base, "gpu-check", clear=True), timeout_s=TIMEOUT_S)
    reply = worker.ask(CacheCalls(base, "gpu-check", calls=CACHE_CALLS), timeout_s=TIMEOUT_S)
    if not reply.ok and not reply.events:
        return False, describe_error(reply.error)
    hits = [getattr(e, "hit", None) for e in reply.events]
    reasons = [(r.arg, r.kind) for r in getattr(reply.events[2], "reasons", [])] if hits else []
    seen = " ".join("hit" if h else "MISS" if h is False else "error" for h in hits)
    seen += f"; third call's reasons {reasons}; cache size {reply.cache_size}"
    return hits == CACHE_HITS and sorted(reasons) == sorted(CACHE_REASONS), seen


# -- one sharded compile (in a child: its own JAX, its own devices) ---------------------
def sharded(device: str, count: int) -> Outcome:
    if count < 2:
        return None, f"{count} device: a sharded compile needs 2 or more"
    env = dict(os.environ)
    if device == "gpu":
        env.update(JAX_PLATFORMS="cuda", XLA_PYTHON_CLIENT_PREALLOCATE="false")
    else:  # the CPU stands in with simulated host devices
        env.update(JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_force_host_platform_device_count={count}")
    child = [sys.executable, __file__, "--sharded-child", str(count)]
    out = subprocess.run(child, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    if out.returncode != 0:
        return False, (out.stderr.strip().splitlines() or ["no output"])[-1][:300]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    ok = seen["all_reduce"] > 0 and seen["matches"]
    detail = (
        f"{seen['devices']} devices, compile {seen['compile_s']:.2f} s, "
        f"{seen['all_reduce']} all-reduce, per-device x {seen['per_device_shape']}, "
        f"matches unsharded: {seen['matches']}"
    )
    return ok, detail


def sharded_child(count: int) -> None:
    """The gradient of a small MLP loss with the batch split over `count` devices and
    the weights replicated: XLA must all-reduce the weights' gradient."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    def loss(w, x):
        return jnp.mean(jnp.tanh(x @ w) ** 2)

    mesh = Mesh(np.array(jax.devices()[:count]), ("data",))
    replicated, batch = NamedSharding(mesh, P()), NamedSharding(mesh, P("data", None))
    w = jax.device_put(
        jnp.linspace(-1, 1, 128 * 64, dtype=jnp.float32).reshape(128, 64), replicated
    )
    x = jax.device_put(
        jnp.linspace(0, 1, 16 * count * 128, dtype=jnp.float32).reshape(-1, 128), batch
    )
    step = jax.jit(jax.grad(loss), in_shardings=(replicated, batch), out_shardings=replicated)
    start = time.perf_counter()
    compiled = step.lower(w, x).compile()
    compile_s = time.perf_counter() - start
    expected = jax.jit(jax.grad(loss))(np.asarray(w), np.asarray(x))
    result = {
        "devices": count,
        "compile_s": compile_s,
        "all_reduce": compiled.as_text().count("all-reduce("),
        "per_device_shape": list(x.addressable_shards[0].data.shape),
        "matches": bool(np.allclose(compiled(w, x), expected, rtol=1e-4, atol=1e-6)),
    }
    print(json.dumps(result))


# -- the device unavailable -------------------------------------------------------------
@contextlib.contextmanager
def no_visible_gpu() -> Iterator[None]:
    """A worker started in the block sees no GPU (its environment is copied at start)."""
    saved = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved


def unavailable() -> Outcome:
    """Explore's Analyze on `gpu` with no usable GPU: the reply must be the error kind
    `device_unavailable` with a message, as the app shows it; anything else (a bug's
    internal_error, an import error) would mislead the user."""
    with no_visible_gpu():
        worker = Worker("gpu", TIMEOUT_S)
        try:
            reply = analyze(worker, get_sample("dot_plus_one"), "gpu")
        finally:
            worker.close()
    error = reply.report.error
    return kind_of(error) == "device_unavailable", describe_error(error) if error else "it ran"


# -- the run ----------------------------------------------------------------------------
def run_items(device: str, samples: list[Sample], budget_s: float) -> list[Row]:
    deadline = time.perf_counter() + budget_s
    worker = Worker(device, TIMEOUT_S)
    rows, count = [], 0

    def device_check() -> Outcome:
        nonlocal count
        outcome, count = ping(worker, device)
        return outcome

    try:
        rows.append(timed(f"worker on {device}", device_check))
        rows.append(timed(f"two workers on {device} at once", lambda: two_workers(worker, device)))
        rows.append(timed(f"cache lab hit/miss on {device}", lambda: cache_lab(worker, device)))
        sharded_count = count if device == "gpu" else 2
        rows.append(timed("sharded compile", lambda: sharded(device, sharded_count)))
        rows.append(timed(f"compile profile on {device}", lambda: compile_profile(worker, device)))
        replies: list[Analyzed] = []
        for sample in samples:
            if time.perf_counter() > deadline:
                rows.append(Row(f"analyze {sample.name}", "SKIP", 0.0, "out of the time budget"))
                continue
            rows.extend(sample_rows(worker, sample, device, replies))
        rows.append(timed("profile, all samples >= 80% named", lambda: all_profiles(replies)))
    finally:
        worker.close()
    rows.append(timed("gpu unavailable -> device_unavailable", unavailable))
    return rows


def dry_rows(samples: list[Sample]) -> list[Row]:
    """What a GPU run would check, and the one item cheap here: the app on `gpu`
    without a usable GPU."""
    would = [
        "install requirements-gpu.txt if JAX sees no GPU (bench/gpu_check.sh)",
        "worker on gpu (JAX lists the GPUs)",
        "two workers on gpu at once",
        "cache lab hit/miss on gpu: " + " ".join("hit" if h else "MISS" for h in CACHE_HITS),
        "sharded compile over every GPU (skipped with 1): all-reduce, matches unsharded",
        f"compile profile of {PROFILED_SAMPLE} on gpu: XLA's spans cover 90-110%, 2+ levels",
        *(
            f"analyze {s.name} on gpu" + ("" if s.expect_error else " + profile >= 80% named")
            for s in samples
        ),
        "profile, all samples together (time-weighted) >= 80% named",
    ]
    rows = [Row(item, "WOULD", 0.0) for item in would]
    rows.append(timed("gpu unavailable -> device_unavailable", unavailable))
    return rows


def print_table(rows: list[Row], title: str) -> None:
    width = max(len(r.item) for r in rows)
    print(title)
    print(f"{'item':<{width}}  status  seconds  detail")
    for r in rows:
        print(f"{r.item:<{width}}  {r.status:<6}  {r.seconds:7.2f}  {r.detail}")
    counts = {s: sum(r.status == s for r in rows) for s in ("PASS", "FAIL", "SKIP")}
    print(
        " · ".join(f"{n} {s.lower()}" for s, n in counts.items()),
        f"· {sum(r.seconds for r in rows):.1f} s",
    )


def has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None


def main() -> int:
    args = parse_args()
    if args.sharded_child:
        sharded_child(args.sharded_child)
        return 0
    os.environ.setdefault("JITSCOPE_HOME", tempfile.mkdtemp(prefix="jitscope-gpu-check-"))
    samples = [get_sample(n) for n in args.samples.split(",")] if args.samples else list_samples()
    dry = args.dry or (args.device is None and not has_gpu())
    install = Row("install requirements-gpu.txt", args.install_status, args.install_s)
    if dry:
        why = "--dry" if args.dry else "no nvidia-smi on this machine"
        print_table(dry_rows(samples), f"GPU check, dry mode ({why}): what a GPU run checks")
        print("(run `python bench/gpu_check.py --device cpu` to run every item on the CPU)")
        return 0
    device = args.device or "gpu"
    rows = run_items(device, samples, args.budget)
    install.detail = args.install_detail
    rows = [install, *rows] if args.install_status else rows
    print_table(rows, f"GPU check on {device}")
    return 1 if any(r.status == "FAIL" for r in rows) else 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry", action="store_true", help="list the items; run the cheap one")
    parser.add_argument("--device", choices=["gpu", "cpu"], help="default: gpu if present")
    parser.add_argument("--samples", help="these samples (comma-separated); default: all")
    parser.add_argument("--budget", type=float, default=330.0, help="s: no sample starts later")
    parser.add_argument("--install-s", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--install-status", default="", help=argparse.SUPPRESS)
    parser.add_argument("--install-detail", default="", help=argparse.SUPPRESS)
    parser.add_argument("--sharded-child", type=int, default=0, help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(main())
