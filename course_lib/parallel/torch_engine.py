"""The same data-parallel step with a real engine: ``torch.distributed`` (gloo backend).

The toy trainer (:mod:`course_lib.parallel.data`) shows the mechanism on one machine.
This module runs the **identical** training step - the running example's numpy
forward/backward on each worker's shard, then an all-reduce of the same flat
gradient buffer - but the all-reduce is ``torch.distributed.all_reduce`` on a gloo
process group rendezvousing over TCP on 127.0.0.1, one process per worker. The
buffer is shared with torch without a copy (``torch.from_numpy``).

Two ways to run it:

:func:`train_torch`
    From Python (a notebook, a test): starts the workers itself, same arguments and
    result as :func:`course_lib.parallel.data.train_data_parallel`.
``torchrun ... -m course_lib.parallel.torch_engine``
    The way real jobs run, also across machines: ``torchrun`` starts one process per
    worker on every node and sets ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and
    ``MASTER_PORT``; each process joins the group with ``init_method="env://"``.
    For example, on two machines with two workers each::

        # on node 0 (address 10.0.0.1) and on node 1, the same command:
        torchrun --nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d \\
                 --rdzv-endpoint=10.0.0.1:29400 --rdzv-id=ddl-course \\
                 -m course_lib.parallel.torch_engine --steps 50 --batch-size 512

    and on one machine: ``torchrun --standalone --nproc-per-node=2 -m course_lib.parallel.torch_engine``.

torch is optional (extra ``engines``) and imported only inside the workers, so that
``import course_lib.parallel.torch_engine`` works (and tells what is missing) without it.

Results match the toy within 1e-6: gloo adds the gradients in its own order. For two
workers the order cannot matter: float addition is commutative (``a + b == b + a``
bit for bit, though rounded), so the parameters are even bitwise equal.
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import os
import socket
import sys
import time
from datetime import timedelta

import numpy as np

from .._validate import check_positive
from ..models import MLP
from .allreduce import GlooAllReduce
from .data import PRELOAD, DataParallelResult, Job, check_job, collect, start_params, worker_loop
from .shm import SharedArray
from .workers import Fault, ProcessGroup, WorkerContext, check_start_method

__all__ = ["torch_available", "train_torch", "TORCH_MISSING", "main"]

TORCH_MISSING = (
    "PyTorch is not installed: install the optional engine with "
    "`pip install -e '.[engines]'` (on the course machines: `pip install torch==2.13.0`, "
    "a local CPU build)"
)


def torch_available() -> bool:
    """Whether torch can be imported (checked without importing it)."""
    return importlib.util.find_spec("torch") is not None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _init_group(rank: int, world_size: int, init_method: str, timeout: float) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=init_method, rank=rank, world_size=world_size,
        timeout=timedelta(seconds=timeout),
    )


def _gloo_worker(wctx: WorkerContext, job: Job, specs, init_method: str, separate_waiting: bool) -> dict:
    """One worker of :func:`train_torch` (runs in a child process)."""
    import torch.distributed as dist

    _init_group(wctx.rank, wctx.world_size, init_method, wctx.wait_timeout)
    try:
        x_spec, y_spec, p_spec = specs
        with x_spec.attach() as x, y_spec.attach() as y, p_spec.attach() as p0:
            comm = GlooAllReduce(p0.size, p0.dtype, separate_waiting)
            report = worker_loop(wctx, job, x, y, p0, comm)
            del comm
    finally:
        dist.destroy_process_group()
    return report


def train_torch(
    model: MLP,
    x: np.ndarray,
    y: np.ndarray,
    *,
    workers: int,
    batch_size: int,
    steps: int | None = None,
    epochs: int | None = None,
    lr: float = 0.1,
    seed: int = 0,
    params: np.ndarray | None = None,
    blas_threads: int | None = 1,
    start_method: str | None = None,
    timeout: float = 120.0,
    progress: bool | None = None,
    fault: Fault | None = None,
    separate_waiting: bool = False,
) -> DataParallelResult:
    """Data-parallel training with ``torch.distributed`` (gloo on 127.0.0.1).

    Same arguments and result as :func:`course_lib.parallel.data.train_data_parallel`
    (``backend`` is ``"gloo"``). Every worker imports torch, which takes a second or
    two per process: ``startup_time`` shows it, ``time_per_step`` does not.

    Parameters
    ----------
    separate_waiting : bool
        Add a ``dist.barrier()`` before each all-reduce so that waiting for slower
        workers is timed apart from communication (costs one more round trip per
        step). By default waiting is included in ``communication``.

    Raises
    ------
    ImportError
        torch is not installed (the message says how to install it).

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> model = MLP((8, 16, 3)); rng = np.random.default_rng(0)
    >>> x = rng.random((40, 8), dtype=np.float32); y = rng.integers(0, 3, 40)
    >>> res = train_torch(model, x, y, workers=2, batch_size=10, steps=3)  # doctest: +SKIP
    >>> res.backend, res.replicas_in_sync                                   # doctest: +SKIP
    ('gloo', True)
    """
    t_call = time.perf_counter()
    x, y, job = check_job(model, x, y, batch_size, steps, epochs, lr, seed, workers, blas_threads, fault)
    start_method = check_start_method(start_method)
    timeout = check_positive(timeout, "timeout")
    if not torch_available():
        raise ImportError(TORCH_MISSING)
    p0 = start_params(model, params, job.seed)
    t_wall = time.time()
    init_method = f"tcp://127.0.0.1:{_free_port()}"
    arrays: list[SharedArray] = []
    try:
        for shape, dtype, init in ((x.shape, x.dtype, x), (y.shape, np.int64, y), (p0.shape, p0.dtype, p0)):
            arrays.append(SharedArray(shape, dtype, init))
        group = ProcessGroup(
            _gloo_worker, job.workers, args=(job, [a.spec for a in arrays], init_method, separate_waiting),
            start_method=start_method, timeout=timeout, name="ddl-dp-gloo", preload=PRELOAD,
            shared=arrays,
        )
        with group:
            results = group.join(progress_total=2 * job.steps, progress_display=progress,
                                 progress_label="data parallel (torch gloo)")
    finally:
        for a in arrays:
            a.close()
    result = collect(results, job, "gloo", start_method, t_call, t_wall)
    result.extra["separate_waiting"] = separate_waiting
    return result


# --------------------------------------------------------------------- torchrun
def main(argv: list[str] | None = None) -> int:
    """Entry point for ``torchrun -m course_lib.parallel.torch_engine`` (one process per worker).

    Every process builds the same synthetic data set (seeded, so identical on every
    node), joins the process group from the environment torchrun sets
    (``init_method="env://"``), trains its shard of each global batch, and rank 0
    prints the throughput and a checksum of the final parameters.
    """
    parser = argparse.ArgumentParser(prog="torchrun ... -m course_lib.parallel.torch_engine", description=main.__doc__)
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
    x, y, job = check_job(model, x, y, args.batch_size, args.steps, None, args.lr, args.seed,
                              world, 1, None)
    _init_group(rank, world, "env://", args.timeout)
    import torch.distributed as dist

    try:
        wctx = WorkerContext(rank, world, args.timeout)
        comm = GlooAllReduce(model.n_params, model.dtype, separate_waiting=False)
        report = worker_loop(wctx, job, x, y, model.init_params(args.seed), comm)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        step = float(np.median(report["timings"][1:, 3]))
        print(f"{world} workers, global batch {job.batch_size}: {1 / step:.2f} steps/s, "
              f"{job.batch_size / step:.0f} samples/s; params sha256 {report['digest'][:16]}")
    return 0


if __name__ == "__main__":
    # torchrun runs this module as __main__ in every worker process.
    multiprocessing.freeze_support()
    raise SystemExit(main())
