"""Why did jit recompile? viz.cache (pure diffing) and live sessions on a real jit cache.

The live scenarios each change exactly one thing between two calls and expect
exactly one miss whose one reason names that field kind and that parameter.
Sessions that need no sharding run in-process (`CacheSession`); sharding runs in
a `cpu:8` worker, and the CLI's `cache` command in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from conftest import REPO

from viz.cache.signature import (
    REASON_KINDS,
    ArgSig,
    LeafSig,
    Reason,
    Signature,
    diff,
    explain_miss,
    reason_fix,
    reason_text,
    weak_type_text,
)
from viz.cache.story import cache_story
from viz.settings import Settings
from viz.worker.protocol import CacheCall, CacheCalls, CacheReply, CacheState

# --------------------------------------------------------------------------- pure: signatures


def leaf(path: str = "x", shape=(4,), dtype: str = "f32", **kwargs: Any) -> LeafSig:
    return LeafSig(path, tuple(shape), dtype, kwargs.pop("weak_type", False), **kwargs)


def dynamic(name: str, *leaves: LeafSig, tree: str = "*") -> ArgSig:
    return ArgSig(name, False, tree=tree, leaves=leaves or (leaf(name),))


def static(name: str, value: Any) -> ArgSig:
    return ArgSig(name, True, value=repr(value))


def sig(*args: ArgSig) -> Signature:
    return Signature(tuple(args))


BASE = sig(dynamic("x"), static("n", 2))


def kinds(reasons: list[Reason]) -> list[tuple[str, str]]:
    return [(r.arg, r.kind) for r in reasons]


def test_reason_kinds_are_the_design_contract():
    assert REASON_KINDS == (
        "new_function",
        "shape",
        "dtype",
        "weak_type",
        "static_value",
        "pytree",
        "sharding",
        "device",
        "config",
    )


def test_identical_signatures_do_not_differ():
    assert diff(BASE, sig(dynamic("x"), static("n", 2))) == []


@pytest.mark.parametrize(
    ("changed", "kind", "before", "after"),
    [
        (leaf(shape=(8,)), "shape", "f32[4]", "f32[8]"),
        (leaf(dtype="bf16"), "dtype", "f32", "bf16"),
        (leaf(weak_type=True), "weak_type", "f32[4]", "weak f32[4]"),
        (leaf(sharding="P('x',) over mesh(x=8)"), "sharding", "default", "P('x',) over mesh(x=8)"),
        (leaf(device="cpu:3"), "device", "default", "cpu:3"),
    ],
    ids=["shape", "dtype", "weak_type", "sharding", "device"],
)
def test_one_changed_leaf_field_is_one_reason(changed, kind, before, after):
    reasons = diff(BASE, sig(dynamic("x", changed), static("n", 2)))
    assert [r.to_dict() for r in reasons] == [
        {"arg": "x", "kind": kind, "before": before, "after": after}
    ]


def test_python_scalar_versus_array_is_a_weak_type_reason():
    old = sig(dynamic("y", leaf("y", (), weak_type=False)))
    new = sig(dynamic("y", leaf("y", (), weak_type=True, python_scalar=True)))
    assert [r.to_dict() for r in diff(old, new)] == [
        {"arg": "y", "kind": "weak_type", "before": "f32[]", "after": "Python float (weak f32[])"}
    ]


def test_changed_static_value_is_a_static_value_reason():
    reasons = diff(BASE, sig(dynamic("x"), static("n", 3)))
    assert [r.to_dict() for r in reasons] == [
        {"arg": "n", "kind": "static_value", "before": "2", "after": "3"}
    ]


def test_changed_pytree_structure_is_one_pytree_reason():
    old = sig(dynamic("p", leaf("p['a']"), tree="{'a': *}"))
    new = sig(dynamic("p", leaf("p['a']"), leaf("p['b']"), tree="{'a': *, 'b': *}"))
    assert [r.to_dict() for r in diff(old, new)] == [
        {"arg": "p", "kind": "pytree", "before": "{'a': *}", "after": "{'a': *, 'b': *}"}
    ]


def test_a_leaf_inside_a_pytree_is_named_by_its_path():
    old = sig(dynamic("p", leaf("p['w']", (3, 3)), tree="{'w': *}"))
    new = sig(dynamic("p", leaf("p['w']", (4, 4)), tree="{'w': *}"))
    assert kinds(diff(old, new)) == [("p['w']", "shape")]


def test_changed_argument_count_is_a_pytree_reason():
    reasons = diff(BASE, sig(dynamic("x"), static("n", 2), dynamic("z")))
    assert kinds(reasons) == [("(arguments)", "pytree")]


def test_arguments_named_differently_are_paired_by_name_not_position():
    reasons = diff(BASE, sig(dynamic("x"), dynamic("z"), static("n", 3)))
    assert kinds(reasons) == [("n", "static_value"), ("(arguments)", "pytree")]


def test_a_static_value_read_alike_but_keyed_apart_is_a_new_object():
    old = sig(ArgSig("fn", True, value="function `f` (a.py:1)", value_key="#1"))
    new = sig(ArgSig("fn", True, value="function `f` (a.py:1)", value_key="#2"))
    assert [(r.before, r.after) for r in diff(old, new)] == [
        ("function `f` (a.py:1)", "a new function `f` (a.py:1)")
    ]
    assert diff(old, old) == []


def test_every_changed_field_is_listed():
    new = sig(dynamic("x", leaf(shape=(8,), dtype="bf16")), static("n", 5))
    assert kinds(diff(BASE, new)) == [("x", "shape"), ("x", "dtype"), ("n", "static_value")]


def test_a_miss_on_an_empty_cache_is_a_new_function():
    miss = explain_miss(BASE, [])
    assert miss.closest is None
    assert [r.kind for r in miss.reasons] == ["new_function"]
    assert miss.reasons[0].after == BASE.describe()


def test_a_miss_is_explained_against_the_closest_cached_signature():
    far = sig(dynamic("x", leaf(shape=(2,), dtype="i32")), static("n", 9))
    near = sig(dynamic("x", leaf(shape=(8,))), static("n", 2))
    new = sig(dynamic("x", leaf(shape=(16,))), static("n", 2))
    miss = explain_miss(new, [far, near])
    assert miss.closest == 1
    assert kinds(miss.reasons) == [("x", "shape")]


def test_among_equally_close_signatures_the_latest_wins():
    first = sig(dynamic("x", leaf(shape=(2,))), static("n", 2))
    second = sig(dynamic("x", leaf(shape=(3,))), static("n", 2))
    assert explain_miss(sig(dynamic("x"), static("n", 2)), [first, second]).closest == 1


def test_describe_is_one_readable_line():
    signature = sig(
        dynamic("x"),
        dynamic("y", leaf("y", (), weak_type=True, python_scalar=True)),
        static("n", 2),
        dynamic("p", leaf("p['a']", ()), tree="{'a': *}"),
    )
    assert signature.describe() == (
        "x: f32[4] · y: Python float (weak f32[]) · n=2 (static) · p: {p['a']: f32[]}"
    )


def test_signature_round_trips_through_json():
    signature = sig(dynamic("x", leaf(sharding="P('x',)")), static("n", (1, 2)))
    data = json.loads(json.dumps(signature.to_dict()))
    assert Signature.from_dict(data) == signature


@pytest.mark.parametrize("kind", REASON_KINDS)
def test_every_reason_kind_has_a_text_and_a_fix(kind):
    reason = Reason("x", kind, "f32[4]", "f32[8]")
    text = reason_text(reason)
    assert text and text == reason_text(reason.to_dict())
    if kind == "new_function":
        assert reason_fix(reason) == ""
    else:
        assert "`x`" in text and "f32[4]" in text and "f32[8]" in text
        assert reason_fix(reason.to_dict())


@pytest.mark.parametrize(
    ("before", "after", "said", "cure"),
    [
        (
            "Python float (weak f32[])",
            "f32[]",
            "`lr` was a Python float, then an f32[] array",
            "jnp.float32(lr) (jnp.asarray(lr) keeps a Python float weak), or mark `lr` "
            "static if it is a config value",
        ),
        (  # the reverse, under x64
            "f64[]",
            "Python float (weak f64[])",
            "`lr` was an f64[] array, then a Python float",
            "jnp.float64(lr) (jnp.asarray(lr) keeps a Python float weak), or mark `lr` "
            "static if it is a config value",
        ),
        (  # no Python scalar: neither jnp.asarray's nor static's words apply
            "weak bf16[3]",
            "bf16[3]",
            "`lr` was a weakly typed bf16[3] array, then a bf16[3] array",
            "jnp.asarray(lr, jnp.bfloat16)",
        ),
    ],
)
def test_a_weak_type_change_is_said_by_its_kinds_with_the_cast_that_cures_it(
    before, after, said, cure
):
    """One source for the cache lab and the recorder: jnp.asarray(lr) alone is no cure
    (it keeps a Python float weak: an f32[] array and it still compile apart)."""
    reason = Reason("lr", "weak_type", before, after)
    assert weak_type_text("lr", before, after) == f"{said}: only the weak type differs"
    assert reason_fix(reason) == f"pass one kind on every call: {cure}"


# --------------------------------------------------------------------------- live: in-process


def make_fn():
    """A fresh function each time: jit's cache is keyed on the function object."""

    def f(x, y, n, p):
        return x * y * n + p["a"]

    return f


BEFORE = "f32[4], f32[], 2, {'a': f32[]}"
ONE_CHANGE = [  # (kind, the second call, the parameter it changes)
    ("shape", "f32[8], f32[], 2, {'a': f32[]}", "x"),
    ("dtype", "bf16[4], f32[], 2, {'a': f32[]}", "x"),
    ("weak_type", "f32[4], 2.0, 2, {'a': f32[]}", "y"),
    ("static_value", "f32[4], f32[], 3, {'a': f32[]}", "n"),
    ("pytree", "f32[4], f32[], 2, {'a': f32[], 'b': f32[]}", "p"),
]


@pytest.fixture
def session():
    from viz.cache.session import CacheSession

    return CacheSession(make_fn(), ["n"], {})


def call_all(session, calls: list[str], **kwargs: Any) -> list[dict[str, Any]]:
    """Call in order; after every call the table has one row per jit cache entry."""
    events = []
    for args in calls:
        events.append(session.call(args, **kwargs))
        assert len(session.table()) == session.jitted._cache_size() == events[-1]["cache_size"]
    return events


@pytest.mark.parametrize(("kind", "after", "arg"), ONE_CHANGE, ids=[c[0] for c in ONE_CHANGE])
def test_changing_one_thing_is_one_miss_naming_it(session, kind, after, arg):
    events = call_all(session, [BEFORE, BEFORE, after, after])
    assert [e["hit"] for e in events] == [False, True, False, True]
    assert [(r["arg"], r["kind"]) for r in events[2]["reasons"]] == [(arg, kind)]
    assert events[3]["reasons"] == []


def test_first_call_is_a_miss_because_nothing_was_cached(session):
    (event,) = call_all(session, [BEFORE])
    assert event["hit"] is False
    assert [r["kind"] for r in event["reasons"]] == ["new_function"]
    assert event["compile_s"] > 0
    assert event["cache_size"] == 1


def test_repeating_a_call_is_a_hit_on_the_same_entry(session):
    events = call_all(session, [BEFORE, BEFORE, BEFORE])
    assert [e["hit"] for e in events] == [False, True, True]
    assert {e["entry"] for e in events} == {0}
    assert events[1]["compile_s"] == 0.0
    assert session.table()[0]["hits"] == 2


def test_changing_two_fields_lists_both(session):
    events = call_all(session, [BEFORE, "bf16[8], f32[], 2, {'a': f32[]}"])
    assert [(r["arg"], r["kind"]) for r in events[1]["reasons"]] == [
        ("x", "shape"),
        ("x", "dtype"),
    ]


def test_changing_two_parameters_lists_both(session):
    events = call_all(session, [BEFORE, "f32[8], f32[], 5, {'a': f32[]}"])
    assert [(r["arg"], r["kind"]) for r in events[1]["reasons"]] == [
        ("x", "shape"),
        ("n", "static_value"),
    ]


def test_going_back_to_an_earlier_signature_is_a_hit(session):
    events = call_all(session, [BEFORE, "f32[8], f32[], 2, {'a': f32[]}", BEFORE])
    assert [e["hit"] for e in events] == [False, False, True]
    assert events[2]["entry"] == 0


def test_a_miss_names_the_closest_cached_entry(session):
    calls = [BEFORE, "f32[8], f32[], 2, {'a': f32[]}", "f32[8], f32[], 3, {'a': f32[]}"]
    events = call_all(session, calls)
    assert events[2]["closest"] == 1
    assert [(r["arg"], r["kind"]) for r in events[2]["reasons"]] == [("n", "static_value")]


def test_clear_empties_the_cache_and_the_table(session):
    call_all(session, [BEFORE, "f32[8], f32[], 2, {'a': f32[]}"])
    session.clear()
    assert session.jitted._cache_size() == 0
    assert session.table() == [] and session.events == []
    (event,) = call_all(session, [BEFORE])
    assert event["hit"] is False and event["call"] == 1
    assert [r["kind"] for r in event["reasons"]] == ["new_function"]


def test_recompile_guard_marks_the_second_miss(session):
    calls = [BEFORE, BEFORE, "f32[8], f32[], 2, {'a': f32[]}", "f32[16], f32[], 2, {'a': f32[]}"]
    events = call_all(session, calls, fail_on_recompile=True)
    assert [e["guard"] is not None for e in events] == [False, False, True, True]
    assert "recompiled" in events[2]["guard"]


def test_events_carry_the_cache_json_keys(session):
    for event in call_all(session, [BEFORE, "f32[8], f32[], 2, {'a': f32[]}"]):
        assert {"call", "signature", "hit", "compile_s", "cache_size", "reasons"} <= set(event)
        for reason in event["reasons"]:
            assert set(reason) == {"arg", "kind", "before", "after"}
        json.dumps(event.to_dict())


# --------------------------------------------------------------------------- live: the worker

SHARD_CODE = "import jax.numpy as jnp\n\n\ndef f(x, y):\n    return jnp.sin(x) * y\n"


def worker_calls(worker, code: str, calls: list[str], **options: Any) -> CacheReply:
    result = worker.ask(CacheCalls(Settings(code=code, function="f"), calls=calls, **options))
    assert result["ok"], result["events"]
    assert len(result["table"]) == result["cache_size"]
    return result


@pytest.mark.parametrize(
    ("first", "second"),
    [(None, "sharded"), ("replicated", "sharded"), ("sharded", "replicated")],
    ids=["default_to_sharded", "replicated_to_sharded", "sharded_to_replicated"],
)
def test_changing_only_the_sharding_is_one_sharding_miss(worker8, first, second):
    code = f"{SHARD_CODE}# {first} then {second}\n"  # a session of its own
    worker8.ask(CacheState(Settings(code=code, function="f"), clear=True))
    placements = {"x": first} if first else None
    one = worker_calls(worker8, code, ["f32[16], f32[]"], placements=placements)
    two = worker_calls(worker8, code, ["f32[16], f32[]"] * 2, placements={"x": second})
    assert [e["hit"] for e in one["new"] + two["new"]] == [False, False, True]
    miss = two["new"][0]
    assert [(r["arg"], r["kind"]) for r in miss["reasons"]] == [("x", "sharding")]
    assert "mesh(x=8)" in miss["reasons"][0]["after"]
    assert two["cache_size"] == 2


def test_committing_to_another_device_is_a_device_miss(worker8):
    code = f"{SHARD_CODE}# device\n"
    worker8.ask(CacheState(Settings(code=code, function="f"), clear=True))
    worker_calls(worker8, code, ["f32[16], f32[]"])
    result = worker_calls(worker8, code, ["f32[16], f32[]"], placements={"x": "device:3"})
    (miss,) = result["new"]
    assert [(r["arg"], r["kind"], r["after"]) for r in miss["reasons"]] == [
        ("x", "device", "cpu:3")
    ]


def test_worker_session_survives_between_requests_and_clears_on_request(worker):
    code = f"{SHARD_CODE}# state\n"
    worker.ask(CacheState(Settings(code=code, function="f"), clear=True))
    worker_calls(worker, code, ["f32[4], f32[]", "f32[8], f32[]"])
    state = worker.ask(CacheState(Settings(code=code, function="f")))
    assert [e["hit"] for e in state["events"]] == [False, False]
    assert state["cache_size"] == len(state["table"]) == 2
    cleared = worker.ask(CacheState(Settings(code=code, function="f"), clear=True))
    assert (cleared["events"], cleared["table"], cleared["cache_size"]) == ([], [], 0)


def test_worker_cache_call_returns_the_event_and_the_table(worker):
    code = f"{SHARD_CODE}# single\n"
    worker.ask(CacheState(Settings(code=code, function="f"), clear=True))
    result = worker.ask(CacheCall(Settings(code=code, function="f", args="f32[4], 2.0")))
    assert result["ok"]
    assert result["event"]["hit"] is False
    assert result["events"] == [result["event"]]
    assert result["cache_size"] == len(result["table"]) == 1


def test_worker_recompile_guard_marks_the_second_miss(worker):
    code = f"{SHARD_CODE}# guard\n"
    worker.ask(CacheState(Settings(code=code, function="f"), clear=True))
    calls = ["f32[4], f32[]", "f32[4], f32[]", "f32[8], f32[]"]
    result = worker_calls(worker, code, calls, fail_on_recompile=True)
    assert [e["guard"] is not None for e in result["events"]] == [False, False, True]


def test_a_bad_call_spec_is_an_error_event_and_the_session_goes_on(worker):
    code = f"{SHARD_CODE}# bad spec\n"
    worker.ask(CacheState(Settings(code=code, function="f"), clear=True))
    calls = ["f32[4], f32[]", "f32[4", "f32[4], f32[]"]
    result = worker.ask(CacheCalls(Settings(code=code, function="f"), calls=calls))
    assert result["ok"] is False
    good, bad, again = result["events"]
    assert bad["error"]["kind"] == "spec_error" and "'f32[4'" in bad["error"]["message"]
    assert (good["hit"], again["hit"]) == (False, True)


# --------------------------------------------------------------------------- the one-click story


def test_the_story_halves_the_first_arrays_batch_and_comes_back():
    story = cache_story([("x", "f32[256,512]"), ("y", "f32[512,128]")], [])
    first, changed = "f32[256,512], f32[512,128]", "f32[128,512], f32[512,128]"
    assert story.calls == [first, first, changed, first]
    assert story.change == "`x`: batch size 256 → 128"


def test_a_batch_of_one_grows_to_two():
    assert cache_story([("x", "f32[1]")], []).calls[2] == "f32[2]"


def test_without_a_batch_the_story_passes_a_0d_array_as_a_python_scalar():
    story = cache_story([("n", "3"), ("x", "f32[]")], ["n"])
    assert story.calls[2] == "3, 1.0"
    assert "weakly typed" in story.change


def test_with_only_a_static_number_the_story_changes_its_value():
    story = cache_story([("n", "3"), ("z", "params")], ["n"])
    assert story.calls[2] == "4, params" and story.change == "`n`: static value 3 → 4"


def test_with_nothing_to_vary_there_is_no_story():
    assert cache_story([("z", "params"), ("n", "'relu'")], ["n"]) is None


@pytest.mark.parametrize(
    ("rows", "static", "kind"),
    [
        ([("x", "f32[4]"), ("y", "f32[]"), ("n", "2"), ("p", "{'a': f32[]}")], ["n"], "shape"),
        ([("x", "f32[]"), ("y", "f32[]"), ("n", "2"), ("p", "{'a': f32[]}")], ["n"], "weak_type"),
    ],
    ids=["batch", "python_scalar"],
)
def test_the_story_is_a_first_compile_a_hit_an_explained_miss_and_a_hit(rows, static, kind):
    from viz.cache.session import CacheSession

    story = cache_story(rows, static)
    session = CacheSession(make_fn(), static, {})
    events = call_all(session, story.calls)
    assert [e["hit"] for e in events] == [False, True, False, True]
    assert [r["kind"] for r in events[0]["reasons"]] == ["new_function"]
    assert [r["kind"] for r in events[2]["reasons"]] == [kind]
    assert [row["hits"] for row in session.table()] == [2, 0]


def test_the_worker_runs_the_story_on_an_emptied_cache(worker):
    code = f"{SHARD_CODE}# story\n"
    worker_calls(worker, code, ["f32[4], f32[]"] * 2)  # a cache with a history already
    story = cache_story([("x", "f32[4]"), ("y", "f32[]")], [])
    result = worker_calls(worker, code, story.calls, fresh=True)
    assert [e["call"] for e in result["events"]] == [1, 2, 3, 4]
    assert [e["hit"] for e in result["events"]] == [False, True, False, True]
    assert [(row["hits"], row["last_hit"]) for row in result["table"]] == [(2, 4), (0, None)]


# --------------------------------------------------------------------------- the CLI


def test_cli_cache_prints_the_hit_miss_sequence_and_writes_the_cache_json(tmp_path):
    from viz.cache.session import CacheSession
    from viz.samples import get_sample
    from viz.source import find_function, load_module

    sample = get_sample("arange_static")
    module = load_module(sample.code)
    calls = ["f32[16], 16", "f32[16], 16", "f32[8], 8", "f32[8], 8"]
    in_process = CacheSession(find_function(module, sample.code, "f"), ["n"], vars(module))
    expected = [in_process.call(c)["hit"] for c in calls]
    assert expected == [False, True, False, True]

    out = tmp_path / "cache.json"
    argv = [sys.executable, "-m", "viz", "cache", "samples/arange_static.py::f", "--static", "n"]
    for call in calls:
        argv += ["--call", call]
    proc = subprocess.run(
        [*argv, "--json", str(out)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    printed = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("#")]
    assert printed == ["hit" if hit else "MISS" for hit in expected]

    events = json.loads(out.read_text())["events"]
    assert [e["hit"] for e in events] == expected
    assert [e["call"] for e in events] == [1, 2, 3, 4]
    assert [e["cache_size"] for e in events] == [1, 1, 2, 2]
    for event in events:
        assert {"call", "signature", "hit", "compile_s", "cache_size", "reasons"} <= set(event)
        assert all(set(r) == {"arg", "kind", "before", "after"} for r in event["reasons"])
    assert [(r["arg"], r["kind"]) for r in events[2]["reasons"]] == [
        ("x", "shape"),
        ("n", "static_value"),
    ]


def test_a_call_that_fails_to_trace_keeps_one_row_per_cache_entry(session):
    call_all(session, [BEFORE])
    with pytest.raises(ValueError, match="Incompatible shapes"):
        session.call("f32[4], f32[3,3], 2, {'a': f32[]}")  # y is not broadcastable
    assert len(session.table()) == session.jitted._cache_size()
    session.record_error("f32[4], f32[3,3], 2, {'a': f32[]}", {"kind": "shape_mismatch"})
    event = session.call(BEFORE)
    assert event["hit"] and event["call"] == 3  # call numbers stay unique


def test_persistent_cache_serves_misses_from_disk_after_a_worker_restart():
    from viz.worker import Worker

    code = "import jax.numpy as jnp\ndef f(x):\n    return jnp.cos(x) * 7 - 2\n"
    first = Worker("cpu")
    call = CacheCall(Settings(code=code, function="f", args="f32[13]"), persistent_cache=True)
    made = first.ask(call).event
    first.close()
    second = Worker("cpu")
    loaded = second.ask(call).event
    second.close()
    assert not made["hit"] and not made.get("from_disk")
    assert not loaded["hit"] and loaded["from_disk"]  # a new process, yet no compile


def test_precompiled_buckets_serve_padded_calls_without_growing_the_jit_cache():
    from viz.cache.session import CacheSession
    from viz.errors import UserCodeError

    def predict(x):
        return x * 2.0

    session = CacheSession(predict)
    session.precompile("x", [8, 32], "f32[8,4]")
    events = [session.routed_call(f"f32[{n},4]") for n in (3, 8, 20)]
    assert [e["aot_bucket"] for e in events] == [8, 8, 32]
    assert [e["padding"] for e in events] == [5, 0, 12]
    assert session.jitted._cache_size() == 0 and session.table() == []
    rows = {b["bucket"]: b for b in session.router.table()}
    assert rows[8]["calls"] == 2 and rows[32]["padded_rows"] == 12
    with pytest.raises(UserCodeError, match="largest bucket"):
        session.routed_call("f32[40,4]")


def test_a_routed_call_is_numbered_with_the_sessions_other_calls():
    from viz.cache.session import CacheSession

    session = CacheSession(lambda x: x * 2.0)
    session.call("f32[2,4]")  # one jit cache entry
    session.precompile("x", [8], "f32[8,4]")
    routed = session.routed_call("f32[3,4]")
    assert (routed["call"], routed["cache_size"]) == (2, 1)
    assert [e["type"] for e in session.events] == ["miss", "routed"]


def test_each_owner_keeps_its_own_live_session(worker):
    code = f"{SHARD_CODE}# owners\n"
    for owner in ("alice", "bob"):
        worker.ask(CacheState(Settings(code=code, function="f"), owner=owner, clear=True))
    small, large = (Settings(code=code, function="f", args=f"f32[{n}], f32[]") for n in (4, 9))
    alice = worker.ask(CacheCall(small, owner="alice"))
    worker.ask(CacheCall(large, owner="bob"))
    again = worker.ask(CacheCall(small, owner="alice"))
    assert alice["event"]["hit"] is False and again["event"]["hit"] is True
    assert [e["call"] for e in again["events"]] == [1, 2]  # bob's call is not in alice's log


def test_a_long_pytree_change_is_shown_where_the_trees_differ() -> None:
    import jax  # this file's other tests need no jax

    def sig(tree: object) -> Signature:
        return Signature((ArgSig("params", False, tree=str(jax.tree.structure(tree))),))

    layers = {f"layer{i:02d}": {"w": 0, "b": 0} for i in range(20)}
    grown = {**layers, "layer19": {"w": 0, "b": 0, "scale": 0}}
    (reason,) = diff(sig(layers), sig(grown))
    assert reason.kind == "pytree" and reason.arg == "params"
    assert "layer19" in reason.before and "'scale'" in reason.after
    assert len(reason.before) <= 80 and reason.before.startswith("…")


def test_an_equinox_filter_jit_function_is_called_as_filter_jit_calls_it():
    """Its model's activation is kept static: the calls failed, 'custom_jvp is not a
    valid JAX type'."""
    eqx = pytest.importorskip("equinox")
    import jax

    from viz.cache.session import CacheSession

    model = eqx.nn.MLP(4, 2, 8, 2, key=jax.random.PRNGKey(0))
    session = CacheSession(
        eqx.filter_jit(lambda model, x: jax.vmap(model)(x)), namespace={"model": model}
    )
    first, again = (session.call("model, f32[8,4]") for _ in range(2))
    assert (first.hit, again.hit) == (False, True)
