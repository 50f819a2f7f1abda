"""The Recordings page, driven headless with AppTest, on a recording made in-process
(`viz.recording()`) and stored in this test's own JITSCOPE_HOME."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from streamlit.testing.v1 import AppTest

import viz

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")

pytestmark = pytest.mark.usefixtures("navigation_mode", "plain_editor")


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JITSCOPE_HOME", str(tmp_path))
    return tmp_path


def recordings_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.switch_page("pages/recordings.py").run()
    assert not at.exception, at.exception
    return at


def test_no_recordings_says_how_to_make_one():
    at = recordings_page()
    assert any("jitscope record" in i.value for i in at.info)


def test_a_lambda_made_in_a_loop_cannot_open_and_says_why():
    with viz.recording(name="loop") as rec:
        for _ in range(3):
            jax.jit(lambda v: v * 3)(jnp.ones(4))
    rec.save()
    at = recordings_page()
    assert [m.value for m in at.metric][:1] == ["3"]
    assert any("a new jit(<lambda>) is made on each call" in i.value for i in at.info)
    assert any("not a top-level function" in w.value for w in at.warning)
    assert not [b for b in at.button if b.label == "Open in Explore"]


def test_the_overviews_numbers_wrap_in_one_row_and_are_never_cut():
    """Six columns cut a value as wide as '739.9 ms' at 1280 px ('739.9 …'): the
    numbers sit in one row that wraps, each as wide as its value, as the Diff's counts."""
    with viz.recording(name="loop") as rec:
        jax.jit(lambda v: v * 3)(jnp.ones(4))
    rec.save()
    at = recordings_page()
    rows = [b for b in at.main.children.values() if b.type == "flex_container"]
    row = next(b for b in rows if any(c.type == "metric" for c in b.children.values()))
    assert row.proto.flex_container.direction == row.proto.flex_container.HORIZONTAL
    assert row.proto.flex_container.wrap
    labels = [c.label for c in row.children.values() if c.type == "metric"]
    assert labels == ["compiles", "compile time", "wall time", "compiling", "functions",
                      "largest peak"]  # fmt: skip
    assert not [c for c in at.columns if c.metric]


def test_a_function_whose_file_is_gone_says_so_once(tmp_path: Path):
    """'cannot read /…/gone.py: [Errno 2] No such file or directory: '/…/gone.py'' named
    the file twice in Python's words: the file is gone, said so."""
    source = tmp_path / "gone.py"
    source.write_text("def triple(x):\n    return x * 3\n")
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location("gone", source))
    module.__spec__.loader.exec_module(module)
    with viz.recording(name="gone") as rec:
        jax.jit(module.triple)(jnp.ones(4))
    rec.save()
    source.unlink()
    at = recordings_page()
    (said,) = [w.value for w in at.warning if str(source) in w.value]
    assert said == (
        f"Open in Explore reads the function's file, and {source} is gone: moved or deleted "
        "since the recording (the recorded compiles still hold)"
    )


def record_steps(name: str, sizes: tuple[int, ...]) -> None:
    step = jax.jit(lambda v: v * 2)
    with viz.recording(name=name) as rec:
        for n in sizes:
            step(jnp.ones(n))
    rec.save()


def test_compare_with_an_earlier_recording_shows_the_diff_and_the_page_downloads():
    record_steps("before", (2,))
    record_steps("after", (2, 3, 4))
    at = recordings_page()
    (code,) = [c.value for c in at.code if c.value.startswith("recordings rec:")]
    assert "compiles 1 → 3 (+2)" in code and "changed  <lambda>" in code
    assert any(b.label == "Download as HTML" for b in at.get("download_button"))


def test_a_journal_left_by_a_killed_recorder_is_offered_and_recovered(home: Path):
    import subprocess

    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid names the journal's parent: a process that is no more
    from viz.recorder.storage.orphans import journal_path

    path = journal_path(1.0, gone.pid)
    with viz.recording(name="killed", journal=path):
        jax.jit(lambda v: v + 5)(jnp.ones(3))
    at = recordings_page()
    assert any("left behind by a recorder that was killed" in w.value for w in at.warning)
    at.button(key="rec_recover").click().run()
    assert any("Recovered 1 recording" in s.value for s in at.success)
    assert not path.exists()
    assert [m.value for m in at.metric][:1] == ["1"]


def test_op_by_op_compiles_that_took_a_third_of_the_run_are_said_with_advice():
    """The recording of JAX's examples/mnist_classifier_fromscratch.py on a TPU v5e
    (tests/fixtures/tpu_v5e/recordings): 47 op-by-op compiles took 12.0 s of 32.5 s."""
    import json

    from viz.recorder import Recording
    from viz.recorder.storage.recordings import save

    fixture = ROOT / "tests" / "fixtures" / "tpu_v5e" / "recordings"
    data = json.loads((fixture / "mnist_classifier_fromscratch.json").read_text())
    save(Recording.from_dict(data))
    at = recordings_page()
    said = " ".join(c.value for c in at.caption)
    assert "47 op-by-op compiles of ops run outside jit (12.01 s, 37%" in said
    assert any("jit the code that calls them" in i.value for i in at.info)


def test_each_compile_says_its_reason_once_beside_its_call_site_and_every_advice():
    """A new shape, then a Python float turned array: two kinds, two lines of advice; the
    compiles table's 'need' does not repeat the 'why' beside it, and 'called from' is as
    wide as a file.py:line (it was cut to 'train_loop.p')."""
    step = jax.jit(lambda x, s: x * s)
    with viz.recording(name="kinds") as rec:
        for size, s in ((3, 2.0), (4, 2.0), (5, 2.0), (5, jnp.float32(2.0))):
            step(jnp.ones(size), s)
    rec.save()
    at = recordings_page()
    (advice,) = [i.value for i in at.info if "x dim 0 took 3 values" in i.value]
    assert advice.splitlines()[1].endswith(
        "→ pass one kind on every call: jnp.float32(s) (jnp.asarray(s) keeps a Python float "
        "weak), or mark `s` static if it is a config value"
    )
    (table,) = [d for d in at.dataframe if "need" in d.value.columns]
    frame = table.value
    assert list(frame.columns)[:5] == ["#", "at", "called from", "need", "why"]
    assert list(frame["need"])[:3] == ["first", "needed", "needed"]
    assert frame["need"][3] == (  # the weak type alone: avoidable, said in words
        "avoidable: s was a Python float, then an f32[] array: only the weak type differs"
    )
    assert frame["why"][3] == "s: Python float (weak f32[]) → f32[]"
    assert re.fullmatch(r"tests/test_app_recordings\.py:\d+", frame["called from"][0])
    widths = json.loads(table.proto.columns)  # 'called from' fits its cells, left of 'why'
    assert "called from" not in widths and widths["why"]["width"] == "large"
