"""Model (layer-wise) and pipeline parallelism of the running example, with real processes.

Model parallelism (模型并行) splits the *layers* of :class:`course_lib.models.MLP` into
``N_p`` consecutive stages (流水阶段), one process each. Stage ``q`` owns the contiguous
slice ``model.layer_range(start, stop)`` of the flat parameter buffer; activations
travel forward to the next stage, activation gradients backward to the previous one,
and every stage updates its own parameters. Pipeline parallelism (流水并行) cuts the
batch into ``M`` micro-batches (微批次) so that stages work on different micro-batches
at the same time, in the order of a schedule of :mod:`course_lib.schedule`
(GPipe or 1F1B). Both schedules are synchronous: the parameters equal those of the
serial run (up to floating-point summation order).

Interleaved 1F1B (``virtual_stages = v > 1``, Megatron-LM, Narayanan et al. 2021,
section 2.2.2): the layers are cut into ``v N_p`` model chunks (virtual stages) and
process ``q`` holds chunks ``q, q + N_p, ...``, one :class:`Stage` each; every hand-over
between consecutive chunks goes through a shared buffer and a pipe like any other
(chunk ``c`` of the last process hands over to chunk ``c + 1`` of the first). The bubble
shrinks ``v``-fold; the price is ``v N_p - 1`` hand-overs per micro-batch instead of
``N_p - 1`` (:func:`course_lib.schedule.virtual_handovers`).

Activation recomputation (激活重计算, notebook section "06 · Memory: activation
recomputation"): with ``recompute=True`` a stage keeps only the *input* of every
micro-batch in flight and re-runs its forward at the start of the backward (GPipe's
trade of compute for memory). Same floating-point operations, so the parameters are
bitwise those of ``recompute=False``; the result reports the measured cost
(``recompute_time``) and saving (``stored_activation_bytes``), and
:func:`recompute_overhead` compares two runs.

:func:`train_microbatched`
    The arithmetic of a pipeline in one process (the reference,
    :func:`course_lib.reference.train_microbatched`).
:func:`train_pipeline`
    ``N_p`` processes, one per stage; its :class:`course_lib.models.TrainResult` holds the
    measured :class:`course_lib.schedule.Timeline`.
:func:`course_lib.parallel.hybrid.train_hybrid`
    ``N_d`` replicas of the pipeline (data x pipeline parallelism): ``train_pipeline(data=N_d)``.
:func:`recompute_overhead`
    What activation recomputation cost and saved, from a run with and one without.
"""

from __future__ import annotations

import contextlib
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._validate import check_int, check_positive, check_type
from ..models import MLP, TrainResult, sgd_step, softmax_cross_entropy
from ..reference import layer_outputs
from ..schedule import (
    StageOp,
    Timeline,
    check_boundaries,
    check_schedule,
    check_virtual_stages,
    partition_layers,
    schedule_order,
)
from .job import check_flag, check_job, start_params
from .launch import Launcher, StepClock
from .partition import batch_schedule, batch_sizes, replica_rows, sum_rows

__all__ = [
    "PRELOAD",
    "RecomputeOverhead",
    "recompute_overhead",
    "Stage",
    "stage_worker",
    "train_pipeline",
]


@dataclass(frozen=True)
class RecomputeOverhead:
    """What activation recomputation cost and saved: :func:`recompute_overhead`.

    Notebook section "06 · Memory: activation recomputation". ``str()`` gives the
    sentence "recomputation cost X % more compute time, saved Y % of activation memory".
    """

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
        return (f"recomputation cost {100 * self.extra_compute:.1f} % more compute time, "
                f"saved {100 * self.memory_saved:.1f} % of activation memory")


def _compute_seconds(result: TrainResult) -> tuple[float, float]:
    """Forward + backward seconds of every stage and the recomputation seconds, warm-up step left out."""
    steps = result.timeline.steps
    skip = steps[0] if len(steps) > 1 else None
    busy = sum(op.duration for op in result.timeline.ops if op.kind in ("F", "B") and op.step != skip)
    redo = result.recompute_time[[k for k in range(result.recompute_time.shape[0]) if k != skip]]
    return float(busy), float(redo.sum())


def recompute_overhead(baseline: TrainResult, recomputed: TrainResult) -> RecomputeOverhead:
    """Measured cost and saving of activation recomputation, from two runs of one pipeline.

    Notebook section "06 · Memory: activation recomputation". The first step of each
    run (warm-up) is left out of the times.

    Parameters
    ----------
    baseline : course_lib.models.TrainResult
        A :func:`train_pipeline` (or :func:`course_lib.parallel.hybrid.train_hybrid`) run
        with ``recompute=False``.
    recomputed : course_lib.models.TrainResult
        The same pipeline (boundaries, schedule, micro-batches, replicas) with
        ``recompute=True``.

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


def _resolve_boundaries(model, stages, boundaries, virtual_stages: int = 1) -> tuple[int, ...]:
    """The chunk boundaries: ``v N_p + 1`` layer indices (``N_p + 1`` without interleaving)."""
    check_type(model, "model", MLP, "a course_lib.models.MLP")
    v = virtual_stages
    if boundaries is not None:
        b = check_boundaries(model, boundaries)
        if (len(b) - 1) % v:
            raise ValueError(f"boundaries must split the layers into virtual_stages x stages chunks "
                             f"(v = {v}), got {len(b) - 1} chunks: {b}")
        if stages is not None and check_int(stages, "stages", 1) * v != len(b) - 1:
            raise ValueError(f"stages = {stages} does not match boundaries {b} ({len(b) - 1} stages)")
        return b
    n_stages = 2 if stages is None else check_int(stages, "stages", 1, model.n_layers)
    if v * n_stages > model.n_layers:
        raise ValueError(f"virtual_stages x stages = {v} x {n_stages} model chunks must be at most "
                         f"n_layers = {model.n_layers} (a chunk holds at least one layer)")
    return partition_layers(model, v * n_stages)


def _nbytes(arrays) -> int:
    return int(sum(a.nbytes for a in arrays))


@dataclass(frozen=True)
class _StageJob:
    """Everything a stage process needs (picklable, sent once at start-up)."""

    model: object
    boundaries: tuple[int, ...]
    replicas: int
    schedule: str
    micro_batches: int
    n_samples: int
    batch_size: int
    seed: int
    steps: int
    lr: float
    params: object  # SharedSpec (replicas, n_params): each replica's parameters
    x: object  # SharedSpec of the inputs (stage 0 reads it)
    y: object  # SharedSpec of the labels (the last stage reads them)
    acts: tuple  # SharedSpec per boundary: activations, (batch, width), rows = samples
    grads: tuple  # SharedSpec per boundary: gradients of those activations
    reduce: object  # SharedSpec (2, replicas, n_params) for the all-reduce, or None
    fault: object
    blas_threads: int | None
    recompute: bool = False
    virtual_stages: int = 1

    def plan(self):
        """Every step's sample indices, derived from the seed in the stage itself (the
        parent's plan is never pickled into a starting process: it would block its start)."""
        return batch_schedule(self.n_samples, self.batch_size, self.seed, steps=self.steps)


_MSG = struct.Struct("<qq")  # (step, micro-batch) of a hand-over


class _Stash(dict):
    """Activations kept from a micro-batch's forward until its backward; ``peak_bytes``
    is the most they ever held at once (what 1F1B keeps small)."""

    peak_bytes = 0

    def __setitem__(self, micro, acts):
        super().__setitem__(micro, acts)
        self.peak_bytes = max(self.peak_bytes, sum(_nbytes(a) for a in self.values()))


class _ChunkStash:
    """Chunk ``chunk``'s view of its process's :class:`_Stash` (keys ``(chunk, micro)``):
    the process's peak counts every chunk's activations held at once."""

    def __init__(self, stash: _Stash, chunk: int):
        self.stash, self.chunk = stash, chunk

    def __setitem__(self, micro, acts):
        self.stash[(self.chunk, micro)] = acts

    def pop(self, micro):
        return self.stash.pop((self.chunk, micro))


class _ChunkClock:
    """The process's :class:`StepClock` seen from one model chunk: the operations it
    records carry the chunk (interleaved 1F1B; chunk 0 otherwise)."""

    def __init__(self, clock: StepClock, chunk: int):
        self._clock, self.chunk = clock, chunk

    def __getattr__(self, name):
        return getattr(self._clock, name)

    def __call__(self, phase: str):
        return self._clock(phase)

    @contextlib.contextmanager
    def op(self, kind: str, micro: int = -1):
        try:
            with self._clock.op(kind, micro):
                yield
        finally:
            self._clock.ops[-1] = (*self._clock.ops[-1], self.chunk)


class Stage:
    """One pipeline stage of one replica: its layers, its buffers, and its forward and
    backward of one micro-batch (notebook 10, "Model parallelism: split the layers").

    Stage ``s`` of replica ``d`` owns layers ``lo .. hi - 1``. Interleaved 1F1B: a process
    holds ``v`` stages, its chunks ``c = 0 .. v - 1``, and ``s = c N_p + q`` is the virtual
    stage of chunk ``c`` on process ``q``. Activations and their
    gradients travel through shared arrays, one per boundary between stages; a short
    message on a pipe says "micro-batch ``m`` is ready" (:meth:`receive`,
    :meth:`hand_over`). ``stash`` keeps each micro-batch's activations from its forward
    until its backward; with ``job.recompute`` only the stage's input, and the backward
    recomputes the rest (section "06 · Memory: activation recomputation").
    """

    def __init__(self, wctx, job: _StageJob, stack: contextlib.ExitStack, pipes, clock, chunk: int = 0,
                 stash: _Stash | None = None):
        self.wctx, self.job, self.model = wctx, job, job.model
        self.clock = _ChunkClock(clock, chunk)
        self.recv_act, self.send_act, self.recv_grad, self.send_grad = pipes
        n_chunks = len(job.boundaries) - 1
        self.n_stages = n_chunks // job.virtual_stages  # processes N_p of a replica
        self.d, self.q = divmod(wctx.rank, self.n_stages)
        self.s = chunk * self.n_stages + self.q  # the (virtual) stage: my layers' chunk of the model
        self.lo, self.hi = job.boundaries[self.s], job.boundaries[self.s + 1]
        self.first, self.last = self.s == 0, self.s == n_chunks - 1
        self.params_slice = job.model.layer_range(self.lo, self.hi)

        def attach(specs, k, needed=True):  # map shared array specs[k] if this stage uses it
            return stack.enter_context(specs[k].attach()) if needed else None

        self.params = attach([job.params], 0)[self.d]
        self.x, self.y = attach([job.x], 0, self.first), attach([job.y], 0, self.last)
        self.act_in = attach(job.acts, self.s - 1, not self.first)
        self.act_out = attach(job.acts, self.s, not self.last)
        self.grad_in = attach(job.grads, self.s, not self.last)
        self.grad_out = attach(job.grads, self.s - 1, not self.first)
        self.reduce = attach([job.reduce], 0, job.reduce is not None)
        self.own = np.zeros(job.model.n_params, job.model.dtype) if self.reduce is None else None
        self.total = np.zeros(self.params_slice.stop - self.params_slice.start, dtype=job.model.dtype)
        self.stash = _ChunkStash(_Stash() if stash is None else stash, chunk)
        self._orders = {}

    def order(self, micro_batches: int) -> list[tuple[str, int, int]]:
        """This process's operations ``(kind, micro, chunk)`` of one step
        (:func:`schedule_order`; chunk 0 unless interleaved), computed once."""
        if micro_batches not in self._orders:
            orders = schedule_order(self.n_stages, micro_batches, self.job.schedule,
                                    virtual_stages=self.job.virtual_stages)
            self._orders[micro_batches] = [(*op, 0)[:3] for op in orders[self.q]]
        return self._orders[micro_batches]

    def gradient_buffer(self) -> np.ndarray:
        """This step's flat gradient, my layers' slice zeroed (hybrid runs: in shared
        memory, where the other replicas read it, alternating between two steps)."""
        grad = self.own if self.reduce is None else self.reduce[self.clock.step % 2, self.d]
        grad[self.params_slice] = 0
        return grad

    def receive(self, conn, what: str, micro: int, buffer: np.ndarray) -> np.ndarray:
        """Wait for the neighbour's message that ``buffer`` holds micro-batch ``micro``."""
        step, wctx = self.clock.step, self.wctx
        if not conn.poll(wctx.wait_timeout):
            raise TimeoutError(f"stage {wctx.rank} waited {wctx.wait_timeout:g} s for {what} of micro-batch {micro}")
        got = _MSG.unpack(conn.recv_bytes())
        if got != (step, micro):  # pragma: no cover - would be a bug in the schedules
            raise RuntimeError(f"stage {wctx.rank} expected {what} of (step, micro) {(step, micro)}, got {got}")
        return buffer

    def hand_over(self, conn, buffer: np.ndarray, values: np.ndarray, micro: int) -> None:
        """Write ``values`` into the shared ``buffer`` and tell the neighbour."""
        buffer[...] = values
        self.clock.add(bytes=values.nbytes)
        conn.send_bytes(_MSG.pack(self.clock.step, micro))

    def forward(self, m: int, rows: tuple[int, int], idx: np.ndarray) -> None:
        """Forward of micro-batch ``m`` through my layers; hand the output to the next stage."""
        r0, r1 = rows
        a = self.x[idx[r0:r1]] if self.first else self.receive(self.recv_act, "activations", m, self.act_in[r0:r1])
        with self.clock.op("F", m):
            acts = layer_outputs(self.model, self.params, self.lo, self.hi, a)
            self.stash[m] = acts[:1] if self.job.recompute else acts
        if not self.last:
            self.hand_over(self.send_act, self.act_out[r0:r1], acts[-1], m)

    def backward(self, m: int, rows: tuple[int, int], idx: np.ndarray, grad: np.ndarray, scale) -> None:
        """Backward of micro-batch ``m``: add my layers' gradients into ``grad``, hand the
        gradient of my input back to the previous stage."""
        r0, r1 = rows
        g = None if self.last else self.receive(self.recv_grad, "gradients", m, self.grad_in[r0:r1])
        with self.clock.op("B", m):
            acts = self.stash.pop(m)
            if self.job.recompute:  # the forward again, from the stored input: same operations
                with self.clock("recompute"):
                    acts = layer_outputs(self.model, self.params, self.lo, self.hi, acts[0])
            if self.last:
                loss, g = softmax_cross_entropy(acts[-1], self.y[idx[r0:r1]], "sum")
                g *= scale
                self.clock.add(loss=loss)
            for i in reversed(range(self.lo, self.hi)):
                g = self.model.layer_backward(self.params, i, acts[i - self.lo], acts[i - self.lo + 1], g,
                                              grad, need_input_grad=i > 0)
        if not self.first:
            self.hand_over(self.send_grad, self.grad_out[r0:r1], g, m)


def stage_worker(chunks: list[Stage], job: _StageJob, barrier, clock) -> None:
    """The loop of one pipeline process (notebook 10, "Model parallelism: split the layers").

    ``chunks`` are the stages this process holds (one; ``v`` when interleaved). Every
    step: their forwards and backwards in the schedule's order, then for each (hybrid
    runs) the all-reduce of its gradient with the same stage of the other replicas, then
    the update of its own parameters.
    """
    for idx in clock.steps(job.plan()):
        grads = [st.gradient_buffer() for st in chunks]
        rows = replica_rows(idx.size, job.replicas, job.micro_batches)[chunks[0].d]  # my micro-batches
        scale = np.asarray(1.0 / idx.size, dtype=job.model.dtype)
        for kind, m, c in chunks[0].order(len(rows)):  # micro-batch m on my chunk c
            if kind == "F":
                chunks[c].forward(m, rows[m], idx)
            else:
                chunks[c].backward(m, rows[m], idx, grads[c], scale)
        for st, grad in zip(chunks, grads):
            update = grad[st.params_slice]
            if st.reduce is not None:  # hybrid: add my gradient to the other replicas' of my stage
                with st.clock.op("A"):
                    barrier.wait(st.d, st.wctx.wait_timeout)
                    update = sum_rows(st.reduce[clock.step % 2, :, st.params_slice], st.total)
            with st.clock.op("U"):
                sgd_step(st.params[st.params_slice], update, job.lr)


def _stage_process(wctx, job: _StageJob, chunk_pipes, barrier):
    """Entry point of a stage process: its clock, its :class:`Stage` (one per chunk, sharing
    one stash), :func:`stage_worker`; returns the recorded operations ``(kind, micro, start,
    end, step, chunk)``, the losses, and (peak stored activation bytes, bytes handed over,
    recomputation seconds of every step, the time it was ready)."""
    from ..timing import blas_threads

    clock = StepClock(wctx, job.steps, job.fault, per_op=True)
    with contextlib.ExitStack() as stack:
        stack.enter_context(blas_threads(job.blas_threads))
        stash = _Stash()
        chunks = [Stage(wctx, job, stack, pipes, clock, c, stash) for c, pipes in enumerate(chunk_pipes)]
        stage_worker(chunks, job, barrier, clock)
        peak = stash.peak_bytes
        del chunks, stash
    zeros = np.zeros(job.steps)
    memory = (peak, clock.counts.get("bytes", zeros).astype(np.int64), clock.timings.get("recompute", zeros),
              clock.ready)
    return clock.ops, clock.counts.get("loss", zeros).tolist(), memory


PRELOAD = ("course_lib.parallel.workers", "course_lib.models", "course_lib.parallel.pipeline", "threadpoolctl")


def train_pipeline(
    model,
    x: np.ndarray,
    y: np.ndarray,
    *,
    stages: int | None = None,
    boundaries: Sequence[int] | None = None,
    micro_batches: int = 4,
    schedule: str = "gpipe",
    batch_size: int = 32,
    steps: int | None = None,
    epochs: int | None = None,
    lr: float = 0.1,
    seed: int = 0,
    params: np.ndarray | None = None,
    start_method: str | None = None,
    timeout: float = 60.0,
    blas_threads: int | None = 1,
    fault=None,
    progress: bool | None = False,
    data: int = 1,
    recompute: bool = False,
    virtual_stages: int = 1,
) -> TrainResult:
    """Train the running example with its layers split over ``N_p`` stage processes.

    Stage ``q`` owns layers ``boundaries[s] .. boundaries[s + 1] - 1`` and their slice
    of the flat parameter buffer (which lives in shared memory and is updated in place
    by its owner). Per step, the batch is cut into ``micro_batches`` contiguous
    micro-batches; activations go forward and their gradients backward through
    shared-memory buffers, with a short message through a pipe per hand-over. Each
    stage runs :func:`schedule_order` and records when every forward, backward and
    update started and ended.

    Parameters
    ----------
    model : MLP
    x, y : numpy.ndarray
        Inputs (n, sizes[0]) and integer labels (n,).
    stages : int, optional
        ``N_p`` in [1, n_layers]; the layers are split by :func:`partition_layers`
        (default 2) into ``v N_p`` chunks.
    boundaries : sequence of int, optional
        An explicit split ``(0, b1, ..., n_layers)`` instead (e.g. an uneven one); with
        ``virtual_stages = v`` it has ``v N_p + 1`` entries (chunk boundaries).
    micro_batches : int
        ``M`` (per replica) in [1, batch_size // N_d]; a smaller last batch uses
        ``min(M, its size)``. Interleaved: every step's ``M`` a multiple of ``N_p``.
    schedule : {"gpipe", "1f1b"}
    batch_size, steps, epochs, lr, seed, params
        As in :func:`course_lib.reference.train_serial` (same batches as
        :func:`course_lib.models.train`, same initial parameters); ``steps`` or ``epochs``,
        not both (neither: one epoch).
    start_method : {"fork", "forkserver", "spawn"}, optional
        Default: :func:`course_lib.parallel.workers.default_start_method`.
    timeout : float
        Seconds without progress after which the run is stopped with
        :class:`course_lib.parallel.workers.WorkerTimeout`.
    blas_threads : int or None
        BLAS threads per stage (1: the stages do not fight over the cores).
    fault : course_lib.parallel.workers.Fault, optional
        Inject a failure (tests, demonstrations): ``rank`` is the process (in
        [0, N_d * N_p - 1], else ValueError), ``step`` the step.
    progress : bool or None
        Progress bar: False never, None in notebooks for runs over ~1.5 s.
    data : int
        Replicas ``N_d`` of the whole pipeline in [1, batch_size] (``N_d > 1`` is hybrid
        parallelism, see :func:`course_lib.parallel.hybrid.train_hybrid`): ``N_d * N_p``
        processes, process ``replica * N_p + q`` is stage ``q`` of replica ``replica``; each replica
        trains on a contiguous shard of every batch, then the ``N_d`` copies of each stage
        all-reduce their gradient (shared memory, in replica order). ``micro_batches`` is
        per replica; ``fault.rank`` counts processes, in [0, N_d * N_p - 1].
    recompute : bool
        Activation recomputation (激活重计算, notebook section "06 · Memory: activation
        recomputation"): each stage stores only the input of every micro-batch in
        flight and re-runs its layers' forward at the start of the backward. Same
        operations in the same order, so the parameters are bitwise those of
        ``recompute=False``; the result's ``stored_activation_bytes`` and
        ``recompute_time`` show what it saved and cost (:func:`recompute_overhead`).
    virtual_stages : int
        ``v`` >= 1 model chunks per process: interleaved 1F1B when ``v > 1`` (Megatron-LM;
        needs ``schedule="1f1b"``, ``M`` a multiple of ``N_p`` and ``v N_p <= n_layers``,
        else ValueError). Process ``q`` holds chunks ``q, q + N_p, ...``; the timeline's
        operations carry their chunk, ``result.bubble_per_step()`` is the measured idle
        share to compare with ``bubble_fraction(N_p, M, v)``, and ``bytes_per_step`` the
        ``v N_p - 1`` boundaries' hand-overs.

    Returns
    -------
    course_lib.models.TrainResult
        ``backend="pipeline"``, the measured ``timeline``; ``compute`` (forwards,
        backwards, updates), ``communication`` (a hybrid's all-reduces) and ``waiting``
        (bubble and hand-overs) of every process, from the timeline; ``memory`` the peak
        ``activations`` each stage stored; ``bytes_per_step`` every hand-over.
        Final parameters (of replica 0; ``replicas_in_sync`` says whether all agree
        bitwise): equal to :func:`course_lib.reference.train_microbatched` bitwise (one BLAS thread)
        and to :func:`course_lib.models.train` up to float32 rounding of the different
        summation order (a ReLU input within rounding distance of zero may flip, which
        changes that unit's gradient: then single parameters differ by more, ~1e-5 seen
        after three steps of a 1,024-wide MLP).

    Raises
    ------
    course_lib.parallel.workers.WorkerError, WorkerDied, WorkerTimeout
        A stage failed; every stage has been stopped and every shared segment removed.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> from course_lib.datasets import load_digits
    >>> d = load_digits("train")
    >>> model = MLP((64, 32, 32, 10))
    >>> res = train_pipeline(model, d.x, d.y, stages=2, micro_batches=4, steps=5)
    >>> from course_lib.reference import train_microbatched
    >>> ref = train_microbatched(model, d.x, d.y, micro_batches=4, steps=5)
    >>> bool(np.allclose(res.params, ref.params, rtol=0, atol=1e-6)), len(res.timeline.steps)
    (True, 5)
    """
    from .workers import check_start_method

    t_call = time.perf_counter()
    check_schedule(schedule)
    v = check_virtual_stages(virtual_stages, 1, None, schedule)
    bounds = _resolve_boundaries(model, stages, boundaries, v)
    n_chunks = len(bounds) - 1
    n_stages = n_chunks // v  # processes per replica
    x, y, job = check_job(model, x, y, batch_size, steps, epochs, lr, seed, data, blas_threads, fault,
                          stages=n_stages, micro_batches=micro_batches)
    data, micro_batches, world = job.workers, job.micro_batches, job.workers * n_stages
    recompute = check_flag(recompute, "recompute")
    timeout = check_positive(timeout, "timeout")
    method = check_start_method(start_method)
    p0 = start_params(model, params, job.seed)
    sizes = batch_sizes(job.n_samples, job.batch_size, job.steps)
    for size in np.unique(sizes):  # interleaved: every step's micro-batches come in groups of N_p
        for rows in replica_rows(int(size), data, micro_batches):
            check_virtual_stages(v, n_stages, len(rows), schedule)
    ops_per_worker = v * sum(  # two sizes at most: every batch, and the last of an epoch
        2 * len(replica_rows(int(size), data, micro_batches)[-1]) * int(np.sum(sizes == size))
        for size in np.unique(sizes)
    )
    ops_per_worker += v * sizes.size * (2 if data > 1 else 1)  # every step's updates (and all-reduces)
    t_wall = time.time()
    with Launcher(method) as launch:
        shared_params = launch.shared((data, p0.size), model.dtype, np.broadcast_to(p0, (data, p0.size)))
        shared_x, shared_y = launch.shared(x.shape, model.dtype, x), launch.shared(y.shape, np.int64, y)
        widths = [model.sizes[b] for b in bounds[1:-1]]  # one per boundary between (virtual) stages
        acts = [launch.shared((job.batch_size, w), model.dtype) for w in widths]
        grads = [launch.shared((job.batch_size, w), model.dtype) for w in widths]
        reduce = launch.shared((2, data, p0.size), model.dtype) if data > 1 else None
        # per replica and boundary b: (recv, send) from (virtual) stage b to b + 1, and back
        pipes_f = [[launch.pipe() for _ in widths] for _ in range(data)]
        pipes_b = [[launch.pipe() for _ in widths] for _ in range(data)]
        barriers = [launch.barrier(data) if data > 1 else None for _ in range(n_stages)]
        stage_job = _StageJob(
            model=model, boundaries=bounds, replicas=data, schedule=schedule,
            micro_batches=micro_batches, n_samples=job.n_samples, batch_size=job.batch_size,
            seed=job.seed, steps=job.steps, lr=job.lr, params=shared_params.spec,
            x=shared_x.spec, y=shared_y.spec, acts=tuple(a.spec for a in acts),
            grads=tuple(g.spec for g in grads), reduce=None if reduce is None else reduce.spec,
            fault=job.fault, blas_threads=job.blas_threads, recompute=recompute, virtual_stages=v,
        )
        rank_args = []
        for d in range(data):
            f, b = pipes_f[d], pipes_b[d]
            for q in range(n_stages):
                chunk_pipes = tuple(
                    (f[s - 1][0] if s > 0 else None, f[s][1] if s < n_chunks - 1 else None,
                     b[s][0] if s < n_chunks - 1 else None, b[s - 1][1] if s > 0 else None)
                    for s in range(q, n_chunks, n_stages)  # my chunks' virtual stages q, q + N_p, ...
                )
                rank_args.append((chunk_pipes, barriers[q]))
        results = launch.run(
            _stage_process, world, args=(stage_job,), rank_args=rank_args, timeout=timeout, name="ddl-stage",
            preload=PRELOAD, progress_total=ops_per_worker, progress_label="pipeline ops", progress=progress,
        )
        final = shared_params.array.copy()

    records = [
        StageOp(r % n_stages, kind, m, t0, t1, step, r // n_stages, chunk)
        for r, (ops, _, _) in enumerate(results)
        for kind, m, t0, t1, step, chunk in ops
    ]
    start = min(op.start for op in records)
    shifted = tuple(sorted((o.shifted(start) for o in records), key=lambda o: (o.start, o.replica, o.stage)))
    timeline = Timeline(shifted, n_stages, micro_batches, schedule, "measured", data, v)
    # the loss of a step: the sum of every replica's last stage, over the batch
    per_replica = np.array([results[d * n_stages + n_stages - 1][1] for d in range(data)])
    step_time, compute, communication = _phases(timeline, job.steps)
    return TrainResult(
        params=final[0].copy(), loss=per_replica.sum(axis=0) / sizes, step_time=step_time, compute=compute,
        communication=communication, waiting=np.maximum(step_time[:, None] - compute - communication, 0.0),
        backend="pipeline", batch_size=job.batch_size, workers=world,
        memory=[{"activations": int(memory[0])} for _, _, memory in results],
        bytes_per_step=np.sum([memory[1] for _, _, memory in results], axis=0),
        replicas_in_sync=all(np.array_equal(final[0], final[d]) for d in range(1, data)),
        start_method=method, blas_threads=job.blas_threads,
        startup_time=max(0.0, max(memory[3] for _, _, memory in results) - t_wall),
        wall_time=time.perf_counter() - t_call, timeline=timeline, boundaries=bounds, schedule=schedule,
        micro_batches=micro_batches, replicas=data, recompute=recompute,
        recompute_time=np.stack([memory[2] for _, _, memory in results], axis=1),
    )


def _phases(timeline: Timeline, steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From a measured timeline: every step's time (first forward to last update), and the
    seconds each process (row ``replica * N_p + q``) spent computing (F, B, U) and in
    all-reduces (A) in every step."""
    rows = timeline.replicas * timeline.n_stages
    first, last = np.full(steps, np.inf), np.full(steps, -np.inf)
    compute, communication = np.zeros((steps, rows)), np.zeros((steps, rows))
    for op in timeline.ops:
        first[op.step], last[op.step] = min(first[op.step], op.start), max(last[op.step], op.end)
        busy = communication if op.kind == "A" else compute
        busy[op.step, op.replica * timeline.n_stages + op.stage] += op.duration
    return last - first, compute, communication
