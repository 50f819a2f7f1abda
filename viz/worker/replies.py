"""The worker's replies: one dataclass per operation's answer; every one may be a
failure (`ok` False, `error` an ErrorInfo). No jax."""

from __future__ import annotations

import functools
import json
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from viz.cache.events import BucketRow, CacheEvent, EntryRow, event_from_dict
from viz.compile_profile.model import CompileProfileSection
from viz.errors import ErrorInfo
from viz.ir.model import Graphs
from viz.lessons.rows import BucketCostRow, PlacementRow, ScalingRow, ShapeRow
from viz.plain import Later, Plain, decode, encode, pending
from viz.report import Report, Subject
from viz.worker.parts import Parts
from viz.worker.requests import Analyze, Request

PARTS = "parts"  # the head's key naming the parts that follow it (`Reply.wire`)
Part = tuple[str, str]  # (name, text)
# What an analysis's report holds beyond its first screen's counts (a 96-layer model's:
# 22 MB of 23), in the order it follows the head: the fusion map first (the Overview
# counts its kernels), then the compiled program's graph (the Overview folds it to read
# beside the code; the history keeps it), the texts, the other graphs last. A section's
# text travels as it is, the rest as JSON.
LATER = ("fusion_map", "kernels", "jaxpr.text", "stablehlo.text", "compiled.text", "mlir")
GRAPHS = ("compiled", "stablehlo", "jaxpr")
BEFORE_GRAPH = ("fusion_map", "kernels")  # sent before the first graph, the texts after it
# What the worker's pipeline leaves to be made after the head is sent (XLA's analyses
# of the executable: `viz.pipeline`): the Overview's last row reads them
DEFERRED = ("cost", "memory")
IR_SECTIONS = ("jaxpr", "stablehlo", "compiled")  # each with a text (`LATER`)


@dataclass
class Reply(Plain):
    """What every answer carries: whether it worked and, if not, why."""

    ok: bool = True
    error: ErrorInfo | None = None
    stdout: str = ""  # what the user's code printed while the worker ran it (sent if any)

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        if not data["stdout"]:
            del data["stdout"]
        return data

    @classmethod
    def failure(cls, error: ErrorInfo, request: Request | None = None) -> Reply:
        """The answer of a request that failed with `error` (`request`: the request
        it answers, where the reply names what was asked: see Analyzed)."""
        return cls(ok=False, error=error)

    @classmethod
    def decode(cls, data: dict[str, Any] | None, request: Request) -> Reply:
        """The answer to `request` from its JSON, complete (see Analyzed)."""
        return cls.from_dict(data)

    def wire(self) -> tuple[dict[str, Any], Iterator[Part]]:
        """What the worker sends: the head, and the parts that follow it, each made
        when its turn comes (`viz.worker.parts`; a reply of this kind has none)."""
        return self.to_dict(), iter(())

    def arriving(self, parts: Parts) -> Reply:
        """This reply, its head decoded, with the parts its head named to come."""
        return self


@dataclass
class PingReply(Reply):
    jax_version: str = ""
    platform: str = ""
    devices: list[str] = field(default_factory=list)
    device_count: int = 0


@dataclass
class Analyzed(Reply):
    """An analysis: the report, and beside it what the user's code printed. Its JSON
    is the report's (graph models included) plus `stdout`. On the wire the report
    comes first, its graph models after it, one part each (`wire`): the page draws
    the report while they come."""

    report: Report = field(default_factory=Report)

    def to_dict(self) -> dict[str, Any]:
        data = self.report.to_dict(include_models=True)
        return {**data, "stdout": self.stdout} if self.stdout else data

    def wire(self) -> tuple[dict[str, Any], Iterator[Part]]:
        """The report without what its first screen does not draw (`LATER`) and what
        the worker has not made yet (`DEFERRED`, and the IRs' texts where the pipeline
        left them to be made), which follow it, each part made when its turn to be sent
        comes: the deferred ones first."""
        report = self.report
        deferred = [name for name in DEFERRED if pending(report, name)]
        texts = _texts_to_make(report)
        untexted = {name: replace(getattr(report, name), text="") for name in texts}
        head = replace(report, **dict.fromkeys(deferred), **untexted).to_dict()
        later: list[tuple[str, Any]] = []
        for name in LATER:
            section, _, key = name.rpartition(".")
            holder = head[section] if section else head
            if section in texts and key == "text":
                del holder[key]
                later.append((name, texts[section]))
            elif holder and holder.get(key):
                later.append((name, holder.pop(key)))
        models = report.graph_models
        graphs = sorted(models, key=lambda ir: GRAPHS.index(ir) if ir in GRAPHS else len(GRAPHS))
        graph_parts = [
            (f"graph_models.{ir}", Later(functools.partial(models.json, ir))) for ir in graphs
        ]
        # the Overview's graph (the compiled program's) once what its counts read is sent,
        # before the texts: the first screen folds it (a 96-layer model's texts are 10 MB)
        at = next((i for i, (name, _) in enumerate(later) if name not in BEFORE_GRAPH), len(later))
        later[at:at] = graph_parts[:1]
        later += graph_parts[1:]
        head[PARTS] = deferred + [name for name, _ in later]
        if self.stdout:
            head["stdout"] = self.stdout
        return head, _parts(report, deferred, later)

    def arriving(self, parts: Parts) -> Analyzed:
        """This reply with the parts its head named still to come: each field waits for
        its part where it is read (`viz.plain.Later`), and is decoded there."""
        report, changes, graphs = self.report, {}, []
        hints = typing.get_type_hints(Report)
        for name in parts.names:
            field_name, _, key = name.partition(".")
            text = functools.partial(parts.take, name)
            if field_name == "graph_models":
                graphs.append(key)
            elif key == "text" and getattr(report, field_name) is not None:
                later = Later.arrived(text, str, "")
                changes[field_name] = replace(getattr(report, field_name), text=later)
            elif field_name == "mlir":
                changes[field_name] = Later.arrived(text, str, None)
            elif field_name in hints:
                hint = hints[field_name]
                missing = [] if typing.get_origin(hint) is list else None
                changes[field_name] = Later.arrived(text, functools.partial(_json, hint), missing)
        graph_text = functools.partial(_graph_text, parts)
        graphs.sort(key=lambda ir: GRAPHS[::-1].index(ir) if ir in GRAPHS else len(GRAPHS))
        changes["graph_models"] = Graphs(names=graphs, text=graph_text)
        return replace(self, report=replace(report, **changes))

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Analyzed:
        data = dict(data or {})
        stdout = data.pop("stdout", "") or ""
        return cls.of(Report.from_dict(data), stdout)

    @classmethod
    def of(cls, report: Report, stdout: str = "") -> Analyzed:
        """The reply carrying `report`: its `ok` and `error` are the report's."""
        return cls(ok=report.ok, error=report.error, stdout=stdout, report=report)

    @classmethod
    def failure(cls, error: ErrorInfo, request: Request | None = None) -> Analyzed:
        """A failure the worker itself saw (a timeout, a crash): its report still names
        what `request` asked, as the history and the result list show it."""
        asked = Subject.asked(request.settings) if isinstance(request, Analyze) else Subject()
        return cls.of(Report.failed(asked, error))

    @classmethod
    def decode(cls, data: dict[str, Any] | None, request: Request) -> Analyzed:
        """The answer to `request` from its JSON. A bare report (a failure the worker
        itself saw: its `ok` and `error` alone) is named after what the request asked."""
        reply = cls.from_dict(data)
        if reply.report.function or not isinstance(request, Analyze):
            return reply
        asked = Subject.asked(request.settings)
        return cls.of(replace(reply.report, subject=asked), reply.stdout)


def _texts_to_make(report: Report) -> dict[str, Later]:
    """The IR sections whose text the worker has not made yet (`defer_texts` in
    `viz.pipeline.analyze_target`), each with its text to come."""
    texts = {}
    for name in IR_SECTIONS:
        section = getattr(report, name)
        if section is not None and pending(section, "text"):
            texts[name] = object.__getattribute__(section, "text")
    return texts


def _parts(report: Report, deferred: list[str], later: list[tuple[str, Any]]) -> Iterator[Part]:
    """The parts that follow a report's head, each made when its turn comes: the
    deferred sections (made now, from the executable), texts as they are (a text or a
    graph's JSON not made yet, now), the rest as JSON."""
    for name in deferred:
        yield name, json.dumps(encode(getattr(report, name)), separators=(",", ":"))
    for name, value in later:
        made = value.value() if isinstance(value, Later) else value
        yield name, made if isinstance(made, str) else json.dumps(made, separators=(",", ":"))


def _json(hint: Any, text: str) -> Any:
    return decode(hint, json.loads(text))


def _graph_text(parts: Parts, ir: str) -> str | None:
    return parts.take(f"graph_models.{ir}")


@dataclass
class CompileProfiled(Reply):
    """Where one compile's time went (`viz.compile_profile.model`)."""

    profile: CompileProfileSection | None = None


@dataclass
class PassStep(Plain):
    step: int
    pipeline: str
    pass_: str
    op_count: int
    fusion_count: int

    # `pass` is a Python keyword: the JSON key is `pass`, the field `pass_`
    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        data["pass"] = data.pop("pass_")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> PassStep | None:
        if data is None:
            return None
        data = dict(data)
        data.setdefault("pass_", data.pop("pass", ""))
        return super().from_dict(data)


@dataclass
class PassesReply(Reply):
    steps: list[PassStep] = field(default_factory=list)


@dataclass
class CacheReply(Reply):
    """The cache lab's state after a request: its rows, every event so far, and for
    calls the new events (`event`: the one call of `cache_call`)."""

    table: list[EntryRow] = field(default_factory=list)
    events: list[CacheEvent] = field(default_factory=list)
    cache_size: int = 0
    buckets: list[BucketRow] = field(default_factory=list)
    new: list[CacheEvent] = field(default_factory=list)
    event: CacheEvent | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> CacheReply:
        data = dict(data or {})
        events = {k: data.pop(k, None) or [] for k in ("events", "new")}
        event = data.pop("event", None)
        reply = super().from_dict(data)
        reply.events = [event_from_dict(e) for e in events["events"]]
        reply.new = [event_from_dict(e) for e in events["new"]]
        reply.event = event_from_dict(event) if event else None
        return reply


@dataclass
class PlacementReply(Reply):
    rows: list[PlacementRow] = field(default_factory=list)
    outer: str = ""
    inner: str = ""
    recommendation: str = ""


@dataclass
class ScalingReply(Reply):
    rows: list[ScalingRow] = field(default_factory=list)
    exponents: dict[str, float | None] = field(default_factory=dict)  # by variant


@dataclass
class ShapeSweepReply(Reply):
    rows: list[ShapeRow] = field(default_factory=list)


@dataclass
class BucketCostsReply(Reply):
    rows: list[BucketCostRow] = field(default_factory=list)
