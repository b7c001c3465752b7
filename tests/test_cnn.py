"""The convolutional running example (course_lib.cnn.CNN): forward pass, layout, costs, errors.

Its gradient (finite differences, float32, shards) and training tests are the MLP's,
parametrized over both models in test_models.py."""

from __future__ import annotations

import numpy as np
import pytest

from course_lib.cnn import CNN
from course_lib.conv.algorithms import conv2d
from course_lib.cost import conv2d_macs, linear_macs
from course_lib.models import MLP

SMALL = dict(image_shape=(2, 5, 6), channels=(3, 4), n_classes=3, strides=(1, 2))


def _batch(model: CNN, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, *model.image_shape)).astype(model.dtype)
    return x, rng.integers(0, model.n_classes, n)


def test_forward_is_conv_relu_then_linear():
    model = CNN(**SMALL, dtype=np.float64)
    params = model.init_params(seed=0)
    x, _ = _batch(model, 3)
    v = model.views(params)
    a = np.maximum(conv2d(x, v["W0"], v["b0"], 1, 1), 0)
    a = np.maximum(conv2d(a, v["W1"], v["b1"], 2, 1), 0)
    expected = a.reshape(3, -1) @ v["W2"] + v["b2"]
    logits, acts = model.forward(params, x.reshape(3, -1))  # flat input accepted too
    np.testing.assert_allclose(logits, expected, rtol=1e-12)
    assert [a.shape[1:] for a in acts[:-1]] == list(model.feature_shapes)


def test_layout_is_one_flat_buffer_in_layer_order():
    model = CNN()
    assert [(s.name, s.shape) for s in model.slots] == [
        ("W0", (8, 1, 3, 3)), ("b0", (8,)), ("W1", (16, 8, 3, 3)), ("b1", (16,)),
        ("W2", (256, 10)), ("b2", (10,)),
    ]
    assert model.n_params == 72 + 8 + 1152 + 16 + 2560 + 10
    params = model.init_params(seed=4)
    views = model.views(params)
    views["W1"][0, 0, 0, 0] = 123.0  # a view, not a copy
    assert params[80] == 123.0
    sl = model.layer_range(1, 3)
    assert (sl.start, sl.stop) == (80, model.n_params)
    np.testing.assert_array_equal(model.init_params(seed=4)[:80], params[:80])
    # He init: std of W1 close to sqrt(2 / (8 * 3 * 3))
    assert np.std(model.init_params(seed=0)[80:1232]) == pytest.approx(np.sqrt(2 / 72), rel=0.1)


def test_flops_per_sample_counted_with_the_cost_module():
    model = CNN(image_shape=(3, 10, 9), channels=(4, 6, 5), strides=(1, 2, 2), kernel_size=5)
    macs = (
        conv2d_macs(3, 4, 5, (10, 9), padding=2)
        + conv2d_macs(4, 6, 5, (10, 9), stride=2, padding=2)
        + conv2d_macs(6, 5, 5, (5, 5), stride=2, padding=2)
        + linear_macs(5 * 3 * 3, 10)
    )
    first = conv2d_macs(3, 4, 5, (10, 9), padding=2)  # the images need no input gradient
    assert model.flops_per_sample() == {"forward": 2 * macs, "backward": 4 * macs - 2 * first,
                                        "total": 6 * macs - 2 * first}


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        (dict(kernel_size=4), ValueError, r"odd.*4"),
        (dict(strides=(1,)), ValueError, r"2 channels, 1 strides"),
        (dict(channels=()), ValueError, r"at least one convolution"),
        (dict(image_shape=(8, 8)), ValueError, r"\(C, H, W\).*\(8, 8\)"),
        (dict(channels=(8, 0)), ValueError, r"channels\[1\].*got 0"),
        (dict(dtype=np.int32), TypeError, r"float32 or float64.*int32"),
        (dict(channels="ab"), TypeError, r"channels must be a sequence"),
    ],
)
def test_bad_configuration(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        CNN(**kwargs)


def test_bad_batches():
    model = CNN()
    params = model.init_params()
    with pytest.raises(ValueError, match=r"\(batch, 1, 8, 8\) or \(batch, 64\), got \(2, 63\)"):
        model.forward(params, np.zeros((2, 63)))
    with pytest.raises(TypeError, match="float array"):
        model.forward(params, np.zeros((2, 64), int))
    with pytest.raises(ValueError, match=r"labels in \[0, 9\]"):
        model.loss_and_grad(params, np.zeros((2, 64)), np.array([0, 10]))
    with pytest.raises(ValueError, match=r"params must have shape \(3818,\), got \(3817,\)"):
        model.forward(params[:-1], np.zeros((2, 64)))


def test_mlp_is_unchanged_by_the_cnn_section():
    """The CNN borrows MLP's generic methods; the MLP must still behave as before."""
    mlp = MLP((64, 32, 10))
    assert mlp.flops_per_sample() == {"forward": 4736, "backward": 5376, "total": 10112}
    assert CNN.forward is MLP.forward and CNN.backward is MLP.backward


def test_cnn_mlp_and_dataflow_graph_count_the_backward_pass_the_same_way():
    """Backward = weight gradients of every layer + input gradients of every layer but the
    first, in the CNN's and the MLP's FLOP counts and in the data-flow graph's operators."""
    from course_lib.dataflow import training_graph
    from course_lib.models import MLP

    for model, kinds in ((CNN(), ("conv", "conv", "linear")), (MLP((64, 32, 16, 10)), ("linear",) * 3)):
        f = model.flops_per_sample()
        macs_first = f["forward"] - (f["backward"] - f["forward"])  # forward minus input grads
        graph = training_graph([(f"l{i}", k) for i, k in enumerate(kinds)])
        inputs = [op for op in graph.ops if op.kind == "grad_input"]
        assert len(inputs) == len(kinds) - 1 and "d_in:l0" not in {op.name for op in inputs}
        assert f["forward"] < f["backward"] < 2 * f["forward"]
        assert f["total"] == f["forward"] + f["backward"] and macs_first > 0
    assert CNN().flops_per_sample()["backward"] == 2 * (4608 + 18432 + 2560) + 2 * (18432 + 2560)
