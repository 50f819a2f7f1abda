"""N browser sessions at once, each opening a link to a different sample.

Starts `streamlit run app.py`, measures each chosen sample alone (the single-session
figure: link opened → first chart drawn), then opens all N links at once in separate
browser contexts and prints p50/p95 seconds to the first chart, the exceptions shown
on the pages or logged by the server, and how the CPU time split between the
browsers and the server (with its workers). Target with 8 sessions: 0 exceptions and
p95 <= 4x the single-session figure. Needs Debian's chromium.

Then, to tell the server's share from the browsers', the same N sessions without
browsers: Streamlit's AppTest runs app.py for each in its own thread of this process,
against one shared worker pool, as the server's session threads do.

With --headless N it measures the server alone instead (bench/headless.py): N
sessions speaking Streamlit's websocket protocol, no browser, against a real server;
p50/p95 to the result against the floor (the sessions' single-session server CPU
over the cores), exceptions, and the server's and workers' peak memory.

Usage: python bench/load.py [--sessions 8] [--workers N]
       python bench/load.py --headless N [--workers N] [--samples a,b] [--timeout S]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere, installed or not
sys.path.insert(0, str(ROOT / "tests"))  # the browser tests' server and Chromium helpers
from proc_tree import browser_seconds, tree_seconds  # noqa: E402
from serving import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    free_port,
    overview_charts,
    start_server,
    stop,
    wait_listening,
)

from viz.samples import list_samples  # noqa: E402

SLOW = {"transformer_24"}  # a minute of compiling on its own: not a load test


def cpu_split(server_pid: int) -> dict[str, float]:
    """CPU seconds used so far by the server's process tree and by every chromium."""
    return {"server": tree_seconds(server_pid), "browsers": browser_seconds()}


# -- the sessions ---------------------------------------------------------------------
async def first_chart(browser, url: str) -> tuple[float, int, object]:
    """Seconds from opening `url` to the first chart; exceptions shown on the page."""
    context = await browser.new_context(viewport={"width": 1440, "height": 900})
    page = await context.new_page()
    start = time.perf_counter()
    await page.goto(url, timeout=120_000)
    await overview_charts(page).first.wait_for(timeout=300_000)
    elapsed = time.perf_counter() - start
    shown = await page.locator('[data-testid="stException"]').count()
    return elapsed, shown, context


async def run(args: argparse.Namespace) -> None:
    from playwright.async_api import async_playwright  # the browser mode's alone

    samples = [s for s in list_samples() if not s.expect_error and s.name not in SLOW]
    chosen = samples[: args.sessions]
    if len(chosen) < args.sessions:  # more sessions than samples: reuse some
        chosen = [samples[i % len(samples)] for i in range(args.sessions)]
    port = free_port()
    log = Path(tempfile.mkdtemp()) / "server.log"
    env = {"JITSCOPE_HOME": tempfile.mkdtemp(prefix="jitscope-load-")}
    if args.workers:
        env["JITSCOPE_WORKERS"] = str(args.workers)
    server = start_server(port, log, env)
    base = f"http://127.0.0.1:{port}/?sample="
    try:
        wait_listening(port)
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            warm, _, ctx = await first_chart(browser, base + "dot_plus_one")  # workers warm
            await ctx.close()
            solo = []
            for sample in chosen:
                seconds, shown, ctx = await first_chart(browser, base + sample.name)
                await ctx.close()
                solo.append(seconds)
                print(f"  alone  {sample.name:<18} {seconds:6.2f} s  exceptions {shown}")
            before, t0 = cpu_split(server.pid), time.perf_counter()
            results = await asyncio.gather(
                *(first_chart(browser, base + s.name) for s in chosen), return_exceptions=True
            )
            wall, after = time.perf_counter() - t0, cpu_split(server.pid)
            times, shown_total, failures = [], 0, 0
            for sample, result in zip(chosen, results, strict=True):
                if isinstance(result, BaseException):
                    failures += 1
                    print(f"  shared {sample.name:<18} FAILED {type(result).__name__}")
                    continue
                seconds, shown, ctx = result
                times.append(seconds)
                shown_total += shown
                await ctx.close()
                print(f"  shared {sample.name:<18} {seconds:6.2f} s  exceptions {shown}")
            await browser.close()
    finally:
        stop(server)
    logged = log.read_text().count("Traceback")
    report(args.sessions, solo, times, failures, shown_total, logged, before, after, wall, warm)
    server_side([s.name for s in chosen], args.workers)


def server_side(names: list[str], workers: int | None) -> None:
    """The same sessions without browsers: AppTest threads on one shared pool."""
    from streamlit.testing.v1 import AppTest

    os.environ["JITSCOPE_HOME"] = tempfile.mkdtemp(prefix="jitscope-load-")
    if workers:
        os.environ["JITSCOPE_WORKERS"] = str(workers)

    def session(name: str, out: dict) -> None:
        start = time.perf_counter()
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
        at.query_params["sample"] = name
        at.run()
        charted = any(m.label == "jaxpr equations" for m in at.metric)
        out[name] = (time.perf_counter() - start, len(at.exception) + (not charted))

    session("dot_plus_one", {})  # workers warm
    solo: dict = {}
    for name in names:
        session(name, solo)
    shared: dict = {}
    threads = [threading.Thread(target=session, args=(n, shared)) for n in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    single = statistics.median(t for t, _ in solo.values())
    times = [t for t, _ in shared.values()]
    p95 = percentile(times, 0.95)
    print(
        f"\nserver side only (AppTest, no browsers): single {single:.2f} s   "
        f"{len(names)} at once p50 {percentile(times, 0.5):.2f} s   p95 {p95:.2f} s "
        f"({p95 / single:.1f}x)   exceptions {sum(e for _, e in shared.values())}"
    )
    print(f"  serial work of the {len(names)} alone: {sum(t for t, _ in solo.values()):.1f} s")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def report(n, solo, times, failures, shown, logged, before, after, wall, warm) -> None:
    server_s = after["server"] - before["server"]
    browser_s = after["browsers"] - before["browsers"]
    single = statistics.median(solo)
    p50, p95 = (percentile(times, 0.5), percentile(times, 0.95)) if times else (0.0, 0.0)
    exceptions = shown + logged + failures
    print(f"\nwarm-up (first page, workers starting): {warm:.2f} s")
    print(f"single session (median of {len(solo)} samples alone): {single:.2f} s")
    print(f"{n} sessions at once: p50 {p50:.2f} s   p95 {p95:.2f} s   ({p95 / single:.1f}x single)")
    print(f"exceptions: {exceptions} (shown {shown}, logged {logged}, page failures {failures})")
    cores = os.cpu_count() or 1
    total = server_s + browser_s
    print(
        f"CPU during the {wall:.1f} s burst ({cores} cores = {cores * wall:.0f} core-s): "
        f"browsers {browser_s:.1f} s ({100 * browser_s / max(total, 1e-9):.0f} %), "
        f"server + workers {server_s:.1f} s"
    )
    ok = exceptions == 0 and p95 <= 4 * single
    print(f"target: 0 exceptions and p95 <= 4x single -> {'OK' if ok else 'MISSED'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--workers", type=int, default=None, help="JITSCOPE_WORKERS")
    parser.add_argument(
        "--headless", type=int, metavar="N", help="N protocol sessions, no browsers"
    )
    parser.add_argument("--samples", help="headless: these samples (comma-separated), cycled")
    parser.add_argument("--timeout", type=float, default=600, help="headless: per session, s")
    args = parser.parse_args()
    if args.headless:
        from headless import run_headless  # bench/, beside this file

        names = args.samples.split(",") if args.samples else None
        run_headless(args.headless, args.workers, names, args.timeout)
    else:
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
