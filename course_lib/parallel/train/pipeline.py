"""The pipeline trainer (GPipe, 1F1B, interleaved 1F1B; with recomputation; ``data`` replicas:
hybrid data x pipeline): check once, connect the stages, run them, read their timeline.

One process's stages and step are in :mod:`course_lib.parallel.pipeline`; the schedules,
the bubble formula and the simulator (no processes) in :mod:`course_lib.schedule`.

Examples
--------
>>> from course_lib.datasets import load_digits
>>> from course_lib.models import MLP
>>> from course_lib.parallel.train.reference import train_microbatched
>>> d = load_digits("train")
>>> model = MLP((64, 32, 32, 10))
>>> res = train_pipeline(model, d.x, d.y, stages=2, micro_batches=4, steps=5)
>>> ref = train_microbatched(model, d.x, d.y, micro_batches=4, steps=5)
>>> bool(np.array_equal(res.params, ref.params)), len(res.timeline.steps)
(True, 5)
>>> hybrid = train_pipeline(model, d.x, d.y, data=2, stages=2, micro_batches=2, steps=3)
>>> ref = train_microbatched(model, d.x, d.y, data=2, micro_batches=2, steps=3)
>>> bool(np.array_equal(hybrid.params, ref.params)), hybrid.replicas_in_sync, hybrid.workers
(True, True, 4)
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..._validate import check_type
from ...i18n import tr
from ...models import MLP, TrainResult
from ...schedule import StageOp, Timeline
from ...timing import blas_threads as _blas
from ..engine.checkpointing import check_checkpointing, checkpoint_report, pipeline_saver
from ..engine.clock import StepMonitor
from ..engine.crash import fault_timer
from ..engine.job import Job, check_job, run_keywords
from ..engine.launch import Launcher
from ..partition import replica_rows
from ..pipeline import Links, Stage, _Stash, stage_worker

__all__ = ["PRELOAD", "RecomputeOverhead", "recompute_overhead", "train_pipeline"]

PRELOAD = ("course_lib.parallel.engine.workers", "course_lib.models", "course_lib.parallel.train.pipeline",
           "threadpoolctl")


@run_keywords()
def train_pipeline(model: MLP, x: np.ndarray, y: np.ndarray, *, stages: int | None = None,
                   boundaries: Sequence[int] | None = None, micro_batches: int = 4, schedule: str = "gpipe",
                   virtual_stages: int = 1, recompute: bool = False, data: int = 1,
                   checkpoint_every: int | None = None, checkpoint_dir=None, resume=None,
                   checkpoint_async: bool = False, checkpoint_delay: float = 0.0, checkpoint_store: str = "disk",
                   **run) -> TrainResult:
    """Train the running example with its layers split over ``N_p`` stage processes (and,
    with ``data = N_d > 1``, ``N_d`` replicas of that pipeline: hybrid parallelism).

    Stage ``q`` owns the layers of its model chunk and their slice of the flat parameter
    buffer (in shared memory, updated in place by its owner). Per step, each replica's shard
    of the batch is cut into ``micro_batches`` contiguous micro-batches; activations go
    forward and their gradients backward through shared-memory buffers, with a short message
    through a pipe per hand-over. Every stage runs its schedule's order and records when each
    forward, backward, all-reduce and update started and ended.

    Parameters
    ----------
    model : MLP
    x, y : numpy.ndarray
        Inputs (n, sizes[0]) and integer labels (n,).
    stages : int, optional
        ``N_p`` in [1, n_layers]; the layers are split by
        :func:`course_lib.schedule.partition_layers` (default 2) into ``v N_p`` chunks.
    boundaries : sequence of int, optional
        An explicit split ``(0, b1, ..., n_layers)`` instead (e.g. an uneven one); with
        ``virtual_stages = v`` it has ``v N_p + 1`` entries (chunk boundaries).
    micro_batches : int
        ``M`` (per replica) in [1, batch_size // N_d]; a smaller last batch uses
        ``min(M, its size)``. Interleaved: every step's ``M`` a multiple of ``N_p``.
    schedule : {"gpipe", "1f1b"}
        The order of each stage's forwards and backwards (:func:`course_lib.schedule.stage_order`).
    virtual_stages : int
        ``v`` >= 1 model chunks per process: interleaved 1F1B when ``v > 1`` (Megatron-LM;
        needs ``schedule="1f1b"``, ``M`` a multiple of ``N_p`` and ``v N_p <= n_layers``).
        Process ``q`` holds chunks ``q, q + N_p, ...``; the timeline's operations carry their
        chunk, and ``bytes_per_step`` counts the ``v N_p - 1`` boundaries' hand-overs.
    recompute : bool
        Activation recomputation (激活重计算): each stage stores only the input of every
        micro-batch in flight and re-runs its layers' forward at the start of the backward.
        Same operations in the same order, so the parameters are bitwise those of
        ``recompute=False``; ``stored_activation_bytes`` and ``recompute_time`` show what it
        saved and cost (:func:`recompute_overhead`).
    data : int
        Replicas ``N_d`` of the whole pipeline in [1, batch_size]: ``N_d N_p`` processes
        (process ``rank`` is stage ``rank % N_p`` of replica ``rank // N_p``:
        :class:`course_lib.parallel.engine.job.Grid`); each replica trains on a contiguous
        shard of every batch, then the ``N_d`` copies of each stage all-reduce their gradient
        (shared memory, in replica order). ``fault.rank`` counts processes.
    checkpoint_every, checkpoint_dir, resume, checkpoint_async, checkpoint_delay, checkpoint_store
        Checkpoints (训练检查点, :mod:`course_lib.parallel.checkpoint`), as in
        :func:`course_lib.parallel.train.data.train_data_parallel`: the processes of replica 0
        write one shard each, their stage's layers; ``resume`` may continue on other
        ``stages``, ``boundaries`` or ``data`` (the same: bitwise the uninterrupted run's
        parameters). In full: :data:`course_lib.parallel.engine.checkpointing.CHECKPOINT_DOC`.

    Returns
    -------
    course_lib.models.TrainResult
        ``backend="pipeline"``, the measured ``timeline``; ``compute`` (forwards, backwards,
        updates), ``communication`` (a hybrid's all-reduces) and ``waiting`` (bubble and
        hand-overs) of every process, from the timeline; ``memory`` the peak ``activations``
        each process stored; ``bytes_per_step`` every hand-over. Final parameters (of replica
        0; ``replicas_in_sync`` says whether all agree bitwise): with one BLAS thread bitwise
        equal to :func:`course_lib.parallel.train.reference.train_microbatched`, and to
        :func:`~course_lib.parallel.train.reference.train_serial` up to float32 rounding of
        the summation order (a ReLU input near zero may flip: ~1e-5 after three steps).

    Raises
    ------
    ValueError, TypeError
        Bad arguments (naming the parameter).
    course_lib.parallel.engine.workers.WorkerError, WorkerDied, WorkerTimeout
        A stage failed; every stage has been stopped and every shared segment removed.
    """
    t_call = time.perf_counter()
    x, y, p0, job = check_job(model, x, y, workers=data, stages=stages, boundaries=boundaries,
                              micro_batches=micro_batches, schedule=schedule, virtual_stages=virtual_stages,
                              recompute=recompute, backend="pipeline", **run)
    p0, job, resumed = check_checkpointing(job, p0, checkpoint_every=checkpoint_every, checkpoint_dir=checkpoint_dir,
                                           resume=resume, checkpoint_async=checkpoint_async,
                                           checkpoint_delay=checkpoint_delay, checkpoint_store=checkpoint_store,
                                           params=run["params"])
    grid, chunks = job.grid, len(job.boundaries) - 1
    t_wall = time.time()
    with Launcher(job.start_method) as launch:
        params = launch.shared((grid.replicas, p0.size), p0.dtype, np.broadcast_to(p0, (grid.replicas, p0.size)))
        data_specs = (launch.shared(x.shape, x.dtype, x).spec, launch.shared(y.shape, np.int64, y).spec)
        widths = [model.sizes[b] for b in job.boundaries[1:-1]]  # one per boundary between (virtual) stages
        acts = [launch.shared((job.batch_size, w), p0.dtype).spec for w in widths]
        grads = [launch.shared((job.batch_size, w), p0.dtype).spec for w in widths]
        reduce = launch.shared((2, grid.replicas, p0.size), p0.dtype).spec if grid.replicas > 1 else None
        # per replica and boundary b: a pipe from (virtual) stage b to b + 1, and one back
        forward = [[launch.pipe() for _ in widths] for _ in range(grid.replicas)]
        backward = [[launch.pipe() for _ in widths] for _ in range(grid.replicas)]
        barriers = [launch.barrier(grid.replicas) if grid.replicas > 1 else None for _ in range(grid.stages)]
        saves = launch.barrier(grid.stages) if job.checkpoint is not None else None  # replica 0's checkpoints
        rank_args = []
        for rank in range(grid.size):
            d, q = grid.coords(rank)
            f, b = forward[d], backward[d]
            ends = [(f[s - 1][0] if s > 0 else None, f[s][1] if s < chunks - 1 else None,
                     b[s][0] if s < chunks - 1 else None, b[s - 1][1] if s > 0 else None)
                    for s in range(q, chunks, grid.stages)]  # my chunks' virtual stages q, q + N_p, ...
            rank_args.append((ends, barriers[q], saves if d == 0 else None))
        results = launch.run(
            _stage_process, grid.size, args=(job, _Specs(params.spec, *data_specs, tuple(acts), tuple(grads), reduce)),
            rank_args=rank_args, timeout=job.timeout, name="ddl-stage", preload=PRELOAD,
            progress_total=_ops_per_process(job), progress_label=tr("pipeline ops"), progress=job.progress,
        )
        final = params.array.copy()
    result = _result(results, job, final, t_call, t_wall)
    if job.checkpoint is not None:
        result.extra.update(checkpoint_report([r[3] for r in results], job, resumed))
    return result


@dataclass(frozen=True)
class _Specs:
    """The shared arrays of a pipeline run, by name (picklable specs, attached by each stage)."""

    params: object
    x: object
    y: object
    acts: tuple
    grads: tuple
    reduce: object


def _ops_per_process(job: Job) -> int:
    """Operations one process records over the run (its progress total): a forward and a
    backward per micro-batch and chunk, an update (and a hybrid's all-reduce) per chunk and step."""
    sizes = job.step_sizes()
    v = job.virtual_stages
    micro = sum(2 * len(replica_rows(int(size), job.workers, job.micro_batches)[-1]) * int(np.sum(sizes == size))
                for size in np.unique(sizes))  # two sizes at most: every batch, and the last of an epoch
    return v * micro + v * sizes.size * (2 if job.workers > 1 else 1)


def _stage_process(wctx, job: Job, specs: _Specs, chunk_ends, barrier, saves=None):
    """Entry point of a stage process: attach its buffers, build its :class:`Stage` (one per
    chunk, sharing one stash), run :func:`stage_worker`; return the recorded operations, the
    losses, and (peak stored activation bytes, bytes handed over, recomputation seconds of
    every step, the time it was ready), and its checkpoints' log (None: it writes none)."""
    monitor = StepMonitor(wctx, job.steps, job.fault, per_op=True)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_blas(job.blas_threads))

        def attach(spec, needed=True):  # map a shared array if this stage uses it
            return stack.enter_context(spec.attach()) if needed and spec is not None else None

        stash, chunks, params = _Stash(), [], attach(specs.params)
        for c, ends in enumerate(chunk_ends):
            s = c * job.grid.stages + job.grid.coords(wctx.rank)[1]  # the virtual stage of my chunk c
            first, last = s == 0, s == len(job.boundaries) - 2
            links = Links(params, attach(specs.x, first), attach(specs.y, last),
                          attach(specs.acts[s - 1] if not first else None), attach(specs.acts[s] if not last else None),
                          attach(specs.grads[s] if not last else None), attach(specs.grads[s - 1] if not first else None),
                          attach(specs.reduce), *ends, barrier)
            chunks.append(Stage(wctx, job, links, c, stash, monitor))
        replica, stage = job.grid.coords(wctx.rank)
        saver = pipeline_saver(wctx, job, params[replica], [st.params_slice for st in chunks], saves, replica, stage)
        batches = monitor.steps(job.batches())
        with fault_timer(job.fault, wctx.rank) as failure:  # a Fault(after=...): a failure at a moment in time
            stage_worker(chunks, job, failure.steps(batches if saver is None else saver.steps(batches)))
        losses = np.sum([st.losses for st in chunks], axis=0)
        sent = np.sum([st.sent for st in chunks], axis=0).astype(np.int64)
        peak, saved = stash.peak_bytes, None if saver is None else saver.log
        del chunks, stash, links, saver, batches  # the saver's view of the shared parameters too
    memory = (peak, sent, monitor.timings.get("recompute", np.zeros(job.steps)), monitor.ready)
    return monitor.ops, losses.tolist(), memory, saved


def _result(results: list, job: Job, final: np.ndarray, t_call: float, t_wall: float) -> TrainResult:
    """The stages' reports as one :class:`course_lib.models.TrainResult` with its timeline."""
    grid = job.grid
    records = [StageOp(grid.coords(r)[1], kind, m, t0, t1, step, grid.coords(r)[0], chunk)
               for r, (ops, *_) in enumerate(results) for kind, m, t0, t1, step, chunk in ops]
    start = min(op.start for op in records)
    shifted = tuple(sorted((o.shifted(start) for o in records), key=lambda o: (o.start, o.replica, o.stage)))
    timeline = Timeline(shifted, grid.stages, job.micro_batches, job.schedule, "measured", grid.replicas,
                        job.virtual_stages)
    per_replica = np.array([results[grid.rank(d, grid.stages - 1)][1] for d in range(grid.replicas)])
    sizes = job.step_sizes()
    step_time, compute, communication = _phases(timeline, job.steps)
    return TrainResult(
        params=final[0].copy(), loss=per_replica.sum(axis=0) / sizes, step_time=step_time, compute=compute,
        communication=communication, waiting=np.maximum(step_time[:, None] - compute - communication, 0.0),
        backend="pipeline", batch_size=job.batch_size, workers=grid.size,
        memory=[{"activations": int(memory[0])} for _, _, memory, _ in results],
        bytes_per_step=np.sum([memory[1] for _, _, memory, _ in results], axis=0),
        replicas_in_sync=all(np.array_equal(final[0], final[d]) for d in range(1, grid.replicas)),
        start_method=job.start_method, blas_threads=job.blas_threads,
        startup_time=max(0.0, max(memory[3] for _, _, memory, _ in results) - t_wall),
        wall_time=time.perf_counter() - t_call, timeline=timeline, boundaries=job.boundaries,
        schedule=job.schedule, micro_batches=job.micro_batches, replicas=grid.replicas, recompute=job.recompute,
        recompute_time=np.stack([memory[2] for _, _, memory, _ in results], axis=1),
    )


def _phases(timeline: Timeline, steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From a measured timeline: every step's time (first forward to last update), and the
    seconds each process spent computing (F, B, U) and in all-reduces (A) in every step."""
    first, last = np.full(steps, np.inf), np.full(steps, -np.inf)
    compute = np.zeros((steps, timeline.replicas * timeline.n_stages))
    communication = np.zeros_like(compute)
    for op in timeline.ops:
        first[op.step], last[op.step] = min(first[op.step], op.start), max(last[op.step], op.end)
        busy = communication if op.kind == "A" else compute
        busy[op.step, timeline.row(op)] += op.duration
    return last - first, compute, communication


# ------------------------------------------------------------------ recomputation, measured
@dataclass(frozen=True)
class RecomputeOverhead:
    """What activation recomputation cost and saved: :func:`recompute_overhead`.
    ``str()`` gives the sentence "recomputation cost X % more compute time, saved Y % of
    activation memory"."""

    extra_compute: float
    """Seconds spent recomputing (run with recomputation) over the forward + backward
    seconds of the run without: the compute the recomputation added (about
    forward / (forward + backward), ~1/3, when a backward costs two forwards)."""
    compute_increase: float
    """Forward + backward seconds with over without, minus 1: the same cost measured as
    the difference of two runs (noisier: it also holds the runs' timing noise)."""
    memory_saved: float
    """1 - stored activation bytes of the fullest stage with / those of the fullest stage
    without (the stage that decides whether a device's memory suffices; it may be a
    different stage in the two runs)."""

    def __str__(self) -> str:
        return tr("recomputation cost {compute} more compute time, saved {memory} of activation memory",
                  compute=f"{100 * self.extra_compute:.1f} %", memory=f"{100 * self.memory_saved:.1f} %")


def _compute_seconds(result: TrainResult) -> tuple[float, float]:
    """Forward + backward seconds of every stage and the recomputation seconds, warm-up step left out."""
    steps = result.timeline.steps
    skip = steps[0] if len(steps) > 1 else None
    busy = sum(op.duration for op in result.timeline.ops if op.kind in ("F", "B") and op.step != skip)
    redo = result.recompute_time[[k for k in range(result.recompute_time.shape[0]) if k != skip]]
    return float(busy), float(redo.sum())


def recompute_overhead(baseline: TrainResult, recomputed: TrainResult) -> RecomputeOverhead:
    """Measured cost and saving of activation recomputation, from two runs of one pipeline
    (the first step of each, a warm-up, left out of the times).

    Parameters
    ----------
    baseline : course_lib.models.TrainResult
        A :func:`train_pipeline` run with ``recompute=False``.
    recomputed : course_lib.models.TrainResult
        The same pipeline (boundaries, schedule, micro-batches, replicas) with ``recompute=True``.

    Returns
    -------
    RecomputeOverhead
        ``extra_compute``: recomputation seconds / forward + backward seconds of the
        baseline; ``compute_increase``: forward + backward seconds with / without - 1;
        ``memory_saved``: 1 - stored activation bytes with / without, each on its run's
        fullest stage.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> from course_lib.datasets import load_digits
    >>> d = load_digits("train")
    >>> kw = dict(boundaries=(0, 2, 4), micro_batches=4, batch_size=64, steps=3)
    >>> model = MLP((64, 32, 32, 32, 10))
    >>> plain = train_pipeline(model, d.x, d.y, **kw)
    >>> redo = train_pipeline(model, d.x, d.y, recompute=True, **kw)
    >>> bool(np.array_equal(plain.params, redo.params))
    True
    >>> plain.stored_activation_bytes.tolist()    # 64 rows x (64 + 32 + 32), (32 + 32 + 10) x 4 B
    [32768, 18944]
    >>> redo.stored_activation_bytes.tolist()     # 64 rows x 64, 32 x 4 B: the inputs only
    [16384, 8192]
    >>> o = recompute_overhead(plain, redo)
    >>> round(o.memory_saved, 4), o.extra_compute > 0     # 1 - 64 / (64 + 32 + 32)
    (0.5, True)
    """
    for name, res, flag in (("baseline", baseline, False), ("recomputed", recomputed, True)):
        check_type(res, name, TrainResult, "a course_lib.models.TrainResult")
        if res.timeline is None or res.recompute_time is None or res.stored_activation_bytes is None:
            raise ValueError(f"{name} must be a process run (train_pipeline), not the serial reference")
        if res.recompute != flag:
            raise ValueError(f"{name} must be a run with recompute={flag}, got recompute={res.recompute}")
    same = ("boundaries", "schedule", "micro_batches", "replicas")
    if any(getattr(baseline, f) != getattr(recomputed, f) for f in same):
        raise ValueError(
            "recomputed must be a run of the same pipeline as baseline: "
            + ", ".join(f"{f} {getattr(baseline, f)!r} vs {getattr(recomputed, f)!r}" for f in same)
        )
    busy_without, _ = _compute_seconds(baseline)
    busy_with, redo = _compute_seconds(recomputed)
    if busy_without <= 0:
        raise ValueError("baseline must have measured compute time > 0")
    saved = 1.0 - recomputed.stored_activation_bytes.max() / baseline.stored_activation_bytes.max()
    return RecomputeOverhead(redo / busy_without, busy_with / busy_without - 1.0, float(saved))
