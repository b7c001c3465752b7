"""course_lib.optim: optimiser steps against hand computations, schedules, bad input."""

import doctest
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import course_lib.optim as optim
from course_lib.critical_batch import large_batch_experiment
from course_lib.models import MLP, sgd_step
from course_lib.optim import (
    LAMB,
    LARS,
    SGD,
    WarmupLR,
    linear_scaling_rule,
    sqrt_scaling_rule,
)
from course_lib.parallel.train.reference import train_serial


def test_doctests():
    result = doctest.testmod(optim)
    assert result.attempted > 10 and result.failed == 0


def _tiny():
    """MLP (2, 2, 1): W0 (2,2), b0 (2,), W1 (2,1), b1 (1,) = 9 parameters, float64."""
    model = MLP((2, 2, 1), dtype=np.float64)
    w = np.array([1.0, 2.0, 2.0, 4.0, 0.5, -0.5, 3.0, 4.0, 0.25])
    g = np.array([0.1, 0.2, 0.2, 0.4, 1.0, 1.0, -0.6, 0.8, 2.0])
    return model, w, g


# ------------------------------------------------------------------ schedules and rules
def test_scaling_rules():
    assert linear_scaling_rule(0.1, 256, 8192) == pytest.approx(3.2)
    assert linear_scaling_rule(0.1, 256, 256) == 0.1
    assert sqrt_scaling_rule(0.001, 512, 32768) == pytest.approx(0.008)
    with pytest.raises(ValueError, match="base_lr"):
        linear_scaling_rule(-0.1, 1, 2)
    with pytest.raises(ValueError, match="batch"):
        linear_scaling_rule(0.1, 1, 0)
    with pytest.raises(TypeError, match="base_batch"):
        sqrt_scaling_rule(0.1, 1.5, 2)


def test_warmup_schedule_hand_values():
    s = WarmupLR(2.0, warmup_steps=4, initial_lr=1.0)
    assert [s(t) for t in range(6)] == [1.25, 1.5, 1.75, 2.0, 2.0, 2.0]
    s = WarmupLR(1.0, warmup_steps=0, total_steps=4, power=2)
    assert [s(t) for t in range(5)] == [1.0, 0.5625, 0.25, 0.0625, 0.0]


@given(st.floats(1e-4, 10), st.integers(1, 500), st.integers(0, 2000))
@settings(max_examples=50, deadline=None)
def test_warmup_is_monotone_and_bounded(peak, warm, t):
    s = WarmupLR(peak, warm)
    assert 0 < s(t) <= peak
    assert s(t) <= s(t + 1)
    assert s(warm - 1) == pytest.approx(peak)


@pytest.mark.parametrize(
    ("kwargs", "exc", "name"),
    [
        (dict(peak_lr=0.0), ValueError, "peak_lr"),
        (dict(warmup_steps=-1), ValueError, "warmup_steps"),
        (dict(total_steps=3), ValueError, "total_steps"),
        (dict(power=0.0), ValueError, "power"),
        (dict(initial_lr=2.0), ValueError, "initial_lr"),
        (dict(peak_lr="1"), TypeError, "peak_lr"),
    ],
)
def test_warmup_bad_input(kwargs, exc, name):
    args = dict(peak_lr=1.0, warmup_steps=3) | kwargs
    with pytest.raises(exc, match=name):
        WarmupLR(**args)
    with pytest.raises(ValueError, match="step"):
        WarmupLR(1.0, 2)(-1)


# ------------------------------------------------------------------ SGD
def test_sgd_without_momentum_is_sgd_step_bitwise():
    rng = np.random.default_rng(0)
    p1 = rng.standard_normal(100).astype(np.float32)
    p2 = p1.copy()
    g = rng.standard_normal(100).astype(np.float32)
    sgd_step(p1, g, 0.1)
    SGD(0.1).step(p2, g)
    assert np.array_equal(p1, p2)


def test_sgd_in_train_matches_the_default_loop_bitwise():
    from course_lib.datasets import load_digits

    d = load_digits("test")
    model = MLP((64, 16, 10))
    a = train_serial(model, d.x, d.y, epochs=2, batch_size=32, lr=0.1)
    b = train_serial(model, d.x, d.y, epochs=2, batch_size=32, optimizer=SGD(0.1))
    assert np.array_equal(a.params, b.params)


def test_sgd_momentum_hand_steps():
    w = np.array([1.0, -1.0])
    opt = SGD(0.5, momentum=0.5)
    opt.step(w, np.array([1.0, 2.0]))  # v = g = [1, 2]; w -= 0.5 v
    assert w.tolist() == [0.5, -2.0]
    opt.step(w, np.array([0.0, 2.0]))  # v = 0.5 [1, 2] + [0, 2] = [0.5, 3]
    assert w.tolist() == [0.25, -3.5]
    assert opt.t == 2


def test_sgd_nesterov_and_weight_decay_hand_steps():
    w = np.array([2.0])
    opt = SGD(0.1, momentum=0.5, weight_decay=0.5, nesterov=True)
    opt.step(w, np.array([1.0]))  # d = 1 + 0.5*2 = 2; v = 2; step d + 0.5 v = 3
    assert w[0] == pytest.approx(2.0 - 0.3)
    opt.step(w, np.array([1.0]))  # d = 1 + 0.85 = 1.85; v = 1 + 1.85 = 2.85; 1.85 + 1.425
    assert w[0] == pytest.approx(1.7 - 0.1 * (1.85 + 0.5 * 2.85))


def test_optimisers_follow_the_schedule():
    w = np.zeros(2)
    opt = SGD(WarmupLR(1.0, warmup_steps=2))
    assert opt.current_lr() == 0.5
    opt.step(w, np.ones(2))
    assert w.tolist() == [-0.5, -0.5]
    assert opt.current_lr() == 1.0
    bad = SGD(lambda t: -1.0)
    with pytest.raises(ValueError, match="lr"):
        bad.step(w, np.ones(2))


# ------------------------------------------------------------------ LARS
def test_lars_hand_step():
    model, w, g = _tiny()
    opt = LARS(model, lr=2.0, momentum=0.0, trust_coefficient=0.1)
    opt.step(w, g)
    # W0 = [1,2,2,4]: ||W0|| = 5; ||g|| = 0.5 -> lambda = 0.1 * 5 / 0.5 = 1; step 2 g
    # W1 = [3,4]: 5; ||g|| = 1 -> lambda = 0.5; step 2 * 0.5 * g = g
    # biases: lambda = 1, step 2 g
    expected = np.array(
        [1 - 0.2, 2 - 0.4, 2 - 0.4, 4 - 0.8, 0.5 - 2, -0.5 - 2, 3 + 0.6, 4 - 0.8, 0.25 - 4]
    )
    np.testing.assert_allclose(w, expected, rtol=1e-12)
    assert opt.last_trust_ratios == pytest.approx({"W0": 1.0, "b0": 1.0, "W1": 0.5, "b1": 1.0})


def test_lars_weight_decay_and_momentum_hand_steps():
    model, w, g = _tiny()
    opt = LARS(model, lr=1.0, momentum=0.5, weight_decay=0.1, trust_coefficient=0.01)
    w1 = w.copy()
    opt.step(w1, g)
    # W1 = [3,4], g = [-0.6, 0.8]: lambda = 0.01*5/(1 + 0.1*5) = 1/30
    lam = 0.01 * 5 / 1.5
    v_w1 = lam * (np.array([-0.6, 0.8]) + 0.1 * np.array([3.0, 4.0]))
    np.testing.assert_allclose(w1[6:8], [3.0, 4.0] - v_w1, rtol=1e-12)
    # second step with the same gradient: v = 0.5 v + lr lambda' (g + beta w')
    w2 = w1.copy()
    opt.step(w2, g)
    wn = np.linalg.norm(w1[6:8])
    lam2 = 0.01 * wn / (1.0 + 0.1 * wn)
    v2 = 0.5 * v_w1 + lam2 * (np.array([-0.6, 0.8]) + 0.1 * w1[6:8])
    np.testing.assert_allclose(w2[6:8], w1[6:8] - v2, rtol=1e-12)
    # biases: no weight decay, trust ratio 1, plain momentum SGD
    np.testing.assert_allclose(w2[8], 0.25 - 2.0 - (0.5 * 2.0 + 2.0), rtol=1e-12)


def test_lars_bias_not_excluded_and_zero_norms():
    model = MLP((2, 1), dtype=np.float64)
    w = np.array([3.0, 4.0, 0.0])  # zero bias: ||w|| = 0 -> ratio 1
    g = np.array([0.0, 0.0, 1.0])  # zero weight gradient -> ratio 1, no move
    opt = LARS(model, lr=1.0, momentum=0.0, trust_coefficient=0.5, exclude_bias=False)
    opt.step(w, g)
    assert w.tolist() == [3.0, 4.0, -1.0]
    assert opt.last_trust_ratios == {"W0": 1.0, "b0": 1.0}
    opt.step(w, g)  # now ||b0|| = 1, ||g|| = 1 -> ratio 0.5
    assert opt.last_trust_ratios["b0"] == 0.5
    assert w[2] == -1.5


def _lars_reference(views_w, views_g, lr, tau):
    """Independent reference (momentum 0, no decay): per named tensor from MLP.views."""
    out = {}
    for name, w in views_w.items():
        g = views_g[name]
        if name.startswith("b"):
            out[name] = w - lr * g
        else:
            out[name] = w - lr * tau * np.linalg.norm(w) / np.linalg.norm(g) * g
    return out


@given(st.integers(0, 10_000), st.floats(1e-3, 1.0), st.floats(1e-3, 1.0))
@settings(max_examples=30, deadline=None)
def test_lars_against_reference_and_scale_invariance(seed, lr, tau):
    model = MLP((5, 4, 3), dtype=np.float64)
    rng = np.random.default_rng(seed)
    w, g = rng.standard_normal(model.n_params), rng.standard_normal(model.n_params)
    ref = _lars_reference(model.views(w.copy()), model.views(g), lr, tau)
    w1, w2 = w.copy(), w.copy()
    LARS(model, lr, momentum=0.0, trust_coefficient=tau).step(w1, g)
    for name, view in model.views(w1).items():
        np.testing.assert_allclose(view, ref[name], rtol=1e-10, atol=1e-12)
    # scaling the gradient does not change a weight matrix's step (trust ratio ~ 1/||g||)
    LARS(model, lr, momentum=0.0, trust_coefficient=tau).step(w2, 7.0 * g)
    for name in ("W0", "W1"):
        np.testing.assert_allclose(model.views(w2)[name], model.views(w1)[name], rtol=1e-10)
        step = np.linalg.norm(model.views(w1)[name] - model.views(w)[name])
        assert step == pytest.approx(lr * tau * np.linalg.norm(model.views(w)[name]), rel=1e-10)


# ------------------------------------------------------------------ LAMB
def test_lamb_hand_first_step():
    model, w, g = _tiny()
    opt = LAMB(model, lr=0.1, eps=0.0, weight_decay=0.0)
    w0 = w.copy()
    opt.step(w, g)
    # first step with bias correction: m_hat = g, v_hat = g^2 -> u = sign(g)
    u = np.sign(g)
    # W0: ||w|| = 5, ||u|| = 2 -> ratio 2.5; W1: ||w|| = 5, ||u|| = sqrt 2
    expected = w0 - 0.1 * u * np.array([2.5] * 4 + [1, 1] + [5 / math.sqrt(2)] * 2 + [1])
    np.testing.assert_allclose(w, expected, rtol=1e-12)
    assert opt.last_trust_ratios["W1"] == pytest.approx(5 / math.sqrt(2))


def _lamb_reference(w, grads, lr, b1, b2, eps, wd, model):
    """Independent reference: LAMB Algorithm 2 written per named tensor in float64."""
    views = {k: v.copy() for k, v in model.views(w.copy()).items()}
    m = {k: np.zeros_like(v) for k, v in views.items()}
    v2 = {k: np.zeros_like(v) for k, v in views.items()}
    for t, g in enumerate(grads, start=1):
        gv = model.views(g)
        for k in views:
            m[k] = b1 * m[k] + (1 - b1) * gv[k]
            v2[k] = b2 * v2[k] + (1 - b2) * gv[k] ** 2
            r = (m[k] / (1 - b1**t)) / (np.sqrt(v2[k] / (1 - b2**t)) + eps)
            if k.startswith("W"):
                r = r + wd * views[k]
                ratio = np.linalg.norm(views[k]) / np.linalg.norm(r)
            else:
                ratio = 1.0
            views[k] = views[k] - lr * ratio * r
    return views


def test_lamb_three_steps_against_reference():
    model = MLP((4, 3, 2), dtype=np.float64)
    rng = np.random.default_rng(3)
    w = rng.standard_normal(model.n_params)
    grads = [rng.standard_normal(model.n_params) for _ in range(3)]
    ref = _lamb_reference(w, grads, 0.05, 0.9, 0.99, 1e-6, 0.01, model)
    opt = LAMB(model, lr=0.05, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.01)
    for g in grads:
        opt.step(w, g)
    for name, view in model.views(w).items():
        np.testing.assert_allclose(view, ref[name], rtol=1e-10)


@given(st.integers(0, 10_000), st.floats(1e-4, 0.5))
@settings(max_examples=30, deadline=None)
def test_lamb_moves_each_layer_by_lr_times_its_norm(seed, lr):
    model = MLP((5, 4, 3), dtype=np.float64)
    rng = np.random.default_rng(seed)
    w, g = rng.standard_normal(model.n_params), rng.standard_normal(model.n_params)
    w1 = w.copy()
    LAMB(model, lr, weight_decay=0.01).step(w1, g)
    for name in ("W0", "W1"):
        step = np.linalg.norm(model.views(w1)[name] - model.views(w)[name])
        assert step == pytest.approx(lr * np.linalg.norm(model.views(w)[name]), rel=1e-9)


def test_lamb_float32_runs_in_train():
    from course_lib.datasets import load_digits

    d = load_digits("test")
    model = MLP((64, 16, 10))
    res = train_serial(model, d.x, d.y, epochs=3, batch_size=64, optimizer=LAMB(model, 0.02))
    assert res.params.dtype == np.float32
    assert res.loss[-1] < res.loss[0]


# ------------------------------------------------------------------ bad input
def test_bad_constructor_arguments():
    model = MLP((2, 2))
    with pytest.raises(ValueError, match="lr"):
        SGD(0.0)
    with pytest.raises(TypeError, match="lr"):
        SGD("0.1")
    with pytest.raises(ValueError, match="momentum"):
        SGD(0.1, momentum=1.0)
    with pytest.raises(ValueError, match="nesterov"):
        SGD(0.1, nesterov=True)
    with pytest.raises(ValueError, match="weight_decay"):
        SGD(0.1, weight_decay=-1)
    with pytest.raises(TypeError, match="model"):
        LARS("mlp", 0.1)
    with pytest.raises(ValueError, match="trust_coefficient"):
        LARS(model, 0.1, trust_coefficient=0)
    with pytest.raises(ValueError, match=r"betas\[1\]"):
        LAMB(model, 0.1, betas=(0.9, 1.0))
    with pytest.raises(TypeError, match="betas"):
        LAMB(model, 0.1, betas=0.9)
    with pytest.raises(ValueError, match="eps"):
        LAMB(model, 0.1, eps=-1.0)
    with pytest.raises(TypeError, match="exclude_bias"):
        LAMB(model, 0.1, exclude_bias="yes")


def test_bad_step_arguments():
    model = MLP((2, 2))  # 6 parameters
    w = np.zeros(6, np.float32)
    with pytest.raises(ValueError, match="grad"):
        SGD(0.1).step(w, np.zeros(5, np.float32))
    with pytest.raises(TypeError, match="params"):
        SGD(0.1).step([0.0] * 6, np.zeros(6))
    with pytest.raises(ValueError, match="params"):
        SGD(0.1).step(np.zeros((2, 3)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="6 elements"):
        LAMB(model, 0.1).step(np.zeros(7), np.zeros(7))
    ro = np.zeros(6)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        SGD(0.1).step(ro, np.zeros(6))
    opt = SGD(0.1, momentum=0.9)
    opt.step(np.zeros(6), np.ones(6))
    with pytest.raises(ValueError, match="new optimiser"):
        opt.step(np.zeros(7), np.ones(7))


# ------------------------------------------------------------------ the experiment
def test_large_batch_experiment_structure():
    runs = large_batch_experiment(epochs=3, warmup_epochs=1, runs=("same_lr", "scaled_warmup", "lamb"))
    same, scaled, lamb = runs
    assert [r.batch_size for r in runs] == [512, 512, 512]
    assert same.steps_per_epoch == 3 and same.steps.tolist() == [3, 6, 9]
    assert len(same.loss) == 9 and len(same.epoch_loss) == len(same.test_accuracy) == 3
    assert scaled.peak_lr == pytest.approx(linear_scaling_rule(0.05, 16, 512))
    assert scaled.warmup_steps == 3 and lamb.optimizer == "LAMB"
    # same initial weights and data order: the first step's loss is the same in every run
    assert same.loss[0] == scaled.loss[0] == lamb.loss[0]


def test_large_batch_experiment_bad_input():
    with pytest.raises(ValueError, match="runs"):
        large_batch_experiment(epochs=1, runs=("adam",))
    with pytest.raises(ValueError, match="factor"):
        large_batch_experiment(factor=1)
    with pytest.raises(ValueError, match="base_lr"):
        large_batch_experiment(base_lr=0)


def test_large_batch_experiment_validates_every_setting():
    for kwargs, name in ((dict(momentum=1.0), "momentum"), (dict(lars_trust=0.0), "lars_trust"),
                         (dict(lamb_lr=-1.0), "lamb_lr"), (dict(warmup_epochs=-1), "warmup_epochs")):
        with pytest.raises(ValueError, match=name):
            large_batch_experiment(epochs=1, **kwargs)
