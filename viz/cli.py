"""Command line: `python -m viz analyze|cache PATH::FUNC`, `record`, `history`, `diff A B`.

User code runs in the worker (time and memory limits, crash isolation, and
`cpu:8` really gets 8 devices). Exit status 0 when the analysis ran, even if
the user's function failed (that is a result, in `error`); 2 for CLI misuse.
Every `analyze` is recorded in the run history unless `--no-history`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from viz import cli_history
from viz.cache.signature import reason_text
from viz.format import seconds
from viz.options import parse_option
from viz.recorder import cli as recorder_cli
from viz.worker import DEFAULT_TIMEOUT_S, Worker


def _target(text: str) -> tuple[str, str | None, str]:
    """(the file's code, the function, the file's folder: its imports look there)."""
    path, _, func = text.partition("::")
    file = Path(path)
    if not file.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {path}")
    return file.read_text(), func or None, str(file.resolve().parent)


def _option(text: str) -> tuple[str, Any]:
    try:
        return parse_option(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m viz", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("target", type=_target, help="PATH::FUNC (FUNC defaults to the last one)")
    common.add_argument(
        "--static",
        nargs="*",
        default=[],
        metavar="NAME",
        help="static parameters, by name or position",
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
        "--args", default="", metavar="SPEC", help="args spec, e.g. 'f32[8,128], 3'"
    )
    analyze.add_argument("--runs", type=int, default=20, help="timed runs (0: compile only)")
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
    recorder_cli.add_command(sub)
    return parser


def summarize_report(report: dict[str, Any]) -> str:
    lines = [
        f"{report.get('function')}({report.get('args')}) on {report.get('device')} "
        f"· jax {report.get('jax_version')}"
    ]
    t = report.get("timings") or {}
    if report.get("jaxpr"):
        counts = (
            report["jaxpr"].get("eqn_count"),
            (report.get("stablehlo") or {}).get("op_count"),
            (report.get("compiled") or {}).get("kernel_count"),
        )
        lines.append(
            f"jaxpr eqns {counts[0]} → StableHLO ops {counts[1]} → compiled kernels {counts[2]}"
        )
    lines.extend(_fusion_lines(report))
    lines.append(
        f"trace {seconds(t.get('trace_s'))} · lower {seconds(t.get('lower_s'))} · "
        f"compile {seconds(t.get('compile_s'))} · run median "
        f"{seconds(t.get('run_median_s'))} (eager {seconds(t.get('eager_median_s'))})"
    )
    error = report.get("error")
    if error:
        where = f" (line {error['line']})" if error.get("line") else ""
        lines.append(f"error [{error['kind']}]{where}: {error['message']}")
        if error.get("hint"):
            lines.append(f"fix: {error['hint']}")
    return "\n".join(lines)


def _fusion_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    cov = report.get("fusion_map_coverage") or {}
    if cov.get("stablehlo") is not None:
        jaxpr = cov.get("jaxpr")
        lines.append(
            f"fusion map: {cov['stablehlo']:.0%} of StableHLO ops"
            + (f", {jaxpr:.0%} of jaxpr eqns" if jaxpr is not None else "")
            + " found in the compiled program"
        )
    prof = report.get("profile")
    if prof and prof.get("kernels"):
        top = ", ".join(
            f"{k['name']} {seconds(k['mean_s'])} ({k['share']:.0%})" for k in prof["kernels"][:3]
        )
        lines.append(f"kernel time per step {seconds(prof['step_s'])}: {top}")
    return lines


def summarize_cache(events: list[dict[str, Any]]) -> str:
    lines = []
    for e in events:
        if "hit" not in e:
            lines.append(f"#{e.get('call', '?')} error: {e.get('error', {}).get('message')}")
            continue
        status = "hit " if e["hit"] else "MISS"
        lines.append(
            f"#{e['call']} {status} {e['signature']}  cache={e['cache_size']}"
            + ("" if e["hit"] else f"  compile {seconds(e['compile_s'])}")
        )
        lines.extend(f"      {reason_text(r)}" for r in e["reasons"])
    return "\n".join(lines)


def _write_json(path: Path | None, data: Any) -> None:
    if path:
        path.write_text(json.dumps(data, indent=2, default=str))


def _write_exports(args: argparse.Namespace, report: dict[str, Any], mlir: str | None) -> None:
    """--mlir and --trace (issue #12); a missing one is said on stderr, not fatal."""
    if args.mlir:
        if mlir:
            args.mlir.write_text(mlir)
        else:
            print("no StableHLO to write (the function did not lower)", file=sys.stderr)
    if args.trace:
        from viz.fusion.profile import save_trace

        try:
            save_trace(report.get("profile") or {}, args.trace)
        except (FileNotFoundError, OSError) as exc:
            print(f"no trace written: {exc}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["record"]:  # the program's own arguments follow: record parses them
        return recorder_cli.main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command in ("history", "diff"):
        return cli_history.main(args)
    code, function, folder = args.target
    worker = Worker(args.device, timeout_s=args.timeout)
    try:
        if args.command == "analyze":
            report = worker.request(
                "analyze",
                code=code,
                function=function,
                args=args.args,
                static=args.static,
                device=args.device,
                runs=args.runs,
                donate=args.donate,
                compiler_options=dict(args.option),
                profile=args.profile or args.trace is not None,
                mlir=args.mlir is not None,
                folder=folder,
            )
            if not args.no_history:
                cli_history.record(report, code)
            report.pop("graph_models", None)
            report.pop("stdout", None)
            mlir = report.pop("mlir", None)
            print(summarize_report(report))
            _write_exports(args, report, mlir)
            _write_json(args.json, report)
            if args.html:
                from viz.export import html_report

                args.html.write_text(html_report(report))
        else:
            result = worker.request(
                "cache_calls",
                code=code,
                function=function,
                static=args.static,
                calls=args.call,
                folder=folder,
            )
            events = result.get("events", [])
            if result.get("error"):  # the worker itself failed (a call's error is an event)
                print(f"error: {result['error']['message']}", file=sys.stderr)
            print(summarize_cache(events))
            _write_json(
                args.json,
                {"ok": result.get("ok", True), "error": result.get("error"), "events": events},
            )
    finally:
        worker.close()
    return 0
