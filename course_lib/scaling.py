"""Scaling laws: Amdahl, Gustafson, parallel efficiency, Karp-Flatt and fits.

Pure math on numbers and numpy arrays; every function broadcasts its arguments and
returns a Python ``float`` when all arguments are scalars.

Notation (the source chapter's): ``p`` is the parallelisable fraction of the work,
``n`` the number of processors (devices) given to the parallel part. In Amdahl's
general form the second argument is ``s``, the speedup of the parallelisable part;
with ideal devices ``s = n``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ._validate import as_real, broadcast, check_array, check_int, check_range, scalar_or_array

__all__ = [
    "AMDAHL_LOSSES",
    "AmdahlFit",
    "amdahl",
    "amdahl_limit",
    "devices_needed",
    "efficiency",
    "fit_amdahl",
    "fit_gustafson",
    "gustafson",
    "gustafson_to_amdahl",
    "karp_flatt",
    "recurrent_parallel_fraction",
    "speedup",
]








def amdahl(p, n):
    r"""Amdahl's law: speedup of a fixed workload whose fraction ``p`` is parallel.

    .. math:: S(n) = \frac{1}{(1 - p) + p / n}

    Parameters
    ----------
    p : float or array_like
        Parallelisable fraction of the serial run time, in [0, 1].
    n : float or array_like
        Processors given to the parallel part (>= 1; ``numpy.inf`` gives the limit
        ``1 / (1 - p)``). In the general form this is ``s``, the speedup of the
        parallelisable part: ``amdahl(p, s)`` is the same function.

    Returns
    -------
    float or numpy.ndarray
        The speedup, broadcast over ``p`` and ``n``.

    Examples
    --------
    >>> amdahl(0.9, 10)
    5.2631578947368425
    >>> amdahl(0.9, float("inf"))
    10.000000000000002
    >>> amdahl([0.5, 0.99], 4).round(3)
    array([1.6  , 3.883])
    """
    p_arr, n_arr = broadcast(p=check_array(p, "p", 0, 1), n=check_array(n, "n", 1, high_open=False, allow_inf=True))
    with np.errstate(divide="ignore"):
        serial = 1.0 - p_arr
        parallel = np.where(np.isinf(n_arr), 0.0, p_arr / np.where(np.isinf(n_arr), 1.0, n_arr))
        result = 1.0 / (serial + parallel)
    return scalar_or_array(result, p, n)


def amdahl_limit(p):
    r"""The largest speedup Amdahl's law allows: :math:`\lim_{n\to\infty} S = 1/(1-p)`.

    Parameters
    ----------
    p : float or array_like
        Parallelisable fraction in [0, 1]; ``p = 1`` gives ``inf``.

    Examples
    --------
    >>> amdahl_limit(0.9)   # 10% serial work: at most 10x, not 9x
    10.000000000000002
    >>> amdahl_limit(1.0)
    inf
    """
    p_arr = check_array(p, "p", 0, 1)
    with np.errstate(divide="ignore"):
        result = 1.0 / (1.0 - p_arr)
    return scalar_or_array(result, p)


def gustafson(p, n):
    r"""Gustafson's law: scaled speedup when the workload grows with ``n``.

    .. math:: S(n) = (1 - p) + p \, n

    Here ``p`` is the parallel fraction of the *parallel* run's time (the problem
    grows so that each processor keeps a fixed amount of parallel work).

    Parameters
    ----------
    p : float or array_like
        Parallel fraction of the parallel run time, in [0, 1].
    n : float or array_like
        Number of processors, >= 1 (finite).

    Examples
    --------
    >>> gustafson(0.9, 10)
    9.1
    >>> gustafson(0.5, [1, 2, 4])
    array([1. , 1.5, 2.5])
    """
    p_arr, n_arr = broadcast(p=check_array(p, "p", 0, 1), n=check_array(n, "n", 1))
    return scalar_or_array((1.0 - p_arr) + p_arr * n_arr, p, n)


def gustafson_to_amdahl(p, n):
    r"""Amdahl's fraction of the scaled problem that Gustafson's ``p`` describes.

    Gustafson's ``p`` is the parallel share of the *parallel* run (on ``n`` devices).
    Run the same, scaled problem on one device and the parallel part takes ``n`` times
    longer, so its share of the serial run is

    .. math:: p_A = \frac{p\,n}{(1 - p) + p\,n}

    and ``amdahl(p_A, n) == gustafson(p, n)``: the two laws agree on one problem; they
    differ in which problem they hold fixed as ``n`` changes.

    Examples
    --------
    >>> pa = gustafson_to_amdahl(0.9, 64)
    >>> round(pa, 4), round(amdahl(pa, 64), 6) == round(gustafson(0.9, 64), 6)
    (0.9983, True)
    """
    p_arr, n_arr = broadcast(p=check_array(p, "p", 0, 1), n=check_array(n, "n", 1))
    scaled = p_arr * n_arr
    return scalar_or_array(scaled / ((1.0 - p_arr) + scaled), p, n)


def speedup(t_serial, t_parallel):
    r"""Measured speedup :math:`S = T_1 / T_N` from two run times.

    Parameters
    ----------
    t_serial : float or array_like
        Run time of the reference (serial, or smallest) configuration, > 0.
    t_parallel : float or array_like
        Run time(s) of the parallel configuration(s), > 0, same unit.

    Examples
    --------
    >>> speedup(4968.0, 101.2)   # LAMB: 16 chips -> 1,024 chips, minutes
    49.090909090909086
    >>> speedup(10.0, [10.0, 5.0, 2.5])
    array([1., 2., 4.])
    """
    t1 = check_array(t_serial, "t_serial", 0, low_open=True)
    tn = check_array(t_parallel, "t_parallel", 0, low_open=True)
    t1, tn = broadcast(t_serial=t1, t_parallel=tn)
    return scalar_or_array(t1 / tn, t_serial, t_parallel)


def efficiency(speedup, n):
    r"""Parallel efficiency :math:`\eta = S / n` (1 means every processor is fully used).

    Parameters
    ----------
    speedup : float or array_like
        Measured or modelled speedup, > 0.
    n : float or array_like
        Number of processors, >= 1 (finite).

    Examples
    --------
    >>> efficiency(6.0, 8)
    0.75
    """
    s_arr = check_array(speedup, "speedup", 0, low_open=True)
    s_arr, n_arr = broadcast(speedup=s_arr, n=check_array(n, "n", 1))
    return scalar_or_array(s_arr / n_arr, speedup, n)


def karp_flatt(speedup, n):
    r"""Karp-Flatt metric: the experimentally determined serial fraction.

    .. math:: e = \frac{1/S - 1/n}{1 - 1/n}

    For a program that follows Amdahl's law exactly, ``e = 1 - p`` for every ``n``;
    an ``e`` that grows with ``n`` points to overhead (communication, imbalance)
    rather than to inherently serial work.

    Parameters
    ----------
    speedup : float or array_like
        Measured speedup with ``n`` processors, > 0.
    n : float or array_like
        Number of processors, > 1 (finite).

    Examples
    --------
    >>> round(karp_flatt(amdahl(0.95, 16), 16), 12)
    0.05
    """
    s_arr = check_array(speedup, "speedup", 0, low_open=True)
    s_arr, n_arr = broadcast(
        speedup=s_arr, n=check_array(n, "n", 1, low_open=True)
    )
    result = (1.0 / s_arr - 1.0 / n_arr) / (1.0 - 1.0 / n_arr)
    return scalar_or_array(result, speedup, n)


#: The losses :func:`fit_amdahl` can minimise: the quantity whose squared errors it sums.
AMDAHL_LOSSES = ("time", "speedup")


class AmdahlFit(NamedTuple):
    """Result of :func:`fit_amdahl`."""

    p: float
    """Least-squares estimate of the parallel fraction, in [0, 1]."""
    stderr: float
    """Standard error of ``p`` (NaN with fewer than two points that have n > 1)."""
    n_points: int
    """Number of (n, speedup) pairs used."""
    loss: str = "time"
    """What the fit minimised the squared errors of: ``"time"`` (the normalised run time
    ``1/S``) or ``"speedup"`` (``S`` itself)."""


def fit_amdahl(n, speedup, *, loss: str = "time") -> AmdahlFit:
    r"""Estimate Amdahl's ``p`` from measured ``(n, speedup)`` pairs by least squares.

    A least-squares fit must say what it squares, and with Amdahl's law the choice matters:
    measured speedups rarely follow the law exactly, and the two losses weigh the points
    differently.

    ``loss="time"`` (the default) minimises the squared error of the normalised run time
    ``1/S``, in which the law is linear in ``p``:
    :math:`1/S - 1 = -p\,(1 - 1/n)`, so

    .. math:: \hat p = -\frac{\sum_i x_i y_i}{\sum_i x_i^2},\quad
              x_i = 1 - 1/n_i,\; y_i = 1/S_i - 1 .

    A relative error ``ε`` of a speedup is an error of about ``ε/S`` in run time, so the
    small runs (small ``S``) weigh the most.

    ``loss="speedup"`` minimises :math:`\sum_i \big(S_i - S(p; n_i)\big)^2`, the squared
    error of the speedup itself. The law is not linear in ``p`` there: the minimum is found
    on a grid over [0, 1] and refined by golden-section search (numpy only). A relative
    error ``ε`` is an error of ``ε S`` here, so the largest runs weigh the most.

    Both estimates equal the true ``p`` for data that follow the law exactly. The standard
    error is the least-squares one (for ``"speedup"``, of the model linearised at
    :math:`\hat p`, with :math:`\partial S/\partial p = x\,S^2`).

    Parameters
    ----------
    n : array_like
        Processor counts, >= 1 (at least one must be > 1).
    speedup : array_like
        Measured speedups, > 0, the same shape as ``n``.
    loss : {"time", "speedup"}
        The quantity whose squared errors are summed: the normalised run time ``1/S``
        (default) or the speedup ``S``.

    Returns
    -------
    AmdahlFit
        ``p`` in [0, 1] (a super-linear measurement would otherwise give p > 1), its
        standard error, the number of points and the loss.

    Examples
    --------
    >>> n = [1, 2, 4, 8, 16]
    >>> fit = fit_amdahl(n, amdahl(0.9, n))
    >>> round(fit.p, 12), round(fit.stderr, 12), fit.loss
    (0.9, 0.0, 'time')
    >>> round(fit_amdahl(n, amdahl(0.9, n), loss="speedup").p, 9)
    0.9
    >>> measured = [1.0, 1.7, 3.6, 7.0, 13.0]    # the first step is slow: a per-run overhead
    >>> [round(fit_amdahl(n, measured, loss=k).p, 4) for k in ("time", "speedup")]
    [0.9617, 0.9841]
    """
    if not isinstance(loss, str) or loss not in AMDAHL_LOSSES:
        raise ValueError(f"loss must be one of {', '.join(map(repr, AMDAHL_LOSSES))}, got {loss!r}")
    n_arr = check_array(n, "n", 1)
    s_arr = check_array(speedup, "speedup", 0, low_open=True)
    if n_arr.ndim != 1 or s_arr.ndim != 1:
        raise ValueError(
            f"n and speedup must be 1-D sequences, got shapes {n_arr.shape} and {s_arr.shape}"
        )
    if n_arr.shape != s_arr.shape:
        raise ValueError(
            f"n and speedup must have the same length, got {n_arr.size} and {s_arr.size}"
        )
    x = 1.0 - 1.0 / n_arr
    sxx = float(np.sum(x * x))
    if sxx == 0.0:
        raise ValueError("n must contain at least one processor count > 1 to fit p")
    informative = int(np.count_nonzero(x > 0))
    if loss == "time":
        y = 1.0 / s_arr - 1.0
        p_hat = -float(np.sum(x * y)) / sxx
        residuals, slope2 = y + p_hat * x, sxx  # d(1/S)/dp = -x (residuals of the unclipped line)
    else:
        p_hat = _minimise_on_unit_interval(lambda p: float(np.sum((s_arr - 1.0 / (1.0 - p * x)) ** 2)))
        model = 1.0 / (1.0 - p_hat * x)
        residuals, slope2 = s_arr - model, float(np.sum((x * model**2) ** 2))  # dS/dp = x S^2
    if informative >= 2:
        dof = informative - 1
        stderr = math.sqrt(float(np.sum(residuals[x > 0] ** 2)) / dof / slope2)
    else:
        stderr = math.nan
    return AmdahlFit(p=min(max(p_hat, 0.0), 1.0), stderr=stderr, n_points=int(n_arr.size), loss=loss)


def _minimise_on_unit_interval(f, grid: int = 2001, tol: float = 1e-13) -> float:
    """The ``p`` in [0, 1] where ``f`` is least: the best point of a grid, then a
    golden-section search between its neighbours (bounded, numpy only)."""
    ps = np.linspace(0.0, 1.0, grid)
    values = [f(p) for p in ps]
    k = int(np.argmin(values))
    a, b = ps[max(k - 1, 0)], ps[min(k + 1, grid - 1)]
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = f(c), f(d)
    while b - a > tol:
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = f(d)
    best = min(((f(p), p) for p in (a, b, ps[k])), key=lambda t: t[0])[1]
    return float(min(max(best, 0.0), 1.0))


def devices_needed(p, target_speedup):
    r"""Smallest whole number of devices whose Amdahl speedup reaches ``target_speedup``.

    Solves :math:`1/((1-p) + p/n) \ge S^*` for the smallest integer ``n``:
    :math:`n = \lceil p / (1/S^* - (1 - p)) \rceil`. A target at or above the limit
    ``1/(1-p)`` can never be reached and gives ``inf``; a target of 1 needs one device.

    Parameters
    ----------
    p : float or array_like
        Parallelisable fraction in [0, 1].
    target_speedup : float or array_like
        Desired speedup, >= 1.

    Returns
    -------
    int or float or numpy.ndarray
        An ``int`` for scalar input (``math.inf`` if unreachable), else a float array.

    Examples
    --------
    >>> devices_needed(0.9, 5)
    9
    >>> devices_needed(0.9, 10)
    inf
    >>> devices_needed(0.0, 1)
    1
    """
    p_arr = check_array(p, "p", 0, 1)
    t_arr = as_real(target_speedup, "target_speedup", allow_inf=True, allowed="in [1, inf]")
    check_range(t_arr, "target_speedup", 1.0, np.inf, high_open=False)
    p_arr, t_arr = broadcast(p=p_arr, target_speedup=t_arr)
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = 1.0 / t_arr - (1.0 - p_arr)
        # A target within round-off of the limit 1/(1-p) counts as the limit itself.
        reachable = denom > 1e-12 / t_arr
        exact = np.where(reachable, p_arr / np.where(reachable, denom, 1.0), np.inf)
    # Guard against round-off: ceil of a value a hair above an integer.
    finite = np.where(np.isinf(exact), 1.0, exact)
    n = np.where(np.isinf(exact), np.inf, np.maximum(1.0, np.ceil(finite - 1e-9 * finite)))
    reached = np.isinf(n) | (amdahl(p_arr, np.where(np.isinf(n), 1.0, n)) >= t_arr * (1 - 1e-12))
    n = np.where(reached, n, n + 1)
    # One device already gives speedup 1, even where p = 0 and nothing is parallel.
    n = np.where(t_arr <= 1.0, 1.0, n)
    if np.ndim(p) == 0 and np.ndim(target_speedup) == 0:
        value = float(n)
        return math.inf if math.isinf(value) else int(value)
    return n


def fit_gustafson(n, scaled_speedup) -> float:
    r"""Least-squares ``p`` of Gustafson's law :math:`S = (1 - p) + p N` from measurements.

    Written as :math:`S - 1 = p (N - 1)`, a line through the origin:
    :math:`\hat p = \sum (N_i - 1)(S_i - 1) / \sum (N_i - 1)^2`, clipped to [0, 1].

    Examples
    --------
    >>> fit_gustafson([1, 2, 4], [1.0, 1.9, 3.7])
    0.9
    """
    n_arr = as_real(n, "n")
    s_arr = as_real(scaled_speedup, "scaled_speedup")
    if n_arr.ndim != 1 or n_arr.shape != s_arr.shape:
        raise ValueError("n and scaled_speedup must be 1-D and of the same length")
    x = n_arr - 1.0
    if np.any(n_arr < 1):
        raise ValueError("n must be >= 1")
    sxx = float(np.sum(x * x))
    if sxx == 0.0:
        raise ValueError("n must contain at least one worker count > 1 to fit p")
    p = float(np.sum(x * (s_arr - 1.0))) / sxx
    return round(min(max(p, 0.0), 1.0), 12)


def recurrent_parallel_fraction(input_size: int, hidden_size: int) -> float:
    r"""Parallel fraction :math:`p` of an LSTM layer spread over its time steps (Amdahl's view).

    Every time step :math:`\xi` of an LSTM computes four gates from the step's input
    :math:`x_\xi` (:math:`4h \times d` weights) and from the previous hidden state
    (:math:`4h \times h` weights). The input products of all time steps are independent and
    run as one large GEMM; the recurrent products must wait for the step before, so across
    time they are serial. Counting multiply-accumulates per step (the element-wise gate
    arithmetic is small and left out),

    .. math:: p = \frac{4hd}{4hd + 4h^2} = \frac{d}{d + h},

    whatever the sequence length. A self-attention layer has no such chain: every position's
    projections and scores need only the previous layer's outputs, so along the sequence
    :math:`p = 1`. This is the source chapter's example of Amdahl's law guiding model design
    (6.1.2): attention replaced the LSTM in language models.

    Parameters
    ----------
    input_size : int
        :math:`d`, features of :math:`x_\xi`, >= 1.
    hidden_size : int
        Width of the hidden state, >= 1.

    Returns
    -------
    float
        :math:`p` in (0, 1).

    Examples
    --------
    >>> recurrent_parallel_fraction(1024, 1024)
    0.5
    >>> amdahl_limit(recurrent_parallel_fraction(1024, 1024))   # over time: at most 2x
    2.0
    """
    d = check_int(input_size, "input_size", 1)
    h = check_int(hidden_size, "hidden_size", 1)
    return d / (d + h)
