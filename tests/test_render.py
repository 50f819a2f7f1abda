"""DOT → SVG: Debian's `dot` or pip's graphviz-pure, and a clear error with neither."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from viz.graph import render

CLUSTERED = """digraph {
  subgraph "cluster_layer0" { label="layer0"; a [label="dot_general f32[8,128]"]; b; }
  subgraph "cluster_layer1" { label="layer1"; c; d; }
  a -> b -> c -> d;
}"""


def _pure() -> str | None:
    return shutil.which("graphviz-pure") or shutil.which(
        "graphviz-pure", path=str(Path(sys.executable).parent)
    )


def _shape(svg: str) -> tuple[int, int, int]:
    return tuple(svg.count(f'class="{kind}"') for kind in ("node", "edge", "cluster"))


def test_jitscope_dot_none_means_no_renderer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JITSCOPE_DOT", "none")
    assert render.dot_program() is None
    with pytest.raises(render.DotNotFound, match="graphviz-pure"):
        render.svg(CLUSTERED)


def test_the_system_dot_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JITSCOPE_DOT", raising=False)
    system = shutil.which("dot")
    if system is None:
        pytest.skip("no system `dot` on PATH")
    assert render.dot_program() == system


def test_pip_alone_finds_graphviz_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    """No `dot` on PATH (a pip-only install): graphviz-pure, even from a venv's bin/
    that is not on PATH."""
    if _pure() is None:
        pytest.skip("graphviz-pure not installed (pip install -r requirements.txt)")
    monkeypatch.delenv("JITSCOPE_DOT", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert Path(render.dot_program()).name == "graphviz-pure"
    assert _shape(render.svg(CLUSTERED)) == (4, 3, 2)


def test_both_renderers_draw_the_same_graph() -> None:
    programs = [p for p in (shutil.which("dot"), _pure()) if p]
    if len(programs) < 2:
        pytest.skip("needs both Debian's `dot` and graphviz-pure")
    svgs = [render.svg(CLUSTERED, p) for p in programs]
    assert _shape(svgs[0]) == _shape(svgs[1]) == (4, 3, 2)
    titles = [sorted(re.findall(r'class="(?:node|edge)">\s*<title>(.*?)</title>', s)) for s in svgs]
    assert len(titles[0]) == 7
    assert titles[0] == titles[1]


@pytest.mark.dot
def test_a_renderer_failure_says_what_it_said() -> None:
    program = render.dot_program()
    if program is None:
        pytest.skip("no DOT renderer installed")
    with pytest.raises(RuntimeError, match="failed"):
        render.svg("digraph { a -> ", program)


def test_the_same_dot_is_laid_out_once_and_a_failure_is_not_kept(tmp_path: Path) -> None:
    """A page's rerun draws the same graphs again: the renderer runs once per DOT."""
    calls = tmp_path / "calls"
    program = tmp_path / "fake-dot"
    program.write_text(
        f"#!/bin/sh\necho x >> {calls}\ninput=$(cat)\n"
        'case "$input" in *broken*) echo "syntax error" >&2; exit 1;; esac\n'
        'echo "<svg>$input</svg>"\n'
    )
    program.chmod(0o755)
    first = render.svg(CLUSTERED + "\n// once", str(program))
    assert render.svg(CLUSTERED + "\n// once", str(program)) == first
    assert render.svg(CLUSTERED + "\n// twice", str(program)) != first
    assert calls.read_text().count("x") == 2
    for _ in range(2):  # a failure is raised each time, not remembered
        with pytest.raises(RuntimeError, match="syntax error"):
            render.svg("broken", str(program))
    assert calls.read_text().count("x") == 4


def test_an_svgs_size_is_read_in_css_pixels() -> None:
    head = '<svg width="513pt" height="286pt"\n viewBox="0.00 0.00 513.05 285.66">'
    assert render.svg_size(head) == pytest.approx((684.0, 381.33), abs=0.01)
    assert render.svg_size('<svg width="40px" height="30px">') == (40.0, 30.0)
    assert render.svg_size("<svg>") is None
