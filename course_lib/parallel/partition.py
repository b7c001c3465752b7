"""Splitting work and data between workers: one helper for each way of splitting.

=====================  ======================================================
:func:`shard_bounds`   a batch over data-parallel workers (contiguous shards)
:func:`chunk_bounds`   a gradient buffer over workers for the reduce-scatter
:func:`batch_schedule` the global batches of every step (data parallelism)
:func:`epoch_batches`  the batches of every step as the serial loop draws them
:func:`micro_rows`     a batch into micro-batches (pipelines)
:func:`replica_rows`   a batch over replicas, each into micro-batches (hybrid)
:func:`sum_rows`       rows of a buffer added in a fixed order (reproducible sums)
=====================  ======================================================
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from .._validate import check_int

__all__ = [
    "batch_schedule",
    "chunk_bounds",
    "epoch_batches",
    "micro_rows",
    "replica_rows",
    "shard_bounds",
    "sum_rows",
]

_ALIGN = 16  # chunk boundaries on 64-byte cache lines (16 float32)
_MAX_PARTS = 2**20  # micro-batches or replicas: more would only build huge lists
_MAX_STEPS = 10**7  # a plan holds every step's indices in memory


def shard_bounds(n_items: int, parts: int) -> list[tuple[int, int]]:
    """Split ``range(n_items)`` into ``parts`` contiguous shards whose sizes differ by at most 1.

    The first ``n_items % parts`` shards get one item more; shards may be empty when
    ``parts > n_items``. Data parallelism splits a global batch this way: because each
    worker returns the SUM of its per-sample gradients, unequal shards still add up to
    exactly the full-batch gradient.

    Examples
    --------
    >>> shard_bounds(10, 3)
    [(0, 4), (4, 7), (7, 10)]
    >>> shard_bounds(2, 3)
    [(0, 1), (1, 2), (2, 2)]
    """
    n_items = check_int(n_items, "n_items", 0)
    parts = check_int(parts, "parts", 1)
    base, extra = divmod(n_items, parts)
    edges = [0]
    for i in range(parts):
        edges.append(edges[-1] + base + (1 if i < extra else 0))
    return list(zip(edges[:-1], edges[1:]))


def chunk_bounds(n: int, workers: int, align: int = _ALIGN) -> list[tuple[int, int]]:
    """Split a buffer of ``n`` elements into one chunk per worker for the reduce-scatter.

    Chunks are contiguous, start on multiples of ``align`` elements (so two workers
    never write the same cache line) and cover ``[0, n)``; some may be empty when
    ``n`` is small.

    Examples
    --------
    >>> chunk_bounds(100, 3)
    [(0, 48), (48, 96), (96, 100)]
    >>> chunk_bounds(100, 3, align=1)
    [(0, 34), (34, 67), (67, 100)]
    """
    n = check_int(n, "n", 0)
    workers = check_int(workers, "workers", 1)
    align = check_int(align, "align", 1)
    per = math.ceil(math.ceil(n / workers) / align) * align if n else 0
    edges = [min(n, r * per) for r in range(workers)] + [n]
    if align == 1:
        q, rem = divmod(n, workers)
        sizes = [q + 1] * rem + [q] * (workers - rem)
        edges = np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist()
    return list(zip(edges[:-1], edges[1:]))


def batch_schedule(n_samples: int, batch_size: int, steps: int, seed: int) -> Iterator[np.ndarray]:
    """The sample indices of every global batch, identical in every process.

    Each epoch is a fresh permutation of ``range(n_samples)`` from a generator seeded
    with ``seed + 1``; consecutive slices of ``batch_size`` form the batches and the
    incomplete tail of an epoch is dropped (every step sees exactly ``batch_size``
    samples, so every worker's shard has the same size each step).

    Examples
    --------
    >>> [b.tolist() for b in batch_schedule(5, 2, 3, seed=0)]
    [[4, 0], [1, 2], [3, 0]]
    """
    n_samples = check_int(n_samples, "n_samples", 1)
    batch_size = check_int(batch_size, "batch_size", 1, n_samples)
    steps = check_int(steps, "steps", 0)
    per_epoch = n_samples // batch_size
    rng = np.random.default_rng(check_int(seed, "seed", 0) + 1)
    order = None
    for step in range(steps):
        k = step % per_epoch
        if k == 0:
            order = rng.permutation(n_samples)
        yield order[k * batch_size : (k + 1) * batch_size]


def epoch_batches(n: int, batch_size: int, epochs: int, steps: int | None, seed: int) -> list[np.ndarray]:
    """Sample indices of every step, drawn exactly as :func:`course_lib.models.train` does.

    Unlike :func:`batch_schedule`, the incomplete tail of an epoch is a smaller last
    batch (the serial loop of chapter 01 sees every sample once per epoch).

    Examples
    --------
    >>> [b.tolist() for b in epoch_batches(5, 2, 1, None, seed=0)]
    [[4, 0], [1, 2], [3]]
    """
    n = check_int(n, "n", 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    if steps is None:
        epochs = check_int(epochs, "epochs", 1, _MAX_STEPS)
    else:
        steps = check_int(steps, "steps", 0, _MAX_STEPS)
    rng = np.random.default_rng(check_int(seed, "seed", 0) + 1)
    plan: list[np.ndarray] = []
    epoch = 0
    while (steps is None and epoch < epochs) or (steps is not None and len(plan) < steps):
        order = rng.permutation(n)
        plan.extend(order[start : start + batch_size] for start in range(0, n, batch_size))
        epoch += 1
    return plan if steps is None else plan[:steps]


def micro_rows(batch: int, micro_batches: int) -> list[tuple[int, int]]:
    """Row ranges of the micro-batches of a batch (sizes differ by at most one)."""
    batch = check_int(batch, "batch", 0)
    m = min(check_int(micro_batches, "micro_batches", 1, _MAX_PARTS), batch) or 1
    edges = [batch * i // m for i in range(m + 1)]
    return list(zip(edges[:-1], edges[1:]))


def replica_rows(batch: int, replicas: int, micro_batches: int) -> list[list[tuple[int, int]]]:
    """Per replica: the rows of its micro-batches (its shard is a contiguous row range)."""
    check_int(replicas, "replicas", 1, _MAX_PARTS)
    return [
        [(lo + a, lo + b) for a, b in micro_rows(hi - lo, micro_batches)]
        for lo, hi in micro_rows(batch, replicas)
    ]


def sum_rows(rows: np.ndarray, out: np.ndarray, lo: int = 0, hi: int | None = None) -> np.ndarray:
    """``out[lo:hi] = rows[0, lo:hi] + rows[1, lo:hi] + ...``, added in row order.

    The fixed order makes every sum reproducible bit for bit (float addition is not
    associative). Returns ``out``.

    Examples
    --------
    >>> rows = np.arange(6.0).reshape(3, 2); out = np.zeros(2)
    >>> sum_rows(rows, out).tolist()
    [6.0, 9.0]
    """
    target = out[lo:hi]
    np.copyto(target, rows[0, lo:hi])
    for r in range(1, rows.shape[0]):
        target += rows[r, lo:hi]
    return out
