"""Failures measured on the learner's cores: what a checkpoint costs, what failures at a given
rate leave of the throughput at each checkpoint interval, and what one straggler costs.

Each function runs the data-parallel trainer (:func:`course_lib.parallel.train.data.train_data_parallel`)
and reports what it measured; the formulas they are set beside are in :mod:`course_lib.failures`.

:func:`measure_checkpoint_cost`
    The seconds one checkpoint holds training up (``t_save``), written synchronously and
    asynchronously (the copy to memory blocks; the write overlaps the next steps).
:func:`run_with_failures`
    One job of ``steps`` steps with failures: the times between failures drawn from an
    exponential distribution of mean ``mtbf`` (seeded); each kills a worker (SIGKILL, at that
    moment, wherever it is); the job restarts from its last complete checkpoint until done.
:func:`measure_goodput`
    :func:`run_with_failures` at several checkpoint intervals, on the same failure times:
    useful steps per second against the interval, its best interval against Young and
    Daly's :math:`\\sqrt{2\\, t_{\\text{save}}\\, T_{\\text{MTBF}}}`.
:func:`measure_straggler`
    One worker slowed by a fixed time per step (``Fault("slow")``): every synchronous step
    waits for it, and the parallel efficiency drops.
"""

from __future__ import annotations

import math
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..._validate import check_int, check_real, check_type
from ...failures import parabola_top, straggler_efficiency, young_daly_interval
from ...i18n import tr
from ...timing import pad
from ..checkpoint import CheckpointError, latest_checkpoint
from ..engine.errors import Fault, WorkerDied
from .data import train_data_parallel

__all__ = ["CheckpointCost", "FailureRun", "GoodputCurve", "GoodputPlan", "StragglerEffect", "measure_checkpoint_cost",
           "measure_goodput", "measure_straggler", "plan_goodput", "run_with_failures"]

#: What the goodput measurement accepts as agreement with Young and Daly's interval.
AGREEMENT = 0.30


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _steps_time(result) -> float:
    """The mean time of a step without a checkpoint in it, the first (the warm-up) left out (of a
    run that may have resumed): what a step costs on average, tail included."""
    first = result.extra.get("resumed_from") or 0
    with_checkpoint = {s - first - 1 for s in result.extra.get("checkpoint_steps", [])}
    plain = [t for k, t in enumerate(result.step_time) if k not in with_checkpoint and k > 0]
    return float(np.mean(plain if plain else result.step_time))


# ------------------------------------------------------------------ what a checkpoint costs
@dataclass(frozen=True)
class CheckpointCost:
    """What one checkpoint cost the data-parallel run (:func:`measure_checkpoint_cost`)."""

    workers: int
    step_time: float
    """Median seconds of a step without a checkpoint."""
    save_time: float
    """Median seconds a synchronous checkpoint held the step up (the slowest worker): ``t_save``."""
    async_save_time: float
    """Median seconds an asynchronous checkpoint held the step up (the copy to memory, and any
    wait for the previous write)."""
    checkpoints: int
    """Checkpoints of each run the medians are taken over."""
    checkpoint_bytes: int
    """Bytes of one checkpoint on disk: every shard and the manifest."""
    delay: float = 0.0
    """Modelled storage seconds added to every shard write (0: the disk alone)."""
    store: str = "disk"
    """Where the checkpoints went: "disk" (flushed, fsync) or "memory" (the page cache)."""
    save_times: np.ndarray = field(default_factory=lambda: np.zeros(0))
    async_save_times: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __str__(self) -> str:
        storage = (tr(" (with {delay} of modelled storage time per shard)", delay=f"{1e3 * self.delay:g} ms")
                   if self.delay else "")
        share = self.async_save_time / self.save_time if self.save_time > 0 else math.nan
        where = tr("flushed to the disk") if self.store == "disk" else tr("kept in memory (no fsync)")
        return tr("one checkpoint {where}, {shards} shards and a manifest ({size}), held training up {time}{storage} "
                  "(median of {count}; a step without one takes {step}, so one checkpoint costs {steps} steps); "
                  "written asynchronously, a step was held up {async_time} ({share} of that): the copy to memory "
                  "blocks, the write goes on beside the next steps.",
                  where=where, shards=self.workers, size=f"{self.checkpoint_bytes / 1e3:.1f} kB",
                  time=f"{1e3 * self.save_time:.2f} ms", storage=storage, count=self.checkpoints,
                  step=f"{1e3 * self.step_time:.3f} ms", steps=f"{self.save_time / self.step_time:.0f}",
                  async_time=f"{1e3 * self.async_save_time:.2f} ms", share=f"{share:.1%}")


def measure_checkpoint_cost(model, x, y, *, workers: int = 2, steps: int = 600, checkpoint_every: int = 100,
                            checkpoint_delay: float = 0.0, checkpoint_store: str = "disk", **run) -> CheckpointCost:
    """Run the data-parallel trainer three times: without checkpoints, with synchronous and
    with asynchronous ones every ``checkpoint_every`` steps (into a temporary folder, removed
    afterwards), and take the medians of the seconds each checkpoint held its step up.
    An asynchronous checkpoint still being written when the next one is due holds that one
    up: give the interval room (``checkpoint_every`` steps longer than a synchronous write).

    ``run``: the trainer's other keywords (``batch_size``, ``seed``, ``start_method``, ...).

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> rng = np.random.default_rng(0)
    >>> x = rng.random((64, 8)); y = rng.integers(0, 3, 64)
    >>> cost = measure_checkpoint_cost(MLP((8, 16, 3)), x, y, steps=20, checkpoint_every=5, batch_size=16,
    ...                                progress=False)
    >>> cost.save_time > 0 and cost.checkpoints == 4
    True
    """
    steps = check_int(steps, "steps", 2)
    checkpoint_every = check_int(checkpoint_every, "checkpoint_every", 1, steps)
    kw = dict(workers=workers, steps=steps, **run)
    plain = train_data_parallel(model, x, y, **kw)
    with tempfile.TemporaryDirectory(prefix="ddl-checkpoints-") as sync_dir, \
            tempfile.TemporaryDirectory(prefix="ddl-checkpoints-") as async_dir:
        sync = train_data_parallel(model, x, y, checkpoint_every=checkpoint_every, checkpoint_dir=sync_dir,
                                   checkpoint_delay=checkpoint_delay, checkpoint_store=checkpoint_store, **kw)
        newest = latest_checkpoint(sync_dir).folder
        size = _folder_bytes(newest)
        asynchronous = train_data_parallel(model, x, y, checkpoint_every=checkpoint_every, checkpoint_dir=async_dir,
                                           checkpoint_async=True, checkpoint_delay=checkpoint_delay,
                                           checkpoint_store=checkpoint_store, **kw)
    blocked = sync.extra["checkpoint_time"].max(axis=1)
    blocked_async = asynchronous.extra["checkpoint_time"].max(axis=1)
    return CheckpointCost(plain.workers, float(np.median(plain.step_time)), float(np.median(blocked)),
                          float(np.median(blocked_async)), len(blocked), size, float(checkpoint_delay),
                          checkpoint_store, blocked, blocked_async)


# ------------------------------------------------------------------ a job with failures
@dataclass(frozen=True)
class FailureRun:
    """One job run to its end through failures and restarts (:func:`run_with_failures`)."""

    steps: int
    checkpoint_every: int
    mtbf: float
    wall_time: float
    """Seconds from the first start to the end of the last attempt."""
    run_time: float
    """Seconds the workers' loops ran after their first step: every failed attempt's drawn time
    to its failure (the worker was killed then), and the finishing attempt's steps but its first
    (the warm-up of a start, counted with the restart)."""
    attempt_times: tuple[float, ...]
    """Wall seconds of every attempt (the last one finished the job)."""
    resumed_from: tuple[int | None, ...]
    """The step every attempt started from (None: from the start)."""
    failure_times: tuple[float, ...]
    """The drawn seconds to each attempt's failure after its loop's first step (the last one: the
    failure that never came, the job finished first; NaN when the last failure came after the
    job's last checkpoint, which ended the job)."""
    checkpoints: int
    """Checkpoints completed in all: by every failed attempt (the steps the next one resumed
    from) and by the one that finished."""
    params: np.ndarray
    """The final parameters (bitwise those of a run without failures, on the same workers)."""
    save_time: float
    """Mean seconds a checkpoint held the finishing attempt up (NaN: the job ended with a
    failure after its last checkpoint, and no attempt reported its times)."""
    step_time: float
    """Mean seconds of a step without a checkpoint, its first left out (the finishing attempt;
    NaN as above)."""

    @property
    def failures(self) -> int:
        """Failures: attempts that were killed (the last one too, if it was killed after the
        job's last checkpoint)."""
        return len(self.attempt_times) - (0 if math.isnan(self.failure_times[-1]) else 1)

    @property
    def restart_time(self) -> float:
        """Median seconds of an attempt outside its running loop: start-up, reading the
        checkpoint, the first step (the warm-up), stopping the workers (what every restart costs)."""
        loops = list(self.failure_times[: len(self.attempt_times) - 1])
        loops.append(self.run_time - sum(loops))  # the last attempt's loop
        return float(np.median([a - b for a, b in zip(self.attempt_times, loops)]))

    @property
    def goodput(self) -> float:
        """Useful steps per second of running: the job's steps over the time its loops ran
        (restarts left out: they cost the same whatever the interval, ``restart_time`` each)."""
        return self.steps / self.run_time

    @property
    def wall_goodput(self) -> float:
        """Useful steps per wall-clock second, restarts included."""
        return self.steps / self.wall_time

    def breakdown(self) -> dict[str, float]:
        """Where the wall time went, in seconds: the useful steps (``steps x step_time``),
        the checkpoints (``checkpoints x save_time``), the work lost to failures (the rest of
        the running time) and the restarts (the wall time outside the loops)."""
        useful = self.steps * self.step_time
        saving = self.checkpoints * self.save_time
        return {"useful": useful, "checkpoints": saving, "lost": max(0.0, self.run_time - useful - saving),
                "restarts": max(0.0, self.wall_time - self.run_time)}


def _attempt_fault(rng: np.random.Generator, mtbf: float, workers: int) -> Fault:
    """The next failure: a worker drawn at random, killed after an exponential time of mean ``mtbf``."""
    return Fault("kill", rank=int(rng.integers(workers)), after=max(1e-3, float(rng.exponential(mtbf))))


def run_with_failures(model, x, y, *, steps: int, checkpoint_every: int, mtbf: float, seed: int = 0,
                      workers: int = 2, checkpoint_dir=None, max_failures: int = 1000, **run) -> FailureRun:
    """Train ``steps`` steps with checkpoints every ``checkpoint_every`` steps while workers fail.

    Before every attempt a failure is drawn (``numpy.random.default_rng(seed)``): a worker and
    a time after its loop's first step, exponentially distributed with mean ``mtbf`` seconds. That
    worker is killed then (``Fault("kill", after=...)``: SIGKILL, wherever it is); the attempt
    ends with :class:`~course_lib.parallel.engine.errors.WorkerDied`, and the next one resumes
    from the newest complete checkpoint (from the start if there is none). An attempt that
    finishes before its failure ends the job. Failures strike while the loops run, after their
    first step: a start, its first step (the warm-up) included, is the restart's cost.

    Parameters
    ----------
    steps, checkpoint_every : int
        The job's steps, and the steps between checkpoints (in [1, steps]).
    mtbf : float
        Mean seconds between failures, in (0, 3600].
    seed : int
        Seeds the failures (the same seed: the same failure times, whatever the interval).
    workers : int
        Data-parallel workers.
    checkpoint_dir : str or os.PathLike, optional
        The folder of the checkpoints (None: a temporary one, removed afterwards).
    max_failures : int
        Stop with a RuntimeError after this many failures (a job that cannot progress).
    **run
        The trainer's other keywords (``batch_size``, ``lr``, ``start_method``,
        ``checkpoint_store``, ...; no ``fault``).

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> rng = np.random.default_rng(0)
    >>> x = rng.random((64, 8)); y = rng.integers(0, 3, 64)
    >>> job = run_with_failures(MLP((8, 16, 3)), x, y, steps=20, checkpoint_every=5, mtbf=60.0, batch_size=16,
    ...                         progress=False)
    >>> job.failures, job.steps    # no failure in 60 s on average: one attempt
    (0, 20)
    """
    steps = check_int(steps, "steps", 1)
    checkpoint_every = check_int(checkpoint_every, "checkpoint_every", 1, steps)
    mtbf = check_real(mtbf, "mtbf", 0.0, 3600.0, low_open=True)
    seed = check_int(seed, "seed", 0)
    max_failures = check_int(max_failures, "max_failures", 0)
    if "fault" in run:
        raise TypeError("run_with_failures draws its own faults: do not pass fault")
    rng = np.random.default_rng(seed)
    attempts, starts, drawn = [], [], []
    with tempfile.TemporaryDirectory(prefix="ddl-failures-") as scratch:
        folder = Path(scratch if checkpoint_dir is None else checkpoint_dir)
        t0 = time.perf_counter()
        result, ended = None, 0.0
        while True:
            fault = _attempt_fault(rng, mtbf, workers)
            try:
                newest = latest_checkpoint(folder) if folder.is_dir() else None
            except CheckpointError:
                newest = None
            if newest is not None and newest.step == steps:  # killed after its last checkpoint: done
                params, wall = newest.params, ended
                break
            start = None if newest is None else newest.step
            t_attempt = time.perf_counter()
            starts.append(start)
            drawn.append(fault.after)
            try:
                result = train_data_parallel(model, x, y, workers=workers, steps=steps,
                                             checkpoint_every=checkpoint_every, checkpoint_dir=folder,
                                             resume=None if start is None else folder, fault=fault, **run)
            except WorkerDied as died:
                attempts.append(time.perf_counter() - t_attempt)
                ended = time.perf_counter() - t0
                if died.rank != fault.rank or died.exitcode != -signal.SIGKILL:
                    raise
                if len(attempts) > max_failures:
                    raise RuntimeError(f"{max_failures} failures and the job of {steps} steps is not done: the "
                                       f"failures (every {mtbf:g} s) come faster than checkpoints") from None
                continue
            attempts.append(time.perf_counter() - t_attempt)
            wall, params = time.perf_counter() - t0, result.params
            break
    reached = [s or 0 for s in starts] + ([] if result is not None else [steps])
    done = sum(max(0, b - a) // checkpoint_every for a, b in zip(reached, reached[1:]))
    if result is None:  # the last attempt was killed after writing the last checkpoint: no timings of it
        return FailureRun(steps, checkpoint_every, mtbf, wall, float(sum(drawn)), tuple(attempts), tuple(starts),
                          tuple(drawn) + (math.nan,), int(done), params, math.nan, math.nan)
    blocked = result.extra["checkpoint_time"].max(axis=1) if result.extra["checkpoint_time"].size else np.zeros(0)
    run_time = float(sum(drawn[:-1]) + result.step_time[1:].sum())  # the first step: the warm-up of a start
    return FailureRun(steps, checkpoint_every, mtbf, wall, run_time, tuple(attempts), tuple(starts), tuple(drawn),
                      int(done + len(blocked)), params, float(np.mean(blocked)) if blocked.size else 0.0,
                      _steps_time(result))


# ------------------------------------------------------------------ goodput against the interval
@dataclass(frozen=True)
class GoodputCurve:
    """Goodput measured at several checkpoint intervals on the same failure times (:func:`measure_goodput`)."""

    runs: tuple[FailureRun, ...]
    mtbf: float
    """Mean seconds between failures of the drawn failure times (chosen)."""
    save_time: float
    """``t_save``: mean seconds a checkpoint held a step up, over every run (the mean: what the
    checkpoints cost in all, their slow tail included)."""
    step_time: float
    """Mean seconds of a step without a checkpoint, over every run."""

    @property
    def restart_time(self) -> float:
        """Median seconds an attempt spent outside its loop, over every run."""
        return float(np.nanmedian([r.restart_time for r in self.runs]))

    @property
    def intervals(self) -> np.ndarray:
        """Steps between checkpoints of every run."""
        return np.array([r.checkpoint_every for r in self.runs])

    @property
    def interval_seconds(self) -> np.ndarray:
        """The work between checkpoints in seconds: ``Δ = intervals x step_time``."""
        return self.intervals * self.step_time

    @property
    def goodput(self) -> np.ndarray:
        """Useful steps per second of every run."""
        return np.array([r.goodput for r in self.runs])

    @property
    def failures(self) -> np.ndarray:
        return np.array([r.failures for r in self.runs])

    @property
    def young_daly(self) -> float:
        """Young and Daly's interval from the measured ``t_save`` and the chosen MTBF, in seconds."""
        return young_daly_interval(self.save_time, self.mtbf)

    @property
    def best_interval(self) -> float:
        """The measured best interval, in seconds: the top of the parabola through the measured
        goodputs against ``log Δ`` (the best point's Δ where the parabola has no top inside
        the measured range)."""
        return parabola_top(self.interval_seconds, self.goodput)

    @property
    def ratio(self) -> float:
        """Measured best interval over Young and Daly's."""
        return self.best_interval / self.young_daly

    @property
    def agrees(self) -> bool:
        """Whether the measured best interval is within 30 % of Young and Daly's."""
        return abs(self.ratio - 1) <= AGREEMENT

    def table(self) -> str:
        """One line per interval: steps, Δ, failures, running and wall time, goodput of the
        running time and of the wall time (restarts included)."""
        lines = [" ".join([pad(tr("every"), 6), pad("Δ [ms]", 8), pad(tr("failures"), 8), pad(tr("running [s]"), 11),
                           pad(tr("wall [s]"), 8), pad(tr("goodput [steps/s]"), 18), pad(tr("with restarts"), 13)])]
        for r, d in zip(self.runs, self.interval_seconds):
            lines.append(f"{r.checkpoint_every:6d} {1e3 * d:8.1f} {r.failures:8d} {r.run_time:11.2f} "
                         f"{r.wall_time:8.2f} {r.goodput:18.0f} {r.wall_goodput:13.0f}")
        return "\n".join(lines)

    def __str__(self) -> str:
        agreement = f"{AGREEMENT:.0%}"
        verdict = (tr("within {agreement}: the measurement agrees with Young and Daly", agreement=agreement)
                   if self.agrees else
                   tr("not within {agreement}: near its top the curve is flat, and {failures} failures in all leave "
                      "each goodput uncertain by more than the differences between them (run it again with more "
                      "steps, or on a quieter machine)", agreement=agreement, failures=int(self.failures.sum())))
        inputs = tr("t_save = {save} (measured), T_MTBF = {mtbf} (chosen), t_restart = {restart} (measured), a step "
                    "{step}.", save=f"{1e3 * self.save_time:.2f} ms", mtbf=f"{self.mtbf:g} s",
                    restart=f"{1e3 * self.restart_time:.0f} ms", step=f"{1e3 * self.step_time:.3f} ms")
        found = tr("Young-Daly √(2 t_save T_MTBF) = {young_daly}; measured best interval {best} (the top of a "
                   "parabola through the goodputs): {ratio} times Young-Daly's, {verdict}.",
                   young_daly=f"{1e3 * self.young_daly:.1f} ms", best=f"{1e3 * self.best_interval:.1f} ms",
                   ratio=f"{self.ratio:.2f}", verdict=verdict)
        return f"{self.table()}\n{inputs}\n{found}"


@dataclass(frozen=True)
class GoodputPlan:
    """A goodput experiment sized from a measured checkpoint (:func:`plan_goodput`)."""

    mtbf: float
    """Mean seconds between failures: ``ratio`` checkpoints' time."""
    intervals: tuple[int, ...]
    """Steps between checkpoints to try: Young and Daly's interval times ``spread``, in steps."""
    steps: int
    """Steps of the job: ``failures`` MTBFs of work without failures."""
    young_daly_steps: float
    """Young and Daly's interval in steps, from the measured ``t_save`` and the chosen MTBF."""

    def __str__(self) -> str:
        return tr("T_MTBF = {mtbf}; Young-Daly's interval ≈ {interval} steps; intervals tried: {intervals} steps; "
                  "a job of {steps} steps", mtbf=f"{1e3 * self.mtbf:.0f} ms", interval=f"{self.young_daly_steps:.0f}",
                  intervals=list(self.intervals), steps=f"{self.steps:,}")


def plan_goodput(save_time: float, step_time: float, *, ratio: float = 40.0, failures: float = 16.0,
                 spread=(0.25, 0.5, 1.0, 2.0, 4.0)) -> GoodputPlan:
    """Size a goodput experiment from a measured checkpoint: failures every ``ratio``
    checkpoint times on average (``T_MTBF = ratio x t_save``: Young and Daly's formula
    holds while a checkpoint is short beside the MTBF), intervals of Young and Daly's
    interval times each of ``spread`` (in whole steps of ``step_time``), and a job of
    ``failures`` MTBFs of work, so that each interval meets about that many failures (the
    fewer, the noisier its goodput: a failure loses anything from nothing to a whole interval,
    and with 16 the top of the measured curve lands within 30 % of Young and Daly's interval
    in about 19 runs of 20, in a simulation of the same experiment).

    Examples
    --------
    >>> plan = plan_goodput(0.002, 0.0005)
    >>> round(plan.mtbf, 3), plan.intervals, plan.steps
    (0.08, (9, 18, 36, 72, 143), 2560)
    """
    save_time = check_real(save_time, "save_time", 0.0, 60.0, low_open=True)
    step_time = check_real(step_time, "step_time", 0.0, 60.0, low_open=True)
    ratio = check_real(ratio, "ratio", 2.0, 1e6)
    failures = check_real(failures, "failures", 1.0, 1e4)
    mtbf = ratio * save_time
    best = young_daly_interval(save_time, mtbf) / step_time
    intervals = tuple(sorted({max(1, round(best * check_real(f, "spread", 0.0, 1e3, low_open=True)))
                              for f in spread}))
    steps = max(max(intervals), round(failures * mtbf / step_time))
    return GoodputPlan(mtbf, intervals, steps, best)


def measure_goodput(model, x, y, *, intervals, mtbf: float, steps: int, seed: int = 0, workers: int = 2,
                    **run) -> GoodputCurve:
    """:func:`run_with_failures` once per checkpoint interval (steps between checkpoints), each
    on the same drawn failures (``seed``): the goodput against the interval.

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> rng = np.random.default_rng(0)
    >>> x = rng.random((64, 8)); y = rng.integers(0, 3, 64)
    >>> curve = measure_goodput(MLP((8, 16, 3)), x, y, intervals=[5, 10], mtbf=60.0, steps=20, batch_size=16,
    ...                         progress=False)
    >>> curve.intervals.tolist(), bool(np.all(curve.goodput > 0))
    ([5, 10], True)
    """
    check_type(intervals, "intervals", (list, tuple, np.ndarray), "a sequence of steps between checkpoints")
    intervals = [check_int(k, "intervals[i]", 1, steps) for k in intervals]
    if not intervals:
        raise ValueError("intervals must hold at least one interval")
    runs = tuple(run_with_failures(model, x, y, steps=steps, checkpoint_every=k, mtbf=mtbf, seed=seed,
                                   workers=workers, **run) for k in intervals)
    saves = [r.save_time for r in runs if r.checkpoints and not math.isnan(r.save_time)]
    return GoodputCurve(runs, float(mtbf), float(np.mean(saves)) if saves else 0.0,
                        float(np.nanmean([r.step_time for r in runs])))


# ------------------------------------------------------------------ a straggler
@dataclass(frozen=True)
class StragglerEffect:
    """A synchronous run with one slow worker against the same run without (:func:`measure_straggler`)."""

    workers: int
    slow_time: float
    """Seconds the slow worker sleeps at the start of every step."""
    serial_step: float
    """Median seconds of a step of one worker on the whole batch."""
    step: float
    """Median seconds of a step of ``workers`` workers."""
    slow_step: float
    """The same with one slow worker."""
    waiting: float
    """Median seconds per step the other workers waited for it."""

    @property
    def efficiency(self) -> float:
        """η = S / N without the straggler (S = serial step / parallel step)."""
        return self.serial_step / (self.workers * self.step)

    @property
    def slow_efficiency(self) -> float:
        """η with the straggler."""
        return self.serial_step / (self.workers * self.slow_step)

    @property
    def predicted(self) -> float:
        """η with the straggler as :func:`course_lib.failures.straggler_efficiency` predicts it from η
        without and the step time: every step waits ``slow_time`` more."""
        return self.efficiency * straggler_efficiency(self.step, self.slow_time)

    def __str__(self) -> str:
        return tr("{workers} workers, one of them {late} late at every step: a step took {slow_step} against {step} "
                  "without it (+{extra}); the others waited {waiting} per step for it. Parallel efficiency η = S/N "
                  "fell from {efficiency} to {slow_efficiency} (predicted from η and the step time: {predicted}): "
                  "one slow device sets the pace of every synchronous step.",
                  workers=self.workers, late=f"{1e3 * self.slow_time:g} ms", slow_step=f"{1e3 * self.slow_step:.2f} ms",
                  step=f"{1e3 * self.step:.2f} ms", extra=f"{1e3 * (self.slow_step - self.step):.2f} ms",
                  waiting=f"{1e3 * self.waiting:.2f} ms", efficiency=f"{self.efficiency:.3f}",
                  slow_efficiency=f"{self.slow_efficiency:.3f}", predicted=f"{self.predicted:.3f}")


def measure_straggler(model, x, y, *, workers: int = 2, slow_time: float = 0.005, steps: int = 60,
                      **run) -> StragglerEffect:
    """Three runs of the data-parallel trainer on the same batches: one worker (the serial
    step), ``workers`` workers, and ``workers`` workers of which the last sleeps ``slow_time``
    seconds at the start of every step (``Fault("slow")``).

    Examples
    --------
    >>> from course_lib.models import MLP
    >>> rng = np.random.default_rng(0)
    >>> x = rng.random((64, 8)); y = rng.integers(0, 3, 64)
    >>> effect = measure_straggler(MLP((8, 16, 3)), x, y, slow_time=0.01, steps=10, batch_size=16, progress=False)
    >>> effect.slow_step > effect.step + 0.005
    True
    """
    workers = check_int(workers, "workers", 2)
    slow_time = check_real(slow_time, "slow_time", 0.0, 1.0, low_open=True)
    if "fault" in run:
        raise TypeError("measure_straggler injects its own fault: do not pass fault")
    kw = dict(steps=steps, **run)
    serial = train_data_parallel(model, x, y, workers=1, **kw)
    plain = train_data_parallel(model, x, y, workers=workers, **kw)
    slow = train_data_parallel(model, x, y, workers=workers, fault=Fault("slow", rank=workers - 1, seconds=slow_time),
                               **kw)
    late = slow.waiting[:, :-1]  # the others, waiting for the last one
    return StragglerEffect(workers, slow_time, float(np.median(serial.step_time)), float(np.median(plain.step_time)),
                           float(np.median(slow.step_time)), float(np.median(late.max(axis=1))))
