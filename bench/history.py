"""What the run history costs the app: recording, listing, loading and diffing.

Analyzes the largest sample (the 24-layer transformer, compile only) and the
transformer block once, then times `History.record` (compress and store the report
with its compiled graph), `History.runs` over a full history, `History.report`
(load one back) and `diff_reports` of the two (IR text diffs included), each the
median of several repeats in a temporary JITSCOPE_HOME. Targets: record < 250 ms,
list < 50 ms, load < 100 ms, diff < 250 ms (the app does each once per Analyze or
page view).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from viz.diff import diff_reports
from viz.history import History
from viz.program import Program
from viz.report import Report
from viz.samples import get_sample
from viz.worker.handlers import analyze
from viz.worker.protocol import Analyze

os.environ["JITSCOPE_HOME"] = tempfile.mkdtemp(prefix="jitscope-bench-")


def report(name: str) -> Report:
    request = Analyze(Program.from_sample(get_sample(name)).settings_on("cpu"), runs=0)
    return analyze(lambda _: None, request).report


def median_ms(work: Callable[[], Any], repeats: int = 7) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    big, block = report("transformer_24"), report("transformer_block")
    db = History()
    record = median_ms(lambda: db.record(big, code="code"))
    for _ in range(db.keep_reports):  # a full history: every run keeps its report
        db.record(block, code="code")
    newest = db.runs(limit=1)[0].id
    listing = median_ms(lambda: db.runs(limit=2000))
    load = median_ms(lambda: db.report(newest))
    diff = median_ms(lambda: diff_reports(block, big))
    size = db.path.stat().st_size / 2**20
    print(f"record (24-layer transformer)  {record:7.1f} ms")
    print(f"list {db.count()} runs               {listing:7.1f} ms")
    print(f"load one full report          {load:7.1f} ms")
    print(f"diff block vs 24 layers       {diff:7.1f} ms")
    print(f"history file                  {size:7.1f} MiB")


if __name__ == "__main__":
    main()
