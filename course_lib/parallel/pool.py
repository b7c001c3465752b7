"""The first parallel program: one workload split over a pool of processes.

The workload is the running example's gradient computation over the digits training set:
``epochs`` passes of mini-batch forward and backward passes of an MLP with the parameters
held fixed, summing every mini-batch gradient (``reduction="sum"``). With fixed parameters
the mini-batches are independent, so the samples can be split into contiguous shards, one
per process; the parent adds the shard gradients up. The sum is the serial one (up to float
rounding): data parallelism without the update step, which :mod:`course_lib.parallel.data`
adds.

:func:`epoch_gradient` is the workload (the serial reference, and what each worker runs on
its shard); :func:`pool_worker` is one process of the pool.
:class:`course_lib.parallel.train.speedup.WorkerPool` starts the pool and
:func:`course_lib.parallel.train.speedup.measure_parallel_speedup` times it.

Examples
--------
>>> from course_lib.models import MLP
>>> m = MLP((4, 3, 2)); p = m.init_params(0)
>>> x = np.ones((5, 4), np.float32); y = np.array([0, 1, 0, 1, 1])
>>> _, whole = epoch_gradient(m, p, x, y, batch_size=2)
>>> parts = [epoch_gradient(m, p, x[lo:hi], y[lo:hi], batch_size=2)[1] for lo, hi in ((0, 2), (2, 5))]
>>> bool(np.allclose(parts[0] + parts[1], whole, rtol=1e-6))
True
"""

from __future__ import annotations

import numpy as np

from .._validate import check_int
from ..models import MLP, check_model

__all__ = ["epoch_gradient", "pool_worker"]


def epoch_gradient(model: MLP, params: np.ndarray, x: np.ndarray, y: np.ndarray, *, batch_size: int = 32,
                   epochs: int = 1) -> tuple[float, np.ndarray]:
    """Summed loss and summed gradient of ``epochs`` passes over ``(x, y)`` in mini-batches.

    Gradients of the mini-batches are computed with ``reduction="sum"`` in the model's
    dtype and accumulated in float64, so shard results add up to the full result.

    Returns
    -------
    loss_sum : float
    grad_sum : numpy.ndarray
        float64, shape ``(model.n_params,)``.

    Examples
    --------
    >>> m = MLP((4, 3, 2)); p = m.init_params(0)
    >>> x = np.ones((5, 4), np.float32); y = np.array([0, 1, 0, 1, 1])
    >>> loss, g = epoch_gradient(m, p, x, y, batch_size=2)
    >>> full = m.loss_and_grad(p, x, y, reduction="sum")[1]
    >>> bool(np.allclose(g, full, rtol=1e-5, atol=1e-6))
    True
    """
    check_model(model, (MLP,))
    model.check_flat(params, "params")
    x = model.check_x(x)
    y = model.check_y(y, x.shape[0])
    batch_size = check_int(batch_size, "batch_size", 1)
    epochs = check_int(epochs, "epochs", 1)
    grad_sum = np.zeros(model.n_params, dtype=np.float64)
    buffer = np.zeros(model.n_params, dtype=model.dtype)
    loss_sum = 0.0
    for _ in range(epochs):
        for start in range(0, x.shape[0], batch_size):  # the mini-batches, in order
            loss, _ = model.loss_and_grad(params, x[start : start + batch_size], y[start : start + batch_size],
                                          reduction="sum", out=buffer)
            loss_sum += loss
            grad_sum += buffer  # added up in float64
    return loss_sum, grad_sum


def pool_worker(wctx, model: MLP, x: np.ndarray, y: np.ndarray, params: np.ndarray, requests, *,
                batch_size: int, epochs: int) -> None:
    """One process of the pool, owning one shard ``(x, y)`` of the data: on every request
    (the parameters ``params``, shared with the parent, are up to date) it sends back the
    loss and gradient summed over its shard."""
    for _ in requests:  # the parent asks; the parameters are in place
        loss, grad = epoch_gradient(model, params, x, y, batch_size=batch_size, epochs=epochs)
        wctx.channel.send((loss, grad))  # my shard's part of the sum
