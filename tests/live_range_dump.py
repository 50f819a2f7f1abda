"""XLA's `*-live-range.txt` dump read back: the flattened sequence and each buffer's
live range, for the tests that hold `viz.memory.live` to XLA's own (on CPU and on the
TPU v5e's recorded dumps)."""

from __future__ import annotations

import re

Ranges = dict[tuple[str, str], tuple[int, int]]  # (instruction, {index}) → (start, end)


def read_live_ranges(text: str) -> tuple[list[str], Ranges]:
    """The instruction sequence and every buffer's range, as XLA printed them."""
    sequence: list[str] = []
    ranges: Ranges = {}
    part = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in ("InstructionSequence:", "BufferLiveRange:"):
            part = stripped
        elif stripped.startswith("Live ranges at"):
            break
        elif part == "InstructionSequence:":
            sequence.append(stripped.split(":", 1)[1])
        elif part == "BufferLiveRange:":
            found = re.fullmatch(r"(.*?)(\{[\d,]*\}):(\d+)-(\d+)", stripped)
            assert found, stripped
            name, index, start, end = found.groups()
            ranges[(name, index)] = (int(start), int(end))
    return sequence, ranges
