"""Model (layer-wise) and pipeline parallelism of the running example, and a schedule simulator.

Model parallelism (模型并行) splits the *layers* of :class:`course_lib.models.MLP` into
``S`` consecutive stages (流水阶段), one process each. Stage ``s`` owns the contiguous
slice ``model.layer_range(start, stop)`` of the flat parameter buffer; activations
travel forward to the next stage, activation gradients backward to the previous one,
and every stage updates its own parameters. Alone this keeps all but one stage idle;
pipeline parallelism (流水并行) cuts the batch into ``M`` micro-batches (微批次) so that
stages work on different micro-batches at the same time. Two schedules are provided:

``"gpipe"``
    GPipe (Huang et al., 2019): all ``M`` forwards, then all ``M`` backwards, gradients
    accumulated over the micro-batches, one update per step ("flush").
``"1f1b"``
    One-forward-one-backward (PipeDream-Flush, Narayanan et al., 2021; Megatron-LM's
    non-interleaved schedule): after ``S - s - 1`` warm-up forwards, stage ``s``
    alternates a forward and a backward. Same result and, with equal stages, the same
    idle time as GPipe, but at most ``S - s`` micro-batches' activations are held at
    once instead of ``M``.

Both schedules are synchronous: the update uses the gradient of the whole batch, so the
parameters equal those of the serial run (up to floating-point summation order).

The idle share ("bubble", 气泡) of a pipeline with equal stages is

.. math:: \\text{bubble} = \\frac{S - 1}{M + S - 1},

which :func:`bubble_fraction` computes and :func:`simulate_pipeline` reproduces from
per-stage costs without running processes. :func:`train_pipeline` runs the stages as
processes and records the same kind of :class:`Timeline`, measured.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._validate import as_real, broadcast, check_int, check_range, scalar_or_array

__all__ = [
    "SCHEDULES",
    "Op",
    "Timeline",
    "bubble_fraction",
    "schedule_order",
    "simulate_pipeline",
    "simulate_uniform",
    "layer_flops",
    "partition_layers",
    "stage_flops",
    "PipelineResult",
    "train_microbatched",
    "train_pipeline",
    "train_hybrid",
]

#: The pipeline schedules understood by the simulator and the trainer.
SCHEDULES = ("gpipe", "1f1b")


# --------------------------------------------------------------------------- formula
def bubble_fraction(stages, micro_batches):
    r"""Idle share of a synchronous pipeline with equal stages: :math:`(S-1)/(M+S-1)`.

    Each of the ``S`` stages is busy ``M`` slots of the ``M + S - 1`` slots that a
    step lasts (a slot = one micro-batch's forward plus backward on one stage); the
    first stage waits ``S - 1`` slots for the last forwards to come back as backwards.
    Holds for GPipe and 1F1B alike.

    Parameters
    ----------
    stages : int or array_like
        Pipeline stages ``S`` >= 1.
    micro_batches : int or array_like
        Micro-batches per step ``M`` >= 1.

    Returns
    -------
    float or numpy.ndarray

    Examples
    --------
    >>> bubble_fraction(4, 8)
    0.2727272727272727
    >>> bubble_fraction(1, 8)        # one stage: no pipeline, no bubble
    0.0
    >>> bubble_fraction(4, [1, 4, 32]).round(3)
    array([0.75 , 0.429, 0.086])
    """
    s_arr = as_real(stages, "stages")
    m_arr = as_real(micro_batches, "micro_batches")
    check_range(s_arr, "stages", 1)
    check_range(m_arr, "micro_batches", 1)
    s_arr, m_arr = broadcast(stages=s_arr, micro_batches=m_arr)
    return scalar_or_array((s_arr - 1) / (m_arr + s_arr - 1), stages, micro_batches)


# --------------------------------------------------------------------------- timelines
@dataclass(frozen=True)
class Op:
    """One forward (``"F"``), backward (``"B"``), gradient all-reduce (``"A"``, hybrid
    runs only) or update (``"U"``) on one stage.

    ``micro`` is the micro-batch index (``-1`` for an all-reduce or update);
    ``start``/``end`` are seconds (from the simulator, or measured with
    :func:`time.perf_counter`); ``step`` is the training step the operation belongs
    to; ``replica`` the data-parallel replica (0 unless the run is hybrid).
    """

    stage: int
    kind: str
    micro: int
    start: float
    end: float
    step: int = 0
    replica: int = 0

    def shifted(self, dt: float) -> Op:
        """The same operation ``dt`` seconds earlier."""
        return Op(self.stage, self.kind, self.micro, self.start - dt, self.end - dt, self.step, self.replica)

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Timeline:
    """What every stage did when: the data of a Gantt chart (甘特图).

    Built by :func:`simulate_pipeline` (computed) or by
    :func:`train_pipeline` (measured); the analysis below is the same for both.

    Attributes
    ----------
    ops : tuple of Op
    n_stages, n_micro : int
        Stages ``S`` and micro-batches ``M`` (per step).
    schedule : str
        ``"gpipe"`` or ``"1f1b"``.
    source : str
        ``"simulated"`` or ``"measured"``.
    replicas : int
        Data-parallel replicas ``D`` of the pipeline (1 unless hybrid). The timeline
        has ``D * S`` rows (devices), row ``d * S + s`` for replica ``d``, stage ``s``.
    """

    ops: tuple[Op, ...]
    n_stages: int
    n_micro: int
    schedule: str
    source: str = "simulated"
    replicas: int = 1

    @property
    def n_rows(self) -> int:
        """Devices in the timeline: ``replicas * n_stages``."""
        return self.replicas * self.n_stages

    def row(self, op: Op) -> int:
        """Row (device) of an operation: ``replica * n_stages + stage``."""
        return op.replica * self.n_stages + op.stage

    @property
    def steps(self) -> tuple[int, ...]:
        """The training steps present, in order."""
        return tuple(sorted({op.step for op in self.ops}))

    def step(self, k: int) -> Timeline:
        """The operations of step ``k`` only, with time shifted to start at 0."""
        ops = [op for op in self.ops if op.step == k]
        if not ops:
            raise ValueError(f"k must be one of the steps {self.steps}, got {k!r}")
        t0 = min(op.start for op in ops)
        shifted = tuple(op.shifted(t0) for op in ops)
        return Timeline(shifted, self.n_stages, self.n_micro, self.schedule, self.source, self.replicas)

    def _compute_ops(self) -> list[Op]:
        return [op for op in self.ops if op.kind in ("F", "B")]

    @property
    def makespan(self) -> float:
        """Time from the first forward's start to the last backward's end (one step)."""
        ops = self._compute_ops()
        if not ops:
            return 0.0
        return float(max(op.end for op in ops) - min(op.start for op in ops))

    def busy(self) -> np.ndarray:
        """Busy time (forwards + backwards) of each stage (each row, if hybrid)."""
        out = np.zeros(self.n_rows)
        for op in self._compute_ops():
            out[self.row(op)] += op.duration
        return out

    def bubble(self) -> float:
        """Idle share of the stages during the step: ``1 - sum(busy) / (S * makespan)``.

        Only forwards and backwards count; for a timeline of several steps use
        :meth:`bubble_per_step` (the time between steps is not pipeline idle time).
        """
        span = self.makespan
        if span <= 0:
            return 0.0
        return float(1.0 - self.busy().sum() / (self.n_rows * span))

    def bubble_per_step(self) -> np.ndarray:
        """:meth:`bubble` of every step, in step order."""
        return np.array([self.step(k).bubble() for k in self.steps])

    def in_flight(self) -> np.ndarray:
        """Peak number of micro-batches whose activations each stage holds at once.

        A forward stores its micro-batch's activations until the matching backward
        has run: this count times the activation size is a stage's activation memory.
        """
        peak = np.zeros(self.n_rows, dtype=int)
        per_stage_step: dict[tuple[int, int], list] = {}
        for op in self._compute_ops():
            per_stage_step.setdefault((self.row(op), op.step), []).append(op)
        for (s, _k), ops in per_stage_step.items():
            ops.sort(key=lambda op: (op.start, op.kind == "F"))  # a backward frees first
            held = 0
            for op in ops:
                held += 1 if op.kind == "F" else -1
                peak[s] = max(peak[s], held)
        return peak


# --------------------------------------------------------------------------- schedules
def _check_schedule(schedule) -> str:
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    return schedule


def schedule_order(stages: int, micro_batches: int, schedule: str = "gpipe") -> list[list[tuple[str, int]]]:
    """Order in which each stage runs its forwards and backwards in one step.

    Parameters
    ----------
    stages, micro_batches : int
        ``S`` >= 1 and ``M`` >= 1.
    schedule : {"gpipe", "1f1b"}
        GPipe: ``F0 .. F(M-1)`` then ``B0 .. B(M-1)``. 1F1B: ``min(S - s - 1, M)``
        warm-up forwards on stage ``s``, then forward/backward pairs, then the
        remaining backwards.

    Returns
    -------
    list of list of (kind, micro)
        One list per stage. Backwards run in micro-batch order in both schedules, so
        gradients are accumulated in the same order (and the results are bitwise equal).

    Examples
    --------
    >>> schedule_order(2, 3, "gpipe")[0]
    [('F', 0), ('F', 1), ('F', 2), ('B', 0), ('B', 1), ('B', 2)]
    >>> schedule_order(2, 3, "1f1b")[0]
    [('F', 0), ('F', 1), ('B', 0), ('F', 2), ('B', 1), ('B', 2)]
    >>> schedule_order(2, 3, "1f1b")[1]
    [('F', 0), ('B', 0), ('F', 1), ('B', 1), ('F', 2), ('B', 2)]
    """
    stages = check_int(stages, "stages", 1)
    micro_batches = check_int(micro_batches, "micro_batches", 1)
    _check_schedule(schedule)
    orders = []
    for s in range(stages):
        if schedule == "gpipe":
            order = [("F", m) for m in range(micro_batches)] + [("B", m) for m in range(micro_batches)]
        else:
            warmup = min(stages - s - 1, micro_batches)
            order = [("F", m) for m in range(warmup)]
            for i in range(micro_batches - warmup):
                order += [("F", warmup + i), ("B", i)]
            order += [("B", m) for m in range(micro_batches - warmup, micro_batches)]
        orders.append(order)
    return orders


def _costs(values, name: str, n: int | None = None) -> np.ndarray:
    arr = as_real(values, name)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty sequence of per-stage times, got shape {arr.shape}")
    if n is not None and arr.size != n:
        raise ValueError(f"{name} must have one entry per stage ({n}), got {arr.size}")
    check_range(arr, name, 0.0)
    return arr


def simulate_pipeline(
    forward: Sequence[float],
    backward: Sequence[float] | None = None,
    *,
    micro_batches: int,
    schedule: str = "gpipe",
    send_time: float = 0.0,
) -> Timeline:
    """Compute a pipeline's timeline from per-stage costs, without running anything.

    Every stage runs its operations in :func:`schedule_order`; an operation starts
    when its stage is free and its input has arrived: forward ``m`` on stage ``s``
    needs forward ``m`` of stage ``s - 1``, backward ``m`` needs backward ``m`` of
    stage ``s + 1`` (the last stage: its own forward ``m``). Each hand-over between
    stages takes ``send_time`` (the sender does not wait for it).

    Parameters
    ----------
    forward : sequence of float
        Time of one micro-batch's forward on each stage (``S`` entries, >= 0).
    backward : sequence of float, optional
        Time of one micro-batch's backward on each stage; default ``2 * forward``
        (a layer's backward computes two GEMMs to the forward's one).
    micro_batches : int
        ``M`` >= 1.
    schedule : {"gpipe", "1f1b"}
    send_time : float or sequence of float
        Time to pass an activation (or its gradient) to the neighbour stage, >= 0:
        one value for every hand-over, or ``S - 1`` values, one per boundary
        (boundary ``s`` lies between stages ``s`` and ``s + 1``).

    Returns
    -------
    Timeline
        With equal stages and ``send_time = 0`` its :meth:`Timeline.bubble` equals
        :func:`bubble_fraction`.

    Examples
    --------
    >>> t = simulate_pipeline([1.0, 1.0, 1.0, 1.0], micro_batches=8)
    >>> t.makespan, round(t.bubble(), 6), round(bubble_fraction(4, 8), 6)
    (33.0, 0.272727, 0.272727)
    >>> simulate_pipeline([1.0] * 4, micro_batches=8, schedule="1f1b").in_flight().tolist()
    [4, 3, 2, 1]
    """
    f = _costs(forward, "forward")
    b = 2.0 * f if backward is None else _costs(backward, "backward", f.size)
    m_count = check_int(micro_batches, "micro_batches", 1)
    _check_schedule(schedule)
    n = f.size
    send_arr = as_real(send_time, "send_time")
    check_range(send_arr, "send_time", 0.0)
    if send_arr.ndim == 0:
        sends = [float(send_arr)] * max(n - 1, 0)
    elif send_arr.shape == (n - 1,):
        sends = [float(v) for v in send_arr]
    else:
        raise ValueError(
            f"send_time must be one number or one per boundary ({n - 1}), got shape {send_arr.shape}"
        )
    f_s, b_s = [float(v) for v in f], [float(v) for v in b]
    orders = schedule_order(n, m_count, schedule)
    end: dict[tuple[str, int, int], float] = {}
    ops: list[Op] = []
    pos = [0] * n
    free = [0.0] * n
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for s in range(n):
            while pos[s] < len(orders[s]):
                kind, m = orders[s][pos[s]]
                if kind == "F":
                    dep = ("F", s - 1, m) if s > 0 else None
                    hop = sends[s - 1] if s > 0 else 0.0
                else:
                    dep = ("B", s + 1, m) if s < n - 1 else ("F", s, m)
                    hop = sends[s] if s < n - 1 else 0.0
                if dep is not None and dep not in end:
                    break
                ready = end[dep] + hop if dep is not None else 0.0
                start = max(free[s], ready)
                stop = start + (f_s[s] if kind == "F" else b_s[s])
                end[(kind, s, m)] = stop
                ops.append(Op(s, kind, m, start, stop))
                free[s] = stop
                pos[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # pragma: no cover - impossible for the schedules above
            raise RuntimeError("the schedule deadlocks")
    ops.sort(key=lambda op: (op.start, op.stage))
    return Timeline(tuple(ops), n, m_count, schedule, "simulated")


def simulate_uniform(
    stages: int,
    micro_batches: int,
    *,
    schedule: str = "gpipe",
    forward: float = 1.0,
    backward: float | None = None,
    send_time: float = 0.0,
) -> Timeline:
    """:func:`simulate_pipeline` for ``S`` equal stages (what the formula assumes).

    Examples
    --------
    >>> round(simulate_uniform(3, 5).bubble(), 12) == round(bubble_fraction(3, 5), 12)
    True
    """
    stages = check_int(stages, "stages", 1)
    back = None if backward is None else [backward] * stages
    return simulate_pipeline(
        [forward] * stages, back, micro_batches=micro_batches, schedule=schedule, send_time=send_time
    )


# --------------------------------------------------------------------------- stage costs
def layer_flops(model) -> tuple[np.ndarray, np.ndarray]:
    """Forward and backward FLOPs per sample of every layer of an MLP.

    Counted like :meth:`course_lib.models.MLP.flops_per_sample` (GEMMs only): forward
    ``2 k n`` for a ``k x n`` layer, backward ``4 k n`` (weight and input gradient)
    except layer 0, whose input gradient is skipped (``2 k n``).

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> f, b = layer_flops(MLP((64, 32, 10)))
    >>> f.tolist(), b.tolist()
    ([4096, 640], [4096, 1280])
    """
    macs = np.array([a * b for a, b in zip(model.sizes[:-1], model.sizes[1:])], dtype=np.int64)
    forward = 2 * macs
    backward = 4 * macs
    backward[0] = 2 * macs[0]
    return forward, backward


def _check_boundaries(model, boundaries) -> tuple[int, ...]:
    if isinstance(boundaries, (str, bytes)) or not isinstance(boundaries, Sequence):
        raise TypeError(f"boundaries must be a sequence of layer indices, got {boundaries!r}")
    b = tuple(check_int(v, f"boundaries[{i}]", 0, model.n_layers) for i, v in enumerate(boundaries))
    if len(b) < 2 or b[0] != 0 or b[-1] != model.n_layers or any(x >= y for x, y in zip(b, b[1:])):
        raise ValueError(
            f"boundaries must increase strictly from 0 to n_layers = {model.n_layers}, got {b}"
        )
    return b


def partition_layers(model, stages: int) -> tuple[int, ...]:
    """Split the layers into ``stages`` contiguous stages with the smallest maximum cost.

    The cost of a stage is its forward + backward FLOPs (:func:`layer_flops`); the
    slowest stage sets the pipeline's pace, so the split minimises it (exact, by
    dynamic programming). Ties go to the split with the earliest boundaries.

    Parameters
    ----------
    model : MLP
    stages : int
        In [1, model.n_layers]: a stage holds at least one layer (the limit of
        layer-wise model parallelism is the number of layers).

    Returns
    -------
    tuple of int
        Boundaries ``(0, b1, ..., n_layers)``: stage ``s`` holds layers
        ``boundaries[s]`` .. ``boundaries[s + 1] - 1``.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> partition_layers(MLP((64, 64, 64, 64, 10)), 2)
    (0, 2, 4)
    >>> partition_layers(MLP((784, 1024, 10)), 2)
    (0, 1, 2)
    """
    n = model.n_layers
    stages = check_int(stages, "stages", 1, n)
    f, b = layer_flops(model)
    cost = (f + b).astype(float)
    prefix = np.concatenate([[0.0], np.cumsum(cost)])
    # best[k][j]: smallest max stage cost splitting layers [0, j) into k stages
    best = np.full((stages + 1, n + 1), np.inf)
    cut = np.zeros((stages + 1, n + 1), dtype=int)
    best[0][0] = 0.0
    for k in range(1, stages + 1):
        for j in range(k, n + 1):
            for i in range(k - 1, j):
                val = max(best[k - 1][i], prefix[j] - prefix[i])
                if val < best[k][j]:
                    best[k][j], cut[k][j] = val, i
    bounds = [n]
    for k in range(stages, 0, -1):
        bounds.append(int(cut[k][bounds[-1]]))
    return tuple(reversed(bounds))


def stage_flops(model, boundaries: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Forward and backward FLOPs per sample of each stage of a split.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> f, b = stage_flops(MLP((64, 32, 10)), (0, 1, 2))
    >>> f.tolist(), b.tolist()
    ([4096, 640], [4096, 1280])
    """
    b_ = _check_boundaries(model, boundaries)
    f, b = layer_flops(model)
    fs = np.array([f[lo:hi].sum() for lo, hi in zip(b_[:-1], b_[1:])])
    bs = np.array([b[lo:hi].sum() for lo, hi in zip(b_[:-1], b_[1:])])
    return fs, bs


# --------------------------------------------------------------------------- training
def _batch_plan(n: int, batch_size: int, epochs: int, steps: int | None, seed: int) -> list[np.ndarray]:
    """Sample indices of every step, drawn exactly as :func:`course_lib.models.train` does."""
    rng = np.random.default_rng(seed + 1)
    plan: list[np.ndarray] = []
    epoch = 0
    while (steps is None and epoch < epochs) or (steps is not None and len(plan) < steps):
        order = rng.permutation(n)
        plan.extend(order[start : start + batch_size] for start in range(0, n, batch_size))
        epoch += 1
    return plan if steps is None else plan[:steps]


def _micro_rows(batch: int, micro_batches: int) -> list[tuple[int, int]]:
    """Row ranges of the micro-batches of a batch (sizes differ by at most one)."""
    m = min(micro_batches, batch)
    edges = [batch * i // m for i in range(m + 1)]
    return list(zip(edges[:-1], edges[1:]))


def _replica_rows(batch: int, replicas: int, micro_batches: int) -> list[list[tuple[int, int]]]:
    """Per replica: the rows of its micro-batches (its shard is a contiguous row range)."""
    return [
        [(lo + a, lo + b) for a, b in _micro_rows(hi - lo, micro_batches)]
        for lo, hi in _micro_rows(batch, replicas)
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
    """Data-parallel replicas ``D`` (1 for a plain pipeline)."""
    replicas_in_sync: bool = True
    """Whether every replica ended with bitwise the same parameters."""
    serial_step_times: tuple[float, ...] | None = None
    """Wall-clock seconds of every step of the serial reference (None for process runs)."""

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


def _check_training_args(model, x, y, batch_size, epochs, steps, lr, seed, micro_batches, replicas):
    from .models import MLP

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
    if isinstance(lr, bool) or not isinstance(lr, (int, float, np.floating)) or not (
        np.isfinite(lr) and lr > 0
    ):
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    if x.shape[0] == 0:
        raise ValueError("x must hold at least one sample")
    plan = _batch_plan(x.shape[0], batch_size, epochs, steps, seed)
    short = min(idx.size for idx in plan)
    if short < replicas:
        raise ValueError(
            f"every batch needs at least data = {replicas} samples (one per replica); the last "
            f"batch of an epoch has {short}: choose batch_size so that it divides the "
            f"{x.shape[0]} samples better, or use steps"
        )
    return x, y, plan, micro_batches, replicas


def _resolve_boundaries(model, stages, boundaries) -> tuple[int, ...]:
    if boundaries is not None:
        b = _check_boundaries(model, boundaries)
        if stages is not None and check_int(stages, "stages", 1) != len(b) - 1:
            raise ValueError(f"stages = {stages} does not match boundaries {b} ({len(b) - 1} stages)")
        return b
    return partition_layers(model, 2 if stages is None else stages)


def train_microbatched(
    model,
    x: np.ndarray,
    y: np.ndarray,
    *,
    micro_batches: int = 1,
    data: int = 1,
    batch_size: int = 32,
    epochs: int = 1,
    steps: int | None = None,
    lr: float = 0.1,
    seed: int = 0,
    params: np.ndarray | None = None,
) -> PipelineResult:
    """Serial reference of the pipeline: the same arithmetic in one process.

    Every step cuts its batch into ``data`` contiguous shards and each shard into the
    same micro-batches as :func:`train_pipeline` / :func:`train_hybrid`, accumulates
    each shard's gradients layer by layer in micro-batch order, adds the shard
    gradients in shard order and takes one SGD step. With one BLAS thread its
    parameters are bitwise equal to the parallel run's; with ``micro_batches=1`` and
    ``data=1`` it is :func:`course_lib.models.train` (same batches, same initial
    parameters). The result's ``step_times()`` are the measured seconds of every step:
    the serial baseline for the parallel runs' ``step_times()``.

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
    from .models import sgd_step, softmax_cross_entropy

    x, y, plan, micro_batches, data = _check_training_args(
        model, x, y, batch_size, epochs, steps, lr, seed, micro_batches, data
    )
    p = model.init_params(seed) if params is None else np.array(params, dtype=model.dtype)
    model._check_flat(p, "params")
    grads = np.zeros((data, p.size), dtype=p.dtype)
    total_grad = np.zeros_like(p)
    losses, seconds = [], []
    for idx in plan:
        t0 = time.perf_counter()
        grads.fill(0)
        xb, yb = x[idx], y[idx]
        scale = np.asarray(1.0 / idx.size, dtype=model.dtype)
        total = 0.0
        for d, rows in enumerate(_replica_rows(idx.size, data, micro_batches)):
            for r0, r1 in rows:
                acts = [xb[r0:r1]]
                for i in range(model.n_layers):
                    acts.append(model.layer_forward(p, i, acts[-1]))
                loss, g = softmax_cross_entropy(acts[-1], yb[r0:r1], "sum")
                g *= scale
                total += loss
                for i in reversed(range(model.n_layers)):
                    g = model.layer_backward(p, i, acts[i], acts[i + 1], g, grads[d], need_input_grad=i > 0)
        if data == 1:
            sgd_step(p, grads[0], lr)
        else:
            _sum_rows(grads, total_grad)
            sgd_step(p, total_grad, lr)
        losses.append(total / idx.size)
        seconds.append(time.perf_counter() - t0)
    return PipelineResult(p, losses, None, (0, model.n_layers), "serial", micro_batches, data,
                          serial_step_times=tuple(seconds))


def _sum_rows(rows: np.ndarray, out: np.ndarray) -> None:
    """``out = rows[0] + rows[1] + ...`` in row order (reproducible)."""
    np.copyto(out, rows[0])
    for r in range(1, rows.shape[0]):
        out += rows[r]


@dataclass(frozen=True)
class _StageJob:
    """Everything a stage process needs (picklable, sent once at start-up)."""

    model: object
    boundaries: tuple[int, ...]
    replicas: int
    schedule: str
    micro_batches: int
    plan: list
    lr: float
    params: object  # SharedSpec (replicas, n_params): each replica's parameters
    x: object  # SharedSpec of the inputs (stage 0 reads it)
    y: np.ndarray | None  # labels (the last stage reads them)
    acts: tuple  # SharedSpec per boundary: activations, (batch, width), rows = samples
    grads: tuple  # SharedSpec per boundary: gradients of those activations
    reduce: object  # SharedSpec (2, replicas, n_params) for the all-reduce, or None
    fault: object
    blas_threads: int | None


_MSG = struct.Struct("<qq")  # (step, micro-batch) of a hand-over


def _wait_for(conn, ctx, what: str, step: int, micro: int) -> None:
    if not conn.poll(ctx.wait_timeout):
        raise TimeoutError(f"stage {ctx.rank} waited {ctx.wait_timeout:g} s for {what} of micro-batch {micro}")
    got = _MSG.unpack(conn.recv_bytes())
    if got != (step, micro):  # pragma: no cover - would be a bug in the schedules
        raise RuntimeError(f"stage {ctx.rank} expected {what} of (step, micro) {(step, micro)}, got {got}")


def _stage_worker(ctx, job: _StageJob, recv_act, send_act, recv_grad, send_grad, barrier):
    """One pipeline stage of one replica (runs in its own process).

    Runs the schedule's forwards and backwards, then (hybrid runs) all-reduces its
    stage's gradient with the same stage of the other replicas, then updates its
    own slice of the parameters. Returns the recorded operations and the losses.
    """
    from .models import sgd_step, softmax_cross_entropy
    from .timing import blas_threads

    model = job.model
    n_stages = len(job.boundaries) - 1
    d, s = divmod(ctx.rank, n_stages)
    lo, hi = job.boundaries[s], job.boundaries[s + 1]
    last = s == n_stages - 1
    sl = model.layer_range(lo, hi)
    clock = time.perf_counter
    with contextlib.ExitStack() as stack:
        stack.enter_context(blas_threads(job.blas_threads))
        params = stack.enter_context(job.params.attach())[d]
        x = stack.enter_context(job.x.attach()) if s == 0 else None
        act_in = stack.enter_context(job.acts[s - 1].attach()) if s > 0 else None
        act_out = stack.enter_context(job.acts[s].attach()) if not last else None
        grad_in = stack.enter_context(job.grads[s].attach()) if not last else None
        grad_out = stack.enter_context(job.grads[s - 1].attach()) if s > 0 else None
        reduce = stack.enter_context(job.reduce.attach()) if job.reduce is not None else None
        own = np.zeros(model.n_params, dtype=model.dtype) if reduce is None else None
        total = np.zeros(sl.stop - sl.start, dtype=model.dtype)
        ops: list[tuple] = []
        losses: list[float] = []
        done = 0
        for step, idx in enumerate(job.plan):
            if job.fault is not None:
                job.fault.maybe_fire(ctx.rank, step)
            grad = own if reduce is None else reduce[step % 2, d]
            grad[sl] = 0
            rows = _replica_rows(idx.size, job.replicas, job.micro_batches)[d]
            scale = np.asarray(1.0 / idx.size, dtype=model.dtype)
            stash: dict[int, list] = {}
            step_loss = 0.0
            for kind, m in schedule_order(n_stages, len(rows), job.schedule)[s]:
                r0, r1 = rows[m]
                if kind == "F":
                    if s == 0:
                        t0 = clock()
                        a = x[idx[r0:r1]]
                    else:
                        _wait_for(recv_act, ctx, "activations", step, m)
                        t0 = clock()
                        a = act_in[r0:r1]
                    acts = [a]
                    for i in range(lo, hi):
                        acts.append(model.layer_forward(params, i, acts[-1]))
                    stash[m] = acts
                    if not last:
                        act_out[r0:r1] = acts[-1]
                        t1 = clock()
                        send_act.send_bytes(_MSG.pack(step, m))
                    else:
                        t1 = clock()
                else:
                    if last:
                        t0 = clock()
                        loss, g = softmax_cross_entropy(stash[m][-1], job.y[idx[r0:r1]], "sum")
                        g *= scale
                        step_loss += loss
                    else:
                        _wait_for(recv_grad, ctx, "gradients", step, m)
                        t0 = clock()
                        g = grad_in[r0:r1]
                    acts = stash.pop(m)
                    for i in reversed(range(lo, hi)):
                        g = model.layer_backward(
                            params, i, acts[i - lo], acts[i - lo + 1], g, grad, need_input_grad=i > 0
                        )
                    if s > 0:
                        grad_out[r0:r1] = g
                        t1 = clock()
                        send_grad.send_bytes(_MSG.pack(step, m))
                    else:
                        t1 = clock()
                ops.append((kind, m, t0, t1, step))
                done += 1
                ctx.progress(done)
            if reduce is None:
                update = grad[sl]
            else:  # all-reduce of this stage's gradient over the replicas, in replica order
                t0 = clock()
                barrier.wait(d, ctx.wait_timeout)
                _sum_rows(reduce[step % 2, :, sl], total)
                update = total
                ops.append(("A", -1, t0, clock(), step))
            t0 = clock()
            sgd_step(params[sl], update, job.lr)
            ops.append(("U", -1, t0, clock(), step))
            if last:
                losses.append(step_loss)
            del stash, acts, a, g, grad, update
        del params, x, act_in, act_out, grad_in, grad_out, reduce
    return ops, losses


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
) -> PipelineResult:
    """Train the running example with its layers split over ``S`` stage processes.

    Stage ``s`` owns layers ``boundaries[s] .. boundaries[s + 1] - 1`` and their slice
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
        ``S`` in [1, n_layers]; the layers are split by :func:`partition_layers`
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
        Inject a failure (tests, demonstrations): ``rank`` is the stage (in [0, S - 1],
        else ValueError), ``step`` the step.
    progress : bool or None
        Progress bar: False never, None in notebooks for runs over ~1.5 s.

    Returns
    -------
    PipelineResult
        Final parameters: equal to :func:`train_microbatched` bitwise (one BLAS thread)
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
    return train_hybrid(
        model, x, y, data=1, stages=stages, boundaries=boundaries, micro_batches=micro_batches,
        schedule=schedule, batch_size=batch_size, epochs=epochs, steps=steps, lr=lr, seed=seed,
        params=params, start_method=start_method, timeout=timeout, blas_threads=blas_threads,
        fault=fault, progress=progress,
    )


_PRELOAD = ("course_lib.parallel.workers", "course_lib.models", "course_lib.model_parallel", "threadpoolctl")


def train_hybrid(
    model,
    x: np.ndarray,
    y: np.ndarray,
    *,
    data: int = 2,
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
) -> PipelineResult:
    """Hybrid parallelism (组合式并行) as processes: ``data`` replicas of an ``S``-stage pipeline.

    ``D * S`` processes; process ``d * S + s`` is stage ``s`` of replica ``d``. Each
    replica trains on a contiguous shard of every batch with :func:`train_pipeline`'s
    scheme; afterwards the ``D`` copies of stage ``s`` add their gradients (an
    all-reduce through shared memory, in replica order) and each applies the same
    update to its own copy of the stage's parameters. ``data=1`` is
    :func:`train_pipeline`; ``stages=1`` is plain data parallelism.

    Parameters are those of :func:`train_pipeline`, plus

    data : int
        Replicas ``D`` in [1, batch_size]; every batch must have at least ``D`` samples.
        ``micro_batches`` is per replica (at most ``batch_size // D``).

    ``fault.rank`` counts processes: ``d * S + s``, in [0, D * S - 1] (else ValueError).

    Returns
    -------
    PipelineResult
        ``params`` of replica 0; ``replicas_in_sync`` says whether all replicas agree
        bitwise. Bitwise equal to ``train_microbatched(..., data=D)`` with one BLAS
        thread.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> from course_lib.datasets import load_digits
    >>> d = load_digits("train")
    >>> model = MLP((64, 32, 32, 10))
    >>> res = train_hybrid(model, d.x, d.y, data=2, stages=2, micro_batches=2, steps=3)
    >>> ref = train_microbatched(model, d.x, d.y, data=2, micro_batches=2, steps=3)
    >>> bool(np.allclose(res.params, ref.params, rtol=0, atol=1e-6)), res.replicas_in_sync
    (True, True)
    """
    from .parallel.shm import SharedArray
    from .parallel.workers import Fault, PipeBarrier, ProcessGroup, check_start_method

    x, y, plan, micro_batches, data = _check_training_args(
        model, x, y, batch_size, epochs, steps, lr, seed, micro_batches, data
    )
    bounds = _resolve_boundaries(model, stages, boundaries)
    n_stages = len(bounds) - 1
    _check_schedule(schedule)
    timeout = float(as_real(timeout, "timeout"))
    check_range(np.asarray(timeout), "timeout", 0.0, low_open=True)
    if fault is not None:
        if not isinstance(fault, Fault):
            raise TypeError(f"fault must be a course_lib.parallel.workers.Fault or None, got {type(fault).__name__}")
        check_int(fault.rank, "fault.rank", 0, data * n_stages - 1)
    if blas_threads is not None:
        blas_threads = check_int(blas_threads, "blas_threads", 1)
    method = check_start_method(start_method)
    p0 = model.init_params(seed) if params is None else np.array(params, dtype=model.dtype)
    model._check_flat(p0, "params")
    ops_per_worker = sum(
        2 * len(_replica_rows(idx.size, data, micro_batches)[-1]) for idx in plan
    )
    world = data * n_stages

    ctx = multiprocessing.get_context(method)
    with contextlib.ExitStack() as stack:
        shared_params = stack.enter_context(
            SharedArray((data, p0.size), model.dtype, init=np.broadcast_to(p0, (data, p0.size)))
        )
        shared_x = stack.enter_context(SharedArray(x.shape, model.dtype, init=x))
        widths = [model.sizes[b] for b in bounds[1:-1]]
        acts = [stack.enter_context(SharedArray((batch_size, w), model.dtype)) for w in widths]
        grads = [stack.enter_context(SharedArray((batch_size, w), model.dtype)) for w in widths]
        reduce = (
            stack.enter_context(SharedArray((2, data, p0.size), model.dtype)) if data > 1 else None
        )
        # per replica and boundary b: (recv, send) from stage b to b + 1, and back
        pipes_f = [[ctx.Pipe(duplex=False) for _ in widths] for _ in range(data)]
        pipes_b = [[ctx.Pipe(duplex=False) for _ in widths] for _ in range(data)]
        for per_replica in pipes_f + pipes_b:
            for pair in per_replica:
                for conn in pair:
                    stack.callback(conn.close)
        barriers = [PipeBarrier(data, ctx) if data > 1 else None for _ in range(n_stages)]
        for barrier in barriers:
            if barrier is not None:
                stack.callback(barrier.close)
        job = _StageJob(
            model=model, boundaries=bounds, replicas=data, schedule=schedule,
            micro_batches=micro_batches, plan=plan, lr=float(lr), params=shared_params.spec,
            x=shared_x.spec, y=y, acts=tuple(a.spec for a in acts),
            grads=tuple(g.spec for g in grads), reduce=None if reduce is None else reduce.spec,
            fault=fault, blas_threads=blas_threads,
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
        group = ProcessGroup(
            _stage_worker, world, args=(job,), rank_args=rank_args, start_method=method,
            timeout=timeout, name="ddl-stage", preload=_PRELOAD,
            shared=[shared_params, shared_x, *acts, *grads, *([reduce] if reduce is not None else [])],
        )
        with group:
            results = group.join(
                progress_total=ops_per_worker, progress_label="pipeline ops", progress_display=progress
            )
        final = shared_params.array.copy()
        del barriers

    records = [
        Op(r % n_stages, kind, m, t0, t1, step, r // n_stages)
        for r, (ops, _) in enumerate(results)
        for kind, m, t0, t1, step in ops
    ]
    start = min(op.start for op in records)
    shifted = tuple(sorted((o.shifted(start) for o in records), key=lambda o: (o.start, o.replica, o.stage)))
    timeline = Timeline(shifted, n_stages, micro_batches, schedule, "measured", data)
    # the loss of a step: the sum of every replica's last stage, over the batch
    per_replica = np.array([results[d * n_stages + n_stages - 1][1] for d in range(data)])
    sizes = np.array([idx.size for idx in plan], dtype=float)
    losses = (per_replica.sum(axis=0) / sizes).tolist()
    in_sync = all(np.array_equal(final[0], final[d]) for d in range(1, data))
    return PipelineResult(final[0].copy(), losses, timeline, bounds, schedule, micro_batches, data, in_sync)
