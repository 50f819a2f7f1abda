"""The worker protocol, typed: one request dataclass (`viz.worker.requests`) and one
reply dataclass (`viz.worker.replies`) per operation, paired by the request class. On the wire a
request is `{op, kwargs}` (its fields) and a reply is its JSON (`frames` carries
both); `Worker.ask(request)` sends one and decodes the answer once, into
`request.REPLY`, so the app, the CLI and demo mode read fields, not keys.

Every reply may be a failure (`ok` False, `error` an ErrorInfo): the worker's own
(timeout, crash, memory) come back in the same shape as the handler's. Nothing here
imports jax.
"""

from __future__ import annotations

import typing
from typing import Any

from viz.errors import ErrorInfo, ErrorKind
from viz.lessons.rows import BucketCostRow, PlacementRow, ScalingRow, ShapeRow  # in replies
from viz.progress import Progress  # a long request's frames
from viz.worker import replies
from viz.worker.replies import (
    Analyzed,
    BucketCostsReply,
    CacheReply,
    CompileProfiled,
    PassesReply,
    PassStep,
    PingReply,
    PlacementReply,
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
    ReplyT,
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
    "ReplyT",
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

REQUESTS: tuple[type[Request], ...] = (
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


def reply_type(request: type[Request]) -> type[Reply]:
    """The reply type a request class names as its parameter (by name,
    `Request["viz.worker.replies.PingReply"]`: the replies import the requests), looked
    up among the replies: the pair is written once, on the request class."""
    for cls in request.__mro__:
        for base in getattr(cls, "__orig_bases__", ()):
            origin = typing.get_origin(base)
            if not (isinstance(origin, type) and issubclass(origin, Request)):
                continue  # Plain's Mapping[str, Any], Generic[ReplyT]
            (named,) = typing.get_args(base)
            if isinstance(named, typing.ForwardRef):
                named = named.__forward_arg__
            if isinstance(named, str):  # "viz.worker.replies.PingReply"
                return getattr(replies, named.rpartition(".")[2])
            if isinstance(named, type):
                return named
    raise TypeError(f"{request.__name__} names no reply type")


for _request in REQUESTS:
    _request.REPLY = reply_type(_request)

BY_OP: dict[str, type[Request]] = {r.OP: r for r in REQUESTS}


def decode_request(op: str, kwargs: dict[str, Any]) -> Request:
    """The typed request of a wire message; BadRequest for anything else."""
    kind = BY_OP.get(op)
    if kind is None:
        raise BadRequest(f"unknown op {op!r}")
    return kind.from_wire(kwargs)


def decode_reply(request: Request, payload: dict[str, Any]) -> Reply:
    """The reply to `request` from its JSON (failures included)."""
    try:
        return request.REPLY.decode(payload, request)
    except (TypeError, KeyError, ValueError) as exc:
        return request.REPLY.failure(
            ErrorInfo(
                ErrorKind.INTERNAL_ERROR,
                f"The worker's answer to `{request.OP}` did not decode: {exc}",
                "this is a jitscope bug; please report it",
                stage="worker",
            ),
            request,
        )
