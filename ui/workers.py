"""This session's workers: the server's pool (built once), the session's owner id and
device, and requests that go to the worker the session is pinned to."""

from __future__ import annotations

import importlib
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import streamlit as st

from ui.navigation import navigation_from_the_start
from ui.program import program
from viz import demo, platforms
from viz.units import plural
from viz.worker import LESSON_TIMEOUT_S, Worker, WorkerPool
from viz.worker.protocol import Progress, ReplyT, Request


@st.cache_resource
def pool() -> WorkerPool:
    """The server's worker pool (JITSCOPE_WORKERS per device), built once and shared
    by every session; each session is pinned to one of its workers."""
    workers = WorkerPool()
    workers.warm("cpu")  # the first Analyze should not wait for JAX to import
    platforms.start_probe()  # which accelerators JAX sees, asked in a child meanwhile
    return workers


def start_workers() -> None:
    """Build the pool as the server imports app.py, the earliest moment this project's
    code runs: its first worker imports JAX and warms while Streamlit finishes starting
    and the first visitor's browser loads."""
    context = logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context")
    level = context.level
    context.setLevel(logging.ERROR)  # st.cache_resource outside a session: expected here
    try:
        pool()
    finally:
        context.setLevel(level)


@asynccontextmanager
async def start_with_server(_app: Any) -> AsyncIterator[None]:
    """The server's start-up (app.py's `st.App` lifespan): leave Streamlit's legacy
    pages/ mode before the first session enters it, and import the first screen's
    modules in the background."""
    navigation_from_the_start()
    threading.Thread(target=_import_first_screen, daemon=True).start()
    yield


# What the Explore page imports beyond `ui` (pandas and pyarrow among them): ~0.5 s
# that the first visitor's first run need not spend, imported while their browser loads.
FIRST_SCREEN = ("ui.editor", "ui.fusion", "ui.results", "ui.variants", "viz.graph", "viz.history")


def _import_first_screen() -> None:
    for name in FIRST_SCREEN:
        importlib.import_module(name)


def owner() -> str:
    """This browser session's id: the worker keeps a cache session per owner."""
    if "owner" not in st.session_state:
        st.session_state.owner = uuid.uuid4().hex
    return st.session_state.owner


def device() -> str:
    return st.session_state.get("device", "cpu")


def worker(role: str = "main") -> Worker:
    """This session's worker for the current device (sessions are pinned to one)."""
    return pool().worker_for(owner(), device(), role)


def ask(
    request: Request[ReplyT],
    role: str = "main",
    on_progress: Callable[[Progress], None] | None = None,
    on_tick: Callable[[], None] | None = None,
) -> ReplyT:
    """Send a request to this session's worker and return its typed reply (errors come
    back as replies too). While it waits behind other sessions' requests, the page
    says its place in the queue; `on_tick()` is called every quarter second while it
    waits. In demo mode the request names the program's sample: the worker reads the
    code from there."""
    if demo.enabled() and request.sample_name() is None:
        request = request.naming(program().settings.sample)
    st.session_state.pop("worker_notice", None)
    target = worker(role)
    waiting = st.empty()
    what = waited_for(device())

    def queued(ahead: int) -> None:
        if ahead:
            waiting.info(
                f"Waiting for {what}: {plural(ahead, 'request')} ahead of yours…",
                icon=":material/hourglass_top:",
            )
        else:
            waiting.empty()

    reply = target.ask(
        request,
        timeout_s=LESSON_TIMEOUT_S if role == "lessons" else None,  # a shared worker's too
        on_progress=on_progress,
        on_queue=queued,
        client=owner(),
        on_tick=on_tick,
    )
    waiting.empty()
    seen()[f"{device()}#{role}"] = target.generation  # its own failures show as errors
    return reply


def waited_for(device: str) -> str:
    """What a queued request waits for: the worker, or a device one process owns
    (`the TPU`: every page's requests take turns in its one worker)."""
    if WorkerPool.shared(device):
        return f"the {platforms.DeviceConfig.parse(device).platform.upper()}"
    return "the worker"


def seen() -> dict[str, int]:
    """The generation of each of this session's workers when it last used it."""
    return st.session_state.setdefault("worker_seen", {})


def lesson_worker() -> Worker:
    return worker("lessons")


def run_lesson(request: Request[ReplyT], label: str) -> ReplyT:
    """Run a lesson measurement in the lessons worker, showing progress; Cancel (rendered
    by `lesson_controls`) kills that worker. Returns the typed reply."""
    bar = st.progress(0.0, f"{label}…")

    def show(p: Progress) -> None:
        bar.progress(p.share, f"{p.label} ({p.done}/{p.total})")

    reply = ask(request, role="lessons", on_progress=show)
    bar.empty()
    return reply
