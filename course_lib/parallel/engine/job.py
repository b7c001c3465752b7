"""One description of a run, checked once: the :class:`Job`, its one door :func:`check_job`,
the keywords every trainer shares, and the :class:`Grid` of a pipeline's processes.

Every trainer (data parallel and ZeRO, tensor, pipeline and hybrid), every one-process
reference (:mod:`course_lib.parallel.train.reference`) and the torch engine check their
arguments here, once, at the entry point the notebook calls, with the same rules and
messages, naming a bad argument. What comes out is a :class:`Job`: everything a worker needs
besides the shared arrays, small and picklable (what goes into a starting worker stays small:
see :mod:`course_lib.parallel.engine.workers`). Behind this door nothing checks again.

The keywords every trainer takes (``batch_size, steps, epochs, lr, seed, params,
blas_threads``; a process trainer also ``start_method, timeout, progress, fault``) are
declared once, in :data:`RUN_KEYWORDS` and :data:`PROCESS_KEYWORDS`, and given to each trainer
by the decorator :func:`run_keywords`.

Examples
--------
>>> from course_lib.models import MLP
>>> x = np.zeros((10, 4), np.float32); y = np.zeros(10, int)
>>> _, _, _, job = check_job(MLP((4, 3, 2)), x, y, workers=2, batch_size=4, epochs=2)
>>> job.steps, [idx.size for idx in job.batches()][:3]
(6, [4, 4, 2])
>>> check_job(MLP((4, 3, 2)), x, y, workers=2, batch_size=1)
Traceback (most recent call last):
...
ValueError: batch_size must be >= workers so that every worker gets a sample, got batch_size=1, workers=2
>>> check_job(MLP((4, 3, 2, 2)), x, y, workers=3, batch_size=4, epochs=1, schedule="gpipe")  # 3 pipelines
Traceback (most recent call last):
...
ValueError: every batch needs at least data = 3 samples (one per replica); the last batch of an epoch has 2: choose batch_size so that it divides the 10 samples better, or use steps
>>> Grid(replicas=2, stages=3).coords(4), Grid(2, 3).rank(1, 1)
((1, 1), 4)
"""

from __future__ import annotations

import copy
import functools
import inspect
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..._validate import as_real, check_int, check_positive, check_real, check_type
from ...models import MLP, check_model
from ..partition import batches, replica_rows
from .workers import Fault, check_start_method

__all__ = [
    "BACKENDS",
    "MAX_STEPS",
    "PROCESS_KEYWORDS",
    "RUN_KEYWORDS",
    "Grid",
    "Job",
    "check_flag",
    "check_job",
    "run_keywords",
]

MAX_STEPS = 10**7
"""Most steps of one run (every result holds each step's timings in memory)."""

#: How the workers of a run communicate (data parallel: the first four), and the one-process runs.
BACKENDS = ("shm", "pipe", "gloo", "wire", "tensor", "pipeline", "context", "experts", "serial")

#: The keywords every trainer and one-process reference takes, with their defaults.
RUN_KEYWORDS = {"batch_size": 32, "steps": None, "epochs": None, "lr": 0.1, "seed": 0, "params": None,
                "blas_threads": 1}
#: The keywords every trainer that starts processes takes besides, with their defaults.
PROCESS_KEYWORDS = {"start_method": None, "timeout": 60.0, "progress": None, "fault": None}

_KEYWORDS_DOC = """
    The run keywords every trainer shares (declared once:
    :data:`course_lib.parallel.engine.job.RUN_KEYWORDS`, checked by
    :func:`~course_lib.parallel.engine.job.check_job`):

    batch_size : int
        The global batch, in [1, n] (32).
    steps, epochs : int, optional
        Steps, or epochs of ``ceil(n / batch_size)`` steps (the last batch of an epoch
        holds what is left); not both; neither: one epoch.
    lr : float
        Learning rate of plain SGD, finite and > 0 (0.1; ignored with an ``optimizer``).
    seed : int
        Seeds the initial parameters (``model.init_params(seed)``) and the batches (0).
    params : numpy.ndarray, optional
        Start from these parameters (copied) instead.
    blas_threads : int or None
        BLAS threads per process (1: N processes use N cores; None: no limit)."""

_PROCESS_DOC = """
    start_method : {"fork", "forkserver", "spawn"} or None
        How workers start (None: ``forkserver`` on Linux, ``spawn`` elsewhere).
    timeout : float
        Seconds without progress after which a hung run is stopped (60).
    progress : bool or None
        Progress bar; None shows it in a notebook for runs longer than ~1.5 s.
    fault : course_lib.parallel.engine.workers.Fault, optional
        Make one process fail on purpose (tests, demonstrations)."""


def run_keywords(processes: bool = True) -> Callable:
    """Decorator: the trainer takes :data:`RUN_KEYWORDS` (and, if ``processes``,
    :data:`PROCESS_KEYWORDS`) as keyword-only arguments with their defaults, besides its own.

    The function itself declares ``**run``: it receives every shared keyword there, with its
    default filled in, and hands them to :func:`check_job`. Its signature (``help()``,
    Shift-Tab) and docstring show them all; an unknown keyword is a TypeError as usual.
    """
    shared = {**RUN_KEYWORDS, **(PROCESS_KEYWORDS if processes else {})}

    def decorate(func: Callable) -> Callable:
        own = [p for p in inspect.signature(func).parameters.values() if p.kind != p.VAR_KEYWORD]
        taken = {p.name for p in own}
        extra = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d)
                 for n, d in shared.items() if n not in taken]
        signature = inspect.signature(func).replace(parameters=own + extra)

        @functools.wraps(func)
        def call(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)  # TypeError for an unknown or missing argument
            bound.apply_defaults()
            return func(*bound.args, **bound.kwargs)

        call.__signature__ = signature
        doc = inspect.getdoc(func) or ""
        call.__doc__ = doc + "\n\nShared keywords\n---------------" + _KEYWORDS_DOC.replace("\n    ", "\n") + (
            _PROCESS_DOC.replace("\n    ", "\n") if processes else "")
        return call

    return decorate


class Grid(NamedTuple):
    """The processes of a data x pipeline run: ``replicas`` (``N_d``) copies of a pipeline of
    ``stages`` (``N_p``) stages. Process ``rank`` is stage ``rank % N_p`` of replica
    ``rank // N_p``; plain data parallelism is ``Grid(N, 1)``, a plain pipeline ``Grid(1, N_p)``."""

    replicas: int
    stages: int

    @property
    def size(self) -> int:
        """The number of processes, ``N_d N_p``."""
        return self.replicas * self.stages

    def coords(self, rank: int) -> tuple[int, int]:
        """``(replica, stage)`` of process ``rank``."""
        return divmod(rank, self.stages)

    def rank(self, replica: int, stage: int) -> int:
        """The process of stage ``stage`` of replica ``replica``."""
        return replica * self.stages + stage


@dataclass(frozen=True)
class Job:
    """A run's checked arguments: everything a worker needs besides the shared arrays
    (small, picklable). Made only by :func:`check_job`."""

    model: Any
    n_samples: int
    batch_size: int
    steps: int
    lr: float
    seed: int
    workers: int
    """Data-parallel workers: the replicas ``N_d`` (of a pipeline, of the whole model), or
    the tensor-parallel workers ``N_t`` (who all see the whole batch)."""
    blas_threads: int | None
    fault: Fault | None = None
    optimizer: Any = None
    """None (plain SGD with ``lr``) or an optimizer with state, e.g. ``optim.SGD(lr, momentum=0.9)``."""
    zero_stage: int = 0
    start_method: str = "fork"
    timeout: float = 60.0
    progress: bool | None = None
    boundaries: tuple[int, ...] = ()
    """Pipelines: the layer indices where the ``v N_p`` model chunks begin, and ``n_layers``."""
    schedule: str | None = None
    """Pipelines: "gpipe" or "1f1b" (the order of each stage's forwards and backwards)."""
    micro_batches: int = 1
    """Pipelines: micro-batches ``M`` per replica."""
    virtual_stages: int = 1
    recompute: bool = False
    backend: str = "serial"
    """How the workers communicate: "shm", "pipe", "gloo", "wire" (data parallel), "tensor",
    "pipeline", "context", "experts"; one-process references: "serial" (set by the reference itself)."""
    buckets: int = 1
    """Data parallel: buckets of layers whose all-reduce overlaps the backward pass."""
    wire: Any = None
    """Backend "wire": the modelled link (a :class:`course_lib.parallel.allreduce.Wire`)."""
    start_step: int = 0
    """The steps done before this run: a run resumed from a checkpoint of step ``s`` runs
    steps ``s .. s + steps - 1`` of the same sequence of batches."""
    checkpoint: Any = None
    """None, or how the run writes checkpoints and what it resumes from (a
    :class:`course_lib.parallel.engine.checkpointing.CheckpointPlan`)."""

    @property
    def grid(self) -> Grid:
        """The processes: ``Grid(N_d, N_p)`` (``N_p`` = 1 without a pipeline)."""
        chunks = max(len(self.boundaries) - 1, 1)
        return Grid(self.workers, chunks // self.virtual_stages)

    def batches(self):
        """The sample indices of every step (:func:`course_lib.parallel.partition.batches`),
        derived from the seed in the worker itself (a list of them is never pickled into a
        starting process: it could block its start)."""
        every = batches(self.n_samples, self.batch_size, self.seed, steps=self.start_step + self.steps)
        return itertools.islice(every, self.start_step, None) if self.start_step else every

    def step_sizes(self) -> np.ndarray:
        """The size of every step's batch of this run (:func:`course_lib.parallel.partition.batch_sizes`,
        from step ``start_step`` on)."""
        from ..partition import batch_sizes

        return batch_sizes(self.n_samples, self.batch_size, self.start_step + self.steps)[self.start_step:]

    def new_optimizer(self):
        """A fresh copy of the optimizer (each worker and each run owns its state), or None."""
        return None if self.optimizer is None else copy.deepcopy(self.optimizer)

    def scale(self, samples: int) -> np.floating:
        """Factor turning a step's summed gradient into its update: lr / samples, in the model's dtype."""
        return self.model.dtype.type(self.lr / samples)

    def update(self, params: np.ndarray, total: np.ndarray, samples: int, optimizer, buffer: np.ndarray) -> None:
        """Apply a step's summed gradient ``total`` to ``params`` in place: plain SGD,
        ``params -= (lr / samples) * total``, or ``optimizer.step(params, total / samples)``."""
        if optimizer is None:
            np.multiply(total, self.scale(samples), out=buffer)
            params -= buffer
        else:
            np.multiply(total, self.model.dtype.type(1.0 / samples), out=buffer)
            optimizer.step(params, buffer)


def check_job(model, x, y, *, workers: int = 1, batch_size: int = 32, steps: int | None = None,
              epochs: int | None = None, lr: float = 0.1, seed: int = 0, params=None,
              blas_threads: int | None = 1, start_method: str | None = None, timeout: float = 60.0,
              progress: bool | None = None, fault: Fault | None = None, models: tuple[type, ...] | None = (MLP,),
              batch_split: bool = True, optimizer=None, zero_stage: int = 0, stages: int | None = None,
              boundaries=None, micro_batches: int = 1, schedule: str | None = None, virtual_stages: int = 1,
              recompute: bool = False, backend: str = "serial", buckets: int = 1, wire=None):
    """Check a run's arguments (naming the bad one); return the data, the initial parameters
    and the :class:`Job`.

    Parameters
    ----------
    model, x, y
        A course model (:class:`course_lib.models.Model`; one of ``models`` if given) and
        its data, checked by the model itself (``check_x``, ``check_y``).
    workers : int
        Data-parallel workers, >= 1, each with a shard of every batch (a pipeline: its
        replicas ``N_d``, named ``data`` in the messages).
    batch_size, steps, epochs, lr, seed, params, blas_threads
        :data:`RUN_KEYWORDS`; ``params`` finite, of the model's size.
    start_method, timeout, progress, fault
        :data:`PROCESS_KEYWORDS`; ``fault.rank`` names a process.
    models : tuple of type or None
        The model classes the trainer computes with (None: any course model).
    batch_split : bool
        False (tensor parallelism: every worker sees the whole batch) allows more workers
        than samples in a batch.
    optimizer, zero_stage
        An object with ``step(params, grad)`` or None; ZeRO stage 0 to 3 (1 to 3 need an
        element-wise optimizer: one whose ``elementwise`` is True).
    stages, boundaries, micro_batches, schedule, virtual_stages, recompute
        Pipelines (``schedule`` given): ``N_p`` stages (default 2) split by
        :func:`course_lib.schedule.partition_layers`, or explicit ``boundaries`` of the
        ``v N_p`` model chunks; ``M`` micro-batches per replica in [1, batch_size // N_d]
        (interleaved: every batch's ``M`` a multiple of ``N_p``); every batch, the last of an
        epoch included, needs one sample per replica.
    backend, buckets, wire
        How the workers communicate (data parallel: "shm", "pipe", "gloo" or "wire"; the
        others name their kind), and data parallelism's buckets of layers, in [1, n_layers]
        (more than one needs "shm" or "wire", and no ZeRO). ``wire`` (backend "wire" only): a
        :class:`~course_lib.parallel.allreduce.Wire` or a pair ``(alpha, beta)``, None: the
        default ``Wire()``; a step's modelled communication must fit in ``timeout``. "gloo"
        needs torch (checked last: a bad call hears what is wrong with it, not to install torch).

    Returns
    -------
    x, y, params : numpy.ndarray
        The data as the model computes with it, and the initial parameters.
    Job
        The checked arguments.
    """
    model = check_model(model, models)
    x = model.check_x(x)
    y = model.check_y(y, x.shape[0])
    n = x.shape[0]
    if n == 0:
        raise ValueError("x must hold at least one sample")
    pipeline = schedule is not None
    split = "data" if pipeline else "workers"  # how the caller names its replicas
    workers = check_int(workers, split, 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    if batch_size > n:
        raise ValueError(f"batch_size must be <= the number of samples ({n}), got {batch_size}")
    if batch_split and batch_size < workers:
        raise ValueError(
            f"batch_size must be >= {split} so that every {'replica' if pipeline else 'worker'} "
            f"gets a sample, got batch_size={batch_size}, {split}={workers}"
        )
    if steps is not None and epochs is not None:
        raise ValueError("give either steps or epochs, not both")
    if steps is not None:
        steps = check_int(steps, "steps", 1, MAX_STEPS)
    else:
        epochs = check_int(1 if epochs is None else epochs, "epochs", 1)
        steps = epochs * -(-n // batch_size)  # an epoch: ceil(n / batch_size) steps
        if steps > MAX_STEPS:
            raise ValueError(f"epochs = {epochs} make {steps} steps, more than {MAX_STEPS}")
    lr = check_positive(lr, "lr")
    seed = check_int(seed, "seed", 0)
    if blas_threads is not None:
        blas_threads = check_int(blas_threads, "blas_threads", 1)
    start_method = check_start_method(start_method)
    timeout = check_positive(timeout, "timeout")
    if progress is not None:
        progress = check_flag(progress, "progress")
    recompute = check_flag(recompute, "recompute")
    chunks = ()
    if pipeline:
        chunks, micro_batches = _check_pipeline(model, n, batch_size, steps, workers, stages, boundaries,
                                                micro_batches, schedule, virtual_stages)
    processes = workers * (len(chunks) - 1) // virtual_stages if pipeline else workers
    if fault is not None:
        check_type(fault, "fault", Fault, "a course_lib.parallel.engine.workers.Fault or None")
        check_int(fault.rank, "fault.rank", 0, processes - 1)
    if optimizer is not None and not callable(getattr(optimizer, "step", None)):
        raise TypeError(f"optimizer must have a step(params, grad) method, got {type(optimizer).__name__}")
    if callable(getattr(optimizer, "fresh", None)):
        optimizer = optimizer.fresh()  # a template: no state of an earlier run goes into a worker
    zero_stage = check_int(zero_stage, "zero_stage", 0, 3)
    if zero_stage >= 1 and optimizer is not None and not getattr(optimizer, "elementwise", False):
        raise ValueError(
            f"zero_stage={zero_stage} shards the optimizer state by chunks of the flat buffer, which needs an "
            f"element-wise optimizer (optim.SGD); {type(optimizer).__name__} needs whole layers"
        )
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS[:4]}, got {backend!r}")
    if zero_stage and backend != "shm":
        raise ValueError(f"zero_stage={zero_stage} needs backend='shm' (its reduce-scatter and all-gather), "
                         f"got {backend!r}")
    buckets = check_int(buckets, "buckets", 1)
    if buckets > getattr(model, "n_layers", 1):
        raise ValueError(f"buckets must be in [1, {getattr(model, 'n_layers', 1)}] (one layer each at most), "
                         f"got {buckets}")
    if buckets > 1 and (backend not in ("shm", "wire") or zero_stage):
        raise ValueError(f"buckets > 1 needs backend='shm' or 'wire' and zero_stage=0, got buckets={buckets}, "
                         f"backend={backend!r}, zero_stage={zero_stage}")
    p0 = _start_params(model, params, seed)
    if backend == "wire" or wire is not None:
        wire = _check_wire(wire, backend, p0.nbytes, workers, buckets, timeout)
    if backend == "gloo":
        from .gloo import require_torch

        require_torch()
    job = Job(model, n, batch_size, steps, lr, seed, workers, blas_threads, fault, optimizer, zero_stage,
              start_method, timeout, progress, chunks, schedule, micro_batches, virtual_stages, recompute,
              backend, buckets, wire)
    return x, y, p0, job


def _check_pipeline(model, n, batch_size, steps, replicas, stages, boundaries, micro_batches, schedule,
                    virtual_stages) -> tuple[tuple[int, ...], int]:
    """The pipeline's model chunks and micro-batches, checked (see :func:`check_job`)."""
    from ...schedule import (
        _check_boundaries,
        _partition_layers,
        check_schedule,
        check_virtual_stages,
    )

    check_schedule(schedule)
    v = check_virtual_stages(virtual_stages, 1, None, schedule)
    if boundaries is not None:
        chunks = _check_boundaries(model.n_layers, boundaries)
        if (len(chunks) - 1) % v:
            raise ValueError(f"boundaries must split the layers into virtual_stages x stages chunks "
                             f"(v = {v}), got {len(chunks) - 1} chunks: {chunks}")
        if stages is not None and check_int(stages, "stages", 1) * v != len(chunks) - 1:
            raise ValueError(f"stages = {stages} does not match boundaries {chunks} ({len(chunks) - 1} stages)")
    else:
        n_stages = 2 if stages is None else check_int(stages, "stages", 1)
        if v * n_stages > model.n_layers:
            raise ValueError(f"virtual_stages x stages = {v} x {n_stages} model chunks must be at most "
                             f"n_layers = {model.n_layers} (a chunk holds at least one layer)")
        chunks = _partition_layers(model, v * n_stages)  # the model and the count are checked
    n_stages = (len(chunks) - 1) // v
    micro_batches = check_int(micro_batches, "micro_batches", 1, batch_size // replicas)
    per_epoch = -(-n // batch_size)  # every batch holds batch_size samples but the last of an epoch
    sizes = [batch_size] + ([n - (per_epoch - 1) * batch_size] if steps >= per_epoch else [])
    if min(sizes) < replicas:
        raise ValueError(
            f"every batch needs at least data = {replicas} samples (one per replica); the last "
            f"batch of an epoch has {min(sizes)}: choose batch_size so that it divides the "
            f"{n} samples better, or use steps"
        )
    for size in sizes:  # interleaved: every step's micro-batches come in groups of N_p
        for rows in replica_rows(int(size), replicas, micro_batches):
            check_virtual_stages(v, n_stages, len(rows), schedule)
    return chunks, micro_batches


def _check_wire(wire, backend: str, nbytes: int, workers: int, buckets: int, timeout: float):
    """Backend "wire": ``wire`` as a checked :class:`~course_lib.parallel.allreduce.Wire`
    (see :func:`check_job`); any other backend: None (a ``wire`` given there is an error)."""
    from ..allreduce import Wire

    if backend != "wire":
        if wire is not None:
            raise ValueError(f"wire={wire!r} needs backend='wire', got backend={backend!r}")
        return None
    wire = Wire() if wire is None else wire
    if isinstance(wire, Wire):
        pair = (wire.alpha, wire.beta)
    elif isinstance(wire, (tuple, list)) and len(wire) == 2:
        pair = tuple(wire)
    else:
        raise TypeError(f"wire must be a Wire(alpha, beta) or a pair (alpha, beta): alpha seconds per message, "
                        f"beta bytes per second, got {wire!r}")
    wire = Wire(check_real(pair[0], "wire.alpha (seconds per message)", 0.0, np.inf),
                check_real(pair[1], "wire.beta (bytes per second)", 0.0, np.inf, low_open=True))
    step = float(wire.allreduce_time(nbytes, workers) + (buckets - 1) * wire.allreduce_time(0, workers))
    if step >= timeout:
        raise ValueError(f"wire={wire} gives {step:.3g} s of modelled communication per step ({buckets} bucket(s) of "
                         f"{nbytes} bytes in all on {workers} workers), not less than timeout={timeout:g} s: "
                         f"raise wire.beta or timeout")
    return wire


def check_flag(value, name: str) -> bool:
    """``value`` as a bool (True, False or a numpy bool), else TypeError naming ``name``."""
    return bool(check_type(value, name, (bool, np.bool_), "True or False"))


def _start_params(model, params, seed: int) -> np.ndarray:
    """The initial parameters: ``model.init_params(seed)``, or a finite copy of ``params``."""
    if params is None:
        return model.init_params(seed)
    params = np.array(as_real(params, "params"), dtype=model.dtype)
    model.check_flat(params, "params")
    if not np.all(np.isfinite(params)):
        raise ValueError("params must be finite")
    return params
