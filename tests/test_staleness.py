"""Stale gradients (the asynchronous parameter-server setting) and SyncBN."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.models import MLP
from course_lib.parallel.partition import batches
from course_lib.parallel.train.reference import train_serial
from course_lib.staleness import (
    converged,
    largest_stable_lr,
    shard_statistics,
    sync_batchnorm_statistics,
    train_stale,
)

MODEL = MLP((8, 12, 3))
RNG = np.random.default_rng(0)
X = RNG.random((48, 8), dtype=np.float32)
Y = (X[:, 0] * 3).astype(int) % 3


def test_no_staleness_is_serial_sgd_bit_for_bit():
    kw = dict(batch_size=16, steps=9, lr=0.3, seed=2)
    assert np.array_equal(train_stale(MODEL, X, Y, staleness=0, **kw).params, train_serial(MODEL, X, Y, **kw).params)


def test_each_update_uses_the_gradient_of_k_steps_before():
    k, lr, steps = 2, np.float32(0.4), 7
    history = [MODEL.init_params(1)]
    for t, idx in enumerate(batches(48, 8, 1, steps=steps)):  # an independent loop
        _, g = MODEL.loss_and_grad(history[max(t - k, 0)], X[idx], Y[idx])
        history.append(history[-1] - lr * g)
    run = train_stale(MODEL, X, Y, staleness=k, batch_size=8, steps=steps, lr=0.4, seed=1)
    assert np.array_equal(run.params, history[-1])
    assert run.extra["staleness"] == 2 and np.all(np.isfinite(run.loss))


def test_staleness_beyond_the_run_uses_the_start_only():
    # k >= steps: every gradient is taken at theta_0, so theta_T = theta_0 - lr * sum_t g(theta_0; B_t)
    p0 = MODEL.init_params(0).astype(np.float64)
    total = sum(MODEL.loss_and_grad(MODEL.init_params(0), X[idx], Y[idx])[1].astype(np.float64)
                for idx in batches(48, 16, 0, steps=5))
    run = train_stale(MODEL, X, Y, staleness=50, batch_size=16, steps=5, lr=0.25)
    assert np.allclose(run.params, p0 - 0.25 * total, atol=1e-6)


def test_a_diverging_run_stops_and_says_so():
    run = train_stale(MODEL, X, Y, staleness=4, batch_size=16, steps=30, lr=64.0, stop_above=10.0)
    assert np.isnan(run.loss[-1]) and not converged(run.loss)


def test_converged_hand_values():
    assert converged([2.0] + [0.5] * 9)
    assert not converged([2.0] + [1.5] * 9)            # 1.5 >= 0.5 x 2.0
    assert converged([2.0] + [1.5] * 9, factor=0.8)
    assert not converged([2.0, 0.1, float("inf")])


def test_staler_gradients_need_smaller_learning_rates():
    lrs = [0.25, 1.0, 4.0, 16.0]
    best = [largest_stable_lr(MODEL, X, Y, staleness=k, lrs=lrs, batch_size=16, steps=30) for k in (0, 8)]
    assert best[0] in lrs and best[0] >= best[1]


def test_shard_statistics_hand_values_and_syncbn_recovers_the_global_batch():
    batch = np.array([[0.0, 1.0], [2.0, 1.0], [10.0, 3.0], [12.0, 3.0]])
    means, variances = shard_statistics(batch, 2)
    assert means.tolist() == [[1.0, 1.0], [11.0, 3.0]] and variances.tolist() == [[1.0, 0.0], [1.0, 0.0]]
    mean, var = sync_batchnorm_statistics([batch[:2], batch[2:]])
    assert mean.tolist() == [6.0, 2.0] and var.tolist() == [26.0, 1.0]


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 9), min_size=1, max_size=5), seed=st.integers(0, 10**6))
def test_syncbn_equals_the_global_batch_whatever_the_split(sizes, seed):
    rng = np.random.default_rng(seed)
    batch = rng.normal(3.0, 2.0, size=(sum(sizes), 4))
    shards = np.split(batch, np.cumsum(sizes)[:-1])
    mean, var = sync_batchnorm_statistics(shards)
    assert np.allclose(mean, batch.mean(axis=0), rtol=1e-12, atol=1e-12)
    assert np.allclose(var, batch.var(axis=0), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(("call", "error", "name"), [
    (lambda: train_stale(MODEL, X, Y, staleness=-1), ValueError, "staleness"),
    (lambda: train_stale(MODEL, X, Y, staleness="2"), TypeError, "staleness"),
    (lambda: train_stale(MODEL, X, Y, staleness=1, batch_size=8, lr=0), ValueError, "lr"),
    (lambda: train_stale(MODEL, X, Y, staleness=1, stop_above=-1), ValueError, "stop_above"),
    (lambda: largest_stable_lr(MODEL, X, Y, staleness=1, lrs=[]), ValueError, "lrs"),
    (lambda: largest_stable_lr(MODEL, X, Y, staleness=1, lrs=[0.1, -1]), ValueError, "lrs"),
    (lambda: converged([1.0]), ValueError, "losses"),
    (lambda: converged(["a", "b"]), TypeError, "losses"),
    (lambda: shard_statistics(np.ones(4), 2), ValueError, "batch"),
    (lambda: shard_statistics(np.ones((4, 2)), 5), ValueError, "workers"),
    (lambda: sync_batchnorm_statistics([]), ValueError, "shards"),
    (lambda: sync_batchnorm_statistics([[1.0, 2.0]]), TypeError, "shards"),
])
def test_bad_input_names_the_parameter(call, error, name):
    with pytest.raises(error, match=name):
        call()


def test_the_staleness_figure():
    from course_lib.plots.collectives import staleness_figure

    fig = staleness_figure({0: [2.3, 1.0, 0.5], 16: [2.3, 2.5, np.nan]}, 0.125, {0: 1.0, 16: 0.03125})
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["δ = 0", "δ = 16"]
    assert [t.get_text() for t in fig.axes[1].texts] == ["1", "0.03125"]
