r"""Synchronous vs asynchronous data parallelism: stale gradients (陈旧梯度), and what
synchronous training must also synchronise: batch-norm statistics (SyncBN).

**Stale gradients.** In the asynchronous parameter-server setting (the source's section
6.2.1) each worker pulls the parameters, computes a gradient and pushes it; the server
applies it at once, without waiting for the others. By the time a gradient arrives, the
other workers' updates have moved the parameters: with :math:`N` workers at equal speed
a gradient is about :math:`\delta = N - 1` updates old (the staleness :math:`\delta`; the
issue's and many papers' :math:`k`, a symbol the course gives to ZeRO's bytes per parameter).
:func:`train_stale` runs this on the running example in one process, deterministically: the
update of step :math:`u` applies the gradient, on step :math:`u`'s batch, at the weights of
step :math:`u - \delta`,

.. math:: w^{(u+1)} = w^{(u)} - \gamma\, g\big(w^{(u-\delta)}\big)

(:math:`w^{(u-\delta)} = w^{(0)}` for :math:`u < \delta`; :math:`\delta = 0` is plain SGD, bit
for bit :func:`course_lib.parallel.train.reference.train_serial`). :func:`largest_stable_lr` searches a grid
of learning rates for the largest that still converges: staler gradients need smaller
steps (the delayed-SGD analyses bound the step size by about :math:`1/\delta`: Recht et al.,
"Hogwild!", NeurIPS 2011; Lian et al., "Asynchronous parallel stochastic gradient for
nonconvex optimization", NeurIPS 2015). **Bounded staleness** (有界陈旧, the stale
synchronous parallel model: Ho et al., "More effective distributed ML via a stale
synchronous parallel parameter server", NeurIPS 2013) lets a worker run ahead of the
slowest by at most :math:`\delta_{\max}` steps: :math:`\delta \le \delta_{\max}`, and
:math:`\delta_{\max} = 0` is synchronous training. Today's large-scale training is synchronous (an all-reduce every step): on
uniform accelerators with fast links the wait is short, and synchronous SGD keeps the
maths of the one-device run, its learning rate and its reproducibility.

**Batch normalisation under data parallelism.** A batch-norm layer normalises with the
mean and variance of its batch. Under data parallelism each worker sees only its
shard, and its shard's statistics (:func:`shard_statistics`) differ from the global
batch's. SyncBN (同步批归一化) all-reduces the count, the sum and the sum of squares
(:func:`sync_batchnorm_statistics`) and gets the global batch's statistics exactly.

Examples
--------
>>> from course_lib.models import MLP
>>> rng = np.random.default_rng(0)
>>> x = rng.random((64, 8), dtype=np.float32); y = rng.integers(0, 3, 64)
>>> fresh = train_stale(MLP((8, 16, 3)), x, y, staleness=0, batch_size=16, steps=20, lr=0.5)
>>> stale = train_stale(MLP((8, 16, 3)), x, y, staleness=4, batch_size=16, steps=20, lr=0.5)
>>> bool(fresh.loss[-5:].mean() < stale.loss[-5:].mean())
True
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Sequence

import numpy as np

from ._validate import check_int, check_positive, check_sequence, check_type
from .models import MLP, TrainResult, softmax_cross_entropy

__all__ = ["converged", "largest_stable_lr", "shard_statistics", "sync_batchnorm_statistics", "train_stale"]


def stale_loop(model: MLP, x, y, batches: Iterable[np.ndarray], params: np.ndarray, delay: int, lr,
               stop_above: float = np.inf) -> list[float]:
    """SGD whose update at each step uses the gradient computed at the parameters of
    ``delay`` steps before (the lecture's pseudo-code; :func:`train_stale` checks and times it).

    Changes ``params`` in place; returns the loss of every step's batch at the current
    parameters (before its update). Stops once a loss is not finite or above ``stop_above``.
    """
    seen = deque([params.copy()], maxlen=delay + 1)  # the parameters of the last delay + 1 steps
    losses = []
    for idx in batches:
        loss, grad = model.loss_and_grad(seen[0], x[idx], y[idx])  # at the weights delay steps ago
        if delay > 0:
            loss = softmax_cross_entropy(model.forward(params, x[idx])[0], y[idx])[0]
        losses.append(float(loss))
        if not loss <= stop_above:  # NaN, infinite or too large: diverged
            break
        grad *= lr
        params -= grad
        seen.append(params.copy())
    return losses


def train_stale(model: MLP, x: np.ndarray, y: np.ndarray, *, staleness: int, batch_size: int = 64,
                steps: int = 200, lr: float = 0.5, seed: int = 0, params: np.ndarray | None = None,
                stop_above: float | None = None, blas_threads: int | None = 1) -> TrainResult:
    r"""Mini-batch SGD with gradients ``staleness`` steps old, in this process.

    Parameters
    ----------
    model : MLP
        The running example's layout (e.g. ``MLP((64, 64, 10))`` on the digits).
    x, y : numpy.ndarray
        Inputs and labels.
    staleness : int
        :math:`\delta \ge 0`, the age of every gradient in steps (0: synchronous SGD).
    batch_size, steps, lr, seed, params, blas_threads
        As :func:`course_lib.parallel.train.reference.train_serial` takes them (the same batches).
    stop_above : float, optional
        Stop once the loss exceeds this (a diverging run); the remaining losses are NaN.
        Default: never.

    Returns
    -------
    course_lib.models.TrainResult
        ``loss``: the mean loss of every step's batch at the current parameters;
        ``backend == "stale"``; ``extra["staleness"]``.

    Examples
    --------
    >>> from course_lib.parallel.train.reference import train_serial
    >>> m = MLP((4, 3, 2)); x = np.random.default_rng(0).random((8, 4), np.float32); y = np.arange(8) % 2
    >>> a = train_stale(m, x, y, staleness=0, batch_size=4, steps=3, lr=0.1)
    >>> bool(np.array_equal(a.params, train_serial(m, x, y, batch_size=4, steps=3, lr=0.1).params))
    True
    """
    from .parallel.engine.job import check_job  # the trainers' one check
    from .timing import blas_threads as _blas

    t_call = time.perf_counter()
    k = check_int(staleness, "staleness", 0, 10**6)
    stop = np.inf if stop_above is None else check_positive(stop_above, "stop_above")
    x, y, params, job = check_job(model, x, y, batch_size=batch_size, steps=steps, lr=lr, seed=seed, params=params,
                                  blas_threads=blas_threads)
    with _blas(job.blas_threads):
        losses = stale_loop(model, x, y, job.batches(), params, k, model.dtype.type(job.lr), stop)
    loss = np.full(job.steps, np.nan)
    loss[: len(losses)] = losses
    wall = time.perf_counter() - t_call
    return TrainResult.one_process(params, loss, np.full(job.steps, wall / job.steps), "stale",
                                   batch_size=job.batch_size, blas_threads=job.blas_threads, wall_time=wall,
                                   extra={"staleness": k})


def converged(losses, factor: float = 0.5) -> bool:
    """Whether a run converged: every loss finite, and the mean of the last tenth of the
    steps below ``factor`` times the first loss.

    Examples
    --------
    >>> converged([2.3, 1.5, 0.9, 0.6, 0.5, 0.4, 0.4, 0.3, 0.3, 0.3])
    True
    >>> converged([2.3, 2.3, 2.3, 2.3]), converged([2.3, 0.5, float("nan")])
    (False, False)
    """
    items = _at_least(losses, "losses", 2, (int, float, np.integer, np.floating), "a number")
    arr = np.asarray(items, dtype=float)
    factor = check_positive(factor, "factor")
    tail = arr[-max(1, arr.size // 10):]
    return bool(np.all(np.isfinite(arr)) and tail.mean() < factor * arr[0])


def largest_stable_lr(model: MLP, x: np.ndarray, y: np.ndarray, *, staleness: int, lrs: Sequence[float],
                      batch_size: int = 64, steps: int = 200, seed: int = 0, factor: float = 0.5) -> float:
    """The largest learning rate of ``lrs`` at which :func:`train_stale` converges
    (:func:`converged`); 0.0 if none does.

    A run that climbs above 10 times its first loss is stopped there (it diverged).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.random((64, 8), dtype=np.float32); y = (x[:, 0] > 0.5).astype(int)
    >>> kw = dict(lrs=[0.25, 1, 4, 16], batch_size=16, steps=40)
    >>> largest_stable_lr(MLP((8, 16, 2)), x, y, staleness=0, **kw) >= largest_stable_lr(MLP((8, 16, 2)), x, y, staleness=8, **kw)
    True
    """
    grid = sorted(check_positive(lr, "lrs") for lr in _at_least(lrs, "lrs", 1))
    for lr in reversed(grid):
        first = train_stale(model, x, y, staleness=staleness, batch_size=batch_size, steps=1, lr=lr, seed=seed)
        run = train_stale(model, x, y, staleness=staleness, batch_size=batch_size, steps=steps, lr=lr, seed=seed,
                          stop_above=10.0 * float(first.loss[0]))
        if converged(run.loss, factor):
            return lr
    return 0.0


def shard_statistics(batch: np.ndarray, workers: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and variance of each worker's shard of ``batch`` (what plain batch
    norm uses under data parallelism): arrays ``(workers, features)``.

    Examples
    --------
    >>> means, variances = shard_statistics(np.array([[0.0], [2.0], [10.0], [12.0]]), 2)
    >>> means.ravel().tolist(), variances.ravel().tolist()    # the global batch: mean 6, variance 26
    ([1.0, 11.0], [1.0, 1.0])
    """
    from .parallel.partition import shard_bounds

    batch = _batch(batch)
    workers = check_int(workers, "workers", 1, batch.shape[0])
    shards = [batch[lo:hi] for lo, hi in shard_bounds(batch.shape[0], workers)]
    return np.stack([s.mean(axis=0) for s in shards]), np.stack([s.var(axis=0) for s in shards])


def sync_batchnorm_statistics(shards: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """SyncBN: the global batch's mean and variance from three all-reduced sums.

    Each worker contributes its count, its per-feature sum and sum of squares; added over
    the workers (in rank order, as the all-reduce does) they give the batch's count
    :math:`B`, the mean :math:`\\bar{x} = \\sum x / B` and the variance
    :math:`\\sum x^2 / B - \\bar{x}^2`: the statistics of the whole batch, whatever the split
    (in float64; the difference loses digits when the mean is much larger than the spread).

    Examples
    --------
    >>> mean, var = sync_batchnorm_statistics([np.array([[0.0], [2.0]]), np.array([[10.0], [12.0]])])
    >>> mean.tolist(), var.tolist()
    ([6.0], [26.0])
    """
    shards = [_batch(s, "shards") for s in _at_least(shards, "shards", 1)]
    count = sum(s.shape[0] for s in shards)  # all-reduce of the counts
    total = sum(s.sum(axis=0) for s in shards)  # all-reduce of the sums
    squares = sum((s * s).sum(axis=0) for s in shards)  # all-reduce of the sums of squares
    mean = total / count
    return mean, squares / count - mean * mean


def _at_least(value, name: str, n: int, item_types=None, what: str = "") -> list:
    items = check_sequence(value, name, item_types, what)
    if len(items) < n:
        raise ValueError(f"{name} must hold at least {n} item(s), got {len(items)}")
    return items


def _batch(value, name: str = "batch") -> np.ndarray:
    check_type(value, name, np.ndarray, "a numpy array (samples, features)")
    if value.ndim != 2 or value.shape[0] < 1 or value.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be a real (samples, features) array with samples >= 1, got shape "
                         f"{value.shape} of {value.dtype}")
    return value.astype(np.float64)
