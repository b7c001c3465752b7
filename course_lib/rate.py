"""The rate r of the training-time model T = D C / (r N eta), measured on this machine.

:func:`measure_flop_rate` times training epochs of the running example and divides the
model's FLOP count by the time; :func:`measure_gemm_rate` times one large matrix product,
the best case of the same hardware; :func:`time_training_run` times a whole run to check
a prediction of :func:`course_lib.cost.training_time`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ._validate import as_real, check_int, check_range
from .cost import FLOPS_PER_MAC, mlp_training_flops, training_time
from .timing import Timing, blas_threads, measure

if TYPE_CHECKING:  # pragma: no cover
    from .models import MLP

__all__ = ["FlopRate", "measure_flop_rate", "measure_gemm_rate", "time_training_run"]


@dataclass(frozen=True)
class FlopRate:
    """Achieved FLOP rate of training epochs of the running example on this machine.

    Attributes
    ----------
    flops_per_epoch : float
        FLOPs of one epoch (GEMMs, forward + backward) by the model's count.
    samples : int
        Samples per epoch.
    batch_size : int
        Samples per step.
    timing : course_lib.timing.Timing
        Wall-clock seconds of one epoch (repeated).
    """

    flops_per_epoch: float
    samples: int
    batch_size: int
    timing: Timing

    @property
    def rate(self) -> float:
        """Achieved FLOP/s, :math:`r` = FLOPs of an epoch / median epoch time."""
        return self.flops_per_epoch / self.timing.median

    @property
    def flops_per_sample(self) -> float:
        """FLOPs per sample (forward + backward)."""
        return self.flops_per_epoch / self.samples

    def predict_time(self, epochs) -> float | np.ndarray:
        """Predicted seconds for ``epochs`` epochs: :func:`training_time` with r = :attr:`rate`."""
        e = as_real(epochs, "epochs")
        check_range(e, "epochs", 0.0, np.inf)
        return training_time(e * self.samples, self.flops_per_sample, self.rate)

    def __repr__(self) -> str:
        return (
            f"FlopRate(rate={self.rate / 1e9:.3g} GFLOP/s, epoch={self.timing.median * 1e3:.3g} ms"
            f" (spread {self.timing.spread:.0%}), batch_size={self.batch_size})"
        )


def measure_flop_rate(
    model: MLP, x: np.ndarray, y: np.ndarray, *, batch_size: int = 32, lr: float = 0.1,
    repeat: int = 5, warmup: int = 1, seed: int = 0, threads: int | None = 1,
) -> FlopRate:
    """Time one training epoch of ``model`` and return the achieved FLOP rate.

    Each timed call is the serial loop, ``train_serial(model, x, y, epochs=1, ...)`` - the
    same loop a longer run executes, so ``result.predict_time(epochs)`` predicts such
    a run. The rate includes everything the loop does (batch gathering, bias adds,
    softmax, the update, Python overhead), which is why it is far below the BLAS
    GEMM peak, especially for small batches.

    Parameters
    ----------
    model : course_lib.models.MLP
    x, y : numpy.ndarray
        Training inputs and labels.
    batch_size : int
        Samples per step.
    lr : float
        Learning rate of the SGD steps (does not change the time).
    repeat, warmup : int
        Passed to :func:`course_lib.timing.measure`.
    seed : int
        Seed of the initialisation and shuffling.
    threads : int or None
        BLAS threads during the measurement (``threadpoolctl``); 1 (default) measures
        one core, which is reproducible on a shared machine; None leaves the BLAS
        default.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> from course_lib.datasets import load_digits
    >>> d = load_digits("train")
    >>> m = measure_flop_rate(MLP((64, 64, 10)), d.x, d.y, batch_size=64, repeat=2)
    >>> m.rate > 0, m.samples
    (True, 1438)
    """

    per_sample = int(mlp_training_flops(model, 1))
    repeat = check_int(repeat, "repeat", 1)
    warmup = check_int(warmup, "warmup", 0)
    run, n = _training_run(model, x, y, 1, batch_size, lr, seed)
    with blas_threads(threads, name="threads"):
        timing = measure(run, repeat=repeat, warmup=warmup)
    return FlopRate(float(per_sample) * n, n, batch_size, timing)


def time_training_run(
    model: MLP, x: np.ndarray, y: np.ndarray, *, epochs: int, batch_size: int = 32,
    lr: float = 0.1, seed: int = 0, threads: int | None = 1,
) -> float:
    """Wall-clock seconds of ONE training run of ``epochs`` epochs (to check a prediction).

    Runs :func:`course_lib.parallel.train.reference.train_serial` exactly as
    :func:`measure_flop_rate` times it, once,
    after one untimed epoch to warm caches.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> from course_lib.datasets import load_digits
    >>> d = load_digits("test")
    >>> time_training_run(MLP((64, 16, 10)), d.x, d.y, epochs=2) > 0
    True
    """

    epochs = check_int(epochs, "epochs", 1)
    run, _ = _training_run(model, x, y, epochs, batch_size, lr, seed)
    warm, _ = _training_run(model, x, y, 1, batch_size, lr, seed)
    with blas_threads(threads, name="threads"):
        warm()
        start = time.perf_counter()
        run()
        return time.perf_counter() - start


def _training_run(model, x, y, epochs, batch_size, lr, seed):
    """A zero-argument callable that trains ``model`` (validated), and the sample count."""
    from .parallel.train.reference import train_serial

    int(mlp_training_flops(model, 1))
    batch_size = check_int(batch_size, "batch_size", 1)
    seed = check_int(seed, "seed", 0)
    x_arr = model.check_x(x)
    y_arr = model.check_y(y, x_arr.shape[0])
    if x_arr.shape[0] == 0:
        raise ValueError("x must hold at least one sample")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    params = model.init_params(seed)

    def run():  # the BLAS threads are the caller's (blas_threads=None: left as they are)
        train_serial(model, x_arr, y_arr, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed,
                     params=params, blas_threads=None, progress=False)

    return run, int(x_arr.shape[0])


def measure_gemm_rate(size: int = 512, *, threads: int | None = 1, repeat: int = 5) -> float:
    """FLOP/s of a float32 matrix product of two ``size`` x ``size`` matrices (median).

    A square GEMM counts ``2 * size**3`` FLOPs (``size**3`` MACs). This is close to what
    the BLAS library can reach on this machine - the yardstick for the utilisation of
    :func:`measure_flop_rate`'s training loop.

    Parameters
    ----------
    size : int
        Matrix size, 16 to 8192.
    threads : int or None
        BLAS threads (1 by default: one core).
    repeat : int
        Timed repetitions.

    Examples
    --------
    >>> measure_gemm_rate(128, repeat=2) > 1e6
    True
    """

    size = check_int(size, "size", 16, 8192)
    repeat = check_int(repeat, "repeat", 1)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    c = np.empty_like(a)
    with blas_threads(threads, name="threads"):
        timing = measure(lambda: np.matmul(a, b, out=c), repeat=repeat, warmup=1)
    return FLOPS_PER_MAC * float(size) ** 3 / timing.median
