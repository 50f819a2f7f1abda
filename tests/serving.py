"""A real `streamlit run app.py` on a free port, and Debian's Chromium to open it:
shared by the browser tests and the benchmarks that time the app in a browser."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# JITSCOPE_CHROMIUM=none runs the suite as on a machine without chromium (.ci/run)
CHROMIUM = os.environ.get("JITSCOPE_CHROMIUM", "/usr/bin/chromium")
# without the background-networking flags, Chromium's connections are refused on a
# closed network, many at a time
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def browser_marks() -> list:
    """`pytestmark` for a browser test module: marked `browser`, skipped with the reason
    when Debian's chromium is absent (or JITSCOPE_CHROMIUM=none)."""
    import pytest

    return [
        pytest.mark.browser,
        pytest.mark.skipif(
            not Path(CHROMIUM).exists(),
            reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)",
        ),
    ]


def overview_charts(page):
    """The Explore Overview's two charts, once drawn (Vega-Lite's SVG or canvas)."""
    return page.locator(
        "[data-testid=stVegaLiteChart] svg.marks, [data-testid=stVegaLiteChart] canvas"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    port: int, log: Path | int, env: dict[str, str] | None = None, script: str = "app.py"
) -> subprocess.Popen:
    """`streamlit run app.py` (or `script`) from the project, headless, on `port`; `env`
    adds to this process's environment. `log` is a path or a subprocess constant."""
    out = log.open("w") if isinstance(log, Path) else log
    try:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                script,
                "--server.headless",
                "true",
                "--server.port",
                str(port),
                "--browser.gatherUsageStats",
                "false",
            ],
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    finally:
        if out is not log:  # the server has its own copy of the file
            out.close()


def wait_listening(port: int, within_s: float = 60, poll_s: float = 0.05) -> None:
    deadline = time.time() + within_s
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(poll_s)
    raise TimeoutError(f"the server did not listen on port {port} within {within_s:.0f} s")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:  # a server stuck in shutdown must not hang the run
        proc.kill()
        proc.wait()


@contextmanager
def running_server(
    log_path: Path, env: dict[str, str] | None = None, script: str = "app.py"
) -> Iterator[str]:
    """A server for the block; yields its URL once it listens. If it died meanwhile,
    the end of its log is printed, to show why."""
    port = free_port()
    proc = start_server(port, log_path, env, script)
    try:
        wait_listening(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is not None:
            print(log_path.read_text()[-5000:])
        stop(proc)
