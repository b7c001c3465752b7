r"""Context parallelism (上下文并行): a transformer's sequence split over workers, attention included.

Every part of a transformer but attention works token by token: the embedding and the
positions, the layer norms, the projections :math:`A_Q, A_K, A_V, A_O`, the MLP block, the
final layer norm. So worker :math:`j` of :math:`N_c` keeps only its tokens (its share of
the :math:`L` tokens of every sequence of the batch) and computes all of that on them,
with the whole weights. Three things cross the workers:

* **attention**, where every query meets every key. Two ways:

  - *ring attention* (环形注意力, Liu et al. 2023): each worker keeps its queries; the
    key/value blocks travel round a ring of workers, one hop per step, and each worker
    folds every block that passes into its result with the running-maximum ("online")
    softmax (Milakov and Gimelshein 2018; FlashAttention's trick): :class:`OnlineSoftmax`,
    :class:`RingAttention`. The backward pass sends the blocks round again, with their
    key/value gradients;
  - *all-to-all over heads* (DeepSpeed-Ulysses, Jacobs et al. 2023): an all-to-all turns
    the split by tokens into a split by heads (every token, :math:`a/N_c` heads), attention
    runs whole on those heads, and an all-to-all turns it back: :class:`AllToAllAttention`;

* the **mean over the tokens** that feeds the classifier's head: each worker adds its
  tokens, an all-reduce of :math:`B \times h` values adds the workers' sums;
* the **parameter gradients**: each worker's are the share of its tokens, so one
  all-reduce sums them and every worker applies the same update (as data parallelism does
  with samples; here with tokens).

The split (:func:`sequence_chunks`): ``"even"``, worker :math:`j` holds tokens
:math:`jL/N_c \ldots (j+1)L/N_c - 1`; ``"zigzag"``, the sequence is cut into :math:`2N_c`
chunks and worker :math:`j` holds chunks :math:`j` and :math:`2N_c - 1 - j`. With a causal
mask (a token sees the tokens before it) the even split leaves worker 0 almost idle, its
queries see few keys, and the last worker with the most; the zig-zag split gives every
worker one early and one late chunk, the same work (:func:`pair_work`).

:func:`context_forward` and :func:`context_backward` are one worker's passes,
:func:`context_worker_loop` its step;
:func:`course_lib.parallel.train.context.train_context_parallel` runs them on processes.

Examples
--------
Two "workers" computed one after the other, the ring played by hand: worker 0's queries
against its own keys, then worker 1's, give the serial attention of its tokens.

>>> from course_lib.transformer import attention
>>> rng = np.random.default_rng(0); q, k, v = (rng.standard_normal((2, 8, 6)) for _ in range(3))
>>> state = OnlineSoftmax((2, 3, 4, 2))             # 2 sequences, 3 heads of 2, 4 query tokens
>>> qh, kh, vh = (_heads(t, 2) for t in (q[:, :4], k, v))
>>> for cols in (slice(0, 4), slice(4, 8)):         # worker 0's block, then worker 1's
...     state.add(slice(0, 4), qh @ kh[..., cols, :].swapaxes(-1, -2) / np.sqrt(2), vh[..., cols, :])
>>> out, _ = state.result()
>>> bool(np.allclose(_merge(out), attention(q, k, v, 2)[0][:, :4]))
True
>>> sequence_chunks(8, 2, "zigzag")
[[(0, 2), (6, 8)], [(2, 4), (4, 6)]]
"""

from __future__ import annotations

import math

import numpy as np

from ..models import softmax_cross_entropy
from ..transformer import (
    _heads,
    _merge,
    _tmm,
    attention,
    attention_backward,
    block_backward,
    block_forward,
    block_weights,
    layer_norm,
    layer_norm_backward,
)
from .engine.clock import recorded

__all__ = [
    "METHODS",
    "SPLITS",
    "AllToAllAttention",
    "OnlineSoftmax",
    "RingAttention",
    "context_backward",
    "context_forward",
    "context_worker_loop",
]
# The pieces (sequence_chunks, token_positions, chunk_pairs, pair_work) are importable but not
# listed: the trainer calls them with what it has checked.

#: How attention crosses the workers: keys and values round a ring, or an all-to-all over heads.
METHODS = ("ring", "all_to_all")
#: How the sequence is split: one block per worker, or two chunks (one early, one late).
SPLITS = ("even", "zigzag")


def sequence_chunks(length: int, workers: int, split: str = "even") -> list[list[tuple[int, int]]]:
    """The token ranges ``[(start, stop), ...]`` each worker holds (``workers`` must divide
    ``length``, and ``2 * workers`` for ``"zigzag"``: the trainer checks it)."""
    if split == "even":
        size = length // workers
        return [[(j * size, (j + 1) * size)] for j in range(workers)]
    size = length // (2 * workers)
    return [[(j * size, (j + 1) * size), ((2 * workers - 1 - j) * size, (2 * workers - j) * size)]
            for j in range(workers)]


def token_positions(chunks: list[tuple[int, int]]) -> np.ndarray:
    """The positions of a worker's tokens, in the order it holds them."""
    return np.concatenate([np.arange(a, b) for a, b in chunks])


def chunk_pairs(mine: list[tuple[int, int]], theirs: list[tuple[int, int]], causal: bool) -> list[tuple]:
    """``(my rows, their rows, mask)`` of the blocks of scores to compute for my chunks against
    theirs: under a causal mask a pair of chunks whose keys all come after its queries is
    skipped, and ``mask`` (None: every key visible) hides the later keys; a worker's own
    block is computed whole, masked. Whole pairs side by side (same rows, or same keys) are
    computed as one."""
    if causal and mine == theirs:  # my own block: one block, the later keys of each query hidden
        positions = token_positions(mine)
        return [(slice(0, positions.size), slice(0, positions.size), positions[None, :] <= positions[:, None])]
    pairs, row = [], 0
    for a, b in mine:
        col = 0
        for c, d in theirs:
            visible = np.arange(c, d)[None, :] <= np.arange(a, b)[:, None]
            if not causal or visible.all():
                pairs.append((slice(row, row + b - a), slice(col, col + d - c), None))
            elif visible.any():
                pairs.append((slice(row, row + b - a), slice(col, col + d - c), visible))
            col += d - c
        row += b - a
    return _merge_whole(pairs)


def _merge_whole(pairs: list[tuple]) -> list[tuple]:
    """Join whole (unmasked) pairs that continue each other, along the keys or the queries."""
    merged: list[tuple] = []
    for rows, cols, mask in pairs:
        last = merged[-1] if merged else None
        if mask is None and last is not None and last[2] is None:
            if last[0] == rows and last[1].stop == cols.start:
                merged[-1] = (rows, slice(last[1].start, cols.stop), None)
                continue
            if last[1] == cols and last[0].stop == rows.start:
                merged[-1] = (slice(last[0].start, rows.stop), cols, None)
                continue
        merged.append((rows, cols, mask))
    return merged if len(merged) == len(pairs) else _merge_whole(merged)  # until nothing joins


def pair_work(length: int, workers: int, split: str, causal: bool) -> np.ndarray:
    """Scores each worker computes per sequence and head in one ring pass (forward):
    the sizes of the chunk pairs it cannot skip. Without a mask every worker computes
    :math:`L^2/N_c`; with one, see the module's note on the splits.

    Examples
    --------
    >>> pair_work(64, 4, "even", causal=True).tolist()      # 1, 2, 3, 4 blocks of 16 x 16
    [256, 512, 768, 1024]
    >>> pair_work(64, 4, "zigzag", causal=True).tolist()    # half of 3 blocks, 1 whole: 10 chunk pairs of 8 x 8
    [640, 640, 640, 640]
    """
    chunks = sequence_chunks(length, workers, split)
    return np.array([sum((r.stop - r.start) * (c.stop - c.start) for j in range(workers)
                         for r, c, _ in chunk_pairs(chunks[i], chunks[j], causal)) for i in range(workers)])


class OnlineSoftmax:
    """The softmax of a worker's queries over keys that arrive one block at a time.

    For every query row it keeps the largest score seen so far ``m``, the sum ``s`` of
    :math:`e^{\\text{score} - m}` and the sum ``o`` of :math:`e^{\\text{score} - m} v`. A new
    block with a larger maximum rescales both sums by :math:`e^{m_{\\text{old}} - m_{\\text{new}}}`,
    as if that maximum had been subtracted from the start; ``o / s`` is then the softmax-weighted
    sum over every key seen, equal to attention over all of them at once.
    """

    def __init__(self, shape: tuple[int, ...]):
        self.m = np.full(shape[:-1] + (1,), -np.inf)  # (B, heads, queries, 1): largest score so far
        self.s = np.zeros(shape[:-1] + (1,))  # sum of exp(score - m)
        self.o = np.zeros(shape)  # (B, heads, queries, head size): sum of exp(score - m) v

    def add(self, rows: slice, scores: np.ndarray, v: np.ndarray) -> None:
        """Fold one block: the ``scores`` of query rows ``rows`` against some keys, their values ``v``."""
        m_new = np.maximum(self.m[..., rows, :], scores.max(axis=-1, keepdims=True))
        rescale = np.exp(self.m[..., rows, :] - m_new)  # the old sums, as if m_new had been the maximum
        p = np.exp(scores - m_new)  # this block's weights, unnormalised
        self.s[..., rows, :] = self.s[..., rows, :] * rescale + p.sum(axis=-1, keepdims=True)
        self.o[..., rows, :] = self.o[..., rows, :] * rescale + p @ v
        self.m[..., rows, :] = m_new

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """The attention output ``o / s`` and each row's log-sum-exp ``m + log s`` (for the backward)."""
        return self.o / self.s, self.m + np.log(self.s)


class RingAttention:
    """Ring attention for one worker: ``forward`` and ``backward`` are the ``attend`` and
    ``attend_backward`` of :func:`course_lib.transformer.block_forward` and ``block_backward``.

    ``chunks[i]``: the token ranges of worker ``i`` (:func:`sequence_chunks`); ``ring``: a
    :class:`course_lib.parallel.exchange.ShmRing`. ``largest`` is the largest block of
    scores it held at once (bytes), ``computed`` the scores it computed (every sequence and head).
    """

    monitor = None  # the step monitor that records its blocks (set by the engine)

    def __init__(self, ring, chunks: list, rank: int, causal: bool):
        self.ring, self.chunks, self.rank, self.causal = ring, chunks, rank, causal
        self.workers, self.largest, self.computed = len(chunks), 0, 0

    def pairs(self, owner: int) -> list[tuple]:
        """The chunk pairs of my queries and ``owner``'s keys to compute."""
        return chunk_pairs(self.chunks[self.rank], self.chunks[owner], self.causal)

    def scores(self, q: np.ndarray, k: np.ndarray, mask) -> np.ndarray:
        """:math:`Q K^T / \\sqrt{h/a}` of one pair of chunks, the hidden keys at :math:`-\\infty`."""
        s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
        if mask is not None:
            s += np.where(mask, 0.0, -np.inf)  # the hidden keys' scores become -inf: weight 0
        self.largest, self.computed = max(self.largest, s.nbytes), self.computed + s.size
        return s

    @recorded("F")
    def fold(self, step: int, state: OnlineSoftmax, q, k, v, rows: slice, cols: slice, mask) -> None:
        """Forward, one pair of chunks: my query rows against the block's key rows."""
        state.add(rows, self.scores(q[..., rows, :], k[..., cols, :], mask), v[..., cols, :])

    def forward(self, q: np.ndarray, k: np.ndarray, v: np.ndarray, head_size: int):
        """My queries against every worker's keys and values, one block per step of the ring."""
        q, k, v = (_heads(t, head_size) for t in (q, k, v))  # (B, heads, my tokens, head size)
        state, owner = OnlineSoftmax(q.shape), self.rank
        for step in range(self.workers):
            if step < self.workers - 1:
                self.ring.send(k, v)  # on its way to the next worker while I compute with it
            for rows, cols, mask in self.pairs(owner):
                self.fold(step, state, q, k, v, rows, cols, mask)
            if step < self.workers - 1:
                k, v = self.ring.recv()  # the block of the worker before me
                owner = (owner - 1) % self.workers
        out, lse = state.result()
        return _merge(out), (out, lse)

    @recorded("B")
    def unfold(self, step: int, q, k, v, dout, lse, delta, grads, rows: slice, cols: slice, mask) -> None:
        """Backward, one pair of chunks: the weights again from the saved log-sum-exp, then
        the gradients of my queries (kept) and of the block's keys and values (they travel)."""
        dq, dk, dv = grads
        p = np.exp(self.scores(q[..., rows, :], k[..., cols, :], mask) - lse[..., rows, :])
        dv[..., cols, :] += p.swapaxes(-1, -2) @ dout[..., rows, :]
        ds = p * (dout[..., rows, :] @ v[..., cols, :].swapaxes(-1, -2) - delta[..., rows, :])
        ds /= math.sqrt(q.shape[-1])
        dq[..., rows, :] += ds @ k[..., cols, :]
        dk[..., cols, :] += ds.swapaxes(-1, -2) @ q[..., rows, :]

    def backward(self, dctx, q, k, v, aux, head_size: int):
        """The ring again: each block meets every worker's queries; its key and value
        gradients travel with it and arrive home after the last hop."""
        out, lse = aux
        q, k, v, dout = (_heads(t, head_size) for t in (q, k, v, dctx))
        dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
        delta, owner = (dout * out).sum(axis=-1, keepdims=True), self.rank  # rows of dO . O
        for step in range(self.workers):
            last = step == self.workers - 1
            if not last:
                self.ring.send(k, v)  # the block goes on while I compute with it
            for rows, cols, mask in self.pairs(owner):
                self.unfold(step, q, k, v, dout, lse, delta, (dq, dk, dv), rows, cols, mask)
            if self.workers > 1:
                if not last:
                    k, v = self.ring.recv()
                self.ring.send(dk, dv)  # the block's gradients follow it
                dk, dv = self.ring.recv()
                owner = (owner - 1) % self.workers
        return _merge(dq), _merge(dk), _merge(dv)


class AllToAllAttention:
    """Attention with an all-to-all over heads (DeepSpeed-Ulysses) for one worker: the
    ``attend`` and ``attend_backward`` of the blocks. Worker ``j`` attends with heads
    :math:`j a/N_c \\ldots (j+1) a/N_c - 1` over the whole sequence; ``exchange`` is a
    :class:`course_lib.parallel.exchange.ShmAllToAll`. ``largest``: its attention weights (bytes)."""

    monitor = None

    def __init__(self, exchange, chunks: list, rank: int, causal: bool):
        self.exchange, self.rank, self.causal, self.workers = exchange, rank, causal, len(chunks)
        self.order = np.argsort(np.concatenate([token_positions(c) for c in chunks]))  # gathered -> sequence
        self.largest, self.computed = 0, 0

    def to_heads(self, t: np.ndarray) -> np.ndarray:
        """(B, my tokens, h) -> (B, L, h / N): every token of the sequence, my heads' columns."""
        blocks = np.split(t, self.workers, axis=-1)  # block j: worker j's heads
        return np.concatenate(self.exchange(blocks), axis=1)[:, self.order]

    def to_tokens(self, t: np.ndarray) -> np.ndarray:
        """(B, L, h / N) -> (B, my tokens, h): the inverse of :meth:`to_heads`."""
        mine = np.split(t[:, np.argsort(self.order)], self.workers, axis=1)  # block j: worker j's tokens
        return np.concatenate(self.exchange(mine), axis=-1)

    def forward(self, q: np.ndarray, k: np.ndarray, v: np.ndarray, head_size: int):
        """Tokens -> heads (q, k, v), attention of my heads over the whole sequence, heads -> tokens."""
        q, k, v = (self.to_heads(t) for t in (q, k, v))
        out, probs = attention(q, k, v, head_size, self.causal)
        self.largest, self.computed = max(self.largest, probs.nbytes), self.computed + probs.size
        return self.to_tokens(out), (q, k, v, probs)

    def backward(self, dctx, q, k, v, aux, head_size: int):
        """The mirror image: the output's gradient to heads, attention's backward, gradients to tokens."""
        q, k, v, probs = aux
        grads = attention_backward(self.to_heads(dctx), q, k, v, probs, head_size)
        return tuple(self.to_tokens(g) for g in grads)


def context_forward(w: dict, x: np.ndarray, positions: np.ndarray, model, attend, allreduce):
    """Logits from my tokens ``x`` (B, my tokens, d) at ``positions``: every part that works
    token by token on my tokens alone, attention by ``attend`` (ring or all-to-all), the mean
    over ALL the tokens by an all-reduce of the workers' sums."""
    z = x @ w["embed.W"] + w["embed.b"] + w["pos"][positions]  # my tokens, their positions
    caches = []
    for i in range(model.n_layers):
        z, c = block_forward(block_weights(w, i), z, model.head_size, attend=attend.forward)
        caches.append(c)
    f, lnf = layer_norm(z, w["final.g"], w["final.b"])
    mean = allreduce(f.sum(axis=1)) / model.seq_length  # (B, h): my tokens' sum + the others'
    return mean @ w["head.W"] + w["head.b"], {"x": x, "blocks": caches, "f": f, "lnf": lnf}


def context_backward(w: dict, cache: dict, dlogits, grads: dict, positions, model, attend) -> None:
    """ADD my tokens' share of every parameter's gradient into ``grads`` (the sum over the
    workers, an all-reduce, is the whole gradient)."""
    f, length = cache["f"], model.seq_length
    grads["head.W"] += (f.sum(axis=1) / length).T @ dlogits  # my tokens' part of the mean
    grads["head.b"] += dlogits.sum(axis=0) * (f.shape[1] / length)
    df = np.broadcast_to((dlogits @ w["head.W"].T)[:, None, :] / length, f.shape)
    dz = layer_norm_backward(df, cache["lnf"], w["final.g"], grads["final.g"], grads["final.b"])
    for i in reversed(range(model.n_layers)):
        dz = block_backward(block_weights(w, i), cache["blocks"][i], dz, block_weights(grads, i),
                            model.head_size, attend_backward=attend.backward)
    grads["pos"][positions] += dz.sum(axis=0)
    grads["embed.W"] += _tmm(cache["x"], dz)
    grads["embed.b"] += dz.reshape(-1, dz.shape[-1]).sum(axis=0)


def context_worker_loop(wctx, job, x, y, p0, attend, comm, pooled, positions, batches):
    """One worker's steps: the whole batch, my tokens only; forward, loss, backward, then
    the all-reduce of my tokens' gradients and the update every worker applies alike."""
    model, params = job.model, p0.copy()
    w, grad, optimizer = model.views(params), comm.gradient_buffer(), job.new_optimizer()
    g, update, losses = model.views(grad), np.zeros_like(params), []
    comm.start()  # every worker is ready: the clocks start together
    for idx in batches:
        logits, cache = context_forward(w, x[idx][:, positions], positions, model, attend, pooled)
        loss, dlogits = softmax_cross_entropy(logits, y[idx], reduction="sum")  # every worker: all logits
        grad.fill(0)
        context_backward(w, cache, dlogits, g, positions, model, attend)
        comm.wait()  # every worker has its tokens' gradients
        job.update(params, comm.allreduce(), idx.size, optimizer, update)
        losses.append(loss / idx.size)
    return params, losses
