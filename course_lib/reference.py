r"""The one-process references: what every parallel trainer must compute, in this process.

No process, no shared memory: each function runs the arithmetic of a parallel scheme in
one loop, so that the process trainers of :mod:`course_lib.parallel` can be checked
against it bit for bit (with one BLAS thread, the default here as there).

========================  ==============================================================
:func:`train_serial`      plain mini-batch SGD on the whole batch (``reduction="mean"``):
                          the baseline of data and tensor parallelism (equal within
                          float32 rounding; bitwise to :func:`course_lib.models.train`)
:func:`train_simulated`   what ``N`` data-parallel workers compute (shard sums added in
                          rank order): bitwise
                          :func:`course_lib.parallel.data.train_data_parallel`
:func:`train_microbatched` a pipeline's arithmetic (micro-batches, replicas): bitwise
                          :func:`course_lib.parallel.pipeline.train_pipeline` and
                          :func:`course_lib.parallel.hybrid.train_hybrid`
========================  ==============================================================

Every one checks its arguments with :func:`course_lib.parallel.job.check_job` (the same
rules and messages as the process trainers), runs with one BLAS thread unless told
otherwise and keeps freed memory for reuse as every worker process does
(:func:`course_lib.timing.keep_freed_memory`: serial and parallel runs pay the same for
their temporary arrays), and returns a :class:`course_lib.models.TrainResult`.

Examples
--------
>>> from course_lib.models import MLP
>>> model = MLP((8, 16, 3))
>>> rng = np.random.default_rng(0)
>>> x = rng.random((64, 8), dtype=np.float32); y = rng.integers(0, 3, 64)
>>> kw = dict(batch_size=20, steps=5, lr=0.5, seed=1)
>>> serial, simulated = train_serial(model, x, y, **kw), train_simulated(model, x, y, workers=3, **kw)
>>> float(np.abs(serial.params - simulated.params).max()) < 1e-6, serial.steps, serial.backend
(True, 5, 'serial')
>>> one = train_microbatched(model, x, y, micro_batches=1, **kw)
>>> bool(np.array_equal(one.params, serial.params))   # one micro-batch: the serial loop
True
"""

from __future__ import annotations

import math
import time

import numpy as np

from .memory import measured_state_bytes
from .models import MLP, TrainResult, sgd_step, softmax_cross_entropy
from .parallel.job import check_flag, check_job, start_params
from .parallel.partition import replica_rows, shard_bounds, sum_rows
from .progress import ProgressBar
from .timing import blas_threads as _blas
from .timing import keep_freed_memory

__all__ = ["layer_outputs", "train_microbatched", "train_serial", "train_simulated"]


def train_serial(
    model: MLP,
    x: np.ndarray,
    y: np.ndarray,
    *,
    batch_size: int = 32,
    steps: int | None = None,
    epochs: int | None = None,
    lr: float = 0.1,
    seed: int = 0,
    params: np.ndarray | None = None,
    optimizer=None,
    blas_threads: int | None = 1,
    progress: bool | None = None,
) -> TrainResult:
    """Plain mini-batch SGD in this process: the reference for the parallel runs.

    Parameters
    ----------
    model : MLP
        The running example's layout.
    x, y : numpy.ndarray
        Inputs (n, features) and integer labels (n,).
    batch_size : int
        Global batch, 1 <= batch_size <= n.
    steps, epochs : int, optional
        Number of SGD steps, or of epochs (``ceil(n / batch_size)`` steps each; the last
        batch of an epoch holds what is left, see
        :func:`course_lib.parallel.partition.batch_schedule`); not both. Default: one epoch.
    lr : float
        Learning rate, finite and > 0.
    seed : int
        Seeds the initial parameters (``model.init_params(seed)``) and the batches.
    params : numpy.ndarray, optional
        Start from these parameters (copied) instead.
    optimizer : optimizer with ``step(params, grad)``, optional
        An optimizer with state instead of plain SGD, e.g. ``course_lib.optim.SGD(0.1,
        momentum=0.9)`` (``lr`` is then ignored). Every run uses a fresh copy of it: the
        object passed is a template and keeps no state.
    blas_threads : int or None
        BLAS threads while training (None: the library's default, all cores). More
        threads parallelise inside each matrix product: intra-operator parallelism.
    progress : bool or None
        Progress bar; None shows it in a notebook for runs longer than ~1.5 s.

    Returns
    -------
    course_lib.models.TrainResult
        ``workers == 1``, ``backend == "serial"``; communication and waiting are 0.

    Notes
    -----
    Like every worker, the calling process is set to keep freed memory for reuse
    (:func:`course_lib.timing.keep_freed_memory`), so that serial and parallel runs pay
    the same for their temporary arrays; otherwise glibc re-faults them every step.

    Examples
    --------
    >>> m = MLP((4, 3, 2)); x = np.ones((8, 4), np.float32); y = np.zeros(8, int)
    >>> sorted(train_serial(m, x, y, batch_size=4, steps=3).breakdown())
    ['communication', 'compute', 'step', 'waiting']
    """
    t_call = time.perf_counter()
    x, y, job = check_job(model, x, y, batch_size, steps, epochs, lr, seed, 1, blas_threads, None,
                          optimizer=optimizer)
    params = start_params(model, params, job.seed)
    keep_freed_memory()
    opt = job.new_optimizer()
    grad = np.zeros_like(params)
    losses, times = np.zeros(job.steps), np.zeros(job.steps)
    bar = ProgressBar(job.steps, "serial", progress)
    lr32 = model.dtype.type(job.lr)
    with _blas(job.blas_threads):
        for step, idx in enumerate(job.schedule()):
            t0 = time.perf_counter()
            loss, _ = model.loss_and_grad(params, x[idx], y[idx], reduction="mean", out=grad)
            if opt is None:
                grad *= lr32
                params -= grad
            else:
                opt.step(params, grad)
            times[step] = time.perf_counter() - t0
            losses[step] = loss
            bar.update(step + 1)
            bar.tick()
    bar.finish(ok=True)
    return TrainResult.one_process(
        params, losses, times, "serial", batch_size=job.batch_size, blas_threads=job.blas_threads,
        memory=[measured_state_bytes(params, grad, opt)], wall_time=time.perf_counter() - t_call,
    )


def train_simulated(
    model: MLP,
    x: np.ndarray,
    y: np.ndarray,
    *,
    workers: int,
    batch_size: int = 32,
    steps: int | None = None,
    epochs: int | None = None,
    lr: float = 0.1,
    seed: int = 0,
    params: np.ndarray | None = None,
    blas_threads: int | None = 1,
) -> TrainResult:
    """Data parallelism without processes: the exact arithmetic of ``workers`` workers.

    Each step computes every shard's gradient sum
    (:func:`course_lib.parallel.partition.shard_bounds`) one after the other, adds them in
    rank order and applies ``params -= (lr / B) * sum``, exactly as every worker of
    :func:`course_lib.parallel.data.train_data_parallel` does. Its parameters are therefore
    bitwise equal to the parallel run's (same arguments as :func:`train_serial`, plus
    ``workers``).

    Returns
    -------
    course_lib.models.TrainResult
        ``backend == "simulated"``, one column per simulated worker: ``compute`` is its
        shard's gradient time, ``communication`` the sum of the shards (the same for all).

    Examples
    --------
    >>> m = MLP((4, 3, 2)); x = np.ones((9, 4), np.float32); y = np.zeros(9, int)
    >>> run = train_simulated(m, x, y, workers=2, batch_size=3, steps=2)
    >>> run.compute.shape, run.workers, run.backend
    ((2, 2), 2, 'simulated')
    """
    t_call = time.perf_counter()
    x, y, job = check_job(model, x, y, batch_size, steps, epochs, lr, seed, workers, blas_threads, None)
    params = start_params(model, params, job.seed)
    keep_freed_memory()
    grads = np.zeros((job.workers, params.size), dtype=params.dtype)
    total, update = np.zeros_like(params), np.zeros_like(params)
    losses, times = np.zeros(job.steps), np.zeros(job.steps)
    compute, comm = np.zeros((job.steps, job.workers)), np.zeros((job.steps, job.workers))
    with _blas(job.blas_threads):
        for step, idx in enumerate(job.schedule()):
            t_step = time.perf_counter()
            shard_losses = []
            for r, (lo, hi) in enumerate(shard_bounds(idx.size, job.workers)):
                t0 = time.perf_counter()
                sub = idx[lo:hi]
                loss, _ = model.loss_and_grad(params, x[sub], y[sub], reduction="sum", out=grads[r])
                shard_losses.append(loss)
                compute[step, r] = time.perf_counter() - t0
            t0 = time.perf_counter()
            sum_rows(grads, total)
            comm[step, :] = time.perf_counter() - t0
            job.update(params, total, idx.size, None, update)
            losses[step] = math.fsum(shard_losses) / idx.size
            times[step] = time.perf_counter() - t_step
    return TrainResult(
        params=params, loss=losses, step_time=times, compute=compute, communication=comm,
        waiting=np.zeros_like(comm), backend="simulated", batch_size=job.batch_size, workers=job.workers,
        blas_threads=job.blas_threads, memory=[measured_state_bytes(params, grads, None)],
        wall_time=time.perf_counter() - t_call,
    )


def train_microbatched(
    model: MLP, x: np.ndarray, y: np.ndarray, *, micro_batches: int = 1, data: int = 1,
    batch_size: int = 32, steps: int | None = None, epochs: int | None = None, lr: float = 0.1,
    seed: int = 0, params: np.ndarray | None = None, recompute: bool = False,
    blas_threads: int | None = 1,
) -> TrainResult:
    """A pipeline's arithmetic in one process: the reference of the pipeline and hybrid runs.

    Every step cuts its batch into ``data`` contiguous shards and each shard into the
    same micro-batches as :func:`course_lib.parallel.pipeline.train_pipeline` /
    :func:`course_lib.parallel.hybrid.train_hybrid`, accumulates each shard's gradients
    layer by layer in micro-batch order, adds the shard gradients in shard order and takes
    one SGD step. With one BLAS thread (the default) its parameters are bitwise equal to
    the parallel run's; with ``micro_batches=1`` and ``data=1`` it is
    :func:`course_lib.models.train` (same batches, same initial parameters).
    ``recompute=True`` keeps only each micro-batch's input and re-runs the forward before
    the backward, as the pipeline does (same parameters, bitwise; the time goes to
    ``recompute_time``).

    Returns
    -------
    course_lib.models.TrainResult
        ``backend == "microbatched"``; ``step_time`` the measured seconds of every step
        (the serial baseline of the parallel runs); ``memory[0]["activations"]`` the most
        activations held at once (the whole model, one micro-batch at a time).

    Examples
    --------
    >>> from course_lib.models import train
    >>> from course_lib.datasets import load_digits
    >>> d = load_digits("train")
    >>> model = MLP((64, 32, 10))
    >>> one = train_microbatched(model, d.x, d.y, micro_batches=1, epochs=1)
    >>> bool(np.array_equal(one.params, train(model, d.x, d.y, epochs=1, batch_size=32).params))
    True
    >>> four = train_microbatched(model, d.x, d.y, micro_batches=4, epochs=1)
    >>> bool(np.allclose(four.params, one.params, rtol=0, atol=1e-5))
    True
    """
    x, y, job = check_job(model, x, y, batch_size, steps, epochs, lr, seed, data, blas_threads, None,
                          stages=1, micro_batches=micro_batches)
    recompute = check_flag(recompute, "recompute")
    p = start_params(model, params, job.seed)
    keep_freed_memory()  # as every stage process does: the baseline pays what the stages pay
    grads = np.zeros((job.workers, p.size), dtype=p.dtype)
    total_grad = np.zeros_like(p)
    losses, seconds, redo, peak = np.zeros(job.steps), np.zeros(job.steps), np.zeros((job.steps, 1)), 0
    with _blas(job.blas_threads):
        for k, idx in enumerate(job.schedule()):
            t0 = time.perf_counter()
            grads.fill(0)
            xb, yb = x[idx], y[idx]
            scale = np.asarray(1.0 / idx.size, dtype=model.dtype)
            total = 0.0
            for d, rows in enumerate(replica_rows(idx.size, job.workers, job.micro_batches)):
                for r0, r1 in rows:
                    acts = layer_outputs(model, p, 0, model.n_layers, xb[r0:r1])
                    stored = acts[:1] if recompute else acts
                    peak = max(peak, sum(a.nbytes for a in stored))
                    if recompute:  # the forward again, from the stored input, before the backward
                        t1 = time.perf_counter()
                        acts = layer_outputs(model, p, 0, model.n_layers, stored[0])
                        redo[k, 0] += time.perf_counter() - t1
                    loss, g = softmax_cross_entropy(acts[-1], yb[r0:r1], "sum")
                    g *= scale
                    total += loss
                    for i in reversed(range(model.n_layers)):
                        g = model.layer_backward(p, i, acts[i], acts[i + 1], g, grads[d], need_input_grad=i > 0)
            sgd_step(p, grads[0] if job.workers == 1 else sum_rows(grads, total_grad), job.lr)
            losses[k] = total / idx.size
            seconds[k] = time.perf_counter() - t0
    return TrainResult.one_process(
        p, losses, seconds, "microbatched", batch_size=job.batch_size, blas_threads=job.blas_threads,
        memory=[{**measured_state_bytes(p, grads, None), "activations": int(peak)}],
        boundaries=(0, model.n_layers), schedule="serial", micro_batches=job.micro_batches,
        replicas=job.workers, recompute=recompute, recompute_time=redo,
    )


def layer_outputs(model: MLP, params: np.ndarray, lo: int, hi: int, a: np.ndarray) -> list[np.ndarray]:
    """``[a, out(lo), ..., out(hi - 1)]``: the input and the output of every layer in ``[lo, hi)``
    (what a pipeline stage owning those layers keeps for its backward).

    Examples
    --------
    >>> m = MLP((4, 3, 2)); p = m.init_params(0); a = np.ones((5, 4), np.float32)
    >>> [o.shape for o in layer_outputs(m, p, 0, 2, a)]
    [(5, 4), (5, 3), (5, 2)]
    >>> bool(np.array_equal(layer_outputs(m, p, 0, 2, a)[-1], m.forward(p, a)[0]))
    True
    """
    acts = [a]
    for i in range(lo, hi):
        acts.append(model.layer_forward(params, i, acts[-1]))
    return acts
