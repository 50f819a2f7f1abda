"""Which process of a multi-process job (`jax.distributed`) this program is, if any.

Once the program has called `jax.distributed.initialize` (however: with arguments, or
found by SLURM, MPI or Kubernetes detection), JAX's distributed state holds the
process's index, the process count, the coordinator's address and a client of the
coordination service. `ProcessWatch` only reads that state, from a thread of its own:
it never initializes anything and never changes how a process connects. It speaks to
the coordination service only once JAX has started its backends on top of it, which
happens after `initialize` has returned: a client still connecting (or one that failed
to) must not be called, the coordination agent would end the process.

The job id: process 0 draws one (its start time and a random part) and publishes it in
the coordination service's key-value store as soon as it has joined, before the program
can compile or run anything across processes; every other process reads it there, in
the watch's thread, so the program itself never waits for it. A process that has not
received it by the time it ends waits up to JOB_WAIT_S more (process 0 not recorded, say).

A program that never joins a job: the watch stops once JAX has started its backends
without `jax.distributed` (it can no longer be initialized then), or at the end.
"""

from __future__ import annotations

import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from viz.jax_private import backends_started, distributed_state
from viz.recorder.model import Process

JOB_KEY = "jitscope/record/job"  # in the coordination service's key-value store
POLL_S = 0.1  # how often the watch looks for jax.distributed
GET_TIMEOUT_MS = 250  # one blocking read of the job id (the watch stays stoppable)
JOB_WAIT_S = 5.0  # how long an ending process still waits for its job id


def new_job_id(now: float | None = None) -> str:
    """'20250614-101502-3fa9c1': when process 0 joined, and a random part."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
    return f"{stamp}-{secrets.token_hex(3)}"


def joined() -> tuple[Process, Any] | None:
    """This process's place in its job (job id not yet known) and the coordination
    service's client; None until `jax.distributed` is initialized and in use."""
    state = distributed_state()
    client = getattr(state, "client", None)
    if client is None or not backends_started():
        return None
    process = Process(
        index=int(state.process_id),
        count=int(state.num_processes),
        job=None,
        host=socket.gethostname(),
        coordinator=str(state.coordinator_address or "") or None,
    )
    return process, client


class ProcessWatch:
    """Calls `found(process)` when the program has joined a job, and again with the
    job id once it is known (at once, in process 0). Never raises into the program."""

    def __init__(self, found: Callable[[Process], None]):
        self._found = found
        self._stop = threading.Event()
        self._waiting = threading.Event()  # joined, the job id not yet read
        self._thread = threading.Thread(target=self._watch, name="jitscope-job", daemon=True)

    def start(self) -> ProcessWatch:
        self._thread.start()
        return self

    @property
    def watching(self) -> bool:
        """Whether its thread still looks for a job or waits for the job id."""
        return self._thread.is_alive()

    def stop(self) -> None:
        """At the end of the recording: a last look, then a short wait for the job id."""
        if not self._thread.is_alive():
            return
        if self._waiting.is_set():
            self._thread.join(JOB_WAIT_S)
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        try:
            while not self._stop.is_set():
                found = joined()
                if found is not None:
                    self._publish(*found)
                    return
                if backends_started() and getattr(distributed_state(), "client", None) is None:
                    return  # JAX started without jax.distributed: too late to join a job now
                self._stop.wait(POLL_S)
            if (found := joined()) is not None:  # joined just before the end
                self._publish(*found)
        except Exception:  # a recorder never raises into the program: no job then
            return

    def _publish(self, process: Process, client: Any) -> None:
        if process.index == 0:
            job = new_job_id()
            try:
                client.key_value_set(JOB_KEY, job)
            except Exception:  # already published (an earlier recording in this process)
                job = client.key_value_try_get(JOB_KEY)
            self._found(replace(process, job=job))
            return
        self._found(process)  # which process, even if it dies before the id arrives
        self._waiting.set()
        job = self._read_job(client)
        if job:
            self._found(replace(process, job=job))

    def _read_job(self, client: Any) -> str | None:
        while not self._stop.is_set():
            try:
                return client.blocking_key_value_get(JOB_KEY, GET_TIMEOUT_MS)
            except Exception as exc:
                if "DEADLINE_EXCEEDED" not in str(exc):  # the job is gone: no id
                    return None
        return None
