"""Splitting work and data between workers: one helper for each way of splitting.

Every even split follows one rule, :func:`shard_bounds`: contiguous parts whose sizes
differ by at most one, the first ``n % parts`` parts one item larger. Micro-batches,
replicas and unaligned chunks are split by it too, so the same batch falls into the same
rows whichever trainer splits it (a hybrid run with one stage per replica shards its batch
exactly as data parallelism does).

=====================  ======================================================
:func:`shard_bounds`   a batch over data-parallel workers (contiguous shards)
:func:`chunk_bounds`   a gradient buffer over workers for the reduce-scatter
:func:`batches`        the global batches of every step (every trainer; an epoch's
                       last batch holds what is left)
:func:`micro_rows`     a batch into micro-batches (pipelines; never an empty one)
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
    "batches",
    "batch_sizes",
    "chunk_bounds",
    "micro_rows",
    "replica_rows",
    "shard_bounds",
    "steps_per_epoch",
    "sum_rows",
]

_ALIGN = 16  # chunk boundaries on 64-byte cache lines (16 float32)
_MAX_PARTS = 2**20  # micro-batches or replicas: more would only build huge lists


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
    ``n`` is small. With ``align=1`` they are :func:`shard_bounds` (the one even split);
    an aligned split puts the remainder in the last chunk, because every earlier chunk
    must end on a multiple of ``align``.

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
    if align == 1:
        return shard_bounds(n, workers)
    per = math.ceil(math.ceil(n / workers) / align) * align if n else 0
    edges = [min(n, r * per) for r in range(workers)] + [n]
    return list(zip(edges[:-1], edges[1:]))


def batches(n_samples: int, batch_size: int, seed: int, *, steps: int | None = None,
            epochs: int | None = None) -> Iterator[np.ndarray]:
    """The sample indices of every step of mini-batch SGD: one rule for every trainer.

    Each epoch is a fresh permutation of ``range(n_samples)`` from a generator seeded
    with ``seed + 1``; consecutive slices of ``batch_size`` form the batches, and the
    last batch of an epoch holds what is left (every sample is seen once per epoch,
    in every trainer and reference alike). Stops after ``steps`` steps
    or, if ``steps`` is None, after ``epochs`` epochs (default 1). The same arguments
    give the same batches in every process.

    Examples
    --------
    >>> [b.tolist() for b in batches(5, 2, seed=0)]
    [[4, 0], [1, 2], [3]]
    >>> [b.size for b in batches(5, 2, seed=0, steps=4)]
    [2, 2, 1, 2]
    """
    n_samples = check_int(n_samples, "n_samples", 1)
    batch_size = check_int(batch_size, "batch_size", 1, n_samples)
    rng = np.random.default_rng(check_int(seed, "seed", 0) + 1)
    if steps is None:
        steps = check_int(1 if epochs is None else epochs, "epochs", 1) * steps_per_epoch(n_samples, batch_size)
    steps = check_int(steps, "steps", 0)
    starts = range(0, n_samples, batch_size)
    order = None
    for step in range(steps):
        k = step % len(starts)
        if k == 0:
            order = rng.permutation(n_samples)
        yield order[starts[k] : starts[k] + batch_size]


def batch_sizes(n_samples: int, batch_size: int, steps: int) -> np.ndarray:
    """The size of every step's batch in :func:`batches`, without drawing the batches.

    Every batch holds ``batch_size`` samples except the last of each epoch, which holds
    what is left.

    Examples
    --------
    >>> batch_sizes(5, 2, 4).tolist()
    [2, 2, 1, 2]
    >>> batch_sizes(6, 3, 3).tolist()
    [3, 3, 3]
    """
    n_samples = check_int(n_samples, "n_samples", 1)
    batch_size = check_int(batch_size, "batch_size", 1, n_samples)
    steps = check_int(steps, "steps", 0)
    per_epoch = steps_per_epoch(n_samples, batch_size)
    sizes = np.full(steps, batch_size, dtype=np.int64)
    sizes[per_epoch - 1 :: per_epoch] = n_samples - (per_epoch - 1) * batch_size
    return sizes


def steps_per_epoch(n_samples: int, batch_size: int) -> int:
    """Steps of one epoch of :func:`batches`: ``ceil(n_samples / batch_size)``.

    Examples
    --------
    >>> steps_per_epoch(1438, 64)
    23
    """
    return -(-check_int(n_samples, "n_samples", 1) // check_int(batch_size, "batch_size", 1))


def micro_rows(batch: int, micro_batches: int) -> list[tuple[int, int]]:
    """Row ranges of the micro-batches of a batch: :func:`shard_bounds`, but never an empty
    micro-batch (a batch smaller than ``micro_batches`` gets one row per micro-batch).

    Examples
    --------
    >>> micro_rows(10, 3)
    [(0, 4), (4, 7), (7, 10)]
    >>> micro_rows(2, 4)
    [(0, 1), (1, 2)]
    """
    batch = check_int(batch, "batch", 0)
    m = min(check_int(micro_batches, "micro_batches", 1, _MAX_PARTS), batch) or 1
    return shard_bounds(batch, m)


def replica_rows(batch: int, replicas: int, micro_batches: int) -> list[list[tuple[int, int]]]:
    """Per replica: the rows of its micro-batches (its shard is a contiguous row range).

    Both splits are :func:`micro_rows`: the replicas' shards, then each shard's micro-batches.

    Examples
    --------
    >>> replica_rows(10, 2, 2)
    [[(0, 3), (3, 5)], [(5, 8), (8, 10)]]
    """
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
