"""course_lib.roofline: intensities, the roof, the prediction of a training step."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import cost, roofline
from course_lib.models import MLP
from course_lib.roofline import (
    Op,
    Roofline,
    arithmetic_intensity,
    attainable_rate,
    elementwise_op,
    gemm_op,
    im2col_op,
    mlp_step_ops,
    total_op,
)

dims = st.integers(1, 4096)


# ------------------------------------------------------------------ intensities
def test_gemm_512_float32_by_hand():
    # 2 * 512**3 FLOPs over three 512 x 512 float32 matrices: 2*512**3 / (3*512**2*4) = 85.33
    op = gemm_op(512, 512, 512)
    assert op.flops == 2 * 512**3 and op.nbytes == 3 * 512**2 * 4
    assert op.intensity == pytest.approx(85.3333, abs=1e-4)
    assert arithmetic_intensity(op.flops, op.nbytes) == pytest.approx(256 / 3)


@given(n=dims)
def test_square_gemm_intensity_grows_as_n_over_6(n):
    assert gemm_op(n, n, n).intensity == pytest.approx(n / 6)


@given(m=dims, k=dims, n=dims)
def test_gemm_intensity_is_symmetric_and_halves_bytes_with_half_the_itemsize(m, k, n):
    a = gemm_op(m, k, n)
    assert a.intensity == pytest.approx(gemm_op(n, k, m).intensity)
    assert gemm_op(m, k, n, itemsize=2).intensity == pytest.approx(2 * a.intensity)


@given(n=st.integers(1, 10**9), inputs=st.integers(0, 4), fpe=st.floats(0, 100))
def test_elementwise_intensity_does_not_grow_with_size(n, inputs, fpe):
    op = elementwise_op(n, inputs=inputs, flops_per_element=fpe)
    assert op.intensity == pytest.approx(fpe / ((inputs + 1) * 4))


def test_relu_and_add_by_hand():
    assert elementwise_op(1000).intensity == 1 / 8  # read 4 B, write 4 B, 1 FLOP
    assert elementwise_op(1000, inputs=2).intensity == 1 / 12  # a + b


def test_im2col_is_a_copy_with_zero_intensity():
    # one 8x8 image, 3x3 kernel, 'same' padding: 64 windows of 9 pixels
    op = im2col_op(1, 8, 3, 1, 1)
    assert op.flops == 0 and op.intensity == 0
    assert op.nbytes == 64 * 4 + 64 * 9 * 4


def test_total_op_adds_flops_and_bytes():
    a, b = Op("a", 10, 4), Op("b", 0, 6)
    t = total_op([a, b], "a+b")
    assert (t.name, t.flops, t.nbytes, t.intensity) == ("a+b", 10, 10, 1.0)


def test_intensity_arrays_broadcast():
    np.testing.assert_allclose(arithmetic_intensity([2, 4], 2), [1, 2])


# ------------------------------------------------------------------ the roof
def test_attainable_rate_on_both_sides_of_the_ridge():
    roof = Roofline(100e9, 25e9)
    assert roof.ridge == 4.0
    assert roof.attainable(1.0) == 25e9  # memory-bound: I_a x bandwidth
    assert roof.attainable(4.0) == 100e9  # the ridge
    assert roof.attainable(10.0) == 100e9  # compute-bound: the peak
    assert roof.attainable(0.0) == 0.0 and attainable_rate(math.inf, 100e9, 25e9) == 100e9
    assert roof.bound(Op("m", 1, 1)) == "memory" and roof.bound(Op("c", 10, 1)) == "compute"


@given(i=st.floats(0, 1e6), peak=st.floats(1e3, 1e15), bw=st.floats(1e3, 1e13))
def test_attainable_is_below_both_roofs_and_touches_one(i, peak, bw):
    r = attainable_rate(i, peak, bw)
    assert r <= peak and r <= i * bw * (1 + 1e-12)
    assert r == peak or r == pytest.approx(i * bw)
    assert attainable_rate(i * 2, peak, bw) >= r


def test_time_is_the_larger_of_the_two_bounds():
    roof = Roofline(10.0, 2.0)
    assert roof.time(Op("c", 100, 10)) == 10.0  # 100 / 10 > 10 / 2
    assert roof.time(Op("m", 10, 100)) == 50.0  # 100 / 2 > 10 / 10
    assert roof.time(Op("copy", 0, 8)) == 4.0


def test_of_device_uses_the_peak_of_the_sustained_fraction():
    from course_lib.datasets import load_hardware

    v100 = cost.find_row(load_hardware(), "v100_sxm2_32gb", "device_id", "device_id")
    roof = Roofline.of_device(v100)
    assert roof.peak_flops == pytest.approx(125e12) and roof.memory_bandwidth == pytest.approx(900e9)
    assert roof.ridge == pytest.approx(138.9, abs=0.05)
    assert "TFLOP/s" in str(roof) and "ridge point 139 FLOP/B" in str(roof)


# ------------------------------------------------------------------ the running example
#: One training step of MLP((2, 3, 2)) with B = 1, float32, counted by hand from
#: models.MLP and models.train: (name, FLOPs, bytes).
HAND = [
    ("gather batch", 0, 2 * 2 * 4),
    ("L0 forward GEMM", 2 * 2 * 3, (2 + 6 + 3) * 4),  # (1 x 2) @ (2 x 3)
    ("L0 bias add", 3, (3 + 3 + 3) * 4),  # z += b: read z and b, write z
    ("L0 ReLU", 3, (3 + 3) * 4),
    ("L1 forward GEMM", 2 * 3 * 2, (3 + 6 + 2) * 4),
    ("L1 bias add", 2, (2 + 2 + 2) * 4),
    ("softmax cross-entropy", 5 * 2, (2 + 2) * 4),
    ("L1 weight-gradient GEMM", 2 * 3 * 2, (3 + 2 + 6) * 4),  # (3 x 1) @ (1 x 2)
    ("L1 gradient sums", 6 + 2, (3 * 6 + 2 + 2 * 2) * 4),  # gW += ..., gb += dz.sum(0)
    ("L1 input-gradient GEMM", 2 * 2 * 3, (2 + 6 + 3) * 4),  # (1 x 2) @ (2 x 3)
    ("L0 ReLU mask", 2 * 3, (3 + 3 + 3) * 4),
    ("L0 weight-gradient GEMM", 2 * 2 * 3, (2 + 3 + 6) * 4),
    ("L0 gradient sums", 6 + 3, (3 * 6 + 3 + 2 * 3) * 4),
    ("SGD update", 2 * 17, 3 * 17 * 4),  # 17 parameters: read p and g, write p
]


def test_step_ops_of_a_tiny_mlp_by_hand():
    ops = mlp_step_ops(MLP((2, 3, 2)), 1)
    assert [(op.name, op.flops, op.nbytes) for op in ops] == HAND


def test_predicted_rate_of_a_tiny_mlp_by_hand():
    model = MLP((2, 3, 2))
    ops = mlp_step_ops(model, 1)
    counted = cost.mlp_training_flops(model, 1)
    assert counted == 60  # the five GEMMs above
    # peak 1 FLOP/s, bandwidth 1 B/s: every op is memory-bound, time = bytes
    assert Roofline(1.0, 1.0).predict_rate(ops, counted) == pytest.approx(60 / 780)
    # bandwidth 10 B/s: time = max(FLOPs, bytes / 10), op by op
    expected_time = sum(max(f, q / 10) for _, f, q in HAND)
    assert expected_time == pytest.approx(141.0)
    assert Roofline(1.0, 10.0).predict_rate(ops, counted) == pytest.approx(60 / 141)
    # without counted_flops every op's FLOPs count
    all_flops = sum(f for _, f, _ in HAND)
    assert Roofline(1.0, 10.0).predict_rate(ops) == pytest.approx(all_flops / 141)


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(1, 300), min_size=2, max_size=5), batch=st.integers(1, 512))
def test_step_gemm_flops_are_the_models_count(sizes, batch):
    model = MLP(tuple(sizes))
    ops = mlp_step_ops(model, batch)
    gemm = sum(op.flops for op in ops if op.name.endswith("GEMM"))
    assert gemm == cost.mlp_training_flops(model, batch)
    roof = Roofline(1e11, 2e10)
    assert 0 < roof.predict_rate(ops, gemm) <= roof.peak_flops


def test_a_wider_model_is_predicted_closer_to_the_peak():
    roof = Roofline(125e12, 900e9)
    small, wide = MLP((64, 64, 10)), MLP((4096, 4096, 10))
    r_small = roof.predict_rate(mlp_step_ops(small, 64, itemsize=2), cost.mlp_training_flops(small, 64))
    r_wide = roof.predict_rate(mlp_step_ops(wide, 1024, itemsize=2), cost.mlp_training_flops(wide, 1024))
    assert r_small < 0.1 * roof.peak_flops < 0.5 * roof.peak_flops < r_wide


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda: Roofline(0, 1), ValueError, "peak_flops"),
        (lambda: Roofline(1, -1), ValueError, "memory_bandwidth"),
        (lambda: Roofline(1, 1, label=3), TypeError, "label"),
        (lambda: Op(3, 1, 1), TypeError, "name"),
        (lambda: Op("x", -1, 1), ValueError, "flops"),
        (lambda: Op("x", 1, 0), ValueError, "nbytes"),
        (lambda: arithmetic_intensity(1, 0), ValueError, "nbytes"),
        (lambda: arithmetic_intensity(-1, 1), ValueError, "flops"),
        (lambda: attainable_rate(-1, 1, 1), ValueError, "intensity"),
        (lambda: attainable_rate(1, float("nan"), 1), ValueError, "peak_flops"),
        (lambda: attainable_rate(1, 1, 0), ValueError, "memory_bandwidth"),
        (lambda: gemm_op(0, 1, 1), ValueError, "m"),
        (lambda: gemm_op(1, 1.5, 1), TypeError, "k"),
        (lambda: gemm_op(1, 1, 1, itemsize=0), ValueError, "itemsize"),
        (lambda: elementwise_op(0), ValueError, "n"),
        (lambda: elementwise_op(4, inputs=-1), ValueError, "inputs"),
        (lambda: elementwise_op(4, flops_per_element=-1), ValueError, "flops_per_element"),
        (lambda: im2col_op(0, 8, 3), ValueError, "batch"),
        (lambda: total_op([], "t"), ValueError, "ops"),
        (lambda: total_op([1], "t"), TypeError, "ops[0]"),
        (lambda: mlp_step_ops("mlp", 4), TypeError, "model"),
        (lambda: mlp_step_ops(MLP((4, 2)), 0), ValueError, "batch_size"),
        (lambda: Roofline(1, 1).predict_rate([]), ValueError, "ops"),
        (lambda: Roofline(1, 1).predict_rate([Op("a", 1, 1)], -1), ValueError, "counted_flops"),
        (lambda: Roofline(1, 1).time("op"), TypeError, "op"),
        (lambda: Roofline.of_device("v100"), TypeError, "device"),
        (lambda: roofline.measure_memory_bandwidth(10), ValueError, "nbytes"),
        (lambda: roofline.measure_memory_bandwidth(2**16, repeat=0), ValueError, "repeat"),
        (lambda: roofline.measure_roofline(2**16, 8), ValueError, "size"),
    ],
)
def test_bad_input_names_the_parameter(call, error, name):
    with pytest.raises(error) as info:
        call()
    assert str(info.value).startswith(f"{name} "), str(info.value)


# ------------------------------------------------------------------ measurements
def test_memory_bandwidth_is_a_positive_rate_and_honours_its_arguments(monkeypatch):
    import course_lib.timing as timing

    calls = []
    real = timing.measure

    def spy(fn, **kw):
        calls.append(kw)
        return real(fn, **kw)

    monkeypatch.setattr(timing, "measure", spy)
    bw = roofline.measure_memory_bandwidth(2**16, repeat=2)
    assert math.isfinite(bw) and bw > 0
    assert calls == [{"repeat": 2, "warmup": 1}]


def test_measure_roofline_reuses_the_gemm_rate(monkeypatch):
    import course_lib.rate as rate

    seen = {}

    def fake_gemm_rate(size, *, threads, repeat):
        seen.update(size=size, threads=threads, repeat=repeat)
        return 5e10

    monkeypatch.setattr(rate, "measure_gemm_rate", fake_gemm_rate)
    roof = roofline.measure_roofline(2**16, 64, repeat=1, threads=1)
    assert seen == {"size": 64, "threads": 1, "repeat": 1}
    assert roof.peak_flops == 5e10 and math.isfinite(roof.memory_bandwidth) and roof.memory_bandwidth > 0
    assert "GEMM 64²" in roof.label and "0.0625 MiB" in roof.label and "one core" in roof.label


def test_measure_roofline_for_real_is_positive_and_finite():
    roof = roofline.measure_roofline(2**16, 64, repeat=1)
    assert all(math.isfinite(v) and v > 0 for v in (roof.peak_flops, roof.memory_bandwidth, roof.ridge))
