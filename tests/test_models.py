"""The running example (course_lib.models.MLP): gradients, accuracy, buffer layout, FLOP count;
the gradient and training tests run on the convolutional network (course_lib.cnn.CNN) too."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.cnn import CNN
from course_lib.datasets import load_digits
from course_lib.models import MLP, sgd_step, softmax_cross_entropy
from course_lib.parallel.train.reference import train_serial

#: The two models of the course, in the small sizes the gradient tests use: the MLP
#: (chapters 01-14) and the convolutional network (course_lib.cnn, chapter 04). Tests that
#: hold for both run on each (their own tests stay in test_cnn.py and below).
MODELS = {
    "mlp": lambda dtype=np.float32: MLP((5, 4, 3), dtype=dtype),
    "mlp-deep": lambda dtype=np.float32: MLP((6, 5, 4, 3), dtype=dtype),
    "mlp-wide": lambda dtype=np.float32: MLP((8, 6, 4), dtype=dtype),
    "cnn": lambda dtype=np.float32: CNN(image_shape=(2, 5, 6), channels=(3, 4), n_classes=3, strides=(1, 2),
                                        dtype=dtype),
}


def _batch(model, n: int, seed: int = 0):
    """``n`` random inputs of ``model``'s shape (an MLP's input width, a CNN's image) and labels."""
    rng = np.random.default_rng(seed)
    shape, classes = (model.image_shape, model.n_classes) if isinstance(model, CNN) else \
        ((model.sizes[0],), model.sizes[-1])
    x = rng.standard_normal((n, *shape)).astype(model.dtype)
    y = rng.integers(0, classes, n)
    return x, y


def _numerical_grad(model, params, x, y, reduction, eps=1e-6):
    grad = np.zeros_like(params)
    for i in range(params.size):
        saved = params[i]
        params[i] = saved + eps
        up = model.loss_and_grad(params, x, y, reduction=reduction)[0]
        params[i] = saved - eps
        down = model.loss_and_grad(params, x, y, reduction=reduction)[0]
        params[i] = saved
        grad[i] = (up - down) / (2 * eps)
    return grad


# ------------------------------------------------------------------ gradients
@pytest.mark.parametrize("name, reduction", [("mlp", "mean"), ("mlp", "sum"), ("mlp-deep", "mean"),
                                             ("mlp-deep", "sum"), ("cnn", "mean")])
def test_gradient_matches_central_finite_differences(name, reduction):
    model = MODELS[name](np.float64)
    params = model.init_params(seed=3)
    params += 0.01  # biases away from 0 so no ReLU sits exactly at its kink
    x, y = _batch(model, 4 if name == "cnn" else 7, seed=1)
    _, analytic = model.loss_and_grad(params, x, y, reduction=reduction)
    numeric = _numerical_grad(model, params, x, y, reduction)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name, n", [("mlp-wide", 16), ("cnn", 8)])
def test_float32_gradient_agrees_with_float64(name, n):
    m32, m64 = MODELS[name](), MODELS[name](np.float64)
    p64 = m64.init_params(seed=2)
    x, y = _batch(m64, n)
    _, g64 = m64.loss_and_grad(p64, x, y)
    _, g32 = m32.loss_and_grad(p64.astype(np.float32), x.astype(np.float32), y)
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, g64, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("name, shards", [
    ("mlp", [slice(0, 12, 3), slice(1, 12, 3), slice(2, 12, 3)]),  # strided shards
    ("cnn", [slice(0, 4), slice(4, 9)]),  # unequal contiguous shards
])
def test_shard_gradients_with_sum_add_up_to_the_full_batch(name, shards):
    """What data parallelism relies on: sum-reduced shard gradients add to the batch gradient."""
    model = MODELS[name](np.float64)
    params = model.init_params(seed=0)
    n = sum(len(range(*s.indices(12))) for s in shards)
    x, y = _batch(model, n)
    _, full = model.loss_and_grad(params, x, y, reduction="sum")
    parts = sum(model.loss_and_grad(params, x[s], y[s], reduction="sum")[1] for s in shards)
    np.testing.assert_allclose(parts, full, rtol=1e-12, atol=1e-12)
    _, mean = model.loss_and_grad(params, x, y, reduction="mean")
    np.testing.assert_allclose(mean * n, full, rtol=1e-12)


def test_backward_into_out_buffer_overwrites_it():
    model = MLP((4, 3, 2))
    params = model.init_params(0)
    x, y = _batch(model, 5)
    out = np.full_like(params, 123.0)
    loss, grad = model.loss_and_grad(params, x, y, out=out)
    assert grad is out
    np.testing.assert_array_equal(out, model.loss_and_grad(params, x, y)[1])


def test_softmax_cross_entropy_hand_values():
    loss, d = softmax_cross_entropy(np.array([[0.0, math.log(3.0)]]), np.array([1]))
    assert loss == pytest.approx(-math.log(3 / 4))
    np.testing.assert_allclose(d, [[0.25, -0.25]])
    big = np.array([[1000.0, 0.0]])  # no overflow: shifted by the row maximum
    loss, _ = softmax_cross_entropy(big, np.array([1]))
    assert loss == pytest.approx(1000.0)


# ------------------------------------------------------------------- accuracy
@pytest.mark.parametrize("model, epochs, seed", [
    (MLP((64, 64, 10)), 10, 0), (MLP((64, 64, 10)), 10, 1), (MLP((64, 64, 10)), 10, 2),
    (CNN(), 6, 0),  # the CNN of chapter 04 at its default sizes, with the course's train loop
], ids=["mlp-0", "mlp-1", "mlp-2", "cnn"])
def test_digits_accuracy_above_90_percent_after_a_short_run(model, epochs, seed):
    train_set, test_set = load_digits("train"), load_digits("test")
    result = train_serial(model, train_set.x, train_set.y, epochs=epochs, batch_size=32,
                   lr=0.1, seed=seed, x_test=test_set.x, y_test=test_set.y)
    assert result.test_accuracy[-1] > 0.90
    assert result.loss[-1] < 0.5 * result.loss[0]
    assert result.params.dtype == np.float32


def test_training_is_deterministic():
    tr = load_digits("train")
    a = train_serial(MLP((64, 16, 10)), tr.x, tr.y, epochs=1, seed=5)
    b = train_serial(MLP((64, 16, 10)), tr.x, tr.y, epochs=1, seed=5)
    np.testing.assert_array_equal(a.params, b.params)


# -------------------------------------------------------------- buffer layout
def test_views_share_the_flat_buffer():
    model = MLP((5, 4, 3))
    flat = model.init_params(0)
    views = model.views(flat)
    assert [s.name for s in model.slots] == ["W0", "b0", "W1", "b1"]
    assert views["W0"].shape == (5, 4) and views["b1"].shape == (3,)
    for v in views.values():
        assert np.shares_memory(v, flat)
    views["W1"][0, 0] = 42.0
    assert flat[model.slots[2].offset] == 42.0
    offsets = [s.offset for s in model.slots]
    assert offsets == [0, 20, 24, 36] and model.n_params == 39  # contiguous, in order


def test_layer_range_is_the_contiguous_slice_of_a_stage():
    model = MLP((6, 5, 4, 3))
    flat = np.arange(model.n_params, dtype=np.float32)
    sl = model.layer_range(1, 3)
    w1, _ = model.layer(flat, 1)
    _, b2 = model.layer(flat, 2)
    assert flat[sl][0] == w1.flat[0] and flat[sl][-1] == b2[-1]
    assert sl.stop - sl.start == 5 * 4 + 4 + 4 * 3 + 3
    assert model.layer_range(0, 3) == slice(0, model.n_params)


def test_init_is_deterministic_and_he_scaled():
    model = MLP((256, 128, 10))
    a, b, c = model.init_params(7), model.init_params(7), model.init_params(8)
    assert a.tobytes() == b.tobytes() and a.tobytes() != c.tobytes()
    w0, b0 = model.layer(a, 0)
    assert np.all(b0 == 0)
    assert w0.std() == pytest.approx(math.sqrt(2 / 256), rel=0.05)


# ----------------------------------------------------------------- FLOP count
def test_flops_per_sample_hand_count():
    # sizes (5, 7, 3, 2): MACs per layer 35, 21, 6
    flops = MLP((5, 7, 3, 2)).flops_per_sample()
    assert flops["forward"] == 2 * (35 + 21 + 6)
    # backward: weight gradients of all layers + input gradients of layers 1 and 2
    assert flops["backward"] == 2 * (35 + 21 + 6) + 2 * (21 + 6)
    assert flops["total"] == flops["forward"] + flops["backward"]


def test_flop_count_matches_counted_matmuls():
    """Count the multiply-adds of every matmul a real forward/backward call performs."""
    model = MLP((9, 8, 7, 4), dtype=np.float64)
    params = model.init_params(0)
    x, y = _batch(model, 1)
    counted = []
    original = np.ndarray.__matmul__

    class Counting(np.ndarray):
        def __matmul__(self, other):
            a, b = np.asarray(self), np.asarray(other)
            counted.append(a.shape[0] * a.shape[1] * b.shape[1])
            return original(a, b)

        def __rmatmul__(self, other):
            a, b = np.asarray(other), np.asarray(self)
            counted.append(a.shape[0] * a.shape[1] * b.shape[1])
            return original(a, b)

    _, acts = model.forward(params.view(Counting), x.view(Counting))
    forward_macs = sum(counted)
    counted.clear()
    model.backward(params.view(Counting), [a.view(Counting) for a in acts], y)
    backward_macs = sum(counted)
    flops = model.flops_per_sample()
    assert 2 * forward_macs == flops["forward"]
    assert 2 * backward_macs == flops["backward"]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 300), min_size=2, max_size=6))
def test_flop_count_properties(sizes):
    flops = MLP(sizes).flops_per_sample()
    macs = [a * b for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
    assert flops["forward"] == 2 * sum(macs)
    assert flops["forward"] <= flops["backward"] <= 2 * flops["forward"]


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "sizes, exc, match",
    [((64,), ValueError, "at least an input and an output"), ((64, 0, 10), ValueError, r"sizes\[1\]"),
     ("64,10", TypeError, "sequence of layer widths"), ((64, 2.5, 10), TypeError, r"sizes\[1\]")],
)
def test_bad_sizes(sizes, exc, match):
    with pytest.raises(exc, match=match):
        MLP(sizes)


def test_bad_inputs_name_the_parameter():
    model = MLP((4, 3, 2))
    p = model.init_params(0)
    x, y = _batch(model, 3)
    with pytest.raises(ValueError, match="params must have shape"):
        model.loss_and_grad(p[:-1], x, y)
    with pytest.raises(ValueError, match="x must have shape"):
        model.loss_and_grad(p, x[:, :3], y)
    with pytest.raises(ValueError, match="y must hold labels in"):
        model.loss_and_grad(p, x, np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="reduction must be"):
        model.loss_and_grad(p, x, y, reduction="avg")
    with pytest.raises(ValueError, match="lr must be"):
        sgd_step(p, p, -1.0)
    with pytest.raises(TypeError, match="dtype must be float32 or float64"):
        MLP((4, 2), dtype=np.int32)


def test_the_layout_is_computed_once_and_survives_pickling():
    """``slots`` is cached (it was most of a small step's fixed cost) and still travels to workers."""
    import pickle

    model = MLP((64, 32, 10))
    assert model.slots is model.slots
    clone = pickle.loads(pickle.dumps(model))
    assert clone == model and clone.slots == model.slots and hash(clone) == hash(model)
