"""course_lib.critical_batch: the critical-batch fit against synthetic data, steps to a
target, the batch-size sweep and the time to the target on N devices."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import course_lib.critical_batch as cb
from course_lib import alpha_beta
from course_lib.critical_batch import BatchSizeSweep, CriticalBatchFit, time_to_target


# ------------------------------------------------------------------ the critical batch size
@given(st.floats(1.0, 1e5), st.floats(0.5, 1e5),
       st.lists(st.integers(1, 10**6), min_size=2, max_size=12, unique=True))
@settings(max_examples=60, deadline=None)
def test_fit_recovers_the_parameters_of_synthetic_data_exactly(n_min, b_crit, sizes):
    b = np.array(sizes, float)
    fit = cb.fit_critical_batch(b, n_min * (1 + b_crit / b))
    assert fit.n_min == pytest.approx(n_min, rel=1e-9)
    assert fit.b_crit == pytest.approx(b_crit, rel=1e-9)
    assert fit.d_min == pytest.approx(n_min * b_crit, rel=1e-9)
    np.testing.assert_allclose(fit.steps(b), n_min * (1 + b_crit / b), rtol=1e-9)


def test_fit_model_at_hand_values():
    fit = cb.CriticalBatchFit(n_min=100.0, b_crit=64.0)
    assert fit.steps(64) == 200.0 and isinstance(fit.steps(64), float)  # twice the floor at B_crit
    assert fit.steps([16, 6400]).tolist() == [500.0, 101.0]
    assert fit.d_min == 6400.0


@pytest.mark.parametrize(
    ("batch_sizes", "steps", "exc", "name"),
    [
        ([8, 16], [100, 50, 25], ValueError, "same length"),
        ([8, 8], [100, 90], ValueError, "two"),
        ([0, 16], [100, 50], ValueError, "batch_sizes"),
        ([8, 16], [100, -50], ValueError, "steps"),
        ([8, 16], [50, 100], ValueError, "fall"),  # more steps at the larger batch: no floor
        ("8, 16", [100, 50], TypeError, "batch_sizes"),
        ([8, 16], [100, None], TypeError, "steps"),
    ],
)
def test_fit_bad_input(batch_sizes, steps, exc, name):
    with pytest.raises(exc, match=name):
        cb.fit_critical_batch(batch_sizes, steps)


def test_steps_to_target_is_deterministic_for_a_seed():
    first = cb.steps_to_target(64, 0.8, target_loss=0.5, seed=3)
    assert first == cb.steps_to_target(64, 0.8, target_loss=0.5, seed=3)
    assert isinstance(first, int) and first > 1
    # the target is reached exactly at that step: one step fewer does not reach it
    assert cb.steps_to_target(64, 0.8, target_loss=0.5, seed=3, max_steps=first - 1) is None


def test_steps_to_target_none_when_diverging():
    assert cb.steps_to_target(64, 50.0, target_loss=0.5) is None


@pytest.mark.parametrize(
    ("kwargs", "exc", "name"),
    [
        (dict(batch_size=0), ValueError, "batch_size"),
        (dict(batch_size=2000), ValueError, "training samples"),
        (dict(batch_size=8.0), TypeError, "batch_size"),
        (dict(lr=0.0), ValueError, "lr"),
        (dict(target_loss=-1.0), ValueError, "target_loss"),
        (dict(max_steps=0), ValueError, "max_steps"),
        (dict(hidden=0), ValueError, "hidden"),
        (dict(seed=-1), ValueError, "seed"),
    ],
)
def test_steps_to_target_bad_input(kwargs, exc, name):
    args = dict(batch_size=8, lr=0.1) | kwargs
    with pytest.raises(exc, match=name):
        cb.steps_to_target(**args)


def test_batch_size_sweep_picks_the_best_rate_it_tried():
    sweep = cb.batch_size_sweep((8, 64), target_loss=0.5)
    again = cb.batch_size_sweep((64, 8, 8), target_loss=0.5)  # order and repeats do not matter
    assert sweep.batch_sizes.tolist() == [8, 64] == again.batch_sizes.tolist()
    assert sweep.steps.tolist() == again.steps.tolist()
    assert sweep.steps[1] < sweep.steps[0] and sweep.lr[1] >= sweep.lr[0]
    assert sweep.step_seconds.shape == (2,) and np.all(sweep.step_seconds > 0)
    for b, lr, n, tried in zip(sweep.batch_sizes, sweep.lr, sweep.steps, sweep.tried):
        assert tried[float(lr)] == n
        assert all(s is None or s > n for r, s in tried.items() if r != float(lr))
        # the sweep's count is the one steps_to_target gives at the chosen rate
        assert cb.steps_to_target(int(b), float(lr), target_loss=0.5) == n
        # the neighbours on the grid above and below are no better
        for r in (lr * 2**0.5, lr / 2**0.5):
            s = cb.steps_to_target(int(b), float(r), target_loss=0.5)
            assert s is None or s >= n


@pytest.mark.parametrize(
    ("kwargs", "exc", "name"),
    [
        (dict(batch_sizes=(8,)), ValueError, "batch_sizes"),
        (dict(batch_sizes=(8, 0)), ValueError, r"batch_sizes\[1\]"),
        (dict(batch_sizes="8, 16"), TypeError, "batch_sizes"),
        (dict(batch_sizes=(8, 4096)), ValueError, "training samples"),
        (dict(start_lr=0.0), ValueError, "start_lr"),
        (dict(lr_factor=1.0), ValueError, "lr_factor"),
        (dict(target_loss=0.0), ValueError, "target_loss"),
        (dict(max_steps=-5), ValueError, "max_steps"),
        (dict(target_loss=1e-6, max_steps=5), ValueError, "target_loss"),  # never reached
    ],
)
def test_batch_size_sweep_bad_input(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        cb.batch_size_sweep(**kwargs)


def _sweep():
    return BatchSizeSweep(np.array([8, 64, 512]), np.array([0.4, 0.8, 1.1]), np.array([300, 100, 70]),
                          np.array([1e-4, 2e-4, 8e-4]), 0.1, ({}, {}, {}))


def test_time_to_target_on_one_device_is_steps_times_the_measured_step():
    sweep, fit = _sweep(), CriticalBatchFit(n_min=66.0, b_crit=30.0)
    t = time_to_target(sweep, fit, 1, nbytes=1e5, bandwidth=1e9, latency=1e-5, points=3)
    assert t.batch_sizes.tolist() == pytest.approx([8, 64, 512])  # the grid hits the measured sizes
    np.testing.assert_allclose(t.step_seconds, sweep.step_seconds, rtol=1e-12)  # no exchange on one device
    np.testing.assert_allclose(t.seconds, fit.steps(np.array([8, 64, 512])) * sweep.step_seconds, rtol=1e-12)
    assert t.best == int(np.argmin(t.seconds)) and t.devices == 1


def test_time_to_target_on_n_devices_adds_the_ring_and_needs_a_sample_per_device():
    sweep, fit = _sweep(), CriticalBatchFit(n_min=66.0, b_crit=30.0)
    t = time_to_target(sweep, fit, 8, nbytes=1e5, bandwidth=1e9, latency=1e-5, points=3)
    ring = alpha_beta.ring_allreduce_time(1e5, 8, 1e9, 1e-5)
    # B = 8: one sample per device, below the smallest measured batch: that batch's time
    assert t.step_seconds[0] == pytest.approx(1e-4 + ring)
    assert t.step_seconds[1] == pytest.approx(1e-4 + ring)  # B = 64 on 8 devices: 8 samples each
    assert t.seconds[1] == pytest.approx(fit.steps(64) * (1e-4 + ring))
    t16 = time_to_target(sweep, fit, 16, nbytes=1e5, bandwidth=1e9, latency=1e-5, points=3)
    assert np.isnan(t16.seconds[0]) and np.isfinite(t16.seconds[1:]).all()  # B = 8 < N = 16


@pytest.mark.parametrize(
    ("kwargs", "exc", "name"),
    [
        (dict(sweep=None), TypeError, "sweep"),
        (dict(fit=(66, 30)), TypeError, "fit"),
        (dict(devices=0), ValueError, "devices"),
        (dict(points=1), ValueError, "points"),
        (dict(bandwidth=0.0), ValueError, "bandwidth"),
    ],
)
def test_time_to_target_bad_input(kwargs, exc, name):
    args = dict(sweep=_sweep(), fit=CriticalBatchFit(66.0, 30.0), devices=2, nbytes=1e5, bandwidth=1e9,
                latency=0.0) | kwargs
    with pytest.raises(exc, match=name):
        time_to_target(**args)
