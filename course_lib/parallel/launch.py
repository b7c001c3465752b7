"""The machinery beside every trainer: one launcher, one step clock.

The step loops the notebooks display (:func:`course_lib.parallel.data.worker_loop`,
:func:`course_lib.parallel.zero.zero_worker_loop`,
:func:`course_lib.parallel.tensor.tensor_worker_loop`,
:func:`course_lib.parallel.pipeline.stage_worker`) hold only the algorithm and its
communication. What a real run needs besides lives here:

:class:`Launcher`
    Builds what a process run needs - the multiprocessing context, shared arrays, pipes
    and barriers (:class:`PipeBarrier`) -, runs the workers (:class:`course_lib.parallel.workers.ProcessGroup`)
    and removes every resource afterwards, whatever happened. Every trainer starts its
    workers through it; nothing else in the course creates pipes, barriers or shared
    memory for a run.
:class:`StepClock`
    Used by a worker's loop as ``for idx in clock.steps(schedule)`` and ``with
    clock("communication"): total = comm.allreduce()``: it times each phase of each step
    (a phase inside another is taken out of the outer one), reports progress to the parent
    (which watches for hangs), fires an injected :class:`course_lib.parallel.workers.Fault`
    at the start of its step, and counts what the loop adds (``clock.add(bytes=n)``).

Examples
--------
>>> clock = StepClock(steps=2)
>>> for item in clock.steps("ab"):
...     with clock("compute"):
...         with clock("communication"):
...             pass
...     clock.add(bytes=8)
>>> clock.timings["compute"].shape, clock.counts["bytes"].tolist()
((2,), [8.0, 8.0])
>>> bool(np.all(clock.timings["step"] >= clock.timings["compute"] + clock.timings["communication"]))
True
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import time
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

from .._validate import check_int
from .shm import SharedArray
from .workers import ProcessGroup, check_start_method

__all__ = ["BarrierTimeout", "Launcher", "PipeBarrier", "StepClock"]


class BarrierTimeout(TimeoutError):
    """A worker waited longer than its timeout at a :class:`PipeBarrier`."""


class PipeBarrier:
    """A barrier for ``parties`` worker processes, built on pipes only.

    A dissemination barrier: in round ``k`` (``k = 0 .. ceil(log2 parties) - 1``) party
    ``r`` sends one empty message to party ``(r + 2**k) % parties`` and waits for one
    from ``(r - 2**k) % parties``. After the last round every party has heard, directly
    or through others, from all the rest, so none leaves before all have arrived. Two
    parties need one message each way per wait. Pipes are file descriptors: the OS
    closes them with the last process that holds them, so a killed run leaves nothing
    behind (``multiprocessing.Barrier`` uses named semaphores, which can stay in
    ``/dev/shm``).

    Parameters
    ----------
    parties : int
        Number of workers that call :meth:`wait`, >= 1.
    mp_context : multiprocessing context
        The context the workers are started with (``ProcessGroup.mp_context``).

    Examples
    --------
    >>> import multiprocessing
    >>> barrier = PipeBarrier(1, multiprocessing.get_context("fork"))
    >>> barrier.wait(0, timeout=1.0)   # one party: returns at once
    >>> barrier.close()
    """

    def __init__(self, parties: int, mp_context):
        self.parties = check_int(parties, "parties", 1)
        rounds = (self.parties - 1).bit_length()
        self._inbox = [[mp_context.Pipe(duplex=False) for _ in range(self.parties)]
                       for _ in range(rounds)]

    def wait(self, rank: int, timeout: float) -> None:
        """Block until all ``parties`` have called ``wait`` (``rank``: this party's number).

        Raises :class:`BarrierTimeout` if a round takes longer than ``timeout`` seconds.
        """
        n = self.parties
        for k, inbox in enumerate(self._inbox):
            inbox[(rank + (1 << k)) % n][1].send_bytes(b"")
            reader = inbox[rank][0]
            if not reader.poll(timeout):
                raise BarrierTimeout(f"party {rank} of {n} waited {timeout:g} s at a barrier")
            reader.recv_bytes()

    def close(self) -> None:
        """Close this process's ends of the pipes (idempotent)."""
        for inbox in self._inbox:
            for pair in inbox:
                for conn in pair:
                    conn.close()


class StepClock:
    """Per-step phase times, progress, faults and counts of one worker's loop.

    Parameters
    ----------
    wctx : WorkerContext or None
        The worker's context (progress goes to its parent; its rank picks the fault).
        None: no progress reported (a loop run outside a process group).
    steps : int
        Number of steps the loop runs (the length of every per-step array).
    fault : Fault or None
        Fired at the start of its step (tests, demonstrations).
    per_op : bool
        Progress per timed operation (:meth:`op`, a pipeline stage) instead of two
        marks per step: after the step's own work (the first wait for the others) and at
        its end. A hung worker is then the one with the lowest count.

    Attributes
    ----------
    timings : dict of str to numpy.ndarray
        Seconds per step of every phase used, and ``"step"``: the whole step.
    counts : dict of str to numpy.ndarray
        What :meth:`add` summed per step.
    ops : list of (kind, micro, start, end, step)
        The operations timed with :meth:`op` (perf_counter seconds).
    ready : float or None
        ``time.time()`` when the first step started.
    """

    def __init__(self, wctx=None, steps: int = 0, fault=None, *, per_op: bool = False):
        self.wctx, self.fault, self.per_op = wctx, fault, bool(per_op)
        self.n_steps = check_int(steps, "steps", 0)
        self.timings: dict[str, np.ndarray] = {"step": np.zeros(self.n_steps)}
        self.counts: dict[str, np.ndarray] = {}
        self.ops: list[tuple] = []
        self.ready: float | None = None
        self.step = 0
        self._nested: list[float] = []
        self._marked = False
        self._done = 0

    def _progress(self, value: int) -> None:
        if self.wctx is not None:
            self.wctx.progress(value)

    def steps(self, schedule: Iterable) -> Iterator:
        """The items of ``schedule``, one per step, each step timed, its fault fired and its
        progress reported (:attr:`step` is the current step's number)."""
        self.ready = time.time()
        for step, item in enumerate(schedule):
            if self.fault is not None:
                self.fault.maybe_fire(self.wctx.rank if self.wctx is not None else 0, step)
            self.step, self._marked = step, False
            t0 = time.perf_counter()
            yield item
            self.timings["step"][step] = time.perf_counter() - t0
            if not self.per_op:
                self._progress(2 * step + 2)

    @contextlib.contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        """Time ``phase`` of the current step (added up over the step; nested time excluded)."""
        if phase != "compute" and not self.per_op and not self._marked:
            self._marked = True
            self._progress(2 * self.step + 1)  # my own work is done: now I depend on the others
        t0 = time.perf_counter()
        self._nested.append(0.0)
        try:
            yield
        finally:
            inner = self._nested.pop()
            elapsed = time.perf_counter() - t0
            if phase not in self.timings:
                self.timings[phase] = np.zeros(self.n_steps)
            self.timings[phase][self.step] += elapsed - inner
            if self._nested:
                self._nested[-1] += elapsed

    @contextlib.contextmanager
    def op(self, kind: str, micro: int = -1) -> Iterator[None]:
        """Record one operation of the timeline (a pipeline stage's forward ``"F"``,
        backward ``"B"``, all-reduce ``"A"`` or update ``"U"`` of micro-batch ``micro``)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.ops.append((kind, micro, t0, time.perf_counter(), self.step))
            self._done += 1
            if self.per_op:
                self._progress(self._done)

    def add(self, **values: float) -> None:
        """Add each value to this step's count of that name (``bytes=n``, ``loss=l``, ...)."""
        for name, value in values.items():
            if name not in self.counts:
                self.counts[name] = np.zeros(self.n_steps)
            self.counts[name][self.step] += value

    def phases(self, *names: str) -> np.ndarray:
        """``(steps, len(names))`` seconds of the phases ``names`` (zeros for a phase never used)."""
        zero = np.zeros(self.n_steps)
        return np.stack([self.timings.get(n, zero) for n in names], axis=1)


class Launcher:
    """What a process run needs, built in one place and always cleaned up.

    Use as a context manager: ``shared``, ``pipe`` and ``barrier`` create resources that
    ``__exit__`` releases (pipes closed, barriers closed, shared arrays unlinked), also
    after an error or an interrupt; :meth:`run` starts the workers and waits for them.

    Parameters
    ----------
    start_method : {"fork", "forkserver", "spawn"} or None
        None: :func:`course_lib.parallel.workers.default_start_method`.

    Examples
    --------
    >>> from course_lib.parallel.workers import demo_worker
    >>> with Launcher("fork") as launch:
    ...     launch.run(demo_worker, 2, args=(1,), timeout=30)
    [0.0, 1.0]
    """

    def __init__(self, start_method: str | None = None):
        self.start_method = check_start_method(start_method)
        self.context = mp.get_context(self.start_method)
        self._stack = contextlib.ExitStack()
        self._arrays: list[SharedArray] = []

    def __enter__(self) -> Launcher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Release every resource made so far (idempotent)."""
        self._stack.close()
        self._arrays = []

    def shared(self, shape, dtype, init=None) -> SharedArray:
        """A new :class:`SharedArray` (``init``: its content), released with the run;
        if the parent dies, the workers remove it from ``/dev/shm``."""
        array = SharedArray(shape, dtype, init)
        self._stack.callback(array.close)
        self._arrays.append(array)
        return array

    def pipe(self, duplex: bool = False) -> tuple:
        """A new pipe ``(a, b)`` of the workers' context, closed with the run."""
        a, b = self.context.Pipe(duplex=duplex)
        self._stack.callback(b.close)
        self._stack.callback(a.close)
        return a, b

    def barrier(self, parties: int) -> PipeBarrier:
        """A :class:`PipeBarrier` for ``parties`` workers, closed with the run."""
        barrier = PipeBarrier(parties, self.context)
        self._stack.callback(barrier.close)
        return barrier

    def run(self, target: Callable, world_size: int, *, args: tuple = (),
            rank_args: Sequence[tuple] | None = None, timeout: float = 60.0, name: str = "ddl-worker",
            preload: Sequence[str] = ("course_lib.parallel.workers",), progress_total: int | None = None,
            progress_label: str = "", progress: bool | None = False) -> list:
        """Run ``target(wctx, *args, *rank_args[r])`` in ``world_size`` processes; return
        their results by rank (errors re-raised as ``WorkerError``, ``WorkerDied``,
        ``WorkerTimeout`` after every worker has been stopped)."""
        group = ProcessGroup(target, world_size, args=args, rank_args=rank_args,
                             start_method=self.start_method, timeout=timeout, name=name,
                             preload=preload, shared=self._arrays)
        with group:
            return group.join(progress_total=progress_total, progress_label=progress_label,
                              progress_display=progress)
