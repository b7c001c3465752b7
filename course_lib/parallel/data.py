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
    The reference: one process, full batch, ``reduction="mean"``.
:func:`train_simulated`
    What ``N`` workers compute, done in one process (shard sums added in rank order):
    the bitwise reference of the parallel runs.
:func:`train_data_parallel`
    ``N`` processes. ``backend="shm"``: all-reduce through shared memory as a
    reduce-scatter (Reduce-Scatter; worker :math:`r` adds chunk :math:`r` of every
    gradient) followed by an all-gather (All-Gather; every worker reads all reduced
    chunks) - no master process. ``backend="pipe"``: the naive design, every worker
    pickles its whole gradient through a pipe to rank 0, which adds them and sends the
    sum back.

All return a :class:`DataParallelResult` with the parameters and per-step timings
split into compute, communication and waiting. Worker processes use one BLAS thread
each (``blas_threads``) so that N workers do not oversubscribe the cores. Failures
in workers (exception, crash, hang) and KeyboardInterrupt stop all workers and
release all shared memory (see :mod:`course_lib.parallel.workers`).

The teaching core is short and public: :func:`worker_loop` is what every worker runs
(compute, communicate, update) and :mod:`course_lib.parallel.allreduce` holds the
all-reduce implementations; notebook 05 shows both.

Examples
--------
>>> from course_lib.models import MLP
>>> model = MLP((8, 16, 3))
>>> rng = np.random.default_rng(0)
>>> x = rng.random((64, 8), dtype=np.float32); y = rng.integers(0, 3, 64)
>>> kw = dict(batch_size=20, steps=5, lr=0.5, seed=1)
>>> par = train_data_parallel(model, x, y, workers=3, start_method="fork", **kw)
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
from dataclasses import dataclass, field

import numpy as np

from .._validate import check_positive
from ..memory import measured_state_bytes
from ..models import MLP
from ..progress import ProgressBar
from ..timing import blas_threads as _blas
from ..timing import current_blas_threads, keep_freed_memory
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
from .partition import shard_bounds, sum_rows
from .workers import Fault, WorkerContext, check_start_method

__all__ = [
    "BACKENDS",
    "PRELOAD",
    "DataParallelResult",
    "collect",
    "run_worker",
    "train_data_parallel",
    "train_serial",
    "train_simulated",
    "worker_loop",
]

#: Communication backends of :func:`train_data_parallel`.
BACKENDS = ("shm", "pipe", "gloo")

#: Modules the forkserver imports once, so each worker starts in milliseconds.
PRELOAD = ("course_lib.parallel.workers", "course_lib.models", "course_lib.parallel.data", "threadpoolctl")


# ----------------------------------------------------------------------- result
@dataclass
class DataParallelResult:
    """Final parameters and per-step timings of a training run.

    Timings are seconds; arrays of shape ``(steps, workers)`` hold one value per step
    and worker. ``compute`` is forward + backward + update; ``waiting`` is time spent
    waiting for slower workers before the exchange (load imbalance, stragglers);
    ``communication`` is the gradient exchange itself (for the gloo backend it also
    contains the waiting, which gloo does not separate).
    """

    params: np.ndarray
    """Final parameters (flat float32, a copy owned by the caller)."""
    loss: np.ndarray
    """(steps,) mean loss over the global batch of each step (before its update)."""
    compute: np.ndarray
    communication: np.ndarray
    waiting: np.ndarray
    step_time: np.ndarray
    """(steps,) wall-clock time of each step (slowest worker)."""
    workers: int
    backend: str
    """"serial", "simulated", "shm", "pipe", "gloo" (data parallel) or "tensor"
    (:func:`course_lib.parallel.tensor.train_tensor_parallel`)."""
    batch_size: int
    start_method: str | None = None
    blas_threads: int | None = 1
    startup_time: float = 0.0
    """Seconds from the call until every worker was ready to compute."""
    wall_time: float = 0.0
    """Seconds of the whole call (start-up and shut-down included)."""
    replicas_in_sync: bool = True
    """Whether every worker ended with bitwise-identical parameters."""
    bytes_per_step: np.ndarray | None = None
    """(steps,) payload bytes one worker all-reduced in each step (None for serial runs)."""
    extra: dict = field(default_factory=dict)
    """Details: ``worker_blas_threads`` (the BLAS threads each worker ran with, by rank)."""

    @property
    def steps(self) -> int:
        """Number of steps run."""
        return int(self.step_time.shape[0])

    def time_per_step(self, skip: int = 1) -> float:
        """Median wall-clock time of a step, ignoring the first ``skip`` (warm-up) steps."""
        times = self.step_time[skip:] if self.steps > skip else self.step_time
        return float(np.median(times))

    def samples_per_second(self, skip: int = 1) -> float:
        """Training throughput: global batch / time per step."""
        return self.batch_size / self.time_per_step(skip)

    def breakdown(self, skip: int = 1) -> dict[str, float]:
        """Median per-step seconds of compute, communication and waiting (mean over workers),
        and the step time.

        Examples
        --------
        >>> from course_lib.models import MLP
        >>> m = MLP((4, 3, 2)); x = np.ones((8, 4), np.float32); y = np.zeros(8, int)
        >>> sorted(train_serial(m, x, y, batch_size=4, steps=3).breakdown())
        ['communication', 'compute', 'step', 'waiting']
        """
        sl = slice(skip, None) if self.steps > skip else slice(None)
        return {
            "compute": float(np.median(self.compute[sl].mean(axis=1))),
            "communication": float(np.median(self.communication[sl].mean(axis=1))),
            "waiting": float(np.median(self.waiting[sl].mean(axis=1))),
            "step": float(np.median(self.step_time[sl])),
        }

    def communication_share(self, skip: int = 1) -> float:
        """Fraction of the step spent communicating or waiting (0 for a serial run)."""
        b = self.breakdown(skip)
        return (b["communication"] + b["waiting"]) / b["step"] if b["step"] > 0 else 0.0

    def __repr__(self) -> str:
        return (
            f"DataParallelResult(backend={self.backend!r}, workers={self.workers}, "
            f"steps={self.steps}, batch_size={self.batch_size}, "
            f"time_per_step={self.time_per_step() * 1e3:.3g} ms, final_loss={self.loss[-1]:.4g})"
        )


# --------------------------------------------------------------------- serial
def train_serial(
    model: MLP,
    x: np.ndarray,
    y: np.ndarray,
    *,
    batch_size: int,
    steps: int | None = None,
    epochs: int | None = None,
    lr: float = 0.1,
    seed: int = 0,
    params: np.ndarray | None = None,
    optimizer=None,
    blas_threads: int | None = 1,
    progress: bool | None = None,
) -> DataParallelResult:
    """Plain mini-batch SGD in this process: the reference for the parallel runs.

    Parameters
    ----------
    model : MLP
        The running example's layout.
    x, y : numpy.ndarray
        Inputs (n, features) and integer labels (n,).
    batch_size : int
        Global batch, 1 <= batch_size <= n.
    steps, epochs : int, optional
        Number of SGD steps, or of epochs (``ceil(n / batch_size)`` steps each; the last
        batch of an epoch holds what is left, see
        :func:`course_lib.parallel.partition.batch_schedule`). Default: one epoch.
    lr : float
        Learning rate, finite and > 0.
    seed : int
        Seeds the initial parameters (``model.init_params(seed)``) and the batches.
    params : numpy.ndarray, optional
        Start from these parameters (copied) instead.
    optimizer : optimizer with ``step(params, grad)``, optional
        An optimizer with state instead of plain SGD, e.g. ``course_lib.optim.SGD(0.1,
        momentum=0.9)`` (``lr`` is then ignored). Every run uses a fresh copy of it: the
        object passed is a template and keeps no state.
    blas_threads : int or None
        BLAS threads while training (None: the library's default, all cores). More
        threads parallelise inside each matrix product: intra-operator parallelism.
    progress : bool or None
        Progress bar; None shows it in a notebook for runs longer than ~1.5 s.

    Returns
    -------
    DataParallelResult
        ``workers == 1``, ``backend == "serial"``; communication and waiting are 0.

    Notes
    -----
    Like every worker, the calling process is set to keep freed memory for reuse
    (:func:`course_lib.timing.keep_freed_memory`), so that serial and parallel runs pay
    the same for their temporary arrays; otherwise glibc re-faults them every step.
    """
    t_call = time.perf_counter()
    keep_freed_memory()
    x, y, job = check_job(model, x, y, batch_size, steps, epochs, lr, seed, 1, blas_threads, None,
                          optimizer=optimizer)
    params = start_params(model, params, job.seed)
    opt = job.new_optimizer()
    grad = np.zeros_like(params)
    losses, times = np.zeros(job.steps), np.zeros(job.steps)
    bar = ProgressBar(job.steps, "serial", progress)
    lr32 = model.dtype.type(job.lr)
    with _blas(job.blas_threads):
        for step, idx in enumerate(job.schedule()):
            t0 = time.perf_counter()
            loss, _ = model.loss_and_grad(params, x[idx], y[idx], reduction="mean", out=grad)
            if opt is None:
                grad *= lr32
                params -= grad
            else:
                opt.step(params, grad)
            times[step] = time.perf_counter() - t0
            losses[step] = loss
            bar.update(step + 1)
            bar.tick()
    bar.finish(ok=True)
    zeros = np.zeros((job.steps, 1))
    return DataParallelResult(
        params=params, loss=losses, compute=times[:, None].copy(), communication=zeros,
        waiting=zeros.copy(), step_time=times, workers=1, backend="serial",
        batch_size=job.batch_size, blas_threads=job.blas_threads,
        wall_time=time.perf_counter() - t_call,
    )


def train_simulated(
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
) -> DataParallelResult:
    """Data parallelism without processes: the exact arithmetic of ``workers`` workers.

    Each step computes every shard's gradient sum (:func:`shard_bounds`) one after the
    other, adds them in rank order and applies ``params -= (lr / B) * sum``, exactly as
    every worker of :func:`train_data_parallel` does. Its parameters are therefore
    bitwise equal to the parallel run's (same arguments as :func:`train_serial`, plus
    ``workers``). Timings: ``compute`` is the per-shard gradient time.
    """
    t_call = time.perf_counter()
    keep_freed_memory()
    x, y, job = check_job(model, x, y, batch_size, steps, epochs, lr, seed, workers, blas_threads, None)
    params = start_params(model, params, job.seed)
    grads = np.zeros((job.workers, params.size), dtype=params.dtype)
    total, update = np.zeros_like(params), np.zeros_like(params)
    losses = np.zeros(job.steps)
    compute = np.zeros((job.steps, job.workers))
    comm = np.zeros((job.steps, job.workers))
    times = np.zeros(job.steps)
    with _blas(job.blas_threads):
        for step, idx in enumerate(job.schedule()):
            t_step = time.perf_counter()
            shard_losses = []
            for r, (lo, hi) in enumerate(shard_bounds(idx.size, job.workers)):
                t0 = time.perf_counter()
                sub = idx[lo:hi]
                loss, _ = model.loss_and_grad(params, x[sub], y[sub], reduction="sum", out=grads[r])
                shard_losses.append(loss)
                compute[step, r] = time.perf_counter() - t0
            t0 = time.perf_counter()
            sum_rows(grads, total)
            comm[step, :] = time.perf_counter() - t0
            job.update(params, total, idx.size, None, update)
            losses[step] = math.fsum(shard_losses) / idx.size
            times[step] = time.perf_counter() - t_step
    return DataParallelResult(
        params=params, loss=losses, compute=compute, communication=comm,
        waiting=np.zeros_like(comm), step_time=times, workers=job.workers, backend="simulated",
        batch_size=job.batch_size, blas_threads=job.blas_threads,
        wall_time=time.perf_counter() - t_call,
    )


# ------------------------------------------------------------------- parallel
def train_data_parallel(
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
    optimizer=None,
    zero_stage: int = 0,
    blas_threads: int | None = 1,
    backend: str = "shm",
    start_method: str | None = None,
    timeout: float = 60.0,
    progress: bool | None = None,
    fault: Fault | None = None,
) -> DataParallelResult:
    """Train with ``workers`` processes, each on its shard of every global batch.

    Parameters
    ----------
    model, x, y, batch_size, steps, epochs, lr, seed, params, optimizer
        As in :func:`train_serial`; ``batch_size`` is the GLOBAL batch (>= workers).
        Every worker applies the same update with its own copy of ``optimizer``.
    zero_stage : {0, 1}
        1: ZeRO stage 1 (零冗余优化器, :mod:`course_lib.parallel.zero`, backend "shm"
        only): worker ``r`` keeps the optimizer state of chunk ``r`` of the parameters
        only, updates that chunk after the reduce-scatter, and the all-gather shares
        the updated parameters. Same parameters as ``zero_stage=0`` within rounding.
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
    DataParallelResult

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
        raise ValueError(f"zero_stage=1 needs backend='shm' (its reduce-scatter and all-gather), got {backend!r}")
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
             t_call: float, t_wall: float) -> DataParallelResult:
    """Assemble the workers' reports into a :class:`DataParallelResult`."""
    timings = np.stack([r["timings"] for r in results], axis=1)  # (steps, workers, 4)
    shard_losses = np.stack([r["losses"] for r in results], axis=1)
    losses = np.array([math.fsum(row) for row in shard_losses]) / results[0]["samples"]
    ready = max(r["ready"] for r in results)
    return DataParallelResult(
        params=results[0]["params"],
        loss=losses,
        compute=timings[:, :, 0],
        waiting=timings[:, :, 1],
        communication=timings[:, :, 2],
        step_time=timings[:, :, 3].max(axis=1),
        workers=job.workers,
        backend=backend,
        batch_size=job.batch_size,
        start_method=start_method,
        blas_threads=job.blas_threads,
        startup_time=max(0.0, ready - t_wall),
        wall_time=time.perf_counter() - t_call,
        replicas_in_sync=len({r["digest"] for r in results}) == 1,
        bytes_per_step=results[0]["bytes"],
        extra={"worker_blas_threads": [r["blas_threads"] for r in results],
               "worker_memory": [r["memory"] for r in results]},
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
        from .zero import zero_worker_loop as loop  # imported in the worker only when ZeRO runs
    else:
        loop = worker_loop
    with _blas(job.blas_threads):
        blas = current_blas_threads()  # reported, so tests can check the limit took effect
        params, grad, opt = loop(wctx, job, x, y, p0, comm, clock)
        memory = measured_state_bytes(params, grad, opt)  # what this worker holds
    return {
        "timings": clock.phases("compute", "waiting", "communication", "step"),
        "losses": clock.counts["loss"], "samples": clock.counts["samples"].astype(int),
        "bytes": clock.counts["bytes"], "digest": hashlib.sha256(params.tobytes()).hexdigest(),
        "ready": clock.ready, "blas_threads": blas, "memory": memory,
        "params": params if wctx.rank == 0 else None,
    }


def worker_loop(wctx: WorkerContext, job: Job, x, y, p0, comm, clock: StepClock):
    """The training loop every data-parallel worker runs (notebook 05, "Run it").

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
