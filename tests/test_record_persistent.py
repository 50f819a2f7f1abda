"""The persistent compilation cache across four runs of one program with one cache
folder (`record --persistent-cache DIR`), and the diff of two of those recordings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_record_cli import viz

pytestmark = pytest.mark.slow

PROGRAM = """
import jax, jax.numpy as jnp

jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)  # store every compile
SCALE = 2.0

@jax.jit
def scaled(x):
    return jnp.sin(x) * SCALE

@jax.jit
def shifted(x):
    return jnp.cos(x) + 1.0

scaled(jnp.ones(4))
shifted(jnp.ones(4))
"""
FLAG = "--xla_cpu_enable_fast_math=false"


def by_function(data: dict) -> dict[str, dict]:
    return {c["function"]: c["persistent"] for c in data["compiles"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[dict, str]]:
    """Fresh; the same again; XLA_FLAGS changed; a constant in `scaled` changed."""
    root = tmp_path_factory.mktemp("persistent")
    home, program = root / "home", root / "prog.py"
    results = []
    for i, (flags, scale) in enumerate([("", "2.0"), ("", "2.0"), (FLAG, "2.0"), ("", "3.0")]):
        program.write_text(PROGRAM.replace("SCALE = 2.0", f"SCALE = {scale}"))
        out = root / f"run{i}.json"
        done = viz(
            "record", "--json", str(out), "--persistent-cache", "cache", "--", str(program),
            cwd=root, env={"XLA_FLAGS": flags, "JITSCOPE_HOME": str(home)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        results.append((json.loads(out.read_text()), done.stderr))
    return results


def test_a_fresh_cache_misses_and_stores_every_compile(runs, tmp_path_factory):
    data, stderr = runs[0]
    for record in by_function(data).values():
        assert record["state"] == "miss" and record["written"] and not record["changed"]
        assert record["why"].startswith("the first compile of this function and signature")
        cache = Path(record["cache_dir"])
        assert (cache / f"{record['key']}-cache").exists()  # the key is JAX's own
    assert "persistent cache: 0 of 2 compiles came from disk" in stderr


def test_the_same_program_again_comes_from_disk(runs):
    data, stderr = runs[1]
    assert {f: r["state"] for f, r in by_function(data).items()} == {
        "scaled": "hit",
        "shifted": "hit",
    }
    assert by_function(data)["scaled"]["key"] == by_function(runs[0][0])["scaled"]["key"]
    assert data["summary"]["persistent_hits"] == 2
    assert "2 of 2 compiles came from disk (saved" in stderr


def test_changed_xla_flags_miss_and_name_the_flag(runs):
    data, stderr = runs[2]
    for record in by_function(data).values():
        assert record["state"] == "miss"
        changed = {c["component"]: c for c in record["changed"]}
        assert "xla_flags" in changed and "computation" not in changed
        assert changed["xla_flags"]["after"] == FLAG
        assert changed["xla_flags"]["before"] == "(none)"
    assert f"XLA flags (`{FLAG}` added)" in stderr


def test_a_changed_constant_misses_on_computation_and_the_other_function_hits(runs):
    data, stderr = runs[3]
    records = by_function(data)
    assert records["shifted"]["state"] == "hit"
    assert records["scaled"]["state"] == "miss"
    assert [c["component"] for c in records["scaled"]["changed"]] == ["computation"]
    assert "1 of 2 compiles came from disk" in stderr and "key changed: computation" in stderr


def test_compiles_without_the_persistent_cache_say_off(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    out = tmp_path / "rec.json"
    done = viz("record", "--no-history", "--json", str(out), "--", "prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert {r["state"] for r in by_function(data).values()} == {"off"}
    assert "persistent cache" not in done.stderr


def test_two_recordings_diff_by_function(runs, tmp_path):
    (first, _), (last, _) = runs[0], runs[3]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(first))
    b.write_text(json.dumps(last))
    out = tmp_path / "diff.json"
    done = viz("diff", str(a), str(b), "--json", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    diff = json.loads(out.read_text())
    rows = {f["function"]: f for f in diff["functions"]}
    assert rows["shifted"]["status"] == "changed"  # a hit now: its reasons are the same
    assert rows["shifted"]["persistent_hits"] == {"a": 0, "b": 1, "delta": 1}
    assert rows["scaled"]["compiles"] == {"a": 1, "b": 1, "delta": 0}
    assert diff["summary"]["compiles"]["delta"] == 0
    assert set(diff["summary"]) >= {"compiles", "compile_s", "wall_s"}
    assert "compiles 2 → 2 (±0)" in done.stdout


def test_a_recording_diffed_with_an_analysis_is_misuse(runs, tmp_path):
    a = tmp_path / "a.json"
    a.write_text(json.dumps(runs[0][0]))
    done = viz("diff", str(a), "12", cwd=tmp_path)
    assert done.returncode == 2 and "compare a recording with a recording" in done.stderr
