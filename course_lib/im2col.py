"""Convolution as matrix multiplication: im2col, col2im and a numpy conv2d (forward and backward).

A 2-D convolution (卷积) slides a small kernel over an image. ``im2col`` rewrites it
as ONE matrix multiplication (GEMM, 通用矩阵乘): every receptive field of the input
becomes a column of a matrix, the kernels become the rows of another, and the
convolution is their product, which a BLAS library runs on all cores with SIMD
instructions - the intra-operator parallelism (算子内并行) of section 6.1.3.

Conventions (the same as PyTorch): arrays are NCHW, a weight has shape
``(C_out, C_in / groups, kh, kw)``, the operation is a cross-correlation (the kernel is
not flipped), and ``kernel_size``, ``stride``, ``padding``, ``dilation`` accept an int
or an ``(h, w)`` pair. The output size along each axis is

    H_out = (H + 2 * padding - dilation * (kh - 1) - 1) // stride + 1.

``im2col(x)`` has shape ``(N, C * kh * kw, H_out * W_out)``, row ``c * kh * kw + i * kw + j``
holding input channel ``c`` at kernel offset ``(i, j)``: the layout of
``torch.nn.functional.unfold``, and ``col2im`` matches ``torch.nn.functional.fold``.

How the copy is made fast without compiled code: each output row of a window (``W_out``
neighbouring pixels) is a contiguous run of bytes in a padded, column-phase-split copy
of the input. Viewing such runs as single numpy elements of a ``void`` dtype turns the
whole im2col into one strided copy of large elements per kernel column, so numpy's
copy loop is not slowed down by short image rows. The work is done in blocks of
(sample, channel) planes sized for the cache (at least one plane per block).
:func:`conv2d` writes the columns of a block of samples (as many as fit in a few MB, at
least one) into one reused buffer and multiplies it at once, so the big column matrix
is never materialised. ``conv2d(..., algorithm=...)`` can also run Winograd's algorithm or
choose the fastest per shape, as cuDNN does (:mod:`course_lib.conv_algorithms`).

Examples
--------
>>> x = np.arange(2 * 3 * 3, dtype=np.float32).reshape(1, 2, 3, 3)
>>> im2col(x, 2).shape          # 2 channels x 2 x 2 kernel rows, 2 x 2 windows
(1, 8, 4)
>>> w = np.ones((1, 2, 2, 2), np.float32)
>>> conv2d(x, w)[0, 0]          # each output sums one 2 x 2 window in both channels
array([[52., 60.],
       [76., 84.]], dtype=float32)
"""

from __future__ import annotations

import numbers
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._validate import check_int
from .timing import blas_threads, current_blas_threads

__all__ = [
    "ConvGeometry",
    "gemm_sizes",
    "col2im",
    "conv2d",
    "conv2d_backward",
    "conv2d_direct",
    "conv_output_shape",
    "im2col",
]

#: Bytes of staging buffer (padded input planes) per block: about half an L2 cache.
_STAGE_BYTES = 1 << 19
#: Bytes of column matrix per block in conv2d / conv2d_backward (fits the L2/L3 caches).
_COLS_BYTES = 1 << 22
#: A large batch is cut into at least this many blocks (work for several threads).
_MIN_BLOCKS = 8
#: Below this many multiply-accumulates a convolution runs on the calling thread.
_PARALLEL_MACS = 50_000_000


# --------------------------------------------------------------------------- checks
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
        return self.h + 2 * self.ph

    @property
    def wp(self) -> int:
        return self.w + 2 * self.pw


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


# ------------------------------------------------------------------- im2col kernel
class _Im2col:
    """Writes the column matrix of blocks of (sample, channel) planes into a buffer.

    The staging buffer holds padded planes with their columns split by phase
    (column ``rw + stride_w * q`` of the padded plane is stored at ``[rw, :, q]``), so
    the ``W_out`` pixels a window row needs are always contiguous, whatever the stride
    and dilation. Its padding stays zero from one block to the next.
    """

    def __init__(self, g: ConvGeometry, dtype: np.dtype, planes_hint: int, direct: bool):
        self.g, self.dtype = g, np.dtype(dtype)
        self.item = self.dtype.itemsize
        self.q = -(-g.wp // g.sw)  # staged columns per phase
        self.run = np.dtype((np.void, g.wo * self.item))  # one window row as one element
        self.direct = direct  # stride_w 1, no padding, contiguous input: no staging needed
        plane_bytes = g.sw * g.hp * self.q * self.item
        self.block = max(1, min(planes_hint, _STAGE_BYTES // max(plane_bytes, 1)))
        self.stage = None if direct else np.zeros((self.block, g.sw, g.hp, self.q), self.dtype)
        # columns of the staged plane written from the input, per phase rw
        self.phases = []
        for rw in range(g.sw):
            q_lo = max(0, -(-(g.pw - rw) // g.sw))
            q_hi = min(self.q, (g.w - 1 + g.pw - rw) // g.sw + 1)
            if q_hi > q_lo:
                self.phases.append((rw, q_lo, q_hi, rw + g.sw * q_lo - g.pw))

    def _source(self, planes_arr: np.ndarray, count: int, j: int) -> np.ndarray:
        """View (count, kh, H_out) of window rows for kernel column j, as void elements."""
        g, it = self.g, self.item
        if self.direct:
            base, hp, q, rw, q0 = planes_arr, g.h, g.w, 0, j * g.dw
            plane_stride = g.h * g.w * it
        else:
            base, hp, q = self.stage, g.hp, self.q
            rw, q0 = (j * g.dw) % g.sw, (j * g.dw) // g.sw
            plane_stride = g.sw * hp * q * it
        offset = (rw * hp * q + q0) * it
        return np.ndarray(
            (count, g.kh, g.ho),
            dtype=self.run,
            buffer=base,
            offset=offset,
            strides=(plane_stride, g.dh * q * it, g.sh * q * it),
        )

    def block_into(self, planes_in: np.ndarray, out: np.ndarray) -> None:
        """Columns of ``planes_in`` (P, H, W) into ``out`` (P, kh * kw * H_out * W_out).

        ``out`` must be C-contiguous; P <= self.block when staging is used.
        """
        g = self.g
        count = planes_in.shape[0]
        if not self.direct:
            for rw, q_lo, q_hi, c0 in self.phases:
                self.stage[:count, rw, g.ph : g.ph + g.h, q_lo:q_hi] = planes_in[
                    :, :, c0 : c0 + g.sw * (q_hi - q_lo - 1) + 1 : g.sw
                ]
            source_base = None
        else:
            source_base = planes_in
        dst = out.view(self.run).reshape(count, g.kh, g.kw, g.ho)
        for j in range(g.kw):
            dst[:, :, j, :] = self._source(source_base, count, j)

    def columns_into(self, x: np.ndarray, out: np.ndarray) -> None:
        """im2col of the whole ``x`` (n, C, H, W) into ``out`` (n, C*kh*kw, L), blockwise."""
        g = self.g
        if out.size == 0:  # no channels or no samples: nothing to copy
            return
        planes = x.reshape(-1, g.h, g.w)
        flat = out.reshape(planes.shape[0], -1)
        step = planes.shape[0] if self.direct else self.block
        for start in range(0, planes.shape[0], step):
            stop = min(planes.shape[0], start + step)
            self.block_into(planes[start:stop], flat[start:stop])


def _im2col_engine(x: np.ndarray, g: ConvGeometry, planes_hint: int) -> _Im2col:
    direct = g.sw == 1 and g.ph == 0 and g.pw == 0 and x.flags.c_contiguous
    return _Im2col(g, x.dtype, planes_hint, direct)


# -------------------------------------------------------------------------- public
def im2col(x, kernel_size, stride=1, padding=0, dilation=1) -> np.ndarray:
    """Unfold every sliding window of ``x`` into a column (``torch.nn.functional.unfold``).

    Parameters
    ----------
    x : numpy.ndarray
        Input of shape (N, C, H, W), integer or floating point (the dtype is kept).
    kernel_size, stride, padding, dilation : int or (int, int)
        Window size (>= 1), step (>= 1), zero padding on each side (>= 0) and spacing
        between window taps (>= 1), as in a convolution.

    Returns
    -------
    numpy.ndarray
        Shape (N, C * kh * kw, H_out * W_out); row ``c * kh * kw + i * kw + j`` holds
        channel ``c`` at window offset ``(i, j)``, column ``oh * W_out + ow`` the window
        whose top-left tap is at ``(oh * stride - padding, ow * stride - padding)``.

    Raises
    ------
    ValueError
        ``x`` is not 4-d, has zero height or width, a size is out of range, or the
        (dilated) kernel is larger than the padded input. (An empty batch, N = 0, or
        no channels, C = 0, give an empty result.)
    TypeError
        Non-numeric dtype, or sizes that are not ints.

    Examples
    --------
    >>> x = np.arange(9).reshape(1, 1, 3, 3)
    >>> im2col(x, 2)[0]              # the four 2 x 2 windows as columns
    array([[0, 1, 3, 4],
           [1, 2, 4, 5],
           [3, 4, 6, 7],
           [4, 5, 7, 8]])
    >>> im2col(x, 3, padding=1).shape
    (1, 9, 9)
    """
    x = _array4(x, "x", floats=False)
    g = ConvGeometry.from_args(x.shape, kernel_size, stride, padding, dilation)
    out = np.empty(g.cols_shape, dtype=x.dtype)
    if out.size:
        _im2col_engine(x, g, g.n * g.c).columns_into(x, out)
    return out


def col2im(cols, input_shape, kernel_size, stride=1, padding=0, dilation=1) -> np.ndarray:
    """Fold columns back onto the image, summing overlaps (``torch.nn.functional.fold``).

    ``col2im`` is the adjoint (转置) of :func:`im2col`: for any ``x`` and ``y`` of the
    right shapes, ``<im2col(x), y> == <x, col2im(y, x.shape, ...)>``. It is what the
    backward pass of a convolution needs to turn gradients of columns into a gradient
    of the input. A pixel covered by several windows receives the sum of their values.

    Parameters
    ----------
    cols : numpy.ndarray
        Shape (N, C * kh * kw, H_out * W_out), as returned by :func:`im2col`.
    input_shape : tuple of 4 ints
        (N, C, H, W) of the image to rebuild.
    kernel_size, stride, padding, dilation : int or (int, int)
        As given to :func:`im2col`.

    Returns
    -------
    numpy.ndarray
        Shape ``input_shape``, the dtype of ``cols``.

    Examples
    --------
    >>> ones = np.ones((1, 4, 4), np.float32)          # 2 x 2 windows over a 3 x 3 image
    >>> col2im(ones, (1, 1, 3, 3), 2)[0, 0]             # how many windows cover each pixel
    array([[1., 2., 1.],
           [2., 4., 2.],
           [1., 2., 1.]], dtype=float32)
    """
    if not isinstance(cols, np.ndarray):
        cols = np.asarray(cols)
    if cols.dtype.kind not in "iuf":
        raise TypeError(f"cols must have an integer or floating-point dtype, got {cols.dtype}")
    g = ConvGeometry.from_args(input_shape, kernel_size, stride, padding, dilation)
    if cols.shape != g.cols_shape:
        raise ValueError(
            f"cols must have shape (N, C*kh*kw, H_out*W_out) = {g.cols_shape} for input shape "
            f"{tuple(input_shape)} and kernel {g.kh}x{g.kw}, got {cols.shape}"
        )
    out = np.empty((g.n, g.c, g.h, g.w), dtype=cols.dtype)
    if out.size:
        _col2im_into(cols, g, out)
    return out


def _col2im_into(cols: np.ndarray, g: ConvGeometry, out: np.ndarray) -> None:
    """Fold ``cols`` (n, C*kh*kw, L) into ``out`` (n, C, H, W), blockwise over planes."""
    planes = cols.shape[0] * g.c  # cols may hold a block of samples: g.n is not used
    if planes == 0:
        return
    windows = cols.reshape(planes, g.kh, g.kw, g.ho, g.wo)
    target = out.reshape(planes, g.h, g.w)
    plane_bytes = g.hp * g.wp * cols.dtype.itemsize
    block = max(1, min(planes, _STAGE_BYTES // max(plane_bytes, 1)))
    padded = np.empty((block, g.hp, g.wp), dtype=cols.dtype)
    h_span, w_span = g.sh * (g.ho - 1) + 1, g.sw * (g.wo - 1) + 1
    for start in range(0, planes, block):
        stop = min(planes, start + block)
        acc = padded[: stop - start]
        acc.fill(0)
        for i in range(g.kh):
            r0 = i * g.dh
            for j in range(g.kw):
                c0 = j * g.dw
                acc[:, r0 : r0 + h_span : g.sh, c0 : c0 + w_span : g.sw] += windows[start:stop, i, j]
        target[start:stop] = acc[:, g.ph : g.ph + g.h, g.pw : g.pw + g.w]


def _conv_args(x, weight, bias, stride, padding, dilation, groups):
    """Check conv2d's arguments; return arrays in the common dtype and the geometry."""
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


def _sample_block(g: ConvGeometry, itemsize: int) -> int:
    """Samples per block: as many as keep the block's column matrix within _COLS_BYTES,
    but at least one (a sample whose columns alone exceed _COLS_BYTES, as in the 56x56
    64-channel 3x3 and the 224x224 7x7-stem reference layers, is a block of its own),
    and a large batch has at least _MIN_BLOCKS blocks to share among threads.

    The block size depends on the shapes only (never on the thread count), so the
    batch-split threads compute bitwise what one thread computes.
    """
    per_sample = g.rows * g.ho * g.wo * itemsize
    by_cache = _COLS_BYTES // max(per_sample, 1)
    return max(1, min(g.n, by_cache, -(-g.n // _MIN_BLOCKS)))


_THREADED_CALL = threading.Lock()


def _threads_for(macs: int, n_blocks: int) -> int:
    """How many threads share the blocks: the BLAS thread count, for big enough work."""
    if n_blocks < 2 or macs < _PARALLEL_MACS:
        return 1
    return max(1, min(n_blocks, current_blas_threads()))


def _blocks(n: int, block: int) -> list[tuple[int, int]]:
    """(start, stop) of the blocks of samples."""
    return [(start, min(n, start + block)) for start in range(0, n, block)]


def _chunks(blocks: list) -> list[tuple[int, list]]:
    """(index, blocks) of at most _MIN_BLOCKS chunks of consecutive blocks.

    A backward pass gives each chunk its own weight-gradient sum and adds the sums in
    chunk order; the chunks depend on the shapes only, not on the number of threads.
    """
    n_chunks = min(len(blocks), _MIN_BLOCKS)
    bounds = np.linspace(0, len(blocks), n_chunks + 1).round().astype(int)
    return [(c, blocks[bounds[c] : bounds[c + 1]]) for c in range(n_chunks)]


def _grad_out_arg(grad_out, expected: tuple, dtype) -> np.ndarray:
    """Check a backward pass's grad_out against the output shape; contiguous, in ``dtype``."""
    if not isinstance(grad_out, np.ndarray):
        grad_out = np.asarray(grad_out)
    if grad_out.shape != expected:
        raise ValueError(f"grad_out must have the output shape {expected}, got {grad_out.shape}")
    if grad_out.dtype not in (np.float32, np.float64):
        raise TypeError(f"grad_out must have dtype float32 or float64, got {grad_out.dtype}")
    return np.ascontiguousarray(grad_out, dtype=dtype)


def _run_units(units: Sequence, threads: int, make_worker) -> None:
    """Call ``work(unit)`` for every unit of work, on ``threads`` threads.

    ``make_worker()`` returns a ``work`` function with its own buffers (one per
    thread). With several threads, each GEMM runs on one BLAS thread and the threads
    take units in turn: the convolution is split along its batch dimension, so the
    copies of im2col run in parallel too, not only the GEMMs.
    """
    if threads <= 1:
        work = make_worker()
        for unit in units:
            work(unit)
        return
    from concurrent.futures import ThreadPoolExecutor

    lock, pending = threading.Lock(), iter(units)

    def loop():
        work = make_worker()
        while True:
            with lock:
                unit = next(pending, None)
            if unit is None:
                return
            work(unit)

    # One threaded call at a time: the BLAS limit is process-wide, and two calls setting
    # and restoring it in an interleaved order would leave it at 1 thread.
    with _THREADED_CALL, blas_threads(1), ThreadPoolExecutor(threads) as pool:
        for future in [pool.submit(loop) for _ in range(threads)]:
            future.result()


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *,
           algorithm: str = "auto", cache=None, verbose: bool = False) -> np.ndarray:
    """2-D convolution (cross-correlation): im2col + one GEMM per group, or another algorithm.

    Parameters
    ----------
    x : numpy.ndarray
        Input (N, C_in, H, W), float32 or float64.
    weight : numpy.ndarray
        Kernels (C_out, C_in / groups, kh, kw).
    bias : numpy.ndarray, optional
        (C_out,), added to every output pixel of its channel.
    stride, padding, dilation : int or (int, int)
        As in ``torch.nn.functional.conv2d``.
    groups : int
        Split the channels into ``groups`` independent convolutions; ``groups = C_in``
        with ``C_out = C_in`` is a depthwise convolution.
    algorithm : {"auto", "im2col", "winograd_f2", "winograd_f4", "direct"}
        "auto" times the algorithms that apply once per shape and keeps the fastest, as
        cuDNN's benchmark mode does (:mod:`course_lib.conv_algorithms`); any other name
        forces that algorithm. Every algorithm gives the same result up to rounding.
    cache : course_lib.conv_algorithms.AlgorithmCache, optional
        Where "auto" keeps its choices (default: ``conv_algorithms.ALGORITHM_CACHE``).
    verbose : bool
        "auto" prints what it timed and chose.

    Returns
    -------
    numpy.ndarray
        (N, C_out, H_out, W_out) in the common dtype of ``x`` and ``weight`` (float64
        if one of them is float64).

    Notes
    -----
    The "im2col" algorithm processes the batch in blocks of B samples, as many as keep
    the block's column matrix within a few MB (``_COLS_BYTES``) but at least one, so a
    single sample with larger columns makes a block of its own: for each block,
    :func:`im2col` writes into one reused buffer of shape (B, K, L) and ``np.matmul`` multiplies the (C_out/groups, K/groups) weight matrix of each group
    with it, writing straight into the NCHW output (no transposes).

    Threads (intra-operator parallelism): conv2d uses as many threads as numpy's BLAS
    may use (set them with ``threadpoolctl.threadpool_limits``). A big convolution is
    split along its batch dimension: each thread runs im2col and the GEMM of whole
    blocks with BLAS limited to one thread meanwhile (the limit is process-wide during
    the call). Otherwise the blocks run one after the other and BLAS threads split
    each GEMM. Splitting the batch does not change the result: it is bitwise the same
    as with one thread (BLAS itself may round differently when several of its threads
    share one GEMM, as in the second case). Right after a multi-threaded BLAS call,
    OpenBLAS's idle threads busy-wait for a moment and slow the split down
    (``OPENBLAS_THREAD_TIMEOUT`` shortens that).

    Examples
    --------
    >>> x = np.zeros((1, 1, 3, 3)); x[0, 0, 1, 1] = 1.0          # one bright pixel
    >>> w = np.arange(9.0).reshape(1, 1, 3, 3)
    >>> conv2d(x, w, padding=1)[0, 0]   # cross-correlation: the kernel appears flipped
    array([[8., 7., 6.],
           [5., 4., 3.],
           [2., 1., 0.]])
    """
    x, weight, bias, groups, g = _conv_args(x, weight, bias, stride, padding, dilation, groups)
    if algorithm == "im2col":
        return _conv2d_im2col(x, weight, bias, groups, g)
    from .conv_algorithms import run_algorithm  # the other algorithms, and the choice among them

    return run_algorithm(algorithm, x, weight, bias, groups, g, cache=cache, verbose=verbose)


def _conv2d_im2col(x: np.ndarray, weight: np.ndarray, bias, groups: int, g: ConvGeometry) -> np.ndarray:
    """The "im2col" algorithm of :func:`conv2d`, on checked arguments."""
    c_out = weight.shape[0]
    out = np.empty((g.n, c_out, g.ho, g.wo), dtype=x.dtype)
    if out.size == 0:
        return out
    L, cg_out, k_g = g.ho * g.wo, c_out // groups, g.rows // groups
    w_groups = weight.reshape(groups, cg_out, k_g)
    b_groups = None if bias is None else bias.reshape(groups, cg_out, 1)
    block = _sample_block(g, x.dtype.itemsize)

    def make_worker():
        engine = _im2col_engine(x, g, block * g.c)
        cols = np.empty((block, g.rows, L), dtype=x.dtype)

        def work(unit):
            start, stop = unit
            b = stop - start
            engine.columns_into(x[start:stop], cols[:b])
            target = out[start:stop].reshape(b, groups, cg_out, L)
            np.matmul(w_groups, cols[:b].reshape(b, groups, k_g, L), out=target)
            if b_groups is not None:
                target += b_groups

        return work

    blocks = _blocks(g.n, block)
    _run_units(blocks, _threads_for(out.size * k_g, len(blocks)), make_worker)
    return out


def conv2d_backward(grad_out, x, weight, stride=1, padding=0, dilation=1, groups=1, *, input_grad=True):
    """Gradients of :func:`conv2d` with respect to its input, weight and bias.

    Parameters
    ----------
    grad_out : numpy.ndarray
        Gradient of the loss with respect to the output, (N, C_out, H_out, W_out).
    x, weight, stride, padding, dilation, groups
        The arguments of the forward call.
    input_grad : bool
        Whether to compute ``grad_x`` (a network's first layer needs none: False skips
        its GEMM and col2im, a third of the backward work, and returns None).

    Returns
    -------
    grad_x : numpy.ndarray or None
        (N, C_in, H, W) = col2im(W^T @ grad_out), per group; None if not ``input_grad``.
    grad_weight : numpy.ndarray
        (C_out, C_in / groups, kh, kw) = sum over samples of grad_out @ im2col(x)^T.
    grad_bias : numpy.ndarray
        (C_out,) = grad_out summed over samples and pixels.

    Notes
    -----
    Two GEMMs per block and group, like the forward pass, with the same blocks and
    threads (see :func:`conv2d`); the columns of ``x`` are recomputed, not stored. The
    weight gradients are summed over fixed groups of blocks and these sums added in
    order, so splitting the batch among threads does not change the result.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x, w = rng.standard_normal((2, 3, 5, 5)), rng.standard_normal((4, 3, 3, 3))
    >>> gx, gw, gb = conv2d_backward(np.ones((2, 4, 3, 3)), x, w)
    >>> gx.shape, gw.shape, gb.tolist()
    ((2, 3, 5, 5), (4, 3, 3, 3), [18.0, 18.0, 18.0, 18.0])
    >>> # d/dw of sum(conv2d(x, w)) is the sum of all windows of x:
    >>> bool(np.allclose(gw[0], im2col(x, 3).sum(axis=(0, 2)).reshape(3, 3, 3)))
    True
    """
    x, weight, _, groups, g = _conv_args(x, weight, None, stride, padding, dilation, groups)
    c_out = weight.shape[0]
    grad_out = _grad_out_arg(grad_out, (g.n, c_out, g.ho, g.wo), x.dtype)
    if not isinstance(input_grad, (bool, np.bool_)):
        raise TypeError(f"input_grad must be True or False, got {input_grad!r}")
    L, cg_out, k_g = g.ho * g.wo, c_out // groups, g.rows // groups
    grad_x = np.empty(x.shape, dtype=x.dtype)
    grad_w = np.zeros((groups, cg_out, k_g), dtype=x.dtype)
    grad_b = grad_out.sum(axis=(0, 2, 3))
    if grad_out.size == 0 or x.size == 0:
        grad_x.fill(0)
        return grad_x if input_grad else None, grad_w.reshape(weight.shape), grad_b
    w_t = weight.reshape(groups, cg_out, k_g).transpose(0, 2, 1)  # (G, K_g, C_out_g)
    block = _sample_block(g, x.dtype.itemsize)
    chunks = _chunks(_blocks(g.n, block))
    partial_w = np.zeros((len(chunks), groups, cg_out, k_g), dtype=x.dtype)

    def make_worker():
        engine = _im2col_engine(x, g, block * g.c)
        cols = np.empty((block, g.rows, L), dtype=x.dtype)
        products = np.empty((block, groups, cg_out, k_g), dtype=x.dtype)

        def work(unit):
            index, chunk_blocks = unit
            acc = partial_w[index]
            for start, stop in chunk_blocks:
                b = stop - start
                go = grad_out[start:stop].reshape(b, groups, cg_out, L)
                # weight gradient: sum over the samples of grad_out @ cols^T, per group
                engine.columns_into(x[start:stop], cols[:b])
                cols_g = cols[:b].reshape(b, groups, k_g, L)
                np.matmul(go, cols_g.transpose(0, 1, 3, 2), out=products[:b])
                for sample in products[:b]:
                    acc += sample
                if input_grad:  # col2im(W^T @ grad_out), reusing the column buffer
                    np.matmul(w_t, go, out=cols_g)
                    _col2im_into(cols[:b], g, grad_x[start:stop])

        return work

    _run_units(chunks, _threads_for(2 * grad_out.size * k_g, len(chunks)), make_worker)
    for part in partial_w:
        grad_w += part
    return grad_x if input_grad else None, grad_w.reshape(weight.shape), grad_b


def conv2d_direct(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> np.ndarray:
    """The same convolution as :func:`conv2d`, written as plain nested loops.

    One multiply-accumulate at a time, in Python, in double precision: the definition
    of the operation, used to teach it and as the reference in the tests. It is
    thousands of times slower than :func:`conv2d`; keep the shapes tiny.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> x, w = rng.standard_normal((1, 4, 6, 5)), rng.standard_normal((6, 2, 3, 2))
    >>> args = dict(stride=(2, 1), padding=1, dilation=(1, 2), groups=2)
    >>> bool(np.allclose(conv2d_direct(x, w, **args), conv2d(x, w, **args)))
    True
    """
    x, weight, bias, groups, g = _conv_args(x, weight, bias, stride, padding, dilation, groups)
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
