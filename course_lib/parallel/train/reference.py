r"""The one-process references: what every parallel trainer must compute, in this process.

No process, no shared memory: each function runs the arithmetic of a parallel scheme in
one loop, so that the process trainers of :mod:`course_lib.parallel` can be checked
against it bit for bit (with one BLAS thread, the default here as there).

=========================  ==============================================================
:func:`train_serial`       plain mini-batch SGD on the whole batch (``reduction="mean"``)
                           of any course model (MLP, CNN, transformer): THE serial loop,
                           and the baseline of data and tensor parallelism (equal within
                           float32 rounding)
:func:`train_simulated`    what ``N`` data-parallel workers compute (shard sums added in
                           rank order): bitwise
                           :func:`course_lib.parallel.train.data.train_data_parallel`
:func:`train_microbatched` a pipeline's arithmetic (micro-batches, replicas): bitwise
                           :func:`course_lib.parallel.train.pipeline.train_pipeline`
                           (``data=1`` and hybrid)
=========================  ==============================================================

Every one checks its arguments with :func:`course_lib.parallel.engine.job.check_job` (the same
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

from ...i18n import tr
from ...memory import measured_state_bytes
from ...models import MLP, TrainResult, layer_outputs, sgd_step, softmax_cross_entropy
from ...progress import ProgressBar
from ...timing import blas_threads as _blas
from ...timing import keep_freed_memory, minor_faults
from ..engine.job import check_job, run_keywords
from ..partition import replica_rows, shard_bounds, steps_per_epoch, sum_rows

__all__ = ["train_microbatched", "train_serial", "train_simulated"]


@run_keywords(processes=False)
def train_serial(model, x: np.ndarray, y: np.ndarray, *, optimizer=None, x_test: np.ndarray | None = None,
                 y_test: np.ndarray | None = None, progress: bool | None = None, **run) -> TrainResult:
    """Plain mini-batch SGD in this process: the serial loop of the course, and the reference
    of the parallel runs.

    Parameters
    ----------
    model : course_lib.models.MLP, course_lib.cnn.CNN or course_lib.transformer.Transformer
        Any course model (:class:`course_lib.models.Model`).
    x, y : numpy.ndarray
        Inputs (as the model takes them) and integer labels (n,).
    optimizer : optimizer with ``step(params, grad)``, optional
        An optimizer with state instead of plain SGD, e.g. ``course_lib.optim.SGD(0.1,
        momentum=0.9)`` (``lr`` is then ignored). Every run uses a fresh copy of it: the
        object passed is a template and keeps no state.
    x_test, y_test : numpy.ndarray, optional
        A test set (together): the accuracy on it after every epoch goes to
        ``test_accuracy``, the mean training loss of every epoch to ``epoch_loss``.
    progress : bool or None
        Progress bar; None shows it in a notebook for runs longer than ~1.5 s.

    Returns
    -------
    course_lib.models.TrainResult
        ``workers == 1``, ``backend == "serial"``; communication and waiting are 0. With
        ``blas_threads`` above 1 the BLAS library parallelises inside every matrix product
        (intra-operator parallelism). ``extra["cpu_time"]`` and ``extra["minor_faults"]``
        (steps, 1): each step's CPU seconds of this thread and its minor page faults, as
        every data-parallel worker reports them (counts the machine's load does not change).

    Notes
    -----
    Like every worker, the calling process is set to keep freed memory for reuse
    (:func:`course_lib.timing.keep_freed_memory`), so that serial and parallel runs pay
    the same for their temporary arrays; otherwise glibc re-faults them every step.

    Examples
    --------
    >>> from course_lib.datasets import load_digits
    >>> tr, te = load_digits("train"), load_digits("test")
    >>> res = train_serial(MLP((64, 64, 10)), tr.x, tr.y, epochs=10, x_test=te.x, y_test=te.y)
    >>> res.test_accuracy[-1] > 0.9, len(res.epoch_loss), res.steps == 10 * -(-tr.x.shape[0] // 32)
    (True, 10, True)
    >>> sorted(res.breakdown())
    ['communication', 'compute', 'step', 'waiting']
    """
    t_call = time.perf_counter()
    x, y, params, job = check_job(model, x, y, models=None, optimizer=optimizer, progress=progress, **run)
    if (x_test is None) != (y_test is None):
        raise ValueError("x_test and y_test must be given together")
    if x_test is not None:
        x_test = job.model.check_x(x_test)
        y_test = job.model.check_y(y_test, x_test.shape[0])
    keep_freed_memory()
    opt, grad = job.new_optimizer(), np.zeros_like(params)
    losses, times, per_epoch = np.zeros(job.steps), np.zeros(job.steps), steps_per_epoch(job.n_samples, job.batch_size)
    cpu, faults = np.zeros((job.steps, 1)), np.zeros((job.steps, 1))
    epoch_loss, accuracy, total = [], [], 0.0
    bar = ProgressBar(job.steps, tr("serial"), job.progress)
    lr = job.model.dtype.type(job.lr)
    with _blas(job.blas_threads):
        for step, idx in enumerate(job.batches()):
            t0, c0, f0 = time.perf_counter(), time.thread_time(), minor_faults()
            loss, _ = job.model.loss_and_grad(params, x[idx], y[idx], reduction="mean", out=grad)
            if opt is None:
                grad *= lr
                params -= grad
            else:
                opt.step(params, grad)
            times[step], losses[step] = time.perf_counter() - t0, loss
            cpu[step], faults[step] = time.thread_time() - c0, minor_faults() - f0
            total += loss * idx.size
            if (step + 1) % per_epoch == 0:  # an epoch is done: its mean loss, the test accuracy
                epoch_loss.append(total / job.n_samples)
                total = 0.0
                if x_test is not None:
                    accuracy.append(job.model.accuracy(params, x_test, y_test))
            bar.update(step + 1)
            bar.tick()
    bar.finish(ok=True)
    return TrainResult.one_process(
        params, losses, times, "serial", batch_size=job.batch_size, blas_threads=job.blas_threads,
        memory=[measured_state_bytes(params, grad, opt)], wall_time=time.perf_counter() - t_call,
        epoch_loss=epoch_loss, test_accuracy=accuracy, extra={"cpu_time": cpu, "minor_faults": faults},
    )


@run_keywords(processes=False)
def train_simulated(model: MLP, x: np.ndarray, y: np.ndarray, *, workers: int, **run) -> TrainResult:
    """Data parallelism without processes: the exact arithmetic of ``workers`` workers.

    Each step computes every shard's gradient sum
    (:func:`course_lib.parallel.partition.shard_bounds`) one after the other, adds them in
    rank order and applies ``params -= (lr / B) * sum``, exactly as every worker of
    :func:`course_lib.parallel.train.data.train_data_parallel` does. Its parameters are therefore
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
    x, y, params, job = check_job(model, x, y, workers=workers, **run)
    keep_freed_memory()
    grads = np.zeros((job.workers, params.size), dtype=params.dtype)
    total, update = np.zeros_like(params), np.zeros_like(params)
    losses, times = np.zeros(job.steps), np.zeros(job.steps)
    compute, comm = np.zeros((job.steps, job.workers)), np.zeros((job.steps, job.workers))
    with _blas(job.blas_threads):
        for step, idx in enumerate(job.batches()):
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


@run_keywords(processes=False)
def train_microbatched(model: MLP, x: np.ndarray, y: np.ndarray, *, micro_batches: int = 1, data: int = 1,
                       recompute: bool = False, **run) -> TrainResult:
    """A pipeline's arithmetic in one process: the reference of the pipeline and hybrid runs.

    Every step cuts its batch into ``data`` contiguous shards and each shard into the
    same micro-batches as :func:`course_lib.parallel.train.pipeline.train_pipeline`
    (``data`` replicas), accumulates each shard's gradients layer by layer in micro-batch
    order, adds the shard gradients in shard order and takes one SGD step. With one BLAS
    thread (the default) its parameters are bitwise equal to the parallel run's; with
    ``micro_batches=1`` and ``data=1`` it is :func:`train_serial` (same batches, same initial
    parameters).
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
    >>> from course_lib.datasets import load_digits
    >>> d = load_digits("train")
    >>> model = MLP((64, 32, 10))
    >>> one = train_microbatched(model, d.x, d.y, micro_batches=1, epochs=1)
    >>> bool(np.array_equal(one.params, train_serial(model, d.x, d.y, epochs=1).params))
    True
    >>> four = train_microbatched(model, d.x, d.y, micro_batches=4, epochs=1)
    >>> bool(np.allclose(four.params, one.params, rtol=0, atol=1e-5))
    True
    """
    x, y, p, job = check_job(model, x, y, workers=data, stages=1, micro_batches=micro_batches, schedule="gpipe",
                             recompute=recompute, **run)
    keep_freed_memory()  # as every stage process does: the baseline pays what the stages pay
    grads = np.zeros((job.workers, p.size), dtype=p.dtype)
    total_grad = np.zeros_like(p)
    losses, seconds, redo, peak = np.zeros(job.steps), np.zeros(job.steps), np.zeros((job.steps, 1)), 0
    with _blas(job.blas_threads):
        for k, idx in enumerate(job.batches()):
            t0 = time.perf_counter()
            grads.fill(0)
            xb, yb = x[idx], y[idx]
            scale = np.asarray(1.0 / idx.size, dtype=model.dtype)
            total = 0.0
            for d, rows in enumerate(replica_rows(idx.size, job.workers, job.micro_batches)):
                for r0, r1 in rows:
                    acts = layer_outputs(model, p, 0, model.n_layers, xb[r0:r1])
                    stored = acts[:1] if job.recompute else acts
                    peak = max(peak, sum(a.nbytes for a in stored))
                    if job.recompute:  # the forward again, from the stored input, before the backward
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
        replicas=job.workers, recompute=job.recompute, recompute_time=redo,
    )
