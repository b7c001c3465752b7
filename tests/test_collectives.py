"""The collectives family: ShmAllReduce's two public steps, the alpha-beta costs in
``comm``, the who-holds-what reference simulation and SyncBN."""

from __future__ import annotations

import numpy as np
import pytest

from course_lib.parallel.allreduce import ShmAllReduce, run_shm_collectives
from course_lib.parallel.partition import chunk_bounds
from course_lib.parallel.workers import WorkerContext


class _NoBarrier:
    """Workers simulated one after another in one process: every barrier already passed."""

    def wait(self, rank, timeout):
        return None


def _group(rows: np.ndarray) -> tuple[list[ShmAllReduce], np.ndarray]:
    reduced = np.zeros(rows.shape[1], rows.dtype)
    n = rows.shape[0]
    return [ShmAllReduce(WorkerContext(r, n, 5.0), rows, reduced, _NoBarrier()) for r in range(n)], reduced


def test_reduce_scatter_then_all_gather_is_the_rank_order_sum():
    rows = np.random.default_rng(0).standard_normal((3, 70))
    comms, _ = _group(rows.copy())
    chunks = [c.reduce_scatter().copy() for c in comms]
    expected = (rows[0] + rows[1]) + rows[2]  # the rank order, bit for bit
    for c, chunk in zip(comms, chunks):
        assert np.array_equal(chunk, expected[c.lo : c.hi])
    for c in comms:
        assert np.array_equal(c.all_gather(), expected)


def test_allreduce_is_the_two_steps_and_counts_the_ring_bytes():
    rows = np.arange(2 * 40, dtype=np.float32).reshape(2, 40)
    comms, _ = _group(rows)
    for c in comms:
        c.reduce_scatter()
    total = [c.all_gather() for c in comms][0]
    again, _ = _group(rows.copy())
    for c in again:
        c.allreduce()
    assert np.array_equal(again[1].reduced, total)
    # N = 2, n = 40 float32 (160 bytes), chunks [0, 32) and [32, 40) (aligned to 16 elements):
    # worker 0 reads 32 numbers of row 1, then the 8 worker 1 reduced; worker 1 the reverse
    assert [(c.lo, c.hi) for c in comms] == [(0, 32), (32, 40)]
    assert [c.bytes_in for c in comms] == [{"reduce_scatter": 128, "all_gather": 32},
                                           {"reduce_scatter": 32, "all_gather": 128}]


def test_all_gather_shares_the_chunk_it_is_given():
    rows = np.zeros((4, 64))
    comms, reduced = _group(rows)
    for r, c in enumerate(comms):
        c.all_gather(np.full(c.hi - c.lo, float(r)))
    expected = np.concatenate([np.full(hi - lo, float(r)) for r, (lo, hi) in enumerate(chunk_bounds(64, 4))])
    assert np.array_equal(reduced, expected)


def test_run_shm_collectives_in_processes():
    rows = np.random.default_rng(1).standard_normal((3, 50))
    out = run_shm_collectives(rows, start_method="fork", timeout=20)
    expected = (rows[0] + rows[1]) + rows[2]
    assert out["chunks"] == chunk_bounds(50, 3)
    for (lo, hi), chunk in zip(out["chunks"], out["reduce_scatter"]):
        assert np.array_equal(chunk, expected[lo:hi])
    assert all(np.array_equal(row, expected) for row in out["all_gather"])
    # summed over the workers, each step moves (N - 1) n elements: 2 * 50 * 8 bytes
    assert out["bytes_in"].sum(axis=0).tolist() == [2 * 50 * 8, 2 * 50 * 8]
    sizes = np.array([hi - lo for lo, hi in out["chunks"]])
    assert out["bytes_in"][:, 0].tolist() == (2 * sizes * 8).tolist()
    assert out["bytes_in"][:, 1].tolist() == ((50 - sizes) * 8).tolist()


def test_run_shm_collectives_one_worker_moves_nothing():
    out = run_shm_collectives([[1, 2, 3]], start_method="fork", timeout=20)
    assert out["all_gather"].tolist() == [[1.0, 2.0, 3.0]]
    assert out["bytes_in"].tolist() == [[0, 0]]


@pytest.mark.parametrize(("rows", "kw", "error", "name"), [
    ([1.0, 2.0], {}, ValueError, "rows"),
    (np.zeros((0, 3)), {}, ValueError, "rows"),
    ("ab", {}, TypeError, "rows"),
    (np.array([["a"]]), {}, TypeError, "rows"),
    (np.zeros((2, 3)), {"timeout": 0}, ValueError, "timeout"),
    (np.zeros((2, 3)), {"start_method": "thread"}, ValueError, "start_method"),
])
def test_run_shm_collectives_rejects_bad_input(rows, kw, error, name):
    with pytest.raises(error, match=name):
        run_shm_collectives(rows, **kw)
