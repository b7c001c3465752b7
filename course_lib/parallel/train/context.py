"""The context-parallel trainer: a transformer's sequence split over processes
(:mod:`course_lib.parallel.context`), attention by ring or by an all-to-all over heads.

Examples
--------
>>> from course_lib.transformer import Transformer
>>> from course_lib.parallel.train.reference import train_serial
>>> model = Transformer(seq_length=8, token_size=2, hidden=8, heads=2, n_layers=1, ffn=8, classes=3)
>>> rng = np.random.default_rng(0); x = rng.random((24, 8, 2)); y = rng.integers(0, 3, 24)
>>> kw = dict(batch_size=8, steps=3, lr=0.5, seed=1)
>>> serial = train_serial(model, x, y, **kw)
>>> for method in ("ring", "all_to_all"):
...     run = train_context_parallel(model, x, y, workers=2, method=method, start_method="fork", **kw)
...     print(method, float(np.abs(run.params - serial.params).max()) < 1e-6, int(run.bytes_per_step[0]))
ring True 16384
all_to_all True 8192
>>> from course_lib.context_cost import all_to_all_bytes, ring_bytes   # B = 8, L = 8, h = 8 on 2 workers
>>> ring_bytes(8, 8, 8, 2), all_to_all_bytes(8, 8, 8, 2)
(16384, 8192)
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from ..._validate import check_int, check_real, check_type
from ...i18n import tr
from ...models import TrainResult
from ...timing import blas_threads as _blas
from ...timing import current_blas_threads
from ...transformer import Transformer
from ..allreduce import ActivationAllReduce, ShmAllReduce, Wire
from ..context import (
    METHODS,
    SPLITS,
    AllToAllAttention,
    RingAttention,
    context_worker_loop,
    sequence_chunks,
)
from ..context import token_positions as _positions
from ..engine.clock import StepMonitor, increase
from ..engine.job import Job, check_flag, check_job, run_keywords
from ..engine.launch import Launcher
from ..exchange import ShmAllToAll, ShmRing
from .data import collect, report

__all__ = ["PRELOAD", "check_context_split", "context_timeline", "ring_overlap", "train_context_parallel"]

PRELOAD = ("course_lib.parallel.engine.workers", "course_lib.models", "course_lib.transformer",
           "course_lib.parallel.train.context", "threadpoolctl")


def check_context_split(model, workers, method: str = "ring", split: str = "even") -> tuple[str, str]:
    """``(method, split)`` checked for ``model`` on ``workers`` workers, else ValueError/TypeError
    naming the parameter: ``workers`` must divide the sequence (``2 * workers`` for the zig-zag
    split) and, for the all-to-all over heads, the heads."""
    check_type(model, "model", Transformer, "a course_lib.transformer.Transformer")
    workers = check_int(workers, "workers", 1, model.seq_length)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    parts = 2 * workers if split == "zigzag" else workers
    if model.seq_length % parts:
        raise ValueError(f"workers = {workers} must split the sequence of L = {model.seq_length} tokens into "
                         f"{parts} equal {'chunks (2 per worker, zigzag)' if split == 'zigzag' else 'blocks'}: "
                         f"choose workers so that {parts // workers} x workers divides {model.seq_length}")
    if method == "all_to_all" and model.heads % workers:
        raise ValueError(f"method='all_to_all' gives every worker heads / workers of the a = {model.heads} heads: "
                         f"workers must divide {model.heads}, got {workers}")
    return method, split


def _check_wire(wire, method: str, message_bytes: int, timeout: float) -> Wire | None:
    """The modelled link of the ring (None: shared memory only), checked."""
    if wire is None:
        return None
    if method != "ring":
        raise ValueError(f"wire models the ring's links: it needs method='ring', got method={method!r}")
    if isinstance(wire, (tuple, list)) and len(wire) == 2:
        wire = Wire(*wire)
    check_type(wire, "wire", Wire, "a Wire(alpha, beta) or a pair (alpha, beta): seconds per message, bytes per second")
    wire = Wire(check_real(wire.alpha, "wire.alpha (seconds per message)", 0.0, 1.0),
                check_real(wire.beta, "wire.beta (bytes per second)", 0.0, np.inf, low_open=True))
    if wire.alpha + message_bytes / wire.beta >= timeout / 4:
        raise ValueError(f"wire={wire} takes {wire.alpha + message_bytes / wire.beta:.3g} s per ring message of "
                         f"{message_bytes} bytes: keep it under timeout / 4 = {timeout / 4:g} s (raise wire.beta)")
    return wire


@run_keywords()
def train_context_parallel(model: Transformer, x: np.ndarray, y: np.ndarray, *, workers: int, method: str = "ring",
                           split: str = "even", causal: bool | None = None, optimizer=None, wire=None,
                           **run) -> TrainResult:
    """Train a transformer with the sequence of every sample split over ``workers`` processes.

    Each worker holds ``L / workers`` tokens of every sequence of the batch and the whole
    weights; everything that works token by token runs on its tokens alone. Attention
    crosses the workers by ``method``; the mean over the tokens is an all-reduce of
    ``B x h`` values; the parameter gradients (each worker's: its tokens' share) are summed by
    an all-reduce, and every worker applies the same update. Equal to
    :func:`course_lib.parallel.train.reference.train_serial` on the same model within rounding.

    Parameters
    ----------
    model : course_lib.transformer.Transformer
    x, y : numpy.ndarray
        Sequences ``(n, L, d)`` and labels ``(n,)``.
    workers : int
        Processes ``N_c`` >= 1; must divide ``L`` (``L`` in ``2 N_c`` chunks for
        ``split="zigzag"``) and, for ``method="all_to_all"``, the heads.
    method : {"ring", "all_to_all"}
        ``"ring"``: ring attention, key/value blocks round a ring, the online softmax;
        ``"all_to_all"``: DeepSpeed-Ulysses, an all-to-all from tokens to heads and back.
    split : {"even", "zigzag"}
        One block of ``L / N_c`` tokens per worker, or two chunks ``j`` and ``2 N_c - 1 - j``.
    causal : bool or None
        The causal mask (None: ``model.causal``); the serial equal is
        ``train_serial(dataclasses.replace(model, causal=causal), ...)``.
    optimizer : optional
        An optimizer with ``step(params, grad)`` instead of plain SGD.
    wire : course_lib.parallel.allreduce.Wire or (alpha, beta), optional
        Ring only: each ring message takes ``alpha + m / beta`` seconds to arrive (a modelled
        link; the copies are the shared-memory ones), so that the run shows how much of it
        the next block's compute hides (:func:`ring_overlap`).

    Returns
    -------
    course_lib.models.TrainResult
        ``backend="context"``; ``bytes_per_step`` the attention bytes each worker received
        per step (the ring's blocks or the all-to-alls, equal for every worker: what it sent);
        ``memory`` per worker: parameters, gradients and ``scores``, the largest block of
        attention scores it held at once (bytes). ``extra``: ``method``, ``split``,
        ``causal``, ``allreduce_bytes`` (per step: the gradients' and the mean's payload),
        ``computed`` (scores each worker computed in the whole run), ``ops`` (the timeline,
        :func:`context_timeline`), ``exposed`` ((steps, workers) seconds waited for the wire),
        ``busy`` ((steps, workers) CPU seconds in attention's blocks: the ring's pairs of chunks,
        or the all-to-all's attention, its exchanges included).

    Raises
    ------
    ValueError, TypeError
        Bad arguments, naming the parameter and its range.
    course_lib.parallel.engine.workers.WorkerError, WorkerDied, WorkerTimeout
        A worker failed; every worker has been stopped and all shared memory removed.
    """
    t_call = time.perf_counter()
    check_type(model, "model", Transformer, "a course_lib.transformer.Transformer")
    if causal is not None:
        model = replace(model, causal=check_flag(causal, "causal"))
    x, y, p0, job = check_job(model, x, y, workers=workers, models=(Transformer,), batch_split=False,
                              optimizer=optimizer, backend="context", **run)
    method, split = check_context_split(job.model, job.workers, method, split)
    m = job.model
    block = job.batch_size * (m.seq_length // job.workers) * m.hidden  # one worker's K (or V) block, values
    wire = _check_wire(wire, method, 2 * block * p0.itemsize, job.timeout)
    chunks = sequence_chunks(m.seq_length, job.workers, split)
    t_wall = time.time()
    with Launcher(job.start_method) as launch:
        arrays = [launch.shared(x.shape, x.dtype, x), launch.shared(y.shape, np.int64, y),
                  launch.shared(p0.shape, p0.dtype, p0), launch.shared((job.workers, p0.size), p0.dtype),
                  launch.shared(p0.size, p0.dtype), launch.shared((job.workers, job.batch_size * m.hidden), p0.dtype),
                  launch.shared(job.batch_size * m.hidden, p0.dtype)]
        if method == "ring":
            arrays += [launch.shared((job.workers, 2, 2 * block), p0.dtype), launch.shared((job.workers, 2), np.float64)]
        else:
            arrays += [launch.shared((2, job.workers, job.workers, block // job.workers), p0.dtype)]
        results = launch.run(_worker, job.workers, args=(job, [a.spec for a in arrays], launch.barrier(job.workers),
                                                         method, chunks, wire),
                             timeout=job.timeout, name="ddl-cp", preload=PRELOAD, progress_total=2 * job.steps,
                             progress=job.progress, progress_label=tr("context parallel ({method})", method=method))
    result = collect(results, job, t_call, t_wall, loss=np.asarray(results[0]["losses"]))
    result.extra.update(method=method, split=split, causal=m.causal, chunks=chunks, wire=wire, hidden=m.hidden,
                        bytes=np.stack([r["bytes"] for r in results], axis=1),
                        allreduce_bytes=results[0]["allreduce_bytes"],
                        computed=[r["computed"] for r in results], ops=context_timeline(results),
                        exposed=np.stack([r["exposed"] for r in results], axis=1),
                        busy=np.stack([r["busy"] for r in results], axis=1))
    return result


def _worker(wctx, job: Job, specs, barrier, method: str, chunks: list, wire) -> dict:
    """One context-parallel worker (runs in a child process): attach, run the loop, report."""
    x_spec, y_spec, p_spec, g_spec, r_spec, rows_spec, red_spec, *exchange_specs = specs
    monitor = StepMonitor(wctx, job.steps, job.fault)
    positions = _positions(chunks[wctx.rank])
    with x_spec.attach() as x, y_spec.attach() as y, p_spec.attach() as p0, g_spec.attach() as grads, \
            r_spec.attach() as reduced, rows_spec.attach() as rows, red_spec.attach() as red, _blas(job.blas_threads):
        blas = current_blas_threads()
        comm, pooled = ShmAllReduce(wctx, grads, reduced, barrier), ActivationAllReduce(wctx, rows, red, barrier)
        with exchange_specs[0].attach() as buffers:
            if method == "ring":
                with exchange_specs[1].attach() as stamps:
                    exchange = ShmRing(wctx, buffers, stamps, barrier, wire)
                    attend = RingAttention(exchange, chunks, wctx.rank, job.model.causal)
                    out = _run(wctx, job, x, y, p0, attend, exchange, comm, pooled, positions, monitor)
            else:
                exchange = ShmAllToAll(wctx, buffers, barrier)
                attend = AllToAllAttention(exchange, chunks, wctx.rank, job.model.causal)
                out = _run(wctx, job, x, y, p0, attend, exchange, comm, pooled, positions, monitor)
        comm = pooled = exchange = attend = None  # no view of the shared arrays outlives them
    params, losses, counts, largest, computed = out
    memory = {"parameters": params.nbytes, "gradients": params.nbytes, "optimizer_states": 0, "scores": largest}
    return report(monitor, losses, digest_of=[params], memory=memory, blas=blas, params=params, computed=computed,
                  allreduce_bytes=counts["allreduce"], exposed=counts["exposed"], busy=counts["busy"], ops=monitor.ops)


def cpu_busy(obj, *names: str) -> list[float]:
    """Wrap the methods ``names`` of ``obj`` (from outside: the algorithm stays as it is) so
    that the CPU seconds of this thread inside them add up in the returned one-item list.

    Busy time as CPU time, not wall time: on a machine whose cores are shared, a process
    that waits for a core is not busy, and its wall time would say it was."""
    total = [0.0]
    for name in names:
        method = getattr(obj, name)

        def timed_call(*args, _method=method, **kwargs):
            t0 = time.thread_time()
            try:
                return _method(*args, **kwargs)
            finally:
                total[0] += time.thread_time() - t0

        setattr(obj, name, timed_call)
    return total


def _run(wctx, job, x, y, p0, attend, exchange, comm, pooled, positions, monitor):
    """The loop under the monitor, every communicator timed and counted."""
    for part in (comm, pooled, exchange, attend):
        part.monitor = monitor
    busy = cpu_busy(attend, "fold", "unfold") if hasattr(attend, "fold") else cpu_busy(attend, "forward", "backward")
    counts = {"bytes": increase(lambda: exchange.moved), "pooled": increase(lambda: pooled.moved),
              "exposed": increase(lambda: getattr(exchange, "exposed", 0.0)), "busy": increase(lambda: busy[0])}
    params, losses = context_worker_loop(wctx, job, x, y, p0, attend, comm, pooled, positions,
                                         monitor.steps(job.batches(), counts=counts))
    gradients = p0.nbytes if wctx.world_size > 1 else 0  # one all-reduce of the gradients per step
    per_step = {"allreduce": monitor.counts["pooled"] + gradients, "exposed": monitor.counts["exposed"],
                "busy": monitor.counts["busy"]}
    return params, losses, per_step, attend.largest, attend.computed


def context_timeline(results: list[dict]) -> list[tuple]:
    """The measured timeline of a context-parallel run: ``(rank, step, kind, hop, start, end)``
    per operation, seconds from the earliest, sorted by rank and start. ``kind``: ``"F"``,
    ``"B"`` one pair of chunks of attention forward, backward (``hop``: the ring step);
    ``"S"``, ``"R"`` a ring message sent, received (``"X"``: the part of a receive spent
    waiting for the wire); ``"P"``, ``"C"`` an all-to-all posted, collected."""
    rows = [(rank, step, kind, micro, t0, t1) for rank, r in enumerate(results)
            for kind, micro, t0, t1, step, _ in r["ops"]]
    if not rows:
        return []
    origin = min(row[4] for row in rows)
    return sorted(((rank, step, kind, hop, t0 - origin, t1 - origin) for rank, step, kind, hop, t0, t1 in rows),
                  key=lambda row: (row[0], row[4]))


def ring_overlap(result: TrainResult, skip: int = 1) -> dict:
    """How much of the ring's communication overlapped computation, per worker, in a run with
    ``wire``, read from the run's timeline (the steps after the first ``skip``).

    Every ring message spends ``w = alpha + m / beta`` on the wire (``m``: two blocks of
    ``B (L / N_c) h`` values), from the moment its sender put it there (the end of its
    ``"S"``). ``overlapped``: the part of those intervals during which the receiver was
    computing attention (its ``"F"`` and ``"B"`` operations); ``exposed``: the time the
    receiver waited for the wire when it asked for the block (``extra["exposed"]``). The
    model: a block sent before the hop's compute (the keys and values) overlaps
    ``min(w, compute of the hop)``, one sent after it (their gradients) nothing:
    ``model_overlapped``, with each hop's compute read from the same timeline.

    Returns
    -------
    dict
        ``message_time`` (w, seconds), ``messages`` (per worker and step), and per worker,
        seconds over the steps: ``wire``, ``overlapped``, ``model_overlapped``, ``exposed``.
    """
    check_type(result, "result", TrainResult, "a TrainResult of train_context_parallel")
    skip = check_int(skip, "skip", 0)
    wire = result.extra.get("wire")
    if wire is None or result.extra.get("method") != "ring":
        raise ValueError("ring_overlap needs a run of train_context_parallel(..., method='ring', wire=...)")
    skip = skip if result.steps > skip else 0
    workers, chunks = result.workers, result.extra["chunks"][0]
    tokens = sum(b - a for a, b in chunks)  # one worker's tokens
    w = wire.alpha + 2 * result.batch_size * tokens * result.extra["hidden"] * result.params.itemsize / wire.beta
    ops = [[op for op in result.extra["ops"] if op[0] == rank] for rank in range(workers)]
    sends = [[op for op in mine if op[2] == "S"] for mine in ops]
    out = {name: np.zeros(workers) for name in ("wire", "overlapped", "model_overlapped", "messages")}
    for rank in range(workers):
        busy = [(t0, t1) for _, _, kind, _, t0, t1 in ops[rank] if kind in ("F", "B")]
        received, compute, before_compute = 0, 0.0, False
        for _, step, kind, _, t0, t1 in ops[rank]:
            if kind == "S":
                compute, before_compute = 0.0, True
            elif kind in ("F", "B"):
                compute += t1 - t0
            elif kind == "R":
                sent = sends[(rank - 1) % workers][received][5]  # the block left its sender then
                received += 1
                if step < skip:
                    continue
                out["messages"][rank] += 1
                out["wire"][rank] += w
                out["overlapped"][rank] += sum(max(0.0, min(b, sent + w) - max(a, sent)) for a, b in busy)
                out["model_overlapped"][rank] += min(w, compute) if before_compute else 0.0
                before_compute = False  # the next receive (the gradients) follows no compute of its own
    out["exposed"] = result.extra["exposed"][skip:].sum(axis=0)
    out["messages"] /= max(result.steps - skip, 1)
    return {"message_time": w, **out}
