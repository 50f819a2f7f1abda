"""The sidebar: device picker, worker status, restart notices and safety notes."""

from __future__ import annotations

import re
from typing import NoReturn

import streamlit as st

from ui.workers import device, owner, pool, seen, worker
from viz import demo
from viz.platforms import available_with
from viz.units import count, nbytes, plural
from viz.worker.client import WorkerStatus


def device_picker() -> None:
    shared = st.query_params.get("device")
    fresh = "device" not in st.session_state  # a shared link's device applies once
    devices = available_with(shared if fresh else None)  # an accelerator's name: JAX's answer
    if fresh and shared in devices:
        st.session_state.device = st.query_params["device"]  # a shared link's device
    with st.sidebar:
        st.selectbox(
            "Device",
            devices,
            key="device",
            help="cpu:8 simulates 8 devices (XLA_FLAGS in the worker) for sharding; "
            "gpu and tpu appear when JAX sees one on this machine",
        )


def worker_status() -> None:
    """Drawn after the page ran, so it shows the worker as the page left it."""
    with st.sidebar:
        status = worker().status()
        memory = f"{status.rss_bytes / 2**20:.0f} MiB" if status.rss_bytes else "not started"
        state = "alive" if status.alive else "idle"
        which = (
            f"The {device()} worker (one process owns the device; every session takes turns)"
            if pool().shared(device())
            else f"Worker {pool().slot(owner()) + 1} of {pool().size}"
        )
        st.caption(f"{which} · {state} · {memory} · {counts_text(status)}")
        if st.button(
            "Restart worker",
            help="kill your worker process; its jit caches go too (sessions sharing it are told)",
        ):
            worker().restart(reason="a session sharing it pressed Restart worker")
            seen()[f"{device()}#main"] = worker().generation
            st.rerun()


def end_page() -> NoReturn:
    """`st.stop()` for a page that ends early (an empty state, a spec to mend): the
    worker's status first, which app.py draws after the page, where a stopped page
    never gets (the Cache lab's first visit, the lessons' guidance: no status, no
    Restart worker)."""
    worker_status()
    st.stop()


def counts_text(status: WorkerStatus) -> str:
    """The pool's budget and the worker's counts, each noun agreeing with its number:
    "pool budget 12 GiB · 1 request · 0 restarts · 2 waiting"."""
    said = [
        f"pool budget {nbytes(status.memory_limit_bytes)}",  # as the Memory tab says it
        plural(status.requests, "request"),
        plural(status.restarts, "restart"),
    ]
    if status.queued:
        said.append(f"{count(status.queued)} waiting")
    return " · ".join(said)


def restarted_elsewhere() -> None:
    """Tell this session when one of its workers was replaced by someone else's
    request (a restart, timeout or crash): its jit caches and cache-lab state are gone.
    Runs before the page, so the page never shows a table from the old worker."""
    for role in ("main",) if pool().shared(device()) else ("main", "lessons"):
        key, target = f"{device()}#{role}", worker(role)
        if key in seen() and seen()[key] != target.generation:
            seen()[key] = target.generation
            st.session_state.worker_notice = (
                f"Your {'lessons ' if role == 'lessons' else ''}worker was replaced "
                f"({target.reason}): its jit caches and your cache-lab table are gone."
            )
            for name in [k for k in st.session_state if re.fullmatch(r"cache_-?\d+", k)]:
                del st.session_state[name]  # the cache lab's tables of that worker
    if st.session_state.get("worker_notice"):
        st.sidebar.warning(st.session_state.worker_notice, icon=":material/restart_alt:")


def safety_notes() -> None:
    """The demo-mode note, or a plain warning when anyone on the network can run code;
    in the sidebar, so that the first screen's result keeps its room at 1280×800."""
    if demo.enabled():
        st.sidebar.info(
            "**Demo mode** · only the built-in samples run, loaded from their files; "
            "arguments take the spec language and the sample's own names; sizes are bounded.",
            icon=":material/co_present:",
        )
        return
    address = st.get_option("server.address")
    if demo.exposed(address):
        where = f"address {address}" if address else "every network interface"
        st.sidebar.error(
            f"**This server listens on {where}, port {st.get_option('server.port')}.** "
            "Anyone who can reach this port can run code on this machine. Serve on "
            "127.0.0.1 (the default in .streamlit/config.toml), or set JITSCOPE_DEMO=1.",
            icon=":material/warning:",
        )
