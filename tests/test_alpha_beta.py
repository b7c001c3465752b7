"""course_lib.alpha_beta: alpha-beta collective costs and the data-parallel step model."""

import doctest

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import course_lib.alpha_beta as alpha_beta
from course_lib.alpha_beta import (
    allreduce_time,
    data_parallel_efficiency,
    data_parallel_speedup,
    data_parallel_step_time,
    parameter_server_time,
    ring_allgather_time,
    ring_allreduce_time,
    ring_reduce_scatter_time,
    tree_allreduce_time,
)

sizes = st.floats(1.0, 1e12, allow_nan=False)
bws = st.floats(1e3, 1e12, allow_nan=False)
lats = st.floats(0.0, 1e-2, allow_nan=False)
devs = st.integers(1, 4096)


def test_doctests():
    result = doctest.testmod(alpha_beta)
    assert result.attempted > 10 and result.failed == 0


def _ring_by_simulation(nbytes, n, bandwidth, latency):
    """Independent reference: walk the 2(N-1) ring steps, each sending one chunk."""
    t = 0.0
    for _phase in ("reduce-scatter", "all-gather"):
        for _step in range(n - 1):
            t += latency + (nbytes / n) / bandwidth  # all links busy in parallel
    return t


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8, 13])
def test_ring_allreduce_against_step_count(n):
    assert ring_allreduce_time(3e6, n, 1e9, 5e-6) == pytest.approx(
        _ring_by_simulation(3e6, n, 1e9, 5e-6), rel=1e-12
    )


def test_ring_hand_values():
    assert ring_allreduce_time(1e9, 2, 1e9, 0.0) == 1.0  # 2 x 1/2 x 1 s
    assert ring_allreduce_time(1e9, 4, 1e9, 1e-3) == pytest.approx(1.5 + 6e-3)
    assert ring_allreduce_time(1e9, 1, 1e9, 1.0) == 0.0
    assert ring_reduce_scatter_time(1e9, 4, 1e9, 0.0) == 0.75
    assert ring_allgather_time(1e9, 4, 1e9, 1e-3) == pytest.approx(0.753)


def test_ring_is_reduce_scatter_plus_allgather():
    n = np.arange(1, 50)
    np.testing.assert_allclose(
        ring_allreduce_time(1e8, n, 1e10, 1e-5),
        ring_reduce_scatter_time(1e8, n, 1e10, 1e-5) + ring_allgather_time(1e8, n, 1e10, 1e-5),
    )


@given(sizes, bws)
@settings(max_examples=40, deadline=None)
def test_ring_bandwidth_term_tends_to_2m_over_beta(m, b):
    limit = 2 * m / b
    times = ring_allreduce_time(m, np.array([2, 16, 1024, 10**6]), b, 0.0)
    assert np.all(np.diff(times) > 0)  # grows with N ...
    assert np.all(times < limit)  # ... but stays below 2 m / beta
    assert times[-1] == pytest.approx(limit, rel=1e-5)


@given(sizes, devs, bws, lats)
@settings(max_examples=60, deadline=None)
def test_ring_never_slower_in_bandwidth_than_ps(m, n, b, a):
    # bandwidth-optimal: with no latency, the ring moves <= what one server link moves
    assert ring_allreduce_time(m, n, b, 0.0) <= parameter_server_time(m, n, b, 0.0) + 1e-12
    assert ring_allreduce_time(m, n, b, a) >= ring_allreduce_time(m, n, b, 0.0)


def test_tree_hand_values():
    assert tree_allreduce_time(1e6, 8, 1e9, 1e-5) == pytest.approx(6 * (1e-5 + 1e-3))
    assert tree_allreduce_time(1e6, 5, 1e9, 0.0) == pytest.approx(6 * 1e-3)  # ceil(log2 5) = 3
    assert tree_allreduce_time(1e6, 1, 1e9, 1.0) == 0.0
    # small messages: tree wins on latency; large: ring wins on bandwidth
    assert tree_allreduce_time(8, 1024, 1e10, 1e-5) < ring_allreduce_time(8, 1024, 1e10, 1e-5)
    assert tree_allreduce_time(1e9, 1024, 1e10, 1e-5) > ring_allreduce_time(1e9, 1024, 1e10, 1e-5)


def test_parameter_server_hand_values():
    assert parameter_server_time(1e9, 4, 1e9, 0.0) == 8.0  # push 4 GB, pull 4 GB on one link
    assert parameter_server_time(1e9, 4, 1e9, 0.0, servers=4) == 2.0
    assert parameter_server_time(1e9, 4, 1e9, 0.0, servers=8) == 2.0  # worker links limit
    assert parameter_server_time(1e9, 2, 1e9, 1e-3) == pytest.approx(4.002)  # 2 x (2 GB / 1 GB/s + 1 ms)
    assert parameter_server_time(1e9, 1, 1e9, 1e-3) == 0.0  # a device alone exchanges nothing


@pytest.mark.parametrize("algorithm", alpha_beta.ALGORITHMS)
def test_one_device_communicates_nothing_for_every_scheme(algorithm):
    """Issue 44 item 5: eta(1) = 1 whatever the scheme (chapter 07's efficiency figure once
    started the parameter server at eta(1) = 0.33 with t_c = 1 ms, 1 MB, 1 GB/s)."""
    assert allreduce_time(1e6, 1, 1e9, 1e-5, algorithm=algorithm) == 0.0
    assert data_parallel_step_time(1e-3, 1, 1e6, 1e9, 1e-5, algorithm=algorithm) == 1e-3
    assert data_parallel_efficiency(1e-3, 1, 1e6, 1e9, 1e-5, algorithm=algorithm) == 1.0
    assert data_parallel_efficiency(1e-3, 1, 1e6, 1e9, 1e-5, algorithm=algorithm, scaling="weak") == 1.0
    # and from two devices on the parameter server pays for its one link, as before
    assert data_parallel_efficiency(1e-3, 2, 1e6, 1e9, 1e-5, algorithm="ps") == pytest.approx(
        1e-3 / (2 * (0.5e-3 + 2 * (2e-3 + 1e-5))))


@given(sizes, st.integers(2, 1000), bws, st.integers(2, 16))
@settings(max_examples=40, deadline=None)
def test_ps_linear_in_workers_with_one_server(m, n, b, k):
    assert parameter_server_time(m, k * n, b, 0.0) == pytest.approx(k * parameter_server_time(m, n, b, 0.0))


@pytest.mark.parametrize(
    ("fn", "kwargs", "exc", "name"),
    [
        (ring_allreduce_time, dict(nbytes=-1), ValueError, "nbytes"),
        (ring_allreduce_time, dict(devices=0), ValueError, "devices"),
        (ring_allreduce_time, dict(devices=2.5), ValueError, "devices"),
        (ring_allreduce_time, dict(bandwidth=0), ValueError, "bandwidth"),
        (ring_allreduce_time, dict(latency=-1e-6), ValueError, "latency"),
        (ring_allreduce_time, dict(nbytes="1e9"), TypeError, "nbytes"),
        (tree_allreduce_time, dict(devices=np.nan), ValueError, "devices"),
        (parameter_server_time, dict(servers=0), ValueError, "servers"),
        (allreduce_time, dict(algorithm="butterfly"), ValueError, "algorithm"),
    ],
)
def test_bad_input(fn, kwargs, exc, name):
    args = dict(nbytes=1e6, devices=4, bandwidth=1e9, latency=1e-6) | kwargs
    with pytest.raises(exc, match=name):
        fn(**args)


def test_allreduce_dispatch():
    for name, fn in (("ring", ring_allreduce_time), ("tree", tree_allreduce_time)):
        assert allreduce_time(1e6, 6, 1e9, 1e-6, algorithm=name) == fn(1e6, 6, 1e9, 1e-6)
    assert allreduce_time(1e6, 6, 1e9, 0.0, algorithm="ps", servers=2) == parameter_server_time(
        1e6, 6, 1e9, 0.0, servers=2
    )


# ------------------------------------------------------------------ data-parallel step
def test_step_time_hand_values():
    assert data_parallel_step_time(1.0, 1, 1e9, 1e9, 0.0) == 1.0  # one device: no exchange
    assert data_parallel_step_time(1.0, 4, 1e9, 1e9, 0.0) == 1.75
    assert data_parallel_step_time(1.0, 4, 1e9, 1e9, 0.0, overlap=1.0) == 1.5  # hides 0.25 s
    assert data_parallel_step_time(1.0, 4, 1e8, 1e9, 0.0, overlap=1.0) == 0.25  # 0.15 s hidden
    assert data_parallel_step_time(1.0, 4, 1e9, 1e9, 0.0, algorithm="ps") == 8.25
    assert data_parallel_efficiency(1.0, 4, 1e9, 1e9, 0.0) == pytest.approx(1 / (4 * 1.75))
    assert data_parallel_speedup(1.0, 4, 1e9, 1e9, 0.0) == pytest.approx(1 / 1.75)


def test_step_time_arrays():
    n = np.array([1, 2, 4, 8])
    t = data_parallel_step_time(8.0, n, 1e9, 1e9, 0.0)
    np.testing.assert_allclose(t, 8.0 / n + 2 * (n - 1) / n)
    eta = data_parallel_efficiency(8.0, n, 1e9, 1e9, 0.0)
    np.testing.assert_allclose(eta, 8.0 / (n * t))
    assert eta[0] == 1.0


@given(st.floats(1e-4, 1e3), devs, sizes, bws, lats, st.floats(0, 1))
@settings(max_examples=60, deadline=None)
def test_efficiency_properties(tc, n, m, b, a, o):
    eta = data_parallel_efficiency(tc, n, m, b, a, overlap=o)
    assert 0 < eta <= 1 + 1e-12
    # never better than ideal; overlap never hurts
    assert eta >= data_parallel_efficiency(tc, n, m, b, a, overlap=0.0) - 1e-12
    # a faster link never hurts
    assert data_parallel_efficiency(tc, n, m, 2 * b, a, overlap=o) >= eta - 1e-12
    # eta = S / N
    assert eta == pytest.approx(data_parallel_speedup(tc, n, m, b, a, overlap=o) / n)


@given(st.floats(1e-3, 1e3), sizes, bws)
@settings(max_examples=40, deadline=None)
def test_speedup_bounded_by_communication(tc, m, b):
    # with a fixed global batch, S(N) < t_c / (2 (N-1)/N m / beta) for every N
    for n in (2, 8, 64, 4096):
        t_m = ring_allreduce_time(m, n, b, 0.0)
        assert data_parallel_speedup(tc, n, m, b, 0.0) <= tc / t_m * (1 + 1e-12)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(compute_time=-1.0), "compute_time"),
        (dict(overlap=1.5), "overlap"),
        (dict(devices=0), "devices"),
        (dict(algorithm="mesh"), "algorithm"),
    ],
)
def test_step_bad_input(kwargs, name):
    args = dict(compute_time=1.0, devices=4, nbytes=1e6, bandwidth=1e9, latency=0.0) | kwargs
    with pytest.raises(ValueError, match=name):
        data_parallel_step_time(**args)


def test_speedup_needs_positive_compute():
    with pytest.raises(ValueError, match="compute_time"):
        data_parallel_efficiency(0.0, 4, 1e6, 1e9, 0.0)


def test_weak_scaling_hand_values_and_properties():
    # each device keeps its 1 s batch: step = 1 + ring time; eta = 1 / step
    n = np.array([1, 2, 4, 8])
    t = data_parallel_step_time(1.0, n, 1e9, 1e9, 0.0, scaling="weak")
    np.testing.assert_allclose(t, 1.0 + 2 * (n - 1) / n)
    np.testing.assert_allclose(data_parallel_efficiency(1.0, n, 1e9, 1e9, 0.0, scaling="weak"), 1 / t)
    np.testing.assert_allclose(data_parallel_speedup(1.0, n, 1e9, 1e9, 0.0, scaling="weak"), n / t)
    # weak scaling keeps eta above 1 / (1 + 2 m / (beta t_c)) for every N; strong scaling does not
    floor = 1 / (1 + 2 * 1e9 / 1e9 / 1.0)
    big = np.array([64, 1024, 10**6])
    assert np.all(data_parallel_efficiency(1.0, big, 1e9, 1e9, 0.0, scaling="weak") > floor)
    assert data_parallel_efficiency(1.0, 10**6, 1e9, 1e9, 0.0) < 1e-5
    with pytest.raises(ValueError, match="scaling"):
        data_parallel_step_time(1.0, 2, 1e6, 1e9, 0.0, scaling="medium")


@given(st.floats(1e-4, 1e3), st.integers(2, 4096), sizes, bws, lats)
@settings(max_examples=40, deadline=None)
def test_weak_scaling_never_less_efficient_than_strong(tc, n, m, b, a):
    weak = data_parallel_efficiency(tc, n, m, b, a, scaling="weak")
    strong = data_parallel_efficiency(tc, n, m, b, a)
    assert weak >= strong * (1 - 1e-12)


def test_hierarchical_allreduce_by_hand_and_against_the_flat_ring():
    from course_lib.alpha_beta import hierarchical_allreduce_time

    # 2 servers of 4: inside 2 x (3/4 x 1 s + 3 x 1 ms), between 2 x 1/2 x 1 s / 2 + 2 x 10 ms
    t = hierarchical_allreduce_time(1e9, 2, 4, 1e9, 2e9, 1e-3, 1e-2)
    assert t == pytest.approx(2 * (0.75 + 3e-3) + (0.5 + 0.02))
    # one server: just the ring inside it
    assert hierarchical_allreduce_time(1e9, 1, 8, 1e9, 1e6, 0, 0) == pytest.approx(ring_allreduce_time(1e9, 8, 1e9, 0.0))
    m, beta_in, beta_net = 4 * 340e6, 150e9, 100e9
    with pytest.raises(ValueError, match="node_devices"):
        hierarchical_allreduce_time(m, 92, 0, beta_in, beta_net)
    with pytest.raises(ValueError, match="network_bandwidth"):
        hierarchical_allreduce_time(m, 92, 16, beta_in, -1.0)


def test_allreduce_terms_by_hand():
    from course_lib.alpha_beta import (
        AllReduceTerms,
        hierarchical_allreduce_terms,
        hierarchical_allreduce_time,
        ring_allreduce_terms,
    )

    # a ring of 4: 6 messages of 1 ms; 2 x 3/4 x 1 GB / 1 GB/s
    assert ring_allreduce_terms(1e9, 4, 1e9, 1e-3) == AllReduceTerms(latency=6e-3, bandwidth=1.5, messages=6)
    assert ring_allreduce_terms(1e9, 1, 1e9, 1e-3) == AllReduceTerms(0.0, 0.0, 0)
    for n in (1, 2, 7, 1472):
        assert ring_allreduce_terms(3e8, n, 2e10, 4e-6).total == pytest.approx(ring_allreduce_time(3e8, n, 2e10, 4e-6))
    # 2 servers of 4: inside 2 x 3 messages of 1 ms and 2 x 3/4 x 1 s; between 2 x 1 message of 10 ms
    # and 2 x 1/2 x 1 GB / 2 GB/s
    t = hierarchical_allreduce_terms(1e9, 2, 4, 1e9, 2e9, 1e-3, 1e-2)
    assert (t.latency, t.bandwidth, t.messages) == (pytest.approx(6e-3 + 2e-2), pytest.approx(1.5 + 0.5), 8)
    assert t.total == pytest.approx(hierarchical_allreduce_time(1e9, 2, 4, 1e9, 2e9, 1e-3, 1e-2))
    with pytest.raises(ValueError, match="node_devices"):
        hierarchical_allreduce_terms(1e9, 2, 0, 1e9, 2e9)
    with pytest.raises(ValueError, match="network_latency"):
        hierarchical_allreduce_terms(1e9, 2, 4, 1e9, 2e9, network_latency=-1.0)


def test_the_record_all_reduce_is_no_optimistic_bound():
    """Issue 38 M3: BERT-Large's 2-byte gradients on the 1,472 V100s of NVIDIA's record (92 DGX-2H
    of 16, NVLink 150 GB/s and 5 us inside, InfiniBand 100 GB/s per server and 10 us between).
    The flat NVLink ring is no lower bound: its latency term is 62 % of its time, while the
    two-level algorithm sends 212 messages in sequence instead of 2,942."""
    from course_lib.alpha_beta import hierarchical_allreduce_terms, ring_allreduce_terms

    m = 2 * 340e6
    flat = ring_allreduce_terms(m, 1472, 150e9, 5e-6)
    two = hierarchical_allreduce_terms(m, 92, 16, 150e9, 100e9, 5e-6, 10e-6)
    assert flat.messages == 2 * 1471 == 2942 and two.messages == 2 * 15 + 2 * 91 == 212
    assert flat.latency == pytest.approx(2942 * 5e-6) == pytest.approx(14.71e-3)
    assert flat.bandwidth == pytest.approx(2 * 1471 / 1472 * m / 150e9) == pytest.approx(9.06e-3, abs=1e-5)
    assert flat.total == pytest.approx(23.77e-3, abs=1e-5) and round(flat.latency / flat.total, 2) == 0.62
    assert two.latency == pytest.approx(30 * 5e-6 + 182 * 10e-6) == pytest.approx(1.97e-3)
    assert two.bandwidth == pytest.approx(2 * 15 / 16 * m / 150e9 + 2 * 91 / 92 * m / 100e9)
    assert two.total == pytest.approx(23.92e-3, abs=1e-5)
    # the near-equal totals are a coincidence of these numbers: halve or double the latencies
    # and a different algorithm wins
    fast = (ring_allreduce_terms(m, 1472, 150e9, 2.5e-6), hierarchical_allreduce_terms(m, 92, 16, 150e9, 100e9, 2.5e-6, 5e-6))
    slow = (ring_allreduce_terms(m, 1472, 150e9, 10e-6), hierarchical_allreduce_terms(m, 92, 16, 150e9, 100e9, 10e-6, 20e-6))
    assert fast[0].total < fast[1].total and slow[0].total > slow[1].total
