"""The expert-parallel trainer: a mixture of experts (:class:`course_lib.moe.MoE`) with its
experts placed on processes (:mod:`course_lib.parallel.experts`), tokens dispatched and
combined by all-to-alls through shared memory.

Examples
--------
>>> from course_lib.moe import MoE
>>> from course_lib.parallel.train.reference import train_serial
>>> model = MoE(inputs=8, hidden=6, experts=4, expert_hidden=5, classes=3, top_k=2, capacity_factor=1.0)
>>> rng = np.random.default_rng(0); x = rng.random((40, 8)); y = rng.integers(0, 3, 40)
>>> kw = dict(batch_size=20, steps=4, lr=0.5, seed=1)
>>> ep = train_expert_parallel(model, x, y, workers=2, start_method="fork", **kw)
>>> float(np.abs(ep.params - train_serial(model, x, y, **kw).params).max()) < 1e-6
True
>>> bool(np.array_equal(ep.extra["bytes"], ep.extra["bytes_formula"]))   # measured = counted from the routing
True
"""

from __future__ import annotations

import time

import numpy as np

from ..._validate import check_int, check_type
from ...i18n import tr
from ...models import TrainResult
from ...moe import MoE
from ...timing import blas_threads as _blas
from ...timing import current_blas_threads
from ..allreduce import ShmAllReduce
from ..engine.clock import StepMonitor, increase
from ..engine.job import Job, check_job, run_keywords
from ..engine.launch import Launcher
from ..exchange import ShmAllToAll
from ..experts import ExpertShard, alltoall_rows, expert_worker_loop, kept_counts
from .context import cpu_busy
from .data import collect, report

__all__ = ["PRELOAD", "alltoall_bytes", "check_expert_split", "train_expert_parallel"]

PRELOAD = ("course_lib.parallel.engine.workers", "course_lib.models", "course_lib.moe",
           "course_lib.parallel.train.experts", "threadpoolctl")


def check_expert_split(model, workers) -> int:
    """``workers`` as an int that divides ``model.experts`` (every worker the same number of
    experts), else ValueError/TypeError naming the parameter."""
    check_type(model, "model", MoE, "a course_lib.moe.MoE")
    workers = check_int(workers, "workers", 1, model.experts)
    if model.experts % workers:
        raise ValueError(f"workers must divide the E = {model.experts} experts (each worker holds E / workers "
                         f"of them), got {workers}")
    return workers


def alltoall_bytes(rows: np.ndarray, width: int, itemsize: int = 8) -> np.ndarray:
    """Bytes each worker receives from the others in one step's four all-to-alls, from the
    ``(N, N)`` tokens worker ``i`` dispatches to worker ``j``
    (:func:`course_lib.parallel.experts.alltoall_rows`): the dispatch brings it the tokens of
    its experts, the combine its own tokens' outputs, the backward both again; ``width``
    values of ``itemsize`` bytes a token.

    Examples
    --------
    >>> alltoall_bytes(np.array([[2, 2], [1, 1]]), width=6).tolist()   # (1 in + 2 out) x 2 x 6 x 8
    [288, 288]
    """
    rows = np.asarray(rows)
    others = rows - np.diag(np.diag(rows))  # what stays on a worker moves nothing
    return (2 * (others.sum(axis=0) + others.sum(axis=1)) * width * itemsize).astype(np.int64)


@run_keywords()
def train_expert_parallel(model: MoE, x: np.ndarray, y: np.ndarray, *, workers: int, **run) -> TrainResult:
    """Train a mixture of experts with its ``E`` experts spread over ``workers`` processes.

    Worker ``j`` holds the dense parameters and experts ``j E/N ... (j+1) E/N - 1`` and
    computes on its shard of every batch; tokens reach their experts and come back by
    all-to-all (every worker's routing counts are shared first, an all-gather of
    ``top_k x E`` counts, so that all know what the experts keep: the serial model's choice,
    first choices first, up to the capacity); the dense gradients are all-reduced. Equal to
    :func:`course_lib.parallel.train.reference.train_serial` on the same model within rounding.
    The experts, their number, ``top_k``, ``capacity_factor`` and ``aux_weight`` are the
    model's (:class:`course_lib.moe.MoE`).

    Parameters
    ----------
    model : course_lib.moe.MoE
    x, y : numpy.ndarray
        Digits ``(n, inputs)`` and labels ``(n,)``.
    workers : int
        Processes ``N_e``: a divisor of ``model.experts`` (and at most ``batch_size``).

    Returns
    -------
    course_lib.models.TrainResult
        ``backend="experts"``; ``memory`` per worker: the bytes of what it holds (dense
        parameters and its experts) and of their gradients; ``bytes_per_step`` what worker 0
        received in the all-to-alls. ``extra``: ``routed`` (steps, top_k, E) assignments
        routed to each expert, ``kept`` (steps, E) those it served, ``dropped`` (steps,),
        ``capacity`` (steps,), ``rows`` (steps, N, N) tokens worker i dispatched to worker j,
        ``bytes`` (steps, N) each worker received, measured, and ``bytes_formula`` the same
        counted from ``rows`` (:func:`alltoall_bytes`), ``counts_bytes`` (steps,) of the
        all-gather of the counts, ``served`` (steps, N) the tokens each worker's experts
        served, ``expert_time`` (steps, N) the CPU seconds each worker spent in its experts
        (forward and backward), ``ops`` each worker's timeline.

    Raises
    ------
    ValueError, TypeError
        Bad arguments, naming the parameter and its range.
    course_lib.parallel.engine.workers.WorkerError, WorkerDied, WorkerTimeout
        A worker failed; every worker has been stopped and all shared memory removed.
    """
    t_call = time.perf_counter()
    check_type(model, "model", MoE, "a course_lib.moe.MoE")
    x, y, p0, job = check_job(model, x, y, workers=workers, models=(MoE,), backend="experts", **run)
    workers = check_expert_split(job.model, job.workers)
    m, dense = job.model, job.model.n_dense
    shard = -(-job.batch_size // workers)  # the most tokens of a worker's shard
    rows = min(m.top_k * shard, m.capacity(job.batch_size) * (m.experts // workers))  # the largest block
    t_wall = time.time()
    with Launcher(job.start_method) as launch:
        arrays = [launch.shared(x.shape, x.dtype, x), launch.shared(y.shape, np.int64, y),
                  launch.shared(p0.shape, p0.dtype, p0), launch.shared((workers, dense), p0.dtype),
                  launch.shared(dense, p0.dtype), launch.shared((2, workers, workers, max(rows, 1) * m.hidden), p0.dtype),
                  launch.shared((2, workers, workers, m.top_k * m.experts), np.int64)]
        results = launch.run(_worker, workers, args=(job, [a.spec for a in arrays], launch.barrier(workers)),
                             timeout=job.timeout, name="ddl-ep", preload=PRELOAD, progress_total=2 * job.steps,
                             progress=job.progress, progress_label=tr("expert parallel"))
    params = results[0]["params"].copy()
    per = m.experts // workers * m.expert_size
    for rank, r in enumerate(results):  # each worker's experts from their owner
        params[dense + rank * per : dense + (rank + 1) * per] = r["params"][dense + rank * per : dense + (rank + 1) * per]
    result = collect(results, job, t_call, t_wall, params=params)
    routed = np.stack([c.sum(axis=0) for c in results[0]["routed"]])  # (steps, top_k, E)
    caps = np.array([m.capacity(idx.size) for idx in job.batches()])
    kept = np.stack([kept_counts(c, cap).sum(axis=(0, 1)) for c, cap in zip(results[0]["routed"], caps)])
    moves = np.stack([alltoall_rows(kept_counts(c, cap), workers) for c, cap in zip(results[0]["routed"], caps)])
    result.extra.update(
        routed=routed, kept=kept, dropped=routed.sum(axis=(1, 2)) - kept.sum(axis=1), capacity=caps, rows=moves,
        bytes=np.stack([r["bytes"] for r in results], axis=1),
        bytes_formula=np.stack([alltoall_bytes(rw, m.hidden, p0.itemsize) for rw in moves]),
        counts_bytes=results[0]["counts_bytes"], expert_time=np.stack([r["expert_time"] for r in results], axis=1),
        served=np.stack([r["served"] for r in results], axis=1),
        ops=[r["ops"] for r in results])
    return result


class _Recorded:
    """The counts all-gather, keeping what it returned each step (the routing histogram)."""

    def __init__(self, exchange):
        self.exchange, self.seen = exchange, []

    def __call__(self, blocks):
        out = self.exchange(blocks)
        self.seen.append(np.stack(out))
        return out


def _worker(wctx, job: Job, specs, barrier) -> dict:
    """One expert-parallel worker (runs in a child process): attach, run the loop, report."""
    x_spec, y_spec, p_spec, g_spec, r_spec, box_spec, count_spec = specs
    monitor = StepMonitor(wctx, job.steps, job.fault)
    model = job.model
    with x_spec.attach() as x, y_spec.attach() as y, p_spec.attach() as p0, g_spec.attach() as grads, \
            r_spec.attach() as reduced, box_spec.attach() as boxes, count_spec.attach() as count_boxes, \
            _blas(job.blas_threads):
        blas = current_blas_threads()
        params, grad = p0.copy(), np.zeros_like(p0)
        comm, exchange = ShmAllReduce(wctx, grads, reduced, barrier), ShmAllToAll(wctx, boxes, barrier)
        counts = ShmAllToAll(wctx, count_boxes, barrier)
        shard = ExpertShard(model, model.views(params), model.views(grad), exchange, wctx.rank, wctx.world_size)
        for part in (comm, exchange, counts, shard):
            part.monitor = monitor
        gather, busy = _Recorded(counts), cpu_busy(shard, "serve", "serve_backward")
        steps = monitor.steps(job.batches(), counts={"bytes": increase(lambda: exchange.moved),
                                                     "counts": increase(lambda: counts.moved),
                                                     "busy": increase(lambda: busy[0]),
                                                     "served": increase(lambda: int(shard.served.sum()))})
        losses = expert_worker_loop(wctx, job, x, y, params, grad, shard, comm, gather, steps)
        comm = exchange = counts = shard = None  # no view of the shared arrays outlives them
    held = (model.n_dense + model.experts // wctx.world_size * model.expert_size) * p0.itemsize
    memory = {"parameters": held, "gradients": held, "optimizer_states": 0}
    return report(monitor, losses, digest_of=[params[: model.n_dense]], memory=memory, blas=blas, params=params,
                  routed=gather.seen, counts_bytes=monitor.counts.get("counts", np.zeros(job.steps)).astype(np.int64),
                  expert_time=monitor.counts["busy"], served=monitor.counts["served"].astype(np.int64), ops=monitor.ops)

