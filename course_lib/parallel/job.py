"""One check of a trainer's arguments, and the job every worker receives.

:func:`check_job` checks what the data-parallel, ZeRO and tensor-parallel trainers (and
the torch engine) take, once, at their entry points, naming a bad argument; it returns the
:class:`Job`: everything a worker needs besides the shared arrays, small and picklable
(what goes into a starting worker stays small: see :mod:`course_lib.parallel.workers`).

Examples
--------
>>> from course_lib.models import MLP
>>> x = np.zeros((10, 4), np.float32); y = np.zeros(10, int)
>>> _, _, job = check_job(MLP((4, 3, 2)), x, y, 4, None, 2, 0.1, 0, 2, 1, None)
>>> job.steps, [idx.size for idx in job.schedule()][:3]
(6, [4, 4, 2])
>>> check_job(MLP((4, 3, 2)), x, y, 1, None, None, 0.1, 0, 2, 1, None)
Traceback (most recent call last):
...
ValueError: batch_size must be >= workers so that every worker gets a sample, got batch_size=1, workers=2
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validate import check_int, check_positive, check_type
from ..models import MLP
from ..optim import SGD
from .partition import batch_schedule, steps_per_epoch
from .workers import Fault

__all__ = ["Job", "check_job", "start_params"]


@dataclass(frozen=True)
class Job:
    """Everything a data-parallel worker needs besides the shared arrays (small, picklable)."""

    model: MLP
    n_samples: int
    batch_size: int
    steps: int
    lr: float
    seed: int
    workers: int
    blas_threads: int | None
    fault: Fault | None
    optimizer: Any = None
    """None (plain SGD with ``lr``) or an optimizer with state, e.g. ``optim.SGD(lr, momentum=0.9)``."""
    zero_stage: int = 0

    def new_optimizer(self):
        """A fresh copy of the optimizer (each worker and each run owns its state), or None."""
        return None if self.optimizer is None else copy.deepcopy(self.optimizer)

    def update(self, params: np.ndarray, total: np.ndarray, samples: int, optimizer, buffer: np.ndarray) -> None:
        """Apply a step's summed gradient ``total`` to ``params`` in place: plain SGD,
        ``params -= (lr / samples) * total``, or ``optimizer.step(params, total / samples)``."""
        if optimizer is None:
            np.multiply(total, self.scale(samples), out=buffer)
            params -= buffer
        else:
            np.multiply(total, self.model.dtype.type(1.0 / samples), out=buffer)
            optimizer.step(params, buffer)

    def schedule(self):
        """The sample indices of every step (:func:`course_lib.parallel.partition.batch_schedule`)."""
        return batch_schedule(self.n_samples, self.batch_size, self.seed, steps=self.steps)

    def scale(self, samples: int) -> np.float32:
        """Factor turning a step's summed gradient into its update: lr / samples, in float32."""
        return self.model.dtype.type(self.lr / samples)


def check_job(model, x, y, batch_size, steps, epochs, lr, seed, workers, blas, fault, *, batch_split=True,
              optimizer=None, zero_stage=0):
    """Check a trainer's arguments (naming the bad one); return ``x``, ``y`` and the :class:`Job`.

    ``batch_split=False`` (tensor parallelism: every worker sees the whole batch) allows
    more workers than samples in a batch.
    """
    if not isinstance(model, MLP):
        raise TypeError(f"model must be a course_lib.models.MLP, got {type(model).__name__}")
    x = model._check_x(x)
    y = model._check_y(y, x.shape[0])
    workers = check_int(workers, "workers", 1)
    n = x.shape[0]
    batch_size = check_int(batch_size, "batch_size", 1)
    if batch_size > n:
        raise ValueError(f"batch_size must be <= the number of samples ({n}), got {batch_size}")
    if batch_split and batch_size < workers:
        raise ValueError(
            f"batch_size must be >= workers so that every worker gets a sample, "
            f"got batch_size={batch_size}, workers={workers}"
        )
    if steps is not None and epochs is not None:
        raise ValueError("give either steps or epochs, not both")
    if steps is None:
        epochs = check_int(1 if epochs is None else epochs, "epochs", 1)
        steps = epochs * steps_per_epoch(n, batch_size)
    steps = check_int(steps, "steps", 1)
    lr = check_positive(lr, "lr")
    seed = check_int(seed, "seed", 0)
    if blas is not None:
        blas = check_int(blas, "blas_threads", 1)
    if fault is not None:
        if not isinstance(fault, Fault):
            raise TypeError(f"fault must be a course_lib.parallel.workers.Fault or None, got {type(fault).__name__}")
        check_int(fault.rank, "fault.rank", 0, workers - 1)
    if optimizer is not None and not callable(getattr(optimizer, "step", None)):
        raise TypeError(f"optimizer must have a step(params, grad) method, got {type(optimizer).__name__}")
    if callable(getattr(optimizer, "fresh", None)):
        optimizer = optimizer.fresh()  # a template: no state of an earlier run goes into a worker
    zero_stage = check_int(zero_stage, "zero_stage", 0, 1)
    if zero_stage == 1 and optimizer is not None and not isinstance(optimizer, SGD):
        raise ValueError(
            f"zero_stage=1 shards the optimizer state by chunks of the flat buffer, which needs an "
            f"element-wise optimizer (optim.SGD); {type(optimizer).__name__} needs whole layers"
        )
    job = Job(model, n, batch_size, steps, lr, seed, workers, blas, fault, optimizer, zero_stage)
    return x, y, job


def start_params(model: MLP, params, seed: int) -> np.ndarray:
    """The initial parameters: ``model.init_params(seed)``, or a finite copy of ``params``."""
    check_type(model, "model", MLP, "a course_lib.models.MLP")
    if params is None:
        return model.init_params(seed)
    try:
        params = np.array(params, dtype=model.dtype)
    except (OverflowError, TypeError, ValueError) as exc:
        raise ValueError(f"params must be a flat array of {model.n_params} finite numbers: {exc}") from None
    model._check_flat(params, "params")
    if not np.all(np.isfinite(params)):
        raise ValueError("params must be finite")
    return params
