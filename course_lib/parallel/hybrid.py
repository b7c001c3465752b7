"""Hybrid parallelism as processes: ``N_d`` data-parallel replicas of an ``N_p``-stage pipeline.

:func:`train_hybrid` runs a data x pipeline grid (组合并行) on this machine; there is no
tensor-parallel axis in the processes (:mod:`course_lib.parallel.tensor` trains that
split on its own). Planning a grid - its step time and memory per device for every
``N_d x N_p x N_t``, the fastest one that fits, the source chapter's comparison of
schemes - is pure computation and lives in :mod:`course_lib.planner`.
"""

from __future__ import annotations

import numpy as np

from ..models import TrainResult
from .pipeline import train_pipeline

__all__ = ["train_hybrid"]


def train_hybrid(model, x: np.ndarray, y: np.ndarray, *, data: int = 2, **kwargs) -> TrainResult:
    """Hybrid parallelism as processes: ``data`` replicas of an ``N_p``-stage pipeline.

    ``N_d * N_p`` processes; process ``replica * N_p + q`` is stage ``q`` of its replica.
    Each replica trains on a contiguous shard of every batch with the pipeline's scheme;
    afterwards the ``N_d`` copies of stage ``q`` add their gradients (an all-reduce through
    shared memory, in replica order) and each applies the same update to its own copy of
    the stage's parameters. This is :func:`course_lib.parallel.pipeline.train_pipeline`
    with ``data`` = ``N_d`` (every other keyword as there, ``stages`` = ``N_p``);
    ``stages=1`` is plain data parallelism.

    Examples
    --------
    >>> from course_lib.datasets import load_digits
    >>> from course_lib.models import MLP
    >>> from course_lib.reference import train_microbatched
    >>> d = load_digits("train")
    >>> model = MLP((64, 32, 32, 10))
    >>> res = train_hybrid(model, d.x, d.y, data=2, stages=2, micro_batches=2, steps=3)
    >>> ref = train_microbatched(model, d.x, d.y, data=2, micro_batches=2, steps=3)
    >>> bool(np.allclose(res.params, ref.params, rtol=0, atol=1e-6)), res.replicas_in_sync
    (True, True)
    """
    return train_pipeline(model, x, y, data=data, **kwargs)
