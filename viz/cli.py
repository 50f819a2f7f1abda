"""Command line: `jitscope analyze|cache PATH::FUNC`, `record`, `job`, `history`, `diff`, `app`.

`jitscope` and `python -m viz` are the same command. A target is `PATH::FUNC` or one of
the samples that ship with the app, by name: `sample:mlp`, whose own args and static
parameters are the defaults.

User code runs in the worker (time and memory limits, crash isolation, and
`cpu:8` really gets 8 devices). Exit status 0 when the analysis ran, even if
the user's function failed (that is a result, in `error`); 2 for CLI misuse, a
function whose required parameters the args spec leaves without values included (read
from its code before anything runs).
Every `analyze` is recorded in the run history unless `--no-history`.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from viz.locations import APP_SCRIPT, invoked_name
from viz.recorder.cli import COMMAND_NAMES, command
from viz.units import count, nbytes, plural, seconds

if TYPE_CHECKING:
    from viz.cache.events import CacheEvent
    from viz.fusion.profile import Profile
    from viz.report import Report
    from viz.settings import Settings
    from viz.specialization import SpecializedArg
    from viz.worker import Worker
    from viz.worker.protocol import CacheReply, ReplyT, Request

# The rest is imported where it is used: `jitscope record` starts its program without
# the analysis's imports (numpy, the report, the worker: 0.3 s; the devices and compiler
# options the parser checks: 0.02 s)

WAIT_POLL_S = 5.0  # how often --wait looks whether a held device is free


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


def _device(text: str) -> str:
    from viz.platforms import DeviceConfig, DeviceError

    try:
        return str(DeviceConfig.parse(text))
    except DeviceError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _option(text: str) -> tuple[str, Any]:
    from viz.options import parse_option

    try:
        return parse_option(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parser() -> argparse.ArgumentParser:
    from viz import cli_history
    from viz.platforms import examples, written
    from viz.worker import DEFAULT_TIMEOUT_S

    parser = argparse.ArgumentParser(
        prog=invoked_name(), description=__doc__.splitlines()[0], epilog=_samples_help()
    )
    parser.add_argument(
        "--version",
        action="version",
        version=version_text(),
        help="print jitscope's, jax's and jaxlib's versions and exit",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "target",
        type=_target,
        help="PATH::FUNC (FUNC defaults to the last one), or sample:NAME (see below)",
    )
    common.add_argument(
        "--static",
        nargs="*",
        metavar="NAME",
        help="static parameters, by name or position (default: none, or the sample's)",
    )
    common.add_argument(
        "--device",
        default="cpu",
        type=_device,
        help=f"{written(examples())} (cpu:8 simulates 8 devices; an accelerator needs "
        "JAX's plugin for it)",
    )
    common.add_argument("--json", type=Path, metavar="OUT", help="write the JSON report here")
    common.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help="seconds before the worker is stopped",
    )
    analyze = sub.add_parser(
        "analyze", parents=[common], help="trace, lower, compile, run", epilog=_samples_help()
    )
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
    analyze.add_argument(
        "--wait",
        action="store_true",
        help="when another process holds the device (a TPU chip: one process at a time), "
        "wait until it is free instead of failing",
    )
    cache = sub.add_parser(
        "cache",
        parents=[common],
        help="call repeatedly, explain cache misses",
        epilog=_samples_help(),
    )
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


def _samples_help() -> str:
    """The samples a target can name, for `--help`."""
    from viz.samples import list_samples

    names = ", ".join(s.name for s in list_samples())
    return f"samples (sample:NAME, with their own args): {names or 'none installed'}"


def version_text() -> str:
    """`jitscope 0.1.0 · jax 0.10.2 · jaxlib 0.10.2`, from the installed packages' metadata
    (jax is not imported)."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return f"{name} {version(name)}"
        except PackageNotFoundError:
            return f"{name} (not installed)"

    return " · ".join(installed(name) for name in ("jitscope", "jax", "jaxlib"))


def missing_args(settings: Settings, specs: list[str], flag: str = "--args") -> str | None:
    """What is wrong when one of `specs` (the args specs to call with) gives fewer items
    than the function has required positional parameters, read from its code with `ast`
    before anything runs; None when they are enough or the code does not say (a function
    made by a call, `step = jax.jit(f)`, or a spec that does not split)."""
    definition = _definition(settings.code, settings.function)
    if definition is None:
        return None
    params = _required_params(definition)
    for spec in specs:
        items = _spec_items(spec)
        if items is not None and len(items) < len(params):
            return _missing_text(definition.name, params, items, flag, settings)
    return None


def _spec_items(spec: str) -> list[str] | None:
    """The spec's top-level items (None: it does not split; the worker will say why)."""
    from viz.spec.text import SpecError, split_spec

    try:
        return split_spec(spec) if spec.strip() else []
    except SpecError:
        return None


def _missing_text(
    function: str, params: list[str], items: list[str], flag: str, settings: Settings
) -> str:
    """`step() needs values for params, x: …` and the fix, with an example spec."""
    missing = params[len(items) :]
    names = _module_names(settings.code)
    example = ", ".join([*items, *(_example_item(p, names, settings.static) for p in missing)])
    given = ", ".join(params)
    told = f"{flag} gives {len(items)} of {len(params)} ({given})" if items else f"no {flag}"
    value = "a value" if len(missing) == 1 else "values"
    return (
        f"{function}() needs {value} for {', '.join(missing)}: {told}\n"
        f'fix: {flag} "{example}" (one spec item per parameter, in order: an array '
        "dtype[shape], a name your module defines, or a Python literal)"
    )


def _definition(code: str, function: str | None) -> ast.FunctionDef | None:
    """The top-level `def` the target names (None: FUNC's last one), or None."""
    from viz.source import parse_python

    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError):
        return None
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    named = [d for d in defs if d.name == function] if function else defs[-1:]
    return named[-1] if named else None


def _required_params(definition: ast.FunctionDef) -> list[str]:
    """The positional parameters without a default value."""
    a = definition.args
    positional = [*a.posonlyargs, *a.args]
    return [p.arg for p in positional[: len(positional) - len(a.defaults)]]


def _module_names(code: str) -> set[str]:
    """The names the module assigns at its top level (`params = init(...)`)."""
    from viz.source import parse_python

    return {
        t.id
        for node in parse_python(code).body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }


def _example_item(param: str, names: set[str], static: list[str]) -> str:
    """A parameter's example spec item: its own name when the module defines it
    (`params`), a number for a static one, else a small array."""
    if param in names:
        return param
    return "8" if param in static else "f32[8]"


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
    from viz.device_time import device_time_words

    # a worker whose device never started knows no version
    version = f" · jax {report.jax_version}" if report.jax_version else ""
    lines = [f"{report.function}({report.args}) on {report.device}{version}"]
    t = report.timings
    if report.jaxpr:
        counts = [
            count(c)
            for c in (
                report.jaxpr.eqn_count,
                report.stablehlo.op_count if report.stablehlo else None,
                report.compiled.kernel_count if report.compiled else None,
            )
        ]
        lines.append(
            f"jaxpr eqns {counts[0]} → StableHLO ops {counts[1]} → compiled kernels {counts[2]}"
        )
    lines.extend(_fusion_lines(report))
    if report.memory:
        from viz.memory.display import (
            device_memory_text,
            padding_text,
            peak_line,
            spaces_text,
            xla_peak_text,
        )

        memory = report.memory
        said = [peak_line(memory), xla_peak_text(memory, report.device)]
        said += [padding_text(memory), spaces_text(memory, report.device)]
        said.append(device_memory_text(memory))
        lines.extend(filter(None, said))
    lines.extend(_donation_lines(report))
    lines.extend(_specialization_lines(report))
    lines.extend(_sharding_lines(report))
    lines.extend(_compile_profile_lines(report))
    lines.append(
        f"trace {seconds(t.trace_s)} · lower {seconds(t.lower_s)} · "
        f"compile {seconds(t.compile_s)} · run median "
        f"{seconds(t.run_median_s)} (eager {seconds(t.eager_median_s)}{_eager_compiles(report)})"
    )
    if t.run_median_s is not None:
        lines.extend(filter(None, [device_time_words(t, report.device)]))
    # what the app shows above its tabs: why a part is missing ('eager –': eager failed)
    lines.extend(f"warning: {warning}" for warning in report.warnings)
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
        mapped = (cov.counts.get("stablehlo") or {}).get("ops")
        total = report.stablehlo.op_count if report.stablehlo else None
        aside = (  # one fact, one number: the map's count says why it is not the chain's
            f" (of {count(total)}: constants, calls and ops with regions aside)"
            if mapped is not None and total is not None and mapped != total
            else ""
        )
        lines.append(
            f"fusion map: {cov.stablehlo:.0%} of the {count(mapped)} StableHLO ops it maps{aside}"
            + (f", {cov.jaxpr:.0%} of jaxpr eqns" if cov.jaxpr is not None else "")
            + " found in the compiled program"
        )
    prof = report.profile
    if prof and prof.kernels:
        titles = {e.kernel: e.title for e in report.fusion_map if e.title}
        lines.append(kernel_time_line(prof, titles))
        lines.extend(_roofline_lines(prof, titles))
    return lines


def kernel_time_line(prof: Profile, titles: dict[str, str]) -> str:
    """`kernel time per step 64 µs of a 233 µs profiled step (169 µs outside kernels):
    dot 26 µs (11%), …`: the kernels' own time, beside the step their shares are of
    (on CPU, with small kernels, most of a step can be the executor's and the
    profiler's, between kernels)."""
    top = ", ".join(
        f"{_kernel_title(k.name, titles)} {seconds(k.mean_s)} ({k.share:.0%})"
        for k in prof.kernels[:3]
    )
    busy = sum(k.mean_s for k in prof.kernels)
    outside = f" ({seconds(prof.unattributed_s)} outside kernels)" if prof.unattributed_s else ""
    overlap = " (kernels overlap)" if prof.concurrent else ""
    step = f"of a {seconds(prof.busy_step_s)} profiled step{outside}{overlap}"
    return f"kernel time per step {seconds(busy)} {step}: {top}"


def _eager_compiles(report: Report) -> str:
    """', compiling again on each call' where a jit inside the function compiled on
    every call timed op by op (diffrax's diffeqsolve given a new lambda each call: its
    eager time is mostly XLA's compile), ', 2 compiles in its 9 timed calls' where on
    some; '' where none did."""
    eager = report.run.eager if report.run else None
    if eager is None or not eager.compiles:
        return ""
    timed = eager.samples * eager.number + 1  # the warm-up call, then the samples'
    if eager.compiles >= timed:
        return ", compiling again on each call: a jit inside it sees something new each time"
    return f", {plural(eager.compiles, 'compile')} in its {timed} timed calls"


def _donation_lines(report: Report) -> list[str]:
    """`donated: x → output #0 (aliased) · y not reused (no output of its shape and dtype)
    · 4.0 MiB written in place`, from the report's donation section."""
    donation = report.donation
    donated = [a for a in donation.args if a.donated] if donation else []
    if not donated:
        return []
    leaves = [
        f"{a.name} → output #{a.aliased_output} (aliased)"
        if a.aliased_output is not None
        else f"{a.name} not reused ({a.reason or 'XLA kept its buffer'})"
        for a in donated
    ]
    saved = donation.saved_bytes
    tail = f" · {nbytes(saved)} written in place" if saved else ""
    return ["donated: " + " · ".join(leaves) + tail]


TOP_KERNELS = 5  # the roofline lines of the CLI's summary


def _kernel_title(name: str, titles: dict[str, str]) -> str:
    return f"{name} ({titles[name]})" if name in titles else name


def _roofline_lines(prof: Profile, titles: dict[str, str]) -> list[str]:
    from viz.fusion.roofline import (
        past_hbm_words,
        peaks_words,
        point_words,
        roofline,
        unplaced_words,
    )

    line = roofline(prof)
    head = f"roofline on {peaks_words(line.peaks)}" if line.peaks else f"roofline: {line.note}"
    if line.peaks and line.note:
        head += f" ({line.note})"
    slowest = sorted(line.points, key=lambda p: -p.seconds)[:TOP_KERNELS]
    return (
        [head]
        + [
            f"  {_kernel_title(p.kernel, titles)} {seconds(p.seconds)}: {point_words(p)}"
            for p in slowest
        ]
        + [f"  {words}" for words in unplaced_words(line, titles).values()]
        + [f"  {words}" for words in filter(None, [past_hbm_words(line)])]
    )


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


def _write_json(path: Path | None, data: Any, what: str) -> None:
    from viz import cli_history

    if path:
        path.write_text(json.dumps(data, indent=2, default=str))
        cli_history.wrote(what, path)


def _write_exports(args: argparse.Namespace, report: Report) -> None:
    """--mlir and --trace (issue #12); a missing one is said on stderr, not fatal."""
    from viz import cli_history

    if args.mlir:
        if report.mlir:
            args.mlir.write_text(report.mlir)
            cli_history.wrote("the StableHLO with locations", args.mlir)
        else:
            print("no StableHLO to write (the function did not lower)", file=sys.stderr)
    if args.trace:
        from viz.fusion.profile import save_trace

        try:
            save_trace(report.profile or {}, args.trace)
        except (FileNotFoundError, OSError) as exc:
            print(f"no trace written: {exc}", file=sys.stderr)
        else:
            cli_history.wrote("the kernel trace for Perfetto", args.trace)


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
    reply = ask_waiting(worker, request, args.wait)
    report = reply.report
    if not args.no_history:
        cli_history.record(reply.report, settings.code)
    print(summarize_report(report))
    _write_exports(args, report)
    _write_json(args.json, report.public_dict(), "the JSON report")
    if args.html:
        from viz.export import html_report

        args.html.write_text(html_report(report))
        cli_history.wrote("the HTML report", args.html)


def ask_waiting(
    worker: Worker, request: Request[ReplyT], wait: bool, poll_s: float = WAIT_POLL_S
) -> ReplyT:
    """`worker`'s reply to `request`; with `wait`, while another process holds the
    device, asked again every `poll_s` (the worker that found it held has ended: the
    next opens it afresh), saying once on stderr what it waits for."""
    from viz.platforms import held

    told = False
    while True:
        reply = worker.ask(request)
        if not (wait and reply.error is not None and held(reply.error.message)):
            return reply
        if not told:
            print(f"waiting: {reply.error.message}", file=sys.stderr, flush=True)
            told = True
        time.sleep(poll_s)


def _cache(args: argparse.Namespace, worker: Worker) -> None:
    from viz.worker.protocol import CacheCalls

    request = CacheCalls(_settings(args), calls=args.call)
    reply = worker.ask(request)
    if reply.error:  # the worker itself failed (a call's error is an event)
        print(f"error: {reply.error.message}", file=sys.stderr)
    print(summarize_cache(reply.events))
    _write_json(args.json, cache_json(reply), "the cache JSON")


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
    settings = _settings(args)
    if args.command == "cache":
        problem = missing_args(settings, args.call, "--call")
    else:
        problem = missing_args(settings, [settings.args])
    if problem:  # misuse: nothing runs, nothing is recorded
        print(f"{invoked_name()} {args.command}: error: {problem}", file=sys.stderr)
        return 2
    worker = Worker(args.device, timeout_s=args.timeout)
    try:
        (_analyze if args.command == "analyze" else _cache)(args, worker)
    finally:
        worker.close()
    return 0
