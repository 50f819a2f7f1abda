"""The first screen against a bare Streamlit page, started and opened the same way, in
one run (issue #40 measured the floor, 2.3-2.5x on two cores; issue #50: it must not
grow past 2.6x).

Each round starts two servers from nothing, one after the other (their order
alternates from round to round):
- the app: `streamlit run app.py` from the project, a fresh JITSCOPE_HOME (no history,
  no compilation cache);
- a bare page: `streamlit run bare.py`, a title and a line of text, in a folder with
  the project's .streamlit/config.toml, so that Streamlit starts with the same options.

Each is opened in a fresh context (empty cache) of Debian's headless Chromium as soon
as its health check answers. A script in the page notes when each milestone first
shows, as seconds from the `streamlit run`:
- health: /_stcore/health answers (polled from here every 20 ms);
- title: the page's title drawn (the bare page: its text too);
- app only, where the extra seconds go:
  - `waiting`, `load`, `trace`, ..., `run`: the stage bar names that stage as under
    way (`waiting`: for the worker, which imports JAX and warms up at the server's
    start);
  - metrics: the Overview's jaxpr equations with their number;
  - graph: the first node of the Overview's graph;
  - charts: both Overview charts drawn, each with at least three bars (the stages
    trace, lower and compile; the counts);
  - first screen: metrics, graph and charts all on screen (the figure compared);
  - complete: the whole result, timed runs included (the run's median time drawn);
- the CPU seconds spent until the page was all there (the app: complete), by the
  server, the processes below it (workers, Graphviz) and Chromium.

Prints every round, then per milestone the median and the spread (min-max), and the
first screen against the bare page: the ratio of the medians and the median of the
paired ratios (each round's two servers). Both run on the same shared machine; give
it rounds.

What it found on the 2-core development machine (issue #40): the extra seconds are
CPU work, not waiting: from the bare page's load to the app's first screen both cores
are busy (sampled from /proc every 0.1 s: 1.8-1.95 of 2), and the last ~0.6 s is
Chromium alone drawing the result (~1.45 cores). Five rounds (December 2026): bare page
1.53 s (1.44-1.58), first screen 3.69 s (3.54-3.88), ratio 2.42. CPU seconds until the
page was complete, medians:

                       bare    app    extra
    server             0.63   1.55    +0.9  imports (ui, viz, code_editor; pandas and
                                            pyarrow, which Streamlit's v1 components
                                            import for any list or dict argument), the run
    workers            0      1.20    +1.2  JAX's import 0.75, its warm-up, the analysis
    Chromium           1.66   4.09    +2.4
      renderers        0.99   2.58    +1.6  the page's JS (React, emotion, Streamlit's
                                            markdown), ~40 more chunks to compile, layout
      the rest         0.56   1.67    +1.1  browser process (requests, IPC), compositing
    total              2.3    6.8     +4.5  on 2 cores: >= 3.4 s; 1.3x is 2.0 s, 4.0 CPU-s

The Explore page without its analysis (inputs, editor, sidebar; no result) is ready at
2.7 s, 1.8x the bare page, already (server 1.5, worker 0.8, Chromium 2.8 CPU-s). Taken
out one at a time in a scratch copy (6 rounds, interleaved), the first screen's
elements buy little: the two charts ~0.35 s of the first screen (Chromium -0.15 to
-0.6 CPU-s); the graph frames, the Ace editor (against a text_area) and the streamed
glimpse no CPU-s that rounds could tell from noise; all four at once 0.4 s. A v1
component brings pandas and pyarrow in any case, and the charts' rows kept out of
Streamlit's Arrow path (in a layer) saved nothing measurable. Before #50, at
1440x900 the result (metrics, graph, charts) sits below the fold: the screen a user
sees first is the title and the inputs, at 2.3-2.7 s. The worker's start, beside the
page's load, puts the title 0.6 s later than without it, and a second worker started
at the first result put the first screen 0.5 s later (it starts after 20 s instead).
Drawing the stages as they come moves nothing for a program this small: its analysis
takes 0.5 s and the browser draws the result behind the server.

Issue #50 put the result on the first screen (code and inputs on the left, the counts,
the compiled graph and both charts on the right, in view at 1440x900): the same
milestones, now all above the fold. Six rounds on a quiet machine (December 2026): bare
page 1.47 s (1.46-1.54), first screen 3.67 s (3.54-3.82), 2.50x (paired 2.49); CPU
seconds server 1.55, workers 1.19, Chromium 4.17, as before. The code before #50, run
from a copy in alternation with it (bare page, first screen, ratio of medians): 1.51 s,
4.01 s, 2.66x against 1.47 s, 3.67 s, 2.50x; 1.52 s, 3.76 s, 2.47x against 1.51 s,
3.62 s, 2.40x; and on a loaded machine (load 4 on 2 cores) 2.53x against 2.76x, with
first screens spread over 3.8-7.0 s in both. The new layout does not slow it.

Usage: python bench/cold_start.py [--rounds 5] [--port 8700]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the browser tests' Chromium and its flags
from proc_tree import TICKS, descendants, processes  # noqa: E402
from serving import CHROMIUM, CHROMIUM_ARGS, free_port, stop  # noqa: E402

GOAL = 2.6  # the first screen within this many times the bare page (#40's floor: 2.3-2.5)
BARE_TEXT = "A bare Streamlit page: a title and this line."
BARE_SCRIPT = f'import streamlit as st\n\nst.title("Bare page")\nst.write("{BARE_TEXT}")\n'
STAGES = ("waiting", "load", "trace", "lower", "compile", "run")
FIRST_SCREEN = ("metrics", "graph", "charts")
# CPU seconds from the start until the page was all drawn (the app: complete); the
# browser's split: its renderers (the page's, and Chromium's own WebUI pages) and the rest
# (the browser process: network, IPC; the GPU process: compositing without a GPU)
CPU = ("cpu server", "cpu workers", "cpu browser", "  renderers", "  the rest")

# Runs in the page (not in its frames) before Streamlit's own code: every 25 ms, the
# milestones shown so far, each stamped once with the wall clock (Date.now(), the
# same clock as time.time() here) into window.__marks.
MARKS_JS = """
(() => {
  if (window.top !== window) return;
  const marks = window.__marks = {};
  const note = (name) => { if (!(name in marks)) marks[name] = Date.now() / 1000; };
  const graphNode = () => {
    if (document.querySelector("[data-testid=stGraphVizChart] svg g.node")) return true;
    for (const frame of document.querySelectorAll("[data-testid=stIFrame]")) {
      const doc = frame.contentDocument;
      if (doc && doc.querySelector("svg g.node")) return true;
    }
    return false;
  };
  const look = () => {
    const body = document.body;
    if (!body) return;
    const text = body.textContent || "";
    if (document.querySelector("h1")) note("title");
    if (text.includes(__BARE_TEXT__)) note("text");
    for (const m of text.matchAll(/Under way: ([a-z]+)/g)) note(m[1]);
    if (/jaxpr equations\\s*[0-9]/.test(text)) note("metrics");
    if (graphNode()) note("graph");
    // each chart with its bars: trace, lower and compile; jaxpr, StableHLO, compiled ops
    // and kernels (while the analysis runs, the charts are drawn with fewer)
    const charts = [...document.querySelectorAll("[data-testid=stVegaLiteChart]")];
    const bars = (chart) => chart.querySelector("canvas") ? 99 :
      chart.querySelectorAll("g.mark-rect path").length;
    if (charts.length >= 2 && charts.every(c => bars(c) >= 3)) note("charts");
    if (/run \\(median\\)\\s*[0-9]/.test(text)) note("complete");
  };
  setInterval(look, 25);
})();
""".replace("__BARE_TEXT__", repr(BARE_TEXT))


def start(script: str, cwd: Path, port: int, home: Path) -> subprocess.Popen:
    """`streamlit run SCRIPT` as a user starts it (the project's config from `cwd`)."""
    options = ("--server.headless", "true", "--browser.gatherUsageStats", "false")
    return subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", script, "--server.port", str(port), *options],
        cwd=cwd,
        env={**os.environ, "JITSCOPE_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_healthy(port: int, within_s: float = 60) -> None:
    deadline = time.time() + within_s
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1):
                return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"no health check answered on port {port} within {within_s:.0f} s")


def one_start(browser, script: str, cwd: Path, port: int, wanted: tuple[str, ...]) -> dict:
    """Seconds from the start to each milestone of the page `script` draws."""
    home = Path(tempfile.mkdtemp(prefix="jitscope-cold-"))
    browser_before = browser_ticks()
    started = time.time()
    server = start(script, cwd, port, home)
    context = None
    try:
        wait_healthy(port)
        marks = {"health": time.time() - started}
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        context.add_init_script(MARKS_JS)
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{port}/", timeout=60_000)
        page.wait_for_function(
            f"window.__marks && {' && '.join(f'{w!r} in window.__marks' for w in wanted)}",
            timeout=90_000,
            polling=100,
        )
        shown = page.evaluate("window.__marks")
        marks.update({name: at - started for name, at in shown.items()})
        marks.update(cpu_seconds(server.pid))
        browser, renderers = browser_seconds_since(browser_before)
        marks.update({"cpu browser": browser, "  renderers": renderers})
        marks["  the rest"] = browser - renderers
        return marks
    finally:
        if context is not None:
            context.close()
        stop(server)
        shutil.rmtree(home, ignore_errors=True)


def cpu_seconds(server: int) -> dict[str, float]:
    """CPU seconds the server used so far, and the processes below it (its workers)."""
    procs = processes()
    below = sum(procs[p].ticks for p in descendants(server, procs) if p in procs)
    return {"cpu server": procs[server].ticks / TICKS, "cpu workers": below / TICKS}


def browser_ticks() -> dict[int, int]:
    """CPU ticks so far of each Chromium process on the machine."""
    return {
        pid: p.ticks
        for pid, p in processes().items()
        if any(name in p.comm for name in ("chrom", "headless"))
    }


def browser_seconds_since(before: dict[int, int]) -> tuple[float, float]:
    """CPU seconds Chromium spent since `before`, in the processes alive now (a tab of an
    earlier round that exited meanwhile takes its ticks with it: they are not counted):
    in all of them, and in its renderer processes."""
    now = browser_ticks()
    spent = {pid: ticks - before.get(pid, 0) for pid, ticks in now.items()}
    renderers = sum(t for pid, t in spent.items() if is_renderer(pid))
    return sum(spent.values()) / TICKS, renderers / TICKS


def is_renderer(pid: int) -> bool:
    """Whether a Chromium process is a renderer (its command line says so)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"--type=renderer" in f.read()
    except OSError:
        return False


def bare_folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="jitscope-bare-"))
    (folder / "bare.py").write_text(BARE_SCRIPT)
    shutil.copytree(ROOT / ".streamlit", folder / ".streamlit")
    return folder


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):5.2f} s  ({min(values):5.2f}-{max(values):5.2f})"


def report(rounds: list[tuple[dict, dict]]) -> None:
    apps = [a for a, _ in rounds]
    bares = [b for _, b in rounds]
    for app in apps:
        app["first screen"] = max(app[m] for m in FIRST_SCREEN)
        app["page"] = app["first screen"]
    for bare in bares:
        bare["page"] = max(bare["title"], bare["text"])
    print("\nseconds from `streamlit run` (one column per round)")
    names = ["health", "title", *STAGES, *FIRST_SCREEN, "first screen", "complete", *CPU]
    for who, runs, shown in (("bare", bares, ["health", "page", *CPU]), ("app", apps, names)):
        for name in shown:
            values = [r.get(name) for r in runs]
            cells = "  ".join("   –  " if v is None else f"{v:6.2f}" for v in values)
            found = [v for v in values if v is not None]
            print(f"  {who:4s} {name:12s} {cells}   {spread(found) if found else ''}")
    ours = statistics.median(a["page"] for a in apps)
    bare = statistics.median(b["page"] for b in bares)
    paired = statistics.median(a["page"] / b["page"] for a, b in rounds)
    print(
        f"\nbare page (title + text)        {spread([b['page'] for b in bares])}\n"
        f"app first screen                {spread([a['page'] for a in apps])}\n"
        f"ratio of medians                {ours / bare:5.2f}   goal <= {GOAL}  "
        f"{'OK' if ours / bare <= GOAL else 'MISSED'}\n"
        f"median of paired ratios         {paired:5.2f}   (each round's two servers)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--port", type=int, default=0, help="first of two ports (default: free)")
    args = parser.parse_args()
    folder = bare_folder()
    ports = (args.port, args.port + 1) if args.port else (free_port(), free_port())
    rounds = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for number in range(args.rounds):
                starts = {
                    "bare": lambda: one_start(browser, "bare.py", folder, ports[0], ("text",)),
                    "app": lambda: one_start(
                        browser, "app.py", ROOT, ports[1], (*FIRST_SCREEN, "complete")
                    ),
                }
                order = ("bare", "app") if number % 2 == 0 else ("app", "bare")
                done = {who: starts[who]() for who in order}
                rounds.append((done["app"], done["bare"]))
                app, bare = done["app"], done["bare"]
                first = max(app[m] for m in FIRST_SCREEN)
                page = max(bare["title"], bare["text"])
                print(
                    f"round {number + 1}: bare {page:5.2f} s, app first screen {first:5.2f} s, "
                    f"complete {app['complete']:5.2f} s",
                    flush=True,
                )
            browser.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report(rounds)


if __name__ == "__main__":
    main()
