"""viz.diff: every number of the diff is the difference of the two real reports.

Reports come from the real `viz.analyze` (compile only unless timings are the point):
one function at two shapes, the 24-op elementwise chain against an edited copy of
itself, and two different samples. Most tests read the diff's JSON (`to_dict()`, the
public Diff JSON) against the reports' JSON.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import pytest

from viz import analyze
from viz.diff import (
    COUNT_PATHS,
    Origin,
    clock_note,
    diff_kernels,
    diff_reports,
    kernel_rows,
    numbers,
    op_rows,
    rows,
    summarize,
)
from viz.history import History
from viz.report import Kernel, Report
from viz.samples import get_sample
from viz.source import find_function, load_module


def scale(x):
    return jnp.sin(x) * 2.0 + 1.0


def sample_report(name: str, code: str | None = None, args: str | None = None) -> Report:
    sample = get_sample(name)
    code = code or sample.code
    module = load_module(code)
    fn = find_function(module, code, sample.function)
    report = analyze(
        fn,
        args or sample.args,
        sample.static,
        runs=0,
        namespace=vars(module),
        user_file=module.__file__,
    )
    return report


@pytest.fixture(scope="module")
def shapes() -> tuple[Report, Report]:
    """scale() at two shapes, timed (so run times have deltas too)."""
    return analyze(scale, "f32[8]", runs=3), analyze(scale, "f32[256,256]", runs=3)


@pytest.fixture(scope="module")
def chains() -> tuple[Report, Report]:
    """The 24-op chain, and the same chain with op 12 (`y = -y`) taken out."""
    code = get_sample("elementwise_chain").code
    assert "    y = -y  # 12\n" in code
    edited = code.replace("    y = -y  # 12\n", "    y = y  # 12: negate taken out\n")
    return sample_report("elementwise_chain"), sample_report("elementwise_chain", edited)


def expected(a: Any, b: Any) -> dict[str, Any]:
    return {"a": a, "b": b, "delta": None if a is None or b is None else b - a}


def test_counts_timings_cost_and_memory_are_b_minus_a(shapes):
    d = diff_reports(*shapes).to_dict()
    a, b = (r.to_dict() for r in shapes)
    assert set(d["counts"]) == set(COUNT_PATHS)
    for name, (section, key) in COUNT_PATHS.items():
        assert d["counts"][name] == expected(a[section][key], b[section][key]), name
    for group in ("timings", "cost", "memory"):
        for key, value in d[group].items():
            assert value == expected(a[group].get(key), b[group].get(key)), (group, key)
    assert d["memory"]["argument_bytes"]["delta"] == (256 * 256 - 8) * 4
    assert d["timings"]["run_median_s"]["delta"] is not None
    assert d["cost"]["flops"]["delta"] > 0
    json.dumps(d, allow_nan=False)


def test_the_device_time_per_call_is_compared_where_a_run_was_profiled(shapes):
    a, b = (
        replace(r, timings=replace(r.timings, device_s=s, device_clock="device"))
        for r, s in zip(shapes, (2e-6, 5e-6), strict=True)
    )
    diff = diff_reports(a, b)
    assert diff.to_dict()["timings"]["device_s"] == expected(2e-6, 5e-6)
    row = next(r for r in rows("timings", diff.timings) if r[""] == "device time per call")
    assert (row["A"], row["B"], row["B / A"]) == ("2 µs", "5 µs", "2.50×")
    assert "device_s" not in diff_reports(*shapes).timings  # not profiled: not compared
    assert clock_note(diff) is None  # both on the CPU: one clock


def test_device_times_on_two_clocks_are_said_to_be(shapes):
    a, b = (
        replace(r, timings=replace(r.timings, device_s=1e-6), subject=replace(r.subject, device=d))
        for r, d in zip(shapes, ("cpu", "tpu"), strict=True)
    )
    said = clock_note(diff_reports(a, b))
    assert said == (
        "device time per call: A's is the host's clock on cpu (its wall time), B's tpu's own clock"
    )


def test_op_histograms_are_b_minus_a_for_every_op_of_either_side():
    ra, rb = sample_report("elementwise_chain"), sample_report("dot_plus_one")
    d, a, b = diff_reports(ra, rb).to_dict(), ra.to_dict(), rb.to_dict()
    for key, section, hist in (("ops", "compiled", "ops"), ("stablehlo_ops", "stablehlo", "ops")):
        ha, hb = Counter(a[section][hist]), Counter(b[section][hist])
        assert set(d[key]) == set(ha) | set(hb)
        for op, value in d[key].items():
            assert value == expected(ha[op], hb[op]), (key, op)
    assert d["stablehlo_ops"]["stablehlo.dot_general"] == {"a": 0, "b": 1, "delta": 1}
    assert d["counts"]["compiled.kernel_count"]["delta"] == (
        b["compiled"]["kernel_count"] - a["compiled"]["kernel_count"]
    )


def test_taking_one_op_out_of_the_chain_changes_its_kernel(chains):
    d = diff_reports(*chains).to_dict()
    assert d["counts"]["jaxpr.eqn_count"]["delta"] == -1
    assert d["stablehlo_ops"]["stablehlo.negate"]["delta"] == -1
    k = d["kernels"]
    assert not k["added"] and not k["removed"]
    (change,) = k["changed"]
    assert change["ops"]["negate"] == {"a": 2, "b": 1, "delta": -1}
    assert 33 in change["a"]["lines"] and 33 not in change["b"]["lines"]  # line of op 12


def test_the_same_function_at_two_shapes_keeps_its_kernels(shapes):
    a, b = shapes
    k = diff_reports(a, b).kernels
    assert k.unchanged == len(a.kernels) == len(b.kernels)
    assert k.added == k.removed == k.changed == []
    assert [(x.a, x.b) for x in k.same] == [(x.name, x.name) for x in a.kernels]


def kernel(name: str, kind: str, ops: dict[str, int], lines: list[int]) -> Kernel:
    return Kernel(name=name, kind=kind, colour="", ops=ops, lines=lines)


def test_kernels_match_by_content_not_by_name():
    a = [kernel("fusion.1", "kLoop", {"add": 1}, [3]), kernel("fusion.2", "kLoop", {"mul": 1}, [4])]
    b = [kernel("fusion.7", "kLoop", {"mul": 1}, [4]), kernel("fusion.9", "kLoop", {"add": 1}, [3])]
    same = diff_kernels(a, b).same
    assert [(x.a, x.b) for x in same] == [("fusion.1", "fusion.9"), ("fusion.2", "fusion.7")]
    swapped = [
        kernel("fusion.1", "kLoop", {"mul": 1}, [4]),
        kernel("fusion.2", "kLoop", {"add": 1}, [3]),
    ]
    assert diff_kernels(a, swapped).changed == []  # same names, but each matched its twin


def test_kernels_added_removed_and_changed():
    a = [
        kernel("f.1", "kLoop", {"add": 2}, [3]),
        kernel("f.2", "kInput", {"reduce": 1}, [5]),
        kernel("f.3", "kLoop", {"exp": 1}, [9]),
    ]
    b = [
        kernel("f.4", "kLoop", {"add": 2, "mul": 1}, [3]),  # same place, one op more
        kernel("f.5", "kInput", {"reduce": 1}, [6]),  # same ops, a line moved
        kernel("f.6", "kOutput", {"dot": 1}, [12]),  # new
    ]
    k = diff_kernels(a, b).to_dict()
    assert [x["name"] for x in k["added"]] == ["f.6"]
    assert [x["name"] for x in k["removed"]] == ["f.3"]
    changes = {c["a"]["name"]: c for c in k["changed"]}
    assert changes["f.1"]["ops"] == {"mul": {"a": 0, "b": 1, "delta": 1}}
    assert changes["f.2"]["lines"] == {"a": (5,), "b": (6,)}
    assert k["unchanged"] == 0


def test_each_ir_gets_a_text_diff(shapes):
    a, b = shapes
    ir = diff_reports(a, b).to_dict()["ir"]
    assert set(ir) == {"jaxpr", "stablehlo", "compiled"}
    for section in ir.values():
        assert section["kept"] and section["added"] > 0 and section["removed"] > 0
    assert "-{ lambda ; a:f32[8]. let" in ir["jaxpr"]["diff"]
    assert "+{ lambda ; a:f32[256,256]. let" in ir["jaxpr"]["diff"]
    same = diff_reports(a, a).ir["stablehlo"]
    assert same.diff == "" and same.note == "identical"


def test_the_compiled_text_diff_leaves_out_source_metadata(chains):
    compiled = diff_reports(*chains).to_dict()["ir"]["compiled"]
    assert "metadata=" not in compiled["diff"] and "FileNames" not in compiled["diff"]
    assert "user_" not in compiled["diff"]  # the code's file name (its hash) differs
    removed = [x for x in compiled["diff"].splitlines()[2:] if x.startswith("-")]
    assert any(" negate(" in x for x in removed)
    assert compiled["removed"] - compiled["added"] == 1  # one negate fewer


def test_a_run_past_the_bound_still_diffs_its_numbers_but_says_its_text_is_gone(
    tmp_path: Path, shapes
):
    a, b = shapes
    db = History(tmp_path / "h.sqlite", keep_reports=1)
    ids = db.record(a), db.record(b)  # recording B prunes A to its numbers
    old, new = (db.recorded(i) for i in ids)
    d = diff_reports(old.report, new.report, origins=(old.origin, new.origin)).to_dict()
    assert d["counts"]["compiled.op_count"] == expected(a.compiled.op_count, b.compiled.op_count)
    assert d["timings"]["run_median_s"]["delta"] == (
        b.timings.run_median_s - a.timings.run_median_s
    )
    assert d["ir"]["compiled"]["kept"] is False
    assert f"#{old.run.id} scale(f32[8])" in d["ir"]["compiled"]["note"]
    assert "was not kept" in d["ir"]["compiled"]["note"]
    assert d["kernels"]["unchanged"] is None and "not kept" in d["kernels"]["note"]
    assert (d["a"]["id"], d["a"]["full"], d["b"]["full"]) == (old.run.id, False, True)
    assert d["a"]["when"] == old.run.when and d["b"]["id"] == new.run.id


def test_numbers_are_what_history_keeps(shapes):
    a, _ = shapes
    n = numbers(a)
    assert n["counts"]["compiled.fusion_count"] == a.compiled.fusion_count
    assert n["ops"] == a.compiled.ops and n["stablehlo_ops"] == a.stablehlo.ops


def test_the_terminal_summary_names_both_sides_and_each_delta(chains):
    text = summarize(diff_reports(*chains))
    assert text.splitlines()[0].startswith("A: chain(f32[512,512])")
    assert "jaxpr.eqn_count" in text and "Δ −1" in text
    assert "1 changed" in text


def test_a_report_outside_the_history_is_a_full_side_without_an_id(shapes):
    d = diff_reports(*shapes).to_dict()
    assert list(d) == [
        "a",
        "b",
        *("counts", "timings", "cost", "memory", "kernels", "ops", "stablehlo_ops", "ir"),
        "sharding",
        "peak",
    ]
    assert d["a"] == {
        "id": None,
        "when": None,
        "full": True,
        "function": "scale",
        "args": "f32[8]",
        "static": [],
        "device": shapes[0].device,
        "ok": True,
        "compiler_options": {},
        "donate": [],
    }


def test_a_report_read_back_from_its_json_diffs_like_the_report_itself(chains):
    a, b = chains
    again = (Report.from_dict(json.loads(json.dumps(r.to_dict()))) for r in chains)
    assert diff_reports(*again).to_dict() == diff_reports(a, b).to_dict()


def test_a_numbers_only_side_has_no_texts_nor_kernels_to_compare(shapes):
    a, b = shapes
    pruned = Origin(id=3, when="2026-01-01 00:00:00", full=False)
    d = diff_reports(a, b, origins=(pruned, None))
    assert all(not x.kept and "#3 scale(f32[8])" in x.note for x in d.ir.values())
    assert d.kernels.unchanged is None and d.kernels.same == []
    assert d.counts["jaxpr.eqn_count"].delta == 0  # its numbers still compare


def test_kernel_rows_say_what_changed_in_each_kernel(chains):
    (row,) = kernel_rows(diff_reports(*chains).kernels)
    assert (row[""], row["kind"]) == ("changed", "kLoop")
    assert row["what changed"] == "negate −1; source lines −33"  # one minus sign
    assert "negate ×1" in row["ops inside"]  # B's ops


def test_kernel_rows_list_added_removed_and_unchanged_kernels():
    a = [kernel("f.1", "kLoop", {"add": 1}, [3]), kernel("f.2", "kLoop", {"exp": 1}, [9])]
    b = [kernel("f.7", "kLoop", {"add": 1}, [3]), kernel("f.8", "kOutput", {"dot": 1}, [12])]
    table = kernel_rows(diff_kernels(a, b))
    assert [(r[""], r["A"], r["B"]) for r in table] == [
        ("added", "", "f.8"),
        ("removed", "f.2", ""),
        ("unchanged", "f.1", "f.7"),
    ]
    assert table[0]["what changed"] == "lines 12" and table[0]["ops inside"] == "dot ×1"


def test_number_and_op_rows_show_a_b_delta_and_ratio(shapes):
    d = diff_reports(*shapes)
    memory = {r[""]: r for r in rows("memory", d.memory)}
    assert memory["arguments"]["A"] == "32 B" and memory["arguments"]["B"] == "256.0 KiB"
    assert memory["arguments"]["B / A"] == f"{256 * 256 / 8:.2f}×"
    assert memory["arguments"]["Δ (B − A)"].startswith("+")
    assert op_rows(d.ops) == [] and op_rows(d.ops, every=True)  # same ops, other shapes


def relu(x):
    if x > 0:  # a traced `if`: this run fails while tracing
        return x
    return x * 0.0


RELU_IF_LINE = relu.__code__.co_firstlineno + 1


def test_a_failed_side_says_it_failed_instead_of_zeros_or_a_report_not_kept(shapes):
    a = shapes[0]
    failed = analyze(relu, "f32[]", runs=3)
    assert not failed.ok and failed.error.line == RELU_IF_LINE
    d = diff_reports(a, failed, origins=(None, Origin(id=4, when="now", full=True)))
    why = f"run #4 relu(f32[]) failed (control flow at line {RELU_IF_LINE})"
    assert d.ir["jaxpr"].note == f"{why}: it has no jaxpr text"
    assert all(not x.kept and "was not kept" not in x.note for x in d.ir.values())
    assert d.kernels.note == f"{why}: it has no kernels" and d.kernels.removed == []
    assert d.timings["runs"].b is None and d.failed == (False, True)  # not 0 timed runs
    timings = {r[""]: r for r in rows("timings", d.timings, d.failed)}
    assert timings["timed runs"]["B"] == "failed" and timings["timed runs"]["Δ (B − A)"] == "–"
    ops = op_rows(d.ops, failed=d.failed)
    assert ops and all(r["B"] == "failed" and r["Δ"] == "–" for r in ops)  # not 'removed'


def test_differences_are_written_with_one_minus_sign(chains):
    d = diff_reports(*chains)
    assert {r["op"]: r["Δ"] for r in op_rows(d.stablehlo_ops)} == {"stablehlo.negate": "−1"}


def scan_rnn(w, xs):
    import jax

    return jax.lax.scan(lambda h, x: (jnp.tanh(x @ w + h), None), jnp.zeros(8), xs)[0]


def test_a_loops_cost_is_said_to_count_its_body_once():
    """A scan of 20 steps, then 40: XLA's FLOPs stay 'Δ 0' (one step's), which the
    summary must not leave unsaid."""
    a, b = (analyze(scan_rnn, f"f32[8,8], f32[{n},8]", runs=0) for n in (20, 40))
    diff = diff_reports(a, b)
    assert diff.cost["flops"].delta == 0
    assert "cost: XLA counts a loop's body once, whatever its trip count" in summarize(diff)
    straight = diff_reports(*(analyze(jnp.tanh, f"f32[{n}]", runs=0) for n in (8, 16)))
    assert "loop's body once" not in summarize(straight)
