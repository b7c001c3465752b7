r"""Context parallelism priced by formula (no processes): bytes, attention memory, causal work; where
context and expert parallelism stand beside data, pipeline and tensor parallelism; a published
long-context run.

Per worker and training step, :math:`N_c` workers, a batch of :math:`B` sequences of
:math:`L` tokens, hidden size :math:`h`, :math:`a` heads, :math:`n_{\text{layers}}` layers
(values of ``bytes_per_value`` bytes):

* **ring attention** (:func:`ring_bytes`): a worker's key and value blocks are
  :math:`2 B (L/N_c) h` values. Forward, :math:`N_c - 1` hops of them; backward, the same
  hops again, then their gradients, :math:`N_c` hops home: :math:`(6N_c - 4)` blocks of
  :math:`B (L/N_c) h` values per layer, received (and sent) by every worker;
* **all-to-all over heads** (:func:`all_to_all_bytes`): 4 all-to-alls forward (queries,
  keys, values to heads; the output back), 4 backward, each bringing a worker
  :math:`\frac{N_c-1}{N_c}` of its :math:`B (L/N_c) h` values;
* **attention scores held at once** (:func:`score_bytes`): :math:`B a L^2` on one device;
  the ring holds one block, :math:`B a (L/N_c)^2`, and computes :math:`B a (L/N_c) L` in a
  pass; the all-to-all holds its heads' share :math:`B (a/N_c) L^2`.

* **attention work** (:func:`attention_work`): scores each worker computes per sequence and
  head in a pass, :math:`L^2/N_c` without a mask. With the causal mask the even split gives
  worker :math:`j` the blocks :math:`0 \ldots j` (the last one, its own, computed whole and
  masked): :math:`(j+1)(L/N_c)^2`; the zig-zag split gives every worker half of every other
  worker's block and its own whole (masked): :math:`(2N_c + 2)(L/2N_c)^2`.

:func:`parallelism_axes` places the five ways to split a step side by side;
:func:`long_context_case` reads a published run (``data/parallel_layouts.csv``).

Examples
--------
>>> ring_bytes(64, 32, 16, 4, n_layers=2)            # 2 layers x 20 blocks of 32 x 16 x 16 values x 8 bytes
2621440
>>> all_to_all_bytes(64, 32, 16, 4, n_layers=2)      # 2 layers x 8 x 3/4 x 32 x 16 x 16 values x 8 bytes
786432
>>> score_bytes(64, 32, 4, 4, "ring"), score_bytes(64, 32, 4, 1, "ring")
(262144, 4194304)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._validate import check_int
from .i18n import tr

__all__ = [
    "LongContextCase",
    "ParallelAxis",
    "all_to_all_bytes",
    "attention_work",
    "causal_imbalance",
    "long_context_case",
    "parallelism_axes",
    "ring_bytes",
    "score_bytes",
]


def _sizes(seq_length, batch, hidden, workers, n_layers, bytes_per_value):
    seq_length, batch = check_int(seq_length, "seq_length", 1), check_int(batch, "batch", 1)
    hidden, workers = check_int(hidden, "hidden", 1), check_int(workers, "workers", 1, seq_length)
    n_layers, item = check_int(n_layers, "n_layers", 1), check_int(bytes_per_value, "bytes_per_value", 1, 16)
    if seq_length % workers:
        raise ValueError(f"workers must divide seq_length = {seq_length}, got {workers}")
    return seq_length, batch, hidden, workers, n_layers, item


def ring_bytes(seq_length: int, batch: int, hidden: int, workers: int, *, n_layers: int = 1,
               bytes_per_value: int = 8, backward: bool = True) -> int:
    r"""Bytes each worker receives (and sends) per training step in ring attention:
    :math:`n_{\text{layers}} (6N_c - 4) B (L/N_c) h` values (0 on one worker); the forward
    pass alone (``backward=False``): :math:`2(N_c - 1)` blocks. ``hidden`` is the width of
    the keys (and values): :math:`h`, or the key/value heads' width under grouped-query attention."""
    L, b, h, n, layers, item = _sizes(seq_length, batch, hidden, workers, n_layers, bytes_per_value)
    blocks = 6 * n - 4 if backward else 2 * (n - 1)
    return 0 if n == 1 else layers * blocks * b * (L // n) * h * item


def all_to_all_bytes(seq_length: int, batch: int, hidden: int, workers: int, *, n_layers: int = 1,
                     bytes_per_value: int = 8) -> int:
    r"""Bytes each worker receives (and sends) per training step with the all-to-all over
    heads: :math:`n_{\text{layers}} \cdot 8 \cdot \frac{N_c - 1}{N_c} B (L/N_c) h` values."""
    L, b, h, n, layers, item = _sizes(seq_length, batch, hidden, workers, n_layers, bytes_per_value)
    return layers * 8 * (n - 1) * b * (L // n) * (h // n) * item


def score_bytes(seq_length: int, batch: int, heads: int, workers: int, method: str = "ring", *,
                bytes_per_value: int = 8) -> int:
    """Attention scores one worker holds at once (bytes), for ``batch`` sequences and ``heads``
    heads: one block of the ring, ``(L/N_c)^2`` (whatever the split and the mask: a worker's own
    block is computed whole), or its heads' whole ``L x L`` (``"all_to_all"``)."""
    L, b, a, n, _, item = _sizes(seq_length, batch, heads, workers, 1, bytes_per_value)
    if method == "all_to_all":
        return b * (a // n) * L * L * item
    if method != "ring":
        raise ValueError(f"method must be 'ring' or 'all_to_all', got {method!r}")
    return b * a * (L // n) ** 2 * item


def attention_work(seq_length: int, workers: int, split: str = "even", causal: bool = True) -> np.ndarray:
    """Scores each worker computes per sequence and head in one pass of ring attention (see the
    module's note; a block met by itself is computed whole, then masked).

    Examples
    --------
    >>> attention_work(64, 4, "even").tolist(), attention_work(64, 4, "zigzag").tolist()
    ([256, 512, 768, 1024], [640, 640, 640, 640])
    """
    L, n = check_int(seq_length, "seq_length", 1), check_int(workers, "workers", 1, seq_length)
    if split not in ("even", "zigzag"):
        raise ValueError(f"split must be 'even' or 'zigzag', got {split!r}")
    parts = n if split == "even" else 2 * n
    if L % parts:
        raise ValueError(f"{parts} {'blocks' if split == 'even' else 'chunks'} must divide seq_length = {L}")
    if not causal:
        return np.full(n, L * L // n)
    if split == "even":
        return (np.arange(n) + 1) * (L // n) ** 2
    return np.full(n, (2 * n + 2) * (L // (2 * n)) ** 2)


def causal_imbalance(seq_length: int, workers: int, split: str) -> float:
    """The busiest worker's attention work over the mean, causal mask (1: balanced; the step
    waits for the busiest)."""
    work = attention_work(seq_length, workers, split, causal=True)
    return float(work.max() / work.mean())


class ParallelAxis(NamedTuple):
    """One way to split a training step over devices."""

    scheme: str
    splits: str
    sends: str
    grows_with: str
    needed_when: str


def parallelism_axes() -> tuple[ParallelAxis, ...]:
    """Data, pipeline, tensor, context and expert parallelism side by side: what each splits,
    what it sends, what the bytes grow with, and when each is needed.

    Examples
    --------
    >>> [a.scheme for a in parallelism_axes()]
    ['data', 'pipeline', 'tensor', 'context', 'expert']
    """
    return (
        ParallelAxis("data", tr("the batch (samples)"), tr("gradients: an all-reduce per step"),
                     tr("the parameters P, whatever B"), tr("the model fits one device; more throughput")),
        ParallelAxis("pipeline", tr("the layers (stages)"), tr("activations to the next stage, their gradients back"),
                     tr("B and h, at each stage boundary"), tr("the model does not fit one device; slow links between groups")),
        ParallelAxis("tensor", tr("each layer's weight matrices"), tr("activations: all-reduces inside every layer"),
                     tr("B L h per layer, whatever N_t"), tr("one layer too large for one device; fast links (NVLink)")),
        ParallelAxis("context", tr("the sequence (tokens), attention included"),
                     tr("keys and values round a ring, or all-to-alls over heads"), tr("B L h per layer"),
                     tr("a sequence's activations do not fit one device: long context")),
        ParallelAxis("expert", tr("the experts of a mixture-of-experts layer"),
                     tr("tokens to their experts and back: all-to-alls"), tr("the tokens routed, k_top B L h"),
                     tr("more parameters than one device holds, each token using a few")),
    )


class LongContextCase(NamedTuple):
    """A published long-context run priced with this module's formulas (bytes: 16-bit values)."""

    model: str
    sequence_length: int
    context_parallel: int
    tokens_per_rank: int
    chunk: int
    kv_bytes_per_layer: int
    """Keys and values of the other ranks each rank receives per layer and forward pass (its
    tensor-parallel share of the key/value heads)."""
    scores_per_head_serial: int
    """One sequence's ``L x L`` scores of one head, if held at once, bytes."""
    scores_per_head_rank: int
    """A rank's ``(L/N_c) x L`` of them."""
    imbalance_even: float
    imbalance_zigzag: float


def long_context_case(model: str = "Llama 3 405B", *, bytes_per_value: int = 2) -> LongContextCase:
    """The context-parallel run of ``model`` in ``data/parallel_layouts.csv`` (Llama 3 405B:
    128K tokens on 16 context-parallel ranks): each rank's tokens and chunks (the zig-zag
    split the paper uses), the key/value bytes it receives per layer (the paper all-gathers
    them: the same bytes as a ring's forward), what attention scores would take if held, the
    causal work imbalance of an even and a zig-zag split.

    Examples
    --------
    >>> case = long_context_case()
    >>> case.tokens_per_rank, case.chunk, case.kv_bytes_per_layer
    (8192, 4096, 62914560)
    """
    from .datasets import load_parallel_layouts

    rows = {r.model: r for r in load_parallel_layouts()}
    if model not in rows:
        raise ValueError(f"model must be one of {sorted(rows)}, got {model!r}")
    r = rows[model]
    L, n = r.sequence_length, r.context_parallel
    head_dim = r.hidden_size // r.attention_heads
    kv_width = max(r.kv_heads // r.tensor_parallel, 1) * head_dim  # this rank's key/value heads
    return LongContextCase(
        model=r.model, sequence_length=L, context_parallel=n, tokens_per_rank=L // n, chunk=L // (2 * n),
        kv_bytes_per_layer=(n - 1) * (L // n) * 2 * kv_width * bytes_per_value,
        scores_per_head_serial=L * L * bytes_per_value, scores_per_head_rank=(L // n) * L * bytes_per_value,
        imbalance_even=causal_imbalance(L, n, "even"), imbalance_zigzag=causal_imbalance(L, n, "zigzag"))

