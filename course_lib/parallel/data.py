r"""Data parallelism (数据并行): the step every worker runs.

Every step of mini-batch SGD computes the gradient of the loss over a global batch of
:math:`B` samples. Because that gradient is a **sum over samples**, it can be split:

.. math:: \nabla L = \frac{1}{B}\sum_{i=1}^{B} \nabla \ell_i
          = \frac{1}{B}\sum_{r=0}^{N-1} \underbrace{\sum_{i \in \text{shard}_r} \nabla \ell_i}_{g_r}

Worker :math:`r` of :math:`N` holds a full replica of the parameters, computes :math:`g_r`
on its shard of every batch (``loss_and_grad(..., reduction="sum")``), the workers add their
:math:`g_r` with an **all-reduce** (:mod:`course_lib.parallel.allreduce`), and every worker
applies the same update: the replicas stay identical without ever sending parameters.

:func:`worker_loop` is that step; :func:`overlap_worker_loop` the same step with the
all-reduce in buckets of layers, each started while the backward pass goes on with the
earlier layers (its step-time model: :mod:`course_lib.overlap`). ZeRO's loops, which shard
what each worker keeps, are in :mod:`course_lib.parallel.zero`.

Every loop takes the same arguments: ``wctx`` (the worker's rank and the run's size),
``job`` (the run, :class:`course_lib.parallel.engine.job.Job`), ``x`` (n, d) and ``y`` (n,)
(the whole data set, shared), ``p0`` (the initial parameters), ``comm`` (a communicator) and
``batches`` (the sample indices of every step's global batch, handed out by the engine, which
times each step). Each returns the final parameters, the gradient buffer, the optimizer and
the loss (summed over the worker's shard) of every step. :func:`course_lib.parallel.train.data.train_data_parallel`
runs them on processes.
"""

from __future__ import annotations

import numpy as np

from ..models import softmax_cross_entropy
from .partition import shard_bounds

__all__ = ["overlap_worker_loop", "worker_loop"]


def worker_loop(wctx, job, x, y, p0, comm, batches):
    """The data-parallel step: my shard's gradient sum, wait for the others, all-reduce, the
    same update as every other replica."""
    params = p0.copy()  # my replica of the parameters
    update, opt, losses = np.zeros_like(params), job.new_optimizer(), []
    grad = comm.gradient_buffer()  # my gradient, where the all-reduce reads it
    comm.start()  # every worker is ready: the clocks start together
    for idx in batches:  # this step's global batch
        lo, hi = shard_bounds(idx.size, job.workers)[wctx.rank]  # my shard of it
        loss, _ = job.model.loss_and_grad(params, x[idx[lo:hi]], y[idx[lo:hi]], reduction="sum", out=grad)
        comm.wait()  # every worker has its gradient
        total = comm.allreduce()  # the sum over all workers
        job.update(params, total, idx.size, opt, update)  # every replica: the same update
        losses.append(loss)
    return params, grad, opt, losses


def overlap_worker_loop(wctx, job, x, y, p0, comm, batches):
    """The data-parallel step with the all-reduce in buckets, overlapping the backward pass.

    As :func:`worker_loop`, but the backward pass runs layer by layer (last to first) and
    tells ``comm`` (a :class:`~course_lib.parallel.allreduce.BucketAllReduce`) each finished
    layer: a complete bucket is all-reduced by the worker's communication thread while the
    backward goes on; the update waits for every bucket.
    """
    params, model = p0.copy(), job.model
    update, opt, losses = np.zeros_like(params), job.new_optimizer(), []
    grad = comm.gradient_buffer()
    comm.start()  # every worker is ready (and its communication thread started)
    for idx in batches:
        lo, hi = shard_bounds(idx.size, job.workers)[wctx.rank]
        _, acts = model.forward(params, x[idx[lo:hi]])
        loss, g = softmax_cross_entropy(acts[-1], y[idx[lo:hi]], reduction="sum")
        grad.fill(0)
        for i in reversed(range(model.n_layers)):  # the last layer first
            g = model.layer_backward(params, i, acts[i], acts[i + 1], g, grad, need_input_grad=i > 0)
            comm.layer_done(i)  # a complete bucket is all-reduced now, while the backward goes on
        total = comm.finish()  # wait for every bucket
        job.update(params, total, idx.size, opt, update)  # every replica: the same update
        losses.append(loss)
    return params, grad, opt, losses
