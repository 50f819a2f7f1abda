"""A data-parallel training job, one process per host, on CPU: each process holds its
own shard of every batch, and the gradient is averaged over all of them (gloo
collectives between the processes).

Two processes on one machine, two CPU devices each, under the recorder:

    for i in 0 1; do
      jitscope record -- tests/programs/data_parallel.py \\
        --coordinator localhost:7531 --processes 2 --process $i &
    done; wait
    jitscope job

Under SLURM, leave out the three flags: `jax.distributed.initialize()` finds them.
Flags that make one process diverge, as real jobs do by mistake:
  --extra-on P       process P also compiles a statistics function of its own
  --batch-on P=ROWS  process P loads ROWS local rows instead of --batch
  --die-on P         process P is killed by SIGKILL after its first step
"""

import argparse
import os
import signal

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def loss(w, x, y):
    return jnp.mean((x @ w - y) ** 2)


@jax.jit
def train_step(w, x, y):
    return w - 0.1 * jax.grad(loss)(w, x, y)


@jax.jit
def evaluate(w, x, y):
    return loss(w, x, y)


@jax.jit
def batch_stats(x):
    return x.mean(0), x.std(0)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coordinator", help="host:port of process 0 (default: detected)")
    parser.add_argument("--processes", type=int, help="how many processes the job has")
    parser.add_argument("--process", type=int, help="this process's index")
    parser.add_argument("--devices", type=int, default=2, help="CPU devices per process")
    parser.add_argument("--batch", type=int, default=8, help="local rows per step")
    parser.add_argument("--features", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--extra-on", type=int, action="append", default=[], metavar="P")
    parser.add_argument("--batch-on", action="append", default=[], metavar="P=ROWS")
    parser.add_argument("--die-on", type=int, action="append", default=[], metavar="P")
    parser.add_argument("--timeout", type=int, default=60, help="heartbeat and shutdown (s)")
    return parser.parse_args()


def main() -> None:
    args = parse()
    jax.config.update("jax_num_cpu_devices", args.devices)
    jax.distributed.initialize(
        args.coordinator,
        args.processes,
        args.process,
        heartbeat_timeout_seconds=args.timeout,
        shutdown_timeout_seconds=args.timeout,
    )
    me = jax.process_index()
    rows = dict(map(int, item.split("=")) for item in args.batch_on).get(me, args.batch)
    mesh = Mesh(np.array(jax.devices()), ("data",))
    shard = NamedSharding(mesh, P("data"))
    replicated = NamedSharding(mesh, P())
    rng = np.random.default_rng(me)
    w = jax.make_array_from_process_local_data(replicated, np.zeros((args.features, 1), np.float32))
    for step in range(args.steps):
        local_x = rng.normal(size=(rows, args.features)).astype(np.float32)
        local_y = local_x.sum(1, keepdims=True)
        x = jax.make_array_from_process_local_data(shard, local_x)
        y = jax.make_array_from_process_local_data(shard, local_y)
        w = train_step(w, x, y)
        if me in args.extra_on:  # a branch taken on one host only
            batch_stats(local_x)
        if me in args.die_on and step == 0:
            os.kill(os.getpid(), signal.SIGKILL)
    print(f"process {me}: loss {float(evaluate(w, x, y)):.4f}", flush=True)


if __name__ == "__main__":
    main()
