"""A first-visit soak: a fresh server, one visitor who clicks Analyze early, many times.

Issue #20 saw a fresh server show no result 60 s after an Analyze click in 2 of 6
runs of the browser check. Each visit here:
- starts `streamlit run app.py` afresh (its own JITSCOPE_HOME, a free port);
- opens the page in Debian's Chromium and clicks Analyze at a random moment in the
  first 3 s after the button appears;
- waits up to 30 s for the analysis to show (the Overview's "jaxpr equations").

A visit that shows no result keeps what explains it under --keep (default
/tmp/jitscope-soak): the server's log (debug level: sessions, reruns, script runs),
the browser's console, the sidebar's worker line (requests sent, restarts) and a
screenshot. Prints one line per visit and a summary.

    python bench/first_visit_soak.py [visits=50] [--keep DIR]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from playwright.sync_api import sync_playwright
from serving import CHROMIUM, CHROMIUM_ARGS, free_port, start_server, stop, wait_listening

RESULT_WITHIN_S = 30
CLICK_WITHIN_S = 3


def results_shown(page) -> int:
    """How many results the session holds: 0 before the first, else the number in the
    Result picker's "#k · ..." label (shown from the second result on)."""
    if page.get_by_text("jaxpr equations").count() == 0:
        return 0
    picked = page.locator("[data-testid=stSelectbox]").filter(has_text="Result").locator("input")
    if picked.count() == 0:
        return 1
    label = picked.first.input_value()  # "#2 · f(f32[256,512], f32[512,128]) · 04:30:33"
    return int(label.split("#", 1)[1].split(" ", 1)[0]) if "#" in label else 1


def settled(page, before: int, deadline: float) -> bool:
    """True once a result newer than the `before` ones is on screen (a visit's first run
    analyzes the default sample by itself: a result alone says nothing of the click);
    False at the deadline."""
    while time.monotonic() < deadline:
        if results_shown(page) > before:
            return True
        time.sleep(0.05)
    return False


def visit(number: int, keep: Path, browser) -> tuple[bool, float | None, str]:
    """One fresh server and one visitor; (result shown, seconds from click, note)."""
    home = Path(tempfile.mkdtemp(prefix="jitscope-soak-"))
    log = keep / f"visit{number:02d}-server.log"
    port = free_port()
    env = {"JITSCOPE_HOME": str(home), "STREAMLIT_LOGGER_LEVEL": "debug"}
    server = start_server(port, log, env)
    console: list[str] = []
    page = None
    try:
        wait_listening(port)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        page.goto(f"http://127.0.0.1:{port}/")
        button = page.get_by_role("button", name="Analyze")
        button.wait_for(timeout=60_000)
        time.sleep(random.uniform(0, CLICK_WITHIN_S))
        before = results_shown(page)
        button.click()
        clicked = time.monotonic()
        if settled(page, before, clicked + RESULT_WITHIN_S):
            return True, time.monotonic() - clicked, ""
        worker = page.get_by_text("Worker ", exact=False).first.inner_text(timeout=2000)
        page.screenshot(path=str(keep / f"visit{number:02d}.png"), full_page=True)
        (keep / f"visit{number:02d}-console.log").write_text("\n".join(console))
        return False, None, f"no result in {RESULT_WITHIN_S} s; sidebar: {worker!r}"
    finally:
        if page is not None:
            page.close()
        stop(server)
        shutil.rmtree(home, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("visits", nargs="?", type=int, default=50)
    parser.add_argument("--keep", type=Path, default=Path("/tmp/jitscope-soak"))
    args = parser.parse_args()
    args.keep.mkdir(parents=True, exist_ok=True)
    shown: list[float] = []
    failed: list[int] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for number in range(1, args.visits + 1):
            ok, seconds, note = visit(number, args.keep, browser)
            if ok and seconds is not None:
                shown.append(seconds)
                (args.keep / f"visit{number:02d}-server.log").unlink(missing_ok=True)
                print(f"visit {number:2d}: result {seconds:5.1f} s after the click", flush=True)
            else:
                failed.append(number)
                print(f"visit {number:2d}: FAILED, {note} (logs in {args.keep})", flush=True)
        browser.close()
    slowest = f", slowest {max(shown):.1f} s" if shown else ""
    print(
        f"\n{len(shown)} of {args.visits} visits showed their result within "
        f"{RESULT_WITHIN_S} s{slowest}; failed: {failed or 'none'}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
