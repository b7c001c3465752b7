"""The step monitor beside every worker's loop, and the decorators that let communicators time themselves.

The loops a lecture shows (``course_lib/parallel/*.py``) hold only the algorithm and its
communication: no timer, no progress report, no fault. What a measured run needs is wrapped
around them from outside:

:class:`StepMonitor`
    Watches one worker's steps. The trainer hands the loop ``monitor.steps(job.batches())``
    instead of the plain batches: the monitor times every step, reports progress to the
    parent (which watches for hangs), fires an injected :class:`~course_lib.parallel.engine.workers.Fault`
    at the start of its step, and at the end of each step reads the counters it was given
    (bytes moved, the loss).
:func:`timed`
    Decorates a communicator's method (``@timed("communication")``, ``@timed("waiting")``):
    its time goes into that phase of the current step of the communicator's ``monitor``.
    The step's compute is what is left: the step's time minus its waiting and its
    communication.
:func:`recorded`
    Decorates a method whose calls are operations of a timeline (a pipeline stage's
    forward ``"F"`` and backward ``"B"`` of one micro-batch, its all-reduce ``"A"``, its
    update ``"U"``).
:class:`Traced`
    An object seen through the monitor: calls of the named methods are recorded as
    operations (the data-parallel loop's model: forward ``"F"``, backward ``"B"``).

An object whose ``monitor`` is None (a loop run outside a process group, a doctest) is
not timed at all.

Examples
--------
>>> monitor = StepMonitor(steps=2)
>>> class Wire:
...     monitor = monitor
...     @timed("communication")
...     def send(self):
...         pass
>>> for item in monitor.steps("ab", counts={"bytes": lambda: 8}):
...     Wire().send()
>>> monitor.timings["communication"].shape, monitor.counts["bytes"].tolist()
((2,), [8.0, 8.0])
>>> bool(np.all(monitor.phases("compute", "communication", "step").sum(axis=1) > 0))
True
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping

import numpy as np

from ..._validate import check_int

__all__ = ["COMMUNICATING", "StepMonitor", "Traced", "increase", "recorded", "timed"]

#: The phases a worker spends on others, not on its own computation: its compute is the rest.
COMMUNICATING = ("waiting", "communication")


class StepMonitor:
    """Per-step phase times, counts, operations, progress and faults of one worker's loop.

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
        Progress per recorded operation (a pipeline stage) instead of two marks per step:
        after the step's own work (the first wait for the others) and at its end. A hung
        worker is then the one with the lowest count.

    Attributes
    ----------
    timings : dict of str to numpy.ndarray
        Seconds per step of every phase used, and ``"step"``: the whole step.
    counts : dict of str to numpy.ndarray
        What :meth:`add` and the step's counters summed per step.
    ops : list of (kind, micro, start, end, step, chunk)
        The operations recorded with :meth:`op` (perf_counter seconds).
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

    def steps(self, batches: Iterable, *, counts: Mapping[str, Callable[[], float]] | None = None) -> Iterator:
        """The items of ``batches``, one per step, each step timed, its fault fired and its
        progress reported (:attr:`step` is the current step's number). At the end of each
        step every ``counts[name]()`` is added to that step's count ``name``."""
        self.ready = time.time()
        for step, item in enumerate(batches):
            if self.fault is not None:
                self.fault.maybe_fire(self.wctx.rank if self.wctx is not None else 0, step)
            self.step, self._marked = step, False
            t0 = time.perf_counter()
            yield item
            self.timings["step"][step] = time.perf_counter() - t0
            for name, read in (counts or {}).items():
                self.add(**{name: read()})
            if not self.per_op:
                self._progress(2 * step + 2)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time phase ``name`` of the current step (added up over the step; a phase inside
        another is taken out of the outer one)."""
        if name in COMMUNICATING and not self.per_op and not self._marked:
            self._marked = True
            self._progress(2 * self.step + 1)  # my own work is done: now I depend on the others
        t0 = time.perf_counter()
        self._nested.append(0.0)
        try:
            yield
        finally:
            inner = self._nested.pop()
            elapsed = time.perf_counter() - t0
            if name not in self.timings:
                self.timings[name] = np.zeros(self.n_steps)
            self.timings[name][self.step] += elapsed - inner
            if self._nested:
                self._nested[-1] += elapsed

    @contextlib.contextmanager
    def op(self, kind: str, micro: int = -1, chunk: int = 0) -> Iterator[None]:
        """Record one operation of the timeline (``kind`` of micro-batch ``micro`` on model
        chunk ``chunk``)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.ops.append((kind, micro, t0, time.perf_counter(), self.step, chunk))
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
        """``(steps, len(names))`` seconds of the phases ``names`` (zeros for a phase never
        used); ``"compute"`` is the step's time minus its waiting and communication."""
        zero = np.zeros(self.n_steps)
        spent = sum((self.timings.get(n, zero) for n in COMMUNICATING), zero)
        derived = {"compute": np.maximum(self.timings["step"] - spent, 0.0)}
        return np.stack([derived[n] if n in derived else self.timings.get(n, zero) for n in names], axis=1)


def timed(phase: str) -> Callable:
    """Decorator: the method's time goes into ``phase`` of the current step of
    ``self.monitor`` (untimed where the object has no monitor, or it is None)."""

    def decorate(method: Callable) -> Callable:
        @functools.wraps(method)
        def run(self, *args, **kwargs):
            monitor = getattr(self, "monitor", None)
            if monitor is None:
                return method(self, *args, **kwargs)
            with monitor.phase(phase):
                return method(self, *args, **kwargs)

        return run

    return decorate


def recorded(kind: str) -> Callable:
    """Decorator: every call is an operation ``kind`` of ``self.monitor``'s timeline, of the
    micro-batch given as the method's first argument (-1 where it takes none) and of the
    model chunk ``self.chunk`` (0 where the object has none)."""

    def decorate(method: Callable) -> Callable:
        @functools.wraps(method)
        def run(self, *args, **kwargs):
            monitor = getattr(self, "monitor", None)
            if monitor is None:
                return method(self, *args, **kwargs)
            micro = args[0] if args and isinstance(args[0], int) else -1
            with monitor.op(kind, micro, getattr(self, "chunk", 0)):
                return method(self, *args, **kwargs)

        return run

    return decorate


class Traced:
    """``target`` seen through ``monitor``: a call of a method named in ``kinds`` is recorded
    as an operation of that kind; every other attribute is ``target``'s, or one given in
    ``replaced`` (e.g. a traced model inside a traced job).

    Examples
    --------
    >>> monitor = StepMonitor(steps=1)
    >>> seen = Traced([3, 1, 2], monitor, {"sort": "S"})
    >>> for _ in monitor.steps([0]):
    ...     seen.sort()
    >>> [op[0] for op in monitor.ops], seen.copy()
    (['S'], [1, 2, 3])
    """

    def __init__(self, target, monitor: StepMonitor, kinds: Mapping[str, str], **replaced):
        self._target, self._monitor, self._kinds, self._replaced = target, monitor, dict(kinds), replaced

    def __getattr__(self, name: str):
        if name in self._replaced:
            return self._replaced[name]
        value = getattr(self._target, name)
        if name not in self._kinds:
            return value

        @functools.wraps(value)
        def run(*args, **kwargs):
            with self._monitor.op(self._kinds[name]):
                return value(*args, **kwargs)

        return run


def increase(read: Callable[[], float]) -> Callable[[], float]:
    """A counter for :meth:`StepMonitor.steps`: each call returns how much ``read()`` grew
    since the last call (a communicator's running total of bytes, per step).

    Examples
    --------
    >>> total = [0]
    >>> step_bytes = increase(lambda: total[0])
    >>> total[0] = 5; a = step_bytes(); total[0] = 8; b = step_bytes()
    >>> a, b
    (5, 3)
    """
    last = [read()]

    def grown() -> float:
        now = read()
        grown_by, last[0] = now - last[0], now
        return grown_by

    return grown
