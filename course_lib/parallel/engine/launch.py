"""The one launcher of every run: what a process run needs, built in one place, always cleaned up.

:class:`Launcher` builds what a process run needs - the multiprocessing context, shared
arrays, pipes and barriers (:class:`PipeBarrier`) -, runs the workers
(:class:`course_lib.parallel.engine.workers.ProcessGroup`) and removes every resource
afterwards, whatever happened. Every trainer starts its workers through it; nothing else in
the course creates pipes, barriers or shared memory for a run. Beside each worker's loop, the
step monitor (:mod:`course_lib.parallel.engine.clock`) times it.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
from collections.abc import Callable, Sequence

from ..._validate import check_int
from .shm import SharedArray
from .workers import ProcessGroup, check_start_method

__all__ = ["BarrierTimeout", "Launcher", "PipeBarrier"]


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

    def barrier(self, parties: int) -> PipeBarrier:
        """A :class:`PipeBarrier` for ``parties`` workers, closed with the run."""
        barrier = PipeBarrier(parties, self.context)
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
