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

Activation recomputation (激活重计算, notebook section "06 · Memory: activation
recomputation"): with ``recompute=True`` a stage keeps only the *input* of every
micro-batch in flight and re-runs its forward at the start of the backward (GPipe's
trade of compute for memory). Same floating-point operations, so the parameters are
bitwise those of ``recompute=False``; the result reports the measured cost
(``recompute_time``) and saving (``stored_activation_bytes``), and
:func:`recompute_overhead` compares two runs.

:func:`train_microbatched`
    The arithmetic of a pipeline in one process (the reference).
:func:`train_pipeline`
    ``N_p`` processes, one per stage; returns the measured :class:`Timeline`.
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
from ..models import sgd_step, softmax_cross_entropy
from ..schedule import (
    StageOp,
    Timeline,
    check_boundaries,
    check_schedule,
    partition_layers,
    schedule_order,
)
from .launch import Launcher, StepClock
from .partition import batch_schedule, batch_sizes, replica_rows, steps_per_epoch, sum_rows

__all__ = [
    "PRELOAD",
    "PipelineResult",
    "RecomputeOverhead",
    "recompute_overhead",
    "Stage",
    "stage_worker",
    "train_microbatched",
    "train_pipeline",
]


@dataclass
class PipelineResult:
    """What :func:`train_pipeline`, :func:`train_hybrid` and :func:`train_microbatched` return."""

    params: np.ndarray
    """Final flat parameter buffer (of replica 0, in a hybrid run)."""
    step_loss: list[float]
    """Mean loss of every step's batch (computed by the last stage)."""
    timeline: Timeline | None
    """Measured timeline of every step (None for the serial reference)."""
    boundaries: tuple[int, ...]
    schedule: str
    micro_batches: int
    replicas: int = 1
    """Data-parallel replicas ``N_d`` (1 for a plain pipeline)."""
    replicas_in_sync: bool = True
    """Whether every replica ended with bitwise the same parameters."""
    serial_step_times: tuple[float, ...] | None = None
    """Wall-clock seconds of every step of the serial reference (None for process runs)."""
    recompute: bool = False
    """Whether the run recomputed activations in the backward (``recompute=True``)."""
    stored_activation_bytes: np.ndarray | None = None
    """Peak bytes of activations each stage held for pending backward passes, shape
    ``(N_d * N_p,)`` (row ``replica * N_p + q``, like the timeline's rows): measured by
    the stage as the summed ``nbytes`` of the arrays it stashed, maximum over the run.
    Without recomputation: the stage's input and every layer output of each micro-batch
    in flight; with it: only the inputs. The one micro-batch whose activations a
    backward re-materialises for a moment is not counted. The serial reference has one
    row (the whole model, one micro-batch at a time)."""
    recompute_time: np.ndarray | None = None
    """Seconds each stage spent recomputing forwards inside its backwards, shape
    ``(steps, replicas * stages)`` (serial reference: ``(steps, 1)``); part of the
    backward times of the timeline. All zero when ``recompute`` is False."""
    bytes_per_step: np.ndarray | None = None
    """(steps,) bytes handed over between stages in each step, all stages and replicas:
    every boundary's activations forward and their gradients backward (measured as the
    ``nbytes`` each stage writes; None for the serial reference)."""

    def bubble_per_step(self) -> np.ndarray:
        """Measured idle share of every step."""
        if self.timeline is None:
            raise ValueError("the serial reference has no timeline")
        return self.timeline.bubble_per_step()

    def time_per_step(self, skip: int = 1) -> float:
        """Median wall-clock time of a step, ignoring the first ``skip`` (warm-up) steps."""
        times = self.step_times()
        return float(np.median(times[skip:] if times.size > skip else times))

    def step_times(self) -> np.ndarray:
        """Wall-clock time of every step, seconds: first forward to last update.

        For the serial reference (:func:`train_microbatched`), the time of each pass of
        its loop (forwards, backwards and the update), measured with
        :func:`time.perf_counter`.
        """
        if self.timeline is None:
            if self.serial_step_times is None:
                raise ValueError("this result has neither a timeline nor serial step times")
            return np.array(self.serial_step_times)
        out = []
        for k in self.timeline.steps:
            ops = [op for op in self.timeline.ops if op.step == k]
            out.append(max(op.end for op in ops) - min(op.start for op in ops))
        return np.array(out)

    def stage_costs(self, skip_first: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Median measured forward and backward time of one micro-batch on each stage.

        Feed them to :func:`simulate_pipeline` to predict the measured timeline.
        ``skip_first`` leaves out the first step (warm-up: page faults, caches).
        """
        if self.timeline is None:
            raise ValueError("the serial reference has no timeline")
        first = self.timeline.steps[0] if skip_first and len(self.timeline.steps) > 1 else None
        n = self.timeline.n_stages
        fwd, bwd = np.zeros(n), np.zeros(n)
        for s in range(n):
            for kind, out in (("F", fwd), ("B", bwd)):
                d = [op.duration for op in self.timeline.ops
                     if op.stage == s and op.kind == kind and op.step != first]
                out[s] = float(np.median(d))
        return fwd, bwd


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


def _compute_seconds(result: PipelineResult) -> tuple[float, float]:
    """Forward + backward seconds of every stage and the recomputation seconds, warm-up step left out."""
    steps = result.timeline.steps
    skip = steps[0] if len(steps) > 1 else None
    busy = sum(op.duration for op in result.timeline.ops if op.kind in ("F", "B") and op.step != skip)
    redo = result.recompute_time[[k for k in range(result.recompute_time.shape[0]) if k != skip]]
    return float(busy), float(redo.sum())


def recompute_overhead(baseline: PipelineResult, recomputed: PipelineResult) -> RecomputeOverhead:
    """Measured cost and saving of activation recomputation, from two runs of one pipeline.

    Notebook section "06 · Memory: activation recomputation". The first step of each
    run (warm-up) is left out of the times.

    Parameters
    ----------
    baseline : PipelineResult
        A :func:`train_pipeline` (or :func:`train_hybrid`) run with ``recompute=False``.
    recomputed : PipelineResult
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
        check_type(res, name, PipelineResult, "a PipelineResult")
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


def _check_training_args(model, x, y, batch_size, epochs, steps, lr, seed, micro_batches, replicas):
    from ..models import MLP

    if not isinstance(model, MLP):
        raise TypeError(f"model must be a course_lib.models.MLP, got {type(model).__name__}")
    x = model._check_x(x)
    y = model._check_y(y, x.shape[0])
    batch_size = check_int(batch_size, "batch_size", 1)
    epochs = check_int(epochs, "epochs", 1)
    steps = None if steps is None else check_int(steps, "steps", 1)
    seed = check_int(seed, "seed", 0)
    replicas = check_int(replicas, "data", 1, batch_size)
    micro_batches = check_int(micro_batches, "micro_batches", 1, batch_size // replicas)
    check_positive(lr, "lr")
    if x.shape[0] == 0:
        raise ValueError("x must hold at least one sample")
    if steps is None:
        steps = epochs * steps_per_epoch(x.shape[0], min(batch_size, x.shape[0]))
    steps = check_int(steps, "steps", 1, _MAX_STEPS)
    sizes = batch_sizes(x.shape[0], min(batch_size, x.shape[0]), steps)
    short = int(sizes.min())
    if short < replicas:
        raise ValueError(
            f"every batch needs at least data = {replicas} samples (one per replica); the last "
            f"batch of an epoch has {short}: choose batch_size so that it divides the "
            f"{x.shape[0]} samples better, or use steps"
        )
    return x, y, sizes, micro_batches, replicas


def _resolve_boundaries(model, stages, boundaries) -> tuple[int, ...]:
    if boundaries is not None:
        b = check_boundaries(model, boundaries)
        if stages is not None and check_int(stages, "stages", 1) != len(b) - 1:
            raise ValueError(f"stages = {stages} does not match boundaries {b} ({len(b) - 1} stages)")
        return b
    return partition_layers(model, 2 if stages is None else stages)


def train_microbatched(
    model, x: np.ndarray, y: np.ndarray, *, micro_batches: int = 1, data: int = 1,
    batch_size: int = 32, epochs: int = 1, steps: int | None = None, lr: float = 0.1,
    seed: int = 0, params: np.ndarray | None = None, recompute: bool = False,
) -> PipelineResult:
    """Serial reference of the pipeline: the same arithmetic in one process.

    Every step cuts its batch into ``data`` contiguous shards and each shard into the
    same micro-batches as :func:`train_pipeline` / :func:`train_hybrid`, accumulates
    each shard's gradients layer by layer in micro-batch order, adds the shard
    gradients in shard order and takes one SGD step. With one BLAS thread its
    parameters are bitwise equal to the parallel run's; with ``micro_batches=1`` and
    ``data=1`` it is :func:`course_lib.models.train` (same batches, same initial
    parameters). The result's ``step_times()`` are the measured seconds of every step:
    the serial baseline for the parallel runs' ``step_times()``. ``recompute=True``
    keeps only each micro-batch's input and re-runs the forward before the backward,
    as :func:`train_pipeline` does (same parameters, bitwise; the time goes to
    ``recompute_time``).

    Examples
    --------
    >>> from course_lib.models import MLP, train
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
    x, y, sizes, micro_batches, data = _check_training_args(
        model, x, y, batch_size, epochs, steps, lr, seed, micro_batches, data
    )
    plan = batch_schedule(x.shape[0], min(batch_size, x.shape[0]), seed, steps=sizes.size)
    recompute = _check_flag(recompute, "recompute")
    p = model.init_params(seed) if params is None else np.array(params, dtype=model.dtype)
    model._check_flat(p, "params")
    grads = np.zeros((data, p.size), dtype=p.dtype)
    total_grad = np.zeros_like(p)
    losses, seconds, redo, peak = [], [], np.zeros((sizes.size, 1)), 0
    for k, idx in enumerate(plan):
        t0 = time.perf_counter()
        grads.fill(0)
        xb, yb = x[idx], y[idx]
        scale = np.asarray(1.0 / idx.size, dtype=model.dtype)
        total = 0.0
        for d, rows in enumerate(replica_rows(idx.size, data, micro_batches)):
            for r0, r1 in rows:
                acts = _layer_outputs(model, p, 0, model.n_layers, xb[r0:r1])
                stored = acts[:1] if recompute else acts
                peak = max(peak, _nbytes(stored))
                if recompute:  # the forward again, from the stored input, before the backward
                    t1 = time.perf_counter()
                    acts = _layer_outputs(model, p, 0, model.n_layers, stored[0])
                    redo[k, 0] += time.perf_counter() - t1
                loss, g = softmax_cross_entropy(acts[-1], yb[r0:r1], "sum")
                g *= scale
                total += loss
                for i in reversed(range(model.n_layers)):
                    g = model.layer_backward(p, i, acts[i], acts[i + 1], g, grads[d], need_input_grad=i > 0)
        if data == 1:
            sgd_step(p, grads[0], lr)
        else:
            sum_rows(grads, total_grad)
            sgd_step(p, total_grad, lr)
        losses.append(total / idx.size)
        seconds.append(time.perf_counter() - t0)
    return PipelineResult(p, losses, None, (0, model.n_layers), "serial", micro_batches, data,
                          serial_step_times=tuple(seconds), recompute=recompute,
                          stored_activation_bytes=np.array([peak], dtype=np.int64), recompute_time=redo)


def _check_flag(value, name: str) -> bool:
    return bool(check_type(value, name, (bool, np.bool_), "True or False"))


def _layer_outputs(model, params: np.ndarray, lo: int, hi: int, a: np.ndarray) -> list[np.ndarray]:
    """``[a, out(lo), ..., out(hi - 1)]``: the input and the output of every layer in ``[lo, hi)``."""
    acts = [a]
    for i in range(lo, hi):
        acts.append(model.layer_forward(params, i, acts[-1]))
    return acts


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

    def plan(self):
        """Every step's sample indices, derived from the seed in the stage itself (the
        parent's plan is never pickled into a starting process: it would block its start)."""
        return batch_schedule(self.n_samples, self.batch_size, self.seed, steps=self.steps)


_MAX_STEPS = 10**7  # the result holds every step's timings in memory
_MSG = struct.Struct("<qq")  # (step, micro-batch) of a hand-over


class _Stash(dict):
    """Activations kept from a micro-batch's forward until its backward; ``peak_bytes``
    is the most they ever held at once (what 1F1B keeps small)."""

    peak_bytes = 0

    def __setitem__(self, micro, acts):
        super().__setitem__(micro, acts)
        self.peak_bytes = max(self.peak_bytes, sum(_nbytes(a) for a in self.values()))


class Stage:
    """One pipeline stage of one replica: its layers, its buffers, and its forward and
    backward of one micro-batch (notebook 06, "Model parallelism: split the layers").

    Stage ``s`` of replica ``d`` owns layers ``lo .. hi - 1``. Activations and their
    gradients travel through shared arrays, one per boundary between stages; a short
    message on a pipe says "micro-batch ``m`` is ready" (:meth:`receive`,
    :meth:`hand_over`). ``stash`` keeps each micro-batch's activations from its forward
    until its backward; with ``job.recompute`` only the stage's input, and the backward
    recomputes the rest (section "06 · Memory: activation recomputation").
    """

    def __init__(self, wctx, job: _StageJob, stack: contextlib.ExitStack, pipes, clock):
        self.wctx, self.job, self.clock, self.model = wctx, job, clock, job.model
        self.recv_act, self.send_act, self.recv_grad, self.send_grad = pipes
        self.n_stages = len(job.boundaries) - 1
        self.d, self.s = divmod(wctx.rank, self.n_stages)
        self.lo, self.hi = job.boundaries[self.s], job.boundaries[self.s + 1]
        self.first, self.last = self.s == 0, self.s == self.n_stages - 1
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
        self.stash, self._orders = _Stash(), {}

    def order(self, micro_batches: int) -> list[tuple[str, int]]:
        """This stage's operations of one step (:func:`schedule_order`), computed once."""
        if micro_batches not in self._orders:
            self._orders[micro_batches] = schedule_order(self.n_stages, micro_batches, self.job.schedule)[self.s]
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
            acts = _layer_outputs(self.model, self.params, self.lo, self.hi, a)
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
                    acts = _layer_outputs(self.model, self.params, self.lo, self.hi, acts[0])
            if self.last:
                loss, g = softmax_cross_entropy(acts[-1], self.y[idx[r0:r1]], "sum")
                g *= scale
                self.clock.add(loss=loss)
            for i in reversed(range(self.lo, self.hi)):
                g = self.model.layer_backward(self.params, i, acts[i - self.lo], acts[i - self.lo + 1], g,
                                              grad, need_input_grad=i > 0)
        if not self.first:
            self.hand_over(self.send_grad, self.grad_out[r0:r1], g, m)


def stage_worker(st: Stage, job: _StageJob, barrier, clock) -> None:
    """The loop of one pipeline stage (notebook 06, "Model parallelism: split the layers").

    Every step: this stage's forwards and backwards in the schedule's order, then
    (hybrid runs) the all-reduce of this stage's gradient with the same stage of the other
    replicas, then the update of this stage's own parameters.
    """
    for idx in clock.steps(job.plan()):
        grad = st.gradient_buffer()
        rows = replica_rows(idx.size, job.replicas, job.micro_batches)[st.d]  # my micro-batches
        scale = np.asarray(1.0 / idx.size, dtype=job.model.dtype)
        for kind, m in st.order(len(rows)):
            if kind == "F":
                st.forward(m, rows[m], idx)
            else:
                st.backward(m, rows[m], idx, grad, scale)
        update = grad[st.params_slice]
        if st.reduce is not None:  # hybrid: add my gradient to the other replicas' of my stage
            with clock.op("A"):
                barrier.wait(st.d, st.wctx.wait_timeout)
                update = sum_rows(st.reduce[clock.step % 2, :, st.params_slice], st.total)
        with clock.op("U"):
            sgd_step(st.params[st.params_slice], update, job.lr)


def _stage_process(wctx, job: _StageJob, recv_act, send_act, recv_grad, send_grad, barrier):
    """Entry point of a stage process: its clock, its :class:`Stage`, :func:`stage_worker`;
    returns the recorded operations, the losses and the memory and recomputation figures."""
    from ..timing import blas_threads

    clock = StepClock(wctx, job.steps, job.fault, per_op=True)
    with contextlib.ExitStack() as stack:
        stack.enter_context(blas_threads(job.blas_threads))
        st = Stage(wctx, job, stack, (recv_act, send_act, recv_grad, send_grad), clock)
        stage_worker(st, job, barrier, clock)
        peak = st.stash.peak_bytes
        del st
    zeros = np.zeros(job.steps)
    memory = (peak, clock.timings.get("recompute", zeros), clock.counts.get("bytes", zeros).astype(np.int64))
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
    epochs: int = 1,
    steps: int | None = None,
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
) -> PipelineResult:
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
        (default 2).
    boundaries : sequence of int, optional
        An explicit split ``(0, b1, ..., n_layers)`` instead (e.g. an uneven one).
    micro_batches : int
        ``M`` in [1, batch_size]; a smaller last batch uses ``min(M, its size)``.
    schedule : {"gpipe", "1f1b"}
    batch_size, epochs, lr, seed, params
        As in :func:`course_lib.models.train` (same batches, same initial parameters).
    steps : int, optional
        Stop after this many steps (epochs are drawn as needed).
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

    Returns
    -------
    PipelineResult
        Final parameters (of replica 0; ``replicas_in_sync`` says whether all agree
        bitwise): equal to :func:`train_microbatched` bitwise (one BLAS thread)
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
    >>> ref = train_microbatched(model, d.x, d.y, micro_batches=4, steps=5)
    >>> bool(np.allclose(res.params, ref.params, rtol=0, atol=1e-6)), len(res.timeline.steps)
    (True, 5)
    """
    from .workers import Fault, check_start_method

    x, y, sizes, micro_batches, data = _check_training_args(
        model, x, y, batch_size, epochs, steps, lr, seed, micro_batches, data
    )
    bounds = _resolve_boundaries(model, stages, boundaries)
    n_stages = len(bounds) - 1
    check_schedule(schedule)
    recompute = _check_flag(recompute, "recompute")
    timeout = check_positive(timeout, "timeout")
    if fault is not None:
        if not isinstance(fault, Fault):
            raise TypeError(f"fault must be a course_lib.parallel.workers.Fault or None, got {type(fault).__name__}")
        check_int(fault.rank, "fault.rank", 0, data * n_stages - 1)
    if blas_threads is not None:
        blas_threads = check_int(blas_threads, "blas_threads", 1)
    method = check_start_method(start_method)
    p0 = model.init_params(seed) if params is None else np.array(params, dtype=model.dtype)
    model._check_flat(p0, "params")
    ops_per_worker = sum(  # two sizes at most: every batch, and the last of an epoch
        2 * len(replica_rows(int(size), data, micro_batches)[-1]) * int(np.sum(sizes == size))
        for size in np.unique(sizes)
    )
    world = data * n_stages

    ops_per_worker += sizes.size * (2 if data > 1 else 1)  # every step's update (and all-reduce)
    with Launcher(method) as launch:
        shared_params = launch.shared((data, p0.size), model.dtype, np.broadcast_to(p0, (data, p0.size)))
        shared_x, shared_y = launch.shared(x.shape, model.dtype, x), launch.shared(y.shape, np.int64, y)
        widths = [model.sizes[b] for b in bounds[1:-1]]
        acts = [launch.shared((batch_size, w), model.dtype) for w in widths]
        grads = [launch.shared((batch_size, w), model.dtype) for w in widths]
        reduce = launch.shared((2, data, p0.size), model.dtype) if data > 1 else None
        # per replica and boundary b: (recv, send) from stage b to b + 1, and back
        pipes_f = [[launch.pipe() for _ in widths] for _ in range(data)]
        pipes_b = [[launch.pipe() for _ in widths] for _ in range(data)]
        barriers = [launch.barrier(data) if data > 1 else None for _ in range(n_stages)]
        job = _StageJob(
            model=model, boundaries=bounds, replicas=data, schedule=schedule,
            micro_batches=micro_batches, n_samples=x.shape[0], batch_size=min(batch_size, x.shape[0]),
            seed=int(seed), steps=sizes.size, lr=float(lr), params=shared_params.spec,
            x=shared_x.spec, y=shared_y.spec, acts=tuple(a.spec for a in acts),
            grads=tuple(g.spec for g in grads), reduce=None if reduce is None else reduce.spec,
            fault=fault, blas_threads=blas_threads, recompute=recompute,
        )
        rank_args = []
        for d in range(data):
            f, b = pipes_f[d], pipes_b[d]
            for s in range(n_stages):
                rank_args.append((
                    f[s - 1][0] if s > 0 else None,
                    f[s][1] if s < n_stages - 1 else None,
                    b[s][0] if s < n_stages - 1 else None,
                    b[s - 1][1] if s > 0 else None,
                    barriers[s],
                ))
        results = launch.run(
            _stage_process, world, args=(job,), rank_args=rank_args, timeout=timeout, name="ddl-stage",
            preload=PRELOAD, progress_total=ops_per_worker, progress_label="pipeline ops", progress=progress,
        )
        final = shared_params.array.copy()

    records = [
        StageOp(r % n_stages, kind, m, t0, t1, step, r // n_stages)
        for r, (ops, _, _) in enumerate(results)
        for kind, m, t0, t1, step in ops
    ]
    start = min(op.start for op in records)
    shifted = tuple(sorted((o.shifted(start) for o in records), key=lambda o: (o.start, o.replica, o.stage)))
    timeline = Timeline(shifted, n_stages, micro_batches, schedule, "measured", data)
    # the loss of a step: the sum of every replica's last stage, over the batch
    per_replica = np.array([results[d * n_stages + n_stages - 1][1] for d in range(data)])
    losses = (per_replica.sum(axis=0) / sizes).tolist()
    in_sync = all(np.array_equal(final[0], final[d]) for d in range(1, data))
    stored = np.array([memory[0] for _, _, memory in results], dtype=np.int64)
    redo = np.stack([memory[1] for _, _, memory in results], axis=1)
    sent = np.sum([memory[2] for _, _, memory in results], axis=0)
    return PipelineResult(final[0].copy(), losses, timeline, bounds, schedule, micro_batches, data, in_sync,
                          recompute=recompute, stored_activation_bytes=stored, recompute_time=redo,
                          bytes_per_step=sent)
