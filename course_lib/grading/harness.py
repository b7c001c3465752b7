"""What the checks share: small data sets, running the learner's code on processes with a
short timeout, and proxies that write down how the learner's code used what it was given.

A check's worker targets live in the grading modules (importable, so any start method finds
them); they look the learner's function up when they run (``learner(...)``), so that the
function as the library holds it at that moment is the one checked.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from ..models import MLP
from .core import GRADER_TIMEOUT, Mistake

__all__: list[str] = []  # the checks' own support: nothing here is meant to be called from outside


def learner(module: str, qualname: str):
    """The learner's function ``qualname`` of ``module``, as the library holds it now."""
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def start_method() -> str:
    """The start method a check's workers use: the process layer's fastest
    (:func:`course_lib.parallel.engine.workers.fastest_start_method`), asked when a check runs."""
    from ..parallel.engine.workers import fastest_start_method

    return fastest_start_method()


@contextlib.contextmanager
def launch() -> Iterator:
    """A :class:`course_lib.parallel.engine.launch.Launcher` for a check's run."""
    from ..parallel.engine.launch import Launcher

    with Launcher(start_method()) as launcher:
        yield launcher


def run_workers(launcher, target, workers: int, *, args: tuple = (), rank_args=None) -> list:
    """``target(wctx, *args, *rank_args[r])`` on ``workers`` processes with the graders'
    short timeout; their results by rank (a hang: ``WorkerTimeout`` naming the worker)."""
    return launcher.run(target, workers, args=args, rank_args=rank_args, timeout=GRADER_TIMEOUT,
                        name="ddl-check", progress=False)


def progress(wctx, items: Iterable) -> Iterator:
    """``items`` one by one, telling the parent after each that this worker moved on (the
    parent stops a run in which no worker moves on for :data:`GRADER_TIMEOUT` seconds)."""
    for k, item in enumerate(items):
        yield item
        wctx.progress(k + 1)


def small_data(n: int = 60, sizes=(8, 16, 12, 3), seed: int = 0):
    """A small running example: ``MLP(sizes)``, inputs (n, sizes[0]) and labels."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, sizes[0]), dtype=np.float32)
    y = rng.integers(0, sizes[-1], n)
    return MLP(tuple(sizes)), x, y


def arrays_differ(got, expected) -> str:
    """Where ``got`` differs from ``expected`` in a sentence ("" when bitwise equal)."""
    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape:
        return f"shape {got.shape}, expected {expected.shape}"
    bad = np.flatnonzero(~((got == expected) | (np.isnan(got) & np.isnan(expected))).reshape(-1)) \
        if got.dtype.kind == "f" else np.flatnonzero((got != expected).reshape(-1))
    if bad.size == 0:
        return ""
    i = int(bad[0])
    where = np.unravel_index(i, got.shape) if got.ndim > 1 else (i,)
    return (f"{bad.size} of {got.size} numbers differ, the first at index {tuple(int(w) for w in where)}: "
            f"{got.reshape(-1)[i]!r}, expected {expected.reshape(-1)[i]!r}")


class Recorder:
    """Events a proxy writes down in a worker (sent back with its result)."""

    def __init__(self):
        self.events: list[tuple] = []

    def __call__(self, *event) -> None:
        self.events.append(event)


def require(condition: bool, message: str) -> None:
    """Raise :class:`Mistake` with ``message`` unless ``condition``."""
    if not condition:
        raise Mistake(message)


#: How far a trainer run on processes may end from ``train_serial``'s parameters (float64: the
#: course's trainers are within 1.6e-15).
TRAINED_WITHIN = 1e-6


def require_trained_as_serial(run, ref, said: str) -> None:
    """Raise :class:`Mistake` unless ``run`` trained the parameters of ``ref`` (``train_serial``'s
    run) within :data:`TRAINED_WITHIN`; ``said`` names what ran."""
    gap = float(np.abs(run.params - ref.params).max())
    require(gap <= TRAINED_WITHIN, f"{said} trains parameters {gap:.3g} away from train_serial's; the course's "
                                   f"are within {TRAINED_WITHIN:g}: {arrays_differ(run.params, ref.params)}")


# ------------------------------------------------------------------ workers as threads
class Stuck(Exception):
    """A worker was released from a barrier that not every worker will reach."""


class ThreadBarrier:
    """A barrier for the threads of a check, with the workers' interface ``wait(rank, timeout)``
    (at most :data:`GRADER_TIMEOUT` seconds); ``waits[r]`` counts worker ``r``'s waits."""

    def __init__(self, parties: int):
        self.barrier = threading.Barrier(parties)
        self.waits = [0] * parties

    def wait(self, rank: int, timeout: float) -> None:
        self.waits[rank] += 1
        try:
            self.barrier.wait(min(timeout, GRADER_TIMEOUT))
        except threading.BrokenBarrierError:
            raise Stuck() from None


def run_threads(workers: int, work: Callable, unmatched: Callable[[list, list], str]) -> list:
    """``work(rank, barrier)`` on ``workers`` threads of this process (one :class:`ThreadBarrier`
    shared); their results by rank.

    A worker's exception is raised here (the first that is not :class:`Stuck`, with its own
    traceback). Once a worker has returned, nobody can pass the barrier any more: whoever waits
    there is released at once, and the run ends with a :class:`Mistake` whose message is
    ``unmatched(waits, returned)`` (each worker's count of waits, which returned). A worker
    that neither returns nor waits within ``2 GRADER_TIMEOUT`` seconds ends it with
    ``WorkerTimeout`` naming it (its thread is left to end by itself: a daemon).
    """
    from ..parallel.engine.errors import WorkerTimeout

    barrier = ThreadBarrier(workers)
    results, errors, returned = [None] * workers, [None] * workers, [False] * workers

    def run(rank):
        try:
            results[rank] = work(rank, barrier)
            returned[rank] = True
        except BaseException as exc:  # noqa: BLE001 - raised again below, in the checking thread
            errors[rank] = exc
            barrier.barrier.abort()  # the others stop waiting for this worker

    threads = [threading.Thread(target=run, args=(r,), name=f"ddl-check-{r}", daemon=True) for r in range(workers)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 2 * GRADER_TIMEOUT
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        if any(returned) and barrier.barrier.n_waiting:  # a barrier nobody can pass any more
            barrier.barrier.abort()
        time.sleep(0.002)
    real = [e for e in errors if e is not None and not isinstance(e, Stuck)]
    if real:
        raise real[0]
    alive = [t.is_alive() for t in threads]
    if any(alive):
        barrier.barrier.abort()
        raise WorkerTimeout(2 * GRADER_TIMEOUT, barrier.waits, [not a for a in alive])
    if any(isinstance(e, Stuck) for e in errors):
        raise Mistake(unmatched(list(barrier.waits), list(returned)))
    return results


def counted(waits: list, what: str) -> str:
    """"worker 0: 2 <what>, worker 1: 1" (``what``: the plural)."""
    return ", ".join(f"worker {r}: {n} {what}" for r, n in enumerate(waits))


@contextlib.contextmanager
def replaced(module: str, **attributes) -> Iterator[None]:
    """Module ``module``'s ``attributes`` replaced while the block runs (a check's spies on the
    helpers the learner's function calls), put back afterwards."""
    mod = importlib.import_module(module)
    before = {name: getattr(mod, name) for name in attributes}
    try:
        for name, value in attributes.items():
            setattr(mod, name, value)
        yield
    finally:
        for name, value in before.items():
            setattr(mod, name, value)
