r"""Tensor parallelism (张量并行) on the running example: one operator split over workers.

The source chapter's last kind of inter-operator parallelism decouples *one* operator
into several equivalent ones. For a pair of linear layers (Megatron-LM's MLP split)
with weights :math:`A` (``d_in x h``) and :math:`B` (``h x d_out``):

.. math:: Y = \operatorname{relu}(X A)\, B
          = \sum_{r=0}^{N-1} \operatorname{relu}(X A_{:, c_r})\, B_{c_r, :}

Worker :math:`r` holds the column block :math:`A_{:, c_r}` of the first layer and the
row block :math:`B_{c_r, :}` of the second (``c_r`` from
:func:`course_lib.parallel.partition.shard_bounds`, uneven when :math:`N` does not
divide :math:`h`). ReLU acts element by element, so the hidden columns need no
communication; the partial outputs are summed with one **all-reduce** (the "g"
operator: all-reduce forward, identity backward). In the backward pass the mirror
image holds: the input gradient :math:`\sum_r dH_{c_r} A_{:, c_r}^T` needs one
all-reduce (the "f" operator: identity forward, all-reduce backward), which the very
first layer skips. Each worker sees the whole batch, holds ``1/N`` of the pair's
weights, and moves activations, never gradients of weights. An unpaired last layer is
replicated: every worker computes it whole, with the same bits.

:func:`train_tensor_parallel` runs this with real processes (the machinery of
:mod:`course_lib.parallel.workers`, the all-reduce of
:class:`course_lib.parallel.allreduce.ShmAllReduce`); :func:`tensor_parallel_bytes`
counts the bytes of one step's all-reduces by formula. Notebook 11, "Tensor
parallelism", shows :func:`tensor_forward` and :func:`tensor_backward`.

Examples
--------
>>> from course_lib.models import MLP
>>> from course_lib.reference import train_serial
>>> model = MLP((8, 10, 6, 3))            # one pair (layers 0, 1) and a replicated layer 2
>>> rng = np.random.default_rng(0)
>>> x = rng.random((40, 8), dtype=np.float32); y = rng.integers(0, 3, 40)
>>> kw = dict(batch_size=16, steps=4, lr=0.5, seed=1)
>>> tp = train_tensor_parallel(model, x, y, workers=3, start_method="fork", **kw)
>>> float(np.abs(tp.params - train_serial(model, x, y, **kw).params).max()) < 1e-6
True
>>> int(tp.bytes_per_step[0]) == tensor_parallel_bytes(model, 16) == 16 * 6 * 4
True
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import numpy as np

from .._validate import check_int, check_positive, check_type
from ..models import MLP, TrainResult, softmax_cross_entropy
from ..timing import blas_threads as _blas
from ..timing import current_blas_threads
from .allreduce import ShmAllReduce
from .data import collect
from .job import Job, check_job, start_params
from .launch import Launcher, StepClock
from .partition import shard_bounds
from .workers import Fault, WorkerContext, check_start_method

__all__ = [
    "LayerShard",
    "gather_params",
    "layer_shards",
    "tensor_backward",
    "tensor_forward",
    "tensor_parallel_bytes",
    "train_tensor_parallel",
]

PRELOAD = ("course_lib.parallel.workers", "course_lib.models", "course_lib.parallel.tensor", "threadpoolctl")


@dataclass(frozen=True)
class LayerShard:
    """The block of one layer that one worker holds.

    ``role`` is ``"column"`` (first layer of a pair: weight columns ``cols``, bias
    ``cols``), ``"row"`` (second layer: weight rows ``rows``, the whole bias) or
    ``"replicated"`` (an unpaired last layer: everything).
    """

    layer: int
    role: str
    rows: slice
    cols: slice
    bias: slice


def layer_shards(model: MLP, workers: int, rank: int) -> list[LayerShard]:
    """What worker ``rank`` of ``workers`` holds of every layer of ``model``.

    Layers ``(0, 1), (2, 3), ...`` form pairs split over the hidden width of the pair
    (``model.sizes[i + 1]`` for the pair starting at layer ``i``); an odd last layer is
    replicated. With more workers than hidden units some blocks are empty.

    Examples
    --------
    >>> [(s.role, s.cols) for s in layer_shards(MLP((4, 5, 3)), 2, 1)]
    [('column', slice(3, 5, None)), ('row', slice(None, None, None))]
    >>> layer_shards(MLP((4, 5, 3)), 2, 1)[1].rows
    slice(3, 5, None)
    """
    check_type(model, "model", MLP, "a course_lib.models.MLP")
    workers = check_int(workers, "workers", 1, 2**20)
    rank = check_int(rank, "rank", 0, workers - 1)
    every = slice(None)
    shards = []
    for i in range(model.n_layers):
        if i % 2 == 0 and i + 1 < model.n_layers:
            lo, hi = shard_bounds(model.sizes[i + 1], workers)[rank]
            shards.append(LayerShard(i, "column", every, slice(lo, hi), slice(lo, hi)))
        elif i % 2 == 1:
            hidden = shards[-1].cols
            shards.append(LayerShard(i, "row", hidden, every, every))
        else:
            shards.append(LayerShard(i, "replicated", every, every, every))
    return shards


def _local_params(model: MLP, flat: np.ndarray, shards: list[LayerShard]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Copies of this worker's blocks ``(W, b)`` of every layer (contiguous arrays)."""
    out = []
    for s in shards:
        w, b = model.layer(flat, s.layer)
        out.append((w[s.rows, s.cols].copy(order="C"), b[s.bias].copy()))  # never a view of p0
    return out


def gather_params(model: MLP, blocks: list[list[tuple[np.ndarray, np.ndarray]]]) -> np.ndarray:
    """Assemble every worker's blocks (``blocks[rank][layer] = (W, b)``) into one flat
    buffer laid out as ``model``'s (replicated pieces from rank 0).

    Examples
    --------
    >>> m = MLP((3, 4, 2)); p = m.init_params(0)
    >>> parts = [_local_params(m, p, layer_shards(m, 3, r)) for r in range(3)]
    >>> bool(np.array_equal(gather_params(m, parts), p))
    True
    """
    check_type(model, "model", MLP, "a course_lib.models.MLP")
    flat = np.zeros(model.n_params, dtype=model.dtype)
    for rank, local in enumerate(blocks):
        for s, (w_loc, b_loc) in zip(layer_shards(model, len(blocks), rank), local, strict=True):
            w, b = model.layer(flat, s.layer)
            w[s.rows, s.cols] = w_loc
            if s.role == "column" or rank == 0:
                b[s.bias] = b_loc
    return flat


def tensor_parallel_bytes(model: MLP, batch_size: int) -> int:
    """Payload bytes of the activation all-reduces of one training step, forward + backward.

    Per layer pair ``(i, i + 1)``: one all-reduce of the pair's output (``batch x
    sizes[i + 2]``) in the forward pass and one of the input gradient (``batch x
    sizes[i]``) in the backward pass, except for the first pair, whose input (the data)
    needs no gradient. A replicated last layer moves nothing. Each all-reduce of ``m``
    bytes costs a ring :math:`2 (N - 1) / N \\cdot m` bytes per worker
    (:func:`course_lib.comm.ring_allreduce_time`).

    Examples
    --------
    >>> tensor_parallel_bytes(MLP((64, 1024, 1024, 1024, 10)), 256)  # 2 pairs, float32
    2107392
    >>> 256 * 4 * (1024 + 10 + 1024)  # forward: 1,024 and 10 wide; backward: 1,024 wide
    2107392
    """
    check_type(model, "model", MLP, "a course_lib.models.MLP")
    batch_size = check_int(batch_size, "batch_size", 1, 2**40)
    elements = 0
    for i in range(0, model.n_layers - 1, 2):
        elements += model.sizes[i + 2]  # forward: the pair's output
        if i > 0:
            elements += model.sizes[i]  # backward: the pair's input gradient
    return batch_size * elements * model.dtype.itemsize


# ------------------------------------------------------------------ the maths
def tensor_forward(local, shards: list[LayerShard], x: np.ndarray, allreduce) -> list[np.ndarray]:
    """Forward pass of one worker (notebook 11, "Tensor parallelism").

    ``local[i] = (W, b)`` are the worker's blocks, ``allreduce(part)`` returns the sum
    of ``part`` over all workers. Returns the activations the backward pass needs:
    ``acts[0] = x``, then every layer's output (the hidden block of a pair, the full
    output after a pair's all-reduce); ``acts[-1]`` are the logits, the same on every
    worker.
    """
    acts, last = [x], len(shards) - 1
    for s, (w, b) in zip(shards, local, strict=True):
        if s.role == "column":  # my hidden columns: no communication ("f": identity)
            z = acts[-1] @ w
            z += b
            np.maximum(z, 0, out=z)
        else:
            z = acts[-1] @ w  # "row": my partial sum; "replicated": the whole product
            if s.role == "row":
                z = allreduce(z)  # "g": add the partial outputs of all workers
            z += b
            if s.layer < last:
                np.maximum(z, 0, out=z)
        acts.append(z)
    return acts


def tensor_backward(local, shards: list[LayerShard], acts: list[np.ndarray], dlogits: np.ndarray,
                    grads, allreduce) -> None:
    """Backward pass of one worker: ADD its blocks' gradients into ``grads`` (same
    layout as ``local``). The input gradient of a pair is an all-reduce ("f" backward),
    except before the first layer (notebook 11, "Tensor parallelism")."""
    g, last = dlogits, len(shards) - 1
    for s in reversed(shards):
        (w, _), (gw, gb) = local[s.layer], grads[s.layer]
        a_in, a_out = acts[s.layer], acts[s.layer + 1]
        dz = g * (a_out > 0) if s.layer < last else g
        gw += a_in.T @ dz
        gb += dz.sum(axis=0)
        if s.layer == 0:
            break
        g = dz @ w.T  # "row": the gradient of my hidden block, nothing to add
        if s.role == "column":  # the pair's input gradient: a sum over workers
            g = allreduce(g)


# ------------------------------------------------------------------ processes
def train_tensor_parallel(
    model: MLP, x: np.ndarray, y: np.ndarray, *, workers: int, batch_size: int = 32,
    steps: int | None = None, epochs: int | None = None, lr: float = 0.1, seed: int = 0,
    params: np.ndarray | None = None, blas_threads: int | None = 1,
    start_method: str | None = None, timeout: float = 60.0, progress: bool | None = None,
    fault: Fault | None = None,
) -> TrainResult:
    """Train with every pair of layers split over ``workers`` processes (Megatron-style).

    Every worker sees the whole batch and holds only its blocks of the weights
    (:func:`layer_shards`); activations are summed through shared memory with the
    reduce-scatter + all-gather of :class:`course_lib.parallel.allreduce.ShmAllReduce`.

    Parameters
    ----------
    model, x, y, batch_size, steps, epochs, lr, seed, params, blas_threads, start_method, timeout, progress, fault
        As in :func:`course_lib.parallel.data.train_data_parallel`; here ``workers``
        may exceed the batch or a hidden width (some blocks are then empty).
    workers : int
        Number of worker processes, >= 1.

    Returns
    -------
    course_lib.models.TrainResult
        ``backend="tensor"``; ``params`` flat, laid out as
        :func:`course_lib.reference.train_serial`'s (the blocks gathered);
        ``communication`` and ``waiting`` are the time in the activation all-reduces;
        ``bytes_per_step`` their payload bytes; ``memory`` the bytes of each worker's
        blocks and of their gradients.

    Raises
    ------
    ValueError, TypeError
        Bad arguments (naming the parameter).
    course_lib.parallel.workers.WorkerError, WorkerDied, WorkerTimeout
        A worker failed; every worker has been stopped and all shared memory removed.
    """
    t_call = time.perf_counter()
    x, y, job = check_job(model, x, y, batch_size, steps, epochs, lr, seed, workers, blas_threads,
                          fault, batch_split=False)
    start_method = check_start_method(start_method)
    timeout = check_positive(timeout, "timeout")
    p0 = start_params(model, params, job.seed)
    t_wall = time.time()
    width = job.batch_size * max(model.sizes)  # the widest activation all-reduced
    results = run_tensor_workers(_worker, job, x, y, p0, width, start_method=start_method, timeout=timeout,
                                 progress=progress, name="ddl-tp", label="tensor parallel", preload=PRELOAD)
    return collect(results, job, "tensor", start_method, t_call, t_wall, loss=np.asarray(results[0]["losses"]),
                   params=gather_params(model, [r["blocks"] for r in results]))


def run_tensor_workers(worker, job: Job, x, y, p0, width: int, *, start_method: str, timeout: float, progress,
                       name: str, label: str, preload) -> list[dict]:
    """Run ``worker`` in ``job.workers`` processes of a tensor-parallel trainer (the MLP's and
    the transformer's): the data, the starting parameters and the activation all-reduce's
    buffers (``width`` values per worker) shared, one barrier; their reports in rank order."""
    with Launcher(start_method) as launch:
        arrays = [launch.shared(x.shape, x.dtype, x), launch.shared(y.shape, np.int64, y),
                  launch.shared(p0.shape, p0.dtype, p0), launch.shared((job.workers, width), p0.dtype),
                  launch.shared(width, p0.dtype)]
        return launch.run(worker, job.workers, args=(job, [a.spec for a in arrays], launch.barrier(job.workers)),
                          timeout=timeout, name=name, preload=preload, progress_total=2 * job.steps,
                          progress=progress, progress_label=label)


class _ActivationAllReduce:
    """``allreduce(part)``: :class:`ShmAllReduce` over the first ``part.size`` elements of
    the shared rows; the clock times the waiting and the reduction and counts the bytes."""

    def __init__(self, wctx: WorkerContext, rows: np.ndarray, reduced: np.ndarray, barrier, clock: StepClock):
        self.wctx, self.rows, self.reduced, self.barrier, self.clock = wctx, rows, reduced, barrier, clock

    def __call__(self, part: np.ndarray) -> np.ndarray:
        n = part.size
        comm = ShmAllReduce(self.wctx, self.rows[:, :n], self.reduced[:n], self.barrier)
        with self.clock("waiting"):
            np.copyto(self.rows[self.wctx.rank, :n], part.reshape(-1))
            comm.wait()  # every worker has written its part
        with self.clock("communication"):
            total = comm.allreduce().reshape(part.shape).copy()  # copied before the next write
        self.clock.add(bytes=part.nbytes)
        return total


def _worker(wctx: WorkerContext, job: Job, specs, barrier) -> dict:
    """One tensor-parallel worker (runs in a child process): attach, run the loop, report."""
    x_spec, y_spec, p_spec, rows_spec, red_spec = specs
    clock = StepClock(wctx, job.steps, job.fault)
    with x_spec.attach() as x, y_spec.attach() as y, p_spec.attach() as p0, \
            rows_spec.attach() as rows, red_spec.attach() as reduced, _blas(job.blas_threads):
        blas = current_blas_threads()  # reported, so tests can check the limit took effect
        allreduce = _ActivationAllReduce(wctx, rows, reduced, barrier, clock)
        shards, local = tensor_worker_loop(wctx, job, x, y, p0, allreduce, clock)
        del allreduce
    same = [a for s, (w, b) in zip(shards, local, strict=True) if s.role != "column"
            for a in ((b,) if s.role == "row" else (w, b))]  # what every worker holds whole
    digest = hashlib.sha256(b"".join(a.tobytes() for a in same))
    held = sum(w.nbytes + b.nbytes for w, b in local)  # the loop's gradients: one array like each block
    memory = {"parameters": held, "gradients": held, "optimizer_states": 0}
    return {"timings": clock.phases("compute", "waiting", "communication", "step"), "memory": memory,
            "losses": clock.counts["loss"], "bytes": clock.counts.get("bytes", np.zeros(job.steps)).astype(int),
            "blocks": local, "ready": clock.ready, "digest": digest.hexdigest(), "blas_threads": blas}


def tensor_worker_loop(wctx: WorkerContext, job: Job, x, y, p0, allreduce, clock: StepClock):
    """The loop every tensor-parallel worker runs: forward with my blocks, loss, backward,
    update my blocks (notebook 11, "Tensor parallelism")."""
    shards = layer_shards(job.model, job.workers, wctx.rank)
    local = _local_params(job.model, p0, shards)
    grads = [(np.zeros_like(w), np.zeros_like(b)) for w, b in local]
    allreduce.barrier.wait(wctx.rank, wctx.wait_timeout)  # start the clock together
    for idx in clock.steps(job.schedule()):
        with clock("compute"):  # the all-reduces inside time themselves
            acts = tensor_forward(local, shards, x[idx], allreduce)
            loss, dlogits = softmax_cross_entropy(acts[-1], y[idx], reduction="sum")
            for gw, gb in grads:
                gw.fill(0)
                gb.fill(0)
            tensor_backward(local, shards, acts, dlogits, grads, allreduce)
            for (w, b), (gw, gb) in zip(local, grads, strict=True):
                w -= gw * job.scale(idx.size)
                b -= gb * job.scale(idx.size)
        clock.add(loss=loss / idx.size)
    return shards, local
