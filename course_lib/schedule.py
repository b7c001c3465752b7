"""Pipelines without processes: the bubble formula, schedules, timelines, a simulator.

Model parallelism (模型并行) splits the *layers* of :class:`course_lib.models.MLP` into
``N_p`` consecutive stages (流水阶段), one process each. Stage ``q`` owns the contiguous
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
    non-interleaved schedule): after ``N_p - q - 1`` warm-up forwards, stage ``q``
    alternates a forward and a backward. Same result and, with equal stages, the same
    idle time as GPipe, but at most ``N_p - q`` micro-batches' activations are held at
    once instead of ``M``.
``"1f1b"`` with ``virtual_stages = v > 1``: interleaved 1F1B
    Megatron-LM's interleaved schedule (Narayanan et al., SC 2021, "Efficient large-scale
    language model training on GPU clusters using Megatron-LM", section 2.2.2): the
    layers are cut into ``v * N_p`` model chunks (virtual stages, 虚拟流水阶段) and
    device ``d`` holds chunks ``d, d + N_p, d + 2 N_p, ...``; micro-batches go through
    in groups of ``N_p``, so ``M`` must be a multiple of ``N_p``. The bubble shrinks
    ``v``-fold, at the price of ``v`` times more hand-overs per micro-batch.

Both schedules are synchronous: the update uses the gradient of the whole batch, so the
parameters equal those of the serial run (up to floating-point summation order).

The idle share ("bubble", 气泡) of a pipeline with equal stages is

.. math:: \\text{bubble} = \\frac{N_p - 1}{v M + N_p - 1}

(``v = 1`` without interleaving),

which :func:`bubble_fraction` computes and :func:`simulate_pipeline` reproduces from
per-stage costs without running processes. :func:`course_lib.parallel.train.pipeline.train_pipeline`
runs the stages as processes and records the same kind of :class:`Timeline`, measured.
Everything here is pure computation.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._validate import as_real, broadcast, check_int, check_range, check_type, scalar_or_array
from .models import MLP

__all__ = [
    "SCHEDULES",
    "handover_bytes",
    "StageOp",
    "Timeline",
    "bubble_fraction",
    "check_boundaries",
    "check_schedule",
    "layer_flops",
    "partition_layers",
    "schedule_order",
    "simulate_pipeline",
    "simulate_uniform",
    "stage_flops",
    "virtual_handovers",
]

SCHEDULES = ("gpipe", "1f1b")


# --------------------------------------------------------------------------- formula
def bubble_fraction(stages, micro_batches, virtual_stages=1):
    r"""Idle share of a synchronous pipeline with equal stages: :math:`(N_p-1)/(vM+N_p-1)`.

    Each of the ``N_p`` stages is busy ``M`` slots of the ``M + N_p - 1`` slots that a
    step lasts (a slot = one micro-batch's forward plus backward on one stage); the
    first stage waits ``N_p - 1`` slots for the last forwards to come back as backwards.
    Holds for GPipe and 1F1B alike.

    Interleaved 1F1B (``virtual_stages = v > 1``; Narayanan et al., SC 2021, "Efficient
    large-scale language model training on GPU clusters using Megatron-LM", section
    2.2.2, where the bubble time is :math:`(N_p-1)(t_f+t_b)/v`): each device holds ``v``
    chunks of ``1/v`` of its layers, the slot becomes ``1/v`` as long, and the step lasts
    ``v M + N_p - 1`` of the short slots of which the device is busy ``v M``.

    Parameters
    ----------
    stages : int or array_like
        Pipeline stages ``N_p`` >= 1.
    micro_batches : int or array_like
        Micro-batches per step ``M`` >= 1.
    virtual_stages : int or array_like
        Model chunks per device ``v`` >= 1 (1: no interleaving).

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
    >>> bubble_fraction(4, 8, virtual_stages=2)     # 3 / (2 * 8 + 3): interleaved, v = 2
    0.15789473684210525
    """
    s_arr = as_real(stages, "stages")
    m_arr = as_real(micro_batches, "micro_batches")
    v_arr = as_real(virtual_stages, "virtual_stages")
    check_range(s_arr, "stages", 1)
    check_range(m_arr, "micro_batches", 1)
    check_range(v_arr, "virtual_stages", 1)
    s_arr, m_arr, v_arr = broadcast(stages=s_arr, micro_batches=m_arr, virtual_stages=v_arr)
    return scalar_or_array((s_arr - 1) / (v_arr * m_arr + s_arr - 1), stages, micro_batches, virtual_stages)


# --------------------------------------------------------------------------- timelines
@dataclass(frozen=True)
class StageOp:
    """One forward (``"F"``), backward (``"B"``), gradient all-reduce (``"A"``, hybrid
    runs only) or update (``"U"``) on one stage.

    ``micro`` is the micro-batch index (``-1`` for an all-reduce or update);
    ``start``/``end`` are seconds (from the simulator, or measured with
    :func:`time.perf_counter`); ``step`` is the training step the operation belongs
    to; ``replica`` the data-parallel replica (0 unless the run is hybrid); ``chunk``
    the device's model chunk (interleaved 1F1B: chunk ``c`` of stage (device) ``q`` is
    virtual stage ``c * N_p + q``; 0 otherwise).
    """

    stage: int
    kind: str
    micro: int
    start: float
    end: float
    step: int = 0
    replica: int = 0
    chunk: int = 0

    def shifted(self, dt: float) -> StageOp:
        """The same operation ``dt`` seconds earlier."""
        return StageOp(self.stage, self.kind, self.micro, self.start - dt, self.end - dt, self.step, self.replica,
                       self.chunk)

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Timeline:
    """What every stage did when: the data of a Gantt chart (甘特图).

    Built by :func:`simulate_pipeline` (computed) or by
    :func:`course_lib.parallel.train.pipeline.train_pipeline` (measured); the analysis below is
    the same for both.

    Attributes
    ----------
    ops : tuple of StageOp
    n_stages, n_micro : int
        Stages ``N_p`` and micro-batches ``M`` (per step).
    schedule : str
        ``"gpipe"`` or ``"1f1b"``.
    source : str
        ``"simulated"`` or ``"measured"``.
    replicas : int
        Data-parallel replicas ``N_d`` of the pipeline (1 unless hybrid). The timeline
        has ``N_d * N_p`` rows (devices), row ``replica * N_p + q`` for stage ``q`` of a
        replica.
    virtual_stages : int
        Model chunks ``v`` per device (interleaved 1F1B when > 1; rows stay devices).
    """

    ops: tuple[StageOp, ...]
    n_stages: int
    n_micro: int
    schedule: str
    source: str = "simulated"
    replicas: int = 1
    virtual_stages: int = 1

    @property
    def n_rows(self) -> int:
        """Devices in the timeline: ``replicas * n_stages``."""
        return self.replicas * self.n_stages

    def row(self, op: StageOp) -> int:
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
        return Timeline(shifted, self.n_stages, self.n_micro, self.schedule, self.source, self.replicas,
                        self.virtual_stages)

    def _compute_ops(self) -> list[StageOp]:
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
        """Idle share of the stages during the step: ``1 - sum(busy) / (n_rows * makespan)``.

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
        Interleaved (``virtual_stages > 1``): the count is of (micro-batch, chunk) pairs,
        each ``1/v`` of a device's layers.
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
def check_schedule(schedule) -> str:
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    return schedule


def check_virtual_stages(virtual_stages, stages: int, micro_batches: int | None, schedule: str) -> int:
    """``virtual_stages`` (``v``) as an int >= 1; ``v > 1`` (interleaved 1F1B) needs
    ``schedule="1f1b"`` and ``micro_batches`` a multiple of ``stages`` (Megatron-LM's
    groups of ``N_p`` micro-batches). ``micro_batches=None``: not checked."""
    v = check_int(virtual_stages, "virtual_stages", 1, 2**20)
    if v > 1 and schedule != "1f1b":
        raise ValueError(f"virtual_stages > 1 (interleaved 1F1B) needs schedule='1f1b', got {schedule!r}")
    if v > 1 and micro_batches is not None and micro_batches % stages:
        raise ValueError(f"micro_batches must be a multiple of stages = {stages} for interleaved 1F1B "
                         f"(virtual_stages = {v}), got {micro_batches}")
    return v


def schedule_order(stages: int, micro_batches: int, schedule: str = "gpipe", *,
                   virtual_stages: int = 1) -> list[list[tuple]]:
    """Order in which each stage runs its forwards and backwards in one step.

    Parameters
    ----------
    stages, micro_batches : int
        ``N_p`` >= 1 and ``M`` >= 1.
    schedule : {"gpipe", "1f1b"}
        GPipe: ``F0 .. F(M-1)`` then ``B0 .. B(M-1)``. 1F1B: ``min(N_p - q - 1, M)``
        warm-up forwards on stage ``q``, then forward/backward pairs, then the
        remaining backwards.
    virtual_stages : int
        ``v`` >= 1 model chunks per stage (device). ``v > 1``: interleaved 1F1B
        (:func:`interleaved_order`); needs ``schedule="1f1b"`` and ``M`` a multiple of
        ``N_p``, else ValueError.

    Returns
    -------
    list of list of (kind, micro), or of (kind, micro, chunk) when ``v > 1``
        One list per stage. Backwards run in micro-batch order in both schedules (per
        chunk when interleaved), so gradients are accumulated in the same order (and
        the results are bitwise equal).

    Examples
    --------
    >>> schedule_order(2, 3, "gpipe")[0]
    [('F', 0), ('F', 1), ('F', 2), ('B', 0), ('B', 1), ('B', 2)]
    >>> schedule_order(2, 3, "1f1b")[0]
    [('F', 0), ('F', 1), ('B', 0), ('F', 2), ('B', 1), ('B', 2)]
    >>> schedule_order(2, 3, "1f1b")[1]
    [('F', 0), ('B', 0), ('F', 1), ('B', 1), ('F', 2), ('B', 2)]
    >>> schedule_order(2, 2, "1f1b", virtual_stages=2)[0]   # (kind, micro, chunk)
    [('F', 0, 0), ('F', 1, 0), ('F', 0, 1), ('F', 1, 1), ('B', 0, 1), ('B', 1, 1), ('B', 0, 0), ('B', 1, 0)]
    """
    stages = check_int(stages, "stages", 1)
    micro_batches = check_int(micro_batches, "micro_batches", 1)
    check_schedule(schedule)
    v = check_virtual_stages(virtual_stages, stages, micro_batches, schedule)
    return [stage_order(q, stages, micro_batches, schedule, v) for q in range(stages)]


def stage_order(q: int, stages: int, micro_batches: int, schedule: str,
                virtual_stages: int = 1) -> list[tuple]:
    """The forwards ``("F", m)`` and backwards ``("B", m)`` of stage ``q`` in one step.

    The readable rule that :func:`schedule_order` applies to every stage;
    :func:`schedule_order` checks the arguments. ``virtual_stages > 1``: the
    interleaved rule, :func:`interleaved_order` (``(kind, micro, chunk)``).

    Examples
    --------
    >>> stage_order(0, 3, 4, "1f1b")
    [('F', 0), ('F', 1), ('F', 2), ('B', 0), ('F', 3), ('B', 1), ('B', 2), ('B', 3)]
    >>> stage_order(1, 2, 2, "1f1b", virtual_stages=2)[:4]
    [('F', 0, 0), ('F', 1, 0), ('F', 0, 1), ('F', 1, 1)]
    """
    if virtual_stages > 1:  # interleaved 1F1B: v chunks per stage
        return interleaved_order(q, stages, micro_batches, virtual_stages)
    if schedule == "gpipe":  # every forward, then every backward
        return [("F", m) for m in range(micro_batches)] + [("B", m) for m in range(micro_batches)]
    warmup = min(stages - q - 1, micro_batches)  # 1F1B: stage q runs ahead by N_p - q - 1 forwards
    order = [("F", m) for m in range(warmup)]
    for i in range(micro_batches - warmup):  # then one forward, one backward
        order += [("F", warmup + i), ("B", i)]
    return order + [("B", m) for m in range(micro_batches - warmup, micro_batches)]  # drain


def interleaved_order(q: int, stages: int, micro_batches: int, chunks: int) -> list[tuple[str, int, int]]:
    """Interleaved 1F1B on device ``q``: its forwards ``("F", m, c)`` and backwards
    ``("B", m, c)`` of micro-batch ``m`` on its model chunk ``c`` (virtual stage ``c N_p + q``).

    Megatron-LM's rule (Narayanan et al., SC 2021, section 2.2.2;
    ``forward_backward_pipelining_with_interleaving``): the device's ``v M`` forwards
    take the micro-batches in groups of ``N_p``, each group through chunk 0, then chunk
    1, ...; the backwards likewise, chunks from last to first. It runs
    ``2 (N_p - q - 1) + (v - 1) N_p`` forwards ahead (all of them if ``M = N_p``), then
    alternates. :func:`schedule_order` checks the arguments (``M`` a multiple of ``N_p``).

    Examples
    --------
    >>> interleaved_order(1, 2, 2, 2)
    [('F', 0, 0), ('F', 1, 0), ('F', 0, 1), ('F', 1, 1), ('B', 0, 1), ('B', 1, 1), ('B', 0, 0), ('B', 1, 0)]
    >>> interleaved_order(1, 2, 4, 2)[:6]    # 2 warm-up forwards, then one forward, one backward
    [('F', 0, 0), ('F', 1, 0), ('F', 0, 1), ('B', 0, 1), ('F', 1, 1), ('B', 1, 1)]
    """
    group, total = stages * chunks, micro_batches * chunks

    def unit(k: int, kind: str) -> tuple[str, int, int]:  # the device's k-th forward (backward)
        c = (k % group) // stages  # chunk of the k-th unit, from the first chunk (F) or the last (B)
        return kind, (k // group) * stages + k % stages, c if kind == "F" else chunks - 1 - c

    warmup = total if micro_batches == stages else min(2 * (stages - q - 1) + (chunks - 1) * stages, total)
    order = [unit(k, "F") for k in range(warmup)]
    for i in range(total - warmup):  # then one forward, one backward
        order += [unit(warmup + i, "F"), unit(i, "B")]
    return order + [unit(k, "B") for k in range(total - warmup, total)]  # drain


def virtual_handovers(stages: int, virtual_stages: int = 1) -> int:
    """Hand-overs of one micro-batch's forward (and as many of its backward) through a
    pipeline of ``N_p`` devices with ``v`` chunks each: ``v N_p - 1``.

    The price of interleaving: ``v N_p - 1`` boundaries instead of ``N_p - 1``, about
    ``v`` times as many messages and bytes (chunk ``c`` on the last device hands over to
    chunk ``c + 1`` on the first).

    Examples
    --------
    >>> virtual_handovers(4), virtual_handovers(4, 2)
    (3, 7)
    """
    return check_int(virtual_stages, "virtual_stages", 1, 2**20) * check_int(stages, "stages", 1) - 1


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
    virtual_stages: int = 1,
) -> Timeline:
    """Compute a pipeline's timeline from per-stage costs, without running anything.

    Every stage runs its operations in :func:`schedule_order`; an operation starts
    when its stage is free and its input has arrived: forward ``m`` on stage ``q``
    needs forward ``m`` of stage ``q - 1``, backward ``m`` needs backward ``m`` of
    stage ``q + 1`` (the last stage: its own forward ``m``). Each hand-over between
    stages takes ``send_time`` (the sender does not wait for it). Interleaved
    (``virtual_stages = v > 1``): the same rules between the ``v N_p`` virtual stages,
    virtual stage ``j`` running on device ``j mod N_p``.

    Parameters
    ----------
    forward : sequence of float
        Time of one micro-batch's forward on each stage (``N_p`` entries, >= 0); with
        ``v > 1`` on each virtual stage (model chunk), in model order (``v N_p`` entries).
    backward : sequence of float, optional
        Time of one micro-batch's backward on each stage; default ``2 * forward``
        (a layer's backward computes two GEMMs to the forward's one).
    micro_batches : int
        ``M`` >= 1 (a multiple of ``N_p`` if ``v > 1``).
    schedule : {"gpipe", "1f1b"}
    send_time : float or sequence of float
        Time to pass an activation (or its gradient) to the neighbour stage, >= 0:
        one value for every hand-over, or ``v N_p - 1`` values, one per boundary
        (boundary ``j`` lies between (virtual) stages ``j`` and ``j + 1``).
    virtual_stages : int
        ``v`` >= 1 model chunks per device (interleaved 1F1B, ``schedule="1f1b"``).

    Returns
    -------
    Timeline
        With equal stages and ``send_time = 0`` its :meth:`Timeline.bubble` equals
        :func:`bubble_fraction` (with ``virtual_stages``).

    Examples
    --------
    >>> t = simulate_pipeline([1.0, 1.0, 1.0, 1.0], micro_batches=8)
    >>> t.makespan, round(t.bubble(), 6), round(bubble_fraction(4, 8), 6)
    (33.0, 0.272727, 0.272727)
    >>> simulate_pipeline([1.0] * 4, micro_batches=8, schedule="1f1b").in_flight().tolist()
    [4, 3, 2, 1]
    >>> t = simulate_pipeline([0.5] * 4, micro_batches=2, schedule="1f1b", virtual_stages=2)
    >>> t.makespan, t.bubble(), bubble_fraction(2, 2, 2)    # 2 devices x 2 chunks
    (7.5, 0.19999999999999996, 0.2)
    """
    f = _costs(forward, "forward")
    b = 2.0 * f if backward is None else _costs(backward, "backward", f.size)
    m_count = check_int(micro_batches, "micro_batches", 1)
    check_schedule(schedule)
    v = check_int(virtual_stages, "virtual_stages", 1, 2**20)
    if f.size % v:
        raise ValueError(f"forward must have virtual_stages x N_p entries (v = {v}), got {f.size}")
    n_virtual, n = f.size, f.size // v
    check_virtual_stages(v, n, m_count, schedule)
    sends = _sends(send_time, n_virtual - 1)
    f_s, b_s = [float(val) for val in f], [float(val) for val in b]
    orders = [[(*op, 0)[:3] for op in order] for order in schedule_order(n, m_count, schedule, virtual_stages=v)]
    end: dict[tuple[str, int, int], float] = {}
    ops: list[StageOp] = []
    pos = [0] * n
    free = [0.0] * n
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for q in range(n):
            while pos[q] < len(orders[q]):
                kind, m, c = orders[q][pos[q]]
                j = c * n + q  # the virtual stage (the stage itself when v = 1)
                if kind == "F":
                    dep = ("F", j - 1, m) if j > 0 else None
                    hop = sends[j - 1] if j > 0 else 0.0
                else:
                    dep = ("B", j + 1, m) if j < n_virtual - 1 else ("F", j, m)
                    hop = sends[j] if j < n_virtual - 1 else 0.0
                if dep is not None and dep not in end:
                    break
                ready = end[dep] + hop if dep is not None else 0.0
                start = max(free[q], ready)
                stop = start + (f_s[j] if kind == "F" else b_s[j])
                end[(kind, j, m)] = stop
                ops.append(StageOp(q, kind, m, start, stop, chunk=c))
                free[q] = stop
                pos[q] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # pragma: no cover - impossible for the schedules above
            raise RuntimeError("the schedule deadlocks")
    ops.sort(key=lambda op: (op.start, op.stage))
    return Timeline(tuple(ops), n, m_count, schedule, "simulated", virtual_stages=v)


def _sends(send_time, boundaries: int) -> list[float]:
    """``send_time`` as one float per boundary (one value for all, or one each)."""
    send_arr = as_real(send_time, "send_time")
    check_range(send_arr, "send_time", 0.0)
    if send_arr.ndim == 0:
        return [float(send_arr)] * max(boundaries, 0)
    if send_arr.shape == (boundaries,):
        return [float(val) for val in send_arr]
    raise ValueError(
        f"send_time must be one number or one per boundary ({boundaries}), got shape {send_arr.shape}"
    )


def simulate_uniform(
    stages: int,
    micro_batches: int,
    *,
    schedule: str = "gpipe",
    forward: float = 1.0,
    backward: float | None = None,
    send_time: float = 0.0,
    virtual_stages: int = 1,
) -> Timeline:
    """:func:`simulate_pipeline` for ``N_p`` equal stages (what the formula assumes).

    With ``virtual_stages = v > 1`` each stage's work is cut into ``v`` equal chunks
    (``forward / v`` and ``backward / v`` each): the same model on the same devices,
    interleaved.

    Examples
    --------
    >>> round(simulate_uniform(3, 5).bubble(), 12) == round(bubble_fraction(3, 5), 12)
    True
    >>> round(simulate_uniform(3, 6, schedule="1f1b", virtual_stages=2).bubble(), 12)
    0.142857142857
    """
    stages = check_int(stages, "stages", 1)
    v = check_int(virtual_stages, "virtual_stages", 1, 2**20)
    back = None if backward is None else [backward / v] * (stages * v)
    return simulate_pipeline(
        [forward / v] * (stages * v), back, micro_batches=micro_batches, schedule=schedule, send_time=send_time,
        virtual_stages=v,
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
    check_type(model, "model", MLP, "a course_lib.models.MLP")
    return _layer_flops(model.sizes)


def _layer_flops(sizes) -> tuple[np.ndarray, np.ndarray]:
    """:func:`layer_flops` of a checked MLP's ``sizes``."""
    macs = np.array([a * b for a, b in zip(sizes[:-1], sizes[1:])], dtype=np.int64)
    forward = 2 * macs
    backward = 4 * macs
    backward[0] = 2 * macs[0]
    return forward, backward


def handover_bytes(model, boundaries, batch_size: int) -> int:
    """Bytes a pipeline hands between its stages in one step of ``batch_size`` samples.

    At every boundary between stages each sample's activation goes forward and its
    gradient comes back: ``2 x batch x width x itemsize`` per boundary, summed (what
    :attr:`course_lib.models.TrainResult.bytes_per_step` measures).

    Examples
    --------
    >>> handover_bytes(MLP((64, 32, 32, 16, 10)), (0, 2, 4), 100)   # one boundary, 32 wide
    25600
    """
    b = check_boundaries(model, boundaries)
    batch_size = check_int(batch_size, "batch_size", 1, 2**40)
    return 2 * batch_size * sum(model.sizes[k] for k in b[1:-1]) * model.dtype.itemsize


def check_boundaries(model, boundaries) -> tuple[int, ...]:
    """``boundaries`` as a tuple ``(0, b1, ..., n_layers)`` of strictly increasing layer indices."""
    check_type(model, "model", MLP, "a course_lib.models.MLP")
    return _check_boundaries(model.n_layers, boundaries)


def _check_boundaries(n_layers: int, boundaries) -> tuple[int, ...]:
    """:func:`check_boundaries` for a checked model of ``n_layers`` layers."""
    if isinstance(boundaries, (str, bytes)) or not isinstance(boundaries, Sequence):
        raise TypeError(f"boundaries must be a sequence of layer indices, got {boundaries!r}")
    b = tuple(check_int(v, f"boundaries[{i}]", 0) for i, v in enumerate(boundaries))
    if len(b) < 2 or b[0] != 0 or b[-1] != n_layers or any(x >= y for x, y in zip(b, b[1:])):
        raise ValueError(f"boundaries must increase strictly from 0 to n_layers = {n_layers}, got {b}")
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
        Boundaries ``(0, b1, ..., n_layers)``: stage ``q`` holds layers
        ``boundaries[q]`` .. ``boundaries[q + 1] - 1``.

    Notes
    -----
    Cached: the split depends only on the model's sizes and ``stages``, so each is
    computed once (an LRU cache of 1,024 splits) - the hybrid estimates of
    :mod:`course_lib.planner` ask for the same splits at every slider value.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> partition_layers(MLP((64, 64, 64, 64, 10)), 2)
    (0, 2, 4)
    >>> partition_layers(MLP((784, 1024, 10)), 2)
    (0, 1, 2)
    """
    check_type(model, "model", MLP, "a course_lib.models.MLP")
    return _partition_layers(model, check_int(stages, "stages", 1, model.n_layers))


@functools.lru_cache(maxsize=1024)
def _partition_layers(model: MLP, stages: int) -> tuple[int, ...]:
    """:func:`partition_layers` on checked arguments, cached (pure; returns a tuple)."""
    n = model.n_layers
    f, b = _layer_flops(model.sizes)
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
    b_ = check_boundaries(model, boundaries)
    f, b = layer_flops(model)
    fs = np.array([f[lo:hi].sum() for lo, hi in zip(b_[:-1], b_[1:])])
    bs = np.array([b[lo:hi].sum() for lo, hi in zip(b_[:-1], b_[1:])])
    return fs, bs
