"""Debian's Graphviz `dot` vs pip's `graphviz-pure` on our largest default views.

Analyzes samples/transformer_24.py (compile only), then for each IR lays out the
app's default view (at most 80 boxes) and the largest view the app opens by itself
(at most 300 boxes) with each renderer found: median of 3 `-Tsvg` runs, and what the
SVG holds (nodes, edges, clusters, size in points). SVGs go to --out for a look.

    python bench/dot_renderers.py [--out /tmp/dot_renderers]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

import viz.graph
from viz.graph import render
from viz.pipeline import analyze
from viz.samples import get_sample
from viz.source import find_function, load_module

ROOT = Path(__file__).resolve().parent.parent


TARGET_S = 1.0  # a 300-box view: what the app waits for before it draws


def renderers() -> dict[str, str]:
    found = {"Debian dot": shutil.which("dot", path="/usr/bin:/bin")}
    found["graphviz-pure"] = shutil.which("graphviz-pure") or shutil.which(
        "graphviz-pure", path=str(Path(sys.executable).parent)
    )
    return {name: path for name, path in found.items() if path}


def svg_facts(svg: str) -> str:
    size = re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg)
    nodes, edges, clusters = (svg.count(f'class="{kind}"') for kind in ("node", "edge", "cluster"))
    extent = f"{float(size[1]):6.0f}×{float(size[2]):<6.0f}pt" if size else "size ?"
    return f"{nodes:4d} nodes {edges:4d} edges {clusters:3d} clusters {extent}"


def timed(dot: str, program: str) -> tuple[float, str]:
    times, svg = [], ""
    for _ in range(3):
        start = time.perf_counter()
        svg = render.svg(dot, program)
        times.append(time.perf_counter() - start)
    return statistics.median(times), svg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/dot_renderers"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sample = get_sample("transformer_24")
    module = load_module(sample.code)
    fn = find_function(module, sample.code, sample.function)
    report = analyze(fn, sample.args, sample.static, runs=0, namespace=vars(module))
    programs = renderers()
    print("renderers:", ", ".join(f"{n} ({p})" for n, p in programs.items()))
    worst = 0.0
    for ir, graph in report.graph_models.items():
        for budget in (viz.graph.DEFAULT_NODES, viz.graph.MAX_NODES):
            view = viz.graph.default_view(graph, max_nodes=budget)
            dot = viz.graph.to_dot(view, f"{ir} · {budget}")
            shown = len(viz.graph.visible(view)[0])
            for name, program in programs.items():
                seconds, svg = timed(dot, program)
                worst = max(worst, seconds)
                tag = name.split()[-1].replace("-", "_")
                (args.out / f"{ir}_{budget}_{tag}.svg").write_text(svg)
                print(
                    f"{ir:9s} budget {budget:3d} ({shown:3d} boxes)  {name:13s} "
                    f"{seconds:6.3f} s  {svg_facts(svg)}"
                )
    print(f"slowest layout {worst:.3f} s   target <= {TARGET_S} s   SVGs in {args.out}")


if __name__ == "__main__":
    main()
