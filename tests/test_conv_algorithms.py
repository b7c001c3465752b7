"""course_lib.conv.winograd and course_lib.conv.algorithms: Winograd F(2x2,3x3) and F(4x4,3x3), and conv2d(algorithm="auto").

References, all independent of the Winograd code under test:
* Lavin & Gray (2016), "Fast Algorithms for Convolutional Neural Networks", section 4: the
  published transform matrices of F(2, 3) and F(4, 3), typed in below;
* exact rational arithmetic (``fractions.Fraction``) for the 1-D algorithms F(m, r);
* ``conv2d_direct`` (plain loops, float64) and, when installed, ``torch.nn.functional.conv2d``
  in float64 (and autograd) for the 2-D convolutions.

The float32 tolerances stated in :data:`FLOAT32_TOL` are on max |y - y_float64| / max |y_float64|
for 3 x 3 layers of up to 512 channels; measured: about 5e-7 for im2col, 7e-7 for F(2x2,3x3)
and 1.3e-5 for F(4x4,3x3) (256 channels, 14 x 14).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_im2col import _torch  # torch, or a skip (a failure where DDL_REQUIRE_TORCH=1)
from threadpoolctl import threadpool_limits

from course_lib.conv import algorithms as ca
from course_lib.conv.algorithms import (
    ALGORITHMS,
    AlgorithmCache,
    candidates,
    chosen_algorithm,
    conv2d,
    conv2d_backward,
    conv_key,
    float32_error,
    multiplication_count,
    multiplication_counts,
    resnet50_3x3_layers,
)
from course_lib.conv.im2col import conv2d_direct
from course_lib.conv.winograd import conv2d_winograd, conv2d_winograd_backward, winograd_matrices
from course_lib.cost import conv2d_macs

#: Stated float32 tolerances, relative to the largest output (see the module docstring).
FLOAT32_TOL = {"im2col": 2e-6, "winograd_f2": 5e-6, "winograd_f4": 5e-5, "direct": 1e-6}

F = Fraction
#: Lavin & Gray (2016), equations (7)-(8) and section 4.2, as printed.
LAVIN_F2 = {
    "BT": [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
    "G": [[1, 0, 0], [F(1, 2), F(1, 2), F(1, 2)], [F(1, 2), F(-1, 2), F(1, 2)], [0, 0, 1]],
    "AT": [[1, 1, 1, 0], [0, 1, -1, -1]],
}
LAVIN_F4 = {
    "BT": [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
           [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]],
    "G": [[F(1, 4), 0, 0], [F(-1, 6), F(-1, 6), F(-1, 6)], [F(-1, 6), F(1, 6), F(-1, 6)],
          [F(1, 24), F(1, 12), F(1, 6)], [F(1, 24), F(-1, 12), F(1, 6)], [0, 0, 1]],
    "AT": [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
}


def _relative(got, ref) -> float:
    return float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))


# ------------------------------------------------------------------ transform matrices
@pytest.mark.parametrize(("m", "paper"), [(2, LAVIN_F2), (4, LAVIN_F4)])
def test_cook_toom_gives_lavin_and_grays_matrices(m, paper):
    at, g, bt = winograd_matrices(m, exact=True)
    assert bt == paper["BT"] and g == paper["G"] and at == paper["AT"]
    at_f, g_f, bt_f = winograd_matrices(m)
    assert at_f.dtype == np.float64
    np.testing.assert_array_equal(bt_f, np.array(paper["BT"], dtype=float))
    np.testing.assert_array_equal(g_f, np.array([[float(v) for v in row] for row in paper["G"]]))


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 6), r=st.integers(1, 3), data=st.data())
@example(m=2, r=3, data=None)
@example(m=4, r=3, data=None)
def test_minimal_filtering_is_exact_in_rational_arithmetic(m, r, data):
    """y = A^T [(G g) * (B^T d)] equals the correlation exactly, with m + r - 1 products."""
    if m + r - 1 > 8:
        return
    at, g, bt = winograd_matrices(m, r, exact=True)
    alpha = m + r - 1
    draw = (lambda n: data.draw(st.lists(st.integers(-50, 50), min_size=n, max_size=n))) if data else (
        lambda n: list(range(1, n + 1)))
    d, kernel = [F(v) for v in draw(alpha)], [F(v) for v in draw(r)]
    gg = [sum(g[j][k] * kernel[k] for k in range(r)) for j in range(alpha)]
    bd = [sum(bt[j][i] * d[i] for i in range(alpha)) for j in range(alpha)]
    products = [gg[j] * bd[j] for j in range(alpha)]  # the only general multiplications
    y = [sum(at[i][j] * products[j] for j in range(alpha)) for i in range(m)]
    assert y == [sum(d[i + k] * kernel[k] for k in range(r)) for i in range(m)]


# ------------------------------------------------------------------ forward
@st.composite
def winograd_cases(draw):
    """3x3 stride-1 convolutions: batch 1-2, odd sizes (edge tiles cut off), padding 0-3."""
    ph, pw = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    h, w = draw(st.integers(max(1, 3 - 2 * ph), 11)), draw(st.integers(max(1, 3 - 2 * pw), 11))
    return dict(x_shape=(draw(st.integers(1, 2)), draw(st.integers(1, 4)), h, w),
                c_out=draw(st.integers(1, 4)), padding=(ph, pw), tile=draw(st.sampled_from([2, 4])))


def _case_arrays(case, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(case["x_shape"])
    w = rng.standard_normal((case["c_out"], case["x_shape"][1], 3, 3))
    return x, w, rng.standard_normal(case["c_out"])


@settings(max_examples=30, deadline=None)
@given(case=winograd_cases(), seed=st.integers(0, 2**16))
@example(case=dict(x_shape=(1, 1, 4, 4), c_out=1, padding=(0, 0), tile=2), seed=0)  # one tile
@example(case=dict(x_shape=(2, 3, 1, 1), c_out=2, padding=(1, 1), tile=4), seed=0)  # 1x1 image
@example(case=dict(x_shape=(1, 2, 14, 14), c_out=3, padding=(1, 1), tile=4), seed=0)  # 14 = 3*4+2
def test_winograd_equals_the_plain_loops_in_float64(case, seed):
    x, w, b = _case_arrays(case, seed)
    got = conv2d_winograd(x, w, b, padding=case["padding"], tile=case["tile"])
    ref = conv2d_direct(x, w, b, padding=case["padding"])
    assert got.shape == ref.shape and got.dtype == np.float64
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10 * np.max(np.abs(ref)))
    algorithm = f"winograd_f{case['tile']}"
    np.testing.assert_array_equal(conv2d(x, w, b, padding=case["padding"], algorithm=algorithm), got)


def test_winograd_by_hand():
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    # one 2x2 output tile: the sums of the four 3x3 windows of 0..15
    np.testing.assert_array_equal(conv2d_winograd(x, np.ones((1, 1, 3, 3))), [[[[45, 54], [81, 90]]]])
    # a kernel with a single 1 at (1, 2) shifts the image: output (i, j) = x[i + 1, j + 2]
    w = np.zeros((1, 1, 3, 3))
    w[0, 0, 1, 2] = 1
    for tile in (2, 4):
        np.testing.assert_allclose(conv2d_winograd(x, w, tile=tile)[0, 0], [[6, 7], [10, 11]], atol=1e-12)


@pytest.mark.parametrize("tile", [2, 4])
def test_float64_against_torch_on_a_resnet_like_layer(tile):
    torch = _torch()
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((3, 16, 14, 13)), rng.standard_normal((24, 16, 3, 3)), rng.standard_normal(24)
    ref = torch.nn.functional.conv2d(*(torch.from_numpy(a) for a in (x, w, b)), padding=1).numpy()
    np.testing.assert_allclose(conv2d_winograd(x, w, b, padding=1, tile=tile), ref, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_float32_error_within_the_stated_tolerance(algorithm):
    """Every algorithm agrees with a float64 reference within its stated float32 tolerance,
    so whichever "auto" picks, the answer differs by float32 rounding only."""
    channels, image = (2, 3) if algorithm == "direct" else (256, 14)
    error = float32_error(algorithm, channels=channels, image=image, batch=1 if algorithm == "direct" else 2)
    assert 0 < error < FLOAT32_TOL[algorithm]
    if algorithm == "winograd_f4":  # the precision cost is real: F(4x4,3x3) loses more
        assert error > float32_error("winograd_f2", channels=256, image=14)


def test_float32_result_against_torch():
    torch = _torch()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 64, 28, 28), dtype=np.float32)
    w = (0.05 * rng.standard_normal((64, 64, 3, 3))).astype(np.float32)
    ref = torch.nn.functional.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), None, 1, 1).numpy()
    for algorithm in ("im2col", "winograd_f2", "winograd_f4", "auto"):
        got = conv2d(x, w, None, 1, 1, algorithm=algorithm, cache=AlgorithmCache())
        assert got.dtype == np.float32
        assert _relative(got, ref) < FLOAT32_TOL.get(algorithm, FLOAT32_TOL["winograd_f4"])


# ------------------------------------------------------------------ backward
@settings(max_examples=20, deadline=None)
@given(case=winograd_cases(), seed=st.integers(0, 2**16))
@example(case=dict(x_shape=(2, 3, 6, 5), c_out=2, padding=(3, 3), tile=2), seed=0)  # padding > 2: a crop
@example(case=dict(x_shape=(1, 2, 9, 7), c_out=3, padding=(0, 2), tile=4), seed=0)
def test_backward_by_linearity_against_the_plain_loops(case, seed):
    """conv is linear in x and in w, so <grad_x, v> = <g, conv(v, w)> and <grad_w, u> = <g, conv(x, u)>
    for any directions v, u (conv = the plain loops); grad_b = g summed."""
    x, w, _ = _case_arrays(case, seed)
    rng = np.random.default_rng(seed + 1)
    p = case["padding"]
    g = rng.standard_normal(conv2d_direct(x, w, padding=p).shape)
    gx, gw, gb = conv2d_winograd_backward(g, x, w, padding=p, tile=case["tile"])
    assert gx.shape == x.shape and gw.shape == w.shape
    v, u = rng.standard_normal(x.shape), rng.standard_normal(w.shape)
    np.testing.assert_allclose(np.vdot(gx, v), np.vdot(g, conv2d_direct(v, w, padding=p)), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.vdot(gw, u), np.vdot(g, conv2d_direct(x, u, padding=p)), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(gb, g.sum(axis=(0, 2, 3)), rtol=1e-12)
    assert conv2d_winograd_backward(g, x, w, padding=p, tile=case["tile"], input_grad=False)[0] is None


@pytest.mark.parametrize("tile", [2, 4])
def test_backward_against_torch_autograd(tile):
    torch = _torch()
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((2, 5, 10, 9)), rng.standard_normal((7, 5, 3, 3))
    xt, wt = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()
    out = torch.nn.functional.conv2d(xt, wt, None, 1, 1)
    g = rng.standard_normal(out.shape)
    out.backward(torch.from_numpy(g))
    gx, gw, _ = conv2d_winograd_backward(g, x, w, padding=1, tile=tile)
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(gw, wt.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_float32_backward_close_to_im2col():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 32, 14, 14), dtype=np.float32)
    w = (0.1 * rng.standard_normal((48, 32, 3, 3))).astype(np.float32)
    g = rng.standard_normal((4, 48, 14, 14), dtype=np.float32)
    ref = conv2d_backward(g.astype(float), x.astype(float), w.astype(float), padding=1)
    for tile, tol in ((2, 1e-5), (4, 1e-4)):
        got = conv2d_winograd_backward(g, x, w, padding=1, tile=tile)
        assert all(a.dtype == np.float32 for a in got)
        assert _relative(got[0], ref[0]) < tol and _relative(got[1], ref[1]) < tol


# ------------------------------------------------------------------ choosing an algorithm
def test_auto_times_the_candidates_once_and_keeps_its_choice():
    cache = AlgorithmCache()
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 8, 12, 12)), rng.standard_normal((8, 8, 3, 3))
    first = conv2d(x, w, padding=1, cache=cache)
    key, choice = cache.last
    assert key == conv_key(x.shape, w.shape, padding=1, dtype="float64")
    assert set(cache.timings(key)) == set(candidates(x.shape, w.shape, padding=1)) == {
        "im2col", "winograd_f2", "winograd_f4"}
    assert choice == min(cache.timings(key), key=cache.timings(key).get)
    assert chosen_algorithm(x.shape, w.shape, padding=1, dtype="float64", cache=cache) == choice
    timings = cache.timings(key)
    for _ in range(3):  # deterministic given the cache: the same algorithm, bitwise the same result
        np.testing.assert_array_equal(conv2d(x, w, padding=1, cache=cache), first)
    assert cache.timings(key) == timings and len(cache) == 1
    np.testing.assert_array_equal(first, conv2d(x, w, padding=1, algorithm=choice))
    assert cache.choices() == {key: choice}
    cache.clear()
    assert len(cache) == 0 and cache.last is None and chosen_algorithm(x.shape, w.shape, padding=1, cache=cache) is None


def test_a_recorded_choice_is_obeyed_and_forcing_overrides_it():
    cache = AlgorithmCache()
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((1, 4, 9, 9)), rng.standard_normal((5, 4, 3, 3))
    key = conv_key(x.shape, w.shape, padding=1, dtype="float64")
    for pinned in ("winograd_f2", "winograd_f4", "im2col"):
        cache.clear()
        assert cache.record(key, {pinned: 1.0, "direct": 2.0}) == pinned
        np.testing.assert_array_equal(conv2d(x, w, padding=1, cache=cache), conv2d(x, w, padding=1, algorithm=pinned))
    # a key keeps its first choice; ties go to the earlier name in ALGORITHMS
    assert cache.record(key, {"winograd_f2": 0.0}) == "im2col"
    assert AlgorithmCache().record(key, {"winograd_f2": 1.0, "im2col": 1.0}) == "im2col"


def test_the_key_holds_shape_dtype_and_threads():
    cache = AlgorithmCache()
    x, w = np.ones((1, 3, 8, 8), np.float32), np.ones((2, 3, 3, 3), np.float32)
    for threads in (1, 2):
        with threadpool_limits(threads, user_api="blas"):
            conv2d(x, w, padding=1, cache=cache)
    conv2d(x.astype(np.float64), w, padding=1, cache=cache)
    conv2d(x, w, padding=0, cache=cache)
    keys = list(cache.choices())
    assert len(keys) == 4 and {k.threads for k in keys} >= {1, 2} and {k.dtype for k in keys} == {"float32", "float64"}
    assert all(k.threads == 1 for k in keys[:1]) and keys[0].padding == (1, 1)


def test_cache_evicts_the_oldest_and_reads_well():
    cache = AlgorithmCache(max_entries=2)
    for c in (1, 2, 3):
        cache.record(conv_key((1, c, 5, 5), (1, c, 3, 3), threads=1), {"im2col": 1.0})
    assert [k.x_shape[1] for k in cache.choices()] == [2, 3]
    assert "AlgorithmCache(2 choices)" in repr(cache) and "-> im2col" in repr(cache)


def test_candidates_skip_what_does_not_apply():
    assert candidates((1, 4, 9, 9), (4, 4, 5, 5), padding=2) == ("im2col",)
    assert candidates((1, 4, 9, 9), (4, 4, 3, 3), stride=2) == ("im2col",)
    assert candidates((1, 4, 9, 9), (4, 4, 3, 3), dilation=2) == ("im2col",)
    assert candidates((1, 4, 9, 9), (4, 2, 3, 3), groups=2) == ("im2col",)
    assert candidates((1, 1, 3, 3), (1, 1, 3, 3)) == ("im2col", "winograd_f4", "winograd_f2", "direct")
    # the plain loops only up to DIRECT_MAX_MACS multiply-accumulates: 2 * 2 * 2x2 * 9 * 2 = 288
    assert "direct" not in candidates((2, 2, 4, 4), (2, 2, 3, 3))
    cache = AlgorithmCache()
    y = conv2d(np.ones((1, 2, 7, 7)), np.ones((3, 2, 3, 3)), stride=2, cache=cache)
    assert cache.last[1] == "im2col" and y.shape == (1, 3, 3, 3)
    y = conv2d(np.ones((1, 1, 3, 3)), np.ones((1, 1, 3, 3)), cache=cache)  # 9 MACs: the loops race too
    assert y.item() == 9.0 and set(cache.timings(cache.last[0])) == set(ALGORITHMS)


def test_verbose_says_what_auto_timed_and_chose(capsys):
    cache = AlgorithmCache()
    x, w = np.ones((1, 2, 6, 6)), np.ones((2, 2, 3, 3))
    conv2d(x, w, padding=1, cache=cache, verbose=True)
    out = capsys.readouterr().out
    assert out.startswith("conv2d(auto): timed im2col") and f"-> {cache.last[1]} for ConvKey(" in out
    conv2d(x, w, padding=1, cache=cache, verbose=True)
    assert "(chosen before)" in capsys.readouterr().out


def test_the_cnn_names_im2col_whatever_auto_has_chosen():
    """Training must be bitwise reproducible across processes: the CNN never uses "auto"."""
    from course_lib.cnn import CNN

    model = CNN()
    params = model.init_params(seed=0)
    x = np.random.default_rng(0).standard_normal((4, 1, 8, 8)).astype(np.float32)
    w, b = model.layer(params, 0)
    key = conv_key(x.shape, w.shape, padding=1, dtype="float32")
    ca.ALGORITHM_CACHE.record(key, {"winograd_f4": 0.0})  # pretend auto chose Winograd
    try:
        expected = np.maximum(conv2d(x, w, b, padding=1, algorithm="im2col"), 0)
        np.testing.assert_array_equal(model.layer_forward(params, 0, x), expected)
    finally:
        ca.ALGORITHM_CACHE.clear()


# ------------------------------------------------------------------ counting multiplications
def test_multiplication_counts_by_hand():
    tile = ((1, 64, 4, 4), (128, 64, 3, 3))  # one 2x2 output tile: 16 vs 4 * 9 = 36 per channel pair
    assert multiplication_count("winograd_f2", *tile) == 16 * 64 * 128
    assert multiplication_count("im2col", *tile) == 36 * 64 * 128 == multiplication_count("direct", *tile)
    big = ((1, 8, 6, 6), (8, 8, 3, 3))  # one 4x4 output tile: 36 vs 16 * 9 = 144
    assert multiplication_count("winograd_f4", *big) == 36 * 64
    # 14 x 14 output: F(4x4) needs ceil(14 / 4)^2 = 16 tiles, F(2x2) 7^2 = 49
    layer = ((2, 256, 14, 14), (256, 256, 3, 3))
    assert multiplication_count("winograd_f4", *layer, padding=1) == 2 * 16 * 36 * 256 * 256
    assert multiplication_count("winograd_f2", *layer, padding=1) == 2 * 49 * 16 * 256 * 256
    assert multiplication_count("im2col", *layer, padding=1) == conv2d_macs(256, 256, 3, 14, padding=1, batch=2)
    x56, w56 = (1, 64, 56, 56), (64, 64, 3, 3)
    im = multiplication_count("im2col", x56, w56, padding=1)
    assert im / multiplication_count("winograd_f2", x56, w56, padding=1) == 2.25
    assert im / multiplication_count("winograd_f4", x56, w56, padding=1) == 4.0
    assert multiplication_counts((1, 8, 8, 8), (16, 8, 3, 3), stride=2, padding=1) == {
        "im2col": 18432, "winograd_f4": None, "winograd_f2": None, "direct": 18432}


def test_resnet50_3x3_layers():
    layers = resnet50_3x3_layers(batch=2)
    assert [(la.name, la.count, la.x_shape[1:], la.w_shape) for la in layers] == [
        ("conv2_x", 3, (64, 56, 56), (64, 64, 3, 3)), ("conv3_x", 4, (128, 28, 28), (128, 128, 3, 3)),
        ("conv4_x", 6, (256, 14, 14), (256, 256, 3, 3)), ("conv5_x", 3, (512, 7, 7), (512, 512, 3, 3))]
    assert all(la.x_shape[0] == 2 and la.padding == 1 for la in layers)
    # every stage does 56^2 * 64^2 * 9 = 115.6 M MACs per 3x3 layer and image (channels x2, side /2)
    per_image = [multiplication_count("im2col", la.x_shape, la.w_shape, padding=1) // 2 for la in layers]
    assert per_image == [56 * 56 * 64 * 64 * 9] * 4
    # F(4x4,3x3) on 7x7 (conv5_x) needs 2x2 tiles covering 8x8: less than 4x fewer there
    f4 = multiplication_count("winograd_f4", layers[3].x_shape, layers[3].w_shape, padding=1)
    assert f4 == 2 * 4 * 36 * 512 * 512 and per_image[3] * 2 / f4 == pytest.approx(49 * 9 / 144)


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [
        (lambda: conv2d_winograd(np.ones((1, 2, 6, 6)), np.ones((3, 2, 5, 5))), ValueError,
         r"weight must hold 3 x 3 kernels.*\(3, 2, 5, 5\)"),
        (lambda: conv2d_winograd(np.ones((1, 2, 6, 6)), np.ones((3, 2, 3, 3)), stride=2), ValueError,
         r"stride must be 1.*\(2, 2\)"),
        (lambda: conv2d_winograd(np.ones((1, 2, 6, 6)), np.ones((3, 2, 3, 3)), dilation=(1, 2)), ValueError,
         r"dilation must be 1.*\(1, 2\)"),
        (lambda: conv2d_winograd(np.ones((1, 2, 6, 6)), np.ones((4, 1, 3, 3)), groups=2), ValueError,
         r"groups must be 1, got 2"),
        (lambda: conv2d_winograd(np.ones((1, 2, 6, 6)), np.ones((3, 2, 3, 3)), tile=3), ValueError,
         r"tile must be one of \(2, 4\).*got 3"),
        (lambda: conv2d(np.ones((1, 1, 4, 4)), np.ones((1, 1, 3, 3)), algorithm="winograd"), ValueError,
         r"algorithm must be one of \('auto', 'im2col', 'winograd_f4', 'winograd_f2', 'direct'\), got 'winograd'"),
        (lambda: conv2d(np.ones((1, 1, 4, 4)), np.ones((1, 1, 3, 3)), algorithm=None), TypeError,
         r"algorithm must be one of"),
        (lambda: conv2d(np.ones((1, 1, 5, 5)), np.ones((1, 1, 3, 3)), stride=2, algorithm="winograd_f2"),
         ValueError, r"'winograd_f2' does not apply: stride must be 1.*algorithm must be one of \('auto', 'im2col', 'direct'\)"),
        (lambda: conv2d(np.ones((1, 1, 5, 5)), np.ones((1, 1, 2, 2)), algorithm="winograd_f4"), ValueError,
         r"3 x 3 kernels"),
        (lambda: conv2d(np.ones((1, 1, 4, 4)), np.ones((1, 1, 3, 3)), cache={}), TypeError,
         r"cache must be an AlgorithmCache, got dict"),
        (lambda: conv2d(np.ones((1, 1, 4, 4)), np.ones((1, 1, 3, 3)), verbose="yes"), TypeError, r"verbose"),
        (lambda: conv2d_winograd_backward(np.ones((1, 1, 3, 3)), np.ones((1, 1, 4, 4)), np.ones((1, 1, 3, 3))),
         ValueError, r"grad_out must have the output shape \(1, 1, 2, 2\)"),
        (lambda: multiplication_count("winograd_f2", (1, 3, 8, 8), (3, 3, 3, 3), stride=2), ValueError,
         r"does not apply: stride must be 1"),
        (lambda: multiplication_count("fft", (1, 3, 8, 8), (3, 3, 3, 3)), ValueError, r"algorithm must be one of"),
        (lambda: multiplication_count("im2col", (1, 3, 8, 8), (3, 2, 3, 3)), ValueError, r"C_in = 3.*groups = 1"),
        (lambda: conv_key((1, 3, 8, 8), (3, 3, 3, 3), dtype="int8"), ValueError, r"dtype must be float32 or float64"),
        (lambda: AlgorithmCache(0), ValueError, r"max_entries"),
        (lambda: AlgorithmCache().record(conv_key((1, 1, 3, 3), (1, 1, 3, 3), threads=1), {"fft": 1.0}),
         ValueError, r"seconds must map some of"),
        (lambda: winograd_matrices(7), ValueError, r"m must be an integer in \[1, 6\]"),
        (lambda: float32_error("winograd_f3"), ValueError, r"algorithm must be one of"),
    ],
)
def test_bad_input_names_the_parameter_and_the_allowed_values(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()
