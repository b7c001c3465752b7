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

The worker's blocks are :func:`layer_blocks`; :func:`tensor_forward` and
:func:`tensor_backward` are one worker's passes with any ``allreduce`` (on processes:
:class:`course_lib.parallel.allreduce.ActivationAllReduce`), :func:`tensor_worker_loop` its
step; :func:`tensor_parallel_bytes` counts the bytes of one step's all-reduces by formula.
:func:`course_lib.parallel.train.tensor.train_tensor_parallel` runs it on processes.

Examples
--------
The sum of the workers' partial outputs, :math:`\sum_r \operatorname{relu}(X A_{:, c_r}) B_{c_r, :}`,
is the serial output (the ``allreduce`` here adds the two workers' parts, computed in one process):

>>> from course_lib.models import MLP
>>> model = MLP((8, 10, 6))               # one pair of layers
>>> p = model.init_params(0); x = np.random.default_rng(0).random((5, 8), dtype=np.float32)
>>> blocks = [layer_blocks(model, 2, r) for r in range(2)]
>>> local = [local_params(model, p, b) for b in blocks]
>>> parts = [np.maximum(x @ a + ba, 0) @ b for (a, ba), (b, _) in local]   # relu(X A_r) B_r
>>> out = tensor_forward(local[0], blocks[0], x, lambda part: parts[0] + parts[1])[-1]
>>> bool(np.allclose(out, model.forward(p, x)[0], atol=1e-5))
True
>>> tensor_parallel_bytes(model, 16) == 16 * 6 * 4    # the pair's output, forward only
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validate import check_int, check_type
from ..models import MLP, softmax_cross_entropy
from .partition import shard_bounds

__all__ = [
    "LayerBlock",
    "gather_params",
    "layer_blocks",
    "local_params",
    "tensor_backward",
    "tensor_forward",
    "tensor_parallel_bytes",
    "tensor_worker_loop",
]


@dataclass(frozen=True)
class LayerBlock:
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


def layer_blocks(model: MLP, workers: int, rank: int) -> list[LayerBlock]:
    """What worker ``rank`` of ``workers`` holds of every layer of ``model``.

    Layers ``(0, 1), (2, 3), ...`` form pairs split over the hidden width of the pair
    (``model.sizes[i + 1]`` for the pair starting at layer ``i``); an odd last layer is
    replicated. With more workers than hidden units some blocks are empty.

    Examples
    --------
    >>> [(s.role, s.cols) for s in layer_blocks(MLP((4, 5, 3)), 2, 1)]
    [('column', slice(3, 5, None)), ('row', slice(None, None, None))]
    >>> layer_blocks(MLP((4, 5, 3)), 2, 1)[1].rows
    slice(3, 5, None)
    """
    check_type(model, "model", MLP, "a course_lib.models.MLP")
    workers = check_int(workers, "workers", 1, 2**20)
    rank = check_int(rank, "rank", 0, workers - 1)
    every = slice(None)
    blocks = []
    for i in range(model.n_layers):
        if i % 2 == 0 and i + 1 < model.n_layers:
            lo, hi = shard_bounds(model.sizes[i + 1], workers)[rank]
            blocks.append(LayerBlock(i, "column", every, slice(lo, hi), slice(lo, hi)))
        elif i % 2 == 1:
            hidden = blocks[-1].cols
            blocks.append(LayerBlock(i, "row", hidden, every, every))
        else:
            blocks.append(LayerBlock(i, "replicated", every, every, every))
    return blocks


def local_params(model: MLP, flat: np.ndarray, blocks: list[LayerBlock]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Copies of this worker's blocks ``(W, b)`` of every layer of ``flat`` (contiguous arrays;
    ``blocks`` from :func:`layer_blocks`)."""
    out = []
    for s in blocks:
        w, b = model.layer(flat, s.layer)
        out.append((w[s.rows, s.cols].copy(order="C"), b[s.bias].copy()))  # never a view of p0
    return out


def gather_params(model: MLP, blocks: list[list[tuple[np.ndarray, np.ndarray]]]) -> np.ndarray:
    """Assemble every worker's blocks (``blocks[rank][layer] = (W, b)``) into one flat
    buffer laid out as ``model``'s (replicated pieces from rank 0).

    Examples
    --------
    >>> m = MLP((3, 4, 2)); p = m.init_params(0)
    >>> parts = [local_params(m, p, layer_blocks(m, 3, r)) for r in range(3)]
    >>> bool(np.array_equal(gather_params(m, parts), p))
    True
    """
    check_type(model, "model", MLP, "a course_lib.models.MLP")
    flat = np.zeros(model.n_params, dtype=model.dtype)
    for rank, local in enumerate(blocks):
        for s, (w_loc, b_loc) in zip(layer_blocks(model, len(blocks), rank), local, strict=True):
            w, b = model.layer(flat, s.layer)
            w[s.rows, s.cols] = w_loc
            if s.role == "column" or rank == 0:
                b[s.bias] = b_loc
    return flat


def tensor_parallel_bytes(model: MLP, batch_size: int, workers: int | None = None) -> int:
    """Payload bytes of the activation all-reduces of one training step, forward + backward.

    Per layer pair ``(i, i + 1)``: one all-reduce of the pair's output (``batch x
    sizes[i + 2]``) in the forward pass and one of the input gradient (``batch x
    sizes[i]``) in the backward pass, except for the first pair, whose input (the data)
    needs no gradient. A replicated last layer moves nothing. Each all-reduce of ``m``
    bytes costs a ring :math:`2 (N - 1) / N \\cdot m` bytes per worker
    (:func:`course_lib.alpha_beta.ring_allreduce_time`). The payload is the same for any
    ``workers`` >= 2 (None); one worker sums nothing: 0.

    Examples
    --------
    >>> tensor_parallel_bytes(MLP((64, 1024, 1024, 1024, 10)), 256)  # 2 pairs, float32
    2107392
    >>> 256 * 4 * (1024 + 10 + 1024)  # forward: 1,024 and 10 wide; backward: 1,024 wide
    2107392
    >>> tensor_parallel_bytes(MLP((64, 1024, 1024, 1024, 10)), 256, workers=1)  # one worker: no all-reduce
    0
    """
    check_type(model, "model", MLP, "a course_lib.models.MLP")
    batch_size = check_int(batch_size, "batch_size", 1, 2**40)
    if workers is not None and check_int(workers, "workers", 1, 2**20) == 1:
        return 0
    elements = 0
    for i in range(0, model.n_layers - 1, 2):
        elements += model.sizes[i + 2]  # forward: the pair's output
        if i > 0:
            elements += model.sizes[i]  # backward: the pair's input gradient
    return batch_size * elements * model.dtype.itemsize


def tensor_forward(local, blocks: list[LayerBlock], x: np.ndarray, allreduce) -> list[np.ndarray]:
    """Forward pass of one tensor-parallel worker.

    ``local[i] = (W, b)`` are the worker's blocks, ``allreduce(part)`` returns the sum
    of ``part`` over all workers. Returns the activations the backward pass needs:
    ``acts[0] = x``, then every layer's output (the hidden block of a pair, the full
    output after a pair's all-reduce); ``acts[-1]`` are the logits, the same on every
    worker.
    """
    acts, last = [x], len(blocks) - 1
    for s, (w, b) in zip(blocks, local, strict=True):
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


def tensor_backward(local, blocks: list[LayerBlock], acts: list[np.ndarray], dlogits: np.ndarray,
                    grads, allreduce) -> None:
    """Backward pass of one worker: ADD its blocks' gradients into ``grads`` (same
    layout as ``local``). The input gradient of a pair is an all-reduce ("f" backward),
    except before the first layer."""
    g, last = dlogits, len(blocks) - 1
    for s in reversed(blocks):
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


def tensor_worker_loop(wctx, job, x, y, p0, allreduce, batches):
    """One tensor-parallel worker's steps: the whole batch forward through my blocks, the
    loss, the backward, the update of my blocks (the all-reduces inside ``allreduce``)."""
    blocks = layer_blocks(job.model, job.workers, wctx.rank)
    local = local_params(job.model, p0, blocks)  # my blocks of every layer
    grads, losses = [(np.zeros_like(w), np.zeros_like(b)) for w, b in local], []
    allreduce.start()  # every worker is ready: the clocks start together
    for idx in batches:  # every worker: the whole batch
        acts = tensor_forward(local, blocks, x[idx], allreduce)
        loss, dlogits = softmax_cross_entropy(acts[-1], y[idx], reduction="sum")
        for gw, gb in grads:
            gw.fill(0)
            gb.fill(0)
        tensor_backward(local, blocks, acts, dlogits, grads, allreduce)
        for (w, b), (gw, gb) in zip(local, grads, strict=True):
            w -= gw * job.scale(idx.size)
            b -= gb * job.scale(idx.size)
        losses.append(loss / idx.size)  # every worker computes the whole loss
    return blocks, local, losses
