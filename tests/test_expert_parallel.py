"""Expert parallelism (course_lib.moe, course_lib.parallel.experts, train_expert_parallel) against
the serial mixture of experts: routing, capacity and drops by hand, the gradient, trained
parameters for every worker count, the all-to-all bytes against the routing and the
alpha-beta formula, a published expert layout, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.alpha_beta import collective_lower_bound, collective_time
from course_lib.datasets import load_parallel_layouts
from course_lib.moe import (
    MoE,
    capacity,
    capacity_factor_for,
    dropped,
    expert_layout_case,
    kept_assignments,
    route,
    route_counts,
    served_before,
)
from course_lib.parallel.experts import alltoall_rows, kept_counts
from course_lib.parallel.train.experts import (
    alltoall_bytes,
    check_expert_split,
    train_expert_parallel,
)
from course_lib.parallel.train.reference import train_serial

pytest_plugins = ["leak_fixtures"]  # the fixtures no_leaks, clean

RNG = np.random.default_rng(7)
X = RNG.random((48, 8))
Y = RNG.integers(0, 3, 48)
KW = dict(batch_size=24, steps=3, lr=0.5, seed=1)
RUN = dict(start_method="fork", progress=False)


def _model(top_k=1, capacity_factor=1.0, experts=4, aux_weight=0.05):
    return MoE(inputs=8, hidden=6, experts=experts, expert_hidden=5, classes=3, top_k=top_k,
               capacity_factor=capacity_factor, aux_weight=aux_weight)


# ------------------------------------------------------------------ routing and capacity by hand
def test_capacity_by_hand():
    assert capacity(1024, 8, 1, 1.0) == 128 and capacity(1024, 8, 1, 1.25) == 160
    assert capacity(1024, 8, 2, 1.0) == 256  # top-2: twice the assignments
    assert capacity(10, 4, 1, 1.0) == 3  # ceil(2.5)
    assert capacity(10, 4, 1, math.inf) == 10 and capacity(10, 2, 1, 100.0) == 10  # never more than T


def test_drops_against_the_capacity_factor_by_hand():
    load = [130, 95, 160, 110, 88, 140, 122, 179]  # 1,024 tokens, top-1, 8 experts: mean 128
    assert dropped(load, capacity(1024, 8, 1, 1.0)).tolist() == [2, 0, 32, 0, 0, 12, 0, 51]  # C = 128
    assert dropped(load, capacity(1024, 8, 1, 1.25)).sum() == 19  # C = 160: 179 - 160
    assert dropped(load, capacity(1024, 8, 1, 1.4)).sum() == 0  # C = 180
    assert capacity_factor_for(load, share=0.0) == 179 * 8 / 1024  # the busiest expert
    assert capacity_factor_for(load, share=0.01) == 169 * 8 / 1024  # drops 10 <= 10.24
    assert dropped(load, capacity(1024, 8, 1, capacity_factor_for(load, share=0.01))).sum() == 10
    assert capacity_factor_for([10, 30, 20, 20], top_k=2, share=0.0) == 30 * 4 / (2 * 40)


@settings(max_examples=50, deadline=None)
@given(load=st.lists(st.integers(0, 60), min_size=2, max_size=8), share=st.sampled_from([0.0, 0.01, 0.05, 0.2]))
def test_the_capacity_factor_for_a_share_is_the_smallest_that_keeps_it(load, share):
    if sum(load) == 0:
        return
    phi = capacity_factor_for(load, share=share)
    experts, tokens = len(load), sum(load)
    assert dropped(load, capacity(tokens, experts, 1, phi)).sum() <= share * tokens
    smaller = capacity(tokens, experts, 1, phi) - 1  # one assignment less per expert
    if smaller >= 0:
        assert dropped(load, smaller).sum() > share * tokens


def test_first_choices_are_served_before_second_choices():
    # 4 tokens, 2 experts, top-2; capacity 3: expert 0 is every token's first choice
    probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.6, 0.4]])
    choice, weight = route(probs, 2)
    assert choice.tolist() == [[0, 1]] * 4 and np.allclose(weight.sum(axis=1), 1)
    kept = kept_assignments(choice, served_before(route_counts(choice, 2)), 3)
    assert kept[:, 0].tolist() == [True, True, True, False]  # expert 0 full after 3 first choices
    assert kept[:, 1].tolist() == [True, True, True, False]  # expert 1: 4 second choices, keeps 3
    one, w1 = route(probs, 1)
    assert one.ravel().tolist() == [0] * 4 and w1.ravel().tolist() == probs[:, 0].tolist()  # Switch: g = p


@settings(max_examples=40, deadline=None)
@given(workers=st.sampled_from([1, 2, 4]), per=st.integers(1, 6), top_k=st.sampled_from([1, 2]),
       cap=st.integers(0, 12), seed=st.integers(0, 10**6))
def test_the_workers_keep_what_the_serial_model_keeps(workers, per, top_k, cap, seed):
    """kept_counts from every worker's counts, and each worker's kept_assignments with its
    'before', give exactly the serial model's kept assignments (tokens in worker order)."""
    rng = np.random.default_rng(seed)
    experts, tokens = 4, workers * per
    choice = np.stack([rng.permutation(experts)[:top_k] for _ in range(tokens)])
    serial = kept_assignments(choice, served_before(route_counts(choice, experts)), cap)
    parts = np.split(choice, workers)
    counts = np.stack([route_counts(c, experts) for c in parts])
    total = counts.sum(axis=0)
    mine = [kept_assignments(c, (np.cumsum(total, axis=0) - total) + counts[:r].sum(axis=0), cap)
            for r, c in enumerate(parts)]
    assert np.array_equal(np.concatenate(mine), serial)
    kept = kept_counts(counts, cap)
    for r, (c, k) in enumerate(zip(parts, mine)):
        assert kept[r].tolist() == [[int(((c[:, j] == e) & k[:, j]).sum()) for e in range(experts)]
                                    for j in range(top_k)]


def test_the_gradient_is_the_numerical_one():
    for top_k, phi, reductions in ((1, 0.75, ("mean", "sum")), (2, 1.0, ("mean",)), (2, math.inf, ("sum",))):
        model = MoE(inputs=3, hidden=4, experts=4, expert_hidden=3, classes=3, top_k=top_k, capacity_factor=phi,
                    aux_weight=0.3)
        rng = np.random.default_rng(2)
        p = model.init_params(1) + 0.1 * rng.standard_normal(model.n_params)  # no ReLU at its kink
        x, y = rng.standard_normal((10, 3)), rng.integers(0, 3, 10)
        for reduction in reductions:
            loss, g = model.loss_and_grad(p, x, y, reduction=reduction)
            num = np.zeros_like(p)
            for i in range(p.size):
                d = np.zeros_like(p)
                d[i] = 1e-6
                num[i] = (model.loss_and_grad(p + d, x, y, reduction=reduction)[0]
                          - model.loss_and_grad(p - d, x, y, reduction=reduction)[0]) / 2e-6
            assert np.abs(num - g).max() < 1e-6 * max(1.0, np.abs(g).max())


def test_the_load_balancing_loss_is_one_when_even():
    model = _model(experts=4)
    p = model.init_params(0)
    model.views(p)["gate.W"][:] = 0  # every gate probability 1/4
    _, cache = model.forward(p, X[:8])
    assert np.allclose(cache["probs"], 0.25)
    assert model.aux_loss(cache) == pytest.approx(1.0)  # E sum f_e pi_e = 4 x 1/4 whatever f
    cache["counts"][0] = [8, 0, 0, 0]
    cache["probs"][:] = [1.0, 0.0, 0.0, 0.0]
    assert model.aux_loss(cache) == pytest.approx(4.0)  # everything on one expert: E


# ------------------------------------------------------------------ on processes
@pytest.mark.parametrize(("top_k", "phi"), [(1, 0.5), (1, 1.25), (2, 1.0), (2, math.inf)])
@pytest.mark.parametrize("workers", [1, 2, 4])
def test_trained_parameters_equal_the_serial_run(workers, top_k, phi):
    model = _model(top_k, phi)
    ref = train_serial(model, X, Y, **KW)
    run = train_expert_parallel(model, X, Y, workers=workers, **KW, **RUN)
    assert np.abs(run.params - ref.params).max() <= 1e-6
    np.testing.assert_allclose(run.loss, ref.loss, rtol=1e-9)
    assert run.replicas_in_sync and run.backend == "experts" and run.workers == workers
    # the measured bytes are what the routing says, step by step and worker by worker
    assert np.array_equal(run.extra["bytes"], run.extra["bytes_formula"])
    assert run.bytes_per_step.tolist() == run.extra["bytes"][:, 0].tolist()
    if workers == 1:
        assert not run.extra["bytes"].any()
    # drops, load and capacity as the serial model has them, step by step
    params = model.init_params(1)
    for step, idx in enumerate(run_batches()):
        _, cache = model.forward(params, X[idx])
        assert run.extra["routed"][step].tolist() == cache["counts"].tolist()
        assert run.extra["capacity"][step] == model.capacity(idx.size)
        assert run.extra["dropped"][step] == (~cache["kept"]).sum()
        assert run.extra["kept"][step].tolist() == [int(((cache["choice"] == e) & cache["kept"]).sum())
                                                    for e in range(4)]
        params = params - KW["lr"] * model.loss_and_grad(params, X[idx], Y[idx])[1]
    held = (model.n_dense + 4 // workers * model.expert_size) * 8
    assert {m["parameters"] for m in run.memory} == {held}
    assert run.extra["expert_time"].shape == (3, workers) and np.all(run.extra["expert_time"] > 0)
    assert run.extra["served"].sum(axis=1).tolist() == run.extra["kept"].sum(axis=1).tolist()  # every kept token, once


def run_batches(n=48, batch_size=24, seed=1, steps=3):
    """The sample indices of every step of a run (the trainers' and train_serial's)."""
    from course_lib.parallel.partition import batches

    return list(batches(n, batch_size, seed, steps=steps))


def test_the_all_to_all_bytes_by_hand_and_against_the_alpha_beta_formula():
    # rows[i][j]: tokens worker i dispatches to worker j
    rows = np.array([[3, 1], [2, 4]])
    # worker 0 receives 2 tokens (from 1) in the dispatch and 1 back in the combine, twice: 6 x 6 x 8
    assert alltoall_bytes(rows, width=6).tolist() == [2 * 3 * 6 * 8, 2 * 3 * 6 * 8]
    # a balanced dispatch: each of N workers sends m / N bytes to every worker, m its buffer
    n, tokens, width = 4, 8, 6
    even = np.full((n, n), tokens // n)
    m = tokens * width * 8
    per_collective = alltoall_bytes(even, width) / 4  # the four all-to-alls of a step
    assert per_collective.tolist() == [(n - 1) / n * m] * n  # what every device must send, N - 1 blocks
    assert collective_lower_bound("all-to-all", m, n, 1.0) == (n - 1) / n * m  # the formula's bytes (beta = 1)
    assert collective_time("all-to-all", m, n, 1.0, 0.0) == per_collective[0]  # pairwise exchange, no latency


def test_a_balanced_routing_moves_the_formulas_bytes():
    """Gate weights that send token t of each worker's shard to expert t mod E: every expert
    gets the same load, every worker sends (N - 1)/N of its dispatch buffer."""
    model = _model(top_k=1, capacity_factor=1.0, aux_weight=0.0)
    p = model.init_params(0)
    w = model.views(p)
    w["in.W"][:] = 0
    w["in.b"][:] = np.arange(1, 7)  # u = the same positive vector for every token ...
    x = np.zeros((16, 8))
    (order,) = run_batches(16, 16, 0, steps=1)  # the step's batch: worker 0 gets its first 8 samples
    for i, t in enumerate(order):
        x[t, i % 4] = 10.0  # ... plus input i mod 4 for the batch's i-th sample ...
    w["in.W"][:4, :4] = np.eye(4)
    w["gate.W"][:] = 0
    w["gate.W"][:4, :4] = 5 * np.eye(4)  # ... which the gate turns into expert i mod 4
    y = np.zeros(16, dtype=int)
    run = train_expert_parallel(model, x, y, workers=2, batch_size=16, steps=1, lr=1e-9, seed=0, params=p, **RUN)
    assert run.extra["routed"][0, 0].tolist() == [4, 4, 4, 4] and run.extra["dropped"][0] == 0
    assert run.extra["rows"][0].tolist() == [[4, 4], [4, 4]]  # each worker: 4 tokens to each worker
    m = 8 * model.hidden * 8  # a worker's dispatch buffer: its 8 tokens, h values of 8 bytes
    assert run.extra["bytes"][0].tolist() == [4 * (2 - 1) / 2 * m] * 2  # 4 all-to-alls of (N - 1)/N m


def test_a_published_expert_layout():
    row = {r.model: r for r in load_parallel_layouts()}["DeepSeek-V3"]
    assert (row.routed_experts, row.shared_experts, row.active_experts, row.expert_parallel) == (256, 1, 8, 64)
    assert "arXiv:2412.19437" in row.source
    case = expert_layout_case()
    assert case.experts_per_gpu == 4 and case.expert_params == 3 * 7168 * 2048
    assert case.routed_params == 58 * 256 * 3 * 7168 * 2048
    assert 0.95 < case.routed_share < 1  # the routed experts are most of the 671B
    assert case.active_expert_params == 58 * 9 * 3 * 7168 * 2048  # 8 routed + 1 shared per MoE layer
    assert case.dispatch_bytes_per_token == 8 * 7168 * 2 and case.internode_bytes_per_token == 4 * 7168 * 2
    assert case.sequence_alltoall_bytes == 4096 * 8 * 7168 * 2
    assert case.sequence_alltoall_time == pytest.approx(63 * (10e-6 + case.sequence_alltoall_bytes / (64 * 50e9)))
    with pytest.raises(ValueError, match="model must be one of"):
        expert_layout_case("Llama 3 405B")  # a dense model: no experts


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(("kwargs", "error", "match"), [
    (dict(workers=3), ValueError, r"workers must divide the E = 4 experts"),
    (dict(workers=8), ValueError, r"workers must be an integer in \[1, 4\]"),
    (dict(workers=0), ValueError, r"workers must be an integer in \[1,"),
    (dict(workers="2"), TypeError, "workers must be an integer"),
    (dict(workers=2, batch_size=1), ValueError, "batch_size must be >= workers"),
    (dict(workers=2, optimizer=object()), TypeError, "unexpected keyword argument 'optimizer'"),
])
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        train_expert_parallel(_model(), X, Y, **{"steps": 1, **kwargs}, **RUN)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    (dict(top_k=3), ValueError, r"top_k must be an integer in \[1, 2\]"),
    (dict(top_k=2, experts=1), ValueError, r"top_k must be an integer in \[1, 1\]"),
    (dict(capacity_factor=0.0), ValueError, "capacity_factor must be in"),
    (dict(capacity_factor=float("nan")), ValueError, "capacity_factor"),
    (dict(aux_weight=-1.0), ValueError, "aux_weight must be in"),
    (dict(experts=0), ValueError, "experts must be an integer"),
    (dict(classes=1), ValueError, "classes must be an integer in"),
])
def test_a_bad_model_is_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        MoE(**kwargs)


def test_a_model_that_is_no_mixture_of_experts_is_refused():
    from course_lib.models import MLP

    with pytest.raises(TypeError, match="model must be a course_lib.moe.MoE"):
        train_expert_parallel(MLP((8, 3)), X, Y, workers=1)
    with pytest.raises(TypeError, match="model must be a course_lib.moe.MoE"):
        check_expert_split("moe", 2)
    assert check_expert_split(_model(), 2) == 2
    for bad in ([[1, -1]], [-1, 2], [1.5, 2]):
        with pytest.raises(ValueError, match="load must be"):
            capacity_factor_for(bad)
    assert alltoall_rows(kept_counts(np.zeros((2, 1, 4), dtype=int), 3), 2).tolist() == [[0, 0], [0, 0]]
