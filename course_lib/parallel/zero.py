r"""ZeRO (零冗余优化器) stages 1, 2 and 3 in the data-parallel trainer: each worker keeps 1/N
of the optimizer state (stage 1), also of the gradients (stage 2), also of the parameters
(stage 3, fully sharded data parallelism, FSDP).

Plain data parallelism keeps a full copy of everything on every worker: parameters,
gradients and the optimizer state (for SGD with momentum one buffer as large as the
parameters; for Adam two). ZeRO (Rajbhandari et al., SC 2020) removes the redundancy.

Stage 1 (:func:`zero1_worker_loop`) shards the optimizer state: after the reduce-scatter
(Reduce-Scatter) worker ``r`` holds chunk ``r`` of the summed gradient - exactly the chunk
whose state it keeps - so it updates chunk ``r`` of the parameters alone and the all-gather
(All-Gather) shares the new parameters. The traffic is that of one all-reduce.

Stage 2 (:func:`zero2_worker_loop`) keeps only chunk ``r`` of the gradient too: the backward
pass runs layer by layer, and as soon as a layer's gradient is ready it goes out in a
reduce-scatter; worker ``r`` keeps the part that falls in its chunk. Same traffic.

Stage 3 (:func:`zero3_worker_loop`) keeps only chunk ``r`` of the parameters as well: before
a layer's forward and again before its backward the workers all-gather that layer's
parameters (a device frees them after use). Two all-gathers and one reduce-scatter of the
parameters' size per step instead of one of each: 1.5 times the traffic of an all-reduce.

The toy's network is shared memory (:class:`~course_lib.parallel.allreduce.ShmAllReduce`'s
buffers): a worker's row of ``grads`` is its send buffer (written layer by layer, read by
the others in the reduce-scatter), ``reduced`` the buffer the all-gathers fill. What a
worker keeps itself is counted by :func:`course_lib.memory.measured_state_bytes` (stage 2:
the whole parameters, a chunk of gradient and of state; stage 3: three chunks), to be set
beside :func:`course_lib.memory.model_state_bytes`. The bytes per step count every
reduce-scatter and all-gather of :math:`X` bytes as :math:`X/2`, so that an all-reduce (one
of each) counts :math:`X` as in plain data parallelism (:class:`LayerChunks`).

The loops take the arguments of :func:`course_lib.parallel.data.worker_loop` (stage 1's
communicator a :class:`~course_lib.parallel.allreduce.ShmAllReduce`, stages 2 and 3's
``layers`` its collectives layer by layer, :class:`LayerChunks`);
``train_data_parallel(..., zero_stage=s)`` runs them on processes.
"""

from __future__ import annotations

import numpy as np

from ..models import softmax_cross_entropy
from .engine.clock import timed
from .partition import shard_bounds, sum_rows

__all__ = ["LayerChunks", "zero1_worker_loop", "zero2_worker_loop", "zero3_worker_loop"]


def zero1_worker_loop(wctx, job, x, y, p0, comm, batches):
    """ZeRO stage 1: the data-parallel step with the optimizer state sharded.

    Per step: the gradient sum of this worker's shard of the batch, the reduce-scatter
    (this worker adds chunk ``r`` of every gradient), the optimizer step on chunk ``r``
    only (its state is 1/N of the whole), then the all-gather of the parameters.
    """
    params = p0.copy()
    mine = params[comm.lo : comm.hi]  # the chunk this worker updates (a view)
    update, opt, losses = np.zeros_like(mine), job.new_optimizer(), []  # state for 1/N of the numbers only
    grad = comm.gradient_buffer()
    comm.start()
    for idx in batches:
        lo, hi = shard_bounds(idx.size, job.workers)[wctx.rank]
        loss, _ = job.model.loss_and_grad(params, x[idx[lo:hi]], y[idx[lo:hi]], reduction="sum", out=grad)
        comm.wait()
        total = comm.reduce_scatter()  # chunk r of the summed gradient
        job.update(mine, total, idx.size, opt, update)  # my chunk, my 1/N of the state
        params[...] = comm.all_gather(mine)  # my new chunk for everyone, everyone's for me
        losses.append(loss)
    return params, grad, opt, losses


class LayerChunks:
    """ZeRO-2/3's collectives, one layer at a time, on the shared buffers of a
    :class:`~course_lib.parallel.allreduce.ShmAllReduce` (``grads``: one send row per worker;
    ``reduced``: the all-gather's target; worker ``r`` owns the flat chunk ``[lo, hi)``).

    Layer ``i`` occupies the slice ``model.layer_range(i, i + 1)`` of the flat buffer; the
    part of it in this worker's chunk is the worker's part of each collective. Every
    collective waits on the workers' barrier first (with the run's timeout).
    """

    monitor = None  # the step monitor that times these collectives (set by the engine)

    def __init__(self, comm, model):
        self.comm, self.lo, self.hi = comm, comm.lo, comm.hi
        self.layers = [model.layer_range(i, i + 1) for i in range(model.n_layers)]
        self._moved = 0.0

    def start(self) -> None:
        """Wait until every worker is ready (the clocks start together)."""
        self.comm.start()

    def _part(self, i: int) -> tuple[int, int]:
        """This worker's part of layer ``i``: flat ``[a, b)`` (empty when a >= b)."""
        s = self.layers[i]
        return max(s.start, self.lo), min(s.stop, self.hi)

    def _wait(self) -> None:
        self.comm.barrier.wait(self.comm.wctx.rank, self.comm.wctx.wait_timeout)

    def send_buffer(self, i: int) -> np.ndarray:
        """This worker's flat send row with layer ``i``'s slots zeroed (the backward adds into them)."""
        row = self.comm.grads[self.comm.wctx.rank]
        row[self.layers[i]] = 0
        return row

    @timed("communication")
    def reduce_scatter(self, i: int, out: np.ndarray) -> np.ndarray:
        """Once every worker has sent layer ``i``'s gradient: add this worker's part of it
        over all rows (in rank order) into ``out``, the worker's gradient chunk."""
        self._wait()
        a, b = self._part(i)
        if a < b:
            sum_rows(self.comm.grads[:, a:b], out[a - self.lo : b - self.lo])
        self._moved += self.comm.grads[0, self.layers[i]].nbytes / 2
        return out

    @timed("communication")
    def all_gather(self, mine: np.ndarray, i: int | None = None) -> np.ndarray:
        """Write this worker's part of layer ``i`` (None: of every layer) from its chunk
        ``mine``; once all have written, return the flat buffer (valid in those slots)."""
        s = slice(self.lo, self.hi) if i is None else slice(*self._part(i))
        if s.start < s.stop:
            self.comm.reduced[s] = mine[s.start - self.lo : s.stop - self.lo]
        self._wait()
        whole = slice(0, self.comm.reduced.size) if i is None else self.layers[i]
        self._moved += self.comm.reduced[whole].nbytes / 2
        return self.comm.reduced

    def moved(self) -> float:
        """Bytes moved since the last call (an all-reduce of X bytes counts X; nothing with
        one worker, who has nobody to exchange with)."""
        moved, self._moved = self._moved, 0.0
        return moved if self.comm.wctx.world_size > 1 else 0.0


def zero2_worker_loop(wctx, job, x, y, p0, layers, batches):
    """ZeRO stage 2: the gradients sharded too.

    The backward runs layer by layer; each layer's gradient leaves in a reduce-scatter as
    soon as it is ready, and this worker keeps only its chunk of the sum (``grad``, 1/N).
    The update and the all-gather are those of stage 1.
    """
    params = p0.copy()
    mine = params[layers.lo : layers.hi]  # the chunk this worker updates (a view)
    grad, update, opt, losses = np.zeros_like(mine), np.zeros_like(mine), job.new_optimizer(), []  # 1/N each
    layers.start()
    for idx in batches:
        lo, hi = shard_bounds(idx.size, job.workers)[wctx.rank]
        _, acts = job.model.forward(params, x[idx[lo:hi]])
        loss, g = softmax_cross_entropy(acts[-1], y[idx[lo:hi]], reduction="sum")
        for i in reversed(range(job.model.n_layers)):  # the backward, layer by layer
            g = job.model.layer_backward(params, i, acts[i], acts[i + 1], g, layers.send_buffer(i),
                                         need_input_grad=i > 0)
            layers.reduce_scatter(i, out=grad)  # my chunk of layer i's summed gradient
        job.update(mine, grad, idx.size, opt, update)  # my chunk, my 1/N of the state
        params[...] = layers.all_gather(mine)  # everyone's new chunks
        losses.append(loss)
    return params, grad, opt, losses


def zero3_worker_loop(wctx, job, x, y, p0, layers, batches):
    """ZeRO stage 3 (FSDP): the parameters sharded too.

    This worker keeps chunk ``r`` of the parameters (``mine``) only. Before each layer's
    forward, and again before its backward, the workers all-gather that layer's
    parameters; the gradient leaves layer by layer as in stage 2. Returns the parameters
    gathered once more after the last step (for the result), the gradient chunk, the
    optimizer, the losses and ``mine``: what the worker kept.
    """
    mine, n_layers = p0[layers.lo : layers.hi].copy(), job.model.n_layers  # my chunk of the parameters
    grad, update, opt, losses = np.zeros_like(mine), np.zeros_like(mine), job.new_optimizer(), []  # 1/N each
    layers.start()
    for idx in batches:
        lo, hi = shard_bounds(idx.size, job.workers)[wctx.rank]
        acts = [x[idx[lo:hi]]]
        for i in range(n_layers):  # the forward, layer by layer
            w = layers.all_gather(mine, i)  # layer i's parameters, from every worker
            acts.append(job.model.layer_forward(w, i, acts[-1]))
        loss, g = softmax_cross_entropy(acts[-1], y[idx[lo:hi]], reduction="sum")
        for i in reversed(range(n_layers)):  # the backward, layer by layer
            w = layers.all_gather(mine, i)  # again: a device freed them after the forward
            g = job.model.layer_backward(w, i, acts[i], acts[i + 1], g, layers.send_buffer(i),
                                         need_input_grad=i > 0)
            layers.reduce_scatter(i, out=grad)  # my chunk of layer i's summed gradient
        job.update(mine, grad, idx.size, opt, update)  # my chunk only
        losses.append(loss)
    return layers.all_gather(mine).copy(), grad, opt, losses, mine
