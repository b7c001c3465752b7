"""Measured speedups: the first experiment (one workload over 1, 2, ... processes of a pool)
and the strong and weak scaling of the data-parallel trainer (:func:`measure_scaling`).

The pool's worker and its workload are in :mod:`course_lib.parallel.pool`. Each worker limits
its BLAS library to one thread (``threadpoolctl``): N processes then use N cores, not N x
(BLAS threads) cores; the serial reference runs with one BLAS thread too, so the speedup
measures process parallelism only. The serial reference also runs in a worker process, set
up as the parallel workers are (start method, memory settings, data in shared memory): a
speedup then compares the same work done the same way, and S(1) shows only what one worker
adds (:mod:`course_lib.parallel.train.ceiling`, which also measures the ceilings: the same
work on N cores with no communication). Pools are always closed and joined (terminated on error,
interrupt or time-out): no process outlives a call. Whether the cores are free to measure on
is :func:`course_lib.parallel.train.cores.check_cores`.

Examples
--------
>>> w = GradientWorkload(hidden=(16,), epochs=1)
>>> w.sizes, w.flops_per_run() == 1 * 1438 * MLP((64, 16, 10)).flops_per_sample()["total"]
((64, 16, 10), True)
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..._validate import check_int, check_positive, check_type
from ...i18n import tr
from ...models import MLP
from ...scaling import AmdahlFit, fit_amdahl, fit_gustafson, karp_flatt
from ...timing import available_cores, blas_threads, current_blas_threads, pad
from ..engine.errors import RunStopped
from ..engine.shm import SharedArray
from ..engine.workers import ProcessGroup, check_start_method
from ..partition import shard_bounds
from ..pool import epoch_gradient, pool_worker  # noqa: F401 - epoch_gradient: imported from here too
from .ceiling import serial_in_worker
from .data import train_data_parallel

__all__ = [
    "GradientWorkload",
    "ScalingMeasurement",
    "SpeedupMeasurement",
    "WorkerPool",
    "default_process_counts",
    "measure_parallel_speedup",
    "measure_scaling",
    "parallel_epoch_gradient",
]

_PRELOAD = ("course_lib.parallel.engine.workers", "course_lib.models", "course_lib.parallel.train.speedup",
            "threadpoolctl")


def default_process_counts(cores: int | None = None) -> list[int]:
    """Process counts to measure: 1..cores, thinned to powers of two above 8 cores.

    Examples
    --------
    >>> default_process_counts(2), default_process_counts(4)
    ([1, 2], [1, 2, 3, 4])
    >>> default_process_counts(24)
    [1, 2, 4, 8, 16, 24]
    """
    cores = available_cores() if cores is None else check_int(cores, "cores", 1)
    if cores <= 8:
        return list(range(1, cores + 1))
    counts = [2**k for k in range(cores.bit_length()) if 2**k < cores]
    return counts + [cores]


def _requests(channel):
    """The parent's requests to a pool worker: ``True`` (the parameters are in place) until ``None``."""
    while (request := channel.recv()) is not None:
        if request is not True:
            raise ValueError(f"a pool worker expects True (parameters ready) or None, got {request!r}")
        yield request


class _TimedChannel:
    """A pool worker's channel that times the work between a request and its answer (sent
    beside it, in seconds) and, given a shared ``row``, puts the gradient there instead of
    pickling it through the pipe (``WorkerPool(reply="shared")``)."""

    def __init__(self, channel, row: np.ndarray | None):
        self.channel, self.row, self.t0 = channel, row, time.perf_counter()

    def recv(self):
        message = self.channel.recv()
        self.t0 = time.perf_counter()  # the work starts now
        return message

    def send(self, message) -> None:
        loss, grad = message
        seconds = time.perf_counter() - self.t0
        if self.row is not None:
            np.copyto(self.row, grad)
            grad = None
        self.channel.send((loss, grad, seconds))


class _TimedWorker:
    """The worker's context as :func:`~course_lib.parallel.pool.pool_worker` sees it, with a
    :class:`_TimedChannel` (the pool worker itself stays the lecture's)."""

    def __init__(self, wctx, channel: _TimedChannel):
        self._wctx, self.channel = wctx, channel

    def __getattr__(self, name):
        return getattr(self._wctx, name)


def _pool_process(wctx, sizes, data, shard, *, batch_size: int, epochs: int, reply=None) -> None:
    """Entry point of a pool process: attach the data, say hello (pid, BLAS threads), then run
    :func:`course_lib.parallel.pool.pool_worker` on this worker's shard ``(lo, hi)``, its
    answers timed (and its gradient put in the shared ``reply`` rows, if given)."""
    (lo, hi), (x_spec, y_spec, p_spec) = shard, data
    with contextlib.ExitStack() as stack:
        stack.enter_context(blas_threads(1))
        x, y = stack.enter_context(x_spec.attach()), stack.enter_context(y_spec.attach())
        params = stack.enter_context(p_spec.attach())
        rows = None if reply is None else stack.enter_context(reply.attach())
        wctx.channel.send((os.getpid(), current_blas_threads()))
        timed = _TimedWorker(wctx, _TimedChannel(wctx.channel, None if rows is None else rows[wctx.rank]))
        pool_worker(timed, MLP(sizes), x[lo:hi], y[lo:hi], params, _requests(timed.channel),
                    batch_size=batch_size, epochs=epochs)
        del rows, timed


# ----------------------------------------------------------------- parent side
class WorkerPool:
    """``processes`` worker processes, each holding one contiguous shard of the data.

    Process ``k`` always computes shard ``k`` (one shard per process, so N processes
    really share the work N ways; each runs :func:`course_lib.parallel.pool.pool_worker`).
    The workers are a :class:`course_lib.parallel.engine.workers.ProcessGroup`
    (the same machinery, errors and default start method as every trainer). Use the pool
    as a context manager: leaving the ``with`` block stops and joins the workers, also
    after an error, a time-out or an interrupt, so no process is left behind.

    Parameters
    ----------
    model : MLP
    x, y : numpy.ndarray
        The data, copied once into shared memory; worker ``k`` reads only its shard.
    processes : int
        Number of worker processes, 1 .. 4 x available cores.
    batch_size, epochs : int
        Mini-batch size and passes of the workload.
    start_method : {"fork", "forkserver", "spawn"} or None
        How to start the workers (None: ``forkserver`` on Linux, ``spawn`` elsewhere).
    timeout : float
        Seconds to wait for a worker (start-up or one gradient) before giving up with
        ``WorkerTimeout``: the workers are stopped - a broken worker never hangs the
        notebook.
    reply : {"pipe", "shared"}
        How a worker's gradient comes back: pickled through its pipe (the default), or
        written into its row of a shared array, with a short note through the pipe.

    Notes
    -----
    When timing, keep the parent's BLAS at one thread too (``with
    threadpoolctl.threadpool_limits(1):`` around the whole timed section): OpenBLAS
    threads re-enabled in the parent spin for a while after each call and steal cores
    from the workers.

    Attributes
    ----------
    worker_info : list of (pid, blas_threads)
        Reported by each worker when it started.
    startup_seconds : float
        Time to start all workers and receive their first message.
    compute_seconds : list of float
        Per worker, the time its last gradient took inside the worker, from the request's
        arrival to the answer (without the messages: what the same work takes in the
        same kind of process, side by side with the others).
    """

    def __init__(
        self,
        model: MLP,
        x: np.ndarray,
        y: np.ndarray,
        processes: int,
        *,
        batch_size: int = 32,
        epochs: int = 1,
        start_method: str | None = None,
        timeout: float = 120.0,
        reply: str = "pipe",
    ):
        self.processes = check_int(processes, "processes", 1, 4 * available_cores())
        if reply not in ("pipe", "shared"):
            raise ValueError(f"reply must be 'pipe' or 'shared', got {reply!r}")
        self.reply = reply
        self.compute_seconds: list[float] = []
        self.start_method = check_start_method(start_method)
        self.timeout = check_positive(timeout, "timeout")
        batch_size = check_int(batch_size, "batch_size", 1)
        epochs = check_int(epochs, "epochs", 1)
        if not isinstance(model, MLP):
            raise TypeError(f"model must be an MLP, got {type(model).__name__}")
        self.model = model
        x = model.check_x(x)
        y = model.check_y(y, x.shape[0])
        self.n_samples = int(x.shape[0])
        self.bounds = shard_bounds(self.n_samples, self.processes)
        t0 = time.perf_counter()
        self._group, self._shared = None, []
        try:
            # Data and parameters go through shared memory: a starting worker receives
            # only their names (see course_lib.parallel.engine.workers, "Why starting a worker
            # cannot block"), and each gradient request is one short message.
            self._shared = [SharedArray(x.shape, x.dtype, x), SharedArray(y.shape, np.int64, y),
                            SharedArray(model.n_params, model.dtype)]
            if reply == "shared":  # one float64 row per worker for its gradient
                self._shared.append(SharedArray((self.processes, model.n_params), np.float64))
            self._group = ProcessGroup(
                _pool_process, self.processes, args=(model.sizes, [a.spec for a in self._shared[:3]]),
                rank_args=[((a, b),) for a, b in self.bounds],
                kwargs=dict(batch_size=batch_size, epochs=epochs,
                            reply=self._shared[3].spec if reply == "shared" else None),
                start_method=self.start_method,
                timeout=self.timeout, name="ddl-pool", channels=True, preload=_PRELOAD,
                shared=self._shared,
            )
            self._group.start()
            self.worker_info = [self._group.recv(r) for r in range(self.processes)]
        except KeyboardInterrupt as stop:  # the stop button: one line, once every worker has ended
            self.terminate()
            raise stop if isinstance(stop, RunStopped) else RunStopped() from stop
        except BaseException:
            self.terminate()
            raise
        self.startup_seconds = time.perf_counter() - t0

    def gradient(self, params: np.ndarray) -> tuple[float, np.ndarray]:
        """Summed loss and gradient over all samples, each process doing its shard."""
        if self._group is None:
            raise RuntimeError("the worker pool is closed")
        self.model.check_flat(params, "params")
        try:
            np.copyto(self._shared[2].array, params)
            for rank in range(self.processes):
                self._group.send(rank, True)
            parts = [self._group.recv(rank) for rank in range(self.processes)]
        except KeyboardInterrupt as stop:
            self.terminate()
            raise stop if isinstance(stop, RunStopped) else RunStopped() from stop
        except BaseException:
            self.terminate()
            raise
        self.compute_seconds = [part[2] for part in parts]
        grads = [part[1] for part in parts] if self.reply == "pipe" else list(self._shared[3].array)
        loss = sum(part[0] for part in parts)
        grad = grads[0].copy()
        for g in grads[1:]:
            grad += g
        return loss, grad

    def close(self) -> None:
        """Ask the workers to finish and wait for them (stops any that do not)."""
        group, self._group = self._group, None
        if group is None:
            return
        try:
            for rank in range(self.processes):
                group.send(rank, None)
            group.join()
        finally:
            group.close()
            self._release()

    def terminate(self) -> None:
        """Stop every worker now and reap it (idempotent)."""
        group, self._group = self._group, None
        if group is not None:
            group.close()
        self._release()

    def _release(self) -> None:
        shared, self._shared = self._shared, []
        for a in shared:
            a.close()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.terminate()


def parallel_epoch_gradient(
    model: MLP,
    params: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    *,
    processes: int,
    batch_size: int = 32,
    epochs: int = 1,
    start_method: str | None = None,
) -> tuple[float, np.ndarray]:
    """:func:`~course_lib.parallel.pool.epoch_gradient` computed by ``processes`` worker processes (one shard each)."""
    check_type(model, "model", MLP, "a course_lib.models.MLP")
    model.check_flat(params, "params")  # before any process starts
    with WorkerPool(model, x, y, processes, batch_size=batch_size, epochs=epochs,
                    start_method=start_method) as pool:
        return pool.gradient(params)


# ------------------------------------------------------------------ the experiment
@dataclass(frozen=True)
class GradientWorkload:
    """The experiment's workload: an MLP on the digits training set.

    Parameters
    ----------
    hidden : tuple of int
        Hidden layer widths (input 64 and 10 classes are fixed by the data).
    batch_size : int
        Samples per mini-batch.
    epochs : int
        Passes over the 1,438 training samples (more passes = longer run, so that
        process start-up and communication weigh less).
    seed : int
        Seed of the fixed parameters.
    """

    hidden: tuple[int, ...] = (256, 256)
    batch_size: int = 64
    epochs: int = 12
    seed: int = 0

    @property
    def sizes(self) -> tuple[int, ...]:
        return (64, *self.hidden, 10)

    def flops_per_run(self, n_samples: int = 1438) -> int:
        """GEMM FLOPs of one run (forward + backward of every sample, every pass)."""
        return self.epochs * n_samples * MLP(self.sizes).flops_per_sample()["total"]


@dataclass(frozen=True)
class SpeedupMeasurement:
    """Result of :func:`measure_parallel_speedup` (times in seconds, medians of the repeats).

    Serial and parallel runs were timed in alternation, so that a change of load on the
    machine hits both; the speedup is the median of the per-pair ratios. The serial time is
    the work alone, timed inside a worker process (see :func:`measure_parallel_speedup`).
    """

    processes: np.ndarray
    seconds: np.ndarray
    """Median time with N processes."""
    serial_seconds: float
    """Median time of the serial run (all pairs)."""
    speedup: np.ndarray
    """S(N): median over the repeats of (serial time / time with N processes)."""
    startup_seconds: np.ndarray
    spread: np.ndarray
    """(max - min) / median of the speedup ratios, per process count: how noisy each is."""
    cores: int
    start_method: str
    workload: GradientWorkload
    max_abs_difference: float
    """Largest |parallel - serial| over the gradient entries, relative to max |serial|."""
    pairs: list = field(default_factory=list, repr=False)
    """Per process count, the list of (serial time, parallel time) pairs."""
    ceiling: np.ndarray | None = None
    """The ceiling speedup: median over the repeats of (serial time / the mean time the N
    workers computed inside that run), what N processes give this work without sending
    anything; ``speedup / ceiling`` is the share the messages and the slowest worker leave."""
    reply: str = "pipe"
    """How the workers' gradients came back (:class:`WorkerPool`'s ``reply``)."""

    @property
    def efficiency(self) -> np.ndarray:
        """η(N) = S(N) / N, with S(N) the paired :attr:`speedup`."""
        return self.speedup / self.processes

    @property
    def speedup_of_medians(self) -> np.ndarray:
        """The definition applied to the table's times: median serial time / median time with N."""
        return self.serial_seconds / self.seconds

    def table(self) -> str:
        """A plain-text table of the measurement, with both speedup statistics named.

        ``Tser/T(N)`` is the definition :math:`S = T_\\text{serial} / T(N)` applied to the
        median times of the table; ``paired S`` is the median over the repeats of each
        back-to-back pair's ratio (robust when the machine's load changes during the
        measurement), which the efficiency and the figure use. On a quiet machine the two agree.
        """
        lines = [" ".join([pad("N", 3), pad(tr("time [s]"), 9), pad("Tser/T(N)", 10), pad(tr("paired S"), 9),
                           pad(tr("efficiency"), 11), pad(tr("spread"), 7), pad(tr("start-up [s]"), 12)])]
        lines.append(f"{pad(tr('ser', context='serial run'), 3)} {self.serial_seconds:>9.3f} {1.0:>10.2f} "
                     f"{1.0:>9.2f} {1.0:>11.2f}")
        for n, t, sm, s, e, sp, st in zip(self.processes, self.seconds, self.speedup_of_medians,
                                          self.speedup, self.efficiency, self.spread,
                                          self.startup_seconds, strict=True):
            lines.append(f"{n:>3} {t:>9.3f} {sm:>10.2f} {s:>9.2f} {e:>11.2f} {sp:>7.0%} {st:>12.2f}")
        lines.append(tr("Tser/T(N): the definition, from the median times; paired S: median of the "
                        "back-to-back ratios (used for the efficiency and the figure)"))
        return "\n".join(lines)


def measure_parallel_speedup(
    processes: Sequence[int] | None = None,
    *,
    workload: GradientWorkload | None = None,
    repeat: int = 3,
    start_method: str | None = None,
    reply: str = "pipe",
) -> SpeedupMeasurement:
    """Time the workload serially and with each process count; return the speedups.

    The serial run is :func:`~course_lib.parallel.pool.epoch_gradient` on all the data in
    one worker process (a :class:`WorkerPool` of one), timed inside it: the same work in
    the same kind of process as the parallel workers (start method, memory settings, one
    BLAS thread, data in shared memory), without the messages, so that S(1) measures what
    one worker adds and not which process ran the work. For each N a :class:`WorkerPool` of N processes is started (start-up is
    timed separately and NOT part of the measured time: it is paid once per pool) and
    warmed up once; then ``repeat`` times a serial run and a parallel run are timed in
    alternation (so that other programs' load hits both alike) and the speedup is the
    median of the ratios. The first parallel gradient is compared with the serial one.
    Each parallel run also gives its ceiling (:attr:`SpeedupMeasurement.ceiling`): the
    serial time over the mean time the workers computed inside it.

    Parameters
    ----------
    processes : sequence of int, optional
        Process counts (default :func:`default_process_counts`: 1 .. available cores).
    workload : GradientWorkload, optional
    repeat : int
        Timed runs per count (median reported), 1 .. 50.
    start_method : {"fork", "forkserver", "spawn"} or None
        None: ``forkserver`` on Linux, ``spawn`` elsewhere (as every trainer).
    reply : {"pipe", "shared"}
        How the workers' gradients come back (:class:`WorkerPool`).

    Examples
    --------
    >>> m = measure_parallel_speedup([1], workload=GradientWorkload(hidden=(8,), epochs=1),
    ...                              repeat=1, start_method="fork")
    >>> m.processes.tolist(), m.max_abs_difference < 1e-5, m.speedup.shape
    ([1], True, (1,))
    """
    from ...datasets import load_digits

    workload = GradientWorkload() if workload is None else workload
    if not isinstance(workload, GradientWorkload):
        raise TypeError(f"workload must be a GradientWorkload, got {type(workload).__name__}")
    repeat = check_int(repeat, "repeat", 1, 50)
    counts = default_process_counts() if processes is None else list(processes)
    if not counts:
        raise ValueError("processes must name at least one process count")
    counts = [check_int(n, "processes", 1, 4 * available_cores()) for n in counts]
    start_method = check_start_method(start_method)

    data = load_digits("train")
    model = MLP(workload.sizes)
    params = model.init_params(workload.seed)
    kwargs = dict(batch_size=workload.batch_size, epochs=workload.epochs)

    seconds, speedups, spreads, startups, pairs, ceilings, worst = [], [], [], [], [], [], 0.0
    # One BLAS thread in THIS process for the whole measurement: re-enabling OpenBLAS's
    # thread pool leaves its threads spinning for a while, and they steal a core from the
    # workers (seen here: S(2) fell from about 1.7 to about 0.9 on 2 cores).
    with blas_threads(1), WorkerPool(model, data.x, data.y, 1, start_method=start_method, **kwargs) as serial:

        def serial_run():  # the work alone, timed inside its worker process
            _, grad = serial.gradient(params)
            return serial.compute_seconds[0], grad

        _, reference = serial_run()  # warm-up and reference gradient
        scale = float(np.abs(reference).max()) or 1.0
        for n in counts:
            with WorkerPool(model, data.x, data.y, n, start_method=start_method, reply=reply,
                            **kwargs) as pool:
                _, grad = pool.gradient(params)  # warm-up, and the correctness check
                worst = max(worst, float(np.abs(grad - reference).max()) / scale)
                timed, ceiling = [], []
                for _ in range(repeat):  # serial and parallel in alternation
                    t_serial, _ = serial_run()
                    t0 = time.perf_counter()
                    pool.gradient(params)
                    timed.append((t_serial, time.perf_counter() - t0))
                    ceiling.append(t_serial / statistics.mean(pool.compute_seconds))
                startups.append(pool.startup_seconds)
            ratios = [a / b for a, b in timed]
            speedups.append(statistics.median(ratios))
            spreads.append((max(ratios) - min(ratios)) / speedups[-1])
            seconds.append(statistics.median(b for _, b in timed))
            pairs.append(timed)
            ceilings.append(statistics.median(ceiling))
    return SpeedupMeasurement(
        processes=np.array(counts),
        seconds=np.array(seconds),
        serial_seconds=statistics.median(a for timed in pairs for a, _ in timed),
        speedup=np.array(speedups),
        startup_seconds=np.array(startups),
        spread=np.array(spreads),
        cores=available_cores(),
        start_method=start_method,
        workload=workload,
        max_abs_difference=worst,
        pairs=pairs,
        ceiling=np.array(ceilings),
        reply=reply,
    )


# ------------------------------------------------- data-parallel scaling
@dataclass
class ScalingMeasurement:
    r"""Strong and weak scaling of the data-parallel trainer, measured side by side.

    Strong scaling (强扩展): the global batch stays ``batch_size`` and N workers share
    it; speedup :math:`S(N) = t_\text{serial}(B) / t_N(B)`. Weak scaling (弱扩展): every
    worker keeps ``per_worker_batch`` samples, so the global batch grows to
    :math:`N b`; scaled speedup :math:`S(N) = N\,t_\text{serial}(b) / t_N(N b)` (N times
    the work in time :math:`t_N`). The serial references use one BLAS thread and run in a
    worker process (:func:`~course_lib.parallel.train.ceiling.serial_in_worker`), so that :math:`S(1)` compares the same work
    in the same kind of process: what is left of :math:`1 - S(1)` is the one worker's
    all-reduce (a copy of its gradient into the shared sum and back), about 1-3 % here.
    """

    workers: np.ndarray
    batch_size: int
    per_worker_batch: int
    serial_strong: float
    """Seconds per step of train_serial at ``batch_size``."""
    serial_weak: float
    """Seconds per step of train_serial at ``per_worker_batch``."""
    strong_time: np.ndarray
    weak_time: np.ndarray
    runs: dict = field(default_factory=dict, repr=False)

    @property
    def strong_speedup(self) -> np.ndarray:
        return self.serial_strong / self.strong_time

    @property
    def weak_speedup(self) -> np.ndarray:
        return self.workers * self.serial_weak / self.weak_time

    @property
    def strong_efficiency(self) -> np.ndarray:
        return self.strong_speedup / self.workers

    @property
    def weak_efficiency(self) -> np.ndarray:
        return self.weak_speedup / self.workers

    @property
    def amdahl(self) -> AmdahlFit:
        """:func:`course_lib.scaling.fit_amdahl` of the strong-scaling speedups."""
        return fit_amdahl(self.workers, self.strong_speedup)

    @property
    def gustafson_p(self) -> float:
        """:func:`fit_gustafson` of the weak-scaling (scaled) speedups."""
        return fit_gustafson(self.workers, self.weak_speedup)

    @property
    def karp_flatt(self) -> np.ndarray:
        """Karp-Flatt serial fraction of the strong-scaling runs with N > 1."""
        many = self.workers > 1
        return np.asarray(karp_flatt(self.strong_speedup[many], self.workers[many]), dtype=float)

    def table(self) -> str:
        """The measurements as a small text table."""
        eff = tr("eff.", context="parallel efficiency")
        lines = [" ".join([pad("N", 3), pad(tr("strong ms"), 10), pad("S(N)", 6), pad(eff, 5),
                           pad(tr("Karp-Flatt e"), 13), pad(tr("weak ms"), 8), pad(tr("scaled S"), 9), pad(eff, 5)])]
        kf = dict(zip(self.workers[self.workers > 1].tolist(), self.karp_flatt.tolist()))
        for i, n in enumerate(self.workers.tolist()):
            e = f"{kf[n]:13.3f}" if n in kf else f"{'-':>13}"
            lines.append(
                f"{int(n):3d} {self.strong_time[i] * 1e3:10.1f} {self.strong_speedup[i]:6.2f} "
                f"{self.strong_efficiency[i]:5.2f} {e} {self.weak_time[i] * 1e3:8.1f} "
                f"{self.weak_speedup[i]:9.2f} {self.weak_efficiency[i]:5.2f}"
            )
        lines.append(tr("serial (1 BLAS thread, in a worker process): {strong} at batch {batch}, {weak} at batch "
                        "{worker_batch}", strong=f"{self.serial_strong * 1e3:.1f} ms", batch=self.batch_size,
                        weak=f"{self.serial_weak * 1e3:.1f} ms", worker_batch=self.per_worker_batch))
        return "\n".join(lines)


def measure_scaling(
    model: MLP,
    x: np.ndarray,
    y: np.ndarray,
    *,
    workers,
    batch_size: int,
    per_worker_batch: int,
    steps: int = 6,
    backend: str = "shm",
    start_method: str | None = None,
    lr: float = 0.01,
    seed: int = 0,
    rounds: int = 3,
    progress: bool | None = None,
) -> ScalingMeasurement:
    """Run the strong- and weak-scaling experiment (see :class:`ScalingMeasurement`).

    Parameters
    ----------
    workers : sequence of int
        Worker counts, each >= 1 (e.g. ``range(1, cores + 1)``).
    batch_size : int
        Global batch of the strong-scaling runs.
    per_worker_batch : int
        Samples per worker of the weak-scaling runs (``x`` needs at least
        ``max(workers) * per_worker_batch`` rows).
    steps : int
        Steps per run (the first is a warm-up and not timed).
    rounds : int
        Rounds of all the runs, one after the other (1..100); each time is the median
        over the rounds, so a machine whose speed drifts (a shared host) slows every
        configuration alike instead of one. ``runs`` holds the last round's results.

    Examples
    --------
    >>> m = MLP((8, 16, 3)); rng = np.random.default_rng(0)
    >>> x = rng.random((64, 8), dtype=np.float32); y = rng.integers(0, 3, 64)
    >>> sm = measure_scaling(m, x, y, workers=[1, 2], batch_size=16, per_worker_batch=8,
    ...                      steps=3, start_method="fork")
    >>> sm.workers.tolist(), sm.strong_speedup.shape, 0 <= sm.gustafson_p <= 1
    ([1, 2], (2,), True)
    """
    ns = [check_int(n, "workers", 1) for n in workers]
    if not ns:
        raise ValueError("workers must list at least one worker count")
    per_worker_batch = check_int(per_worker_batch, "per_worker_batch", 1)
    rounds = check_int(rounds, "rounds", 1, 100)
    kw = dict(steps=steps, lr=lr, seed=seed)
    runs: dict = {}
    times: dict[str, list[float]] = {}

    def timed(key: str, run) -> None:
        runs[key] = run()
        times.setdefault(key, []).append(runs[key].time_per_step())

    for _ in range(rounds):  # interleaved: a change of the machine's speed hits every run alike
        # the serial references in a worker process, set up as the workers are (serial_in_worker)
        timed("serial strong", lambda: serial_in_worker(model, x, y, batch_size=batch_size, start_method=start_method,
                                                        **kw))
        timed("serial weak", lambda: serial_in_worker(model, x, y, batch_size=per_worker_batch,
                                                      start_method=start_method, **kw))
        for n in ns:
            common = dict(workers=n, backend=backend, start_method=start_method, progress=progress, **kw)
            timed(f"strong {n}", lambda c=common: train_data_parallel(model, x, y, batch_size=batch_size, **c))
            if n * per_worker_batch == batch_size:
                runs[f"weak {n}"], times[f"weak {n}"] = runs[f"strong {n}"], times[f"strong {n}"]
            else:
                timed(f"weak {n}", lambda n=n, c=common: train_data_parallel(
                    model, x, y, batch_size=n * per_worker_batch, **c))
    med = {key: statistics.median(values) for key, values in times.items()}
    strong = [med[f"strong {n}"] for n in ns]
    weak = [med[f"weak {n}"] for n in ns]
    return ScalingMeasurement(
        workers=np.array(ns, dtype=int), batch_size=batch_size, per_worker_batch=per_worker_batch,
        serial_strong=med["serial strong"], serial_weak=med["serial weak"],
        strong_time=np.array(strong), weak_time=np.array(weak), runs=runs,
    )
