"""One convolution, several algorithms - and a cuDNN-style choice among them.

PyTorch on an NVIDIA GPU hands a convolution to cuDNN, which knows several algorithms for
it (implicit GEMM / im2col, FFT, Winograd, direct) and, with
``torch.backends.cudnn.benchmark = True``, times them once per shape and keeps the
fastest. The course's numpy convolution does the same with these algorithms:

* ``"direct"``: :func:`course_lib.im2col.conv2d_direct`, the definition as Python loops:
  hopeless on a real layer, but the fastest on a handful of multiplications, where
  numpy's fixed cost per call dominates;
* ``"im2col"``: columns + one GEMM (:func:`course_lib.im2col.conv2d`), every
  multiplication of the definition at the speed of BLAS;
* ``"winograd_f2"``, ``"winograd_f4"``: Winograd's minimal filtering F(m x m, 3 x 3),
  m = 2 or 4 (Lavin & Gray 2016), for 3 x 3 kernels with stride 1.

``conv2d(x, w, ..., algorithm="auto")`` (the default) times the algorithms that apply
once per shape, dtype and thread count, keeps the fastest in an :class:`AlgorithmCache`
(``ALGORITHM_CACHE`` unless you pass your own) and reuses it: deterministic given the
cache. A fresh process may choose differently, so code that must be bitwise reproducible
across processes (the course's CNN training) names its algorithm.

Winograd in brief: cut the output into m x m tiles, each computed from an (m + 2) x (m + 2)
input tile d. With the matrices of :func:`winograd_matrices`, one channel pair gives
``Y = A^T [(G g G^T) * (B^T d B)] A`` (* elementwise, g the kernel). Summed over input
channels, the elementwise stage is, for each of the (m + 2)^2 transform points, ONE GEMM
of the C_out x C_in transformed kernels by the C_in x tiles transformed inputs: (m + 2)^2
multiplications per tile and channel pair instead of 9 m^2 (16 instead of 36 for
F(2 x 2, 3 x 3), 36 instead of 144 for F(4 x 4, 3 x 3)). The transforms (additions and
multiplications by small constants, per tile and channel or per kernel) are not counted
by :func:`multiplication_count`. The price is precision, which :func:`float32_error` measures.

Examples
--------
>>> rng = np.random.default_rng(0)
>>> x = rng.standard_normal((2, 8, 12, 12))
>>> w = rng.standard_normal((16, 8, 3, 3))
>>> y = conv2d_winograd(x, w, padding=1, tile=4)
>>> bool(np.allclose(y, conv2d(x, w, padding=1, algorithm="im2col")))
True
>>> multiplication_count("winograd_f2", (1, 64, 56, 56), (64, 64, 3, 3), padding=1) / \\
...     multiplication_count("im2col", (1, 64, 56, 56), (64, 64, 3, 3), padding=1)
0.4444444444444444
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Mapping
from fractions import Fraction
from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import im2col
from ._validate import check_int, check_type
from .cost import conv2d_macs
from .im2col import ConvGeometry, conv2d, conv2d_direct
from .timing import blas_threads, current_blas_threads

__all__ = [
    "ALGORITHMS", "ALGORITHM_CACHE", "AlgorithmCache", "ConvKey", "ConvLayer", "DIRECT_MAX_MACS",
    "RESNET50_3X3", "candidates", "chosen_algorithm", "conv2d_winograd", "conv2d_winograd_backward",
    "conv_key", "float32_error", "multiplication_count", "multiplication_counts",
    "resnet50_3x3_layers", "winograd_matrices",
]

#: The algorithms ``conv2d(algorithm=...)`` knows, in the order that breaks ties in timings.
ALGORITHMS = ("im2col", "winograd_f4", "winograd_f2", "direct")
#: Output tile m of each Winograd algorithm F(m x m, 3 x 3).
_TILES = {"winograd_f2": 2, "winograd_f4": 4}
#: "auto" times the plain loops only up to this many multiply-accumulates (beyond, they lose).
DIRECT_MAX_MACS = 256
#: Interpolation points of the Cook-Toom construction (the last point is infinity).
_POINTS = (0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2))
#: Bytes of transformed input per block of samples (the block's buffers stay in the caches).
_WINO_BYTES = 1 << 21
#: A block has at least this many tiles, so that its GEMMs are not too thin ...
_MIN_TILES = 128
#: ... and a large batch is cut into at least this many blocks (work for several threads).
_MIN_BLOCKS = 8
#: "auto" times each candidate twice (3 x in a close race), 5 x when the fastest takes less.
_RETIME_BELOW = 2e-3


# ----------------------------------------------------------------------- transforms
def _poly(roots: list) -> list:
    """Coefficients, lowest first, of the product of (x - root) over ``roots``."""
    coef = [Fraction(1)]
    for root in roots:
        coef = [Fraction(0), *coef]  # times x ...
        for i in range(len(coef) - 1):  # ... minus root times the old polynomial
            coef[i] -= root * coef[i + 1]
    return coef


def winograd_matrices(m: int = 2, r: int = 3, *, exact: bool = False):
    r"""Transform matrices ``(A^T, G, B^T)`` of Winograd's F(m, r), derived by Cook-Toom.

    F(m, r) computes m outputs of a correlation with an r-tap kernel from α = m + r - 1
    inputs d: :math:`y = A^T[(G g) \odot (B^T d)]`, and in 2-D
    :math:`Y = A^T[(G g G^T) \odot (B^T d B)]A`. The construction evaluates the
    polynomials of the data and the kernel at α points - 0, 1, -1, 2, -2, 1/2, -1/2
    (as many as needed) and infinity - multiplies the values, and interpolates:

    * ``A^T[i, j] = a_j**i`` (the point at infinity: 1 in the last row);
    * ``G[j, k] = a_j**k / prod_{l != j} (a_j - a_l)`` (infinity: the last tap, 1);
    * row j of ``B^T``: the coefficients of ``prod_{l != j} (x - a_l)`` (infinity:
      ``prod_l (x - a_l)``).

    The rows of the point 0 and of infinity are scaled by -1 where needed so that they
    start with a positive number (their sign moves into ``G`` and ``A^T``): this gives
    Lavin & Gray's published matrices for F(2, 3) and F(4, 3).

    Parameters
    ----------
    m, r : int
        Outputs per tile and kernel taps, with α = m + r - 1 <= 8.
    exact : bool
        Return nested lists of ``fractions.Fraction`` instead of float64 arrays
        ``A^T`` (m x α), ``G`` (α x r), ``B^T`` (α x α).

    Examples
    --------
    >>> at, g, bt = winograd_matrices(2)
    >>> bt.astype(int).tolist()                  # Lavin & Gray's B^T of F(2 x 2, 3 x 3)
    [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
    >>> g.tolist(), at.astype(int).tolist()
    ([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]], [[1, 1, 1, 0], [0, 1, -1, -1]])
    >>> d, kernel = np.array([1.0, 2, 3, 4]), np.array([1.0, 0, -1])
    >>> at @ ((g @ kernel) * (bt @ d))            # the correlation, 4 multiplications
    array([-2., -2.])
    """
    r = check_int(r, "r", 1, len(_POINTS))
    m = check_int(m, "m", 1, len(_POINTS) + 2 - r)
    exact = check_type(exact, "exact", (bool, np.bool_), "True or False")
    alpha = m + r - 1
    pts = [Fraction(p) for p in _POINTS[: alpha - 1]]
    at = [[p**i for p in pts] + [Fraction(int(i == m - 1))] for i in range(m)]
    g_rows = [[a**k / math.prod(a - b for b in pts if b != a) for k in range(r)] for a in pts]
    bt = [_poly([b for b in pts if b != a]) + [Fraction(0)] for a in pts]
    g_rows.append([Fraction(int(k == r - 1)) for k in range(r)])  # infinity: the last tap ...
    bt.append(_poly(pts))  # ... and the leading coefficient of the product
    if bt[0][0] < 0:  # the point 0: B^T's row starts positive, the sign goes into G
        bt[0], g_rows[0] = [-v for v in bt[0]], [-v for v in g_rows[0]]
    if next(v for v in bt[-1] if v != 0) < 0:  # infinity: the same, the sign into A^T
        bt[-1] = [-v for v in bt[-1]]
        for row in at:
            row[-1] = -row[-1]
    if exact:
        return at, g_rows, bt
    return tuple(np.array(mat, dtype=np.float64) for mat in (at, g_rows, bt))


@functools.lru_cache(maxsize=8)
def _matrices(m: int, dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(A^T, G, B^T)`` of F(m, 3) in ``dtype``, read-only (computed once)."""
    mats = tuple(a.astype(dtype) for a in winograd_matrices(m))
    for a in mats:
        a.flags.writeable = False
    return mats


def _filter_transform(weight: np.ndarray, m: int) -> np.ndarray:
    """U = G g G^T of every kernel g: (α^2, C_out, C_in), by two GEMMs."""
    g = _matrices(m, weight.dtype.name)[1]
    k, c = weight.shape[:2]
    left = (g @ weight.transpose(2, 0, 1, 3).reshape(3, -1)).reshape(-1, k * c, 3)  # G g
    return np.matmul(g, left.transpose(0, 2, 1)).reshape(-1, k, c)  # (G g) G^T


def _filter_transform_adjoint(grad_u: np.ndarray, m: int) -> np.ndarray:
    """G^T dU G for every kernel: (α^2, C_out, C_in) -> (C_out, C_in, 3, 3)."""
    g = _matrices(m, grad_u.dtype.name)[1]
    a, k, c = m + 2, grad_u.shape[1], grad_u.shape[2]
    left = (g.T @ grad_u.reshape(a, -1)).reshape(3, a, k * c)
    return np.ascontiguousarray(np.matmul(g.T, left).reshape(3, 3, k, c).transpose(2, 3, 0, 1))


class _Tiles:
    """F(m x m, 3 x 3) on blocks of up to ``block`` samples, with this thread's buffers.

    Layout: a block is copied into a zero-padded, channels-last staging buffer
    (block, H_s, W_s, C), whose tiles are then gathered with contiguous runs of C numbers
    into (α, α, block, tiles_h, tiles_w, C); the two halves of ``B^T d B`` are GEMMs along
    the leading axes, and so are the halves of ``A^T M A`` on the output side.
    """

    def __init__(self, m: int, c: int, k: int, h: int, w: int, ph: int, pw: int, block: int, dtype,
                 grad: bool = False):
        self.m, self.a, self.c, self.k, self.h, self.w, self.ph, self.pw = m, m + 2, c, k, h, w, ph, pw
        self.ho, self.wo = h + 2 * ph - 2, w + 2 * pw - 2
        self.th, self.tw = -(-self.ho // m), -(-self.wo // m)
        self.at, _, self.bt = _matrices(m, np.dtype(dtype).name)
        self.stage = np.zeros((block, self.th * m + 2, self.tw * m + 2, c), dtype)  # padding stays 0
        size = self.a * self.a * block * self.th * self.tw
        self.buf_v, self.buf_m = np.empty(size * c, dtype), np.empty(size * k, dtype)
        self.buf_v1 = self.buf_z = np.empty(max(size * c, size * k * m // self.a), dtype)  # one after the other
        self.buf_g = np.empty(size * k, dtype) if grad else None  # for output_grad

    def input(self, xb: np.ndarray) -> np.ndarray:
        """V = B^T d B of every tile of ``xb`` (b, C, H, W): (α^2, b * tiles, C)."""
        a, m, c, b = self.a, self.m, self.c, xb.shape[0]
        rest = b * self.th * self.tw * c
        self.stage[:b, self.ph : self.ph + self.h, self.pw : self.pw + self.w] = xb.transpose(0, 2, 3, 1)
        s = self.stage.strides
        tiles = as_strided(self.stage, (a, a, b, self.th, self.tw, c), (s[1], s[2], s[0], m * s[1], m * s[2], s[3]))
        d = self.buf_v[: a * a * rest].reshape(a, a, b, self.th, self.tw, c)
        np.copyto(d, tiles)
        v1 = self.buf_v1[: a * a * rest].reshape(a, a, rest)
        np.matmul(self.bt, d.reshape(a, a * rest), out=v1.reshape(a, a * rest))  # rows: B^T d
        v = d.reshape(a, a, rest)
        np.matmul(self.bt, v1, out=v)  # columns: (B^T d) B, per row
        return v.reshape(a * a, -1, c)

    def output(self, mm: np.ndarray, dst: np.ndarray) -> None:
        """Y = A^T M A of every tile, M (α^2, C_out, b * tiles), into ``dst`` (b, C_out, H_out, W_out)."""
        a, m, k, b = self.a, self.m, self.k, dst.shape[0]
        rest = k * b * self.th * self.tw
        z = self.buf_z[: m * a * rest].reshape(m, a * rest)
        np.matmul(self.at, mm.reshape(a, a * rest), out=z)  # rows: A^T M
        y = self.buf_m[: m * m * rest].reshape(m, rest, m)  # M is no longer needed
        np.matmul(z.reshape(m, a, rest).transpose(0, 2, 1), self.at.T, out=y)  # columns, j last
        y = y.reshape(m, k, b, self.th, self.tw * m)
        for i in range(m):  # row i of every tile: whole output rows, cut at the edges
            dst[:, :, i::m] = y[i, :, :, : -(-(self.ho - i) // m), : self.wo].transpose(1, 0, 2, 3)

    def output_grad(self, gb: np.ndarray) -> np.ndarray:
        """A gy A^T of every output tile of ``gb`` (b, C_out, H_out, W_out): (α^2, C_out, b * tiles).

        The adjoint of :meth:`output`, step by step (the weight gradient needs it)."""
        a, m, k, b = self.a, self.m, self.k, gb.shape[0]
        rest = k * b * self.th * self.tw
        gt = self.buf_z[: m * m * rest].reshape(m, k, b, self.th, self.tw * m)
        if self.th * m != self.ho or self.tw * m != self.wo:
            gt.fill(0)  # tiles sticking out of the output: zero gradient there
        for i in range(m):
            gt[i, :, :, : -(-(self.ho - i) // m), : self.wo] = gb[:, :, i::m].transpose(1, 0, 2, 3)
        g1 = self.buf_m[: m * a * rest].reshape(m, a, rest)
        np.matmul(self.at.T, gt.reshape(m, rest, m).transpose(0, 2, 1), out=g1)
        out = self.buf_g[: a * a * rest].reshape(a, a * rest)
        np.matmul(self.at.T, g1.reshape(m, a * rest), out=out)
        return out.reshape(a * a, k, -1)


def _cropped(x: np.ndarray, ph: int, pw: int) -> tuple[np.ndarray, int, int]:
    """A negative padding crops: the input gradient of a padding > 2 needs it."""
    top, left = max(-ph, 0), max(-pw, 0)
    return x[:, :, top : x.shape[2] - top, left : x.shape[3] - left], max(ph, 0), max(pw, 0)


def _block(n: int, tiles: int, c: int, a: int, itemsize: int) -> int:
    """Samples per block, from the shapes only (so threads give bitwise one thread's result)."""
    per_sample = a * a * tiles * max(c, 1) * itemsize
    wanted = max(_WINO_BYTES // per_sample, -(-_MIN_TILES // tiles))
    return max(1, min(n, wanted, -(-n // _MIN_BLOCKS)))


def _winograd(x: np.ndarray, weight: np.ndarray, bias, ph: int, pw: int, m: int) -> np.ndarray:
    """F(m x m, 3 x 3) of checked float arrays (N, C, H, W), (C_out, C, 3, 3); padding may be < 0."""
    x, ph, pw = _cropped(x, ph, pw)
    n, c, h, w = x.shape
    k = weight.shape[0]
    out = np.empty((n, k, h + 2 * ph - 2, w + 2 * pw - 2), x.dtype)
    if out.size == 0 or c == 0:
        out[...] = 0 if bias is None else bias[:, None, None]
        return out
    a, tiles = m + 2, -(-out.shape[2] // m) * -(-out.shape[3] // m)
    block = _block(n, tiles, c, a, x.dtype.itemsize)
    blocks = im2col._blocks(n, block)
    threads = im2col._threads_for(out.size * c * 9, len(blocks))
    with blas_threads(1 if threads > 1 else None):  # no idle BLAS threads spinning beside ours
        u = _filter_transform(weight, m)

    def make_worker():
        t = _Tiles(m, c, k, h, w, ph, pw, block, x.dtype)
        mm_buf = t.buf_m

        def work(unit):
            start, stop = unit
            v = t.input(x[start:stop])
            mm = mm_buf[: a * a * k * v.shape[1]].reshape(a * a, k, -1)
            np.matmul(u, v.transpose(0, 2, 1), out=mm)  # the elementwise stage: α^2 GEMMs
            if bias is not None:  # A^T's column of the point 1 is all ones: y += bias
                mm[a + 1] += bias[:, None]
            t.output(mm, out[start:stop])

        return work

    im2col._run_units(blocks, threads, make_worker)
    return out


# -------------------------------------------------------------------- public Winograd
def _winograd_problem(w_shape, stride, dilation, groups: int) -> str:
    """Why Winograd F(m x m, 3 x 3) does not apply ('' if it does), naming the parameter."""
    if tuple(w_shape[2:]) != (3, 3):
        return f"weight must hold 3 x 3 kernels (C_out, C_in, 3, 3), got shape {tuple(w_shape)}"
    if tuple(stride) != (1, 1):
        return f"stride must be 1 (the tiles are computed at stride 1), got {tuple(stride)}"
    if tuple(dilation) != (1, 1):
        return f"dilation must be 1, got {tuple(dilation)}"
    if groups != 1:
        return f"groups must be 1, got {groups}"
    return ""


def _winograd_args(x, weight, bias, stride, padding, dilation, groups, tile):
    x, weight, bias, groups, g = im2col._conv_args(x, weight, bias, stride, padding, dilation, groups)
    if isinstance(tile, (bool, np.bool_)) or tile not in (2, 4):
        raise ValueError(f"tile must be one of (2, 4) (F(2 x 2, 3 x 3) or F(4 x 4, 3 x 3)), got {tile!r}")
    problem = _winograd_problem(weight.shape, (g.sh, g.sw), (g.dh, g.dw), groups)
    if problem:
        raise ValueError(f"Winograd F(m x m, 3 x 3) does not apply: {problem}")
    return x, weight, bias, g, int(tile)


def conv2d_winograd(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *, tile: int = 2) -> np.ndarray:
    """3 x 3 convolution with stride 1 by Winograd's F(tile x tile, 3 x 3).

    Same arguments and result (up to rounding) as :func:`course_lib.im2col.conv2d`, which
    runs it as ``algorithm="winograd_f2"`` or ``"winograd_f4"``. A ``ValueError`` names
    what does not fit: kernels other than 3 x 3, stride, dilation or groups other than 1.

    Parameters
    ----------
    x, weight, bias, stride, padding, dilation, groups
        As for :func:`course_lib.im2col.conv2d`; weight (C_out, C_in, 3, 3).
    tile : {2, 4}
        m, the output tile: F(2 x 2, 3 x 3) does 16 multiplications per tile and channel
        pair (the definition: 36), F(4 x 4, 3 x 3) does 36 (the definition: 144).

    Notes
    -----
    The batch runs in blocks of samples sized for the caches, shared among the BLAS
    threads as in ``conv2d`` (bitwise the same result with any number of threads).
    Rounding in float32 relative to the largest output (:func:`float32_error`, 64
    channels): about 3e-7 for F(2 x 2, 3 x 3), 3e-6 for F(4 x 4, 3 x 3), 5e-7 for im2col.

    Examples
    --------
    >>> x = np.arange(16.0).reshape(1, 1, 4, 4)
    >>> w = np.ones((1, 1, 3, 3))
    >>> conv2d_winograd(x, w)[0, 0]           # sums of the four 3 x 3 windows
    array([[45., 54.],
           [81., 90.]])
    >>> conv2d_winograd(x, w, stride=2)
    Traceback (most recent call last):
    ...
    ValueError: Winograd F(m x m, 3 x 3) does not apply: stride must be 1 (the tiles are computed at stride 1), got (2, 2)
    """
    x, weight, bias, g, m = _winograd_args(x, weight, bias, stride, padding, dilation, groups, tile)
    return _winograd(x, weight, bias, g.ph, g.pw, m)


def conv2d_winograd_backward(grad_out, x, weight, stride=1, padding=0, dilation=1, groups=1, *,
                             tile: int = 2, input_grad: bool = True):
    """Gradients of :func:`conv2d_winograd`: two more Winograd computations.

    * grad_x: the Winograd convolution of ``grad_out``, padded by 2 - padding (cropped
      where negative), with the kernels turned by 180 degrees, C_in and C_out swapped.
    * grad_weight takes the Winograd route backwards: G^T [sum over tiles of
      (A gy A^T) V^T] G, with V = B^T d B of the input tiles as in the forward pass and gy
      an output-gradient tile - the adjoint of each forward step, one (C_out x tiles) by
      (tiles x C_in) GEMM per transform point. It saves the forward pass's factor of
      multiplications; the im2col route would build the 9 x larger columns again.

    Parameters
    ----------
    grad_out : numpy.ndarray
        (N, C_out, H_out, W_out).
    x, weight, stride, padding, dilation, groups, tile
        The arguments of the forward call.
    input_grad : bool
        False skips grad_x (returned as None).

    Returns
    -------
    tuple
        ``(grad_x, grad_weight, grad_bias)`` as :func:`course_lib.im2col.conv2d_backward`.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x, w = rng.standard_normal((2, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3))
    >>> gy = rng.standard_normal((2, 4, 6, 6))
    >>> from course_lib.im2col import conv2d_backward
    >>> all(np.allclose(a, b) for a, b in zip(conv2d_winograd_backward(gy, x, w, padding=1),
    ...                                       conv2d_backward(gy, x, w, padding=1)))
    True
    """
    x, weight, _, g, m = _winograd_args(x, weight, None, stride, padding, dilation, groups, tile)
    k = weight.shape[0]
    grad_out = im2col._grad_out_arg(grad_out, (g.n, k, g.ho, g.wo), x.dtype)
    if not isinstance(input_grad, (bool, np.bool_)):
        raise TypeError(f"input_grad must be True or False, got {input_grad!r}")
    grad_b, grad_x = grad_out.sum(axis=(0, 2, 3)), None
    if input_grad:
        turned = np.ascontiguousarray(weight[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
        grad_x = _winograd(grad_out, turned, None, 2 - g.ph, 2 - g.pw, m)
    a = m + 2
    grad_u = np.zeros((a * a, k, g.c), dtype=x.dtype)
    if grad_out.size and x.size:
        block = _block(g.n, -(-g.ho // m) * -(-g.wo // m), max(g.c, k), a, x.dtype.itemsize)
        chunks = im2col._chunks(im2col._blocks(g.n, block))
        partial = np.zeros((len(chunks), a * a, k, g.c), dtype=x.dtype)

        def make_worker():
            t = _Tiles(m, g.c, k, g.h, g.w, g.ph, g.pw, block, x.dtype, grad=True)
            product = np.empty((a * a, k, g.c), dtype=x.dtype)

            def work(unit):
                index, chunk_blocks = unit
                for start, stop in chunk_blocks:
                    gy = t.output_grad(grad_out[start:stop])
                    np.matmul(gy, t.input(x[start:stop]), out=product)
                    partial[index] += product

            return work

        im2col._run_units(chunks, im2col._threads_for(2 * grad_out.size * g.c * 9, len(chunks)), make_worker)
        for part in partial:  # in chunk order: the same sum with any number of threads
            grad_u += part
    return grad_x, _filter_transform_adjoint(grad_u, m), grad_b


# ----------------------------------------------------------- choosing an algorithm
class ConvKey(NamedTuple):
    """What "auto" chooses an algorithm for: shapes, geometry, dtype and BLAS threads."""

    x_shape: tuple[int, ...]
    w_shape: tuple[int, ...]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    groups: int
    dtype: str
    threads: int


class AlgorithmCache:
    """The choices of ``conv2d(algorithm="auto")``: one algorithm per :class:`ConvKey`.

    cuDNN's benchmark mode keeps such a table per process; ``ALGORITHM_CACHE`` is the one
    ``conv2d`` uses unless given another (``cache=``). A choice is kept until
    :meth:`clear` (or until ``max_entries`` newer ones push it out).

    Parameters
    ----------
    max_entries : int
        Choices kept at most; the oldest goes first.

    Examples
    --------
    >>> cache = AlgorithmCache()
    >>> x, w = np.ones((1, 2, 6, 6)), np.ones((3, 2, 3, 3))
    >>> y = conv2d(x, w, padding=1, cache=cache)       # times the candidates, keeps the fastest
    >>> key, choice = cache.last
    >>> key.x_shape, key.w_shape, choice in candidates(x.shape, w.shape, padding=1)
    ((1, 2, 6, 6), (3, 2, 3, 3), True)
    >>> sorted(cache.timings(key)) == sorted(candidates(x.shape, w.shape, padding=1))
    True
    >>> cache.clear(); len(cache)
    0
    """

    def __init__(self, max_entries: int = 4096):
        self.max_entries = check_int(max_entries, "max_entries", 1, 2**31)
        self._lock = threading.Lock()
        self._entries: dict[ConvKey, tuple[str, dict[str, float]]] = {}
        self._last: tuple[ConvKey, str] | None = None

    def get(self, key: ConvKey) -> str | None:
        """The algorithm recorded for ``key``, or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._last = (key, entry[0])
            return None if entry is None else entry[0]

    def record(self, key: ConvKey, seconds: Mapping[str, float]) -> str:
        """Record the fastest of ``seconds`` (algorithm -> time) for ``key``; return the choice.

        A key chosen before keeps its first choice (two threads may time the same key)."""
        check_type(key, "key", ConvKey, "a ConvKey")
        times = {str(name): float(t) for name, t in dict(seconds).items()}
        if not times or any(name not in ALGORITHMS for name in times):
            raise ValueError(f"seconds must map some of {ALGORITHMS} to times, got {sorted(times)}")
        best = min(times, key=lambda name: (times[name], ALGORITHMS.index(name)))
        with self._lock:
            entry = self._entries.setdefault(key, (best, times))
            while len(self._entries) > self.max_entries:
                del self._entries[next(iter(self._entries))]
            self._last = (key, entry[0])
            return entry[0]

    def clear(self) -> None:
        """Forget every choice."""
        with self._lock:
            self._entries.clear()
            self._last = None

    def choices(self) -> dict[ConvKey, str]:
        """A copy of the table: key -> chosen algorithm, oldest first."""
        with self._lock:
            return {key: entry[0] for key, entry in self._entries.items()}

    def timings(self, key: ConvKey) -> dict[str, float]:
        """Seconds each candidate took when ``key`` was timed ({} if it was not)."""
        with self._lock:
            entry = self._entries.get(key)
            return {} if entry is None else dict(entry[1])

    @property
    def last(self) -> tuple[ConvKey, str] | None:
        """(key, algorithm) of the latest choice looked up or made by "auto"."""
        return self._last

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        rows = [f"  {k.x_shape} * {k.w_shape} stride {k.stride} padding {k.padding} {k.dtype} "
                f"{k.threads}t -> {name}" for k, name in self.choices().items()]
        return "\n".join([f"AlgorithmCache({len(rows)} choices)", *rows])


#: The process-wide cache of ``conv2d(algorithm="auto")``.
ALGORITHM_CACHE = AlgorithmCache()


def _cache_arg(cache) -> AlgorithmCache:
    return ALGORITHM_CACHE if cache is None else check_type(cache, "cache", AlgorithmCache, "an AlgorithmCache")


def _layer(x_shape, w_shape, stride, padding, dilation, groups) -> tuple[ConvGeometry, tuple, int]:
    """Check the shapes of a convolution (no arrays): geometry, weight shape, groups."""
    try:
        w_shape = tuple(w_shape)
    except TypeError:
        raise TypeError(f"w_shape must be 4 ints (C_out, C_in / groups, kh, kw), got {w_shape!r}") from None
    if len(w_shape) != 4:
        raise ValueError(f"w_shape must be 4 ints (C_out, C_in / groups, kh, kw), got {w_shape!r}")
    w_shape = tuple(check_int(v, f"w_shape[{i}]", 0 if i < 2 else 1) for i, v in enumerate(w_shape))
    groups = check_int(groups, "groups", 1, 2**31)
    g = ConvGeometry.from_args(x_shape, w_shape[2:], stride, padding, dilation)
    if w_shape[1] * groups != g.c or w_shape[0] % groups:
        raise ValueError(f"w_shape {w_shape} does not fit C_in = {g.c} with groups = {groups}: "
                         "C_in must be w_shape[1] x groups and C_out divisible by groups")
    return g, w_shape, groups


def _algorithm_arg(algorithm, allowed: tuple[str, ...] = ALGORITHMS) -> str:
    if not isinstance(algorithm, str) or algorithm not in allowed:
        kind = ValueError if isinstance(algorithm, str) else TypeError
        raise kind(f"algorithm must be one of {allowed}, got {algorithm!r}")
    return algorithm


def _problem(name: str, w_shape, g: ConvGeometry, groups: int) -> str:
    """Why algorithm ``name`` does not apply to this convolution ('' if it does)."""
    return _winograd_problem(w_shape, (g.sh, g.sw), (g.dh, g.dw), groups) if name in _TILES else ""


def _applies(name: str, w_shape, g: ConvGeometry, groups: int) -> bool:
    """Whether "auto" times ``name``: it applies (and "direct" only on tiny convolutions)."""
    if name == "direct":
        return g.n * w_shape[0] * g.ho * g.wo * w_shape[1] * g.kh * g.kw <= DIRECT_MAX_MACS
    return not _problem(name, w_shape, g, groups)


def candidates(x_shape, w_shape, stride=1, padding=0, dilation=1, groups=1) -> tuple[str, ...]:
    """The algorithms "auto" times for this convolution: those that apply.

    im2col always; Winograd for 3 x 3 kernels with stride, dilation and groups 1; the
    plain loops ("direct") for at most ``DIRECT_MAX_MACS`` multiply-accumulates.

    Examples
    --------
    >>> candidates((8, 64, 56, 56), (64, 64, 3, 3), padding=1)
    ('im2col', 'winograd_f4', 'winograd_f2')
    >>> candidates((8, 3, 224, 224), (64, 3, 7, 7), stride=2, padding=3)
    ('im2col',)
    >>> candidates((1, 1, 3, 3), (1, 1, 3, 3))
    ('im2col', 'winograd_f4', 'winograd_f2', 'direct')
    """
    g, w_shape, groups = _layer(x_shape, w_shape, stride, padding, dilation, groups)
    return tuple(name for name in ALGORITHMS if _applies(name, w_shape, g, groups))


def conv_key(x_shape, w_shape, stride=1, padding=0, dilation=1, groups=1, dtype="float32",
             threads: int | None = None) -> ConvKey:
    """The :class:`ConvKey` under which "auto" records its choice for this convolution.

    ``dtype`` is the common dtype of input and weight; ``threads`` the BLAS threads (by
    default, as many as BLAS may use now).

    Examples
    --------
    >>> conv_key((8, 64, 56, 56), (64, 64, 3, 3), padding=1, threads=1)
    ConvKey(x_shape=(8, 64, 56, 56), w_shape=(64, 64, 3, 3), stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1, dtype='float32', threads=1)
    """
    g, w_shape, groups = _layer(x_shape, w_shape, stride, padding, dilation, groups)
    dt = np.dtype(dtype)  # a TypeError for what names no dtype
    if dt not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    threads = current_blas_threads() if threads is None else check_int(threads, "threads", 1, 2**16)
    return ConvKey((g.n, g.c, g.h, g.w), w_shape, (g.sh, g.sw), (g.ph, g.pw), (g.dh, g.dw), groups,
                   dt.name, threads)


def chosen_algorithm(x_shape, w_shape, stride=1, padding=0, dilation=1, groups=1, dtype="float32",
                     threads: int | None = None, cache: AlgorithmCache | None = None) -> str | None:
    """The algorithm "auto" chose for this convolution, or None if it has not run it yet.

    Examples
    --------
    >>> cache = AlgorithmCache()
    >>> x, w = np.ones((2, 3, 9, 9), np.float32), np.ones((4, 3, 3, 3), np.float32)
    >>> print(chosen_algorithm(x.shape, w.shape, padding=1, cache=cache))
    None
    >>> y = conv2d(x, w, padding=1, cache=cache)
    >>> chosen_algorithm(x.shape, w.shape, padding=1, cache=cache) in ALGORITHMS
    True
    """
    return _cache_arg(cache).get(conv_key(x_shape, w_shape, stride, padding, dilation, groups, dtype, threads))


def _run(name: str, x, weight, bias, groups: int, g: ConvGeometry) -> np.ndarray:
    if name == "im2col":
        return im2col._conv2d_im2col(x, weight, bias, groups, g)
    if name == "direct":
        return conv2d_direct(x, weight, bias, (g.sh, g.sw), (g.ph, g.pw), (g.dh, g.dw), groups)
    return _winograd(x, weight, bias, g.ph, g.pw, _TILES[name])


def run_algorithm(algorithm: str, x, weight, bias, groups: int, g: ConvGeometry, *,
                  cache: AlgorithmCache | None = None, verbose: bool = False) -> np.ndarray:
    """Run ``algorithm`` (or choose one: "auto") on arguments checked by ``conv2d``.

    The engine of :func:`course_lib.im2col.conv2d`, which calls it; use ``conv2d``.

    Examples
    --------
    >>> conv2d(np.ones((1, 1, 4, 4)), np.ones((1, 1, 3, 3)), algorithm="fft")
    Traceback (most recent call last):
    ...
    ValueError: algorithm must be one of ('auto', 'im2col', 'winograd_f4', 'winograd_f2', 'direct'), got 'fft'
    """
    algorithm = _algorithm_arg(algorithm, ("auto", *ALGORITHMS))
    if not isinstance(verbose, (bool, np.bool_)):
        raise TypeError(f"verbose must be True or False, got {verbose!r}")
    if algorithm == "auto":
        return _auto(x, weight, bias, groups, g, _cache_arg(cache), bool(verbose))
    problem = _problem(algorithm, weight.shape, g, groups)
    if problem:
        allowed = tuple(a for a in ALGORITHMS if not _problem(a, weight.shape, g, groups))
        raise ValueError(f"algorithm {algorithm!r} does not apply: {problem}; "
                         f"algorithm must be one of {('auto', *allowed)} here")
    return _run(algorithm, x, weight, bias, groups, g)


def _auto(x, weight, bias, groups: int, g: ConvGeometry, cache: AlgorithmCache, verbose: bool):
    key = ConvKey(x.shape, weight.shape, (g.sh, g.sw), (g.ph, g.pw), (g.dh, g.dw), groups, x.dtype.name,
                  current_blas_threads())
    choice = cache.get(key)
    if choice is not None:
        if verbose:
            print(f"conv2d(auto): {choice} (chosen before) for {key}")
        return _run(choice, x, weight, bias, groups, g)
    names = [name for name in ALGORITHMS if _applies(name, weight.shape, g, groups)]
    seconds, kept = dict.fromkeys(names, math.inf), (None, None)
    for rounds in range(1, 6):  # cuDNN's benchmark mode: run each candidate, keep the fastest
        for name in names:
            start = time.perf_counter()
            out = _run(name, x, weight, bias, groups, g)
            seconds[name] = min(seconds[name], time.perf_counter() - start)
            if min(seconds, key=seconds.get) == name:  # keep one result only (they can be large)
                kept = (name, out)
        best, *rest = sorted(seconds.values())  # twice (a first run pays for fresh memory), a
        if rounds >= (2 if not rest or rest[0] > 1.2 * best else 3) and best >= _RETIME_BELOW:
            break  # third time for a close race, 5 times if short (one timing is noise)
    choice = cache.record(key, seconds)
    if verbose:
        timed = ", ".join(f"{name} {t * 1e3:.3g} ms" for name, t in seconds.items())
        print(f"conv2d(auto): timed {timed} -> {choice} for {key}")
    return kept[1] if kept[0] == choice else _run(choice, x, weight, bias, groups, g)


# ------------------------------------------------------------------- counting work
def multiplication_count(algorithm: str, x_shape, w_shape, stride=1, padding=0, dilation=1,
                         groups=1) -> int:
    """Multiplications of one forward pass of ``algorithm`` (transforms not counted).

    "direct" and "im2col" do every multiply-accumulate of the definition
    (:func:`course_lib.cost.conv2d_macs`); Winograd F(m x m, 3 x 3) does (m + 2)^2 per
    output tile (ceil(H_out / m) x ceil(W_out / m) tiles per image, edge tiles counted
    whole) and per pair of input and output channels.

    Raises
    ------
    ValueError
        An unknown algorithm, or Winograd where it does not apply (naming why).

    Examples
    --------
    >>> multiplication_count("im2col", (1, 64, 4, 4), (128, 64, 3, 3))   # one 2 x 2 tile
    294912
    >>> multiplication_count("winograd_f2", (1, 64, 4, 4), (128, 64, 3, 3))
    131072
    """
    algorithm = _algorithm_arg(algorithm)
    g, w_shape, groups = _layer(x_shape, w_shape, stride, padding, dilation, groups)
    if algorithm not in _TILES:
        return conv2d_macs(g.c, w_shape[0], (g.kh, g.kw), (g.h, g.w), stride=(g.sh, g.sw),
                           padding=(g.ph, g.pw), dilation=(g.dh, g.dw), groups=groups, batch=g.n)
    problem = _problem(algorithm, w_shape, g, groups)
    if problem:
        raise ValueError(f"algorithm {algorithm!r} does not apply: {problem}")
    m = _TILES[algorithm]
    return g.n * -(-g.ho // m) * -(-g.wo // m) * (m + 2) ** 2 * g.c * w_shape[0]


def multiplication_counts(x_shape, w_shape, stride=1, padding=0, dilation=1, groups=1) -> dict[str, int | None]:
    """:func:`multiplication_count` of every algorithm; None where it does not apply.

    Examples
    --------
    >>> multiplication_counts((1, 8, 8, 8), (16, 8, 3, 3), stride=2, padding=1)
    {'im2col': 18432, 'winograd_f4': None, 'winograd_f2': None, 'direct': 18432}
    """
    g, w_shape, groups = _layer(x_shape, w_shape, stride, padding, dilation, groups)
    return {name: None if _problem(name, w_shape, g, groups) else
            multiplication_count(name, x_shape, w_shape, stride, padding, dilation, groups) for name in ALGORITHMS}


class ConvLayer(NamedTuple):
    """A convolution of a network: its name, how often it occurs, shapes and padding."""

    name: str
    count: int
    x_shape: tuple[int, int, int, int]
    w_shape: tuple[int, int, int, int]
    padding: int


#: ResNet-50's 3 x 3 convolutions, one row per stage: (stage, blocks, channels, H = W).
#: Each bottleneck block has one 3 x 3 convolution, C -> C channels, padding 1, stride 1
#: as in the paper (He et al. 2016, Table 1; torchvision's "v1.5" moves the stride 2 of the
#: first block of conv3_x to conv5_x onto its 3 x 3 convolution).
RESNET50_3X3 = (("conv2_x", 3, 64, 56), ("conv3_x", 4, 128, 28), ("conv4_x", 6, 256, 14), ("conv5_x", 3, 512, 7))


def resnet50_3x3_layers(batch: int = 1) -> list[ConvLayer]:
    """The 3 x 3 convolutions of ResNet-50 (:data:`RESNET50_3X3`) for a batch of images.

    Examples
    --------
    >>> layers = resnet50_3x3_layers()
    >>> layers[0]
    ConvLayer(name='conv2_x', count=3, x_shape=(1, 64, 56, 56), w_shape=(64, 64, 3, 3), padding=1)
    >>> sum(layer.count for layer in layers)
    16
    """
    batch = check_int(batch, "batch", 1, 2**20)
    return [ConvLayer(name, blocks, (batch, c, size, size), (c, c, 3, 3), 1)
            for name, blocks, c, size in RESNET50_3X3]


def float32_error(algorithm: str, *, batch: int = 2, channels: int = 64, image: int = 16, seed: int = 0) -> float:
    """Rounding error of ``algorithm`` in float32: max |y32 - y64| / max |y64|.

    A random 3 x 3 layer (``channels`` -> ``channels``, padding 1, He-scaled weights) is
    computed in float32 with ``algorithm`` and compared with the float64 im2col result,
    whose own error is a billion times smaller. ("direct" is the plain loops: keep the
    shapes tiny.)

    Examples
    --------
    >>> e2, e4 = float32_error("winograd_f2"), float32_error("winograd_f4")
    >>> e2 < e4 < 1e-4          # F(4 x 4, 3 x 3) loses more than F(2 x 2, 3 x 3)
    True
    """
    algorithm = _algorithm_arg(algorithm)
    batch, channels = check_int(batch, "batch", 1, 4096), check_int(channels, "channels", 1, 4096)
    image, seed = check_int(image, "image", 1, 4096), check_int(seed, "seed", 0)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, channels, image, image))
    w = rng.standard_normal((channels, channels, 3, 3)) * math.sqrt(2 / (9 * channels))
    ref = conv2d(x, w, padding=1, algorithm="im2col")
    got = conv2d(x.astype(np.float32), w.astype(np.float32), padding=1, algorithm=algorithm)
    return float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
