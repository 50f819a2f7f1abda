"""DOT → SVG with a Graphviz `dot` program: Debian's (`apt-get install graphviz`), or
the `graphviz-pure` command that `pip install -r requirements.txt` brings (a Rust port
of Graphviz 16.1; bench/dot_renderers.py compares the two on our largest views).

`JITSCOPE_DOT` picks the program: a command name or path, or `none` to act as if
neither were installed (how the tests check the app without Graphviz). Unset: the
system `dot` when it is on PATH, else `graphviz-pure` (first on PATH, then beside
this Python's executable, where pip puts scripts of a venv that is not activated).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

CANDIDATES = ("dot", "graphviz-pure")
TIMEOUT_S = 60.0  # a 300-node view takes well under a second; minutes mean a runaway layout


class DotNotFound(RuntimeError):
    """No Graphviz program: graphs fall back to Streamlit's own chart."""


def dot_program() -> str | None:
    """The path of the DOT renderer to use, or None when there is none."""
    wanted = os.environ.get("JITSCOPE_DOT", "").strip()
    if wanted.lower() == "none":
        return None
    for name in (wanted,) if wanted else CANDIDATES:
        found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
        if found:
            return found
    return None


def svg(dot: str, program: str | None = None) -> str:
    """DOT source → SVG text. Raises DotNotFound without a renderer, RuntimeError when
    the renderer fails (its message attached)."""
    program = program or dot_program()
    if program is None:
        raise DotNotFound(
            "No Graphviz `dot` program found: `pip install -r requirements.txt` installs "
            "graphviz-pure, or `apt-get install graphviz`."
        )
    return _layout(program, dot)


_SIZE = re.compile(r'<svg width="([0-9.]+)(pt|px)?" height="([0-9.]+)(pt|px)?"')
_PX = {"pt": 4 / 3, "px": 1.0, None: 1.0}  # CSS pixels per unit (Graphviz writes points)


def svg_size(svg: str) -> tuple[float, float] | None:
    """The width and height an SVG of `svg` draws at, in CSS pixels; None when its
    header gives neither."""
    found = _SIZE.search(svg)
    if found is None:
        return None
    width, w_unit, height, h_unit = found.groups()
    return float(width) * _PX[w_unit], float(height) * _PX[h_unit]


# Every rerun of a page draws its graphs again, most often the very same DOT (a widget
# elsewhere changed): lay each out once. Bounded: a large view's SVG is about 100 KB.
@functools.lru_cache(maxsize=64)
def _layout(program: str, dot: str) -> str:
    done = subprocess.run(
        [program, "-Tsvg"],
        input=dot.encode("utf-8"),
        capture_output=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{Path(program).name} failed: {done.stderr.decode(errors='replace')}")
    return done.stdout.decode("utf-8")
