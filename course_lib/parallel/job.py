"""One check of a trainer's arguments, and the job every worker receives.

:func:`check_job` checks what every trainer takes - data parallel and ZeRO, tensor,
pipeline and hybrid, the one-process references of :mod:`course_lib.reference` and the
torch engine - once, at its entry point, with the same rules and messages, naming a bad
argument; it returns the :class:`Job`: everything a worker needs besides the shared
arrays, small and picklable (what goes into a starting worker stays small: see
:mod:`course_lib.parallel.workers`).

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
>>> check_job(MLP((4, 3, 2)), x, y, 4, None, 1, 0.1, 0, 3, 1, None, stages=2)  # 2 pipelines
Traceback (most recent call last):
...
ValueError: every batch needs at least data = 3 samples (one per replica); the last batch of an epoch has 2: choose batch_size so that it divides the 10 samples better, or use steps
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validate import check_int, check_positive, check_type
from ..models import MLP
from ..optim import SGD
from .partition import batch_schedule, batch_sizes, steps_per_epoch
from .workers import Fault

__all__ = ["MAX_STEPS", "Job", "check_flag", "check_job", "start_params"]

MAX_STEPS = 10**7
"""Most steps of one run (every result holds each step's timings in memory)."""


@dataclass(frozen=True)
class Job:
    """A run's checked arguments: everything a data-parallel (ZeRO, tensor-parallel) worker
    needs besides the shared arrays (small, picklable); a pipeline hands its stages their own
    job built from it."""

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
    micro_batches: int = 1
    """Pipelines: micro-batches per replica."""

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
              optimizer=None, zero_stage=0, stages=None, micro_batches=1):
    """Check a trainer's arguments (naming the bad one); return ``x``, ``y`` and the :class:`Job`.

    The one check of every trainer (data parallel, ZeRO, tensor, pipeline, hybrid) and of
    the one-process references (:mod:`course_lib.reference`), made once at the entry point
    the notebook calls, with the same rules and messages everywhere.

    Parameters
    ----------
    model, x, y, batch_size, steps, epochs, lr, seed
        As the trainers take them: ``batch_size`` in [1, n]; ``steps`` or ``epochs`` (not
        both; neither: one epoch); ``lr`` finite and > 0; ``seed`` >= 0.
    workers : int
        Worker processes, >= 1, each with a shard of every batch (a pipeline: its
        replicas ``N_d``, named ``data`` in the messages).
    blas : int or None
        ``blas_threads``: None or >= 1.
    fault : course_lib.parallel.workers.Fault or None
        Its ``rank`` must name a process: in [0, workers - 1] (a pipeline: [0, N_d * N_p - 1]).
    batch_split : bool
        False (tensor parallelism: every worker sees the whole batch) allows more workers
        than samples in a batch.
    optimizer, zero_stage
        An object with ``step(params, grad)`` or None; ZeRO stage 0 to 3 (1 to 3 need an
        element-wise optimizer).
    stages : int, optional
        Pipelines: the number of stages ``N_p`` (already checked against the model). Then
        every batch, the last of an epoch included, needs one sample per replica, and
        ``micro_batches`` (per replica) is in [1, batch_size // N_d].
    micro_batches : int
        Pipelines: micro-batches per replica.

    Returns
    -------
    x, y : numpy.ndarray
        The data as the model computes with it.
    Job
        The checked arguments.
    """
    if not isinstance(model, MLP):
        raise TypeError(f"model must be a course_lib.models.MLP, got {type(model).__name__}")
    x = model._check_x(x)
    y = model._check_y(y, x.shape[0])
    n = x.shape[0]
    if n == 0:
        raise ValueError("x must hold at least one sample")
    split = "workers" if stages is None else "data"  # how the caller names its replicas
    workers = check_int(workers, split, 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    if batch_size > n:
        raise ValueError(f"batch_size must be <= the number of samples ({n}), got {batch_size}")
    if batch_split and batch_size < workers:
        raise ValueError(
            f"batch_size must be >= {split} so that every {'worker' if stages is None else 'replica'} "
            f"gets a sample, got batch_size={batch_size}, {split}={workers}"
        )
    if steps is not None and epochs is not None:
        raise ValueError("give either steps or epochs, not both")
    if steps is None:
        epochs = check_int(1 if epochs is None else epochs, "epochs", 1)
        steps = epochs * steps_per_epoch(n, batch_size)
    steps = check_int(steps, "steps", 1, MAX_STEPS)
    lr = check_positive(lr, "lr")
    seed = check_int(seed, "seed", 0)
    processes = workers
    if stages is not None:  # a pipeline of N_d replicas: every batch needs a sample per replica
        processes = workers * stages
        micro_batches = check_int(micro_batches, "micro_batches", 1, batch_size // workers)
        short = int(batch_sizes(n, batch_size, steps).min())
        if short < workers:
            raise ValueError(
                f"every batch needs at least data = {workers} samples (one per replica); the last "
                f"batch of an epoch has {short}: choose batch_size so that it divides the "
                f"{n} samples better, or use steps"
            )
    if blas is not None:
        blas = check_int(blas, "blas_threads", 1)
    if fault is not None:
        if not isinstance(fault, Fault):
            raise TypeError(f"fault must be a course_lib.parallel.workers.Fault or None, got {type(fault).__name__}")
        check_int(fault.rank, "fault.rank", 0, processes - 1)
    if optimizer is not None and not callable(getattr(optimizer, "step", None)):
        raise TypeError(f"optimizer must have a step(params, grad) method, got {type(optimizer).__name__}")
    if callable(getattr(optimizer, "fresh", None)):
        optimizer = optimizer.fresh()  # a template: no state of an earlier run goes into a worker
    zero_stage = check_int(zero_stage, "zero_stage", 0, 3)
    if zero_stage >= 1 and optimizer is not None and not isinstance(optimizer, SGD):
        raise ValueError(
            f"zero_stage={zero_stage} shards the optimizer state by chunks of the flat buffer, which needs an "
            f"element-wise optimizer (optim.SGD); {type(optimizer).__name__} needs whole layers"
        )
    job = Job(model, n, batch_size, steps, lr, seed, workers, blas, fault, optimizer, zero_stage, micro_batches)
    return x, y, job


def check_flag(value, name: str) -> bool:
    """``value`` as a bool (True, False or a numpy bool), else TypeError naming ``name``."""
    return bool(check_type(value, name, (bool, np.bool_), "True or False"))


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
