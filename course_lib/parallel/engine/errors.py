"""What a failed or stopped run raises, and the failures a run can be made to have on purpose.

A worker that raises, dies or hangs ends the whole run with one of the :class:`ProcessGroupError`
subclasses (raised by :class:`course_lib.parallel.engine.workers.ProcessGroup`, every worker
stopped first); a :class:`Fault` makes one worker raise, die or hang at a given step (the
tests and the appendix use it to show that nothing is left behind), or at a point of a
checkpoint write, or makes it slow down from a step on (a straggler).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..._validate import check_int, check_real
from ...i18n import sentences, tr

__all__ = ["Fault", "FaultInjected", "ProcessGroupError", "RunStopped", "WorkerDied", "WorkerError", "WorkerTimeout"]

#: Set this environment variable (to anything) to see a stopped run's whole traceback in a notebook.
FULL_TRACEBACK = "DDL_FULL_TRACEBACK"


# ------------------------------------------------------------------------ errors
class ProcessGroupError(RuntimeError):
    """A worker process failed; the message says which one and how."""


class WorkerError(ProcessGroupError):
    """A worker raised an exception; ``remote_traceback`` is the worker's traceback.

    Attributes
    ----------
    rank : int
    exc_type : str
        Name of the exception class raised in the worker.
    remote_traceback : str
        The traceback as the worker formatted it.
    original : BaseException or None
        The worker's exception object, when it could be sent back (also set as
        ``__cause__``).
    """

    def __init__(self, rank: int, exc_type: str, message: str, remote_traceback: str, original=None):
        self.rank, self.exc_type, self.remote_traceback = rank, exc_type, remote_traceback
        self.original = original
        super().__init__(
            tr("worker {rank} raised {exc_type}: {message}", rank=rank, exc_type=exc_type, message=message) + "\n\n"
            + tr("--- traceback in worker {rank} ---", rank=rank) + f"\n{remote_traceback.rstrip()}"
        )


class WorkerDied(ProcessGroupError):
    """A worker process ended without returning a result (hard exit, signal, OOM kill)."""

    def __init__(self, rank: int, exitcode: int | None):
        self.rank, self.exitcode = rank, exitcode
        if exitcode is not None and exitcode < 0:
            try:
                name = signal.Signals(-exitcode).name
            except ValueError:  # pragma: no cover - unknown signal number
                name = str(-exitcode)
            text = tr("worker {rank} was killed by signal {signal} before returning a result; the other "
                      "workers were stopped", rank=rank, signal=name)
        else:
            text = tr("worker {rank} exited with code {code} before returning a result; the other workers "
                      "were stopped", rank=rank, code=exitcode)
        oom = tr("(SIGKILL often means the out-of-memory killer)") if exitcode == -9 else ""
        super().__init__(sentences(text, oom))


class WorkerTimeout(ProcessGroupError):
    """No worker reported progress for ``timeout`` seconds (hang or deadlock), or a
    worker did not start within ``start_timeout`` seconds."""

    def __init__(self, timeout: float, progress: Sequence[int], finished: Sequence[bool],
                 starting: Sequence[int] = ()):
        self.timeout, self.progress = timeout, list(progress)
        if starting:
            super().__init__(f"worker {list(starting)} did not start within {timeout:g} s; stopped "
                             "all workers. Increase `start_timeout` if your machine is just busy.")
            return
        waiting = [r for r, done in enumerate(finished) if not done]
        lowest = min(self.progress[r] for r in waiting)
        behind = [r for r in waiting if self.progress[r] == lowest]
        states = ", ".join(f"worker {r}: {p}" for r, p in enumerate(self.progress))
        super().__init__(
            f"no worker made progress for {timeout:g} s; stopped all workers. "
            f"Progress counters ({states}); the hung worker is probably {behind} "
            f"(the others wait for it). Increase `timeout` if the work is just slow."
        )


class FaultInjected(RuntimeError):
    """The exception raised by ``Fault("raise")``."""


# ------------------------------------------------------------------------ faults
@dataclass(frozen=True)
class Fault:
    """A deliberate failure in worker ``rank`` at the start of step ``step``.

    Parameters
    ----------
    kind : {"raise", "exit", "kill", "hang", "slow"}
        ``raise``: raise :class:`FaultInjected` (a bug in the worker's code);
        ``exit``: ``os._exit(3)`` without clean-up (a crash in native code);
        ``kill``: SIGKILL to itself (what the out-of-memory killer does);
        ``hang``: sleep forever (a deadlock);
        ``slow``: sleep ``seconds`` at the start of step ``step`` and of every later step
        (a straggler: a slower or busier device; the run goes on).
    rank : int
        Worker that fails, >= 0.
    step : int
        Step (or micro-batch, for a pipeline) at which it fails, >= 0; with ``point``: the
        step of the checkpoint (the steps done when it is written).
    point : str, optional
        Fail at this point of the checkpoint written after step ``step`` instead of at the
        start of a step: one of :attr:`POINTS` (:mod:`course_lib.parallel.checkpoint`;
        the manifest's points happen in worker 0 only). Kinds "raise", "exit", "kill" and
        "hang" only.
    seconds : float
        Kind "slow" only: the sleep per step, in (0, 60].
    after : float, optional
        Kind "kill" only, instead of a step: kill the worker this many seconds after its
        loop's first step (its warm-up), in (0, 3600], wherever it is then (computing,
        waiting, writing a checkpoint): a failure at a moment in time (the data-parallel and
        pipeline trainers: :func:`course_lib.parallel.engine.crash.fault_timer`).

    Examples
    --------
    >>> Fault("slow", rank=1, seconds=0.01)
    Fault(kind='slow', rank=1, step=0, seconds=0.01)
    >>> Fault("kill", rank=0, step=4, point="before rename").point
    'before rename'
    """

    kind: str
    rank: int = 0
    step: int = 0
    point: str | None = None
    seconds: float = 0.0
    after: float | None = None

    KINDS = ("raise", "exit", "kill", "hang", "slow")
    #: The points of a checkpoint write, in order (:mod:`course_lib.parallel.checkpoint`): before
    #: the worker's shard is written, once written but before it is flushed (fsync), flushed but
    #: not yet renamed into place, renamed; then, in worker 0 only, once every shard is in place
    #: and before the manifest is written, the manifest flushed but not renamed, and the
    #: checkpoint complete.
    POINTS = ("before write", "before flush", "before rename", "after rename", "before manifest",
              "before manifest rename", "after manifest")

    def __post_init__(self):
        if self.kind not in self.KINDS:
            raise ValueError(f"kind must be one of {self.KINDS}, got {self.kind!r}")
        check_int(self.rank, "rank", 0)
        check_int(self.step, "step", 0)
        if self.point is not None and (self.point not in self.POINTS or self.kind == "slow"):
            raise ValueError(f"point must be None or one of {self.POINTS} (not with kind 'slow'), got {self.point!r}")
        if self.kind == "slow":
            check_real(self.seconds, "seconds", 0.0, 60.0, low_open=True)
        elif self.seconds != 0:
            raise ValueError(f"seconds is for kind 'slow' only, got seconds={self.seconds!r} with kind {self.kind!r}")
        if self.after is not None:
            if self.kind != "kill" or self.point is not None:
                raise ValueError(f"after is for kind 'kill' without a point only, got kind {self.kind!r}, "
                                 f"point {self.point!r}")
            check_real(self.after, "after", 0.0, 3600.0, low_open=True)

    def __repr__(self) -> str:
        extra = "".join(f", {name}={getattr(self, name)!r}" for name, unset in (("point", None), ("seconds", 0.0),
                                                                               ("after", None))
                        if getattr(self, name) != unset)
        return f"Fault(kind={self.kind!r}, rank={self.rank!r}, step={self.step!r}{extra})"

    def maybe_fire(self, rank: int, step: int) -> None:
        """Fail now if this is the chosen rank and step (call it in the worker). A fault with a
        ``point`` fires in the checkpoint write instead (:meth:`fire`)."""
        if self.kind == "slow":
            if rank == self.rank and step >= self.step:
                time.sleep(self.seconds)
            return
        if rank != self.rank or step != self.step or self.point is not None or self.after is not None:
            return
        self.fire(rank, step)

    def fire(self, rank: int, step: int) -> None:
        """Fail now, as ``kind`` says (the caller has decided that it is time)."""
        if self.kind == "raise":
            raise FaultInjected(tr("injected fault in worker {rank} at step {step}", rank=rank, step=step)
                                if self.point is None else
                                tr("injected fault in worker {rank} {point} of the checkpoint of step {step}",
                                   rank=rank, point=self.point, step=step))
        if self.kind == "exit":
            os._exit(3)
        if self.kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(60)  # pragma: no cover - the signal arrives first
        while True:  # "hang"
            time.sleep(3600)


class RunStopped(KeyboardInterrupt):
    """The run was stopped (the notebook's stop button, Ctrl-C) and every worker has ended.

    A :class:`KeyboardInterrupt`, so whatever stops on one stops on this; in a notebook it
    shows as one line, not as the traceback through the course's process machinery (set the
    environment variable ``DDL_FULL_TRACEBACK`` to see that).

    Examples
    --------
    >>> stopped = RunStopped()
    >>> isinstance(stopped, KeyboardInterrupt), stopped._render_traceback_()
    (True, ['RunStopped: the run was stopped; every worker has ended and nothing is left behind.'])
    """

    def __init__(self, message: str | None = None):
        """``message``: the line shown; None: "the run was stopped; every worker has ended and
        nothing is left behind." in the current language."""
        if message is None:
            message = tr("the run was stopped; every worker has ended and nothing is left behind.")
        super().__init__(message)

    @property
    def _render_traceback_(self):
        """IPython's hook for how an exception is shown: one line, unless ``DDL_FULL_TRACEBACK`` is set."""
        if os.environ.get(FULL_TRACEBACK):
            raise AttributeError("_render_traceback_")  # IPython then shows the whole traceback
        return lambda: [f"{type(self).__name__}: {self}"]
