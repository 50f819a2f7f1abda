"""One `Settings` (viz.settings) where the settings go: a request, a history run, a diff
side, a share link and the stages (`Target.from_settings`). What was written before
(wire messages, history rows, links, JSON keys) still reads the same. No worker."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from viz import share
from viz.history import History
from viz.program import Program
from viz.samples import list_samples
from viz.settings import Settings
from viz.target import DEFAULT_MEMORY_LIMIT, Target
from viz.worker import admit, protocol

SAMPLES = {s.name for s in list_samples()}
EVERY = Settings(
    code="def f(x, n):\n    return x * n\n",
    sample=None,
    folder="/somewhere",
    function="f",
    args="f32[8], 3",
    static=["n"],
    donate=["x"],
    device="cpu:8",
    x64=True,
    compiler_options={"xla_disable_hlo_passes": "fusion"},
    mesh="data=8",
    memory_limit_bytes=1 << 30,
)

# the keys `python -m viz history --json` wrote for a run before its settings were one type
RUN_KEYS = {"id", "created", "source", "function", "args", "static", "device", "ok"} | {
    "error_kind",
    "sample",
    "code_hash",
    "jax_version",
    "compiler_options",
    "donate",
    "summary",
    "full",
}


def test_a_request_on_the_wire_has_the_settings_keys_as_its_own() -> None:
    request = protocol.Analyze(EVERY, runs=3)
    wire = request.to_dict()
    assert "settings" not in wire and wire["function"] == "f" and wire["runs"] == 3
    assert wire["folder"] == "/somewhere" and wire["mesh"] == "data=8"
    assert protocol.decode_request("analyze", wire) == request


def test_a_flat_message_of_the_previous_form_decodes_into_settings() -> None:
    old = {"code": "x", "function": "f", "args": "f32[2]", "folder": "/f", "x64": False}
    request = protocol.decode_request("passes", old)
    assert isinstance(request, protocol.Passes)
    assert request.settings == Settings(
        code="x", folder="/f", function="f", args="f32[2]", x64=False
    )
    with pytest.raises(protocol.BadRequest, match="takes no evil"):
        protocol.decode_request("passes", {**old, "evil": 1})


def test_demo_mode_checks_the_settings_fields_by_their_own_names() -> None:
    asked = protocol.Analyze(Settings(sample="mlp", function="mlp", folder="/tmp"))
    assert asked.changed() == {"sample", "function", "folder"}
    with pytest.raises(admit.Refused, match="folder"):
        admit.admit(asked)
    mesh = protocol.CacheState(Settings(sample="mlp", function="mlp", mesh="data=2"))
    with pytest.raises(admit.Refused, match="mesh"):  # the cache lab's state takes no mesh
        admit.admit(mesh)


def test_a_program_hands_its_settings_on_whole_with_the_pages_device() -> None:
    program = Program(EVERY)
    asked = protocol.Analyze(program.settings_on("cpu"), runs=5)
    assert asked.settings == Settings(**{**EVERY.to_dict(), "device": "cpu"})
    assert program.settings.device == "cpu:8"  # the program itself is not changed


def test_the_stages_take_every_setting_from_one_settings(tmp_path: Path) -> None:
    (tmp_path / "helper_for_settings.py").write_text("K = 3\n")
    code = "from helper_for_settings import K\n\ndef f(x, n):\n    return x * n * K\n"
    settings = Settings(**{**EVERY.to_dict(), "code": code, "folder": str(tmp_path)})
    target = Target.from_settings(settings, expressions=False)
    assert target.name == "f" and target.static_argnums == (1,) and target.donate_argnums == (0,)
    assert (target.device, target.x64, target.mesh) == ("cpu:8", True, "data=8")
    assert target.compiler_options == {"xla_disable_hlo_passes": "fusion"}
    assert target.memory_limit_bytes == 1 << 30 and not target.expressions
    unlimited = Target.from_settings(Settings(code=code, folder=str(tmp_path), function="f"))
    assert unlimited.memory_limit_bytes == DEFAULT_MEMORY_LIMIT


def test_a_history_row_written_before_loads_with_its_settings(tmp_path: Path) -> None:
    """A row as the previous jitscope wrote it (the same columns, filled by hand), read
    back, reopened as a program, and written out with the same JSON keys."""
    db = History(tmp_path / "history.sqlite")
    db.schema_version()  # creates the file
    with sqlite3.connect(db.path) as raw:
        raw.execute("INSERT INTO sources VALUES ('abc', 'def g(x, k):\n    return x * k\n')")
        raw.execute(
            "INSERT INTO runs (created, source, function, args, static, device, ok, "
            "error_kind, sample, code_hash, jax_version, options, donate, summary) "
            "VALUES (?, 'app', 'g', 'f32[4], 2', '[\"k\"]', 'cpu', 1, NULL, NULL, 'abc', "
            "'0.7.0', '{\"xla_cpu_enable_fast_math\": \"true\"}', '[\"x\"]', '{}')",
            (time.time(),),
        )
    (run,) = db.runs()
    assert run.settings == Settings(
        function="g",
        args="f32[4], 2",
        static=["k"],
        donate=["x"],
        compiler_options={"xla_cpu_enable_fast_math": "true"},
    )
    assert set(run.to_dict()) == RUN_KEYS
    assert json.loads(json.dumps(run.to_dict()))["static"] == ["k"]
    program = db.program(run)
    assert program.settings.code.startswith("def g") and program.settings.args == "f32[4], 2"
    assert run.numbers.function == "g" and run.numbers.static == ["k"]


def test_a_link_made_before_opens_with_the_same_settings() -> None:
    """Query parameters as a link of the previous jitscope wrote them."""
    params = {
        "function": ["mlp"],
        "args": ["[{'w': f32[784,512], 'b': f32[512]}], f32[32,784]"],
        "static": [""],
        "device": ["cpu"],
        "donate": ["x"],
        "mesh": ["data=2"],
        "option": ["xla_disable_hlo_passes=fusion"],
        "sample": ["mlp"],
    }
    opened = share.open_link(params, Program(Settings()), SAMPLES, demo=False)
    assert opened.run_now and opened.program is not None and not opened.notices
    s = opened.program.settings
    assert (s.sample, s.function, s.static, s.donate, s.mesh) == ("mlp", "mlp", [], ["x"], "data=2")
    assert s.compiler_options == {"xla_disable_hlo_passes": "fusion"}
    again = share.link(opened.program, "cpu", demo=False)
    assert {k: v if isinstance(v, list) else [v] for k, v in again.items()} == params
