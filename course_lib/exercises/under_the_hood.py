"""Exercises of notebook 15 (appendix: under the hood).

Exercise 1 asks which start method can run a worker function the workers cannot import;
the expected method is what :class:`course_lib.parallel.engine.workers.ProcessGroup` accepts on
this machine, found by asking it. Exercise 2 asks which entry of a ``/dev/shm`` listing
the doctor reports as stale: a segment of the course (``ddl_<creator pid>_<random>``,
:data:`course_lib.parallel.engine.shm.SHM_PREFIX`) whose creating process no longer exists, the
rule of :func:`course_lib.parallel.engine.shm.find_leftovers`, applied here to the listing and the
living processes the question gives (``EX2_SHM``), not to this machine's.
"""

from __future__ import annotations

import multiprocessing as mp

from ..i18n import tr
from ..parallel.engine.shm import SHM_PREFIX
from . import Result, check

__all__ = ["EX2_SHM", "accepted_start_methods", "ex1_start_method", "ex2_stale_segment"]

#: Exercise 2: the entries of ``/dev/shm`` on a machine and the process ids alive there. A
#: learner's kernel (pid 4242) runs a data-parallel run; a kernel with pid 3131 was killed
#: with SIGKILL together with its workers (the out-of-memory killer took them all), so
#: nothing removed its segment; ``psm_...`` is the default name Python's
#: ``SharedMemory`` gives another program's segment, ``sem.mp-...`` a semaphore.
EX2_SHM = {
    "listing": ("ddl_4242_5c0e2b7a9f31", "psm_8c3f1e22", "ddl_3131_a41f07d2c9e8", "sem.mp-7q2x1k"),
    "alive": (1, 4242, 4250, 4251),
}


def _notebook_like_worker(wctx):  # pragma: no cover - never started, only offered to ProcessGroup
    """Stands in for a worker defined in a notebook: the workers cannot import it by name."""

    def my_worker(wctx):
        return wctx.rank

    return my_worker


def accepted_start_methods(target=None) -> list[str]:
    """The start methods of this machine under which :class:`ProcessGroup` accepts ``target``.

    ``ProcessGroup`` checks its target before it starts anything, so asking starts no
    process. The default ``target`` is a function defined inside another function, which
    (like a function defined in a notebook) no worker can import by name.

    Examples
    --------
    >>> "fork" in accepted_start_methods() or "fork" not in mp.get_all_start_methods()
    True
    """
    from ..parallel.engine.workers import ProcessGroup

    target = _notebook_like_worker(None) if target is None else target
    accepted = []
    for method in mp.get_all_start_methods():
        try:
            ProcessGroup(target, 1, start_method=method)
        except ValueError:
            continue
        accepted.append(method)
    return accepted


def ex1_start_method(answer) -> Result:
    """The one start method under which a worker function defined in a notebook can run."""
    accepted = accepted_start_methods()
    expected = accepted[0] if len(accepted) == 1 else " or ".join(accepted) or "none"
    return check(
        answer,
        expected,
        name=tr("start method for a worker defined in a notebook"),
        hint=tr("a start method that copies the parent's memory (functions included) needs no import; "
                "the others start from a program that must import the worker by name."),
        mistakes={
            "spawn": tr("spawn starts a new Python interpreter, which imports the worker by its module and "
                        "name: a notebook's functions are in no module it can import."),
            "forkserver": tr("forkserver forks from a server process started before your cell ran; it too "
                             "imports the worker by name, like spawn."),
        },
    )


def _stale(listing, alive) -> list[str]:
    """Entries of ``listing`` that are the course's segments of a creator not in ``alive``."""
    stale = []
    for entry in listing:
        pid = entry[len(SHM_PREFIX):].split("_", 1)[0]
        if entry.startswith(SHM_PREFIX) and pid.isdigit() and int(pid) not in alive:
            stale.append(entry)
    return stale


def ex2_stale_segment(answer) -> Result:
    """The entry of ``EX2_SHM["listing"]`` that the doctor reports as a stale segment."""
    listing, alive = EX2_SHM["listing"], set(EX2_SHM["alive"])
    (expected,) = _stale(listing, alive)
    mistakes = {}
    for entry in listing:
        if entry == expected:
            continue
        if entry.startswith(SHM_PREFIX):
            mistakes[entry] = tr("Its creator, process {pid}, is alive: a run in progress, whose parent removes "
                                 "the segment when the run ends.", pid=entry[len(SHM_PREFIX):].split("_", 1)[0])
        else:
            mistakes[entry] = tr("Not the course's: the doctor looks only at names starting with {prefix}; other "
                                 "programs' entries are theirs to remove.", prefix=repr(SHM_PREFIX))
    return check(
        answer,
        expected,
        accept={f"/dev/shm/{expected}": tr("with its path")},
        name=tr("stale segment"),
        hint=tr("the doctor reads the creating process's id from the name ddl_<pid>_<random> and asks the "
                "operating system whether that process still exists."),
        mistakes=mistakes,
    )
