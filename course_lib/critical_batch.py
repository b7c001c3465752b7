r"""Large batches measured: the large-batch experiment (SGD with linear scaling and warm-up,
LARS, LAMB on the running example), the critical batch size and the time to a target accuracy.

Hardware efficiency grows with the batch size :math:`B` (samples per second); statistical
efficiency falls beyond the **critical batch size** (临界批尺寸): the steps to a target stop
halving when :math:`B` doubles. McCandlish et al., "An Empirical Model of Large-Batch
Training", 2018 (arXiv:1812.06162) model the steps as
:math:`n_{\text{steps}}(B) = n_{\min}(1 + B_{\text{crit}}/B)`. This module measures them on the
running example (:func:`steps_to_target`, :func:`batch_size_sweep`), fits the model
(:func:`fit_critical_batch`) and prices the time to the target on :math:`N` devices
(:func:`time_to_target`): steps times the time of one data-parallel step.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._validate import (
    check_array,
    check_int,
    check_positive,
    check_real,
    check_sequence,
    check_type,
)
from .i18n import tr

__all__ = [
    "BatchRun",
    "BatchSizeSweep",
    "CriticalBatchFit",
    "TimeToTarget",
    "batch_size_sweep",
    "fit_critical_batch",
    "large_batch_experiment",
    "steps_to_target",
    "time_to_target",
]


def _target_setup(batch_sizes, target_loss, max_steps, hidden, seed):
    """Checked arguments, the training split and the model of the two functions below."""
    from .datasets import load_digits
    from .models import MLP

    target_loss = check_positive(target_loss, "target_loss")
    max_steps = check_int(max_steps, "max_steps", 1, 10**6)
    hidden, seed = check_int(hidden, "hidden", 1, 4096), check_int(seed, "seed", 0)
    tr = load_digits("train")
    if max(batch_sizes) > len(tr):
        raise ValueError(f"batch sizes must be at most the {len(tr)} training samples, "
                         f"got {max(batch_sizes)}")
    return target_loss, max_steps, seed, tr, MLP((64, hidden, 10))


def steps_to_target(batch_size: int, lr: float, *, target_loss: float = 0.1, max_steps: int = 4000,
                    hidden: int = 64, seed: int = 0) -> int | None:
    r"""Steps of plain SGD until the running example's training loss is <= ``target_loss``.

    Trains :class:`course_lib.models.MLP` ``(64, hidden, 10)`` on the digits' training
    split with batches of ``batch_size`` at rate :math:`\gamma` = ``lr`` without momentum, and
    computes the loss on the whole split after every step (one BLAS thread; deterministic for a
    seed). None: the target is not reached within ``max_steps``, or the loss grows 10x (diverges).

    Examples
    --------
    >>> steps_to_target(64, 0.8, target_loss=0.5)
    20
    >>> steps_to_target(64, 0.8, target_loss=0.5, max_steps=10) is None
    True
    """
    from .timing import blas_threads

    batch_size, lr = check_int(batch_size, "batch_size", 1), check_positive(lr, "lr")
    target_loss, max_steps, seed, tr, model = _target_setup([batch_size], target_loss, max_steps,
                                                            hidden, seed)
    with blas_threads(1):
        return _run_to_target(model, tr.x, tr.y, batch_size, lr, target_loss, max_steps, seed)[0]


@dataclass(frozen=True)
class BatchSizeSweep:
    """Per batch size (increasing): best rate ``lr``, its ``steps`` to the target (deterministic),
    median ``step_seconds`` of a step on this core, rates ``tried`` ({rate: steps or None})."""

    batch_sizes: np.ndarray
    lr: np.ndarray
    steps: np.ndarray
    step_seconds: np.ndarray
    target_loss: float
    tried: tuple[dict, ...]


def batch_size_sweep(batch_sizes: Sequence[int] = (8, 16, 32, 64, 128, 256, 512, 1024), *,
                     target_loss: float = 0.1, start_lr: float = 0.4, lr_factor: float = 2**0.5,
                     max_steps: int = 4000, hidden: int = 64, seed: int = 0) -> BatchSizeSweep:
    r"""Steps to a target training loss (:func:`steps_to_target`) at several batch sizes.

    Each batch size :math:`B` (in increasing order) gets its own best learning rate, as in
    McCandlish et al. 2018 (arXiv:1812.06162): on a grid of factor ``lr_factor``, starting
    from the previous size's best rate (``start_lr`` for the first), the rate goes up
    while the steps fall. Only for the first size (or a start rate that fails) does it also
    go down when the first step up does not help: the best rate grows with :math:`B` (until
    the curvature of the loss caps it), so a larger batch never needs a smaller one. A
    candidate runs at most as many steps as the best so far (a slower one stops early).
    Batches are drawn without replacement (reshuffled when fewer than :math:`B` are left).

    Examples
    --------
    >>> s = batch_size_sweep((8, 64), target_loss=0.5)
    >>> s.steps.tolist(), s.lr.round(3).tolist(), s.step_seconds.shape
    ([50, 20], [0.4, 0.8], (2,))
    """
    from .timing import blas_threads

    sizes = sorted({check_int(b, f"batch_sizes[{i}]", 1)
                    for i, b in enumerate(check_sequence(batch_sizes, "batch_sizes"))})
    if len(sizes) < 2:
        raise ValueError(f"batch_sizes must hold at least two different sizes, got {batch_sizes!r}")
    lr = check_positive(start_lr, "start_lr")
    factor = check_real(lr_factor, "lr_factor", 1.0, 16.0, low_open=True)
    target_loss, max_steps, seed, tr, model = _target_setup(sizes, target_loss, max_steps, hidden, seed)
    rows = []
    with blas_threads(1):
        for b in sizes:
            seen: dict[float, int | None] = {}

            def attempt(rate, best, b=b, seen=seen):  # (steps, rate, seconds) if better, else None
                limit = max_steps if best is None else best[0] - 1
                n, sec = (_run_to_target(model, tr.x, tr.y, b, rate, target_loss, limit, seed)
                          if limit else (None, 0.0))
                seen[float(rate)] = n
                return None if n is None else (n, rate, sec)

            best = attempt(lr, None)  # then up; down only at first: the best rate grows with B
            for direction in (factor, 1 / factor) if best is None or b == sizes[0] else (factor,):
                rate, moved = lr * direction, False
                while (better := attempt(rate, best)) is not None:
                    best, rate, moved = better, rate * direction, True
                if moved:
                    break
            if best is None:
                raise ValueError(f"no rate reached target_loss={target_loss:g} at batch {b} within "
                                 f"max_steps={max_steps}: raise max_steps or target_loss")
            rows.append((*best, seen))
            lr = best[1]
    steps, rates, seconds, tried = zip(*rows)
    return BatchSizeSweep(np.array(sizes), np.array(rates), np.array(steps), np.array(seconds),
                          target_loss, tried)


@dataclass(frozen=True)
class CriticalBatchFit:
    r"""McCandlish et al.'s model: :math:`n_{\text{steps}}(B) = n_{\min}(1 + B_{\text{crit}}/B)`
    steps and :math:`D(B) = D_{\min}(1 + B/B_{\text{crit}})` samples, :math:`D_{\min} = n_{\min} B_{\text{crit}}`."""

    n_min: float
    b_crit: float

    @property
    def d_min(self) -> float:
        """Fewest samples to the target (batch size -> 0): n_min x b_crit."""
        return self.n_min * self.b_crit

    def steps(self, batch) -> float | np.ndarray:
        """Modelled steps to the target at batch size ``batch`` (a float for a number)."""
        steps = self.n_min * (1 + self.b_crit / check_array(batch, "batch", 0, low_open=True))
        return float(steps) if steps.ndim == 0 else steps


def fit_critical_batch(batch_sizes, steps) -> CriticalBatchFit:
    r"""Fit :math:`n_{\min}` and :math:`B_{\text{crit}}` to steps measured at several batch sizes.

    :math:`n(B) = a + c / B` is linear in :math:`a = n_{\min}` and :math:`c = n_{\min} B_{\text{crit}}`;
    numpy's least squares minimises the relative residuals :math:`\sum_i ((a + c/B_i)/n_i - 1)^2`.

    Examples
    --------
    >>> fit = fit_critical_batch([8, 64, 512], [900, 200, 112.5])   # n_min 100, B_crit 64
    >>> round(fit.n_min, 9), round(fit.b_crit, 9), round(fit.steps(64), 9)
    (100.0, 64.0, 200.0)
    """
    b = check_array(batch_sizes, "batch_sizes", 0, low_open=True).reshape(-1)
    n = check_array(steps, "steps", 0, low_open=True).reshape(-1)
    if b.size != n.size or np.unique(b).size < 2:
        raise ValueError(f"batch_sizes and steps must have the same length, with at least two "
                         f"different batch sizes; got {b.size} and {n.size}")
    (a, c), *_ = np.linalg.lstsq(np.column_stack([1 / n, 1 / (b * n)]), np.ones_like(n), rcond=None)
    if not (a > 0 and c > 0):
        raise ValueError("steps must fall with the batch size towards a positive floor, "
                         f"n_min (1 + B_crit / B); the fit gives n_min = {a:.3g}, n_min B_crit = {c:.3g}")
    return CriticalBatchFit(float(a), float(c / a))


def _run_to_target(model, x, y, batch_size, lr, target_loss, max_steps, seed):
    """Steps until the loss on all of ``x`` is <= ``target_loss``, and the median seconds of
    one training step (forward, backward, update; not the evaluation).

    The steps are None if the target is not reached within ``max_steps`` or the run
    diverges (the loss grows to 10x its start, or NaN). Every step draws ``batch_size``
    samples without replacement; a new shuffle starts when fewer are left.
    """
    from .models import sgd_step, softmax_cross_entropy

    params, rng = model.init_params(seed), np.random.default_rng(seed + 1)
    grad = np.zeros_like(params)

    def loss_on_all():
        return softmax_cross_entropy(model.forward(params, x)[0], y)[0]

    start = loss_on_all()
    order, pos, times = rng.permutation(len(y)), 0, []
    for step in range(1, max_steps + 1):
        if pos + batch_size > len(y):
            order, pos = rng.permutation(len(y)), 0
        idx, pos = order[pos : pos + batch_size], pos + batch_size
        t0 = time.perf_counter()
        model.loss_and_grad(params, x[idx], y[idx], out=grad)
        sgd_step(params, grad, lr)
        times.append(time.perf_counter() - t0)
        loss = loss_on_all()
        if not loss <= 10 * start or loss <= target_loss:  # diverged (or NaN), or there
            return (step if loss <= target_loss else None), float(np.median(times))
    return None, float(np.median(times))


@dataclass(frozen=True)
class TimeToTarget:
    """Time to the target on ``devices`` devices, per global batch size (NaN where
    :math:`B < N`: a device needs a sample), and the time of one step."""

    devices: int
    batch_sizes: np.ndarray
    seconds: np.ndarray
    step_seconds: np.ndarray

    @property
    def best(self) -> int:
        """Index of the fastest batch size."""
        return int(np.nanargmin(self.seconds))


def time_to_target(sweep: BatchSizeSweep, fit: CriticalBatchFit, devices: int, *, nbytes: float,
                   bandwidth: float, latency: float, points: int = 80) -> TimeToTarget:
    r"""Time to the target on ``devices`` devices: modelled steps x time of one step.

    The global batch :math:`B` runs on a geometric grid of ``points`` sizes over the sweep's
    range. One step is data-parallel (:func:`course_lib.alpha_beta.data_parallel_step_time`, weak
    form): each device computes :math:`B/N` samples in the time the sweep measured for that
    batch on one core (interpolated log-log; below the smallest measured batch, its time),
    then a ring all-reduce of ``nbytes`` with the α-β model. The steps are ``fit.steps(B)``.

    Examples
    --------
    >>> sweep = BatchSizeSweep(np.array([8, 64]), np.array([0.4, 0.8]), np.array([50, 20]),
    ...                        np.array([1e-4, 2e-4]), 0.5, ({}, {}))
    >>> fit = CriticalBatchFit(n_min=16.0, b_crit=16.0)
    >>> t = time_to_target(sweep, fit, 1, nbytes=4e4, bandwidth=1e9, latency=0.0, points=2)
    >>> t.batch_sizes.tolist(), (t.seconds * 1e3).round(6).tolist()   # 48 x 0.1 ms, 20 x 0.2 ms
    ([8.0, 64.0], [4.8, 4.0])
    """
    from . import alpha_beta

    check_type(sweep, "sweep", BatchSizeSweep, "a BatchSizeSweep (batch_size_sweep)")
    check_type(fit, "fit", CriticalBatchFit, "a CriticalBatchFit (fit_critical_batch)")
    devices = check_int(devices, "devices", 1)
    points = check_int(points, "points", 2, 10_000)
    sizes = sweep.batch_sizes.astype(float)
    grid = np.geomspace(sizes[0], sizes[-1], points)
    compute = np.exp(np.interp(np.log(grid / devices), np.log(sizes), np.log(sweep.step_seconds)))
    step = alpha_beta.data_parallel_step_time(compute, devices, nbytes, bandwidth, latency, scaling="weak")
    seconds = np.where(grid >= devices, fit.steps(grid) * step, np.nan)
    return TimeToTarget(devices, grid, seconds, step)


# ------------------------------------------------------------ the large-batch experiment
@dataclass(frozen=True)
class BatchRun:
    """One training run of :func:`large_batch_experiment`."""

    label: str
    batch_size: int
    optimizer: str
    peak_lr: float
    warmup_steps: int
    steps_per_epoch: int
    epoch_loss: tuple[float, ...]
    """Mean training loss of each epoch (as ``TrainResult.epoch_loss`` of :mod:`course_lib.models`)."""
    test_accuracy: tuple[float, ...]
    """Test accuracy after each epoch."""
    loss: tuple[float, ...]
    """Loss of every step (as ``TrainResult.loss`` of :mod:`course_lib.models`)."""

    @property
    def epochs(self) -> int:
        return len(self.epoch_loss)

    @property
    def steps(self) -> np.ndarray:
        """Updates made by the end of each epoch (1-based epochs)."""
        return self.steps_per_epoch * np.arange(1, self.epochs + 1)


def large_batch_experiment(
    *,
    small_batch: int = 16,
    factor: int = 32,
    epochs: int = 20,
    base_lr: float = 0.05,
    warmup_epochs: int = 5,
    lamb_lr: float = 0.03,
    momentum: float = 0.9,
    lars_trust: float = 0.02,
    hidden: int = 64,
    seed: int = 0,
    runs: Sequence[str] = ("small", "same_lr", "scaled", "scaled_warmup", "lars", "lamb"),
) -> tuple[BatchRun, ...]:
    """Train the running example with a small batch and a ``factor`` x larger one.

    The running example (:class:`course_lib.models.MLP` ``(64, hidden, 10)`` on the
    digits) with the same initial weights and data order seed in every run:

    * ``"small"``: batch ``small_batch``, :class:`SGD` (with ``momentum``) at ``base_lr``;
    * ``"same_lr"``: batch ``factor * small_batch``, SGD at the same ``base_lr``;
    * ``"scaled_warmup"``: the large batch, SGD at :func:`linear_scaling_rule`'s rate,
      reached by a linear :class:`WarmupLR` over ``warmup_epochs`` epochs;
    * ``"scaled"``: the same without warm-up;
    * ``"lamb"``: the large batch with :class:`LAMB` at ``lamb_lr`` (warm-up as above);
    * ``"lars"``: the large batch with :class:`LARS` (``momentum``, trust coefficient
      ``lars_trust``) at the linearly scaled rate with warm-up.

    Every run uses one BLAS thread (``threadpoolctl``): the matrices are small, and extra
    threads only add waiting on a shared machine. Results are deterministic for a given
    machine; other BLAS builds may round differently, so runs at the edge of stability
    can end differently elsewhere.

    Parameters
    ----------
    small_batch, factor : int
        Small batch size and the ratio of the large one to it.
    epochs : int
        Epochs of every run (equal data, so the large batch makes ``factor`` x fewer steps).
    base_lr : float
        SGD rate for the small batch.
    warmup_epochs : int
        Length of the warm-up of the large-batch runs, in epochs (0: none).
    lamb_lr : float
        Peak rate of LAMB (a fraction of each layer's norm per step).
    momentum : float
        Momentum of the SGD and LARS runs, in [0, 1).
    lars_trust : float
        Trust coefficient of LARS, > 0.
    hidden : int
        Hidden width of the MLP.
    seed : int
        Initial weights and shuffling.
    runs : sequence of str
        Which runs, in order.

    Examples
    --------
    >>> res = large_batch_experiment(epochs=2, runs=("small", "same_lr"))
    >>> [(r.label, r.batch_size, r.steps_per_epoch) for r in res]
    [('batch 16, SGD lr 0.05', 16, 90), ('batch 512, SGD lr 0.05 (same)', 512, 3)]
    """
    from .datasets import load_digits
    from .models import MLP
    from .optim import LAMB, LARS, SGD, WarmupLR, linear_scaling_rule
    from .parallel.train.reference import train_serial

    small_batch = check_int(small_batch, "small_batch", 1)
    factor = check_int(factor, "factor", 2)
    epochs = check_int(epochs, "epochs", 1)
    base_lr = check_positive(base_lr, "base_lr")
    warmup_epochs = check_int(warmup_epochs, "warmup_epochs", 0)
    lamb_lr = check_positive(lamb_lr, "lamb_lr")
    momentum = check_real(momentum, "momentum", 0.0, 1.0, high_open=True)
    lars_trust = check_positive(lars_trust, "lars_trust")
    hidden = check_int(hidden, "hidden", 1)
    seed = check_int(seed, "seed", 0)
    known = ("small", "same_lr", "scaled", "scaled_warmup", "lamb", "lars")
    if isinstance(runs, str) or not all(r in known for r in runs) or not runs:
        raise ValueError(f"runs must be a non-empty sequence of {known}, got {runs!r}")

    train, test = load_digits("train"), load_digits("test")
    model = MLP((64, hidden, 10))
    n = len(train)
    big = small_batch * factor
    big_steps = -(-n // big)
    warm = warmup_epochs * big_steps
    scaled_lr = linear_scaling_rule(base_lr, small_batch, big)

    def warmed(peak):
        return WarmupLR(peak, warm) if warm else peak

    specs = {
        "small": (tr("batch {batch}, SGD lr {lr}", batch=small_batch, lr=f"{base_lr:g}"), small_batch, "SGD",
                  base_lr, 0, lambda: SGD(base_lr, momentum)),
        "same_lr": (tr("batch {batch}, SGD lr {lr} (same)", batch=big, lr=f"{base_lr:g}"), big, "SGD", base_lr, 0,
                    lambda: SGD(base_lr, momentum)),
        "scaled": (tr("batch {batch}, SGD lr {lr} (linear scaling)", batch=big, lr=f"{scaled_lr:g}"), big, "SGD",
                   scaled_lr, 0, lambda: SGD(scaled_lr, momentum)),
        "scaled_warmup": (tr("batch {batch}, SGD lr {lr} (linear scaling + warm-up)", batch=big, lr=f"{scaled_lr:g}"),
                          big, "SGD", scaled_lr, warm, lambda: SGD(warmed(scaled_lr), momentum)),
        "lamb": (tr("batch {batch}, LAMB lr {lr} (+ warm-up)", batch=big, lr=f"{lamb_lr:g}"), big, "LAMB", lamb_lr,
                 warm, lambda: LAMB(model, warmed(lamb_lr))),
        "lars": (tr("batch {batch}, LARS lr {lr} (+ warm-up)", batch=big, lr=f"{scaled_lr:g}"), big, "LARS",
                 scaled_lr, warm, lambda: LARS(model, warmed(scaled_lr), momentum, trust_coefficient=lars_trust)),
    }
    out = []
    # Small matrices: extra BLAS threads only add overhead (and on a shared machine,
    # waits of milliseconds); one thread (train_serial's default) makes the runs fast and reproducible.
    for key in runs:
        label, batch, opt_name, peak, warmup, make = specs[key]
        res = train_serial(model, train.x, train.y, epochs=epochs, batch_size=batch, seed=seed,
                           optimizer=make(), x_test=test.x, y_test=test.y, progress=False)
        out.append(BatchRun(label, batch, opt_name, peak, warmup, -(-n // batch),
                            tuple(res.epoch_loss), tuple(res.test_accuracy), tuple(res.loss)))
    return tuple(out)
