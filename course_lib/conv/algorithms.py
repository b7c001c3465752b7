"""The course's convolution: one operation, several algorithms, a cuDNN-style choice among them.

For speed, not for reading, like :mod:`course_lib.conv.fast` and the engine of
:mod:`course_lib.conv.winograd`: :mod:`course_lib.conv.im2col` holds the idea. :func:`conv2d`
and :func:`conv2d_backward` are the entry points (the course's CNN calls them): they check
the arguments once (:mod:`course_lib.conv.geometry`) and run an algorithm. Every algorithm
computes what the readable module defines - ``weight @ im2col(x)`` per group, the loops of
:func:`~course_lib.conv.im2col.conv2d_direct` - up to rounding (the tests hold each against those).

PyTorch on an NVIDIA GPU hands a convolution to cuDNN, which knows several algorithms for
it (implicit GEMM / im2col, FFT, Winograd, direct) and, with
``torch.backends.cudnn.benchmark = True``, times them once per shape and keeps the
fastest. The course's numpy convolution does the same with these algorithms:

* ``"direct"``: :func:`course_lib.conv.im2col.conv2d_direct`, the definition as Python loops:
  hopeless on a real layer, but the fastest on a handful of multiplications, where
  numpy's fixed cost per call dominates;
* ``"im2col"``: columns + one GEMM (:func:`course_lib.conv.fast.conv2d_im2col`), every
  multiplication of the definition at the speed of BLAS;
* ``"winograd_f2"``, ``"winograd_f4"``: Winograd's minimal filtering F(m x m, 3 x 3),
  m = 2 or 4 (Lavin & Gray 2016), for 3 x 3 kernels with stride 1.

``conv2d(x, w, ..., algorithm="auto")`` (the default) times the algorithms that apply
once per shape, dtype and thread count, keeps the fastest in an :class:`AlgorithmCache`
(``ALGORITHM_CACHE`` unless you pass your own) and reuses it: deterministic given the
cache. A fresh process may choose differently, so code that must be bitwise reproducible
across processes (the course's CNN training) names its algorithm.

Examples
--------
>>> rng = np.random.default_rng(0)
>>> x = rng.standard_normal((2, 8, 12, 12))
>>> w = rng.standard_normal((16, 8, 3, 3))
>>> y = conv2d(x, w, padding=1, algorithm="winograd_f4")
>>> bool(np.allclose(y, conv2d(x, w, padding=1, algorithm="im2col")))
True
>>> multiplication_count("winograd_f2", (1, 64, 56, 56), (64, 64, 3, 3), padding=1) / \\
...     multiplication_count("im2col", (1, 64, 56, 56), (64, 64, 3, 3), padding=1)
0.4444444444444444
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from .._validate import check_int, check_type
from ..cost import conv2d_macs
from ..timing import current_blas_threads
from .fast import conv2d_im2col, conv2d_im2col_backward
from .geometry import ConvGeometry, backward_arguments, conv_arguments, conv_shapes
from .im2col import conv2d_direct
from .winograd import run_winograd, winograd_problem

__all__ = [
    "ALGORITHMS", "ALGORITHM_CACHE", "AlgorithmCache", "ConvKey", "ConvLayer", "DIRECT_MAX_MACS",
    "RESNET50_3X3", "candidates", "chosen_algorithm", "conv2d", "conv2d_backward", "conv_key", "float32_error",
    "multiplication_count", "multiplication_counts", "resnet50_3x3_layers",
]

#: The algorithms ``conv2d(algorithm=...)`` knows, in the order that breaks ties in timings.
ALGORITHMS = ("im2col", "winograd_f4", "winograd_f2", "direct")
#: Output tile m of each Winograd algorithm F(m x m, 3 x 3).
_TILES = {"winograd_f2": 2, "winograd_f4": 4}
#: "auto" times the plain loops only up to this many multiply-accumulates (beyond, they lose).
DIRECT_MAX_MACS = 256
#: "auto" times each candidate twice (3 x in a close race), 5 x when the fastest takes less.
_RETIME_BELOW = 2e-3


# ----------------------------------------------------------------- the entry points
def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *,
           algorithm: str = "auto", cache=None, verbose: bool = False) -> np.ndarray:
    """2-D convolution (cross-correlation): im2col + one GEMM per group, or another algorithm.

    The idea, for one group (``K = C_in * kh * kw``, ``L = H_out * W_out``)::

        cols = im2col(x, (kh, kw), stride, padding, dilation)      # (N, K, L)
        out = weight.reshape(C_out, K) @ cols + bias[:, None]       # (N, C_out, L)

    With groups, the channels split into ``groups`` such products. The arguments are
    checked here, once; the work runs in :mod:`course_lib.conv.fast` (the "im2col"
    algorithm: blocks of samples sized for the caches, threads) or
    :mod:`course_lib.conv.winograd`, as ``algorithm`` says or "auto" chooses.

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
        cuDNN's benchmark mode does (:mod:`course_lib.conv.algorithms`); any other name
        forces that algorithm. Every algorithm gives the same result up to rounding.
    cache : course_lib.conv.algorithms.AlgorithmCache, optional
        Where "auto" keeps its choices (default: ``ALGORITHM_CACHE``).
    verbose : bool
        "auto" prints what it timed and chose.

    Returns
    -------
    numpy.ndarray
        (N, C_out, H_out, W_out) in the common dtype of ``x`` and ``weight`` (float64
        if one of them is float64).

    Notes
    -----
    The "im2col" algorithm (:func:`course_lib.conv.fast.conv2d_im2col`) processes the
    batch in blocks of samples, as many as keep the block's column matrix within a few
    MB but at least one: the big column matrix is never materialised. Threads
    (intra-operator parallelism): a big convolution is split along its batch among as
    many threads as numpy's BLAS may use (``threadpoolctl.threadpool_limits`` sets
    them), each running im2col and the GEMMs of whole blocks; the result is bitwise the
    same as with one thread.

    Examples
    --------
    >>> x = np.zeros((1, 1, 3, 3)); x[0, 0, 1, 1] = 1.0          # one bright pixel
    >>> w = np.arange(9.0).reshape(1, 1, 3, 3)
    >>> conv2d(x, w, padding=1)[0, 0]   # cross-correlation: the kernel appears flipped
    array([[8., 7., 6.],
           [5., 4., 3.],
           [2., 1., 0.]])
    """
    return _run_algorithm(algorithm, *conv_arguments(x, weight, bias, stride, padding, dilation, groups),
                          cache=cache, verbose=verbose)


def conv2d_backward(grad_out, x, weight, stride=1, padding=0, dilation=1, groups=1, *, input_grad=True):
    """Gradients of :func:`conv2d` with respect to its input, weight and bias.

    The idea, for one group: with ``cols = im2col(x)`` and ``gy = grad_out`` as (N, C_out, L),
    ``grad_weight = sum over samples of gy @ cols^T`` and
    ``grad_x = col2im(weight^T @ gy)``. The work runs in :mod:`course_lib.conv.fast`
    (:func:`~course_lib.conv.fast.conv2d_im2col_backward`).

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

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x, w = rng.standard_normal((2, 3, 5, 5)), rng.standard_normal((4, 3, 3, 3))
    >>> gx, gw, gb = conv2d_backward(np.ones((2, 4, 3, 3)), x, w)
    >>> gx.shape, gw.shape, gb.tolist()
    ((2, 3, 5, 5), (4, 3, 3, 3), [18.0, 18.0, 18.0, 18.0])
    >>> # d/dw of sum(conv2d(x, w)) is the sum of all windows of x:
    >>> from course_lib.conv.im2col import im2col
    >>> bool(np.allclose(gw[0], im2col(x, 3).sum(axis=(0, 2)).reshape(3, 3, 3)))
    True
    """
    return conv2d_im2col_backward(*backward_arguments(grad_out, x, weight, stride, padding, dilation, groups,
                                                      input_grad))


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


def _algorithm_arg(algorithm, allowed: tuple[str, ...] = ALGORITHMS) -> str:
    if not isinstance(algorithm, str) or algorithm not in allowed:
        kind = ValueError if isinstance(algorithm, str) else TypeError
        raise kind(f"algorithm must be one of {allowed}, got {algorithm!r}")
    return algorithm


def _problem(name: str, w_shape, g: ConvGeometry, groups: int) -> str:
    """Why algorithm ``name`` does not apply to this convolution ('' if it does)."""
    return winograd_problem(w_shape, (g.sh, g.sw), (g.dh, g.dw), groups) if name in _TILES else ""


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
    g, w_shape, groups = conv_shapes(x_shape, w_shape, stride, padding, dilation, groups)
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
    g, w_shape, groups = conv_shapes(x_shape, w_shape, stride, padding, dilation, groups)
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
        return conv2d_im2col(x, weight, bias, groups, g)
    if name == "direct":
        return conv2d_direct(x, weight, bias, (g.sh, g.sw), (g.ph, g.pw), (g.dh, g.dw), groups)
    return run_winograd(x, weight, bias, g.ph, g.pw, _TILES[name])


def _run_algorithm(algorithm: str, x, weight, bias, groups: int, g: ConvGeometry, *,
                  cache: AlgorithmCache | None = None, verbose: bool = False) -> np.ndarray:
    """Run ``algorithm`` (or choose one: "auto") on arguments checked by ``conv2d``.

    The engine of :func:`conv2d`, which calls it.

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
    g, w_shape, groups = conv_shapes(x_shape, w_shape, stride, padding, dilation, groups)
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
    g, w_shape, groups = conv_shapes(x_shape, w_shape, stride, padding, dilation, groups)
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
