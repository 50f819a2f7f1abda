"""The report JSON of three samples, byte for byte against files written before the
typed-report refactor (issue #19): the public contract must not move. Measured times
vary run to run, so they are compared by presence only.

Regenerate (only when the contract grows on purpose): `python tests/test_golden.py`.
The files are the tested jax's (constraints.txt): another jax compiles other HLO.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import TESTED_JAX

GOLDEN_DIR = Path(__file__).parent / "golden"
GOLDEN_SAMPLES = ("dot_plus_one", "mlp", "relu_python_if")
TIMED = ("timings", "compile_events")  # measured now: compared by which keys hold a value
FIRST_COMPILE_ONLY = "/jax/compilation_cache/tasks_using_cache"  # a process's first compile
# XLA's stack-frame tables name the calling frames (this file, the pipeline's own
# lines): they say where the caller stands, not what was compiled
FRAME_TABLES = re.compile(r"\nFileNames\n.*?\n(?=\n+(?:%|ENTRY))", re.S)
FRAME_ID = re.compile(r"stack_frame_id=\d+")
# an op no line of the user's made (a constant JAX adds) is placed at the innermost
# frame that is neither JAX's nor jitscope's: in this test, the test's own
CALLER_FRAME = re.compile(re.escape(str(Path(__file__).parent)) + r"/[\w/]+\.py:\d+ \([\w.<>]+\)")


def golden_dict(name: str) -> dict[str, Any]:
    from viz.pipeline import analyze_target
    from viz.samples import get_sample
    from viz.target import Target

    sample = get_sample(name)
    target = Target.from_code(sample.code, sample.function, static=list(sample.static))
    data = analyze_target(target, sample.args, runs=0).to_dict()
    for key in TIMED:
        data[key] = {k: v if isinstance(v, bool) else v is not None for k, v in data[key].items()}
    data["compile_events"].pop(FIRST_COMPILE_ONLY, None)  # other tests may have compiled first
    data["source_file"] = data["source_file"] is not None
    if data["compiled"]:
        text = FRAME_TABLES.sub("\n", data["compiled"]["text"])
        data["compiled"]["text"] = FRAME_ID.sub("stack_frame_id=N", text)
    return json.loads(CALLER_FRAME.sub("<the caller's frame>", json.dumps(data, sort_keys=True)))


@pytest.mark.parametrize("name", GOLDEN_SAMPLES)
def test_the_report_json_of_a_sample_is_what_it_was_before(name: str) -> None:
    import jax

    if jax.__version__ != TESTED_JAX:
        pytest.skip(f"the golden files are jax {TESTED_JAX}'s, this is {jax.__version__}")
    expected = json.loads((GOLDEN_DIR / f"{name}.json").read_text())
    assert list(differences(golden_dict(name), expected)) == []


def differences(got: Any, want: Any, path: str = "") -> Any:
    """The paths where two JSON values differ, with both sides (short)."""
    if isinstance(got, dict) and isinstance(want, dict):
        for key in sorted(set(got) | set(want)):
            yield from differences(
                got.get(key, "<absent>"), want.get(key, "<absent>"), f"{path}.{key}"
            )
    elif isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            yield from differences(g, w, f"{path}[{i}]")
    elif got != want:
        yield path, repr(got)[:300], repr(want)[:300]


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent.parent))
    for sample in GOLDEN_SAMPLES:
        text = json.dumps(golden_dict(sample), indent=1, sort_keys=True)
        (GOLDEN_DIR / f"{sample}.json").write_text(text + "\n")
        print("wrote", sample)
