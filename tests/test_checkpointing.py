"""Activation checkpointing (memory.checkpointed_grad, Chen et al. 2016): the gradient of the
plain backward bit for bit, the counted peak equal to memory.mlp_activation_bytes, the
traced peak above it, the minimum near sqrt(n) segments, one more forward of compute."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.memory import checkpointed_grad, mlp_activation_bytes, recompute_flops_ratio
from course_lib.models import MLP

DEEP = MLP((8,) + (32,) * 15 + (4,))  # 16 layers, nearly equal widths
RNG = np.random.default_rng(0)
X = RNG.standard_normal((12, 8)).astype(np.float32)
Y = np.arange(12) % 4


@pytest.mark.parametrize("segments", [1, 2, 4, 7, 16])
def test_the_gradient_is_the_plain_backward_bit_for_bit(segments):
    params = DEEP.init_params(1)
    loss, grad = DEEP.loss_and_grad(params, X, Y)
    run = checkpointed_grad(DEEP, params, X, Y, segments)
    assert np.array_equal(run.grad, grad) and run.loss == loss


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=2, max_size=7), st.integers(1, 6), st.data())
def test_the_counted_peak_is_the_formula(sizes, batch, data):
    model = MLP(tuple(sizes))
    k = data.draw(st.integers(1, model.n_layers))
    x = np.ones((batch, sizes[0]), np.float32)
    run = checkpointed_grad(model, model.init_params(0), x, np.zeros(batch, int), k)
    assert run.stored_bytes == mlp_activation_bytes(model, batch, segments=k)
    assert run.traced_bytes >= run.stored_bytes - x.nbytes  # the input was allocated before


def test_the_minimum_is_near_sqrt_n_segments_and_far_below_storing_everything():
    """16 layers of width 32: k checkpoints of about one layer each plus a recomputed segment
    of about 16 / k layers: least at k = 4 = sqrt(16)."""
    params = DEEP.init_params(0)
    stored = {k: checkpointed_grad(DEEP, params, X, Y, k).stored_bytes for k in range(1, DEEP.n_layers + 1)}
    best = min(stored, key=stored.get)
    assert best == math.isqrt(DEEP.n_layers) == 4
    assert stored[best] < 0.5 * mlp_activation_bytes(DEEP, X.shape[0])
    assert stored[1] == stored[DEEP.n_layers] == mlp_activation_bytes(DEEP, X.shape[0])  # nothing saved


def test_one_more_forward_pass_of_compute():
    run = checkpointed_grad(DEEP, DEEP.init_params(0), X, Y, 4)
    flops = DEEP.flops_per_sample()
    assert run.recomputed_flops == flops["forward"] * X.shape[0]
    total = flops["total"] * X.shape[0]
    assert (total + run.recomputed_flops) / total == pytest.approx(recompute_flops_ratio(DEEP))


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"segments": 0}, ValueError, "segments"),
    ({"segments": 17}, ValueError, "segments"),
    ({"segments": 2.0}, TypeError, "segments"),
    ({"model": "mlp"}, TypeError, "model"),
    ({"params": np.zeros(3, np.float32)}, ValueError, "params"),
    ({"x": np.ones((12, 5), np.float32)}, ValueError, "x"),
    ({"y": np.arange(11)}, ValueError, "y"),
])
def test_bad_input_names_the_parameter(kwargs, exc, match):
    args = {"model": DEEP, "params": DEEP.init_params(0), "x": X, "y": Y, "segments": 2, **kwargs}
    with pytest.raises(exc, match=match):
        checkpointed_grad(**args)


def test_the_checkpoint_exercise():
    """25 layers (64, 1,024 x 24, 10), B = 64: least at k = 5 = sqrt(25); the 5 checkpoints
    (widths 64 + 4 x 1,024) plus the largest recomputed segment, the last (4 hidden layers of
    1,024 and the 10 logits), x 64 samples x 4 bytes."""
    from course_lib.exercises import activations as ex

    expected = (64 + 4 * 1024 + 4 * 1024 + 10) * 64 * 4 / 1e6
    assert expected == pytest.approx(2.116096)
    assert ex.ex_checkpoint_mb(expected).correct
    assert "every activation" in str(ex.ex_checkpoint_mb(mlp_activation_bytes(MLP(ex.CHECKPOINT["sizes"]), 64) / 1e6))


def test_the_checkpoint_figure():
    from course_lib.plots.memory import checkpoint_figure

    fig = checkpoint_figure([1, 2, 3, 4], [8e6, 4e6, 3.5e6, 8e6], [9e6, 6e6, 5e6, 9e6], [8e6, 4e6, 3.5e6, 8e6], 8e6, 4)
    assert [p.get_height() for p in fig.axes[0].patches] == [8.0, 4.0, 3.5, 8.0]  # MB
    with pytest.raises(ValueError, match="everything"):
        checkpoint_figure([1], [1.0], [1.0], [1.0], 0.0, 1)
    with pytest.raises(ValueError, match="one length"):
        checkpoint_figure([1, 2], [1.0], [1.0], [1.0], 1.0, 2)
