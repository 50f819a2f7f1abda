"""The worker protocol, typed: one request dataclass (`viz.worker.requests`) and one
reply dataclass (`viz.worker.replies`) per operation, paired here. On the wire a
request is `{op, kwargs}` (its fields) and a reply is its JSON (`frames` carries
both); `Worker.ask(request)` sends one and decodes the answer once, into
`request.REPLY`, so the app, the CLI and demo mode read fields, not keys.

Every reply may be a failure (`ok` False, `error` an ErrorInfo): the worker's own
(timeout, crash, memory) come back in the same shape as the handler's. Nothing here
imports jax.
"""

from __future__ import annotations

from typing import Any

from viz.errors import ErrorInfo, ErrorKind
from viz.lessons.rows import BucketCostRow, PlacementRow, ScalingRow, ShapeRow  # in replies
from viz.worker.replies import (
    Analyzed,
    BucketCostsReply,
    CacheReply,
    CompileProfiled,
    PassesReply,
    PassStep,
    PingReply,
    PlacementReply,
    Progress,
    Reply,
    ScalingReply,
    ShapeSweepReply,
)
from viz.worker.requests import (
    Analyze,
    BadRequest,
    BucketCosts,
    CacheCall,
    CacheCalls,
    CachePrecompile,
    CacheRequest,
    CacheState,
    CallOptions,
    CodeRequest,
    CompileProfile,
    Passes,
    Ping,
    Placement,
    Request,
    Scaling,
    ShapeSweep,
)

__all__ = [
    "Analyze",
    "Analyzed",
    "BadRequest",
    "BucketCostRow",
    "BucketCosts",
    "BucketCostsReply",
    "CacheCall",
    "CacheCalls",
    "CachePrecompile",
    "CacheReply",
    "CacheRequest",
    "CacheState",
    "CallOptions",
    "CodeRequest",
    "CompileProfile",
    "CompileProfiled",
    "PassStep",
    "Passes",
    "PassesReply",
    "Ping",
    "PingReply",
    "Placement",
    "PlacementReply",
    "PlacementRow",
    "Progress",
    "Reply",
    "Request",
    "Scaling",
    "ScalingReply",
    "ScalingRow",
    "ShapeRow",
    "ShapeSweep",
    "ShapeSweepReply",
    "decode_reply",
    "decode_request",
]

for _request, _reply in (
    (Ping, PingReply),
    (Analyze, Analyzed),
    (Passes, PassesReply),
    (CompileProfile, CompileProfiled),
    (CacheCalls, CacheReply),
    (CacheCall, CacheReply),
    (CacheState, CacheReply),
    (CachePrecompile, CacheReply),
    (Placement, PlacementReply),
    (Scaling, ScalingReply),
    (ShapeSweep, ShapeSweepReply),
    (BucketCosts, BucketCostsReply),
):
    _request.REPLY = _reply

REQUESTS: dict[str, type[Request]] = {
    r.OP: r
    for r in (
        Ping,
        Analyze,
        Passes,
        CompileProfile,
        CacheCalls,
        CacheCall,
        CacheState,
        CachePrecompile,
        Placement,
        Scaling,
        ShapeSweep,
        BucketCosts,
    )
}


def decode_request(op: str, kwargs: dict[str, Any]) -> Request:
    """The typed request of a wire message; BadRequest for anything else."""
    kind = REQUESTS.get(op)
    if kind is None:
        raise BadRequest(f"unknown op {op!r}")
    return kind.from_wire(kwargs)


def decode_reply(request: Request, payload: dict[str, Any]) -> Reply:
    """The reply to `request` from its JSON (failures included)."""
    try:
        return request.REPLY.from_dict(payload).answering(request)
    except (TypeError, KeyError, ValueError) as exc:
        return request.REPLY.failure(
            ErrorInfo(
                ErrorKind.INTERNAL_ERROR,
                f"The worker's answer to `{request.OP}` did not decode: {exc}",
                "this is a jitscope bug; please report it",
                stage="worker",
            )
        ).answering(request)
