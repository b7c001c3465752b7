r"""Tensor parallelism of a transformer: every block split by heads over worker processes.

Megatron-LM's split of a transformer layer (Shoeybi et al. 2019), on the course's
:class:`course_lib.transformer.Transformer`. Worker :math:`j` of :math:`N_t` holds

* the columns of :math:`A_Q, A_K, A_V` (and their biases) of heads
  :math:`j a / N_t \ldots (j + 1) a / N_t - 1`: attention needs no exchange, the heads are
  independent (:func:`course_lib.transformer.attention`);
* the same rows of the output projection :math:`A_O`: its product is a partial sum, added
  over the workers by one all-reduce;
* the MLP block as :mod:`course_lib.parallel.tensor` splits it: columns of :math:`A_1`,
  rows of :math:`A_2`, one all-reduce;
* everything else whole (embedding, positions, layer norms, the biases added after an
  all-reduce, the head), computed identically on every worker.

:func:`course_lib.transformer.block_forward` with a worker's blocks and a real all-reduce
is the split block (the same code as the serial one); forward 2 all-reduces per block,
backward 2 (the gradients of the inputs of the split layers), each of :math:`B L h`
values (:func:`course_lib.tensor_cost.tensor_allreduce_bytes`). :func:`head_blocks` is the
layout, :func:`transformer_worker_loop` one worker's step;
:func:`course_lib.parallel.train.tensor.train_tensor_parallel` runs it on processes, equal to
the serial reference :func:`course_lib.parallel.train.reference.train_serial`.

Examples
--------
>>> from course_lib.transformer import Transformer
>>> m = Transformer(hidden=8, heads=4, n_layers=1, ffn=6); p = m.init_params(0)
>>> parts = [local_weights(m, p, head_blocks(m, 2, r)) for r in range(2)]
>>> parts[0]["l0.Wq"].shape, parts[0]["l0.Wo"].shape     # 2 of the 4 heads: columns, then rows
((8, 4), (4, 8))
>>> bool(np.array_equal(gather_weights(m, parts), p))
True
"""

from __future__ import annotations

import numpy as np

from .._validate import check_int, check_type
from ..models import softmax_cross_entropy
from ..transformer import Transformer, transformer_backward, transformer_forward
from .partition import shard_bounds

__all__ = ["check_head_split", "gather_weights", "head_blocks", "local_weights", "transformer_worker_loop"]

_BY_HEADS = {"Wq": "column", "bq": "column", "Wk": "column", "bk": "column", "Wv": "column", "bv": "column",
             "Wo": "row"}
_BY_UNITS = {"W1": "column", "b1": "column", "W2": "row"}


def head_blocks(model: Transformer, workers: int, rank: int) -> dict[str, tuple]:
    """What worker ``rank`` of ``workers`` holds of every parameter: ``{name: index}``.

    ``flat_view[index]`` is the worker's block: the columns (``"column"``) or rows
    (``"row"``) of its heads in ``Wq``, ``Wk``, ``Wv``, ``Wo``; of its share of the MLP
    block's units (:func:`course_lib.parallel.partition.shard_bounds`) in ``W1``, ``W2``;
    ``()``, the whole array, for the rest. ``workers`` must divide the heads.

    Examples
    --------
    >>> m = Transformer(hidden=8, heads=4, n_layers=1, ffn=6)
    >>> s = head_blocks(m, 2, 1)
    >>> s["l0.Wq"], s["l0.Wo"], s["l0.b1"], s["l0.bo"]
    ((slice(None, None, None), slice(4, 8, None)), (slice(4, 8, None), slice(None, None, None)), (slice(3, 6, None),), ())
    """
    check_type(model, "model", Transformer, "a course_lib.transformer.Transformer")
    workers = check_head_split(model, workers)
    rank = check_int(rank, "rank", 0, workers - 1)
    width = model.hidden // workers
    heads = slice(rank * width, (rank + 1) * width)  # whole heads: width = (a / N_t) head sizes
    units = slice(*shard_bounds(model.ffn, workers)[rank])
    every, out = slice(None), {}
    for s in model.slots:
        kind = s.name.split(".", 1)[-1]
        part = heads if kind in _BY_HEADS else units if kind in _BY_UNITS else None
        role = _BY_HEADS.get(kind) or _BY_UNITS.get(kind)
        if part is None:
            out[s.name] = ()
        elif role == "column":
            out[s.name] = (every, part) if len(s.shape) == 2 else (part,)
        else:
            out[s.name] = (part, every)
    return out


def check_head_split(model: Transformer, workers) -> int:
    """``workers`` as an int that divides the model's heads, else ValueError."""
    check_type(model, "model", Transformer, "a course_lib.transformer.Transformer")
    workers = check_int(workers, "workers", 1, model.heads)
    if model.heads % workers:
        raise ValueError(f"workers must divide the heads ({model.heads}), got {workers}")
    return workers


def local_weights(model: Transformer, flat: np.ndarray, blocks: dict) -> dict[str, np.ndarray]:
    """Copies (contiguous) of a worker's blocks of ``flat``, by name (``blocks`` from :func:`head_blocks`)."""
    check_type(model, "model", Transformer, "a course_lib.transformer.Transformer")
    check_type(blocks, "blocks", dict, "a dict {name: index} from head_blocks")
    return {name: np.array(view[blocks[name]], order="C") for name, view in model.views(flat).items()}


def gather_weights(model: Transformer, blocks: list[dict]) -> np.ndarray:
    """One flat buffer from every worker's blocks (``blocks[rank][name]``); whole arrays from rank 0.

    Examples
    --------
    >>> m = Transformer(hidden=8, heads=4, n_layers=1, ffn=6); p = m.init_params(0)
    >>> parts = [local_weights(m, p, head_blocks(m, 4, r)) for r in range(4)]
    >>> bool(np.array_equal(gather_weights(m, parts), p))
    True
    """
    check_type(model, "model", Transformer, "a course_lib.transformer.Transformer")
    flat = np.zeros(model.n_params, dtype=model.dtype)
    views = model.views(flat)
    for rank in reversed(range(len(blocks))):  # rank 0 last: its whole arrays stay
        for name, index in head_blocks(model, len(blocks), rank).items():
            views[name][index] = blocks[rank][name]
    return flat


def transformer_worker_loop(wctx, job, x, y, p0, allreduce, batches):
    """One worker's steps: the whole batch forward with my heads' blocks, the loss, the
    backward, the update of my blocks (the all-reduces inside ``allreduce``)."""
    model = job.model
    blocks = head_blocks(model, job.workers, wctx.rank)
    local = local_weights(model, p0, blocks)  # my blocks of every parameter
    grads, losses = {name: np.zeros_like(w) for name, w in local.items()}, []
    allreduce.start()  # every worker is ready: the clocks start together
    for idx in batches:  # every worker: the whole batch
        logits, cache = transformer_forward(local, x[idx], model.n_layers, model.head_size, allreduce, model.attend)
        loss, dlogits = softmax_cross_entropy(logits, y[idx], reduction="sum")
        for g in grads.values():
            g.fill(0)
        transformer_backward(local, cache, dlogits, grads, model.n_layers, model.head_size, allreduce)
        for name, w in local.items():
            w -= grads[name] * job.scale(idx.size)
        losses.append(loss / idx.size)  # every worker computes the whole loss
    return blocks, local, losses
