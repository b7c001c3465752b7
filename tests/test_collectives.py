"""The collectives family: ShmAllReduce's two public steps, the alpha-beta costs in
``comm``, the who-holds-what reference simulation and SyncBN."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import alpha_beta
from course_lib.parallel.allreduce import ShmAllReduce
from course_lib.parallel.engine.workers import WorkerContext
from course_lib.parallel.partition import chunk_bounds
from course_lib.parallel.train.collectives import run_shm_collectives

pytest_plugins = ["leak_fixtures"]  # the fixture no_leaks


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


def test_run_shm_collectives_in_processes(no_leaks):
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


def test_run_shm_collectives_one_worker_moves_nothing(no_leaks):
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
    (np.zeros((2, 3)), {"fault": "raise"}, TypeError, "fault"),
])
def test_run_shm_collectives_rejects_bad_input(rows, kw, error, name):
    with pytest.raises(error, match=name):
        run_shm_collectives(rows, **kw)


def _rank_order_sum_rounded(rows: np.ndarray) -> np.ndarray:
    """Independent reference: each partial sum formed exactly in float64 (two float16 or float32
    numbers add exactly in float64) and rounded once to the rows' dtype, in rank order."""
    total = rows[0].astype(np.float64)
    for row in rows[1:]:
        total = (total + row.astype(np.float64)).astype(rows.dtype).astype(np.float64)
    return total.astype(rows.dtype)


@pytest.mark.parametrize(("workers", "n"), [(3, 50), (4, 37)])
def test_float16_all_reduce_moves_half_the_bytes_and_sums_in_float16(workers, n, no_leaks):
    rows32 = np.random.default_rng(n).standard_normal((workers, n)).astype(np.float32) * 300
    rows16 = rows32.astype(np.float16)
    half = run_shm_collectives(rows16, start_method="fork", timeout=20)
    single = run_shm_collectives(rows32, start_method="fork", timeout=20)
    assert half["all_gather"].dtype == np.float16 and single["all_gather"].dtype == np.float32
    assert np.array_equal(half["bytes_in"] * 2, single["bytes_in"])  # exactly half, worker by worker
    assert half["bytes_in"].sum() == 2 * (workers - 1) * n * 2  # (N - 1) n two-byte numbers per step
    for out, rows in ((half, rows16), (single, rows32)):
        expected = _rank_order_sum_rounded(rows)
        assert all(np.array_equal(row, expected) for row in out["all_gather"])
    # the float16 sum is rounded at each step: not the float32 sum rounded once at the end
    assert not np.array_equal(half["all_gather"][0], rows16.astype(np.float32).sum(axis=0).astype(np.float16))


def test_float16_sum_overflows_to_inf_as_float16_does(no_leaks):
    rows = np.array([[40000.0, 1.0], [40000.0, 2.0]], np.float16)  # 80,000 > 65,504
    out = run_shm_collectives(rows, start_method="fork", timeout=20)
    assert out["all_gather"][1].tolist() == [np.inf, 3.0]


def test_measured_float16_sum_has_the_one_process_reference_error(no_leaks):
    from course_lib.precision import allreduce_in, sum_error

    rows = np.random.default_rng(7).standard_normal((4, 45)).astype(np.float32)
    for dtype in ("float16", "float32"):
        run, here = run_shm_collectives(rows.astype(dtype), start_method="fork", timeout=20), allreduce_in(rows, dtype)
        assert np.array_equal(run["all_gather"][0], here["sum"])
        assert sum_error(run["all_gather"][0], rows) == here["max_rel_error"]
    assert sum_error(rows.sum(axis=0), rows) < 1e-6 < sum_error(rows.sum(axis=0).astype(np.float16), rows) < 1e-3
    # hand value: 2049 rounds to 2048 in float16 (11 significant bits): error 1/2049
    assert sum_error(np.array([1.0, 2049.0], np.float16), np.array([[1.0, 2049.0]])) == 1 / 2049
    with pytest.raises(ValueError, match="total"):
        sum_error(np.zeros(3), rows)
    with pytest.raises(TypeError, match="rows"):
        sum_error(np.zeros(45), [[1.0]])


# ------------------------------------------------------------------ alpha-beta costs


def test_hand_values_two_devices():
    # N = 2, m = 1 GB, beta = 1 GB/s, alpha = 1 ms: one message of the whole buffer (S = 1) for
    # broadcast/reduce; one of half the buffer for all-gather, reduce-scatter, all-to-all
    a = 1e-3
    assert alpha_beta.ring_broadcast_time(1e9, 2, 1e9, a) == pytest.approx(1.001)
    assert alpha_beta.ring_reduce_time(1e9, 2, 1e9, a) == pytest.approx(1.001)
    assert alpha_beta.ring_allgather_time(1e9, 2, 1e9, a) == pytest.approx(0.501)
    assert alpha_beta.ring_reduce_scatter_time(1e9, 2, 1e9, a) == pytest.approx(0.501)
    assert alpha_beta.pairwise_alltoall_time(1e9, 2, 1e9, a) == pytest.approx(0.501)
    assert alpha_beta.ring_allreduce_time(1e9, 2, 1e9, a) == pytest.approx(1.002)


def test_hand_values_four_devices():
    # N = 4, m = 4 MB, beta = 1 MB/s, alpha = 0.5 s
    m, b, a = 4e6, 1e6, 0.5
    assert alpha_beta.ring_broadcast_time(m, 4, b, a, segments=1) == pytest.approx(3 * (0.5 + 4))   # store and forward
    assert alpha_beta.ring_broadcast_time(m, 4, b, a, segments=4) == pytest.approx(6 * (0.5 + 1))   # 2 + 4 rounds
    assert alpha_beta.ring_reduce_time(m, 4, b, a, segments=2) == pytest.approx(4 * (0.5 + 2))
    assert alpha_beta.ring_allgather_time(m, 4, b, a) == pytest.approx(3 * (0.5 + 1))
    assert alpha_beta.pairwise_alltoall_time(m, 4, b, a) == pytest.approx(3 * (0.5 + 1))
    assert alpha_beta.ring_allreduce_time(m, 4, b, a) == pytest.approx(6 * (0.5 + 1))
    assert alpha_beta.collective_lower_bound("broadcast", m, 4, b) == pytest.approx(4.0)
    assert alpha_beta.collective_lower_bound("all-to-all", m, 4, b) == pytest.approx(3.0)
    assert alpha_beta.collective_lower_bound("all-reduce", m, 4, b) == pytest.approx(6.0)
    # the best segment count: S* = sqrt((N - 2) m / (beta alpha)) = sqrt(2 x 4 / 0.5) = 4
    assert alpha_beta.optimal_segments(m, 4, b, a) == 4.0


def test_one_device_costs_nothing():
    for c in alpha_beta.COLLECTIVES:
        assert alpha_beta.collective_time(c, 1e9, 1, 1e9, 1e-3) == 0.0
        assert alpha_beta.collective_lower_bound(c, 1e9, 1, 1e9) == 0.0


@settings(max_examples=25, deadline=None)
# m: 0 or at least one byte (a subnormal m, 1e-308 bytes, loses the digits the comparison needs)
@given(m=st.one_of(st.just(0.0), st.floats(1, 1e12)), n=st.integers(1, 4096), b=st.floats(1e3, 1e12),
       a=st.floats(0, 1e-2))
def test_all_reduce_is_reduce_scatter_plus_all_gather_and_no_collective_beats_its_bound(m, n, b, a):
    assert alpha_beta.collective_time("all-reduce", m, n, b, a) == pytest.approx(
        alpha_beta.ring_reduce_scatter_time(m, n, b, a) + alpha_beta.ring_allgather_time(m, n, b, a), rel=1e-12)
    for c in alpha_beta.COLLECTIVES:
        assert alpha_beta.collective_time(c, m, n, b, a) >= alpha_beta.collective_lower_bound(c, m, n, b) * (1 - 1e-12)


@settings(max_examples=25, deadline=None)
@given(m=st.floats(1e3, 1e9), n=st.integers(3, 64), b=st.floats(1e6, 1e11), a=st.floats(1e-7, 1e-3))
def test_optimal_segments_is_the_best_whole_number(m, n, b, a):
    s = alpha_beta.optimal_segments(m, n, b, a)
    best = alpha_beta.ring_broadcast_time(m, n, b, a, segments=s)
    for other in (max(1.0, s - 1), s + 1, 1.0):
        assert best <= alpha_beta.ring_broadcast_time(m, n, b, a, segments=other) * (1 + 1e-12)


@pytest.mark.parametrize("collective", alpha_beta.COLLECTIVES)
def test_each_collective_meets_its_lower_bound_for_large_buffers(collective):
    for n in (2, 8, 64):
        ratio = alpha_beta.collective_time(collective, 1e13, n, 1e10, 1e-5) / alpha_beta.collective_lower_bound(collective, 1e13, n, 1e10)
        assert 1.0 <= ratio < 1.01
    # small buffers: the latency terms dominate, far from the bound
    assert alpha_beta.collective_time(collective, 1e3, 64, 1e10, 1e-5) > 10 * alpha_beta.collective_lower_bound(collective, 1e3, 64, 1e10)


@pytest.mark.parametrize(("call", "error", "name"), [
    (lambda: alpha_beta.collective_time("gather", 1, 2, 1, 0), ValueError, "collective"),
    (lambda: alpha_beta.collective_time(3, 1, 2, 1, 0), TypeError, "collective"),
    (lambda: alpha_beta.ring_broadcast_time(-1, 2, 1, 0), ValueError, "nbytes"),
    (lambda: alpha_beta.ring_broadcast_time(1, 0, 1, 0), ValueError, "devices"),
    (lambda: alpha_beta.ring_broadcast_time(1, 2, 1, 0, segments=0), ValueError, "segments"),
    (lambda: alpha_beta.ring_broadcast_time(1, 2, 1, 0, segments=1.5), ValueError, "segments"),
    (lambda: alpha_beta.pairwise_alltoall_time(1, 2, 0, 0), ValueError, "bandwidth"),
    (lambda: alpha_beta.pairwise_alltoall_time(1, 2, 1, -1), ValueError, "latency"),
    (lambda: alpha_beta.collective_lower_bound("all-reduce", "x", 2, 1), TypeError, "nbytes"),
    (lambda: alpha_beta.simulate_collective("all-reduce", 0), ValueError, "devices"),
    (lambda: alpha_beta.simulate_collective("broadcast", 4, root=4), ValueError, "root"),
    (lambda: alpha_beta.simulate_collective("scan", 4), ValueError, "collective"),
])
def test_bad_input_names_the_parameter(call, error, name):
    with pytest.raises(error, match=name):
        call()


# ------------------------------------------------------------------ who holds what
def _summed(n: int, chunk: int) -> np.ndarray:
    return np.full(n, chunk + 1.0)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_the_simulation_does_what_each_collective_promises(n):
    root = n - 1
    out = {c: alpha_beta.simulate_collective(c, n, root=root) for c in alpha_beta.COLLECTIVES}
    own = [[(c + 1.0) * np.eye(n)[d] for c in range(n)] for d in range(n)]
    for d in range(n):
        for c in range(n):
            assert np.array_equal(out["broadcast"]["after"][d, c], own[root][c])
            assert np.array_equal(out["all-gather"]["after"][d, c], own[c][c])
            assert np.array_equal(out["all-reduce"]["after"][d, c], _summed(n, c))
            assert np.array_equal(out["all-to-all"]["after"][d, c], (d + 1.0) * np.eye(n)[c])  # block d of device c
        assert np.array_equal(out["reduce-scatter"]["after"][d, d], _summed(n, d))
    assert np.isnan(np.delete(out["reduce-scatter"]["after"].reshape(n * n, n), [d * n + d for d in range(n)], 0)).all()
    assert all(np.array_equal(out["reduce"]["after"][root, c], _summed(n, c)) for c in range(n))
    assert np.isnan(np.delete(out["reduce"]["after"], root, 0)).all()


@pytest.mark.parametrize("n", [2, 3, 4, 7])
def test_the_simulation_costs_what_the_formulas_say(n):
    m, b, a = 1e6, 1e8, 1e-4
    for c in alpha_beta.COLLECTIVES:
        out = alpha_beta.simulate_collective(c, n)
        assert out["rounds"] * (a + m / n / b) == pytest.approx(alpha_beta.collective_time(c, m, n, b, a, segments=n))
        # what the busiest device takes in, against the bound (broadcast/reduce: exactly m)
        taken = out["received"].max() * m / n / b
        assert taken == pytest.approx(alpha_beta.collective_lower_bound(c, m, n, b))


# ------------------------------------------------------------------ the figure
def test_the_figure_draws_the_simulation():
    from course_lib.plots.collectives import collectives_figure

    fig = collectives_figure(devices=3)
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == ["broadcast (root A)", "reduce (root A)", "all-gather", "reduce-scatter", "all-to-all", "all-reduce"]
    texts = [t.get_text() for t in fig.axes[5].texts]  # all-reduce: 9 inputs, 9 sums
    assert sorted(t for t in texts if t.startswith("Σ")) == ["Σ0"] * 3 + ["Σ1"] * 3 + ["Σ2"] * 3
    a2a = [t.get_text() for t in fig.axes[4].texts if len(t.get_text()) == 2]
    assert a2a[9:12] == ["A0", "B0", "C0"]  # after: device A holds block 0 of every device
    with pytest.raises(ValueError, match="results"):
        collectives_figure({"gather": {}})


# ------------------------------------------------------------------ exercises
def test_exercise_checkers_accept_the_hand_computation_and_name_the_usual_mistakes():
    from course_lib.exercises import collectives as ex

    g = ex.EX1_ALLTOALL  # 7 rounds of 5 us + 8 MiB / 50 GB/s
    assert ex.ex1_alltoall_ms(7 * (5e-6 + 8 * 2**20 / 50e9) * 1e3)
    assert "BLOCK" in ex.ex1_alltoall_ms(7 * (5e-6 + g["nbytes"] / 50e9) * 1e3).message
    assert ex.ex2_reduce_scatter_bytes(2 * 48 * 4)          # chunk [0, 48) of rows 1 and 2
    assert "even split" in ex.ex2_reduce_scatter_bytes(2 / 3 * 400).message
    assert "ALL-GATHER" in ex.ex2_reduce_scatter_bytes((100 - 48) * 4).message
    # w_1 = 1 - 0.9 = 0.1, w_2 = 0.1 - 0.9 = -0.8, w_3 = -0.8 - 0.9 = -1.7, w_4 = -1.7 - 0.09 = -1.79,
    # w_5 = -1.79 + 0.72 = -1.07, w_6 = -1.07 + 1.53 = 0.46 (each update uses the weight of 2 steps before)
    assert ex.ex4_stale_weight(0.46) and ex.ex4_stale_weight("0.46")
    assert "FRESH" in ex.ex4_stale_weight(1e-6).message           # 0.1 ** 6
    assert "one step less stale" in ex.ex4_stale_weight(0.784).message
    assert "not 0" in ex.ex4_stale_weight(-1.79).message and "short" in ex.ex4_stale_weight(-1.07).message
    assert ex.ex5_syncbn_variance(330 / 10 - 5.2**2)         # S2/n - (S1/n)^2 = 33 - 27.04
    assert "BETWEEN" in ex.ex5_syncbn_variance((1.25 + 1.0) / 2).message
    for bad in (None, "abc", [1], float("nan")):
        for checker in (ex.ex1_alltoall_ms, ex.ex2_reduce_scatter_bytes, ex.ex4_stale_weight, ex.ex5_syncbn_variance):
            assert not checker(bad)


def test_exercise_checkers_name_the_unit_and_variance_slips():
    """Issue 44 item 8: chapter 08's usual slips get their own hint - the given 64 MiB read as
    64 MB (10^6 bytes) in exercise 1, and the sample variance (divisor n - 1) in exercise 5."""
    from course_lib.exercises import collectives as ex

    # 7 rounds of 5 us + (64 x 10^6 / 8) bytes / 50 GB/s = 0.035 + 1.12 ms: 4.6 % short of the answer
    as_mb = 7 * (5e-6 + 64e6 / 8 / 50e9) * 1e3
    assert as_mb == pytest.approx(1.155) and not ex.ex1_alltoall_ms(as_mb)
    for answer in (as_mb, round(as_mb, 2), f"{as_mb:.3f} ms"):
        message = ex.ex1_alltoall_ms(answer).message
        assert "64 MiB as 64 MB" in message and "2^20" in message, message
    assert "MiB" not in ex.ex1_alltoall_ms(1.5).message  # a wrong answer of another kind: the general hint
    # n = 10, S1 = 52, S2 = 330: (330 - 52^2 / 10) / 9 = 59.6 / 9 = 6.622 instead of 5.96
    sample = (330 - 52**2 / 10) / 9
    for answer in (sample, 6.62, "6.62"):
        message = ex.ex5_syncbn_variance(answer).message
        assert not ex.ex5_syncbn_variance(answer) and "n - 1 = 9" in message and "n = 10" in message, message
    assert ex.ex5_syncbn_variance(5.96)
