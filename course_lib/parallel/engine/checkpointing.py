"""Checkpoints beside a worker's loop: the arguments checked once, the writer, the resume.

The trainers (:func:`course_lib.parallel.train.data.train_data_parallel`,
:func:`course_lib.parallel.train.pipeline.train_pipeline`) take the same keywords,
documented once in :data:`CHECKPOINT_DOC` and checked once, at the door, by
:func:`check_checkpointing`: it picks the checkpoint a run resumes from
(:func:`course_lib.parallel.checkpoint.latest_checkpoint`) and returns the job that runs the
remaining steps from its parameters. In each worker a :class:`Saver` wraps the loop's
batches: after every ``checkpoint_every``-th step it writes the worker's shard
(:func:`course_lib.parallel.checkpoint.write_checkpoint`), synchronously, or with
``checkpoint_async=True`` by copying the state and leaving the write to a background thread
while the next steps run. The loops a lecture shows are unchanged: a data-parallel loop's
state is seen through :class:`Watched` (the job, which hands it its optimizer and receives
every update), a pipeline stage's parameters live in shared memory.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..._validate import check_int, check_real, check_type
from .. import checkpoint as checkpoint_module
from ..checkpoint import (
    CheckpointError,
    latest_checkpoint,
    load_checkpoint,
    shard_name,
    step_folder,
    write_checkpoint,
)
from ..partition import chunk_bounds
from .crash import armed, fire_at

__all__ = ["CHECKPOINT_DOC", "STORES", "CheckpointPlan", "check_checkpointing"]

#: Complete checkpoints a run keeps in its folder (the newest; older ones are removed once a
#: newer one is complete): two, so that a damaged newest one leaves one to fall back to.
KEEP = 2
#: Most seconds of ``checkpoint_delay``: a modelled storage time, not a pause of minutes.
MAX_DELAY = 10.0

CHECKPOINT_DOC = """
    checkpoint_every : int, optional
        Write a checkpoint (训练检查点) after every ``checkpoint_every`` steps (counted from the
        run's first step, a resumed run's included), in [1, steps]; needs ``checkpoint_dir``.
        Every worker writes its own shard of the state (1/N of the parameters and of the
        optimizer state, a pipeline stage its layers) with the step, to a temporary file that
        is flushed and renamed into place; worker 0 writes the manifest (each shard's size and
        sha256) last. The newest two complete checkpoints are kept.
        (:mod:`course_lib.parallel.checkpoint`)
    checkpoint_dir : str or os.PathLike, optional
        The folder of the checkpoints (created if needed). It may hold checkpoints of later
        steps than this run starts from only if they are incomplete or damaged (a failed
        run's: they are removed); any other is refused, to overwrite no finished work.
    resume : str or os.PathLike, optional
        A checkpoint folder: continue from its newest complete checkpoint (newer ones that
        are incomplete or damaged are skipped, ``extra["refused_checkpoints"]`` says why) and
        run the steps left of ``steps``. The run must have the checkpoint's model size and
        dtype, data, batch size, seed and optimizer type; the number of workers, the ZeRO
        stage and a pipeline's stages may differ (the state is re-split). On the same layout
        the final parameters are bitwise those of an uninterrupted run. Not with ``params``.
    checkpoint_async : bool
        False: every worker waits until the checkpoint is written. True: it copies its state
        (the part that blocks) and a background thread writes it while the next steps run; a
        checkpoint still being written when the next one is due is waited for.
    checkpoint_delay : float
        Seconds of modelled storage time added to every shard write, in [0, 10] (0: your
        disk alone): a slower store than the learner's disk, for measurements.
    checkpoint_store : {"disk", "memory"}
        "disk": every file is flushed to the disk (fsync) before it is renamed. "memory": not
        flushed: the checkpoint stays in the operating system's page cache, which survives a
        killed worker or notebook but not a crashed machine (an in-memory checkpoint: fast,
        and lost with the machine)."""

#: Where a run's checkpoints are kept (``checkpoint_store``).
STORES = ("disk", "memory")


@dataclass(frozen=True)
class CheckpointPlan:
    """How a run writes checkpoints and what it resumes from (small, picklable: it goes into
    every worker with the :class:`~course_lib.parallel.engine.job.Job`)."""

    every: int | None
    """Steps between checkpoints (None: the run writes none)."""
    folder: str | None
    """Where it writes them."""
    resume: str | None = None
    """The checkpoint folder (one step's) the run resumes from."""
    asynchronous: bool = False
    delay: float = 0.0
    keep: int = KEEP
    store: str = "disk"


def _folder(value, name: str) -> Path:
    check_type(value, name, (str, os.PathLike), "a folder (str or os.PathLike)")
    return Path(value)


def check_checkpointing(job, p0: np.ndarray, *, checkpoint_every=None, checkpoint_dir=None,
                        resume=None, checkpoint_async=False, checkpoint_delay=0.0, checkpoint_store="disk",
                        params=None):
    """Check the checkpoint keywords (:data:`CHECKPOINT_DOC`) of a run already checked by
    :func:`~course_lib.parallel.engine.job.check_job`; return its initial parameters, its job
    (a resumed run: its remaining steps, from the checkpoint's step) and the checkpoint it
    resumes from (None)."""
    from .job import MAX_STEPS, Job, check_flag

    check_type(job, "job", Job, "a Job (course_lib.parallel.engine.job.check_job)")
    check_type(p0, "p0", np.ndarray, "the run's initial parameters (a numpy array)")
    asynchronous = check_flag(checkpoint_async, "checkpoint_async")
    delay = check_real(checkpoint_delay, "checkpoint_delay", 0.0, MAX_DELAY)
    if checkpoint_store not in STORES:
        raise ValueError(f"checkpoint_store must be one of {STORES}, got {checkpoint_store!r}")
    fault = job.fault
    if checkpoint_every is None and checkpoint_dir is None and resume is None:
        if asynchronous or delay or checkpoint_store != "disk":
            raise ValueError("checkpoint_async, checkpoint_delay and checkpoint_store need checkpoint_every and "
                             "checkpoint_dir")
        if fault is not None and fault.point is not None:
            raise ValueError(f"fault.point={fault.point!r} is a point of a checkpoint write: it needs checkpoint_every")
        return p0, job, None
    if (checkpoint_every is None) != (checkpoint_dir is None):
        raise ValueError("checkpoint_every and checkpoint_dir go together: how often, and into which folder, got "
                         f"checkpoint_every={checkpoint_every!r}, checkpoint_dir={checkpoint_dir!r}")
    if checkpoint_every is None and (asynchronous or delay or checkpoint_store != "disk"):
        raise ValueError("checkpoint_async, checkpoint_delay and checkpoint_store need checkpoint_every and "
                         "checkpoint_dir")
    every = None if checkpoint_every is None else check_int(checkpoint_every, "checkpoint_every", 1, MAX_STEPS)
    checkpoint = None
    if resume is not None:
        if params is not None:
            raise ValueError("give params or resume, not both: a resumed run starts from the checkpoint's parameters")
        folder = _folder(resume, "resume")
        if not folder.is_dir():
            raise ValueError(f"resume must be a folder of checkpoints; {str(folder)!r} is not a folder")
        checkpoint = latest_checkpoint(folder)  # CheckpointError (a ValueError) if none is complete
        _check_same_run(checkpoint, job, p0)
        if checkpoint.step >= job.steps:
            raise ValueError(f"resume: the checkpoint is of step {checkpoint.step}; steps={job.steps} leaves nothing "
                             "to run (steps counts from the run's first step)")
        p0 = checkpoint.params.astype(p0.dtype)
        job = dataclasses.replace(job, start_step=checkpoint.step, steps=job.steps - checkpoint.step)
    if every is not None:
        if every > job.start_step + job.steps:
            raise ValueError(f"checkpoint_every must be in [1, steps = {job.start_step + job.steps}], got {every}")
        _claim(_folder(checkpoint_dir, "checkpoint_dir"), job.start_step)
    if fault is not None and fault.point is not None and (
            every is None or fault.step % every or not job.start_step < fault.step <= job.start_step + job.steps):
        raise ValueError(f"fault.step={fault.step} with a point must be a step whose checkpoint this run writes: a "
                         f"multiple of checkpoint_every={every} in ({job.start_step}, {job.start_step + job.steps}]")
    plan = CheckpointPlan(every, None if every is None else str(Path(checkpoint_dir).resolve()),
                          None if checkpoint is None else str(checkpoint.folder.resolve()), asynchronous, delay,
                          store=checkpoint_store)
    return p0, dataclasses.replace(job, checkpoint=plan), checkpoint


def _check_same_run(checkpoint, job, p0: np.ndarray) -> None:
    """That the run resuming ``checkpoint`` is the run that wrote it (ValueError naming what differs)."""
    m = checkpoint.manifest
    have = {"n_params": p0.size, "dtype": str(p0.dtype), "n_samples": job.n_samples, "batch_size": job.batch_size,
            "seed": job.seed, "optimizer": _optimizer_name(job.optimizer)}
    for key, value in have.items():
        if m.get(key) != value:
            raise ValueError(f"resume: the checkpoint {checkpoint.folder.name} was written by a run with "
                             f"{key}={m.get(key)!r}; this run has {key}={value!r} (a resumed run must continue the "
                             "same training: model, data, batches and optimizer)")


def _optimizer_name(optimizer) -> str | None:
    return None if optimizer is None else type(optimizer).__name__


def _step_of(folder: Path) -> int | None:
    try:
        return int(folder.name.split("-", 1)[1])
    except (IndexError, ValueError):
        return None


def _claim(folder: Path, start: int) -> None:
    """Make ``folder`` the run's: create it; remove the checkpoints of steps after ``start``
    that are incomplete or damaged (a failed run's, to be written again); refuse complete ones."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"checkpoint_dir {str(folder)!r} cannot be created: {err}") from None
    if not folder.is_dir():
        raise ValueError(f"checkpoint_dir {str(folder)!r} is not a folder")
    later, broken = [f for f in folder.glob("step-*") if (_step_of(f) or 0) > start], []
    for found in sorted(later, reverse=True):
        try:
            load_checkpoint(found)
        except CheckpointError:
            broken.append(found)
            continue
        raise ValueError(f"checkpoint_dir {str(folder)!r} holds a complete checkpoint of step {_step_of(found)}, later "
                         f"than this run's start (step {start}): resume from it (resume=...), or choose another folder")
    for found in broken:
        shutil.rmtree(found, ignore_errors=True)  # a failed run's: this run writes it again


def restore_optimizer(optimizer, checkpoint, lo: int = 0, hi: int | None = None):
    """``optimizer`` (a fresh one, or None) with the state of ``checkpoint``: its update count and
    its arrays' ``[lo, hi)`` (the chunk a ZeRO worker keeps; the whole for plain data parallelism)."""
    if optimizer is None:
        return None
    optimizer.t = checkpoint.optimizer_steps
    for name, whole in checkpoint.optimizer.items():
        setattr(optimizer, name, whole[lo:hi].copy())
    return optimizer


class Watched:
    """A data-parallel loop's job, seen from outside: ``new_optimizer()`` hands the loop its
    (restored) optimizer, ``update(...)`` does the job's update and remembers the arrays it
    updated (the worker's parameters or ZeRO chunk) and the optimizer. Every other attribute
    is the job's."""

    def __init__(self, job, optimizer=None):
        self._job, self._optimizer = job, optimizer
        self.params = self.optimizer = None

    def __getattr__(self, name: str):
        return getattr(self._job, name)

    def new_optimizer(self):
        return self._job.new_optimizer() if self._optimizer is None else self._optimizer

    def update(self, params, total, samples, optimizer, buffer) -> None:
        self._job.update(params, total, samples, optimizer, buffer)
        self.params, self.optimizer = params, optimizer


def shard_state(params: np.ndarray, ranges, optimizer=None, *, sharded: bool = False) -> dict:
    """A shard's arrays: the pieces ``ranges`` of the flat ``params`` (``sharded``: ``params``
    and the optimizer's arrays are already those pieces, one chunk), and of every optimizer
    state array, with the optimizer's update count."""
    ranges = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)

    def pieces(a):
        return a.copy() if sharded else np.concatenate([a[lo:hi] for lo, hi in ranges])

    out = {"params": pieces(params), "ranges": ranges}
    if optimizer is not None:
        out["opt.t"] = np.int64(optimizer.t)
        out.update({f"opt.{k}": pieces(v) for k, v in vars(optimizer).items() if isinstance(v, np.ndarray)})
    return out


class Saver:
    """Writes one worker's checkpoints beside its loop.

    Parameters
    ----------
    wctx : WorkerContext
    job : Job
        The run (its ``checkpoint`` plan, its start step, its fault).
    rank, writers : int
        This worker's shard number, and how many workers write shards.
    state : callable
        ``state()`` returns the worker's shard arrays now (:func:`shard_state`).
    wait : callable
        ``wait()`` returns once every worker's shard of the checkpoint is in place (a barrier;
        asynchronous writes poll the folder instead).
    manifest : dict
        What worker 0's manifest says besides the shards (the run, for a resume's checks).

    :meth:`steps` wraps the loop's batches: after every ``every``-th step it writes a
    checkpoint (its time goes into that step's). ``log`` holds ``(step, seconds)`` of every
    checkpoint: the seconds the loop was held up.
    """

    def __init__(self, wctx, job, rank: int, writers: int, state, wait, manifest: dict):
        self.wctx, self.job, self.plan = wctx, job, job.checkpoint
        self.rank, self.writers, self.state, self.wait = rank, writers, state, wait
        self.manifest = {**manifest, "writers": writers}
        checkpoint_module.DURABLE = self.plan.store == "disk"  # fsync, or the page cache only
        self.log: list[tuple[int, float]] = []
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def steps(self, batches):
        """``batches``, with a checkpoint after every ``every``-th step."""
        step = self.job.start_step
        for item in batches:
            yield item
            step += 1
            if step % self.plan.every == 0:
                self.save(step)
        self.finish()

    def save(self, step: int) -> None:
        """Write the checkpoint of ``step`` (or start writing it, asynchronously)."""
        t0 = time.perf_counter()
        if self.plan.asynchronous:
            self.finish()  # the previous write must be done first
            arrays = {k: np.array(v, copy=True) for k, v in self.state().items()}  # the copy to memory
            self._thread = threading.Thread(target=self._write_in_background, args=(step, arrays),
                                            name="ddl-checkpoint", daemon=True)
            self._thread.start()
        else:
            self._write(step, self.state(), self._wait_all)
        self.log.append((step, time.perf_counter() - t0))

    def finish(self) -> None:
        """Wait for an asynchronous write still in progress; raise what it raised."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _wait_all(self) -> None:
        self.wait()

    def _write(self, step: int, arrays: dict, all_saved) -> None:
        with armed(self.job.fault, self.rank, step):
            fire_at("before write")
            if self.plan.delay:
                time.sleep(self.plan.delay)  # the modelled storage time of this shard
            arrays = {**arrays, "seed": np.int64(self.job.seed)}  # the batches' random state: with the step, the data position
            write_checkpoint(Path(self.plan.folder), step, self.rank, arrays, all_saved, self.manifest)
            if self.rank == 0:
                prune(Path(self.plan.folder), self.plan.keep)

    def _write_in_background(self, step: int, arrays: dict) -> None:
        try:
            self._write(step, arrays, lambda: self._shards_on_disk(step))
        except BaseException as err:  # noqa: BLE001 - raised in the loop's thread at the next checkpoint
            self._error = err

    def _shards_on_disk(self, step: int) -> None:
        """Asynchronous writes: worker 0 waits until every shard of ``step`` is in place."""
        if self.rank != 0:
            return
        folder = Path(self.plan.folder) / step_folder(step)
        deadline = time.monotonic() + self.wctx.wait_timeout
        while not all((folder / shard_name(r)).is_file() for r in range(self.writers)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker 0 waited {self.wctx.wait_timeout:g} s for the shards of {folder.name}")
            time.sleep(0.001)


def prune(root: Path, keep: int) -> None:
    """Remove every checkpoint older than the newest ``keep`` complete ones."""
    folders = sorted((f for f in root.glob("step-*") if _step_of(f) is not None), reverse=True)
    complete = 0
    for folder in folders:
        if complete >= keep:
            shutil.rmtree(folder, ignore_errors=True)
        elif (folder / "manifest.json").is_file():
            complete += 1


def manifest_of(job, params: np.ndarray, trainer: str) -> dict:
    """What a manifest says about the run that wrote it (checked when a run resumes from it)."""
    return {"trainer": trainer, "n_params": int(params.size), "dtype": str(params.dtype), "n_samples": job.n_samples,
            "batch_size": job.batch_size, "seed": job.seed, "optimizer": _optimizer_name(job.optimizer),
            "workers": job.workers, "zero_stage": job.zero_stage}


def data_parallel_saver(wctx, job, p0: np.ndarray, barrier):
    """A data-parallel worker's view of its job (:class:`Watched`, with the resumed optimizer
    state of its chunk) and its :class:`Saver` (None when the run writes no checkpoints); the
    job itself when the run neither writes nor resumes a checkpoint."""
    plan = job.checkpoint
    if plan is None:
        return job, None
    lo, hi = chunk_bounds(p0.size, job.workers)[wctx.rank]  # my shard: ZeRO's chunk, or 1/N of a replica
    sharded = job.zero_stage >= 1
    optimizer = None
    if plan.resume is not None:
        optimizer = restore_optimizer(job.new_optimizer(), load_checkpoint(plan.resume), *((lo, hi) if sharded else (0, None)))
    watched = Watched(job, optimizer)
    if plan.every is None:
        return watched, None
    saver = Saver(wctx, job, wctx.rank, job.workers,
                  lambda: shard_state(watched.params, [(lo, hi)], watched.optimizer, sharded=sharded),
                  lambda: barrier.wait(wctx.rank, wctx.wait_timeout), manifest_of(job, p0, "data parallel"))
    return watched, saver


def pipeline_saver(wctx, job, params: np.ndarray, slices, barrier, replica: int, stage: int):
    """A pipeline process's :class:`Saver`: the processes of replica 0 write one shard per
    stage (its layers' slice of ``params``, the replica's flat parameters in shared memory);
    the other replicas hold the same numbers and write none (None)."""
    if job.checkpoint is None or job.checkpoint.every is None or replica != 0:
        return None
    ranges = [(s.start, s.stop) for s in slices]
    return Saver(wctx, job, stage, job.grid.stages, lambda: shard_state(params, ranges),
                 lambda: barrier.wait(stage, wctx.wait_timeout), manifest_of(job, params, "pipeline"))


def checkpoint_report(logs: list, job, checkpoint) -> dict:
    """The ``extra`` entries of a run's result: the steps of its checkpoints, the seconds
    each worker was held up by each (``(checkpoints, writers)``), the step it resumed from
    (None) and why newer checkpoints were refused."""
    logs = [log for log in logs if log is not None]
    steps = [step for step, _ in logs[0]] if logs else []
    seconds = np.array([[t for _, t in log] for log in logs], dtype=float).T.reshape(len(steps), len(logs))
    return {"checkpoint_steps": steps, "checkpoint_time": seconds,
            "resumed_from": None if checkpoint is None else checkpoint.step,
            "refused_checkpoints": [] if checkpoint is None else list(checkpoint.refused)}
