"""Convolution as matrix multiplication: im2col and col2im, the idea in numpy.

A 2-D convolution (卷积) slides a small kernel over an image. ``im2col`` rewrites it
as ONE matrix multiplication (GEMM, 通用矩阵乘): every receptive field of the input
becomes a column of a matrix, the kernels become the rows of another, and the
convolution is their product, which a BLAS library runs on all cores with SIMD
instructions - intra-operator parallelism (算子内并行).

This module is the one to read: :func:`im2col` and :func:`col2im` are each the idea in a
few lines of numpy, :func:`conv2d_direct` is the definition as plain loops, and
:func:`gemm_sizes` the sizes and memory of the GEMM. The shapes and the argument checks
live beside it, in :mod:`course_lib.conv.geometry`. The speed lives apart, in modules
headed for speed that import this one (never the other way round):
:mod:`course_lib.conv.fast` (the same columns written block by block, with threads: bit
for bit what :func:`im2col` and :func:`col2im` return), :mod:`course_lib.conv.winograd`
and :mod:`course_lib.conv.algorithms`, whose :func:`~course_lib.conv.algorithms.conv2d`
and :func:`~course_lib.conv.algorithms.conv2d_backward` are the convolution the course
runs (im2col + one GEMM per group, Winograd, or the timed choice among them, as cuDNN
makes it).

Conventions (those of PyTorch, :mod:`course_lib.conv.geometry`): arrays are NCHW, a weight
has shape ``(C_out, C_in / groups, kh, kw)``, the operation is a cross-correlation (the
kernel is not flipped). ``im2col(x)`` has shape ``(N, C * kh * kw, H_out * W_out)``, row
``c * kh * kw + i * kw + j`` holding input channel ``c`` at kernel offset ``(i, j)``: the
layout of ``torch.nn.functional.unfold``, and ``col2im`` matches ``torch.nn.functional.fold``.

Examples
--------
>>> x = np.arange(2 * 3 * 3, dtype=np.float32).reshape(1, 2, 3, 3)
>>> cols = im2col(x, 2)         # 2 channels x 2 x 2 kernel rows, 2 x 2 windows
>>> cols.shape
(1, 8, 4)
>>> w = np.ones((1, 2, 2, 2), np.float32)
>>> (w.reshape(1, -1) @ cols).reshape(1, 1, 2, 2)[0, 0]   # the convolution: one product
array([[52., 60.],
       [76., 84.]], dtype=float32)
>>> conv2d_direct(x, w)[0, 0]   # the definition, one multiply-accumulate at a time
array([[52., 60.],
       [76., 84.]], dtype=float32)
"""

from __future__ import annotations

import numpy as np

from .._validate import check_int
from .geometry import ConvGeometry, conv_arguments, conv_columns, conv_input

__all__ = ["col2im", "conv2d_direct", "gemm_sizes", "im2col"]


# ----------------------------------------------------------------- the idea
def im2col(x, kernel_size, stride=1, padding=0, dilation=1) -> np.ndarray:
    """Unfold every sliding window of ``x`` into a column (``torch.nn.functional.unfold``).

    Parameters
    ----------
    x : numpy.ndarray
        Input (N, C, H, W), integer or floating point (the dtype is kept).
    kernel_size, stride, padding, dilation : int or (int, int)
        Window size, step, zero padding on each side, spacing between taps.

    Returns
    -------
    numpy.ndarray
        (N, C * kh * kw, H_out * W_out): row ``c * kh * kw + i * kw + j`` holds channel ``c``
        at kernel offset ``(i, j)``, column ``oh * W_out + ow`` one window. Bad arguments
        raise a ValueError or TypeError naming the number that does not fit.

    Examples
    --------
    >>> im2col(np.arange(9).reshape(1, 1, 3, 3), 2)[0]   # the four 2 x 2 windows as columns
    array([[0, 1, 3, 4],
           [1, 2, 4, 5],
           [3, 4, 6, 7],
           [4, 5, 7, 8]])
    """
    x, g = conv_input(x, kernel_size, stride, padding, dilation)  # checked, and its sizes
    padded = np.pad(x, ((0, 0), (0, 0), (g.ph, g.ph), (g.pw, g.pw)))
    cols = np.empty((g.n, g.c, g.kh, g.kw, g.ho, g.wo), dtype=x.dtype)
    for i in range(g.kh):  # every kernel offset (i, j) sees every stride-th pixel from (i, j) on
        for j in range(g.kw):
            rows = slice(i * g.dh, i * g.dh + g.sh * g.ho, g.sh)
            columns = slice(j * g.dw, j * g.dw + g.sw * g.wo, g.sw)
            cols[:, :, i, j] = padded[:, :, rows, columns]
    return cols.reshape(g.n, g.c * g.kh * g.kw, g.ho * g.wo)


def col2im(cols, input_shape, kernel_size, stride=1, padding=0, dilation=1) -> np.ndarray:
    """Fold columns back onto the image, summing overlaps (``torch.nn.functional.fold``).

    The adjoint (转置) of :func:`im2col`: ``<im2col(x), y> == <x, col2im(y, x.shape, ...)>``,
    which the backward pass of a convolution needs. A pixel covered by several windows
    receives the sum of their values. ``cols`` is shaped as :func:`im2col` returns it,
    ``input_shape`` is (N, C, H, W); the other arguments are im2col's.

    Examples
    --------
    >>> ones = np.ones((1, 4, 4), np.float32)          # 2 x 2 windows over a 3 x 3 image
    >>> col2im(ones, (1, 1, 3, 3), 2)[0, 0]             # how many windows cover each pixel
    array([[1., 2., 1.],
           [2., 4., 2.],
           [1., 2., 1.]], dtype=float32)
    """
    cols, g = conv_columns(cols, input_shape, kernel_size, stride, padding, dilation)
    windows = cols.reshape(g.n, g.c, g.kh, g.kw, g.ho, g.wo)
    padded = np.zeros((g.n, g.c, g.hp, g.wp), dtype=cols.dtype)
    for i in range(g.kh):  # every kernel offset (i, j) adds its values where it took them
        for j in range(g.kw):
            rows = slice(i * g.dh, i * g.dh + g.sh * g.ho, g.sh)
            columns = slice(j * g.dw, j * g.dw + g.sw * g.wo, g.sw)
            padded[:, :, rows, columns] += windows[:, :, i, j]
    return padded[:, :, g.ph : g.ph + g.h, g.pw : g.pw + g.w].copy()


def conv2d_direct(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> np.ndarray:
    """The convolution, written as plain nested loops (as :func:`course_lib.conv.algorithms.conv2d`).

    One multiply-accumulate at a time, in Python, in double precision: the definition
    of the operation, used to teach it and as the reference in the tests. It is
    thousands of times slower than :func:`course_lib.conv.algorithms.conv2d`; keep the shapes tiny.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> x, w = rng.standard_normal((1, 4, 6, 5)), rng.standard_normal((6, 2, 3, 2))
    >>> args = dict(stride=(2, 1), padding=1, dilation=(1, 2), groups=2)
    >>> from course_lib.conv.algorithms import conv2d
    >>> bool(np.allclose(conv2d_direct(x, w, **args), conv2d(x, w, **args)))
    True
    """
    x, weight, bias, groups, g = conv_arguments(x, weight, bias, stride, padding, dilation, groups)
    c_out = weight.shape[0]
    cg_in, cg_out = g.c // groups, c_out // groups
    xs, ws = x.tolist(), weight.tolist()
    bs = [0.0] * c_out if bias is None else bias.tolist()
    out = np.empty((g.n, c_out, g.ho, g.wo), dtype=x.dtype)
    for n in range(g.n):
        for co in range(c_out):
            first_c = (co // cg_out) * cg_in
            for oh in range(g.ho):
                for ow in range(g.wo):
                    acc = bs[co]
                    for ci in range(cg_in):
                        plane, kernel = xs[n][first_c + ci], ws[co][ci]
                        for i in range(g.kh):
                            r = oh * g.sh - g.ph + i * g.dh
                            if r < 0 or r >= g.h:
                                continue
                            for j in range(g.kw):
                                c = ow * g.sw - g.pw + j * g.dw
                                if 0 <= c < g.w:
                                    acc += plane[r][c] * kernel[i][j]
                    out[n, co, oh, ow] = acc
    return out


# ----------------------------------------------------------------- sizes
def gemm_sizes(batch: int, image: int, kernel: int, stride: int, c_in: int, c_out: int,
               padding: int | None = None, itemsize: int = 4) -> dict[str, float]:
    r"""GEMM dimensions and memory of a convolution computed with im2col.

    ``padding`` defaults to ``kernel // 2`` ("same" for odd kernels and stride 1).

    Returns
    -------
    dict
        the GEMM sizes under the source's names (:math:`\mathcal{M}, \mathcal{K}, \mathcal{N}`
        in the course notation): ``M = batch * Ho * Wo``, ``K = c_in * kernel**2``,
        ``N = c_out``; ``Ho``, ``Wo``, the bytes of the input, the im2col matrix (M x K), the
        weights (K x N) and the output (M x N), and ``blowup`` = im2col bytes / input bytes.

    Examples
    --------
    >>> s = gemm_sizes(32, 56, 3, 1, 64, 64)
    >>> s["M"], s["K"], s["N"], s["blowup"]
    (100352, 576, 64, 9.0)
    """
    batch, image, c_in, c_out = (check_int(v, name, 1, 2**31) for v, name in (
        (batch, "batch"), (image, "image"), (c_in, "c_in"), (c_out, "c_out")))
    kernel, stride = check_int(kernel, "kernel", 1, 2**31), check_int(stride, "stride", 1, 2**31)
    itemsize = check_int(itemsize, "itemsize", 1, 64)
    pad = kernel // 2 if padding is None else check_int(padding, "padding", 0, 2**31)
    g = ConvGeometry.from_args((batch, c_in, image, image), kernel, stride, pad)
    m, k, n = batch * g.ho * g.wo, g.rows, c_out
    input_bytes = batch * c_in * image * image * itemsize
    cols_bytes = m * k * itemsize
    return {
        "M": m, "K": k, "N": n, "Ho": g.ho, "Wo": g.wo, "padding": pad,
        "input_bytes": input_bytes, "im2col_bytes": cols_bytes,
        "weight_bytes": k * n * itemsize, "output_bytes": m * n * itemsize,
        "blowup": cols_bytes / input_bytes, "macs": m * k * n,
    }
