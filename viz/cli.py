"""Command line: `jitscope analyze|cache PATH::FUNC`, `record`, `job`, `history`, `diff`, `app`.

`jitscope` and `python -m viz` are the same command. A target is `PATH::FUNC` or one of
the samples that ship with the app, by name: `sample:mlp`, whose own args and static
parameters are the defaults.

User code runs in the worker (time and memory limits, crash isolation, and
`cpu:8` really gets 8 devices). Exit status 0 when the analysis ran, even if
the user's function failed (that is a result, in `error`); 2 for CLI misuse.
Every `analyze` is recorded in the run history unless `--no-history`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from viz.locations import APP_SCRIPT, command_name
from viz.options import parse_option
from viz.recorder.cli import COMMAND_NAMES, command
from viz.units import nbytes, seconds

if TYPE_CHECKING:
    from viz.cache.events import CacheEvent
    from viz.report import Report
    from viz.settings import Settings
    from viz.specialization import SpecializedArg
    from viz.worker import Worker
    from viz.worker.protocol import CacheReply

# The rest is imported where it is used: `jitscope record` starts its program without
# the analysis's imports (numpy, the report, the worker: 0.3 s)


def _target(text: str) -> Settings:
    """The target's code, its folder (its imports look there) and function (None: the
    file's last one); a sample's args and static are the defaults."""
    from viz.samples import get_sample
    from viz.settings import Settings

    if text.startswith("sample:"):
        try:
            sample = get_sample(text.removeprefix("sample:"))
        except KeyError as exc:
            raise argparse.ArgumentTypeError(exc.args[0]) from None
        return Settings(
            code=sample.code,
            folder=str(sample.path.parent),
            file=f"{sample.path.parent.name}/{sample.path.name}",
            function=sample.function,
            args=sample.args,
            static=list(sample.static),
        )
    path, _, func = text.partition("::")
    file = Path(path)
    if not file.is_file():
        hint = f" (the samples ship with jitscope: sample:{file.stem})" if _is_sample(file) else ""
        raise argparse.ArgumentTypeError(f"no such file: {path}{hint}")
    return Settings(
        file.read_text(), folder=str(file.resolve().parent), file=path, function=func or None
    )


def _is_sample(file: Path) -> bool:
    """`samples/mlp.py` typed outside the clone, where the clone's samples are not."""
    from viz.samples import get_sample

    try:
        get_sample(file.stem)
    except KeyError:
        return False
    return file.parent.name == "samples"


def _option(text: str) -> tuple[str, Any]:
    try:
        return parse_option(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parser() -> argparse.ArgumentParser:
    from viz import cli_history
    from viz.worker import DEFAULT_TIMEOUT_S

    parser = argparse.ArgumentParser(prog=command_name(), description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "target",
        type=_target,
        help="PATH::FUNC (FUNC defaults to the last one), or sample:NAME",
    )
    common.add_argument(
        "--static",
        nargs="*",
        metavar="NAME",
        help="static parameters, by name or position (default: none, or the sample's)",
    )
    common.add_argument("--device", default="cpu", help="cpu, cpu:8 (simulated) or gpu")
    common.add_argument("--json", type=Path, metavar="OUT", help="write the JSON report here")
    common.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help="seconds before the worker is stopped",
    )
    analyze = sub.add_parser("analyze", parents=[common], help="trace, lower, compile, run")
    analyze.add_argument(
        "--args",
        metavar="SPEC",
        help="args spec, e.g. 'f32[8,128], 3' (default: none, or the sample's)",
    )
    analyze.add_argument("--runs", type=int, default=20, help="timed runs (0: compile only)")
    analyze.add_argument(
        "--mesh",
        default="",
        metavar="AXIS=N,...",
        help="a device mesh for the spec's `@ P(...)` suffixes, e.g. data=4,model=2 "
        "(needs that many devices: --device cpu:8)",
    )
    analyze.add_argument(
        "--donate",
        nargs="*",
        default=[],
        metavar="NAME",
        help="donated parameters, by name or position (like --static)",
    )
    analyze.add_argument(
        "--option",
        action="append",
        default=[],
        type=_option,
        metavar="KEY=VALUE",
        help="an XLA compiler option for this compile (repeatable), e.g. "
        "xla_disable_hlo_passes=fusion",
    )
    analyze.add_argument("--html", type=Path, metavar="OUT", help="write a standalone HTML report")
    analyze.add_argument(
        "--profile", action="store_true", help="time each kernel under jax.profiler (runs > 0)"
    )
    analyze.add_argument(
        "--mlir", type=Path, metavar="OUT", help="write the StableHLO with locations (.mlir)"
    )
    analyze.add_argument(
        "--compile-profile",
        action="store_true",
        help="also trace, lower and compile once more on cleared caches to see where the "
        "compile time goes: the trace by source line, XLA's own spans (compile_profile)",
    )
    analyze.add_argument(
        "--trace",
        type=Path,
        metavar="OUT",
        help="write the kernel profile as a Chrome JSON trace for Perfetto (.json or "
        ".json.gz; implies --profile)",
    )
    analyze.add_argument(
        "--no-history", action="store_true", help="do not record this run in the history"
    )
    cache = sub.add_parser("cache", parents=[common], help="call repeatedly, explain cache misses")
    cache.add_argument(
        "--call",
        action="append",
        required=True,
        metavar="SPEC",
        help="args spec of one call (repeat for a sequence)",
    )
    cli_history.add_commands(sub)
    for name in COMMAND_NAMES:
        command(name).add_command(sub)
    sub.add_parser(
        "app",
        help="start the app (Streamlit's own options pass through, e.g. --server.port 8502)",
    )
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    """The command's one Settings: its target's, changed by the flags given."""
    flags = {"static": args.static, "device": args.device}
    if args.command == "analyze":
        flags.update(args=args.args, donate=args.donate, mesh=args.mesh)
        flags["compiler_options"] = dict(args.option)
    return replace(args.target, **{k: v for k, v in flags.items() if v is not None})


def _app(streamlit_options: list[str]) -> int:
    """`streamlit run` on the installed app.py: Streamlit reads the app's own
    .streamlit/config.toml beside it (localhost only, ...), the options given here win."""
    if not APP_SCRIPT.is_file():
        print(f"error: the app is not installed here ({APP_SCRIPT} is missing)", file=sys.stderr)
        return 2
    command = [sys.executable, "-m", "streamlit", "run", str(APP_SCRIPT), *streamlit_options]
    os.execv(sys.executable, command)  # Ctrl+C and the exit status are Streamlit's own


def summarize_report(report: Report) -> str:
    lines = [f"{report.function}({report.args}) on {report.device} · jax {report.jax_version}"]
    t = report.timings
    if report.jaxpr:
        counts = (
            report.jaxpr.eqn_count,
            report.stablehlo.op_count if report.stablehlo else None,
            report.compiled.kernel_count if report.compiled else None,
        )
        lines.append(
            f"jaxpr eqns {counts[0]} → StableHLO ops {counts[1]} → compiled kernels {counts[2]}"
        )
    lines.extend(_fusion_lines(report))
    if report.memory:
        from viz.memory.display import peak_line

        lines.extend(filter(None, [peak_line(report.memory, report.source_file)]))
    lines.extend(_specialization_lines(report))
    lines.extend(_sharding_lines(report))
    lines.extend(_compile_profile_lines(report))
    lines.append(
        f"trace {seconds(t.trace_s)} · lower {seconds(t.lower_s)} · "
        f"compile {seconds(t.compile_s)} · run median "
        f"{seconds(t.run_median_s)} (eager {seconds(t.eager_median_s)})"
    )
    error = report.error
    if error:
        where = f" (line {error.line})" if error.line else ""
        lines.append(f"error [{error.kind}]{where}: {error.message}")
        if error.hint:
            lines.append(f"fix: {error.hint}")
    return "\n".join(lines)


def _fusion_lines(report: Report) -> list[str]:
    lines = []
    cov = report.fusion_map_coverage
    if cov and cov.stablehlo is not None:
        lines.append(
            f"fusion map: {cov.stablehlo:.0%} of StableHLO ops"
            + (f", {cov.jaxpr:.0%} of jaxpr eqns" if cov.jaxpr is not None else "")
            + " found in the compiled program"
        )
    prof = report.profile
    if prof and prof.kernels:
        top = ", ".join(f"{k.name} {seconds(k.mean_s)} ({k.share:.0%})" for k in prof.kernels[:3])
        lines.append(f"kernel time per step {seconds(prof.step_s)}: {top}")
    return lines


SHOWN_LEAVES = 6  # the summary's specialization line names this many leaves


def _specialization_lines(report: Report) -> list[str]:
    """`specialized on: x f32[16] · n = 16 (static)`, the first SHOWN_LEAVES leaves: the
    arguments that are one leaf (the input `x`, a static `n`) before the leaves of a
    tree (a model's `params`), which would hide them."""
    leaves = Counter(r.param for r in report.specialization)
    rows = sorted(report.specialization, key=lambda r: leaves[r.param] > 1)  # stable
    if not rows:
        return []
    shown = " · ".join(_leaf_text(r) for r in rows[:SHOWN_LEAVES])
    more = f" · … {len(rows) - SHOWN_LEAVES} more" if len(rows) > SHOWN_LEAVES else ""
    return [f"specialized on: {shown}{more}"]


def _leaf_text(row: SpecializedArg) -> str:
    if row.state == "static":
        return f"{row.arg} = {row.value} (static)"
    return f"{row.arg} {row.baked_in}" + (" (untraceable)" if row.state == "untraceable" else "")


def _sharding_lines(report: Report) -> list[str]:
    """`sharded over data=8: x P('data', None) → [8, 128] per device` and the collectives."""
    s = report.sharding
    if s is None:
        return []
    mesh = ", ".join(f"{k}={v}" for k, v in s.mesh.items())
    split = [f"{a.arg} {a.spec} → {a.per_device_shape}" for a in s.args if a.spec != "replicated"]
    lines = [f"sharded over {mesh} ({s.devices} devices): " + (" · ".join(split) or "replicated")]
    found = [
        f"{c.kind} ×{c.count} {c.dtype} {nbytes(c.bytes_per_device)}/device"
        + (f" (lines {', '.join(map(str, c.lines))})" if c.lines else "")
        for c in s.collectives
    ]
    lines.append("collectives: " + (" · ".join(found) if found else "none"))
    return lines


def _compile_profile_lines(report: Report) -> list[str]:
    """The compile profile: stage times, the top trace lines, XLA's top spans, the
    repeated groups and what drives the compile."""
    p = report.compile_profile
    if p is None:
        return []
    from viz.compile_profile.advice import what_drives_it
    from viz.where import place

    plain = f" (unprofiled {seconds(p.trace_plain_s)})" if p.trace_plain_s else ""
    lines = [
        f"compile profile: trace {seconds(p.trace_s)}{plain} · lower {seconds(p.lower_s)} · "
        f"compile {seconds(p.compile_s)} · the profile took {seconds(p.profile_s)}"
    ]
    share = p.trace_user_share
    if share is not None:
        lines.append(f"  trace: {share:.0%} under your code; by line (total, self, runs, eqns):")
    for row in p.trace_lines[:SHOWN_TRACE_LINES]:
        lines.append(
            f"    {place(row.where, report.source_file)} {row.function}: "
            f"{seconds(row.seconds)}, {seconds(row.self_seconds)}, {row.calls:,}, {row.eqns:,}"
        )
    if p.error is not None:
        lines.append(f"  XLA: {p.error.message}")
    elif p.compile_s:
        tops = " · ".join(
            f"{s.name} {seconds(s.seconds)} ({s.seconds / p.compile_s:.0%})"
            for s in p.top_spans
            if s.seconds >= 0.01 * p.compile_s
        )
        covered = f"{p.xla_covered:.0%}" if p.xla_covered is not None else "–"
        lines.append(f"  XLA: {tops}; top level covers {covered}, {p.depth} levels deep")
    groups = " · ".join(f"{g.group} ×{g.count} ({g.share:.0%})" for g in p.repeated[:3])
    lines.append(f"  repeated: {groups or 'none'}")
    lines.extend(f"  → {d.title}" for d in what_drives_it(p, report.source_file))
    if p.trace_file:
        lines.append(f"  Perfetto trace: {p.trace_file}")
    return lines


SHOWN_TRACE_LINES = 5


def summarize_cache(events: list[CacheEvent]) -> str:
    from viz.cache.events import FailedEvent, RoutedEvent
    from viz.cache.signature import reason_text

    lines = []
    for e in events:
        if isinstance(e, FailedEvent):
            lines.append(f"#{e.call} error: {e.error.message}")
        elif isinstance(e, RoutedEvent):
            lines.append(
                f"#{e.call} AOT  bucket {e.aot_bucket} (size {e.size}, padding {e.padding})"
                f"  cache={e.cache_size}"
            )
        else:
            status = "hit " if e.hit else "MISS"
            lines.append(
                f"#{e.call} {status} {e.signature}  cache={e.cache_size}"
                + ("" if e.hit else f"  compile {seconds(e.compile_s)}")
            )
            lines.extend(f"      {reason_text(r)}" for r in e.reasons)
    return "\n".join(lines)


def _write_json(path: Path | None, data: Any) -> None:
    if path:
        path.write_text(json.dumps(data, indent=2, default=str))


def _write_exports(args: argparse.Namespace, report: Report) -> None:
    """--mlir and --trace (issue #12); a missing one is said on stderr, not fatal."""
    if args.mlir:
        if report.mlir:
            args.mlir.write_text(report.mlir)
        else:
            print("no StableHLO to write (the function did not lower)", file=sys.stderr)
    if args.trace:
        from viz.fusion.profile import save_trace

        try:
            save_trace(report.profile or {}, args.trace)
        except (FileNotFoundError, OSError) as exc:
            print(f"no trace written: {exc}", file=sys.stderr)


def cache_json(reply: CacheReply) -> dict[str, Any]:
    """The Cache JSON of DESIGN.md: `ok`, `error` and every call's event."""
    return {
        "ok": reply.ok,
        "error": reply.error.to_dict() if reply.error else None,
        "events": [e.to_dict() for e in reply.events],
    }


def _analyze(args: argparse.Namespace, worker: Worker) -> None:
    from viz import cli_history
    from viz.worker.protocol import Analyze

    settings = _settings(args)
    request = Analyze(
        settings,
        runs=args.runs,
        profile=args.profile or args.trace is not None,
        mlir=args.mlir is not None,
        compile_profile=args.compile_profile,
    )
    reply = worker.ask(request)
    report = reply.report
    if not args.no_history:
        cli_history.record(reply.report, settings.code)
    print(summarize_report(report))
    _write_exports(args, report)
    _write_json(args.json, report.public_dict())
    if args.html:
        from viz.export import html_report

        args.html.write_text(html_report(report))


def _cache(args: argparse.Namespace, worker: Worker) -> None:
    from viz.worker.protocol import CacheCalls

    request = CacheCalls(_settings(args), calls=args.call)
    reply = worker.ask(request)
    if reply.error:  # the worker itself failed (a call's error is an event)
        print(f"error: {reply.error.message}", file=sys.stderr)
    print(summarize_cache(reply.events))
    _write_json(args.json, cache_json(reply))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in COMMAND_NAMES:  # record and job parse their own arguments
        return command(argv[0]).main(argv[1:])  # (record's: the program's, which follow)
    if argv[:1] == ["app"]:  # Streamlit's options follow: Streamlit parses them
        return _app(argv[1:])
    args = _parser().parse_args(argv)
    from viz import cli_history
    from viz.worker import Worker

    if args.command in ("history", "diff"):
        return cli_history.main(args)
    worker = Worker(args.device, timeout_s=args.timeout)
    try:
        (_analyze if args.command == "analyze" else _cache)(args, worker)
    finally:
        worker.close()
    return 0
