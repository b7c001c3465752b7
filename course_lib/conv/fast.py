"""The fast im2col engine: for speed, not for reading.

Read :mod:`course_lib.conv.im2col` for the ideas; this module computes the same numbers
faster, without compiled code. Each function equals a readable one:

* :func:`fast_im2col` is :func:`course_lib.conv.im2col.im2col`, bit for bit;
* :func:`fast_col2im` is :func:`course_lib.conv.im2col.col2im`, bit for bit (the overlaps
  are added in the same order);
* :func:`conv2d_im2col` is the "im2col" algorithm of :func:`course_lib.conv.algorithms.conv2d`:
  ``weight @ im2col(x)`` per group, plus the bias;
* :func:`conv2d_im2col_backward` is :func:`course_lib.conv.algorithms.conv2d_backward`:
  ``gy @ im2col(x)^T`` summed over samples, and ``col2im(weight^T @ gy)``.

(The tests check each equality.) The last two, and :class:`BatchPlan`, run on arguments
checked once by those entry points (with :func:`course_lib.conv.geometry.conv_arguments`);
:mod:`course_lib.conv.winograd` shares :class:`BatchPlan`.

How the copy is made fast: each output row of a window (``W_out`` neighbouring pixels) is
a contiguous run of bytes in a padded, column-phase-split copy of the input. Viewing
such runs as single numpy elements of a ``void`` dtype turns the whole im2col into one
strided copy of large elements per kernel column, so numpy's copy loop is not slowed
down by short image rows. The work is done in blocks of (sample, channel) planes sized
for the cache (at least one plane per block). :func:`conv2d_im2col` writes the columns of
a block of samples (as many as fit in a few MB, at least one) into one reused buffer and
multiplies it at once, so the big column matrix is never materialised; a big
convolution shares its blocks among threads (:class:`BatchPlan`).

Examples
--------
>>> from course_lib.conv.im2col import im2col
>>> x = np.random.default_rng(0).standard_normal((2, 3, 9, 8))
>>> bool((fast_im2col(x, 3, stride=2, padding=1) == im2col(x, 3, stride=2, padding=1)).all())
True
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

from ..timing import blas_threads, current_blas_threads
from .geometry import ConvGeometry, conv_columns, conv_input

__all__ = ["fast_col2im", "fast_im2col"]

#: Bytes of staging buffer (padded input planes) per block: about half an L2 cache.
_STAGE_BYTES = 1 << 19
#: Bytes of column matrix per block in conv2d / conv2d_backward (fits the L2/L3 caches).
_COLS_BYTES = 1 << 22
#: A large batch is cut into at least this many blocks (work for several threads).
_MIN_BLOCKS = 8
#: Below this many multiply-accumulates a convolution runs on the calling thread.
_PARALLEL_MACS = 50_000_000


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


def fast_im2col(x, kernel_size, stride=1, padding=0, dilation=1) -> np.ndarray:
    """:func:`course_lib.conv.im2col.im2col`, bit for bit, made fast (see the module's header).

    Examples
    --------
    >>> fast_im2col(np.arange(9).reshape(1, 1, 3, 3), 2)[0]
    array([[0, 1, 3, 4],
           [1, 2, 4, 5],
           [3, 4, 6, 7],
           [4, 5, 7, 8]])
    """
    x, g = conv_input(x, kernel_size, stride, padding, dilation)
    out = np.empty(g.cols_shape, dtype=x.dtype)
    if out.size:
        _im2col_engine(x, g, g.n * g.c).columns_into(x, out)
    return out


def fast_col2im(cols, input_shape, kernel_size, stride=1, padding=0, dilation=1) -> np.ndarray:
    """:func:`course_lib.conv.im2col.col2im`, bit for bit, made fast (blocks of planes sized for the cache).

    Examples
    --------
    >>> fast_col2im(np.ones((1, 4, 4), np.float32), (1, 1, 3, 3), 2)[0, 0]
    array([[1., 2., 1.],
           [2., 4., 2.],
           [1., 2., 1.]], dtype=float32)
    """
    cols, g = conv_columns(cols, input_shape, kernel_size, stride, padding, dilation)
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


# ------------------------------------------------------------------- blocks and threads
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


class BatchPlan:
    """How a convolution's batch is cut into blocks of samples and shared among threads.

    Parameters
    ----------
    n : int
        Samples in the batch.
    block : int
        Samples per block (from the shapes only, never from the thread count, so that
        any number of threads computes bitwise what one computes).
    macs : int
        Multiply-accumulates of the whole call: below ``_PARALLEL_MACS`` it runs on the
        calling thread.
    chunked : bool
        Hand out chunks (at most ``_MIN_BLOCKS``) of consecutive blocks instead of single
        blocks: a backward pass gives each chunk its own weight-gradient sum and adds the
        sums in chunk order.

    Attributes
    ----------
    blocks : list of (start, stop)
    units : list
        What the threads take in turn: the blocks, or ``(index, blocks)`` chunks.
    threads : int
        The BLAS thread count, for big enough work with at least two units; else 1.
    """

    def __init__(self, n: int, block: int, macs: int, *, chunked: bool = False):
        self.blocks = [(start, min(n, start + block)) for start in range(0, n, block)]
        if chunked:
            n_chunks = min(len(self.blocks), _MIN_BLOCKS)
            bounds = np.linspace(0, len(self.blocks), n_chunks + 1).round().astype(int)
            self.units: list = [(c, self.blocks[bounds[c] : bounds[c + 1]]) for c in range(n_chunks)]
        else:
            self.units = self.blocks
        self.threads = 1
        if len(self.units) >= 2 and macs >= _PARALLEL_MACS:
            self.threads = max(1, min(len(self.units), current_blas_threads()))

    def run(self, make_worker: Callable[[], Callable[[object], None]]) -> None:
        """Call ``work(unit)`` for every unit, on :attr:`threads` threads.

        ``make_worker()`` returns a ``work`` function with its own buffers (one per
        thread). With several threads, each GEMM runs on one BLAS thread and the threads
        take units in turn: the convolution is split along its batch dimension, so the
        copies of im2col run in parallel too, not only the GEMMs.
        """
        _run_units(self.units, self.threads, make_worker)


def _run_units(units: Sequence, threads: int, make_worker) -> None:
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


# ------------------------------------------------------------------- the im2col algorithm
def conv2d_im2col(x: np.ndarray, weight: np.ndarray, bias, groups: int, g: ConvGeometry) -> np.ndarray:
    """The "im2col" algorithm of :func:`course_lib.conv.algorithms.conv2d`, on its checked arguments.

    For each block of B samples, the columns go into one reused buffer of shape (B, K, L)
    and ``np.matmul`` multiplies the (C_out/groups, K/groups) weight matrix of each group
    with it, writing straight into the NCHW output (no transposes).

    Threads: see :class:`BatchPlan`. Splitting the batch does not change the result: it is
    bitwise the same as with one thread (BLAS itself may round differently when several
    of its threads share one GEMM, as for a small batch). Right after a multi-threaded
    BLAS call, OpenBLAS's idle threads busy-wait for a moment and slow the split down
    (``OPENBLAS_THREAD_TIMEOUT`` shortens that).
    """
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

    BatchPlan(g.n, block, out.size * k_g).run(make_worker)
    return out


def conv2d_im2col_backward(grad_out: np.ndarray, x: np.ndarray, weight: np.ndarray, groups: int,
                           g: ConvGeometry, input_grad: bool):
    """:func:`course_lib.conv.algorithms.conv2d_backward` on its checked arguments.

    Two GEMMs per block and group, like the forward pass, with the same blocks and
    threads (see :func:`conv2d_im2col`); the columns of ``x`` are recomputed, not stored.
    The weight gradients are summed over fixed chunks of blocks and these sums added in
    order, so splitting the batch among threads does not change the result.
    """
    c_out = weight.shape[0]
    L, cg_out, k_g = g.ho * g.wo, c_out // groups, g.rows // groups
    grad_x = np.empty(x.shape, dtype=x.dtype)
    grad_w = np.zeros((groups, cg_out, k_g), dtype=x.dtype)
    grad_b = grad_out.sum(axis=(0, 2, 3))
    if grad_out.size == 0 or x.size == 0:
        grad_x.fill(0)
        return grad_x if input_grad else None, grad_w.reshape(weight.shape), grad_b
    w_t = weight.reshape(groups, cg_out, k_g).transpose(0, 2, 1)  # (G, K_g, C_out_g)
    block = _sample_block(g, x.dtype.itemsize)
    plan = BatchPlan(g.n, block, 2 * grad_out.size * k_g, chunked=True)
    partial_w = np.zeros((len(plan.units), groups, cg_out, k_g), dtype=x.dtype)

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

    plan.run(make_worker)
    for part in partial_w:
        grad_w += part
    return grad_x if input_grad else None, grad_w.reshape(weight.shape), grad_b
