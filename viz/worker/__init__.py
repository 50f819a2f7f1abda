"""The worker: user code runs here, in a child process, never in the caller.

A `Worker` is a client for one `python -m viz.worker` child whose environment is set
before JAX starts (`cpu:8` sets XLA_FLAGS to simulate 8 devices). A `WorkerPool`
holds, per device, `JITSCOPE_WORKERS` such workers (plus one lessons worker each)
and pins every browser session to one of them, so its cache lab sees one real jit
cache and nobody else's restart. A device one process owns (a TPU chip,
`viz.platforms`) gets one worker that every session and role takes turns on.

Frames are length-prefixed JSON in both directions. The server never unpickles
what a child sends: a process that runs user code could craft a pickle that runs
code in the server, while JSON only ever decodes to plain data.

The parent enforces the limits; each failure ends only the request in flight:
- time: a request that outlives its timeout kills the child (`timeout`), once it
  said where in the user's code it was stuck (`stuck`: its stacks, on SIGUSR1);
- memory: all workers of a pool share one budget (`JITSCOPE_MEMORY_LIMIT_GB`); a
  child whose request pushes the total over it is killed (`memory`);
- crashes: a child that dies mid-request (segfault, `os._exit`, closing the
  worker's own pipes) is reported as `worker_crash` for that request.
Killing a child kills its whole process group, so subprocesses the user's code left
behind go with it. A child that died between requests is replaced and the request
is sent again: it never started, so it cannot be blamed. This module does not
import jax.

The package: `client` (a `Worker`: one child, its limits, its queue), `pool` (per-device
pools, sessions pinned), `limits` (the shared memory budget), `protocol` (the typed
requests and replies of `requests` and `replies`, paired and decoded), `frames` (JSON
frames), `processes` (memory, killing a child's whole family), `stuck` (where a request
that ran out of time was), `child` (the loop in the child) and `handlers` (the requests
it answers; they import jax). Importing the package does not import jax.
"""

from viz.worker.client import DEFAULT_TIMEOUT_S, LESSON_TIMEOUT_S, Worker, WorkerStatus, worker_env
from viz.worker.limits import MemoryBudget, default_memory_limit
from viz.worker.pool import WorkerPool, default_pool_size

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "LESSON_TIMEOUT_S",
    "MemoryBudget",
    "Worker",
    "WorkerPool",
    "WorkerStatus",
    "default_memory_limit",
    "default_pool_size",
    "worker_env",
]
