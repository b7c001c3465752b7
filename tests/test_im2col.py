"""course_lib.conv.im2col (the readable im2col/col2im: layout and adjointness) and the course's
conv2d and its backward pass (course_lib.conv.algorithms, on the fast engine).

References, all independent of the implementation under test:
* hand-derived values on tiny inputs;
* ``naive_im2col`` below (index arithmetic, one element at a time);
* ``conv2d_direct`` (plain Python loops) and finite differences of it;
* a numpy ``sliding_window_view`` + ``einsum`` convolution for larger shapes;
* PyTorch (``unfold``, ``fold``, ``conv2d``, autograd) when installed. Without torch those
  tests are skipped, unless ``DDL_REQUIRE_TORCH=1`` (CI), which makes them fail.
"""

from __future__ import annotations

import functools
import os
import re

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import sliding_window_view
from threadpoolctl import threadpool_info, threadpool_limits

from course_lib.conv.algorithms import conv2d, conv2d_backward
from course_lib.conv.geometry import ConvGeometry, conv_output_shape
from course_lib.conv.im2col import col2im, conv2d_direct, im2col


# ------------------------------------------------------------------ references
def naive_im2col(x, k, s, p, d):
    """One element at a time, straight from the definition of torch's unfold layout."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = k, s, p, d
    n, c, h, w = x.shape
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, c * kh * kw, ho * wo), dtype=x.dtype)
    for b in range(n):
        for ch in range(c):
            for i in range(kh):
                for j in range(kw):
                    for oh in range(ho):
                        for ow in range(wo):
                            r, q = oh * sh - ph + i * dh, ow * sw - pw + j * dw
                            if 0 <= r < h and 0 <= q < w:
                                out[b, (ch * kh + i) * kw + j, oh * wo + ow] = x[b, ch, r, q]
    return out


def einsum_conv(x, w, b, s, p, d, groups):
    """Convolution from numpy's sliding windows (no code shared with course_lib.conv.im2col)."""
    (sh, sw), (ph, pw), (dh, dw) = s, p, d
    co, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    win = sliding_window_view(xp, (dh * (kh - 1) + 1, dw * (kw - 1) + 1), axis=(2, 3))
    win = win[:, :, ::sh, ::sw, ::dh, ::dw]  # (N, C, Ho, Wo, kh, kw)
    outs = []
    for g in range(groups):
        xg = win[:, g * cg : (g + 1) * cg]
        wg = w[g * (co // groups) : (g + 1) * (co // groups)]
        outs.append(np.einsum("nchwij,ocij->nohw", xg, wg))
    out = np.concatenate(outs, axis=1)
    return out if b is None else out + b[:, None, None]


def _torch():
    try:
        import torch
    except ImportError:
        if os.environ.get("DDL_REQUIRE_TORCH") == "1":
            pytest.fail("torch is required here (DDL_REQUIRE_TORCH=1) but cannot be imported")
        pytest.skip("torch is not installed (optional 'engines' extra): reference tests skipped")
    return torch


# ------------------------------------------------------------------ strategies
@st.composite
def conv_cases(draw, max_batch=2):
    """Small convolutions covering batch 1, rectangular kernels and inputs, 1x1 kernels,
    stride larger than the kernel, padding, dilation and groups (depthwise included)."""
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    depthwise = draw(st.booleans()) and groups > 1
    cg_in = 1 if depthwise else draw(st.integers(1, 3))
    cg_out = 1 if depthwise else draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    ph, pw = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    dh, dw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    h_min = max(1, dh * (kh - 1) + 1 - 2 * ph)
    w_min = max(1, dw * (kw - 1) + 1 - 2 * pw)
    h, w = draw(st.integers(h_min, max(h_min, 9))), draw(st.integers(w_min, max(w_min, 9)))
    n = draw(st.integers(1, max_batch))
    return dict(
        x_shape=(n, groups * cg_in, h, w),
        w_shape=(groups * cg_out, cg_in, kh, kw),
        stride=(sh, sw), padding=(ph, pw), dilation=(dh, dw), groups=groups,
    )


def _arrays(case, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(case["x_shape"]).astype(dtype)
    w = rng.standard_normal(case["w_shape"]).astype(dtype)
    b = rng.standard_normal(case["w_shape"][0]).astype(dtype)
    return x, w, b


def _kw(case):
    return {k: case[k] for k in ("stride", "padding", "dilation", "groups")}


def _geom_kw(case):
    return {k: case[k] for k in ("stride", "padding", "dilation")}


# Explicit examples: each special case is always run, whatever hypothesis draws.
_EXAMPLES = {
    "batch1_rect": dict(x_shape=(1, 2, 5, 7), w_shape=(3, 2, 2, 3), stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1),
    "one_by_one": dict(x_shape=(2, 3, 4, 3), w_shape=(4, 3, 1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1),
    "stride_gt_kernel": dict(x_shape=(1, 2, 9, 8), w_shape=(2, 2, 2, 2), stride=(3, 4), padding=(1, 0), dilation=(1, 1), groups=1),
    "padding_dilation": dict(x_shape=(2, 2, 6, 5), w_shape=(2, 2, 3, 2), stride=(1, 2), padding=(2, 1), dilation=(2, 3), groups=1),
    "groups": dict(x_shape=(1, 4, 5, 5), w_shape=(6, 2, 3, 3), stride=(2, 1), padding=(1, 1), dilation=(1, 1), groups=2),
    "depthwise": dict(x_shape=(2, 3, 6, 4), w_shape=(3, 1, 3, 3), stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=3),
}


def _with_examples(test):
    for case in _EXAMPLES.values():
        test = example(case=case, seed=0)(test)
    return test


# ------------------------------------------------------------------ hand-derived values
def test_im2col_of_a_3x3_image_with_a_2x2_kernel():
    x = np.arange(9).reshape(1, 1, 3, 3)
    expected = np.array([[0, 1, 3, 4], [1, 2, 4, 5], [3, 4, 6, 7], [4, 5, 7, 8]])
    np.testing.assert_array_equal(im2col(x, 2)[0], expected)


def test_im2col_padding_stride_dilation_by_hand():
    x = np.arange(1, 17).reshape(1, 1, 4, 4)  # 1..16
    # padding 1, stride 3: windows at top-left (-1, -1), (-1, 2), (2, -1), (2, 2)
    cols = im2col(x, 2, stride=3, padding=1)[0]
    np.testing.assert_array_equal(cols[:, 0], [0, 0, 0, 1])
    np.testing.assert_array_equal(cols[:, 3], [11, 12, 15, 16])
    # dilation 3 with a 2x2 kernel picks the four corners
    np.testing.assert_array_equal(im2col(x, 2, dilation=3)[0, :, 0], [1, 4, 13, 16])


def test_chapter_figure_o0_is_row_times_column():
    """The source's O0 = I0*F0 + I1*F1 + I3*F2 + I4*F3 + ... over 3 channels."""
    rng = np.random.default_rng(0)
    x = rng.integers(-5, 6, (1, 3, 3, 3)).astype(np.float64)
    w = rng.integers(-5, 6, (2, 3, 2, 2)).astype(np.float64)
    i, f = x[0].reshape(3, 9), w[0].reshape(3, 4)
    o0 = sum(i[c, 0] * f[c, 0] + i[c, 1] * f[c, 1] + i[c, 3] * f[c, 2] + i[c, 4] * f[c, 3] for c in range(3))
    ifmap_matrix = im2col(x, 2)[0].T  # M x K = 4 x 12, as in the figure
    filter_matrix = w.reshape(2, 12).T  # K x N = 12 x 2
    assert (ifmap_matrix @ filter_matrix)[0, 0] == o0 == conv2d(x, w)[0, 0, 0, 0]


def test_col2im_counts_overlaps():
    ones = np.ones((1, 9, 4))
    # 3x3 kernel, padding 1, stride 2 over 3x3: every pixel covered by as many windows as fit
    folded = col2im(ones, (1, 1, 3, 3), 3, stride=2, padding=1)[0, 0]
    np.testing.assert_array_equal(folded, [[1, 2, 1], [2, 4, 2], [1, 2, 1]])


def test_conv2d_by_hand_with_bias_stride_and_groups():
    x = np.arange(2 * 4 * 4, dtype=np.float64).reshape(1, 2, 4, 4)
    w = np.zeros((2, 1, 2, 2))
    w[0, 0, 0, 0] = 1.0  # group 0 copies the top-left tap of channel 0
    w[1, 0, 1, 1] = -1.0  # group 1 negates the bottom-right tap of channel 1
    out = conv2d(x, w, np.array([0.5, 0.0]), stride=2, groups=2)
    np.testing.assert_array_equal(out[0, 0], [[0.5, 2.5], [8.5, 10.5]])
    np.testing.assert_array_equal(out[0, 1], [[-21, -23], [-29, -31]])


def test_output_shape_and_geometry():
    assert conv_output_shape((8, 3, 224, 224), 7, 2, 3) == (112, 112)
    g = ConvGeometry.from_args((2, 4, 10, 7), (3, 2), (2, 1), (1, 0), (1, 2))
    assert (g.ho, g.wo, g.rows) == (5, 5, 24)
    assert im2col(np.zeros((2, 4, 10, 7)), (3, 2), (2, 1), (1, 0), (1, 2)).shape == g.cols_shape


# ------------------------------------------------------------------ properties
@settings(max_examples=25, deadline=None)
@given(case=conv_cases(max_batch=3), seed=st.integers(0, 2**16))
@_with_examples
def test_im2col_matches_naive_reference_exactly(case, seed):
    kh, kw = case["w_shape"][2:]
    x = np.random.default_rng(seed).integers(-99, 99, case["x_shape"])
    got = im2col(x, (kh, kw), **_geom_kw(case))
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(
        got, naive_im2col(x, (kh, kw), case["stride"], case["padding"], case["dilation"])
    )
    # a non-contiguous input (a transposed copy viewed back) gives the same columns
    x_strided = np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
    np.testing.assert_array_equal(im2col(x_strided, (kh, kw), **_geom_kw(case)), got)


@settings(max_examples=25, deadline=None)
@given(case=conv_cases(max_batch=3), seed=st.integers(0, 2**16))
@_with_examples
def test_col2im_is_the_adjoint_of_im2col(case, seed):
    """<im2col(x), y> == <x, col2im(y)>, exactly with integers, closely with floats."""
    k = case["w_shape"][2:]
    rng = np.random.default_rng(seed)
    g = ConvGeometry.from_args(case["x_shape"], k, **_geom_kw(case))
    xi, yi = rng.integers(-9, 10, case["x_shape"]), rng.integers(-9, 10, g.cols_shape)
    lhs = int(np.sum(im2col(xi, k, **_geom_kw(case)) * yi))
    assert lhs == int(np.sum(xi * col2im(yi, case["x_shape"], k, **_geom_kw(case))))
    xf, yf = rng.standard_normal(case["x_shape"]), rng.standard_normal(g.cols_shape)
    np.testing.assert_allclose(
        np.vdot(im2col(xf, k, **_geom_kw(case)), yf),
        np.vdot(xf, col2im(yf, case["x_shape"], k, **_geom_kw(case))),
        rtol=1e-12, atol=1e-12,
    )


@settings(max_examples=20, deadline=None)
@given(case=conv_cases(), seed=st.integers(0, 2**16))
@_with_examples
def test_conv2d_equals_direct_loops(case, seed):
    x, w, b = _arrays(case, seed)
    np.testing.assert_allclose(conv2d(x, w, b, **_kw(case)), conv2d_direct(x, w, b, **_kw(case)),
                               rtol=1e-12, atol=1e-12)
    x32, w32, b32 = (a.astype(np.float32) for a in (x, w, b))
    out32 = conv2d(x32, w32, b32, **_kw(case))
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, conv2d_direct(x, w, b, **_kw(case)), rtol=1e-4, atol=1e-4)


@settings(max_examples=20, deadline=None)
@given(case=conv_cases(), seed=st.integers(0, 2**16))
@_with_examples
def test_conv2d_backward_against_direct_loops_and_finite_differences(case, seed):
    """With L = <g, conv(x, w) + b>: dL/dx, dL/dw, dL/db checked three ways.

    1. Linearity: conv is linear in x and in w, so <grad_x, v> = <g, conv_direct(v, w)>
       and <grad_w, u> = <g, conv_direct(x, u)> for any directions v, u.
    2. Central finite differences of L computed with conv2d_direct, on random entries.
    3. grad_b = g summed over batch and pixels.
    """
    x, w, b = _arrays(case, seed)
    rng = np.random.default_rng(seed + 1)
    kw = _kw(case)
    g = rng.standard_normal(conv2d_direct(x, w, None, **kw).shape)
    gx, gw, gb = conv2d_backward(g, x, w, **kw)
    assert gx.shape == x.shape and gw.shape == w.shape and gb.shape == b.shape
    v, u = rng.standard_normal(x.shape), rng.standard_normal(w.shape)
    np.testing.assert_allclose(np.vdot(gx, v), np.vdot(g, conv2d_direct(v, w, None, **kw)), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.vdot(gw, u), np.vdot(g, conv2d_direct(x, u, None, **kw)), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(gb, g.sum(axis=(0, 2, 3)), rtol=1e-12)

    def loss(xx, ww, bb):
        return float(np.vdot(g, conv2d_direct(xx, ww, bb, **kw)))

    eps = 1e-6
    for arr, grad in ((x, gx), (w, gw), (b, gb)):
        for flat_index in rng.choice(arr.size, size=min(2, arr.size), replace=False):
            idx = np.unravel_index(flat_index, arr.shape)
            saved = arr[idx]
            arr[idx] = saved + eps
            up = loss(x, w, b)
            arr[idx] = saved - eps
            down = loss(x, w, b)
            arr[idx] = saved
            assert (up - down) / (2 * eps) == pytest.approx(grad[idx], rel=1e-5, abs=1e-6)


@pytest.mark.parametrize(
    "shape, k, s, p, d, groups",
    [
        ((5, 8, 20, 17), 3, 1, 1, 1, 1),  # several cache blocks of samples and planes
        ((3, 6, 33, 30), (5, 3), (2, 3), (2, 1), (1, 2), 3),
        ((4, 16, 12, 12), 3, 2, 1, 1, 16),  # depthwise
        ((2, 3, 64, 64), 7, 2, 3, 1, 1),  # a stem-like layer
    ],
)
def test_larger_shapes_against_sliding_window_einsum(shape, k, s, p, d, groups):
    rng = np.random.default_rng(5)
    kh, kw = (k, k) if isinstance(k, int) else k
    pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    c_out = 2 * shape[1] if groups == 1 else shape[1]
    x = rng.standard_normal(shape)
    w = rng.standard_normal((c_out, shape[1] // groups, kh, kw))
    b = rng.standard_normal(c_out)
    ref = einsum_conv(x, w, b, pair(s), pair(p), pair(d), groups)
    np.testing.assert_allclose(conv2d(x, w, b, s, p, d, groups), ref, rtol=1e-10, atol=1e-10)
    # backward through the linearity identities against the independent forward
    g = rng.standard_normal(ref.shape)
    gx, gw, _ = conv2d_backward(g, x, w, s, p, d, groups)
    v, u = rng.standard_normal(x.shape), rng.standard_normal(w.shape)
    fwd = lambda xx, ww: einsum_conv(xx, ww, None, pair(s), pair(p), pair(d), groups)  # noqa: E731
    np.testing.assert_allclose(np.vdot(gx, v), np.vdot(g, fwd(v, w)), rtol=1e-9)
    np.testing.assert_allclose(np.vdot(gw, u), np.vdot(g, fwd(x, u)), rtol=1e-9)


def test_dtypes_are_kept_or_promoted():
    x32 = np.ones((1, 2, 4, 4), np.float32)
    w32, w64 = np.ones((3, 2, 3, 3), np.float32), np.ones((3, 2, 3, 3))
    assert conv2d(x32, w32).dtype == np.float32
    assert conv2d(x32, w64).dtype == np.float64
    assert conv2d(x32.astype(np.float64), w64).dtype == np.float64
    assert [a.dtype for a in conv2d_backward(np.ones((1, 3, 2, 2), np.float32), x32, w32)] == [np.float32] * 3
    assert im2col(x32, 2).dtype == np.float32 and im2col(x32.astype(np.int16), 2).dtype == np.int16
    assert col2im(np.ones((1, 8, 9), np.float32), (1, 2, 4, 4), 2).dtype == np.float32


@pytest.mark.parametrize("algorithm", ["im2col", "winograd_f2", "winograd_f4"])
def test_splitting_the_batch_among_threads_does_not_change_the_result(algorithm):
    """Big enough to be split along the batch among threads; bitwise the same as 1 thread,
    and the process-wide BLAS thread count is restored afterwards. The algorithm is named:
    "auto" may choose differently for 1 and 2 threads (its key holds the thread count)."""
    from course_lib.conv.winograd import conv2d_winograd_backward

    tile = {"winograd_f2": 2, "winograd_f4": 4}.get(algorithm)
    backward = conv2d_backward if tile is None else functools.partial(conv2d_winograd_backward, tile=tile)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 32, 28, 28), dtype=np.float32)
    w = rng.standard_normal((32, 32, 3, 3), dtype=np.float32)
    g = rng.standard_normal((16, 32, 28, 28), dtype=np.float32)
    results = []
    for threads in (1, 2):
        with threadpool_limits(threads, user_api="blas"):
            results.append((conv2d(x, w, None, 1, 1, algorithm=algorithm), *backward(g, x, w, 1, 1)))
            assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == [threads]
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(results[0][0], einsum_conv(x, w, None, (1, 1), (1, 1), (1, 1), 1),
                               rtol=1e-4, atol=1e-3)


def test_empty_batch_and_no_channels():
    assert conv2d(np.zeros((0, 2, 5, 5)), np.zeros((3, 2, 3, 3))).shape == (0, 3, 3, 3)
    assert im2col(np.zeros((0, 2, 5, 5)), 3).shape == (0, 18, 9)
    # no input channels: the output is the bias alone
    out = conv2d(np.zeros((1, 0, 4, 4)), np.zeros((2, 0, 3, 3)), np.array([1.0, -2.0]))
    np.testing.assert_array_equal(out[0, :, 1, 1], [1.0, -2.0])
    gx, gw, gb = conv2d_backward(np.ones((1, 2, 2, 2)), np.zeros((1, 0, 4, 4)), np.zeros((2, 0, 3, 3)))
    assert gx.shape == (1, 0, 4, 4) and gw.shape == (2, 0, 3, 3) and gb.tolist() == [4.0, 4.0]
    # with padding and stride too
    assert im2col(np.zeros((0, 2, 5, 5)), 3, stride=2, padding=1).shape == (0, 18, 9)
    assert conv2d(np.zeros((0, 2, 5, 5)), np.zeros((3, 2, 3, 3)), padding=1).shape == (0, 3, 5, 5)
    assert col2im(np.zeros((0, 18, 9)), (0, 2, 5, 5), 3, stride=2, padding=1).shape == (0, 2, 5, 5)
    assert im2col(np.zeros((2, 0, 5, 5)), 3, padding=1).shape == (2, 0, 25)


_ZERO_SIZE_CALLS = {
    "im2col": lambda shape: im2col(np.zeros(shape), 1, padding=1),
    "col2im": lambda shape: col2im(np.zeros((1, 1, 9)), shape, 1, padding=1),
    "conv2d": lambda shape: conv2d(np.zeros(shape), np.zeros((2, 1, 1, 1)), padding=1),
    "conv2d_backward": lambda shape: conv2d_backward(
        np.zeros((1, 2, 3, 3)), np.zeros(shape), np.zeros((2, 1, 1, 1)), padding=1
    ),
    "conv2d_direct": lambda shape: conv2d_direct(np.zeros(shape), np.zeros((2, 1, 1, 1)), padding=1),
    "conv_output_shape": lambda shape: conv_output_shape(shape, 1, padding=1),
}


@pytest.mark.parametrize("name", sorted(_ZERO_SIZE_CALLS))
@pytest.mark.parametrize("shape", [(1, 1, 0, 5), (1, 1, 5, 0), (1, 1, 0, 0)])
def test_images_without_pixels_are_rejected_with_the_shape(name, shape):
    # padding could make windows out of zeros alone; an empty image is rejected instead
    h, w = shape[2:]
    pattern = rf"height H and width W must be >= 1, got H = {h}, W = {w} in input shape .*{re.escape(str(shape))}"
    with pytest.raises(ValueError, match=pattern):
        _ZERO_SIZE_CALLS[name](shape)


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "call, error, pattern",
    [
        (lambda: im2col(np.zeros((3, 4, 4)), 2), ValueError, r"4-d array.*3 dimension.*\(3, 4, 4\)"),
        (lambda: conv2d(np.zeros((1, 2, 4, 4)), np.zeros((3, 2, 3))), ValueError, r"weight must be a 4-d.*\(3, 2, 3\)"),
        (lambda: im2col(np.zeros((1, 1, 4, 4)), 5), ValueError, r"kernel height 5.*padded input height 4 \+ 2 \* 0 = 4"),
        (lambda: im2col(np.zeros((1, 1, 4, 4)), 3, dilation=2), ValueError, r"dilation 2 spans 5 pixels.*= 4"),
        (lambda: im2col(np.zeros((1, 1, 4, 2)), 3, padding=(1, 0)), ValueError, r"kernel width 3.*width 2 \+ 2 \* 0 = 2"),
        (lambda: conv2d(np.zeros((1, 6, 4, 4)), np.zeros((4, 2, 3, 3)), groups=4), ValueError, r"C_in = 6.*groups = 4"),
        (lambda: conv2d(np.zeros((1, 6, 4, 4)), np.zeros((3, 3, 3, 3)), groups=2), ValueError, r"C_out = 3.*groups = 2"),
        (lambda: conv2d(np.zeros((1, 4, 4, 4)), np.zeros((2, 3, 3, 3))), ValueError, r"3 channels per group.*C_in = 4"),
        (lambda: conv2d(np.zeros((1, 4, 4, 4)), np.zeros((2, 1, 3, 3)), groups=2), ValueError, r"1 x groups 2 = 2.*C_in = 4"),
        (lambda: im2col(np.zeros((1, 1, 4, 4)), 2, stride=0), ValueError, r"stride must be >= 1.*0"),
        (lambda: im2col(np.zeros((1, 1, 4, 4)), 2, stride=(1, -2)), ValueError, r"stride must be >= 1.*-2"),
        (lambda: im2col(np.zeros((1, 1, 4, 4)), 2, dilation=0), ValueError, r"dilation must be >= 1.*0"),
        (lambda: im2col(np.zeros((1, 1, 4, 4)), 2, padding=-1), ValueError, r"padding must be >= 0.*-1"),
        (lambda: im2col(np.zeros((1, 1, 4, 4)), 0), ValueError, r"kernel_size must be >= 1.*0"),
        (lambda: conv2d(np.zeros((1, 2, 4, 4)), np.zeros((2, 2, 3, 3)), groups=0), ValueError, r"groups must be >= 1, got 0"),
        (lambda: im2col(np.zeros((1, 1, 4, 4)), 2.5), TypeError, r"kernel_size.*2.5"),
        (lambda: im2col(np.zeros((1, 1, 4, 4)), (2, 2, 2)), TypeError, r"kernel_size.*\(2, 2, 2\)"),
        (lambda: im2col(np.zeros((1, 1, 4, 4)), True), TypeError, r"kernel_size.*True"),
        (lambda: conv2d(np.zeros((1, 2, 4, 4), np.int64), np.zeros((2, 2, 3, 3))), TypeError, r"x must have dtype float32 or float64, got int64"),
        (lambda: conv2d(np.zeros((1, 2, 4, 4)), np.zeros((2, 2, 3, 3), np.float16)), TypeError, r"weight.*float16"),
        (lambda: im2col(np.zeros((1, 1, 4, 4), bool), 2), TypeError, r"integer or floating.*bool"),
        (lambda: im2col(np.zeros((1, 1, 4, 4), complex), 2), TypeError, r"complex128"),
        (lambda: conv2d(np.zeros((1, 2, 4, 4)), np.zeros((2, 2, 3, 3)), np.zeros(3)), ValueError, r"bias must have shape \(C_out,\) = \(2,\), got \(3,\)"),
        (lambda: conv2d(np.zeros((1, 2, 4, 4)), np.zeros((2, 2, 3, 3)), groups=1.0), TypeError, r"groups must be an int"),
        (lambda: col2im(np.zeros((1, 4, 5)), (1, 1, 3, 3), 2), ValueError, r"\(1, 4, 4\).*got \(1, 4, 5\)"),
        (lambda: col2im(np.zeros((1, 4, 4)), (1, 3, 3), 2), ValueError, r"4 non-negative ints.*\(1, 3, 3\)"),
        (lambda: conv2d_backward(np.zeros((1, 2, 3, 3)), np.zeros((1, 2, 4, 4)), np.zeros((2, 2, 3, 3))), ValueError, r"\(1, 2, 2, 2\), got \(1, 2, 3, 3\)"),
        (lambda: conv2d_backward(np.zeros((1, 2, 2, 2), int), np.zeros((1, 2, 4, 4)), np.zeros((2, 2, 3, 3))), TypeError, r"grad_out.*int"),
        (lambda: conv2d_direct(np.zeros((1, 6, 4, 4)), np.zeros((4, 2, 3, 3)), groups=4), ValueError, r"C_in = 6.*groups = 4"),
        (lambda: im2col("abc", 2), TypeError, r"numpy array.*str"),
    ],
)
def test_bad_input_is_rejected_with_the_numbers(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


# ------------------------------------------------------------------ PyTorch reference
@pytest.mark.slow  # more than 3 s on two free cores (torch imported; make test runs it, make test-fast does not)
@settings(max_examples=15, deadline=None)
@given(case=conv_cases(max_batch=3), seed=st.integers(0, 2**16))
@_with_examples
def test_against_torch_unfold_fold_conv2d_and_autograd(case, seed):
    torch = _torch()
    F = torch.nn.functional
    x, w, b = _arrays(case, seed)
    kw, gkw = _kw(case), _geom_kw(case)
    k = case["w_shape"][2:]
    xt, wt, bt = (torch.from_numpy(a.copy()).requires_grad_() for a in (x, w, b))
    np.testing.assert_array_equal(im2col(x, k, **gkw), F.unfold(xt.detach(), k, **gkw).numpy())
    cols = np.random.default_rng(seed).standard_normal(im2col(x, k, **gkw).shape)
    np.testing.assert_allclose(
        col2im(cols, x.shape, k, **gkw),
        F.fold(torch.from_numpy(cols), x.shape[2:], k, **gkw).numpy(),
        rtol=1e-12, atol=1e-12,
    )
    out_t = F.conv2d(xt, wt, bt, **kw)
    np.testing.assert_allclose(conv2d(x, w, b, **kw), out_t.detach().numpy(), rtol=1e-10, atol=1e-10)
    g = np.random.default_rng(seed + 1).standard_normal(out_t.shape)
    out_t.backward(torch.from_numpy(g))
    for ours, theirs in zip(conv2d_backward(g, x, w, **kw), (xt.grad, wt.grad, bt.grad)):
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.slow  # a benchmark-sized layer: 3 s
def test_against_torch_on_a_benchmark_shape_in_float32():
    torch = _torch()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 64, 28, 28), dtype=np.float32)
    w = (0.05 * rng.standard_normal((64, 64, 3, 3))).astype(np.float32)
    np.testing.assert_array_equal(im2col(x, 3, 1, 1), torch.nn.functional.unfold(torch.from_numpy(x), 3, 1, 1, 1).numpy())
    ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), None, 1, 1).numpy()
    np.testing.assert_allclose(conv2d(x, w, None, 1, 1), ref, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------ chapters 05 and 06 exercises
def test_chapter_05_exercises_accept_hand_derived_answers_and_explain_mistakes():
    from course_lib.exercises import operator_parallelism as ex

    assert ex.LAYER == dict(batch=16, c_in=64, c_out=128, image=56, kernel=3, stride=2, padding=1)
    # H_out = (56 + 2 - 3) // 2 + 1 = 28; M = 16 * 28 * 28 = 12544; K = 64 * 9 = 576; N = 128
    assert ex.ex1_gemm_sizes((12544, 576, 128)).correct
    assert "stride" in ex.ex1_gemm_sizes((16 * 56 * 56, 576, 128)).message
    assert "padding" in ex.ex1_gemm_sizes((16 * 27 * 27, 576, 128)).message
    assert "unfold" in ex.ex1_gemm_sizes((576, 12544, 128)).message
    assert "INPUT channels" in ex.ex1_gemm_sizes((12544, 128 * 9, 128)).message
    # 12544 x 576 float32 numbers = 28.901376 MB; without the stride 4x that; float64 2x
    assert ex.ex2_im2col_megabytes(12544 * 576 * 4 / 1e6).correct and ex.ex2_im2col_megabytes("28.9 MB").correct
    assert "stride" in ex.ex2_im2col_megabytes(4 * 28.901376).message
    assert "float64" in ex.ex2_im2col_megabytes(2 * 28.901376).message
    assert "MiB" in ex.ex2_im2col_megabytes(12544 * 576 * 4 / 2**20).message
    # 7 convolutions + fc: forward 8 + loss + 7 input gradients + dW and update of conv0 = 18
    assert ex.ex3_critical_path(18).correct and not ex.ex3_critical_path(32).correct
    assert not ex.ex3_critical_path(8).correct  # the running example's path (section 2)
    assert "not answered" in ex.ex2_im2col_megabytes(None).message


def test_chapter_06_exercises_accept_hand_derived_answers_and_explain_mistakes():
    from course_lib.exercises import operator_algorithms as ex

    # F(2x2,3x3): 16 products per channel pair for one 2x2 output tile, not 4 x 9 = 36
    assert ex.WINOGRAD_LAYER == dict(c_in=64, c_out=128)
    assert ex.ex1_winograd_multiplications(16 * 64 * 128).correct
    assert ex.ex1_winograd_multiplications("131,072").correct
    assert "36 products per channel pair" in ex.ex1_winograd_multiplications(36 * 64 * 128).message
    assert "one pair of channels" in ex.ex1_winograd_multiplications(16).message
    assert "FLOPs" in ex.ex1_winograd_multiplications(2 * 16 * 64 * 128).message
    # thin GEMM: 2 * 2048 * 16 * 2048 FLOPs on 4 * (2 * 2048 * 16 + 2048**2) bytes, x 800 GB/s
    intensity = 2 * 2048 * 16 * 2048 / (4 * (2 * 2048 * 16 + 2048 * 2048))
    assert ex.ex2_attainable_rate(intensity * 800e9 / 1e12).correct
    assert "peak" in ex.ex2_attainable_rate(20).message
    # SGD update of 250M float32 parameters: read w, g, write w = 12 bytes each, 3 GB / 800 GB/s
    assert ex.UPDATE == dict(params=250_000_000, bytes_per_number=4)
    assert ex.ex3_update_time(3.75).correct and ex.ex3_update_time("3.75 ms").correct
    assert "memory-bound" in ex.ex3_update_time(2 * 250e6 / 20e12 * 1e3).message
    assert "written back" in ex.ex3_update_time(2.5).message
    assert "in s" in ex.ex3_update_time(3.75e-3).message


def test_backward_without_the_input_gradient_gives_the_same_weight_gradients():
    """A first layer needs no input gradient: input_grad=False skips it (None) and leaves
    the weight and bias gradients bit for bit as they were."""
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((3, 4, 7, 6)), rng.standard_normal((6, 2, 3, 3))
    g = rng.standard_normal(conv2d(x, w, None, 2, 1, 1, 2).shape)
    full = conv2d_backward(g, x, w, 2, 1, 1, 2)
    gx, gw, gb = conv2d_backward(g, x, w, 2, 1, 1, 2, input_grad=False)
    assert gx is None and full[0] is not None
    assert np.array_equal(gw, full[1]) and np.array_equal(gb, full[2])
    with pytest.raises(TypeError, match="input_grad"):
        conv2d_backward(g, x, w, 2, 1, 1, 2, input_grad="no")
