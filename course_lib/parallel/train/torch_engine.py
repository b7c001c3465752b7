"""The same data-parallel step with a real engine: ``torch.distributed`` (gloo backend).

The toy trainer (:mod:`course_lib.parallel.train.data`) shows the mechanism on one machine.
With ``backend="gloo"`` it runs the **identical** training step - the running
example's numpy forward/backward on each worker's shard, then an all-reduce of the same
flat gradient buffer - but the all-reduce is ``torch.distributed.all_reduce`` on a gloo
process group (:class:`course_lib.parallel.allreduce.GlooAllReduce`). This module is the
other way to run it, the way real jobs run, also across machines:
``torchrun`` starts one process per worker on every node and sets ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``; each process joins the group with
``init_method="env://"``. For example, on two machines with two workers each::

    # on node 0 (address 10.0.0.1) and on node 1, the same command:
    torchrun --nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d \\
             --rdzv-endpoint=10.0.0.1:29400 --rdzv-id=ddl-course \\
             -m course_lib.parallel.train.torch_engine --steps 50 --batch-size 512

and on one machine: ``torchrun --standalone --nproc-per-node=2 -m course_lib.parallel.train.torch_engine``.

torch is optional (extra ``engines``) and imported only inside the workers, so that
this module imports (and tells what is missing) without it.

Results match the toy within 1e-6: gloo adds the gradients in its own order. For two
workers the order cannot matter: float addition is commutative (``a + b == b + a``
bit for bit, though rounded), so the parameters are even bitwise equal.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys

import numpy as np

from ...i18n import tr
from ...models import MLP
from ..allreduce import GlooAllReduce
from ..engine.gloo import TORCH_MISSING, gloo_group, torch_available
from ..engine.job import check_job
from ..engine.workers import WorkerContext
from .data import run_worker

__all__ = ["main"]


# --------------------------------------------------------------------- torchrun
def main(argv: list[str] | None = None) -> int:
    """Entry point for ``torchrun -m course_lib.parallel.train.torch_engine`` (one process per worker).

    Every process builds the same synthetic data set (seeded, so identical on every
    node), joins the process group from the environment torchrun sets
    (``init_method="env://"``), trains its shard of each global batch, and rank 0
    prints the throughput and a checksum of the final parameters.
    """
    parser = argparse.ArgumentParser(prog="torchrun ... -m course_lib.parallel.train.torch_engine", description=main.__doc__)
    parser.add_argument("--sizes", default="784,1024,10", help="MLP layer widths")
    parser.add_argument("--samples", type=int, default=8192)
    parser.add_argument("--batch-size", type=int, default=512, help="GLOBAL batch")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        parser.error(f"run me with torchrun (environment variables {missing} are not set)")
    if not torch_available():
        print(TORCH_MISSING, file=sys.stderr)
        return 2
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    model = MLP(tuple(int(s) for s in args.sizes.split(",")))
    rng = np.random.default_rng(args.seed)
    x = rng.random((args.samples, model.sizes[0]), dtype=np.float32)
    y = rng.integers(0, model.sizes[-1], args.samples)
    x, y, p0, job = check_job(model, x, y, workers=world, batch_size=args.batch_size, steps=args.steps, lr=args.lr,
                              seed=args.seed, backend="gloo")
    with gloo_group(rank, world, "env://", args.timeout):
        wctx = WorkerContext(rank, world, args.timeout)
        comm = GlooAllReduce(model.n_params, model.dtype)
        report = run_worker(wctx, job, x, y, p0, comm)
    if rank == 0:
        step = float(np.median(report["timings"][1:, 3]))
        print(tr("{workers} workers, global batch {batch}: {steps} steps/s, {samples} samples/s; params sha256 "
                 "{digest}", workers=world, batch=job.batch_size, steps=f"{1 / step:.2f}",
                 samples=f"{job.batch_size / step:.0f}", digest=report["digest"][:16]))
    return 0


if __name__ == "__main__":
    # torchrun runs this module as __main__ in every worker process.
    multiprocessing.freeze_support()
    raise SystemExit(main())
