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

``buckets=k`` overlaps the all-reduce with the backward pass: :func:`overlap_worker_loop`
runs the backward layer by layer and hands each complete bucket of layers to the worker's
communication thread (:class:`BucketAllReduce`), which all-reduces it while the backward
goes on; the model of the step time is :mod:`course_lib.overlap`.

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
import queue
import threading
import time

import numpy as np

from .._validate import check_int, check_positive
from ..memory import measured_state_bytes
from ..models import MLP, TrainResult, softmax_cross_entropy
from ..overlap import bucket_layers
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
from .partition import chunk_bounds, shard_bounds, sum_rows
from .workers import Fault, WorkerContext, check_start_method

__all__ = [
    "BACKENDS",
    "PRELOAD",
    "BucketAllReduce",
    "collect",
    "overlap_worker_loop",
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
    buckets: int = 1,
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
    buckets : int
        In [1, model.n_layers]. 1: one all-reduce of the whole gradient after the backward
        pass (:func:`worker_loop`). ``k > 1`` (backend "shm", zero_stage 0): the gradient is
        all-reduced in ``k`` buckets of consecutive layers
        (:func:`course_lib.overlap.bucket_layers`), each started by a communication thread of
        the worker as soon as the backward pass has finished its layers, while the backward
        goes on (:func:`overlap_worker_loop`, :class:`BucketAllReduce`); the step waits for
        every bucket before the update. Same parameters as ``buckets=1``, bit for bit (every
        element is still the sum of the workers' gradients in rank order). The result's
        ``extra["timeline"]`` then holds every forward, backward, bucket all-reduce and
        update (see :func:`overlap_timeline`), ``communication`` the time the step waited for
        the buckets after its backward (the exposed communication).
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
    buckets = check_int(buckets, "buckets", 1, job.model.n_layers)
    if buckets > 1 and (backend != "shm" or job.zero_stage):
        raise ValueError(f"buckets > 1 needs backend='shm' and zero_stage=0, got buckets={buckets}, "
                         f"backend={backend!r}, zero_stage={job.zero_stage}")
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
            comm_args = [("shm", grads.spec, reduced.spec, bucket_bounds(job.model, buckets))] * job.workers
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
    result = collect(results, job, backend, start_method, t_call, t_wall)
    if buckets > 1:
        result.extra.update(timeline=overlap_timeline(results), buckets=bucket_layers(job.model.n_layers, buckets),
                            bucket_bytes=[(hi - lo) * p0.itemsize for lo, hi, _ in bucket_bounds(job.model, buckets)])
    return result


def bucket_bounds(model: MLP, buckets: int) -> list[tuple[int, int, int]] | None:
    """``(lo, hi, first_layer)`` of every bucket in the flat gradient, in the order the
    backward pass finishes them (None for one bucket: the plain all-reduce)."""
    if buckets == 1:
        return None
    out = []
    for start, stop in bucket_layers(model.n_layers, buckets):
        span = model.layer_range(start, stop)
        out.append((span.start, span.stop, start))
    return out


def overlap_timeline(results: list[dict]) -> list[tuple]:
    """The measured timeline of a bucketed run: ``(rank, step, kind, bucket, start, end)``
    per operation, seconds from the earliest operation, sorted by rank, step and start.
    ``kind``: ``"F"`` forward, ``"B"`` backward, ``"U"`` update (``bucket`` -1), and, by the
    communication thread, ``"W"`` a bucket waiting for the other workers' gradients of it
    (from when the thread takes it up) and ``"A"`` its all-reduce."""
    rows = [(rank, step, kind, micro, t0, t1) for rank, r in enumerate(results)
            for kind, micro, t0, t1, step in r["ops"]]
    origin = min(row[4] for row in rows)
    return sorted(((rank, step, kind, b, t0 - origin, t1 - origin) for rank, step, kind, b, t0, t1 in rows),
                  key=lambda row: (row[0], row[1], row[4]))


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
        if comm_args[0] == "shm" and comm_args[3] is not None:  # buckets: a communication thread
            _, g_spec, r_spec, bounds = comm_args
            with g_spec.attach() as grads, r_spec.attach() as reduced:
                with BucketAllReduce(wctx, grads, reduced, barrier, bounds) as comm:
                    report = run_worker(wctx, job, x, y, p0, comm)
                del comm
        elif comm_args[0] == "shm":
            _, g_spec, r_spec, _ = comm_args
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
    elif isinstance(comm, BucketAllReduce):
        loop = overlap_worker_loop
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
        "ops": clock.ops + getattr(comm, "ops", []),
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


# ------------------------------------------------------------------ overlap (buckets)
class BucketAllReduce:
    """Shared-memory all-reduce in buckets, run by a communication thread while the backward
    pass goes on (chapter "Collectives and synchronisation", overlap).

    ``bounds`` holds ``(lo, hi, first_layer)`` of each bucket of the flat gradient in the
    order the backward pass finishes them (:func:`bucket_bounds`). :meth:`layer_done` hands
    a bucket to the thread once its first layer's gradient is done; the thread runs
    :meth:`reduce_bucket` on the buckets in that order; :meth:`finish` waits for all of
    them. Every element is the sum of the workers' rows in rank order, as in
    :class:`~course_lib.parallel.allreduce.ShmAllReduce`. Use as a context manager: the
    thread is stopped and joined on exit. Every wait ends after the worker's
    ``wait_timeout``.
    """

    def __init__(self, wctx: WorkerContext, grads: np.ndarray, reduced: np.ndarray, barrier, bounds):
        self.wctx, self.grads, self.reduced, self.barrier = wctx, grads, reduced, barrier
        self.bounds = list(bounds)
        self._bucket_of = {first: b for b, (_, _, first) in enumerate(self.bounds)}
        self._todo: queue.Queue = queue.Queue()
        self._done: queue.Queue = queue.Queue()
        self.ops: list[tuple] = []  # (kind, bucket, start, end, step) as StepClock.ops
        self._step = 0
        self._thread = threading.Thread(target=self._serve, name=f"ddl-comm-{wctx.rank}", daemon=True)

    def __enter__(self) -> BucketAllReduce:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def gradient_buffer(self) -> np.ndarray:
        return self.grads[self.wctx.rank]

    def start(self) -> None:
        """Wait until every worker is ready, then start the communication thread."""
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)
        self._thread.start()

    def layer_done(self, layer: int) -> None:
        """The backward pass has finished ``layer``: if it completes a bucket, reduce it now."""
        if layer in self._bucket_of:
            self._todo.put(self._bucket_of[layer])

    def wait(self) -> None:
        """Wait until every worker has the gradient of the next bucket."""
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    def reduce_bucket(self, b: int) -> None:
        """All-reduce bucket ``b`` (after :meth:`wait`): add this worker's chunk of the
        bucket over all workers' rows (rank order), then wait until every chunk is added."""
        lo, hi, _ = self.bounds[b]
        c_lo, c_hi = chunk_bounds(hi - lo, self.wctx.world_size)[self.wctx.rank]
        sum_rows(self.grads, self.reduced, lo + c_lo, lo + c_hi)
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    def finish(self) -> np.ndarray:
        """Wait for every bucket of this step; return the summed gradient."""
        for _ in self.bounds:
            try:
                item = self._done.get(timeout=self.wctx.wait_timeout)
            except queue.Empty:
                raise TimeoutError(f"worker {self.wctx.rank}: a bucket's all-reduce took longer than "
                                   f"{self.wctx.wait_timeout:g} s") from None
            if isinstance(item, BaseException):
                raise item
        self._step += 1
        return self.reduced

    def _serve(self) -> None:
        """The communication thread: reduce each bucket handed over, time it, report it."""
        try:
            while (b := self._todo.get(timeout=self.wctx.wait_timeout)) is not None:
                t0 = time.perf_counter()
                self.wait()
                t1 = time.perf_counter()
                self.reduce_bucket(b)
                self.ops += [("W", b, t0, t1, self._step), ("A", b, t1, time.perf_counter(), self._step)]
                self._done.put(b)
        except queue.Empty:  # the main thread stopped handing over buckets: it hangs or ended
            self._done.put(TimeoutError(f"worker {self.wctx.rank}: no bucket within {self.wctx.wait_timeout:g} s"))
        except BaseException as exc:  # noqa: BLE001 - a barrier timeout: the main thread raises it
            self._done.put(exc)

    def close(self) -> None:
        """Stop the communication thread and join it (idempotent)."""
        if self._thread.is_alive():
            self._todo.put(None)
            self._thread.join(timeout=min(5.0, self.wctx.wait_timeout))


def overlap_worker_loop(wctx: WorkerContext, job: Job, x, y, p0, comm: BucketAllReduce, clock: StepClock):
    """The data-parallel step with the all-reduce in buckets, overlapping the backward pass.

    As :func:`worker_loop`, but the backward pass runs layer by layer (last to first) and
    tells ``comm`` each finished layer: a complete bucket is all-reduced by the worker's
    communication thread while the backward goes on; the update waits for every bucket.
    """
    params, model = p0.copy(), job.model
    update, opt = np.zeros_like(params), job.new_optimizer()
    grad = comm.gradient_buffer()
    comm.start()  # start the clock together (and the communication thread)
    for idx in clock.steps(job.schedule()):
        lo, hi = shard_bounds(idx.size, job.workers)[wctx.rank]
        with clock("compute"), clock.op("F"):
            _, acts = model.forward(params, x[idx[lo:hi]])
        with clock("compute"), clock.op("B"):
            loss, g = softmax_cross_entropy(acts[-1], y[idx[lo:hi]], reduction="sum")
            grad.fill(0)
            for i in reversed(range(model.n_layers)):  # the last layer first
                g = model.layer_backward(params, i, acts[i], acts[i + 1], g, grad, need_input_grad=i > 0)
                comm.layer_done(i)  # a complete bucket is all-reduced now, the backward goes on
        with clock("communication"):
            total = comm.finish()  # wait for every bucket
        with clock("compute"), clock.op("U"):
            job.update(params, total, idx.size, opt, update)  # every replica: the same update
        clock.add(loss=loss, samples=idx.size, bytes=grad.nbytes)
    return params, grad, opt
