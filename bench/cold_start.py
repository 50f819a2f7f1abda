"""Seconds from `streamlit run app.py` to the default sample's analysis visible in
Chromium, graph included, and where they go: the server listening, the page's title
drawn, the metrics, the Overview's compiled-program graph.

Target: <= 5 s on the 2-core development machine (shared: numbers are noisy; take
the median of several runs). Needs Debian's chromium.
Usage: python bench/cold_start.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the browser tests' server and Chromium helpers
from serving import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    free_port,
    overview_charts,
    start_server,
    stop,
    wait_listening,
)

TARGET_S = 5.0


def graph_node(page):
    """The first node of the Overview's graph: the renderer's SVG in the pan-and-zoom
    frame, or Streamlit's own chart without a renderer."""
    framed = page.frame_locator("[data-testid=stIFrame]").first.locator("svg g.node")
    return framed.or_(page.locator("[data-testid=stGraphVizChart] svg g.node")).first


def one_cold_start(browser) -> dict[str, float]:
    """Seconds from the start to each milestone; 'all' (metrics, graph and charts
    drawn) is the cold-start figure."""
    port = free_port()
    start = time.perf_counter()
    server = start_server(port, subprocess.DEVNULL)
    marks: dict[str, float] = {}
    try:
        wait_listening(port, poll_s=0.02)  # polled finely: its time is a milestone
        marks["listening"] = time.perf_counter() - start
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(f"http://127.0.0.1:{port}/", timeout=60000)
        page.locator("h1").first.wait_for(timeout=60000)
        marks["title"] = time.perf_counter() - start
        page.get_by_text("jaxpr equations").first.wait_for(timeout=60000)
        marks["metrics"] = time.perf_counter() - start
        graph_node(page).wait_for(timeout=60000)
        marks["graph"] = time.perf_counter() - start
        overview_charts(page).nth(1).wait_for(timeout=60000)
        marks["charts"] = time.perf_counter() - start
        marks["all"] = max(marks.values())
        page.close()
        return marks
    finally:
        stop(server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        runs = [one_cold_start(browser) for _ in range(args.runs)]
        browser.close()
    for name in runs[0]:
        print(f"{name:10s}", "  ".join(f"{r[name]:5.2f}" for r in runs), "s")
    median = statistics.median(r["all"] for r in runs)
    print(
        f"cold start (graph visible): median {median:.2f} s   target <= {TARGET_S} s   "
        f"{'OK' if median <= TARGET_S else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
