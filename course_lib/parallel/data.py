r"""Data parallelism (数据并行) on the running example, with real processes.

Every step of mini-batch SGD computes the gradient of the loss over a global batch of
:math:`B` samples. Because that gradient is a **sum over samples**, it can be split:

.. math:: \nabla L = \frac{1}{B}\sum_{i=1}^{B} \nabla \ell_i
          = \frac{1}{B}\sum_{r=0}^{N-1} \underbrace{\sum_{i \in \text{shard}_r} \nabla \ell_i}_{g_r}

Worker :math:`r` of :math:`N` holds a full replica of the parameters, computes
:math:`g_r` on its shard (``loss_and_grad(..., reduction="sum")``), the workers add
their :math:`g_r` with an **all-reduce** (All-Reduce), and every worker applies the same
update, so the replicas stay identical without ever sending parameters.

Entry points (same arguments; ``workers`` only for the parallel ones):

:func:`train_serial`
    The reference: one process, full batch, ``reduction="mean"``
    (:func:`course_lib.reference.train_serial`).
:func:`train_simulated`
    What ``N`` workers compute, done in one process (shard sums added in rank order):
    the bitwise reference of the parallel runs (:func:`course_lib.reference.train_simulated`).
:func:`train_data_parallel`
    ``N`` processes. ``backend="shm"``: all-reduce through shared memory as a
    reduce-scatter (Reduce-Scatter; worker :math:`r` adds chunk :math:`r` of every
    gradient) followed by an all-gather (All-Gather; every worker reads all reduced
    chunks) - no master process. ``backend="pipe"``: the naive design, every worker
    pickles its whole gradient through a pipe to rank 0, which adds them and sends the
    sum back.

All return a :class:`course_lib.models.TrainResult` with the parameters and per-step
timings split into compute, communication and waiting. Worker processes use one BLAS
thread each (``blas_threads``) so that N workers do not oversubscribe the cores. Failures
in workers (exception, crash, hang) and KeyboardInterrupt stop all workers and
release all shared memory (see :mod:`course_lib.parallel.workers`).

The teaching core is short and public: :func:`worker_loop` is what every worker runs
(compute, communicate, update) and :mod:`course_lib.parallel.allreduce` holds the
all-reduce implementations; notebook 07 shows both.

Examples
--------
>>> from course_lib.models import MLP
>>> model = MLP((8, 16, 3))
>>> rng = np.random.default_rng(0)
>>> x = rng.random((64, 8), dtype=np.float32); y = rng.integers(0, 3, 64)
>>> kw = dict(batch_size=20, steps=5, lr=0.5, seed=1)
>>> par = train_data_parallel(model, x, y, workers=3, start_method="fork", **kw)
>>> from course_lib.reference import train_serial, train_simulated
>>> bool(np.array_equal(par.params, train_simulated(model, x, y, workers=3, **kw).params))
True
>>> float(np.abs(par.params - train_serial(model, x, y, **kw).params).max()) < 1e-6
True
>>> par.workers, par.steps, par.replicas_in_sync
(3, 5, True)
"""

from __future__ import annotations

import hashlib
import math
import time

import numpy as np

from .._validate import check_positive
from ..memory import measured_state_bytes
from ..models import MLP, TrainResult
from ..timing import blas_threads as _blas
from ..timing import current_blas_threads
from .allreduce import (
    TORCH_MISSING,
    GlooAllReduce,
    PipeAllReduce,
    ShmAllReduce,
    free_port,
    torch_available,
)
from .job import Job, check_job, start_params
from .launch import Launcher, StepClock
from .partition import shard_bounds
from .workers import Fault, WorkerContext, check_start_method

__all__ = [
    "BACKENDS",
    "PRELOAD",
    "collect",
    "run_worker",
    "train_data_parallel",
    "worker_loop",
]

#: Communication backends of :func:`train_data_parallel`.
BACKENDS = ("shm", "pipe", "gloo")

#: Modules the forkserver imports once, so each worker starts in milliseconds.
PRELOAD = ("course_lib.parallel.workers", "course_lib.models", "course_lib.parallel.data", "threadpoolctl")


# ------------------------------------------------------------------- parallel
def train_data_parallel(
    model: MLP,
    x: np.ndarray,
    y: np.ndarray,
    *,
    workers: int,
    batch_size: int = 32,
    steps: int | None = None,
    epochs: int | None = None,
    lr: float = 0.1,
    seed: int = 0,
    params: np.ndarray | None = None,
    optimizer=None,
    zero_stage: int = 0,
    blas_threads: int | None = 1,
    backend: str = "shm",
    start_method: str | None = None,
    timeout: float = 60.0,
    progress: bool | None = None,
    fault: Fault | None = None,
) -> TrainResult:
    """Train with ``workers`` processes, each on its shard of every global batch.

    Parameters
    ----------
    model, x, y, batch_size, steps, epochs, lr, seed, params, optimizer
        As in :func:`course_lib.reference.train_serial`; ``batch_size`` is the GLOBAL
        batch (>= workers).
        Every worker applies the same update with its own copy of ``optimizer``.
    zero_stage : {0, 1, 2, 3}
        1: ZeRO stage 1 (零冗余优化器, :mod:`course_lib.parallel.zero`, backend "shm"
        only): worker ``r`` keeps the optimizer state of chunk ``r`` of the parameters
        only, updates that chunk after the reduce-scatter, and the all-gather shares
        the updated parameters. 2: also only chunk ``r`` of the gradients (a
        reduce-scatter per layer in the backward). 3 (FSDP): also only chunk ``r`` of the
        parameters (each layer all-gathered before its forward and its backward). Same
        parameters as ``zero_stage=0`` within rounding.
    workers : int
        Number of worker processes, >= 1. Batches that ``workers`` does not divide
        are split into shards differing by one sample (:func:`shard_bounds`).
    blas_threads : int or None
        BLAS threads per worker (1 avoids oversubscription; None: no limit).
    backend : {"shm", "pipe", "gloo"}
        ``"shm"``: shared-memory reduce-scatter + all-gather, every worker reduces one
        chunk. ``"pipe"``: workers pickle their gradients through pipes to rank 0,
        which sums them and sends the sum back (the naive design). ``"gloo"``: a real
        engine, ``torch.distributed.all_reduce`` with the gloo backend over TCP on
        127.0.0.1 (needs torch; each worker imports it, a second or two of
        ``startup_time``); its ``communication`` includes the waiting.
    start_method : {"fork", "forkserver", "spawn"} or None
        How workers start (None: ``forkserver`` on Linux, ``spawn`` elsewhere).
    timeout : float
        Seconds without progress after which a hung run is stopped.
    progress : bool or None
        Progress bar; None shows it in a notebook for runs longer than ~1.5 s.
    fault : course_lib.parallel.workers.Fault, optional
        Make one worker fail on purpose (tests, demonstrations).

    Returns
    -------
    course_lib.models.TrainResult
        ``backend`` as given; ``memory`` what each worker held (parameters, gradients,
        optimizer states: ZeRO-1 keeps 1/N of the states); ``bytes_per_step`` one
        worker's all-reduce payload.

    Raises
    ------
    ValueError, TypeError
        Bad arguments (naming the parameter).
    course_lib.parallel.workers.WorkerError, WorkerDied, WorkerTimeout
        A worker raised (with its traceback), died, or hung; every worker has been
        stopped and every shared-memory segment removed.
    """
    t_call = time.perf_counter()
    x, y, job = check_job(model, x, y, batch_size, steps, epochs, lr, seed, workers, blas_threads, fault,
                          optimizer=optimizer, zero_stage=zero_stage)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if job.zero_stage and backend != "shm":
        raise ValueError(f"zero_stage={job.zero_stage} needs backend='shm' (its reduce-scatter and all-gather), "
                         f"got {backend!r}")
    start_method = check_start_method(start_method)
    timeout = check_positive(timeout, "timeout")
    if backend == "gloo" and not torch_available():  # after every argument check: a bad call
        raise ImportError(TORCH_MISSING)  # hears what is wrong with it, not to install torch
    p0 = start_params(model, params, job.seed)
    t_wall = time.time()
    with Launcher(start_method) as launch:
        specs = [launch.shared(x.shape, x.dtype, x).spec, launch.shared(y.shape, np.int64, y).spec,
                 launch.shared(p0.shape, p0.dtype, p0).spec]
        barrier = launch.barrier(job.workers)
        if backend == "shm":
            grads = launch.shared((job.workers, p0.size), p0.dtype)
            reduced = launch.shared(p0.size, p0.dtype)
            comm_args = [("shm", grads.spec, reduced.spec)] * job.workers
        elif backend == "pipe":
            pipes = [launch.pipe(duplex=True) for _ in range(job.workers - 1)]
            comm_args = [("pipe", [a for a, _ in pipes])] + [("pipe", [b]) for _, b in pipes]
        else:
            comm_args = [("gloo", f"tcp://127.0.0.1:{free_port()}")] * job.workers
        results = launch.run(
            _worker, job.workers, args=(job, specs, barrier), rank_args=[(c,) for c in comm_args],
            timeout=timeout, name=f"ddl-dp-{backend}", preload=PRELOAD, progress_total=2 * job.steps,
            progress=progress, progress_label=f"data parallel ({backend})",
        )
    return collect(results, job, backend, start_method, t_call, t_wall)


def collect(results: list[dict], job: Job, backend: str, start_method: str | None,
            t_call: float, t_wall: float, *, params: np.ndarray | None = None,
            loss: np.ndarray | None = None) -> TrainResult:
    """Assemble the workers' reports into a :class:`course_lib.models.TrainResult`.

    Every report holds ``timings`` (steps, 4: compute, waiting, communication, step),
    ``bytes``, ``memory``, ``digest``, ``ready`` and ``blas_threads``. The parameters are
    rank 0's ``params`` and the loss of a step the sum of the shards' ``losses`` over its
    ``samples``, unless given (tensor parallelism gathers the parameters from the blocks,
    and every worker computes the whole loss).
    """
    timings = np.stack([r["timings"] for r in results], axis=1)  # (steps, workers, 4)
    if loss is None:
        shard_losses = np.stack([r["losses"] for r in results], axis=1)
        loss = np.array([math.fsum(row) for row in shard_losses]) / results[0]["samples"]
    memory = [r["memory"] for r in results]
    return TrainResult(
        params=results[0]["params"] if params is None else params,
        loss=loss,
        step_time=timings[:, :, 3].max(axis=1),
        compute=timings[:, :, 0],
        waiting=timings[:, :, 1],
        communication=timings[:, :, 2],
        backend=backend,
        batch_size=job.batch_size,
        workers=job.workers,
        memory=memory,
        bytes_per_step=results[0]["bytes"],
        replicas_in_sync=len({r["digest"] for r in results}) == 1,
        start_method=start_method,
        blas_threads=job.blas_threads,
        startup_time=max(0.0, max(r["ready"] for r in results) - t_wall),
        wall_time=time.perf_counter() - t_call,
        extra={"worker_blas_threads": [r["blas_threads"] for r in results]},
    )


# ----------------------------------------------------------------- worker side
def _worker(wctx: WorkerContext, job: Job, specs, barrier, comm_args) -> dict:
    """One data-parallel worker (runs in a child process): attach, communicate, report."""
    x_spec, y_spec, p_spec = specs
    with x_spec.attach() as x, y_spec.attach() as y, p_spec.attach() as p0:
        if comm_args[0] == "shm":
            _, g_spec, r_spec = comm_args
            with g_spec.attach() as grads, r_spec.attach() as reduced:
                comm = ShmAllReduce(wctx, grads, reduced, barrier)
                report = run_worker(wctx, job, x, y, p0, comm)
                del comm
        elif comm_args[0] == "pipe":
            comm = PipeAllReduce(wctx, p0.size, p0.dtype, comm_args[1], barrier)
            report = run_worker(wctx, job, x, y, p0, comm)
            del comm
        else:  # "gloo": torch.distributed, rendezvous over TCP on 127.0.0.1
            with GlooAllReduce.joined(wctx.rank, wctx.world_size, comm_args[1], wctx.wait_timeout):
                comm = GlooAllReduce(p0.size, p0.dtype)
                report = run_worker(wctx, job, x, y, p0, comm)
                del comm
    return report


def run_worker(wctx: WorkerContext, job: Job, x, y, p0, comm) -> dict:
    """Run one worker's step loop (:func:`worker_loop`, or ZeRO's) under a
    :class:`~course_lib.parallel.launch.StepClock` and the job's BLAS limit; return the
    report the parent assembles (:func:`collect`): timings, losses, bytes, memory, digest."""
    clock = StepClock(wctx, job.steps, job.fault)
    if job.zero_stage:
        from .zero import worker_loop_for  # imported in the worker only when ZeRO runs
        loop = worker_loop_for(job.zero_stage)
    else:
        loop = worker_loop
    with _blas(job.blas_threads):
        blas = current_blas_threads()  # reported, so tests can check the limit took effect
        params, grad, opt, *kept = loop(wctx, job, x, y, p0, comm, clock)  # ZeRO-3 also: its chunk
        memory = measured_state_bytes(kept[0] if kept else params, grad, opt)  # what this worker holds
    return {
        "timings": clock.phases("compute", "waiting", "communication", "step"),
        "losses": clock.counts["loss"], "samples": clock.counts["samples"].astype(int),
        "bytes": clock.counts["bytes"], "digest": hashlib.sha256(params.tobytes()).hexdigest(),
        "ready": clock.ready, "blas_threads": blas, "memory": memory,
        "params": params if wctx.rank == 0 else None,
    }


def worker_loop(wctx: WorkerContext, job: Job, x, y, p0, comm, clock: StepClock):
    """The training loop every data-parallel worker runs (notebook 07, "Run it").

    Per step: the gradient sum of this worker's shard, wait for the others, all-reduce,
    the same update on every replica. ``comm`` is one of
    :mod:`course_lib.parallel.allreduce` (shared memory, pipes or torch gloo); ``clock``
    times the phases (:class:`~course_lib.parallel.launch.StepClock`).
    """
    params = p0.copy()
    update, opt = np.zeros_like(params), job.new_optimizer()
    grad = comm.gradient_buffer()
    comm.start()  # start the clock together
    for idx in clock.steps(job.schedule()):
        lo, hi = shard_bounds(idx.size, job.workers)[wctx.rank]  # the last batch may be smaller
        with clock("compute"):
            loss, _ = job.model.loss_and_grad(params, x[idx[lo:hi]], y[idx[lo:hi]], reduction="sum", out=grad)
        with clock("waiting"):
            comm.wait()
        with clock("communication"):
            total = comm.allreduce()
        with clock("compute"):
            job.update(params, total, idx.size, opt, update)  # every replica: the same update
        clock.add(loss=loss, samples=idx.size, bytes=grad.nbytes)
    return params, grad, opt
