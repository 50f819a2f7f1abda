"""How soon Explore shows each stage of a big model's analysis (issue #36: the jaxpr's
graph on screen within trace + lower + 1 s on the 96-layer sample), and what sending
the stages as they finish costs the worker.

1. In the browser: `streamlit run app.py` (a fresh JITSCOPE_HOME), Debian's headless
   Chromium opens a link carrying samples/transformer_24.py at 96 layers, sets Timed
   runs to 0 (the runs come after every stage this measures) and presses Analyze,
   `--rounds` times. A script in the page notes when the stage bar first says the trace
   is under way, when the compile is, and when the first graph is drawn (its first
   node, with the jaxpr's counts, under "As traced: jaxpr" or, once the lowered part has
   arrived, "Before fusion: StableHLO"). The run's trace_s and lower_s come from the
   history the app recorded it in. Prints per round: the first graph's seconds after the
   trace started on screen, against trace + lower + 1 s.
2. In a worker: the same analysis (runs=0) sent plain and streamed (`Analyze.stream`),
   interleaved, `--rounds` each: the request's wall time and XLA's compile_s (the
   streamed one reads the jaxpr graph at full priority beside the compile).

Usage: python bench/stages_on_screen.py [--rounds 3] [--layers 96] [--port 8710]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the browser tests' server and Chromium helpers
from serving import CHROMIUM, CHROMIUM_ARGS, free_port, start_server, stop  # noqa: E402

from viz.history import History  # noqa: E402
from viz.samples import get_sample  # noqa: E402
from viz.settings import Settings  # noqa: E402
from viz.worker import Worker  # noqa: E402
from viz.worker.protocol import Analyze, Ping  # noqa: E402

SLACK_S = 1.0  # the budget beyond trace + lower

# Runs in the page before Streamlit's code: every 20 ms, the first time the stage bar
# names each stage as under way, and the first time a graph (the jaxpr's or StableHLO's)
# is drawn.
MARKS_JS = """
(() => {
  if (window.top !== window) return;
  const marks = window.__marks = {};
  const note = (name) => { if (!(name in marks)) marks[name] = Date.now() / 1000; };
  setInterval(() => {
    const text = (document.body && document.body.textContent) || "";
    for (const m of text.matchAll(/Under way: ([a-z]+)/g)) note(m[1]);
    const frames = [...document.querySelectorAll("[data-testid=stIFrame]")];
    const drawn = frames.some(
      f => f.contentDocument && f.contentDocument.querySelector("svg g.node"));
    const early = text.includes("As traced: jaxpr") || text.includes("Before fusion: StableHLO");
    if (drawn && early && /jaxpr equations\\s*[0-9]/.test(text)) note("first graph");
  }, 20);
})();
"""


def deep_code(layers: int) -> tuple[str, str]:
    sample = get_sample("transformer_24")
    code = sample.code.replace("N_LAYERS = 24", f"N_LAYERS = {layers}")
    assert f"N_LAYERS = {layers}" in code
    return code, sample.args


def in_the_browser(rounds: int, layers: int, port: int) -> list[dict[str, float]]:
    from playwright.sync_api import sync_playwright

    code, args = deep_code(layers)
    home = Path(tempfile.mkdtemp(prefix="jitscope-stages-"))
    server = start_server(port, home / "server.log", {"JITSCOPE_HOME": str(home)})
    found = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 1700})
            page.add_init_script(MARKS_JS)
            link = urlencode({"code": code, "function": "forward", "args": args})
            page.goto(f"http://127.0.0.1:{port}/?{link}", timeout=120_000)
            runs = page.get_by_label("Timed runs", exact=True).and_(page.locator("input"))
            runs.fill("0")
            runs.press("Tab")
            for number in range(rounds):
                found.append(one_round(page, home, number + 1))
            browser.close()
    finally:
        stop(server)
        shutil.rmtree(home, ignore_errors=True)
    return found


def one_round(page, home: Path, runs_so_far: int) -> dict[str, float]:
    """One analysis; the first graph's seconds are infinite where no early one showed
    (the compiled program came first)."""
    page.evaluate("for (const k in window.__marks) delete window.__marks[k]")
    page.get_by_role("button", name="Analyze").click()
    history = History(home / "history.sqlite")
    deadline = time.time() + 300
    while history.count() < runs_so_far and time.time() < deadline:  # the final result
        time.sleep(0.2)
    marks = page.evaluate("window.__marks")
    timings = history.runs()[0].summary["timings"]
    shown = marks.get("first graph", float("inf"))
    return {
        "trace_s": timings["trace_s"],
        "lower_s": timings["lower_s"],
        "compile_s": timings["compile_s"],
        "graph after trace": shown - marks["trace"],
        "graph after compile start": shown - marks["compile"],
    }


def in_a_worker(rounds: int, layers: int) -> dict[bool, list[tuple[float, float]]]:
    code, args = deep_code(layers)
    worker = Worker("cpu", timeout_s=600)
    found: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    try:
        worker.ask(Ping(warm=True))
        for number in range(rounds):
            for stream in (False, True) if number % 2 == 0 else (True, False):
                start = time.perf_counter()
                reply = worker.ask(
                    Analyze(
                        Settings(code=code, function="forward", args=args), runs=0, stream=stream
                    ),
                    on_progress=lambda _: None,
                )
                assert reply.ok, reply.error
                compile_s = reply.report.timings.compile_s or 0.0
                found[stream].append((time.perf_counter() - start, compile_s))
    finally:
        worker.close()
    return found


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):6.3f} s ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--layers", type=int, default=96)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault("JITSCOPE_HOME", tempfile.mkdtemp(prefix="jitscope-stages-"))
    print(f"{args.layers}-layer transformer, {args.rounds} rounds\n\nin the browser:")
    rows = in_the_browser(args.rounds, args.layers, args.port or free_port())
    for i, r in enumerate(rows, 1):
        budget = r["trace_s"] + r["lower_s"] + SLACK_S
        verdict = "OK" if r["graph after trace"] <= budget else "MISSED"
        print(
            f"  round {i}: trace {r['trace_s']:.3f} s, lower {r['lower_s']:.3f} s, "
            f"compile {r['compile_s']:.3f} s; first graph on screen "
            f"{r['graph after trace']:.2f} s after the trace started "
            f"({r['graph after compile start']:.2f} s into the compile), "
            f"budget trace + lower + {SLACK_S:.0f} s = {budget:.2f} s  {verdict}"
        )
    late = [r["graph after trace"] - r["trace_s"] - r["lower_s"] for r in rows]
    print(f"  first graph beyond trace + lower: {spread(late)}   budget {SLACK_S:.1f} s")
    print("\nin a worker, runs=0 (request wall time, XLA's compile_s):")
    found = in_a_worker(args.rounds, args.layers)
    for stream, label in ((False, "plain   "), (True, "streamed")):
        walls, compiles = zip(*found[stream], strict=True)
        print(f"  {label} wall {spread(list(walls))}   compile {spread(list(compiles))}")


if __name__ == "__main__":
    main()
