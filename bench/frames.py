"""How long the server takes to read one big frame from a worker's pipe: a report of
SIZE_MB (a 96-layer model's graphs run to tens of MB) written by a thread in one go,
read by `FrameReader` as the client does. Prints the median of REPEATS reads.

    python bench/frames.py [SIZE_MB]
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time

from viz.worker.frames import FrameReader, encode

REPEATS = 5


def read_one(frame: bytes) -> float:
    read_fd, write_fd = os.pipe()

    def write_all() -> None:
        view = memoryview(frame)
        while view:
            view = view[os.write(write_fd, view) :]
        os.close(write_fd)

    writer = threading.Thread(target=write_all)
    reader = FrameReader(read_fd)
    started = time.perf_counter()
    writer.start()
    message = None
    while message is None:
        message = reader.poll(1.0)
    took = time.perf_counter() - started
    writer.join()
    os.close(read_fd)
    return took


def main() -> None:
    size_mb = float(sys.argv[1]) if len(sys.argv) > 1 else 50
    text = "x" * int(size_mb * 2**20)
    frame = encode({"kind": "result", "text": text})
    times = [read_one(frame) for _ in range(REPEATS)]
    print(
        f"one {len(frame) / 2**20:.0f} MiB frame read in {statistics.median(times) * 1e3:.0f} ms "
        f"(median of {REPEATS}; {min(times) * 1e3:.0f}–{max(times) * 1e3:.0f} ms)"
    )


if __name__ == "__main__":
    main()
