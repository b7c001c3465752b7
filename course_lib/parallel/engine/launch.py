"""The one launcher of every run: what a process run needs, built in one place, always cleaned up.

:class:`Launcher` builds what a process run needs - the multiprocessing context, shared
arrays, pipes and barriers (:class:`PipeBarrier`; :class:`FlagBarrier`, spinning on shared
memory, for the benchmarks) -, runs the workers
(:class:`course_lib.parallel.engine.workers.ProcessGroup`) and removes every resource
afterwards, whatever happened. Every trainer starts its workers through it; nothing else in
the course creates pipes, barriers or shared memory for a run. Beside each worker's loop, the
step monitor (:mod:`course_lib.parallel.engine.clock`) times it.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import platform
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from ..._validate import check_int, check_positive
from .shm import SharedArray
from .workers import ProcessGroup, check_start_method

__all__ = ["BARRIER_KINDS", "BarrierTimeout", "FlagBarrier", "Launcher", "LoggedBarrier", "PipeBarrier"]

#: The barriers :meth:`Launcher.barrier` makes: pipes (the default) or flags in shared memory.
BARRIER_KINDS = ("pipe", "flag")


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


class FlagBarrier:
    """A barrier for ``parties`` worker processes on shared memory: one cache line per party.

    Each party counts its own waits: at its ``k``-th wait it writes ``k`` into its slot (64
    bytes of its own, so no two parties ever write one cache line) and looks at all the
    slots until every one holds at least ``k``, yielding its core between looks
    (``os.sched_yield``); after ``spin`` seconds of this it naps ``nap`` seconds between
    looks (a machine with fewer free cores than parties). No party blocks in the kernel, so
    none has to be woken: each leaves as soon as it sees the last arrival. A pipe barrier
    (:class:`PipeBarrier`) instead sleeps in ``poll`` and is woken by the OS once per round.

    Correct because every slot has one writer and the counts only grow (a party one wait
    ahead has a larger count, which still lets the others pass). What a party wrote before
    its wait (its gradient row) is visible to every party that sees its count: x86-64 keeps
    stores in order, and a lock taken and released just before the count is written drains
    any weakly ordered (streaming) store first. Other processors (ARM) order stores less
    strictly: :meth:`Launcher.barrier` makes this barrier on x86-64 only. Every wait ends
    after ``timeout`` seconds with :class:`BarrierTimeout`; the slots are a segment of the
    run (:meth:`Launcher.shared`), removed with it whatever happens, as the pipes of a
    :class:`PipeBarrier` are closed.

    Examples
    --------
    >>> with SharedArray((2, FlagBarrier.SLOT), np.int64) as slots:
    ...     barrier = FlagBarrier(2, slots)
    ...     first = barrier.arrive(0)
    ...     print(first, barrier.passed(0), barrier.arrive(1), barrier.passed(0))
    ...     barrier.close()
    1 False 1 True
    """

    SLOT = 8  # int64 per party: one 64-byte cache line
    _FENCE = threading.Lock()

    def __init__(self, parties: int, slots: SharedArray, *, spin: float = 0.05, nap: float = 2e-4):
        self.parties = check_int(parties, "parties", 1)
        if slots.spec.shape != (self.parties, self.SLOT) or np.dtype(slots.spec.dtype) != np.int64:
            raise ValueError(f"slots must be an int64 SharedArray of shape ({self.parties}, {self.SLOT}), "
                             f"got {slots.spec.dtype} {slots.spec.shape}")
        self.spin = check_positive(spin, "spin", allow_zero=True)
        self.nap = check_positive(nap, "nap")
        self._spec, self._owner = slots.spec, slots
        self._stack: contextlib.ExitStack | None = None
        self._slots: np.ndarray | None = None

    def __getstate__(self) -> dict:  # a worker maps the slots itself, on its first wait
        return {**self.__dict__, "_owner": None, "_stack": None, "_slots": None}

    def _view(self) -> np.ndarray:
        if self._slots is None:
            if self._owner is not None and self._owner.array is not None:
                self._slots = self._owner.array
            else:
                self._stack = contextlib.ExitStack()
                self._slots = self._stack.enter_context(self._spec.attach())
        return self._slots

    def arrive(self, rank: int) -> int:
        """Party ``rank`` arrives: its count grows by one (returned)."""
        slots = self._view()
        count = int(slots[rank, 0]) + 1
        with self._FENCE:  # a locked instruction: every earlier store is out before the count
            pass
        slots[rank, 0] = count
        return count

    def passed(self, rank: int) -> bool:
        """Whether every party has arrived as often as party ``rank`` has."""
        slots = self._view()
        return bool(slots[:, 0].min() >= slots[rank, 0])

    def wait(self, rank: int, timeout: float) -> None:
        """Block until all ``parties`` have called ``wait`` as often as ``rank`` now has.

        Raises :class:`BarrierTimeout` if that takes longer than ``timeout`` seconds.
        """
        count = self.arrive(rank)
        column = self._view()[:, 0]
        start = time.monotonic()
        while column.min() < count:
            waited = time.monotonic() - start
            if waited > timeout:
                raise BarrierTimeout(f"party {rank} of {self.parties} waited {timeout:g} s at a barrier")
            if waited < self.spin:
                os.sched_yield()
            else:
                time.sleep(self.nap)

    def close(self) -> None:
        """Unmap the slots in this process (idempotent; the segment is the run's)."""
        stack, self._stack, self._slots = self._stack, None, None
        if stack is not None:
            stack.close()


class LoggedBarrier:
    """Any barrier, each wait's arrival and departure written down (``time.perf_counter``
    seconds: one clock for all the processes of a machine on Linux) in a shared
    ``(parties, waits, 2)`` array, so that the parent sees who waited for whom
    (:meth:`log`). Waits past ``waits`` are not written down. For the benchmarks'
    synchronisation diagnostics."""

    def __init__(self, barrier, log: SharedArray):
        self.barrier, self.parties = barrier, barrier.parties
        self._spec, self._owner = log.spec, log
        self._stack: contextlib.ExitStack | None = None
        self._log: np.ndarray | None = None
        self._waits: dict[int, int] = {}

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_owner": None, "_stack": None, "_log": None}

    def wait(self, rank: int, timeout: float) -> None:
        arrived = time.perf_counter()
        self.barrier.wait(rank, timeout)
        left = time.perf_counter()
        k = self._waits.get(rank, 0)
        self._waits[rank] = k + 1
        if self._log is None:
            self._stack = contextlib.ExitStack()
            self._log = self._stack.enter_context(self._spec.attach())
        if k < self._log.shape[1]:
            self._log[rank, k] = arrived, left

    def log(self) -> np.ndarray:
        """A copy of the log (in the process that made the barrier, before the run's end):
        ``[rank, k] = (arrival, departure)`` of party ``rank``'s ``k``-th wait (0 if none)."""
        return np.array(self._owner.array)

    def close(self) -> None:
        stack, self._stack, self._log = self._stack, None, None
        if stack is not None:
            stack.close()
        self.barrier.close()


class Launcher:
    """What a process run needs, built in one place and always cleaned up.

    Use as a context manager: ``shared``, ``pipe`` and ``barrier`` create resources that
    ``__exit__`` releases (pipes closed, barriers closed, shared arrays unlinked), also
    after an error or an interrupt; :meth:`run` starts the workers and waits for them.

    Parameters
    ----------
    start_method : {"fork", "forkserver", "spawn"} or None
        None: :func:`course_lib.parallel.engine.workers.default_start_method`.

    Examples
    --------
    >>> from course_lib.parallel.engine.workers import demo_worker
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

    def barrier(self, parties: int, kind: str = "pipe", *, log_waits: int = 0):
        """A barrier for ``parties`` workers, closed with the run: a :class:`PipeBarrier`
        (``kind="pipe"``) or a :class:`FlagBarrier` (``kind="flag"``, x86-64 only); with
        ``log_waits > 0`` a :class:`LoggedBarrier` around it that writes down that many waits
        of every party."""
        if kind not in BARRIER_KINDS:
            raise ValueError(f"barrier kind must be one of {BARRIER_KINDS}, got {kind!r}")
        if kind == "flag" and platform.machine().lower() not in ("x86_64", "amd64"):
            raise ValueError(f"a flag barrier needs an x86-64 processor (its stores stay in order), "
                             f"not {platform.machine()!r}: use kind='pipe'")
        if kind == "pipe":
            barrier = PipeBarrier(parties, self.context)
        else:
            barrier = FlagBarrier(parties, self.shared((check_int(parties, "parties", 1), FlagBarrier.SLOT), np.int64))
        self._stack.callback(barrier.close)
        if check_int(log_waits, "log_waits", 0):
            barrier = LoggedBarrier(barrier, self.shared((parties, log_waits, 2), np.float64))
            self._stack.callback(barrier.close)
        return barrier

    def run(self, target: Callable, world_size: int, *, args: tuple = (),
            rank_args: Sequence[tuple] | None = None, timeout: float = 60.0, name: str = "ddl-worker",
            preload: Sequence[str] = ("course_lib.parallel.engine.workers",), progress_total: int | None = None,
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
