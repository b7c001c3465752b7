"""The tensor-parallel trainer: the running example's pairs of layers split Megatron-style
(:mod:`course_lib.parallel.tensor`), or a transformer's blocks split by heads
(:mod:`course_lib.parallel.tensor_transformer`), on processes.

Examples
--------
>>> from course_lib.models import MLP
>>> from course_lib.parallel.tensor import tensor_parallel_bytes
>>> from course_lib.parallel.train.reference import train_serial
>>> model = MLP((8, 10, 6, 3))            # one pair (layers 0, 1) and a replicated layer 2
>>> rng = np.random.default_rng(0)
>>> x = rng.random((40, 8), dtype=np.float32); y = rng.integers(0, 3, 40)
>>> kw = dict(batch_size=16, steps=4, lr=0.5, seed=1)
>>> tp = train_tensor_parallel(model, x, y, workers=3, start_method="fork", **kw)
>>> float(np.abs(tp.params - train_serial(model, x, y, **kw).params).max()) < 1e-6
True
>>> int(tp.bytes_per_step[0]) == tensor_parallel_bytes(model, 16) == 16 * 6 * 4
True
>>> from course_lib.transformer import Transformer
>>> model = Transformer(seq_length=4, token_size=3, hidden=8, heads=4, n_layers=1, ffn=6, classes=3)
>>> x = rng.random((24, 4, 3)); y = rng.integers(0, 3, 24)
>>> kw = dict(batch_size=8, steps=3, lr=0.5, seed=1)
>>> tp = train_tensor_parallel(model, x, y, workers=2, start_method="fork", **kw)
>>> float(np.abs(tp.params - train_serial(model, x, y, **kw).params).max()) < 1e-6
True
>>> int(tp.bytes_per_step[0]) == 4 * 8 * 4 * 8 * 8     # 4 all-reduces of B L h float64 values
True
"""

from __future__ import annotations

import time

import numpy as np

from ...i18n import tr
from ...models import MLP, TrainResult
from ...timing import blas_threads as _blas
from ...timing import current_blas_threads
from ...transformer import Transformer
from ..allreduce import ActivationAllReduce
from ..engine.clock import StepMonitor, increase
from ..engine.job import Job, check_job, run_keywords
from ..engine.launch import Launcher
from ..tensor import gather_params, tensor_worker_loop
from ..tensor_transformer import check_head_split, gather_weights, transformer_worker_loop
from .data import collect, report

__all__ = ["PRELOAD", "train_tensor_parallel"]

PRELOAD = ("course_lib.parallel.engine.workers", "course_lib.models", "course_lib.transformer",
           "course_lib.parallel.train.tensor", "threadpoolctl")


@run_keywords()
def train_tensor_parallel(model: MLP | Transformer, x: np.ndarray, y: np.ndarray, *, workers: int,
                          **run) -> TrainResult:
    """Train with ``model``'s layers split over ``workers`` processes: every pair of an MLP's
    layers (Megatron's MLP split), or every block of a transformer by heads.

    Every worker sees the whole batch and holds only its blocks of the weights
    (:func:`course_lib.parallel.tensor.layer_blocks`,
    :func:`course_lib.parallel.tensor_transformer.head_blocks`); activations (and their
    gradients) are summed through shared memory
    (:class:`course_lib.parallel.allreduce.ActivationAllReduce`).

    Parameters
    ----------
    model : course_lib.models.MLP or course_lib.transformer.Transformer
    x, y : numpy.ndarray
        Inputs ((n, features), or sequences (n, L, d) for a transformer) and labels (n,).
    workers : int
        Worker processes, >= 1: it may exceed the batch or an MLP's hidden width (some
        blocks are then empty); for a transformer a divisor of ``model.heads``.

    Returns
    -------
    course_lib.models.TrainResult
        ``backend="tensor"``; ``params`` gathered from the blocks, laid out as the model's;
        ``communication`` and ``waiting`` the time in the activation all-reduces;
        ``bytes_per_step`` their payload (0 with one worker); ``memory`` the bytes of each
        worker's blocks and of their gradients.

    Raises
    ------
    ValueError, TypeError
        Bad arguments (naming the parameter), e.g. ``workers`` not dividing the heads.
    course_lib.parallel.engine.workers.WorkerError, WorkerDied, WorkerTimeout
        A worker failed; every worker has been stopped and all shared memory removed.
    """
    t_call = time.perf_counter()
    x, y, p0, job = check_job(model, x, y, workers=workers, models=(MLP, Transformer), batch_split=False,
                              backend="tensor", **run)
    transformer = isinstance(job.model, Transformer)
    if transformer:
        check_head_split(job.model, job.workers)
    # the widest activation all-reduced: B L h values (a transformer), B x the widest layer (an MLP)
    width = job.batch_size * (model.seq_length * model.hidden if transformer else max(model.sizes))
    t_wall = time.time()
    with Launcher(job.start_method) as launch:
        arrays = [launch.shared(x.shape, x.dtype, x), launch.shared(y.shape, np.int64, y),
                  launch.shared(p0.shape, p0.dtype, p0), launch.shared((job.workers, width), p0.dtype),
                  launch.shared(width, p0.dtype)]
        results = launch.run(_worker, job.workers, args=(job, [a.spec for a in arrays], launch.barrier(job.workers)),
                             timeout=job.timeout, name="ddl-tp", preload=PRELOAD, progress_total=2 * job.steps,
                             progress=job.progress, progress_label=tr("tensor parallel"))
    gather = gather_weights if transformer else gather_params
    return collect(results, job, t_call, t_wall, loss=np.asarray(results[0]["losses"]),
                   params=gather(job.model, [r["blocks"] for r in results]))


def _worker(wctx, job: Job, specs, barrier) -> dict:
    """One tensor-parallel worker (runs in a child process): attach, run the loop, report."""
    x_spec, y_spec, p_spec, rows_spec, red_spec = specs
    monitor = StepMonitor(wctx, job.steps, job.fault)
    with x_spec.attach() as x, y_spec.attach() as y, p_spec.attach() as p0, \
            rows_spec.attach() as rows, red_spec.attach() as reduced, _blas(job.blas_threads):
        blas = current_blas_threads()  # reported, so tests can check the limit took effect
        allreduce = ActivationAllReduce(wctx, rows, reduced, barrier)
        allreduce.monitor = monitor
        moved = increase(lambda: allreduce.moved)  # what the all-reduces moved in each step
        loop = transformer_worker_loop if isinstance(job.model, Transformer) else tensor_worker_loop
        blocks, local, losses = loop(wctx, job, x, y, p0, allreduce, monitor.steps(job.batches(), counts={"bytes": moved}))
        allreduce = moved = None  # no view of the shared rows outlives them
    if isinstance(job.model, Transformer):  # what every worker holds whole
        same = [local[name] for name, index in blocks.items() if index == ()]
        held = sum(a.nbytes for a in local.values())
    else:
        same = [a for s, (w, b) in zip(blocks, local, strict=True) if s.role != "column"
                for a in ((b,) if s.role == "row" else (w, b))]
        held = sum(w.nbytes + b.nbytes for w, b in local)
    memory = {"parameters": held, "gradients": held, "optimizer_states": 0}  # the gradients: one array per block
    return report(monitor, losses, digest_of=same, memory=memory, blas=blas, blocks=local)
