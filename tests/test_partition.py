"""One helper for each way of splitting work: shards, chunks, batch schedules, row sums."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from course_lib.parallel.partition import (
    batch_sizes,
    batches,
    chunk_bounds,
    micro_rows,
    replica_rows,
    shard_bounds,
    steps_per_epoch,
    sum_rows,
)


@given(st.integers(1, 500), st.integers(1, 64))
def test_shard_bounds_cover_the_batch_evenly(batch, workers):
    bounds = shard_bounds(batch, workers)
    assert len(bounds) == workers and bounds[0][0] == 0 and bounds[-1][1] == batch
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    sizes = [hi - lo for lo, hi in bounds]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == batch
    assert (min(sizes) >= 1) == (batch >= workers)  # empty shards only when too few items
    assert sizes == sorted(sizes, reverse=True)  # the larger shards come first


@given(st.integers(0, 5000), st.integers(1, 40), st.sampled_from([1, 4, 16]))
def test_chunk_bounds_partition_the_buffer(n, workers, align):
    bounds = chunk_bounds(n, workers, align)
    assert len(bounds) == workers and bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    assert all(lo <= hi for lo, hi in bounds)
    if align > 1:
        assert all(lo % align == 0 or lo == n for lo, _ in bounds)
    # no chunk is much larger than an even share
    assert max(hi - lo for lo, hi in bounds) <= -(-n // workers) + align


def test_shard_and_chunk_hand_values():
    assert shard_bounds(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert shard_bounds(7, 7) == [(i, i + 1) for i in range(7)]
    assert chunk_bounds(100, 2) == [(0, 50 + 14), (64, 100)]
    assert chunk_bounds(10, 4, align=1) == [(0, 3), (3, 6), (6, 8), (8, 10)]


def test_batches_are_a_permutation_per_epoch_and_keep_the_tail():
    drawn = list(batches(10, 4, seed=3, epochs=2))
    assert [b.size for b in drawn] == [4, 4, 2, 4, 4, 2]  # every sample once per epoch
    first, second = np.concatenate(drawn[:3]), np.concatenate(drawn[3:])
    assert sorted(first.tolist()) == list(range(10)) == sorted(second.tolist())
    assert not np.array_equal(first, second)
    again = list(batches(10, 4, seed=3, steps=6))
    assert all(np.array_equal(a, b) for a, b in zip(drawn, again, strict=True))
    assert [b.size for b in batches(10, 4, seed=3, steps=4)] == [4, 4, 2, 4]
    assert steps_per_epoch(10, 4) == 3 and steps_per_epoch(8, 4) == 2


@given(st.integers(1, 200), st.integers(1, 64), st.integers(1, 3), st.integers(0, 99))
def test_batches_are_drawn_as_a_plain_sgd_loop_draws_them(n, batch, epochs, seed):
    """Independent reference: the batches of a plain SGD loop, written out."""
    batch = min(batch, n)
    rng = np.random.default_rng(seed + 1)
    expected = []
    for _ in range(epochs):
        order = rng.permutation(n)
        expected += [order[s : s + batch] for s in range(0, n, batch)]
    got = list(batches(n, batch, seed, epochs=epochs))
    assert len(got) == len(expected) == epochs * steps_per_epoch(n, batch)
    assert all(np.array_equal(a, b) for a, b in zip(got, expected, strict=True))


# ---------------------------------------------------------------- serial runs


@given(st.integers(0, 10_000), st.integers(1, 64))
def test_shard_bounds_cover_everything_once_and_balance(n, parts):
    bounds = shard_bounds(n, parts)
    assert len(bounds) == parts and bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds[:-1], bounds[1:], strict=True))
    sizes = [b - a for a, b in bounds]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == n


@pytest.mark.parametrize("bad, exc", [(0, ValueError), (2.0, TypeError), (True, TypeError)])
def test_shard_bounds_bad_parts(bad, exc):
    with pytest.raises(exc, match="parts"):
        shard_bounds(10, bad)


def test_micro_and_replica_rows():
    assert micro_rows(10, 3) == [(0, 4), (4, 7), (7, 10)]  # the larger first, as shard_bounds
    assert micro_rows(2, 4) == [(0, 1), (1, 2)]  # never an empty micro-batch
    assert replica_rows(8, 2, 2) == [[(0, 2), (2, 4)], [(4, 6), (6, 8)]]
    assert replica_rows(11, 2, 2) == [[(0, 3), (3, 6)], [(6, 9), (9, 11)]]


@given(st.integers(0, 2000), st.integers(1, 64))
def test_one_even_split_rule(n, parts):
    """Micro-batches, replicas and unaligned chunks are split exactly as shard_bounds splits."""
    assert chunk_bounds(n, parts, align=1) == shard_bounds(n, parts)
    assert micro_rows(n, parts) == shard_bounds(n, max(1, min(parts, n)))
    shards = [(lo, hi) for lo, hi in shard_bounds(n, parts) if hi > lo] or [(0, 0)]
    assert [(rows[0][0], rows[-1][1]) for rows in replica_rows(n, parts, 3)] == shards


@given(st.integers(1, 6), st.integers(0, 40), st.integers(0, 40))
def test_sum_rows_adds_in_row_order(rows, lo, width):
    rng = np.random.default_rng(rows)
    data = rng.standard_normal((rows, 50)).astype(np.float32)
    out = np.full(50, np.nan, np.float32)
    hi = min(50, lo + width)
    sum_rows(data, out, lo, hi)
    expected = data[0, lo:hi].copy()
    for r in range(1, rows):
        expected += data[r, lo:hi]
    assert np.array_equal(out[lo:hi], expected)  # bitwise: the same order
    assert np.isnan(out[:lo]).all() and np.isnan(out[hi:]).all()


@given(st.integers(1, 60), st.integers(1, 60), st.integers(0, 50), st.integers(0, 5))
def test_batch_sizes_are_the_sizes_of_the_drawn_batches(n, batch, steps, seed):
    batch = min(batch, n)
    drawn = [idx.size for idx in batches(n, batch, seed, steps=steps)]
    assert batch_sizes(n, batch, steps).tolist() == drawn


@pytest.mark.parametrize(("args", "name"), [((0, 1, 1), "n_samples"), ((3, 4, 1), "batch_size"),
                                            ((3, 1, -1), "steps"), ((3.5, 1, 1), "n_samples")])
def test_batch_sizes_bad_arguments(args, name):
    with pytest.raises((TypeError, ValueError), match=name):
        batch_sizes(*args)
