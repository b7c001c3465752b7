r"""Tensor parallelism of a transformer: every block split by heads over worker processes.

Megatron-LM's split of a transformer layer (Shoeybi et al. 2019), on the course's
:class:`course_lib.transformer.Transformer`. Worker :math:`j` of :math:`N_t` holds

* the columns of :math:`A_Q, A_K, A_V` (and their biases) of heads
  :math:`j a / N_t \ldots (j + 1) a / N_t - 1`: attention needs no exchange, the heads are
  independent (:func:`course_lib.transformer.attention`);
* the same rows of the output projection :math:`A_O`: its product is a partial sum, added
  over the workers by one all-reduce;
* the MLP block as :mod:`course_lib.parallel.tensor` splits it: columns of :math:`A_1`,
  rows of :math:`A_2`, one all-reduce;
* everything else whole (embedding, positions, layer norms, the biases added after an
  all-reduce, the head), computed identically on every worker.

:func:`course_lib.transformer.block_forward` with a worker's blocks and a real all-reduce
is the split block (the same code as the serial one); forward 2 all-reduces per block,
backward 2 (the gradients of the inputs of the split layers), each of :math:`B L h`
values (:func:`course_lib.tensor_cost.tensor_allreduce_bytes`). :func:`head_shards` is
the layout; :func:`train_transformer_tensor_parallel` runs it on processes with the
machinery of :mod:`course_lib.parallel.tensor`; :func:`train_transformer_serial` is the
one-process reference it equals.

Examples
--------
>>> from course_lib.transformer import Transformer
>>> model = Transformer(seq_length=4, token_size=3, hidden=8, heads=4, n_layers=1, ffn=6, classes=3)
>>> rng = np.random.default_rng(0)
>>> x = rng.random((24, 4, 3)); y = rng.integers(0, 3, 24)
>>> kw = dict(batch_size=8, steps=3, lr=0.5, seed=1)
>>> tp = train_transformer_tensor_parallel(model, x, y, workers=2, start_method="fork", **kw)
>>> float(np.abs(tp.params - train_transformer_serial(model, x, y, **kw).params).max()) < 1e-6
True
>>> int(tp.bytes_per_step[0]) == 4 * 8 * 4 * 8 * 8     # 4 all-reduces of B L h float64 values
True
"""

from __future__ import annotations

import dataclasses
import hashlib
import time

import numpy as np

from .._validate import as_real, check_int, check_positive, check_type
from ..models import TrainResult, softmax_cross_entropy
from ..timing import blas_threads as _blas
from ..timing import current_blas_threads
from ..transformer import Transformer, transformer_backward, transformer_forward
from .data import collect
from .job import Job, check_job
from .launch import StepClock
from .partition import shard_bounds
from .tensor import _ActivationAllReduce, run_tensor_workers
from .workers import Fault, WorkerContext, check_start_method

__all__ = [
    "check_run",
    "gather_weights",
    "head_shards",
    "local_weights",
    "train_transformer_serial",
    "train_transformer_tensor_parallel",
]

PRELOAD = ("course_lib.parallel.workers", "course_lib.transformer", "course_lib.parallel.tensor_transformer",
           "threadpoolctl")

_BY_HEADS = {"Wq": "column", "bq": "column", "Wk": "column", "bk": "column", "Wv": "column", "bv": "column",
             "Wo": "row"}
_BY_UNITS = {"W1": "column", "b1": "column", "W2": "row"}


def head_shards(model: Transformer, workers: int, rank: int) -> dict[str, tuple]:
    """What worker ``rank`` of ``workers`` holds of every parameter: ``{name: index}``.

    ``flat_view[index]`` is the worker's block: the columns (``"column"``) or rows
    (``"row"``) of its heads in ``Wq``, ``Wk``, ``Wv``, ``Wo``; of its share of the MLP
    block's units (:func:`course_lib.parallel.partition.shard_bounds`) in ``W1``, ``W2``;
    ``()``, the whole array, for the rest. ``workers`` must divide the heads.

    Examples
    --------
    >>> m = Transformer(hidden=8, heads=4, n_layers=1, ffn=6)
    >>> s = head_shards(m, 2, 1)
    >>> s["l0.Wq"], s["l0.Wo"], s["l0.b1"], s["l0.bo"]
    ((slice(None, None, None), slice(4, 8, None)), (slice(4, 8, None), slice(None, None, None)), (slice(3, 6, None),), ())
    """
    check_type(model, "model", Transformer, "a course_lib.transformer.Transformer")
    workers = _check_workers(model, workers)
    rank = check_int(rank, "rank", 0, workers - 1)
    width = model.hidden // workers
    heads = slice(rank * width, (rank + 1) * width)  # whole heads: width = (a / N_t) head sizes
    units = slice(*shard_bounds(model.ffn, workers)[rank])
    every, out = slice(None), {}
    for s in model.slots:
        kind = s.name.split(".", 1)[-1]
        part = heads if kind in _BY_HEADS else units if kind in _BY_UNITS else None
        role = _BY_HEADS.get(kind) or _BY_UNITS.get(kind)
        if part is None:
            out[s.name] = ()
        elif role == "column":
            out[s.name] = (every, part) if len(s.shape) == 2 else (part,)
        else:
            out[s.name] = (part, every)
    return out


def _check_workers(model: Transformer, workers) -> int:
    workers = check_int(workers, "workers", 1, model.heads)
    if model.heads % workers:
        raise ValueError(f"workers must divide the heads ({model.heads}), got {workers}")
    return workers


def local_weights(model: Transformer, flat: np.ndarray, shards: dict) -> dict[str, np.ndarray]:
    """Copies (contiguous) of a worker's blocks of ``flat``, by name (``shards`` from :func:`head_shards`)."""
    check_type(model, "model", Transformer, "a course_lib.transformer.Transformer")
    check_type(shards, "shards", dict, "a dict {name: index} from head_shards")
    return {name: np.array(view[shards[name]], order="C") for name, view in model.views(flat).items()}


def gather_weights(model: Transformer, blocks: list[dict]) -> np.ndarray:
    """One flat buffer from every worker's blocks (``blocks[rank][name]``); whole arrays from rank 0.

    Examples
    --------
    >>> m = Transformer(hidden=8, heads=4, n_layers=1, ffn=6); p = m.init_params(0)
    >>> parts = [local_weights(m, p, head_shards(m, 4, r)) for r in range(4)]
    >>> bool(np.array_equal(gather_weights(m, parts), p))
    True
    """
    check_type(model, "model", Transformer, "a course_lib.transformer.Transformer")
    flat = np.zeros(model.n_params, dtype=model.dtype)
    views = model.views(flat)
    for rank in reversed(range(len(blocks))):  # rank 0 last: its whole arrays stay
        for name, index in head_shards(model, len(blocks), rank).items():
            views[name][index] = blocks[rank][name]
    return flat


# ------------------------------------------------------------------ checks and the reference
def check_run(model: Transformer, x, y, batch_size, steps, epochs, lr, seed, workers, blas, fault):
    """Check a transformer run's arguments with the trainers' one check
    (:func:`course_lib.parallel.job.check_job`: same rules and messages); return ``x``,
    ``y`` and the :class:`course_lib.parallel.job.Job` (its ``model`` the transformer).

    The transformer checks itself and its data; ``check_job``, written for the MLP, checks
    the rest against a stand-in MLP of the same data width and classes.
    """
    from ..models import MLP

    check_type(model, "model", Transformer, "a course_lib.transformer.Transformer")
    x = model._check_x(x)
    y = model._check_y(y, x.shape[0])
    stand_in = MLP((model.seq_length * model.token_size, model.classes), dtype=model.dtype)
    _, _, job = check_job(stand_in, x.reshape(x.shape[0], -1), y, batch_size, steps, epochs, lr, seed,
                          workers, blas, fault, batch_split=False)
    return x, y, dataclasses.replace(job, model=model)


def _start_params(model: Transformer, params, seed: int) -> np.ndarray:
    if params is None:
        return model.init_params(seed)
    params = np.array(as_real(params, "params"), dtype=model.dtype)
    model._check_flat(params, "params")
    if not np.all(np.isfinite(params)):
        raise ValueError("params must be finite")
    return params


def train_transformer_serial(model: Transformer, x: np.ndarray, y: np.ndarray, *, batch_size: int = 32,
                             steps: int | None = None, epochs: int | None = None, lr: float = 0.1,
                             seed: int = 0, params: np.ndarray | None = None,
                             blas_threads: int | None = 1) -> TrainResult:
    """Plain SGD on the whole batch in this process, with the batches of every trainer
    (:meth:`course_lib.parallel.job.Job.schedule`): the reference of
    :func:`train_transformer_tensor_parallel` (as :func:`course_lib.reference.train_serial`
    is for the MLP)."""
    t_call = time.perf_counter()
    x, y, job = check_run(model, x, y, batch_size, steps, epochs, lr, seed, 1, blas_threads, None)
    params = _start_params(model, params, job.seed)
    grad = np.zeros_like(params)
    losses, times = np.zeros(job.steps), np.zeros(job.steps)
    with _blas(job.blas_threads):
        for step, idx in enumerate(job.schedule()):
            t0 = time.perf_counter()
            losses[step], _ = model.loss_and_grad(params, x[idx], y[idx], out=grad)
            grad *= model.dtype.type(job.lr)
            params -= grad
            times[step] = time.perf_counter() - t0
    return TrainResult.one_process(params, losses, times, "serial", batch_size=job.batch_size,
                                   blas_threads=job.blas_threads, wall_time=time.perf_counter() - t_call)


# ------------------------------------------------------------------ processes
def train_transformer_tensor_parallel(
    model: Transformer, x: np.ndarray, y: np.ndarray, *, workers: int, batch_size: int = 32,
    steps: int | None = None, epochs: int | None = None, lr: float = 0.1, seed: int = 0,
    params: np.ndarray | None = None, blas_threads: int | None = 1, start_method: str | None = None,
    timeout: float = 60.0, progress: bool | None = None, fault: Fault | None = None,
) -> TrainResult:
    """Train ``model`` with every block split by heads over ``workers`` processes.

    Every worker sees the whole batch and holds its blocks (:func:`head_shards`);
    activations and their gradients are summed with the shared-memory all-reduce of
    :mod:`course_lib.parallel.tensor`.

    Parameters
    ----------
    model : course_lib.transformer.Transformer
    x, y : numpy.ndarray
        Sequences (n, L, d) and labels (n,).
    workers : int
        Worker processes, a divisor of ``model.heads``.
    batch_size, steps, epochs, lr, seed, params, blas_threads, start_method, timeout, progress, fault
        As in :func:`course_lib.parallel.tensor.train_tensor_parallel`.

    Returns
    -------
    course_lib.models.TrainResult
        ``backend="tensor"``; ``params`` gathered from the blocks, laid out as the
        model's; ``bytes_per_step`` the all-reduces' payload (4 per block, each of ``B L h``
        values); ``memory`` the bytes of each worker's blocks and of their gradients.

    Raises
    ------
    ValueError, TypeError
        Bad arguments (naming the parameter), e.g. ``workers`` not dividing the heads.
    course_lib.parallel.workers.WorkerError, WorkerDied, WorkerTimeout
        A worker failed; every worker has been stopped and all shared memory removed.
    """
    t_call = time.perf_counter()
    x, y, job = check_run(model, x, y, batch_size, steps, epochs, lr, seed, workers, blas_threads, fault)
    _check_workers(model, job.workers)
    start_method = check_start_method(start_method)
    timeout = check_positive(timeout, "timeout")
    p0 = _start_params(model, params, job.seed)
    t_wall = time.time()
    width = job.batch_size * model.seq_length * model.hidden  # every all-reduce: B L h values
    results = run_tensor_workers(_worker, job, x, y, p0, width, start_method=start_method, timeout=timeout,
                                 progress=progress, name="ddl-tpt", label="transformer tensor parallel",
                                 preload=PRELOAD)
    return collect(results, job, "tensor", start_method, t_call, t_wall, loss=np.asarray(results[0]["losses"]),
                   params=gather_weights(model, [r["blocks"] for r in results]))


def _worker(wctx: WorkerContext, job: Job, specs, barrier) -> dict:
    """One worker (runs in a child process): attach, run the loop, report."""
    x_spec, y_spec, p_spec, rows_spec, red_spec = specs
    clock = StepClock(wctx, job.steps, job.fault)
    with x_spec.attach() as x, y_spec.attach() as y, p_spec.attach() as p0, \
            rows_spec.attach() as rows, red_spec.attach() as reduced, _blas(job.blas_threads):
        blas = current_blas_threads()
        allreduce = _ActivationAllReduce(wctx, rows, reduced, barrier, clock)
        shards, local = transformer_worker_loop(wctx, job, x, y, p0, allreduce, clock)
        del allreduce
    whole = [local[name] for name, index in shards.items() if index == ()]  # the same on every worker
    digest = hashlib.sha256(b"".join(a.tobytes() for a in whole))
    held = sum(a.nbytes for a in local.values())  # the gradients: one array like each block
    memory = {"parameters": held, "gradients": held, "optimizer_states": 0}
    return {"timings": clock.phases("compute", "waiting", "communication", "step"), "memory": memory,
            "losses": clock.counts["loss"], "bytes": clock.counts.get("bytes", np.zeros(job.steps)).astype(int),
            "blocks": local, "ready": clock.ready, "digest": digest.hexdigest(), "blas_threads": blas}


def transformer_worker_loop(wctx: WorkerContext, job: Job, x, y, p0, allreduce, clock: StepClock):
    """The loop every worker runs: forward with my blocks, loss, backward, update my blocks."""
    model = job.model
    shards = head_shards(model, job.workers, wctx.rank)
    local = local_weights(model, p0, shards)
    grads = {name: np.zeros_like(w) for name, w in local.items()}
    allreduce.barrier.wait(wctx.rank, wctx.wait_timeout)  # start the clock together
    for idx in clock.steps(job.schedule()):
        with clock("compute"):  # the all-reduces inside time themselves
            logits, cache = transformer_forward(local, x[idx], model.n_layers, model.head_size, allreduce)
            loss, dlogits = softmax_cross_entropy(logits, y[idx], reduction="sum")
            for g in grads.values():
                g.fill(0)
            transformer_backward(local, cache, dlogits, grads, model.n_layers, model.head_size, allreduce)
            for name, w in local.items():
                w -= grads[name] * job.scale(idx.size)
        clock.add(loss=loss / idx.size)
    return shards, local
