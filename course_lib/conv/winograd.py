"""Winograd's minimal filtering for 3 x 3 convolutions: first the idea, then the fast engine.

Winograd in brief: cut the output into m x m tiles, each computed from an (m + 2) x (m + 2)
input tile d. With the transform matrices ``B^T``, ``G``, ``A^T`` of F(m x m, 3 x 3), one
channel pair gives ``Y = A^T [(G g G^T) * (B^T d B)] A`` (* elementwise, g the kernel).
Summed over input channels, the elementwise stage is, for each of the (m + 2)^2 transform
points, ONE GEMM of the C_out x C_in transformed kernels by the C_in x tiles transformed
inputs: (m + 2)^2 multiplications per tile and channel pair instead of 9 m^2 (16 instead of
36 for F(2 x 2, 3 x 3), 36 instead of 144 for F(4 x 4, 3 x 3)). The transforms (additions
and multiplications by small constants, per tile and channel or per kernel) are not
counted by :func:`course_lib.conv.algorithms.multiplication_count`. The price is
precision, which :func:`course_lib.conv.algorithms.float32_error` measures.

The module holds two things, in this order:

* the idea: :func:`winograd_f2x2_3x3`, F(2 x 2, 3 x 3) in a dozen lines of numpy with
  Lavin & Gray's matrices written out (stride 1, no padding, no checks: the function to
  read), and :func:`winograd_matrices`, which derives the matrices of any F(m, r);
* the fast engine, for speed, not for reading: :func:`conv2d_winograd` and
  :func:`conv2d_winograd_backward`, F(2 x 2, 3 x 3) or F(4 x 4, 3 x 3) with padding, a
  bias and the gradients, in blocks of samples sized for the caches and shared among
  threads. They are the public entry points that check their arguments, and
  ``algorithm="winograd_f2"`` / ``"winograd_f4"`` of
  :func:`course_lib.conv.algorithms.conv2d` runs them. They compute
  :func:`course_lib.conv.im2col.conv2d_direct`'s convolution and the gradients of
  :func:`course_lib.conv.algorithms.conv2d_backward` up to rounding (the tests hold them
  against the plain loops, PyTorch, the readable function and each other).

Examples
--------
>>> from course_lib.conv.im2col import conv2d_direct
>>> rng = np.random.default_rng(0)
>>> x, w = rng.standard_normal((1, 2, 6, 6)), rng.standard_normal((3, 2, 3, 3))
>>> bool(np.allclose(winograd_f2x2_3x3(x, w), conv2d_direct(x, w)))
True
>>> bool(np.allclose(conv2d_winograd(x, w, padding=1, tile=4), conv2d_direct(x, w, padding=1)))
True
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from .._validate import check_int, check_type
from ..timing import blas_threads
from .fast import BatchPlan
from .geometry import ConvGeometry, backward_arguments, conv_arguments

__all__ = [
    "conv2d_winograd", "conv2d_winograd_backward", "winograd_f2x2_3x3", "winograd_matrices", "winograd_problem",
]


# ----------------------------------------------------------------------- the idea
def winograd_f2x2_3x3(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Winograd's F(2 x 2, 3 x 3): a 3 x 3 convolution, 16 multiplications per 2 x 2 outputs.

    The convolution of :func:`course_lib.conv.im2col.conv2d_direct` with stride 1 and no
    padding, computed tile by tile as Lavin & Gray (2016) describe it: each 2 x 2 output
    tile comes from a 4 x 4 input tile ``d`` as ``A^T [(G w G^T) * (B^T d B)] A``, summed
    over the input channels, where 16 elementwise multiplications replace the 36 of the
    definition. No argument checks, for reading: :func:`conv2d_winograd` is the entry point
    that checks its arguments (and pads, adds a bias, runs fast).

    Parameters
    ----------
    x : numpy.ndarray
        Input (N, C, H, W), floating point, H and W at least 3.
    w : numpy.ndarray
        Kernels (K, C, 3, 3).

    Returns
    -------
    numpy.ndarray
        (N, K, H - 2, W - 2), in float64. An odd H - 2 or W - 2 gets one row or column of
        zeros below or to the right of ``x``, which fills the last tiles; their outputs
        beyond H - 2 or W - 2 are cut off.

    Examples
    --------
    >>> x = np.arange(16.0).reshape(1, 1, 4, 4)   # one 4 x 4 tile
    >>> winograd_f2x2_3x3(x, np.ones((1, 1, 3, 3)))[0, 0]   # sums of the four 3 x 3 windows
    array([[45., 54.],
           [81., 90.]])
    """
    # Lavin & Gray's transforms of F(2, 3): B^T for the data, G for the kernel, A^T for the output
    bt = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]])
    g = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
    at = np.array([[1, 1, 1, 0], [0, 1, -1, -1]])
    n, h, wd = x.shape[0], x.shape[2] - 2, x.shape[3] - 2  # the output is h x wd
    # an odd output size: one row or column of zeros more, whose outputs are cut at the end
    x = np.pad(x, ((0, 0), (0, 0), (0, h % 2), (0, wd % 2)))
    # every kernel once: U = G w G^T, (K, C, 4, 4)
    u = g @ w @ g.T
    # the 4 x 4 input tiles, a new one every 2 pixels (they overlap by 2): (N, C, h/2, wd/2, 4, 4)
    d = sliding_window_view(x, (4, 4), axis=(2, 3))[:, :, ::2, ::2]
    # every tile once: V = B^T d B
    v = bt @ d @ bt.T
    # the elementwise product U * V, summed over the input channels c: 16 multiplications
    # per tile and channel pair, M (N, K, h/2, wd/2, 4, 4)
    m = np.einsum("kcij,nctsij->nktsij", u, v)
    # the output transform: a 2 x 2 output tile Y = A^T M A from each M
    y = at @ m @ at.T
    # the tiles side by side: (N, K, h/2, 2, wd/2, 2) -> (N, K, h, wd), cut to the output size
    th, tw = y.shape[2:4]
    return y.transpose(0, 1, 2, 4, 3, 5).reshape(n, w.shape[0], 2 * th, 2 * tw)[:, :, :h, :wd]


# ----------------------------------------------------------------------- the transform matrices
#: Interpolation points of the Cook-Toom construction (the last point is infinity).
_POINTS = (0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2))


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


# ======================================================================= the fast engine
# For speed, not for reading: the same convolution as winograd_f2x2_3x3 (and F(4 x 4, 3 x 3)),
# with padding and a bias, in blocks of samples sized for the caches and shared among threads.
#: Bytes of transformed input per block of samples (the block's buffers stay in the caches).
_WINO_BYTES = 1 << 21
#: A block has at least this many tiles, so that its GEMMs are not too thin ...
_MIN_TILES = 128
#: ... and a large batch is cut into at least this many blocks (work for several threads).
_MIN_BLOCKS = 8


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


def run_winograd(x: np.ndarray, weight: np.ndarray, bias, ph: int, pw: int, m: int) -> np.ndarray:
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
    plan = BatchPlan(n, block, out.size * c * 9)
    with blas_threads(1 if plan.threads > 1 else None):  # no idle BLAS threads spinning beside ours
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

    plan.run(make_worker)
    return out


# ----------------------------------------------------------------- the public functions
def winograd_problem(w_shape, stride, dilation, groups: int) -> str:
    """Why Winograd F(m x m, 3 x 3) does not apply ('' if it does), naming the parameter.

    Examples
    --------
    >>> winograd_problem((8, 8, 3, 3), (1, 1), (1, 1), 1)
    ''
    >>> winograd_problem((8, 8, 3, 3), (2, 2), (1, 1), 1)
    'stride must be 1 (the tiles are computed at stride 1), got (2, 2)'
    """
    if tuple(w_shape[2:]) != (3, 3):
        return f"weight must hold 3 x 3 kernels (C_out, C_in, 3, 3), got shape {tuple(w_shape)}"
    if tuple(stride) != (1, 1):
        return f"stride must be 1 (the tiles are computed at stride 1), got {tuple(stride)}"
    if tuple(dilation) != (1, 1):
        return f"dilation must be 1, got {tuple(dilation)}"
    if groups != 1:
        return f"groups must be 1, got {groups}"
    return ""


def _check_winograd(weight, groups: int, g: ConvGeometry, tile) -> None:
    if isinstance(tile, (bool, np.bool_)) or tile not in (2, 4):
        raise ValueError(f"tile must be one of (2, 4) (F(2 x 2, 3 x 3) or F(4 x 4, 3 x 3)), got {tile!r}")
    problem = winograd_problem(weight.shape, (g.sh, g.sw), (g.dh, g.dw), groups)
    if problem:
        raise ValueError(f"Winograd F(m x m, 3 x 3) does not apply: {problem}")


def conv2d_winograd(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *, tile: int = 2) -> np.ndarray:
    """3 x 3 convolution with stride 1 by Winograd's F(tile x tile, 3 x 3).

    Same arguments and result (up to rounding) as :func:`course_lib.conv.algorithms.conv2d`, which
    runs it as ``algorithm="winograd_f2"`` or ``"winograd_f4"``. A ``ValueError`` names
    what does not fit: kernels other than 3 x 3, stride, dilation or groups other than 1.

    Parameters
    ----------
    x, weight, bias, stride, padding, dilation, groups
        As for :func:`course_lib.conv.algorithms.conv2d`; weight (C_out, C_in, 3, 3).
    tile : {2, 4}
        m, the output tile: F(2 x 2, 3 x 3) does 16 multiplications per tile and channel
        pair (the definition: 36), F(4 x 4, 3 x 3) does 36 (the definition: 144).

    Notes
    -----
    The batch runs in blocks of samples sized for the caches, shared among the BLAS
    threads as in ``conv2d`` (bitwise the same result with any number of threads).
    Rounding in float32 relative to the largest output
    (:func:`course_lib.conv.algorithms.float32_error`, 64 channels): about 3e-7 for
    F(2 x 2, 3 x 3), 3e-6 for F(4 x 4, 3 x 3), 5e-7 for im2col.

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
    x, weight, bias, groups, g = conv_arguments(x, weight, bias, stride, padding, dilation, groups)
    _check_winograd(weight, groups, g, tile)
    return run_winograd(x, weight, bias, g.ph, g.pw, int(tile))


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
        ``(grad_x, grad_weight, grad_bias)`` as :func:`course_lib.conv.algorithms.conv2d_backward`.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x, w = rng.standard_normal((2, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3))
    >>> gy = rng.standard_normal((2, 4, 6, 6))
    >>> from course_lib.conv.algorithms import conv2d_backward
    >>> all(np.allclose(a, b) for a, b in zip(conv2d_winograd_backward(gy, x, w, padding=1),
    ...                                       conv2d_backward(gy, x, w, padding=1)))
    True
    """
    grad_out, x, weight, groups, g, input_grad = backward_arguments(
        grad_out, x, weight, stride, padding, dilation, groups, input_grad)
    _check_winograd(weight, groups, g, tile)
    k, m = weight.shape[0], int(tile)
    grad_b, grad_x = grad_out.sum(axis=(0, 2, 3)), None
    if input_grad:
        turned = np.ascontiguousarray(weight[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
        grad_x = run_winograd(grad_out, turned, None, 2 - g.ph, 2 - g.pw, m)
    a = m + 2
    grad_u = np.zeros((a * a, k, g.c), dtype=x.dtype)
    if grad_out.size and x.size:
        block = _block(g.n, -(-g.ho // m) * -(-g.wo // m), max(g.c, k), a, x.dtype.itemsize)
        plan = BatchPlan(g.n, block, 2 * grad_out.size * g.c * 9, chunked=True)
        partial = np.zeros((len(plan.units), a * a, k, g.c), dtype=x.dtype)

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

        plan.run(make_worker)
        for part in partial:  # in chunk order: the same sum with any number of threads
            grad_u += part
    return grad_x, _filter_transform_adjoint(grad_u, m), grad_b


