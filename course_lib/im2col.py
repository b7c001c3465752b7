"""Convolution as matrix multiplication: im2col and col2im, the idea in numpy.

A 2-D convolution (卷积) slides a small kernel over an image. ``im2col`` rewrites it
as ONE matrix multiplication (GEMM, 通用矩阵乘): every receptive field of the input
becomes a column of a matrix, the kernels become the rows of another, and the
convolution is their product, which a BLAS library runs on all cores with SIMD
instructions - the intra-operator parallelism (算子内并行) of section 6.1.3.

This module is the one to read (chapter 05 shows :func:`im2col` and :func:`col2im`): each
function is the idea in a few lines of numpy, and :func:`conv2d_direct` is the definition
as plain loops. It also holds the sizes (:class:`ConvGeometry`, :func:`conv_output_shape`,
:func:`gemm_sizes`) and the argument checks every convolution entry point makes once. The
speed lives apart, in modules headed for speed that import this one (never the other way
round): :mod:`course_lib.conv_fast` (the same columns written block by block, with
threads: bit for bit what :func:`im2col` and :func:`col2im` return),
:mod:`course_lib.conv_winograd` and :mod:`course_lib.conv_algorithms`, whose
:func:`~course_lib.conv_algorithms.conv2d` and
:func:`~course_lib.conv_algorithms.conv2d_backward` are the convolution the course runs
(im2col + one GEMM per group, Winograd, or the timed choice among them, as cuDNN makes it).

Conventions (the same as PyTorch): arrays are NCHW, a weight has shape
``(C_out, C_in / groups, kh, kw)``, the operation is a cross-correlation (the kernel is
not flipped), and ``kernel_size``, ``stride``, ``padding``, ``dilation`` accept an int
or an ``(h, w)`` pair. The output size along each axis is

    H_out = (H + 2 * padding - dilation * (kh - 1) - 1) // stride + 1.

``im2col(x)`` has shape ``(N, C * kh * kw, H_out * W_out)``, row ``c * kh * kw + i * kw + j``
holding input channel ``c`` at kernel offset ``(i, j)``: the layout of
``torch.nn.functional.unfold``, and ``col2im`` matches ``torch.nn.functional.fold``.

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

import numbers
from dataclasses import dataclass

import numpy as np

from ._validate import check_int

__all__ = [
    "ConvGeometry",
    "backward_arguments",
    "col2im",
    "conv2d_direct",
    "conv_arguments",
    "conv_columns",
    "conv_input",
    "conv_output_shape",
    "gemm_sizes",
    "im2col",
]


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
    """The convolution, written as plain nested loops (as :func:`course_lib.conv_algorithms.conv2d`).

    One multiply-accumulate at a time, in Python, in double precision: the definition
    of the operation, used to teach it and as the reference in the tests. It is
    thousands of times slower than :func:`course_lib.conv_algorithms.conv2d`; keep the shapes tiny.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> x, w = rng.standard_normal((1, 4, 6, 5)), rng.standard_normal((6, 2, 3, 2))
    >>> args = dict(stride=(2, 1), padding=1, dilation=(1, 2), groups=2)
    >>> from course_lib.conv_algorithms import conv2d
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
def conv_output_shape(input_shape, kernel_size, stride=1, padding=0, dilation=1) -> tuple[int, int]:
    """Output height and width of a convolution (or of im2col's windows).

    Examples
    --------
    >>> conv_output_shape((1, 3, 32, 32), 3, stride=2, padding=1)
    (16, 16)
    >>> conv_output_shape((1, 3, 7, 9), (3, 1), dilation=(2, 1))
    (3, 9)
    """
    g = ConvGeometry.from_args(input_shape, kernel_size, stride, padding, dilation)
    return g.ho, g.wo


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


@dataclass(frozen=True)
class ConvGeometry:
    """Shapes of one convolution: input, kernel, stride, padding, dilation and output.

    Build it with :meth:`from_args`, which checks everything and names the numbers that
    do not fit.

    Examples
    --------
    >>> g = ConvGeometry.from_args((8, 3, 224, 224), 7, stride=2, padding=3)
    >>> g.ho, g.wo, g.rows, g.cols_shape
    (112, 112, 147, (8, 147, 12544))
    """

    n: int
    c: int
    h: int
    w: int
    kh: int
    kw: int
    sh: int = 1
    sw: int = 1
    ph: int = 0
    pw: int = 0
    dh: int = 1
    dw: int = 1

    @classmethod
    def from_args(cls, input_shape, kernel_size, stride=1, padding=0, dilation=1) -> ConvGeometry:
        """Check the arguments of :func:`im2col` and friends and return the geometry."""
        shape = tuple(input_shape)
        if len(shape) != 4 or not all(
            (type(s) is int or isinstance(s, numbers.Integral) and not isinstance(s, (bool, np.bool_)))
            and s >= 0
            for s in shape
        ):
            raise ValueError(f"input shape must be 4 non-negative ints (N, C, H, W), got {shape}")
        kh, kw = _pair(kernel_size, "kernel_size", 1)
        sh, sw = _pair(stride, "stride", 1)
        ph, pw = _pair(padding, "padding", 0)
        dh, dw = _pair(dilation, "dilation", 1)
        n, c, h, w = (int(s) for s in shape)
        if h == 0 or w == 0:
            # an empty batch (N = 0) or no channels (C = 0) is fine, as in PyTorch; an image
            # without pixels has no windows to speak of, padded or not
            raise ValueError(
                f"input height H and width W must be >= 1, got H = {h}, W = {w} in input shape "
                f"(N, C, H, W) = {tuple(int(s) for s in shape)}"
            )
        for axis, size, pad, k, d in (("height", h, ph, kh, dh), ("width", w, pw, kw, dw)):
            extent = d * (k - 1) + 1
            if extent > size + 2 * pad:
                raise ValueError(
                    f"kernel {axis} {k} with dilation {d} spans {extent} pixels, more than the "
                    f"padded input {axis} {size} + 2 * {pad} = {size + 2 * pad}"
                )
        return cls(n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw)

    @property
    def ho(self) -> int:
        """Output height."""
        return (self.h + 2 * self.ph - self.dh * (self.kh - 1) - 1) // self.sh + 1

    @property
    def wo(self) -> int:
        """Output width."""
        return (self.w + 2 * self.pw - self.dw * (self.kw - 1) - 1) // self.sw + 1

    @property
    def rows(self) -> int:
        """Rows of the column matrix per sample: C * kh * kw (the GEMM's inner size 𝒦)."""
        return self.c * self.kh * self.kw

    @property
    def cols_shape(self) -> tuple[int, int, int]:
        """Shape of ``im2col``'s result: (N, C * kh * kw, H_out * W_out)."""
        return (self.n, self.rows, self.ho * self.wo)

    @property
    def hp(self) -> int:
        """Padded input height."""
        return self.h + 2 * self.ph

    @property
    def wp(self) -> int:
        """Padded input width."""
        return self.w + 2 * self.pw


# ----------------------------------------------------------------- argument checks
# Once, at the entry points above (and those of the fast modules); never inside a loop.
def conv_input(x, kernel_size, stride=1, padding=0, dilation=1) -> tuple[np.ndarray, ConvGeometry]:
    """:func:`im2col`'s arguments checked: ``x`` as a 4-d numeric array, and the geometry.

    Examples
    --------
    >>> x, g = conv_input([[[[1, 2], [3, 4]]]], 2)
    >>> x.shape, g.cols_shape
    ((1, 1, 2, 2), (1, 4, 1))
    """
    x = _array4(x, "x", floats=False)
    return x, ConvGeometry.from_args(x.shape, kernel_size, stride, padding, dilation)


def conv_columns(cols, input_shape, kernel_size, stride=1, padding=0, dilation=1) -> tuple[np.ndarray, ConvGeometry]:
    """:func:`col2im`'s arguments checked: ``cols`` as an array of the right shape, and the geometry.

    Examples
    --------
    >>> conv_columns(np.zeros((1, 4, 5)), (1, 1, 3, 3), 2)
    Traceback (most recent call last):
    ...
    ValueError: cols must have shape (N, C*kh*kw, H_out*W_out) = (1, 4, 4) for input shape (1, 1, 3, 3) and kernel 2x2, got (1, 4, 5)
    """
    if not isinstance(cols, np.ndarray):
        if isinstance(cols, (str, bytes)) or cols is None:
            raise TypeError(f"cols must be a numpy array, got {type(cols).__name__}")
        cols = np.asarray(cols)
    if cols.dtype.kind not in "iuf":
        raise TypeError(f"cols must have an integer or floating-point dtype, got {cols.dtype}")
    g = ConvGeometry.from_args(input_shape, kernel_size, stride, padding, dilation)
    if cols.shape != g.cols_shape:
        raise ValueError(
            f"cols must have shape (N, C*kh*kw, H_out*W_out) = {g.cols_shape} for input shape "
            f"{tuple(input_shape)} and kernel {g.kh}x{g.kw}, got {cols.shape}"
        )
    return cols, g


def conv_arguments(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """:func:`course_lib.conv_algorithms.conv2d`'s arguments checked: ``(x, weight, bias, groups, geometry)``.

    ``x``, ``weight`` and ``bias`` come back C-contiguous in their common dtype.

    Examples
    --------
    >>> x, w, b, groups, g = conv_arguments(np.ones((1, 4, 5, 5), np.float32), np.ones((6, 2, 3, 3)), groups=2)
    >>> x.dtype, groups, (g.ho, g.wo)
    (dtype('float64'), 2, (3, 3))
    """
    x = _array4(x, "x", floats=True)
    weight = _array4(weight, "weight", floats=True)
    if isinstance(groups, (bool, np.bool_)) or not isinstance(groups, numbers.Integral):
        raise TypeError(f"groups must be an int, got {groups!r}")
    groups = int(groups)
    if groups < 1:
        raise ValueError(f"groups must be >= 1, got {groups}")
    c_in, c_out = x.shape[1], weight.shape[0]
    if c_in % groups:
        raise ValueError(f"input channels C_in = {c_in} are not divisible by groups = {groups}")
    if c_out % groups:
        raise ValueError(f"output channels C_out = {c_out} are not divisible by groups = {groups}")
    if weight.shape[1] * groups != c_in:
        raise ValueError(
            f"weight expects C_in / groups = {weight.shape[1]} channels per group "
            f"({weight.shape[1]} x groups {groups} = {weight.shape[1] * groups}), "
            f"but x has C_in = {c_in} channels"
        )
    dtype = np.result_type(x.dtype, weight.dtype)
    if bias is not None:
        if not isinstance(bias, np.ndarray):
            bias = np.asarray(bias)
        if bias.dtype not in (np.float32, np.float64):
            raise TypeError(f"bias must have dtype float32 or float64, got {bias.dtype}")
        if bias.shape != (c_out,):
            raise ValueError(f"bias must have shape (C_out,) = ({c_out},), got {bias.shape}")
        bias = bias.astype(dtype, copy=False)
    g = ConvGeometry.from_args(x.shape, weight.shape[2:], stride, padding, dilation)
    x = np.ascontiguousarray(x, dtype=dtype)
    weight = np.ascontiguousarray(weight, dtype=dtype)
    return x, weight, bias, groups, g


def backward_arguments(grad_out, x, weight, stride=1, padding=0, dilation=1, groups=1, input_grad=True):
    """:func:`course_lib.conv_algorithms.conv2d_backward`'s arguments checked: ``(grad_out, x, weight, groups, geometry, input_grad)``.

    ``grad_out`` must have the forward pass's output shape; it comes back C-contiguous
    in the dtype of ``x``.

    Examples
    --------
    >>> backward_arguments(np.zeros((1, 2, 3, 3)), np.zeros((1, 2, 4, 4)), np.zeros((2, 2, 3, 3)))
    Traceback (most recent call last):
    ...
    ValueError: grad_out must have the output shape (1, 2, 2, 2), got (1, 2, 3, 3)
    """
    x, weight, _, groups, g = conv_arguments(x, weight, None, stride, padding, dilation, groups)
    if not isinstance(grad_out, np.ndarray):
        grad_out = np.asarray(grad_out)
    expected = (g.n, weight.shape[0], g.ho, g.wo)
    if grad_out.shape != expected:
        raise ValueError(f"grad_out must have the output shape {expected}, got {grad_out.shape}")
    if grad_out.dtype not in (np.float32, np.float64):
        raise TypeError(f"grad_out must have dtype float32 or float64, got {grad_out.dtype}")
    if not isinstance(input_grad, (bool, np.bool_)):
        raise TypeError(f"input_grad must be True or False, got {input_grad!r}")
    return np.ascontiguousarray(grad_out, dtype=x.dtype), x, weight, groups, g, bool(input_grad)


def _pair(value, name: str, minimum: int) -> tuple[int, int]:
    """An int or an (h, w) pair of ints >= minimum, returned as a pair."""
    if type(value) is int:  # fast path (exact int, not bool)
        pair = (value, value)
    elif type(value) is tuple and len(value) == 2 and type(value[0]) is int and type(value[1]) is int:
        pair = value
    elif isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int or a pair of ints, got {value!r}")
    elif isinstance(value, numbers.Integral):
        pair = (int(value), int(value))
    elif isinstance(value, (tuple, list, np.ndarray)) and len(value) == 2 and all(
        isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)) for v in value
    ):
        pair = (int(value[0]), int(value[1]))
    else:
        raise TypeError(f"{name} must be an int or a pair of ints (h, w), got {value!r}")
    if min(pair) < minimum:
        raise ValueError(f"{name} must be >= {minimum} in both directions, got {value!r}")
    return pair


def _array4(x, name: str, *, floats: bool) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        if isinstance(x, (str, bytes)) or x is None:
            raise TypeError(f"{name} must be a numpy array, got {type(x).__name__}")
        x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(
            f"{name} must be a 4-d array (N, C, H, W), got {x.ndim} dimension(s) with shape {x.shape}"
        )
    if floats:
        if x.dtype not in (np.float32, np.float64):
            raise TypeError(f"{name} must have dtype float32 or float64, got {x.dtype}")
    elif x.dtype.kind not in "iuf":
        raise TypeError(f"{name} must have an integer or floating-point dtype, got {x.dtype}")
    return x
