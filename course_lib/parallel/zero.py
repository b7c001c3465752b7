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
``train_data_parallel(..., zero_stage=1)``; notebook 08, "ZeRO", shows it.
"""

from __future__ import annotations

import numpy as np

from .allreduce import ShmAllReduce
from .job import Job
from .launch import StepClock
from .partition import shard_bounds
from .workers import WorkerContext

__all__ = ["zero_worker_loop"]


def zero_worker_loop(wctx: WorkerContext, job: Job, x, y, p0, comm: ShmAllReduce, clock: StepClock):
    """The data-parallel step loop with the optimizer state sharded (notebook 08, "ZeRO").

    Per step: the gradient sum of this worker's shard of the batch, the reduce-scatter
    (this worker adds chunk ``r`` of every gradient), the optimizer step on chunk ``r``
    only (its state is 1/N of the whole), then the all-gather of the parameters.
    """
    params = p0.copy()
    mine = params[comm.lo : comm.hi]  # the chunk this worker updates (a view)
    update, opt = np.zeros_like(mine), job.new_optimizer()  # state for 1/N of the numbers only
    grad = comm.gradient_buffer()
    comm.start()
    for idx in clock.steps(job.schedule()):
        lo, hi = shard_bounds(idx.size, job.workers)[wctx.rank]
        with clock("compute"):
            loss, _ = job.model.loss_and_grad(params, x[idx[lo:hi]], y[idx[lo:hi]], reduction="sum", out=grad)
        with clock("waiting"):
            comm.wait()
        with clock("communication"):
            total = comm.reduce_scatter()  # chunk r of the summed gradient
        with clock("compute"):
            job.update(mine, total, idx.size, opt, update)  # my chunk, my 1/N of the state
        with clock("communication"):
            total[...] = mine  # my new parameters, for everyone
            params[...] = comm.allgather()
        clock.add(loss=loss, samples=idx.size, bytes=params.nbytes)
    return params, grad, opt
