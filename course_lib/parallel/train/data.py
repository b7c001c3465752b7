"""The data-parallel trainer (shared memory, pipes, torch gloo, a modelled wire; ZeRO stages 1-3; buckets):
check once, launch the workers, collect one result.

The step every worker runs is in :mod:`course_lib.parallel.data` (and ZeRO's in
:mod:`course_lib.parallel.zero`), the communicators in :mod:`course_lib.parallel.allreduce`.
This module wires them to processes: the shared arrays and pipes of the run, the
communicator of each worker, the monitor that times every step, and the report each worker
sends back (:func:`collect` turns the reports into one :class:`course_lib.models.TrainResult`).

Examples
--------
>>> from course_lib.models import MLP
>>> from course_lib.parallel.train.reference import train_serial, train_simulated
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

import numpy as np

from ...i18n import tr
from ...memory import measured_state_bytes
from ...models import MLP, TrainResult
from ...overlap import bucket_layers
from ...timing import blas_threads as _blas
from ...timing import current_blas_threads, minor_faults, pin_to_core
from ..allreduce import BucketAllReduce, GlooAllReduce, PipeAllReduce, ShmAllReduce, WireAllReduce
from ..data import overlap_worker_loop, worker_loop
from ..engine.checkpointing import check_checkpointing, checkpoint_report, data_parallel_saver
from ..engine.clock import StepMonitor, Traced, increase
from ..engine.crash import fault_timer
from ..engine.gloo import free_port, gloo_group
from ..engine.job import Job, check_flag, check_job, run_keywords
from ..engine.launch import Launcher
from ..zero import LayerChunks, zero1_worker_loop, zero2_worker_loop, zero3_worker_loop

__all__ = ["PRELOAD", "collect", "run_worker", "train_data_parallel"]

#: Modules the forkserver imports once, so each worker starts in milliseconds.
PRELOAD = ("course_lib.parallel.engine.workers", "course_lib.models", "course_lib.parallel.train.data",
           "threadpoolctl")


@run_keywords()
def train_data_parallel(model: MLP, x: np.ndarray, y: np.ndarray, *, workers: int, optimizer=None,
                        zero_stage: int = 0, buckets: int = 1, backend: str = "shm", wire=None,
                        barrier_kind: str = "pipe", pin_workers: bool = False, log_barriers: bool = False,
                        checkpoint_every: int | None = None, checkpoint_dir=None, resume=None,
                        checkpoint_async: bool = False, checkpoint_delay: float = 0.0, checkpoint_store: str = "disk",
                        **run) -> TrainResult:
    """Train with ``workers`` processes, each on its shard of every global batch.

    Parameters
    ----------
    model, x, y
        The running example (:class:`course_lib.models.MLP`), inputs (n, features) and labels (n,).
    workers : int
        Number of worker processes, >= 1 (``batch_size``, the GLOBAL batch, >= workers).
        Batches that ``workers`` does not divide are split into shards differing by one
        sample (:func:`course_lib.parallel.partition.shard_bounds`).
    optimizer : optional
        An optimizer with ``step(params, grad)`` instead of plain SGD (``lr`` then ignored);
        every worker applies the same update with its own copy.
    zero_stage : {0, 1, 2, 3}
        ZeRO (零冗余优化器, backend "shm" only): 1 keeps the optimizer state of chunk ``r``
        of the parameters only on worker ``r``, which updates that chunk after the
        reduce-scatter; the all-gather shares the updated parameters. 2: also only chunk
        ``r`` of the gradients (a reduce-scatter per layer in the backward). 3 (FSDP): also
        only chunk ``r`` of the parameters (each layer all-gathered before its forward and
        its backward). Same parameters as ``zero_stage=0`` within rounding.
    buckets : int
        In [1, model.n_layers]. ``k > 1`` (backend "shm" or "wire", zero_stage 0): the gradient is
        all-reduced in ``k`` buckets of consecutive layers
        (:func:`course_lib.overlap.bucket_layers`), each started by a communication thread of
        the worker as soon as the backward pass has finished its layers, while the backward
        goes on. Same parameters as ``buckets=1``, bit for bit. The result's
        ``extra["timeline"]`` then holds every forward, backward, bucket all-reduce and
        update (:func:`overlap_timeline`), ``communication`` the time the step waited for
        the buckets after its backward (the exposed communication).
    backend : {"shm", "pipe", "gloo", "wire"}
        ``"shm"``: shared-memory reduce-scatter + all-gather, every worker reduces one
        chunk. ``"pipe"``: workers pickle their gradients through pipes to rank 0, which
        sums them and sends the sum back (the naive design). ``"gloo"``: a real engine,
        ``torch.distributed.all_reduce`` with the gloo backend over TCP on 127.0.0.1 (needs
        torch; each worker imports it, a second or two of ``startup_time``); its
        ``communication`` includes the waiting. ``"wire"``: the shared-memory sum in
        ``buckets`` buckets (1: one all-reduce after the backward), each arriving after the
        ring time of a modelled link (:class:`~course_lib.parallel.allreduce.WireAllReduce`):
        communication that takes no CPU, as a GPU cluster's network does; the result always
        has the timeline, and ``extra["wire"]`` and ``extra["wire_time"]`` (seconds of each
        bucket on the wire).
    wire : course_lib.parallel.allreduce.Wire or (alpha, beta), optional
        Backend "wire" only: the link, alpha (α) seconds per message and beta (β)
        bytes per second (None: ``Wire()``).
    barrier_kind, pin_workers, log_barriers
        Tuning and diagnostics (``benchmarks/bench_data_parallel.py`` compares them): the
        workers' barrier, ``"pipe"`` (:class:`~course_lib.parallel.engine.launch.PipeBarrier`,
        sleeps in the kernel) or ``"flag"`` (:class:`~course_lib.parallel.engine.launch.FlagBarrier`,
        spins on shared memory; x86-64); ``pin_workers=True`` pins worker ``r`` to the
        ``r``-th core this process may use (:func:`course_lib.timing.pin_to_core`);
        ``log_barriers=True`` writes down every barrier wait's arrival and departure in
        ``extra["barrier_log"]`` (workers, waits, 2) (:class:`~course_lib.parallel.engine.launch.LoggedBarrier`).
        Neither changes the arithmetic: same parameters, bit for bit.
    checkpoint_every, checkpoint_dir, resume, checkpoint_async, checkpoint_delay, checkpoint_store
        Checkpoints (训练检查点, :mod:`course_lib.parallel.checkpoint`): every worker writes
        its shard of the state (1/N of the parameters and of the optimizer state, the step)
        after every ``checkpoint_every`` steps into ``checkpoint_dir``, never half-written;
        ``resume`` continues from a folder's newest complete checkpoint, on the same or
        another number of workers or ZeRO stage (the same: bitwise the uninterrupted run's
        parameters). ``checkpoint_async``: the write overlaps the next steps;
        ``checkpoint_delay``: modelled storage seconds per shard; ``checkpoint_store="memory"``:
        no fsync (the page cache: survives a killed process, not a crashed machine). In full:
        :data:`course_lib.parallel.engine.checkpointing.CHECKPOINT_DOC`. The result's
        ``extra`` then holds ``checkpoint_steps``, ``checkpoint_time`` (seconds each worker
        was held up by each checkpoint), ``resumed_from`` and ``refused_checkpoints``.

    Returns
    -------
    course_lib.models.TrainResult
        ``backend`` as given; ``memory`` what each worker held (parameters, gradients,
        optimizer states); ``bytes_per_step`` one worker's all-reduce payload (0 with one
        worker: nothing to exchange); ``extra["cpu_time"]`` and ``extra["minor_faults"]``
        (steps, workers): each step's CPU seconds of the worker's main thread and its
        minor page faults (counts the machine's load does not change, unlike times).

    Raises
    ------
    ValueError, TypeError
        Bad arguments (naming the parameter).
    course_lib.parallel.engine.workers.WorkerError, WorkerDied, WorkerTimeout
        A worker raised (with its traceback), died, or hung; every worker has been
        stopped and every shared-memory segment removed.
    """
    t_call = time.perf_counter()
    x, y, p0, job = check_job(model, x, y, workers=workers, optimizer=optimizer, zero_stage=zero_stage,
                              buckets=buckets, backend=backend, wire=wire, **run)
    p0, job, resumed = check_checkpointing(job, p0, checkpoint_every=checkpoint_every, checkpoint_dir=checkpoint_dir,
                                           resume=resume, checkpoint_async=checkpoint_async,
                                           checkpoint_delay=checkpoint_delay, checkpoint_store=checkpoint_store,
                                           params=run["params"])
    t_wall = time.time()
    with Launcher(job.start_method) as launch:
        specs = [launch.shared(x.shape, x.dtype, x).spec, launch.shared(y.shape, np.int64, y).spec,
                 launch.shared(p0.shape, p0.dtype, p0).spec]
        pin_workers, log_barriers = check_flag(pin_workers, "pin_workers"), check_flag(log_barriers, "log_barriers")
        barrier = launch.barrier(job.workers, barrier_kind,
                                 log_waits=1 + 2 * job.steps * (job.model.n_layers + 1) if log_barriers else 0)
        if job.backend in ("shm", "wire"):  # the wire's sums are the shared-memory ones
            grads = launch.shared((job.workers, p0.size), p0.dtype)
            reduced = launch.shared(p0.size, p0.dtype)
            comm_args = [(job.backend, grads.spec, reduced.spec)] * job.workers
        elif job.backend == "pipe":
            pipes = [launch.pipe(duplex=True) for _ in range(job.workers - 1)]
            comm_args = [("pipe", [a for a, _ in pipes])] + [("pipe", [b]) for _, b in pipes]
        else:
            comm_args = [("gloo", f"tcp://127.0.0.1:{free_port()}")] * job.workers
        results = launch.run(
            _worker, job.workers, args=(job, specs, barrier), rank_args=[(c, pin_workers) for c in comm_args],
            timeout=job.timeout, name=f"ddl-dp-{job.backend}", preload=PRELOAD, progress_total=2 * job.steps,
            progress=job.progress, progress_label=tr("data parallel ({backend})", backend=job.backend),
        )
        log = barrier.log() if log_barriers else None
    result = collect(results, job, t_call, t_wall)
    if log is not None:
        result.extra["barrier_log"] = log
    if job.buckets > 1 or job.wire is not None:
        result.extra.update(timeline=overlap_timeline(results), buckets=bucket_layers(model.n_layers, job.buckets),
                            bucket_bytes=[(hi - lo) * p0.itemsize for lo, hi, _ in bucket_bounds(model, job.buckets)])
    if job.wire is not None:
        result.extra.update(wire=job.wire, wire_time=results[0]["wire_time"])
    if job.checkpoint is not None:
        result.extra.update(checkpoint_report([r["checkpoints"] for r in results], job, resumed))
    return result


def bucket_bounds(model: MLP, buckets: int) -> list[tuple[int, int, int]]:
    """``(lo, hi, first_layer)`` of every bucket in the flat gradient, in the order the
    backward pass finishes them."""
    out = []
    for start, stop in bucket_layers(model.n_layers, buckets):
        span = model.layer_range(start, stop)
        out.append((span.start, span.stop, start))
    return out


def overlap_timeline(results: list[dict]) -> list[tuple]:
    """The measured timeline of a bucketed run: ``(rank, step, kind, bucket, start, end)``
    per operation, seconds from the earliest operation, sorted by rank, step and start.
    ``kind``: ``"F"`` forward, ``"B"`` backward (its layers' backwards, first start to last
    end), ``"U"`` update (``bucket`` -1), and, by the communication thread, ``"W"`` a bucket
    waiting for the other workers' gradients of it (from when the thread takes it up) and
    ``"A"`` its all-reduce."""
    rows = []
    for rank, r in enumerate(results):
        backward: dict[int, list] = {}
        for kind, micro, t0, t1, step, _ in r["ops"]:
            if kind == "B":  # one operation per layer: one backward per step
                span = backward.setdefault(step, [t0, t1])
                span[0], span[1] = min(span[0], t0), max(span[1], t1)
            else:
                rows.append((rank, step, kind, micro, t0, t1))
        rows += [(rank, step, "B", -1, t0, t1) for step, (t0, t1) in backward.items()]
    origin = min(row[4] for row in rows)
    return sorted(((rank, step, kind, b, t0 - origin, t1 - origin) for rank, step, kind, b, t0, t1 in rows),
                  key=lambda row: (row[0], row[1], row[4]))


def collect(results: list[dict], job: Job, t_call: float, t_wall: float, *, backend: str | None = None,
            params: np.ndarray | None = None, loss: np.ndarray | None = None) -> TrainResult:
    """Assemble the workers' reports (:func:`report`) into a :class:`course_lib.models.TrainResult`.

    The parameters are rank 0's ``params`` and the loss of a step the sum of the shards'
    ``losses`` over its batch, unless given (tensor parallelism gathers the parameters from
    the blocks, and every worker computes the whole loss).
    """
    timings = np.stack([r["timings"] for r in results], axis=1)  # (steps, workers, 4)
    if loss is None:
        shard_losses = np.stack([r["losses"] for r in results], axis=1)
        loss = np.array([math.fsum(row) for row in shard_losses]) / np.array(
            [idx.size for idx in job.batches()], dtype=float)
    return TrainResult(
        params=results[0]["params"] if params is None else params,
        loss=loss,
        step_time=timings[:, :, 3].max(axis=1),
        compute=timings[:, :, 0],
        waiting=timings[:, :, 1],
        communication=timings[:, :, 2],
        backend=job.backend if backend is None else backend,
        batch_size=job.batch_size,
        workers=job.workers,
        memory=[r["memory"] for r in results],
        bytes_per_step=results[0]["bytes"],
        replicas_in_sync=len({r["digest"] for r in results}) == 1,
        start_method=job.start_method,
        blas_threads=job.blas_threads,
        startup_time=max(0.0, max(r["ready"] for r in results) - t_wall),
        wall_time=time.perf_counter() - t_call,
        extra={"worker_blas_threads": [r["blas_threads"] for r in results],
               **{name: np.stack([r["counters"][name] for r in results], axis=1)  # (steps, workers)
                  for name in ("cpu_time", "minor_faults") if all(name in r.get("counters", {}) for r in results)}},
    )


def report(monitor: StepMonitor, losses, *, digest_of, memory: dict, blas: int | None, **extra) -> dict:
    """What a worker sends back for :func:`collect`: its phase times, losses, bytes, memory,
    the digest of what every replica must hold alike, and ``extra``."""
    return {"timings": monitor.phases("compute", "waiting", "communication", "step"),
            "losses": np.asarray(losses, dtype=float), "memory": memory,
            "bytes": monitor.counts.get("bytes", np.zeros(monitor.n_steps)).astype(np.int64),
            "digest": hashlib.sha256(b"".join(a.tobytes() for a in digest_of)).hexdigest(),
            "ready": monitor.ready, "blas_threads": blas,
            "counters": {k: v for k, v in monitor.counts.items() if k in ("cpu_time", "minor_faults")}, **extra}


# ----------------------------------------------------------------- worker side
def _worker(wctx, job: Job, specs, barrier, comm_args, pin: bool = False) -> dict:
    """One data-parallel worker (runs in a child process): attach, communicate, report."""
    if pin:
        pin_to_core(wctx.rank)
    x_spec, y_spec, p_spec = specs
    with x_spec.attach() as x, y_spec.attach() as y, p_spec.attach() as p0:
        if comm_args[0] in ("shm", "wire"):
            _, g_spec, r_spec = comm_args
            with g_spec.attach() as grads, r_spec.attach() as reduced:
                if job.wire is not None:  # buckets on a modelled link, by a communication thread
                    with WireAllReduce(wctx, grads, reduced, barrier, bucket_bounds(job.model, job.buckets),
                                       job.wire) as comm:
                        out = run_worker(wctx, job, x, y, p0, comm, barrier)
                elif job.buckets > 1:  # a communication thread beside the backward pass
                    with BucketAllReduce(wctx, grads, reduced, barrier, bucket_bounds(job.model, job.buckets)) as comm:
                        out = run_worker(wctx, job, x, y, p0, comm, barrier)
                else:
                    comm = ShmAllReduce(wctx, grads, reduced, barrier)
                    out = run_worker(wctx, job, x, y, p0, LayerChunks(comm, job.model) if job.zero_stage >= 2 else comm,
                                     barrier)
                del comm
        elif comm_args[0] == "pipe":
            out = run_worker(wctx, job, x, y, p0, PipeAllReduce(wctx, p0.size, p0.dtype, comm_args[1], barrier), barrier)
        else:  # "gloo": torch.distributed, rendezvous over TCP on 127.0.0.1
            with gloo_group(wctx.rank, wctx.world_size, comm_args[1], wctx.wait_timeout):
                out = run_worker(wctx, job, x, y, p0, GlooAllReduce(p0.size, p0.dtype), barrier)
    return out


_ZERO = {1: zero1_worker_loop, 2: zero2_worker_loop, 3: zero3_worker_loop}


def run_worker(wctx, job: Job, x, y, p0, comm, barrier=None) -> dict:
    """Run one worker's step loop (:func:`course_lib.parallel.data.worker_loop`, the bucketed
    or a ZeRO loop) under a :class:`~course_lib.parallel.engine.clock.StepMonitor` and the
    job's BLAS limit, with its checkpoints (``barrier``: the run's, which every checkpoint
    waits at); return its report (:func:`report`)."""
    monitor = StepMonitor(wctx, job.steps, job.fault)
    comm.monitor = monitor
    payload = p0.nbytes if wctx.world_size > 1 else 0  # one all-reduce of the gradient per step
    counts = {"bytes": comm.moved if isinstance(comm, LayerChunks) else lambda: payload,
              "cpu_time": increase(time.thread_time), "minor_faults": increase(minor_faults)}
    bucketed = isinstance(comm, BucketAllReduce)  # buckets > 1, or a wire
    loop = _ZERO[job.zero_stage] if job.zero_stage else overlap_worker_loop if bucketed else worker_loop
    if bucketed:  # the timeline: the model's forward and backward, the update
        model = Traced(job.model, monitor, {"forward": "F", "layer_backward": "B"})
        job = Traced(job, monitor, {"update": "U"}, model=model)
    batches = monitor.steps(job.batches(), counts=counts)
    job, saver = data_parallel_saver(wctx, job, p0, barrier)  # checkpoints beside the loop (if any)
    with _blas(job.blas_threads):
        blas = current_blas_threads()  # reported, so tests can check the limit took effect
        with fault_timer(job.fault, wctx.rank) as failure:  # a Fault(after=...): a failure at a moment in time
            params, grad, opt, losses, *kept = loop(wctx, job, x, y, p0, comm,
                                                    failure.steps(batches if saver is None else saver.steps(batches)))
        memory = measured_state_bytes(kept[0] if kept else params, grad, opt)  # what this worker holds
    return report(monitor, losses, digest_of=[params], memory=memory, blas=blas,
                  params=params if wctx.rank == 0 else None, ops=monitor.ops + getattr(comm, "ops", []),
                  wire_time=getattr(comm, "wire_time", None), checkpoints=None if saver is None else saver.log)
