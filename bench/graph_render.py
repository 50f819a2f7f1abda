"""What a rerun of Explore costs the server with a graph on screen, on the 24-layer
transformer (samples/transformer_24.py, opened from a link, as the app's first screen
does it): milliseconds per render of the Overview and of each IR tab (its graph panel
in the default view), medians of `--reruns` reruns after one warm-up, through AppTest
and the real worker. Then, in this process, the DOT step alone: the default view's
DOT built again from the graph model against the report's own DOT given its title.

Graphviz's layout of the same DOT would drown the difference, so `dot` is off
(JITSCOPE_DOT=none: Streamlit's own chart) unless JITSCOPE_DOT is set.

    python bench/graph_render.py [--reruns 15]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run from anywhere
os.environ.setdefault("JITSCOPE_DOT", "none")
os.environ.setdefault("JITSCOPE_EDITOR", "plain")
os.environ["JITSCOPE_HOME"] = tempfile.mkdtemp(prefix="jitscope-graph-render-")

from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest

import viz.graph
from viz.ir.model import Graph

ROOT = pathlib.Path(__file__).resolve().parent.parent
SAMPLE = "transformer_24"
TABS = ("Overview", "jaxpr", "StableHLO", "Compiled HLO")
IRS = ("jaxpr", "stablehlo", "compiled")


def leave_legacy_pages() -> None:
    """As tests/conftest.py's navigation_mode: a started server's second run, not AppTest's
    legacy pages/ mode (which reruns every script run once more)."""
    init = PagesManager.__init__

    def init_then_clear(self: PagesManager, *args: object, **kwargs: object) -> None:
        init(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    PagesManager.__init__ = init_then_clear  # type: ignore[method-assign]


def median_ms(run: Callable[[], object], times: int) -> float:
    seconds = []
    for _ in range(times):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds) * 1e3


def renders(reruns: int) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.query_params["sample"] = SAMPLE
    at.run()  # the link's analysis
    assert not at.exception, at.exception
    for tab in TABS:
        at.session_state["result_tab"] = tab
        at.run()  # warm-up: the tab's default view worked out once
        assert not at.exception, at.exception
        print(f"  {tab:<13} {median_ms(at.run, reruns):7.1f} ms per render")
    return at


def dot_step(at: AppTest, reruns: int) -> None:
    report = at.session_state["results"][-1].report
    for ir in IRS:
        graph, drawn = report.graph_models[ir], report.graphs[ir]
        title = f"{report.function} · {ir}"
        same = viz.graph.titled(drawn.dot, title) == rebuilt(graph, title)
        print(
            f"  {ir:<10} {drawn.visible_nodes:4d} boxes: built again "
            f"{median_ms(partial(rebuilt, graph, title), reruns):6.2f} ms, the report's titled "
            f"{median_ms(partial(viz.graph.titled, drawn.dot, title), reruns):6.3f} ms "
            f"(same DOT: {same})"
        )


def rebuilt(graph: Graph, title: str) -> str:
    """What graph_panel did on every rerun: the default view's DOT from the model."""
    return viz.graph.to_dot(viz.graph.default_view(graph), title)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reruns", type=int, default=15)
    args = parser.parse_args()
    leave_legacy_pages()
    print(f"{SAMPLE}, JITSCOPE_DOT={os.environ['JITSCOPE_DOT']}, medians of {args.reruns}:")
    at = renders(args.reruns)
    if hasattr(viz.graph, "titled"):
        print("the DOT step alone:")
        dot_step(at, args.reruns)


if __name__ == "__main__":
    main()
