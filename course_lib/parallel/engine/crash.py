"""Crash points and crash times: where, or when, a worker can be made to fail on purpose.

A :class:`~course_lib.parallel.engine.errors.Fault` with a ``point`` (one of
:attr:`Fault.POINTS <course_lib.parallel.engine.errors.Fault.POINTS>`) fires inside the
checkpoint write of its step, not at the start of a step: the tests kill a worker at every
point of the write and check that nothing is lost. The write itself
(:mod:`course_lib.parallel.checkpoint`) holds no fault: its file operations are decorated
with :func:`crash_point`, and the engine arms the fault for one write with :func:`armed`.
Outside :func:`armed` (every write of a run without such a fault) a crash point does nothing.

A fault with ``after`` (seconds) kills its worker at a moment instead, wherever it is then:
:func:`fault_timer` runs beside the worker's loop (a failure drawn from a distribution of
times, :mod:`course_lib.parallel.train.restarts`).

Examples
--------
>>> from course_lib.parallel.engine.errors import Fault, FaultInjected
>>> @crash_point("before rename")
... def rename(src, dst):
...     return "renamed"
>>> rename("a.tmp", "a")
'renamed'
>>> with armed(Fault("raise", rank=1, step=4, point="before rename"), rank=1, step=4):
...     rename("a.tmp", "a")
Traceback (most recent call last):
...
course_lib.parallel.engine.errors.FaultInjected: injected fault in worker 1 before rename of the checkpoint of step 4
>>> with armed(Fault("raise", rank=1, step=4, point="before rename"), rank=0, step=4):
...     rename("a.tmp", "a")    # another worker: nothing happens
'renamed'
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
from collections.abc import Callable, Iterator

from .errors import Fault

__all__ = ["armed", "crash_point", "fault_timer", "fire_at"]

#: The fault armed for the write in progress in this process: (fault, rank, step), or None.
_ARMED: tuple[Fault, int, int] | None = None

#: The file name that marks the manifest: its points have names of their own.
_MANIFEST = "manifest"


@contextlib.contextmanager
def armed(fault: Fault | None, rank: int, step: int) -> Iterator[None]:
    """Arm ``fault`` for the checkpoint write of step ``step`` by worker ``rank``, if it is
    that worker's and that step's (and has a ``point``); disarm it afterwards."""
    global _ARMED
    mine = fault is not None and fault.point is not None and fault.rank == rank and fault.step == step
    previous, _ARMED = _ARMED, ((fault, rank, step) if mine else None)
    try:
        yield
    finally:
        _ARMED = previous


def fire_at(point: str) -> None:
    """Fire the armed fault if it is set for ``point`` (the engine calls this itself at the
    points that lie between the write's functions, "before write")."""
    if _ARMED is not None and _ARMED[0].point == point:
        fault, rank, step = _ARMED
        fault.fire(rank, step)


def _is_manifest(args) -> bool:
    """Whether the file operation's first argument (a path or an open file) is the manifest."""
    first = args[0] if args else None
    name = getattr(first, "name", first)
    return _MANIFEST in os.fspath(name) if isinstance(name, (str, os.PathLike)) else False


def crash_point(before: str | None, manifest_before: str | None = None, *, after: str | None = None,
                manifest_after: str | None = None) -> Callable:
    """Decorator: the armed fault may fire just ``before`` the call (``manifest_before`` when
    the call writes the manifest) or just ``after`` it (``manifest_after``)."""

    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def run(*args, **kwargs):
            manifest = _is_manifest(args)
            ahead, behind = (manifest_before, manifest_after) if manifest else (before, after)
            if ahead is not None:
                fire_at(ahead)
            result = func(*args, **kwargs)
            if behind is not None:
                fire_at(behind)
            return result

        return run

    return decorate


class _Timer:
    """The clock of a fault with ``after``: :meth:`steps` wraps a loop's batches and starts it
    once the first step is done (the first step of a run is its warm-up: part of its start)."""

    def __init__(self, fault: Fault | None, rank: int):
        self.armed = fault is not None and fault.after is not None and fault.rank == rank
        self.timer = threading.Timer(fault.after, os.kill, args=(os.getpid(), signal.SIGKILL)) if self.armed else None
        if self.timer is not None:
            self.timer.daemon = True

    def steps(self, batches):
        """``batches``, the timer started when the second one is asked for."""
        if self.timer is None:
            yield from batches
            return
        for k, item in enumerate(batches):
            if k == 1:
                self.timer.start()
            yield item

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()


@contextlib.contextmanager
def fault_timer(fault: Fault | None, rank: int) -> Iterator[_Timer]:
    """While the block runs (a worker's loop): if ``fault`` is worker ``rank``'s and has an
    ``after``, SIGKILL this process that many seconds after the loop's first step (pass the
    loop's batches through ``.steps()`` of what this yields); cancelled when the block ends.

    Examples
    --------
    >>> with fault_timer(Fault("kill", rank=1, after=0.01), rank=0) as failure:
    ...     list(failure.steps("ab"))    # another worker's fault: no timer
    ['a', 'b']
    """
    timer = _Timer(fault, rank)
    try:
        yield timer
    finally:
        timer.cancel()
