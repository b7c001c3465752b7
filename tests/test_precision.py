"""Mixed precision (course_lib.precision): Adam's bytes per parameter from the formats'
item sizes, measured arrays, the halved all-reduce payload, and loss scaling against
float16 underflow on the running example."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.datasets import load_digits
from course_lib.memory import model_state_bytes
from course_lib.models import MLP
from course_lib.precision import (
    adam_bytes_per_param,
    allreduce_in,
    gradient_underflow,
    mixed_adam_arrays,
)

DIGITS = load_digits("train")
MODEL = MLP((64, 64, 10))


def test_mixed_precision_adam_is_the_zero_papers_2_2_12():
    states = adam_bytes_per_param("float16")
    assert (states.parameters, states.gradients, states.optimizer_states) == (2, 2, 12)
    assert states == model_state_bytes(1)  # the calculator's default accounting
    assert adam_bytes_per_param("bfloat16") == states
    assert adam_bytes_per_param(np.float16) == states
    fp32 = adam_bytes_per_param("float32")  # no master copy: 4 + 4 + 8
    assert (fp32.parameters, fp32.gradients, fp32.optimizer_states) == (4, 4, 8)


def test_the_allocated_arrays_measure_16_bytes_per_parameter():
    arrays = mixed_adam_arrays(MODEL.n_params)
    assert sum(a.nbytes for a in arrays.values()) == 16 * MODEL.n_params
    assert [a.dtype.itemsize for a in arrays.values()] == [2, 2, 4, 4, 4]


def test_float16_gradients_halve_the_payload_and_the_sum_is_rank_ordered():
    params = MODEL.init_params(0)
    rows = np.stack([MODEL.loss_and_grad(params, DIGITS.x[i * 50:(i + 1) * 50], DIGITS.y[i * 50:(i + 1) * 50],
                                         reduction="sum")[1] for i in range(3)])
    half, single = allreduce_in(rows, "float16"), allreduce_in(rows, "float32")
    assert half["payload"] * 2 == single["payload"] == MODEL.n_params * 4
    r16 = rows.astype(np.float16)
    assert np.array_equal(half["sum"], (r16[0] + r16[1]) + r16[2])  # rank order, in float16
    assert single["max_rel_error"] < 1e-6 < half["max_rel_error"] < 1e-2  # 11 bits of mantissa


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 5), st.integers(1, 40))
def test_the_payload_is_one_row_in_the_format(n, size):
    rows = np.random.default_rng(n * size).standard_normal((n, size)).astype(np.float32)
    assert allreduce_in(rows, "float16")["payload"] == 2 * size
    assert allreduce_in(rows, "float64")["payload"] == 8 * size


def test_a_loss_scale_brings_the_flushed_gradients_back():
    """Hand-built logits: a confident, correct sample has logit gradients p - 1 of about
    -1e-9 / B, below float16's smallest subnormal (2**-24 = 6e-8): flushed without a scale,
    kept with S = 2**16; a scale of 2**30 overflows float16's 65504."""
    model = MLP((2, 2))  # one layer: logits = x @ W + b
    params = np.zeros(model.n_params, np.float32)
    w, b = model.layer(params, 0)
    w[...] = [[12.0, -12.0], [0.0, 0.0]]  # sample (1, 0): logit gap 24, p(wrong) = e^-24 = 3.8e-11
    x, y = np.array([[1.0, 0.0]], np.float32), np.array([0])
    plain = gradient_underflow(model, params, x, y)
    assert plain["activation_grads"] == 1.0 and plain["overflow"] == 0
    scaled = gradient_underflow(model, params, x, y, scale=2.0**30)
    assert scaled["activation_grads"] == 0.0
    big = MLP((2, 2))
    over = gradient_underflow(big, np.full(big.n_params, 0.0, np.float32), np.ones((1, 2), np.float32),
                              np.array([0]), scale=2.0**20)  # gradients of 0.5 x 2**20 > 65504
    assert over["overflow"] > 0 and over["max_rel_error"] == np.inf


def test_on_the_running_example_scaling_removes_the_underflow():
    params = MODEL.init_params(0)
    w, _ = MODEL.layer(params, 1)
    w *= 30.0  # confident logits, as after training: tiny gradients for the right classes
    x, y = DIGITS.x[:200], DIGITS.y[:200]
    plain, scaled = gradient_underflow(MODEL, params, x, y), gradient_underflow(MODEL, params, x, y, scale=1024)
    assert plain["activation_grads"] > 0.0
    assert scaled["activation_grads"] < plain["activation_grads"]
    assert scaled["max_rel_error"] <= plain["max_rel_error"]


@pytest.mark.parametrize(("call", "exc", "match"), [
    (lambda: adam_bytes_per_param("int8"), ValueError, "compute_dtype"),
    (lambda: adam_bytes_per_param(None), ValueError, "compute_dtype"),
    (lambda: adam_bytes_per_param(3), ValueError, "compute_dtype"),
    (lambda: mixed_adam_arrays(0), ValueError, "n_params"),
    (lambda: mixed_adam_arrays(2.5), TypeError, "n_params"),
    (lambda: allreduce_in([[1.0]], "float16"), TypeError, "rows"),
    (lambda: allreduce_in(np.ones(3), "float16"), ValueError, "rows"),
    (lambda: allreduce_in(np.ones((2, 3)), "int8"), ValueError, "dtype"),
    (lambda: gradient_underflow("mlp", None, None, None), TypeError, "model"),
    (lambda: gradient_underflow(MODEL, np.zeros(3, np.float32), DIGITS.x[:2], DIGITS.y[:2]), ValueError, "params"),
    (lambda: gradient_underflow(MODEL, MODEL.init_params(0), DIGITS.x[:2], DIGITS.y[:2], scale=0), ValueError,
     "scale"),
])
def test_bad_input_names_the_parameter(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_largest_loss_scale_hand_values():
    from course_lib.precision import FLOAT16_MAX, largest_loss_scale

    assert largest_loss_scale(3.2) == 2.0**14  # 3.2 x 16,384 = 52,429; x 2 = 104,858 > 65,504
    assert largest_loss_scale(1.0) == 2.0**15 and largest_loss_scale(FLOAT16_MAX) == 1.0
    assert largest_loss_scale(1e-3) * 1e-3 <= FLOAT16_MAX < 2 * largest_loss_scale(1e-3) * 1e-3
    with pytest.raises(ValueError, match="max_grad"):
        largest_loss_scale(0.0)


def test_the_loss_scale_exercise():
    from course_lib.exercises import memory as ex

    assert ex.ex_loss_scale(16384).correct
    assert "overflows" in str(ex.ex_loss_scale(32768))
    assert not ex.ex_loss_scale(65504 / 3.2).correct


def test_the_loss_scale_figure():
    from course_lib.plots.memory import loss_scale_figure

    fig = loss_scale_figure([0, 8, 16], [0.02, 0.0, 0.0], [0, 0, 3])
    assert [round(y, 6) for y in fig.axes[0].lines[0].get_ydata()] == [2.0, 0.0, 0.0]  # percent
    with pytest.raises(ValueError, match="log2_scales"):
        loss_scale_figure([0, 8], [0.1], [0, 0])
