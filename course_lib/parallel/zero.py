r"""ZeRO stage 1 (零冗余优化器) in the data-parallel trainer: each worker keeps 1/N of the
optimizer state.

Plain data parallelism keeps a full copy of everything on every worker: parameters,
gradients and the optimizer state (for SGD with momentum one buffer as large as the
parameters; for Adam two). ZeRO (Rajbhandari et al., SC 2020) removes the redundancy.
Stage 1 shards the optimizer state: after the reduce-scatter (Reduce-Scatter) worker ``r``
holds chunk ``r`` of the summed gradient - exactly the chunk whose state it keeps - so
it updates chunk ``r`` of the parameters alone and the all-gather (All-Gather) shares the
new parameters. The traffic is that of one all-reduce, as before; the state per worker
drops to ``1/N`` (:func:`course_lib.memory.model_state_bytes` counts it by formula).

:func:`zero_worker_loop` is what every worker runs with
``train_data_parallel(..., zero_stage=1)``; notebook 05, "ZeRO", shows it.
"""

from __future__ import annotations

import hashlib
import time

import numpy as np

from .._validate import check_type
from ..timing import blas_threads as _blas
from ..timing import current_blas_threads
from .allreduce import ShmAllReduce
from .data import Job, model_state_nbytes
from .partition import shard_bounds
from .workers import WorkerContext

__all__ = ["zero_worker_loop"]


def zero_worker_loop(wctx: WorkerContext, job: Job, x, y, p0, comm: ShmAllReduce) -> dict:
    """The data-parallel step loop with the optimizer state sharded (notebook 05, "ZeRO").

    Per step: the gradient sum of this worker's shard of the batch, the reduce-scatter
    (this worker adds chunk ``r`` of every gradient), the optimizer step on chunk ``r``
    only (its state is 1/N of the whole), then the all-gather of the parameters.
    """
    check_type(wctx, "wctx", WorkerContext, "a WorkerContext")
    check_type(job, "job", Job, "a Job (check_job)")
    check_type(comm, "comm", ShmAllReduce, "a ShmAllReduce (reduce-scatter + all-gather)")
    model, lo, hi = job.model, comm.lo, comm.hi
    with _blas(job.blas_threads):
        params = p0.copy()
        mine = params[lo:hi]  # the chunk this worker updates (a view)
        update, opt = np.zeros_like(mine), job.new_optimizer()  # state for hi - lo numbers only
        grad = comm.gradient_buffer()
        timings = np.zeros((job.steps, 4))
        losses, samples = np.zeros(job.steps), np.zeros(job.steps, dtype=int)
        blas = current_blas_threads()
        comm.start()
        ready = time.time()
        for step, idx in enumerate(job.schedule()):
            if job.fault is not None:
                job.fault.maybe_fire(wctx.rank, step)
            t0 = time.perf_counter()
            b_lo, b_hi = shard_bounds(idx.size, job.workers)[wctx.rank]
            sub, samples[step] = idx[b_lo:b_hi], idx.size
            losses[step], _ = model.loss_and_grad(params, x[sub], y[sub], reduction="sum", out=grad)
            t1 = time.perf_counter()
            wctx.progress(2 * step + 1)
            comm.wait()
            t2 = time.perf_counter()
            total = comm.reduce_scatter()  # chunk r of the summed gradient
            t3 = time.perf_counter()
            job.update(mine, total, idx.size, opt, update)  # my chunk, my 1/N of the state
            t4 = time.perf_counter()
            total[...] = mine  # my new parameters, for everyone
            params[...] = comm.allgather()
            t5 = time.perf_counter()
            timings[step] = (t1 - t0 + t4 - t3, t2 - t1, t3 - t2 + t5 - t4, t5 - t0)
            wctx.progress(2 * step + 2)
        memory = model_state_nbytes(params, grad, opt)  # what this worker holds
        del total, grad
    return {
        "timings": timings, "losses": losses, "samples": samples, "bytes": np.full(job.steps, params.nbytes),
        "digest": hashlib.sha256(params.tobytes()).hexdigest(), "ready": ready, "blas_threads": blas,
        "memory": memory,
        "params": params if wctx.rank == 0 else None,
    }
