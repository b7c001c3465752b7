"""The fair baseline and the ceilings of a speedup (issue 37): the same work in the same kind
of process, and the most N cores can give it.

==========================  =========================================================
:func:`serial_in_worker`    the serial reference (:func:`~course_lib.parallel.train.reference.train_serial`)
                            run in one worker process set up as the workers are
:func:`run_copies`          N independent copies of one worker's step (data or tensor
                            parallel), side by side, exchanging nothing: the ceiling
:func:`measure_barrier`     a barrier alone: seconds per wait with no work between
:func:`sync_breakdown`      where a shared-memory data-parallel step's time went, from
                            its barrier log (``train_data_parallel(..., log_barriers=True)``)
==========================  =========================================================

These are measuring tools (the benchmark ``benchmarks/bench_data_parallel.py``, the scaling
experiment :func:`course_lib.parallel.train.speedup.measure_scaling`); the algorithms they
run are the lecture's (:mod:`course_lib.parallel.data`, :mod:`course_lib.parallel.tensor`).
"""

from __future__ import annotations

import contextlib
import math
import time

import numpy as np

from ..._validate import check_int
from ...i18n import tr
from ...models import MLP, check_model
from ...timing import blas_threads, current_blas_threads, pin_to_core
from ..engine.clock import StepMonitor
from ..engine.job import check_flag, check_job
from ..engine.launch import Launcher
from ..tensor import tensor_worker_loop
from .data import collect, report, run_worker
from .reference import train_serial

__all__ = ["measure_barrier", "run_copies", "serial_in_worker", "sync_breakdown"]

#: Modules the forkserver imports once, so each process starts in milliseconds.
_PRELOAD = ("course_lib.parallel.engine.workers", "course_lib.models", "course_lib.parallel.train.ceiling",
            "threadpoolctl")


# ------------------------------------------- the same work in the same kind of process
def _serial_process(wctx, model, specs, run: dict):
    """Entry point of :func:`serial_in_worker`: :func:`train_serial` on the shared data."""
    x_spec, y_spec, p_spec = specs
    with contextlib.ExitStack() as stack:
        x, y = stack.enter_context(x_spec.attach()), stack.enter_context(y_spec.attach())
        params = None if p_spec is None else np.array(stack.enter_context(p_spec.attach()))
        return train_serial(model, x, y, params=params, **run)


def serial_in_worker(model, x: np.ndarray, y: np.ndarray, *, start_method: str | None = None,
                     timeout: float = 600.0, params: np.ndarray | None = None, **run):
    """:func:`~course_lib.parallel.train.reference.train_serial`, run in one worker process
    started as every trainer starts its workers: the serial reference of a speedup, set up
    like the parallel run it is compared with.

    Same start method, same memory settings (:func:`course_lib.timing.keep_freed_memory`
    in every worker), the data read from shared memory as the workers read it, one BLAS
    thread set in the process that computes: so serial and one-worker times differ only
    by the communication the worker adds, not by the process they ran in (the parent of
    a notebook also runs the kernel's own threads, has another heap and reads its arrays
    from other pages). Takes :func:`train_serial`'s arguments (``progress`` is ignored);
    returns its :class:`~course_lib.models.TrainResult`, computed in the worker (the same
    parameters, bit for bit). ``timeout``: seconds the run may take.

    Examples
    --------
    >>> m = MLP((8, 16, 3)); rng = np.random.default_rng(0)
    >>> x = rng.random((64, 8), dtype=np.float32); y = rng.integers(0, 3, 64)
    >>> inside = serial_in_worker(m, x, y, batch_size=16, steps=3, start_method="fork")
    >>> bool(np.array_equal(inside.params, train_serial(m, x, y, batch_size=16, steps=3).params))
    True
    """
    model = check_model(model)
    x, y = model.check_x(x), model.check_y(y, np.shape(x)[0])
    run = {**run, "progress": False}
    with Launcher(start_method) as launch:
        specs = (launch.shared(x.shape, x.dtype, x).spec, launch.shared(y.shape, np.int64, y).spec,
                 None if params is None else launch.shared(np.shape(params), model.dtype, params).spec)
        return launch.run(_serial_process, 1, args=(model, specs, run), timeout=timeout, name="ddl-serial",
                          preload=_PRELOAD)[0]


# ------------------------------------------------------------------ the ceilings
class _NoExchange:
    """A communicator that exchanges nothing: :func:`~course_lib.parallel.data.worker_loop`
    then runs one worker's step alone (its shard's gradient and the update with it)."""

    monitor = None

    def __init__(self, wctx, grad: np.ndarray, barrier):
        self.wctx, self.grad, self.barrier = wctx, grad, barrier

    def gradient_buffer(self) -> np.ndarray:
        return self.grad

    def start(self) -> None:  # the copies start together, then never wait for each other
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    def wait(self) -> None:
        pass

    def allreduce(self) -> np.ndarray:
        return self.grad


class _NoActivationExchange:
    """A tensor-parallel worker's all-reduce without the others: its own part, copied as
    :class:`~course_lib.parallel.allreduce.ActivationAllReduce` copies the sum."""

    monitor, moved = None, 0

    def __init__(self, wctx, barrier):
        self.wctx, self.barrier = wctx, barrier

    def start(self) -> None:
        self.barrier.wait(self.wctx.rank, self.wctx.wait_timeout)

    def __call__(self, part: np.ndarray) -> np.ndarray:
        return part.copy()


def _copy_worker(wctx, job, specs, barrier, kind: str, pin: bool) -> dict:
    """One of :func:`run_copies`' processes: one worker's steps, exchanging nothing."""
    if pin:
        pin_to_core(wctx.rank)
    x_spec, y_spec, p_spec, g_spec = specs
    with x_spec.attach() as x, y_spec.attach() as y, p_spec.attach() as p0:
        if kind == "data":
            with g_spec.attach() as grads:
                out = run_worker(wctx, job, x, y, p0, _NoExchange(wctx, grads[wctx.rank], barrier))
            return out
        monitor = StepMonitor(wctx, job.steps, job.fault)
        with blas_threads(job.blas_threads):
            _, local, losses = tensor_worker_loop(wctx, job, x, y, p0, _NoActivationExchange(wctx, barrier),
                                                  monitor.steps(job.batches()))
        return report(monitor, losses, digest_of=[], memory={}, blas=current_blas_threads())


def run_copies(model: MLP, x: np.ndarray, y: np.ndarray, *, workers: int, kind: str = "data",
               pin_workers: bool = False, start_method: str | None = None, timeout: float = 120.0, **run):
    """The ceiling of a parallel run: ``workers`` independent copies of one worker's step,
    side by side, exchanging nothing.

    ``kind="data"``: each copy runs :func:`~course_lib.parallel.data.worker_loop` on its
    shard of every global batch of ``batch_size`` (the data-parallel trainer's worker
    ``r``), with a communicator that exchanges nothing; ``kind="tensor"``: each runs
    :func:`~course_lib.parallel.tensor.tensor_worker_loop` on its blocks of the weights,
    every activation all-reduce replaced by a copy of its own part. The copies start
    together and never wait for each other: what ``workers`` cores give this work with no
    communication and no synchronisation, the most a parallel run of it can reach.
    Training arguments as :func:`train_data_parallel`; the arithmetic is NOT the
    trainer's (no sum: each copy updates with its own gradient).

    Returns
    -------
    course_lib.models.TrainResult
        ``backend="copies"``; ``compute`` (steps, workers) each copy's step times,
        ``step_time`` their mean over the copies (independent copies: nobody waits for the
        slowest); nothing communicated.

    Examples
    --------
    >>> m = MLP((8, 16, 3)); rng = np.random.default_rng(0)
    >>> x = rng.random((64, 8), dtype=np.float32); y = rng.integers(0, 3, 64)
    >>> c = run_copies(m, x, y, workers=2, batch_size=16, steps=3, start_method="fork", progress=False)
    >>> c.backend, c.compute.shape, float(c.communication.sum())
    ('copies', (3, 2), 0.0)
    """
    if kind not in ("data", "tensor"):
        raise ValueError(f"kind must be 'data' or 'tensor', got {kind!r}")
    pin_workers = check_flag(pin_workers, "pin_workers")
    t_call = time.perf_counter()
    x, y, p0, job = check_job(model, x, y, workers=workers, start_method=start_method, timeout=timeout,
                              batch_split=kind == "data", backend="shm" if kind == "data" else "tensor", **run)
    t_wall = time.time()
    with Launcher(job.start_method) as launch:
        specs = [launch.shared(x.shape, x.dtype, x).spec, launch.shared(y.shape, np.int64, y).spec,
                 launch.shared(p0.shape, p0.dtype, p0).spec,
                 launch.shared((job.workers, p0.size) if kind == "data" else 1, p0.dtype).spec]
        results = launch.run(_copy_worker, job.workers, args=(job, specs, launch.barrier(job.workers), kind,
                                                             pin_workers),
                             timeout=job.timeout, name="ddl-copies", preload=_PRELOAD,
                             progress_total=2 * job.steps, progress=job.progress, progress_label=tr("copies"))
    result = collect(results, job, t_call, t_wall, backend="copies", params=p0,
                     loss=np.mean([r["losses"] for r in results], axis=0))
    result.step_time = result.compute.mean(axis=1)
    result.bytes_per_step = np.zeros(job.steps, dtype=np.int64)
    return result


def _barrier_loop(wctx, barrier, waits: int) -> float:
    """Entry point of :func:`measure_barrier`: ``waits`` barrier waits with no work between."""
    barrier.wait(wctx.rank, wctx.wait_timeout)
    t0 = time.perf_counter()
    for _ in range(waits):
        barrier.wait(wctx.rank, wctx.wait_timeout)
    return (time.perf_counter() - t0) / waits


def measure_barrier(workers: int, kind: str = "pipe", *, waits: int = 200, pin_workers: bool = False,
                    start_method: str | None = None, timeout: float = 60.0) -> float:
    """Seconds one barrier takes with no work between the waits: its latency (the slowest
    worker's mean over ``waits`` waits), for a barrier of ``kind`` ("pipe" or "flag") of
    ``workers`` processes.

    Examples
    --------
    >>> 0 < measure_barrier(2, waits=20, start_method="fork") < 1
    True
    """
    workers = check_int(workers, "workers", 1)
    waits = check_int(waits, "waits", 1)
    pin = check_flag(pin_workers, "pin_workers")
    with Launcher(start_method) as launch:
        barrier = launch.barrier(workers, kind)
        target = _pinned_barrier_loop if pin else _barrier_loop
        return max(launch.run(target, workers, args=(barrier, waits), timeout=timeout, name="ddl-barrier",
                              preload=_PRELOAD))


def _pinned_barrier_loop(wctx, barrier, waits: int) -> float:
    pin_to_core(wctx.rank)
    return _barrier_loop(wctx, barrier, waits)


def sync_breakdown(result, skip: int = 1, *, per_step: bool = False) -> dict:
    """Where a shared-memory data-parallel step's time goes, from its barrier log
    (``train_data_parallel(..., log_barriers=True)``; backend "shm", one bucket, no ZeRO).

    Every step of a worker passes two barriers: B1 after its gradient (every row written),
    B2 after its reduce-scatter (every chunk summed). From each wait's arrival and
    departure, per step (the median over the steps after ``skip``, or every step with
    ``per_step=True``) and mean over the workers:

    ``work``
        from leaving the last step's B2 to arriving at B1: the update, the batch, the
        forward and the backward (what an independent copy also does);
    ``straggler``
        waiting at B1 for the slowest worker (its arrival minus mine); also ``straggler_max``,
        the slowest worker's work minus the mean worker's;
    ``b1_latency``, ``b2_latency``
        from the last arrival at a barrier to my departure: the barrier's own cost
        (its messages, waking me up);
    ``reduce_scatter``
        summing my chunk of every worker's row (between B1 and B2), and ``rs_imbalance``,
        waiting at B2 for the slowest summer;
    ``step``
        from B2 to B2: the whole step. In every step the six parts add up to it.

    Also ``rs_gbytes_per_s``: the bytes the reduce-scatter reads and writes over all workers
    (every row's chunks, and the chunks of the sum), per second of the mean reduce-scatter.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> log = np.zeros((2, 5, 2))   # 2 workers, the start and 2 steps: (arrival, departure)
    >>> log[:, 0] = [[1, 2], [1, 2]]                                  # the start
    >>> log[:, 1] = [[4, 6], [6, 6]]; log[:, 2] = [[7, 7], [7, 7]]     # step 0: B1, B2
    >>> log[:, 3] = [[9, 11], [10, 11]]; log[:, 4] = [[12, 13], [11, 13]]  # step 1 (the first is skipped)
    >>> run = SimpleNamespace(extra={"barrier_log": log}, workers=2, steps=2, params=np.zeros(4, np.float32))
    >>> {k: float(v) for k, v in sync_breakdown(run).items() if k != "rs_gbytes_per_s"}
    {'work': 2.5, 'straggler': 0.5, 'b1_latency': 1.0, 'reduce_scatter': 0.5, 'rs_imbalance': 0.5, 'b2_latency': 1.0, 'step': 6.0, 'straggler_max': 0.5}
    """
    extra = getattr(result, "extra", None)
    if not isinstance(extra, dict):
        raise TypeError(f"result must be a run's TrainResult (train_data_parallel(..., log_barriers=True)), "
                        f"not {type(result).__name__}")
    skip = check_int(skip, "skip", 0)
    log = extra.get("barrier_log")
    if log is None:
        raise ValueError("the run has no barrier log: train it with log_barriers=True")
    n, steps = result.workers, result.steps
    if np.any((log[:, :, 0] > 0).sum(axis=1) != 1 + 2 * steps):  # the start, then B1 and B2 of every step
        raise ValueError("the barrier log does not hold two waits per step (backend 'shm', buckets=1, no ZeRO)")
    arrive, leave = log[:, : 1 + 2 * steps, 0], log[:, : 1 + 2 * steps, 1]
    prev, b1, b2 = slice(0, 2 * steps, 2), slice(1, 2 * steps, 2), slice(2, 2 * steps + 1, 2)  # (workers, steps)
    work = arrive[:, b1] - leave[:, prev]
    parts = {
        "work": work.mean(axis=0),
        "straggler": arrive[:, b1].max(axis=0) - arrive[:, b1].mean(axis=0),
        "b1_latency": (leave[:, b1] - arrive[:, b1].max(axis=0)).mean(axis=0),
        "reduce_scatter": (arrive[:, b2] - leave[:, b1]).mean(axis=0),
        "rs_imbalance": arrive[:, b2].max(axis=0) - arrive[:, b2].mean(axis=0),
        "b2_latency": (leave[:, b2] - arrive[:, b2].max(axis=0)).mean(axis=0),
        "step": (leave[:, b2] - leave[:, prev]).mean(axis=0),
        "straggler_max": work.max(axis=0) - work.mean(axis=0),
    }
    if per_step:
        return parts
    kept = slice(min(skip, steps - 1), None)
    out = {k: float(np.median(v[kept])) for k, v in parts.items()}
    moved = (n + 1) * result.params.nbytes if n > 1 else 0  # all workers: every row's chunks read, the sums written
    out["rs_gbytes_per_s"] = moved / out["reduce_scatter"] / 1e9 if out["reduce_scatter"] > 0 else math.nan
    return out
