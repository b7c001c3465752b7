"""Looking at processes and /dev/shm from outside, for the process-fault tests (Linux /proc)."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable

#: multiprocessing's own long-lived helper processes (not workers).
HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


def _children() -> dict[int, list[tuple[int, str]]]:
    kids: dict[int, list[tuple[int, str]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2:].split()
        kids.setdefault(int(rest[1]), []).append((int(entry), rest[0]))
    return kids


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(root: int) -> tuple[list[int], list[int]]:
    """(all descendants of ``root``, the workers among them: not multiprocessing's helpers)."""
    kids = _children()
    everyone, workers, todo = [], [], [(root, False)]
    while todo:
        parent, parent_is_helper = todo.pop()
        for pid, _ in kids.get(parent, []):
            helper = not parent_is_helper and any(h in cmdline(pid) for h in HELPERS)
            everyone.append(pid)
            if not helper:
                workers.append(pid)
            todo.append((pid, helper))
    return everyone, workers


def pgid(pid: int) -> int | None:
    """Process group of ``pid``, None once it is gone."""
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def wait_until(predicate, seconds: float, poll: float = 0.01) -> float | None:
    """Seconds until ``predicate()`` held, or None if it did not within ``seconds``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        if predicate():
            return time.monotonic() - t0
        time.sleep(poll)
    return None


def new_shm(before: set[str], owners: Iterable[int] | None = None) -> set[str]:
    """Entries of /dev/shm that are not in ``before``. With ``owners`` (pids), only those
    they can have made: their course segments (``ddl_<pid>_*``) and anything not named
    ``ddl_`` (POSIX semaphores, multiprocessing's arenas), so that the segments of another
    process - a second pytest-xdist worker - are not taken for a leak."""
    new = set(os.listdir("/dev/shm")) - before
    if owners is None:
        return new
    mine = tuple(f"ddl_{pid}_" for pid in owners)
    return {e for e in new if not e.startswith("ddl_") or e.startswith(mine)}


class StopButton:
    """The notebook's stop button, pressed from another thread (see :func:`stop_button`)."""

    def __init__(self):
        #: Set once the main thread has entered ``ProcessGroup.join`` or ``ProcessGroup.recv``:
        #: the run waits for its workers, every one of them exists.
        self.waiting = threading.Event()
        self._done = threading.Event()  # the with-block of stop_button has ended
        self._lost = 0  # presses reported to sys.unraisablehook instead of raised
        self._raised: list[BaseException] = []
        self._threads: list[threading.Thread] = []
        self.presses = 0
        self._old = set(descendants(os.getpid())[0])
        #: The worker processes of this test process at the first press (pids), those
        #: started since the button was made.
        self.workers: list[int] = []

    @property
    def lost(self) -> int:
        """Presses that Python reported to ``sys.unraisablehook`` instead of raising them."""
        return self._lost

    def _handler(self, signum, frame):
        if self._done.is_set():  # a press that crossed the end of the run: nothing to stop
            return
        stop = KeyboardInterrupt()
        self._raised.append(stop)
        raise stop

    def _unraisable(self, previous, unraisable) -> None:
        if any(unraisable.exc_value is stop for stop in self._raised):
            self._lost += 1
            return
        previous(unraisable)

    def _noting_the_wait(self, method):
        # Noted by the method itself, not by a thread looking at the main thread's stack with
        # sys._current_frames(): Python 3.11 builds frame objects under the lock of its thread
        # list there, and a garbage collection at that moment runs the gc callbacks under it
        # (a callback that looks at the stack too deadlocked a whole pytest-xdist worker).
        @functools.wraps(method)
        def wait(group, *args, **kwargs):
            if threading.current_thread() is threading.main_thread():
                self.waiting.set()
            return method(group, *args, **kwargs)

        return wait

    def press_while_waiting(self, after: float = 0.2, within: float = 60.0) -> None:
        """In a thread: once the run waits for its workers (:attr:`waiting`), ``after``
        seconds later, press the button (SIGINT to this process), as a user who stops a
        running cell.

        Measured from that moment, not from the test's start: on a loaded machine a run
        can still be starting its workers (a forkserver, a new interpreter) well after a
        fixed delay. A press that Python cannot raise where the main thread happens to be
        (in a garbage-collector callback or a ``__del__``: Python reports the
        ``KeyboardInterrupt`` to ``sys.unraisablehook`` and carries on, as with any
        exception there) is pressed again, as the user would; a press that was raised is
        never repeated, so the clean-up after it is not interrupted.
        """
        def body():
            deadline = time.monotonic() + within
            while not (self.waiting.wait(0.05) or self._done.is_set() or time.monotonic() > deadline):
                pass
            if not self.waiting.is_set() or self._done.wait(after):
                return  # never waited for workers, or ended first: the test's pytest.raises says so
            self.workers = sorted(p for p in descendants(os.getpid())[1] if p not in self._old)
            while not self._done.is_set():
                lost = self._lost
                self.presses += 1
                os.kill(os.getpid(), signal.SIGINT)
                while self._lost == lost and not self._done.wait(0.02):
                    pass  # raised (the run ends: done) or lost (press again)

        thread = threading.Thread(target=body, name="stop-button", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _finish(self) -> None:
        self._done.set()
        for thread in self._threads:
            thread.join(10)
        self._raised.clear()  # their tracebacks hold the run's frames: not beyond the run


@contextlib.contextmanager
def stop_button():
    """SIGINT raises ``KeyboardInterrupt`` here, as in a kernel while a cell runs.

    A Jupyter kernel ignores SIGINT between cells and installs Python's default handler
    while a cell runs (the stop button); a test process may likewise have inherited an
    ignored SIGINT from whatever ran before it. The interrupt tests press the stop button
    under the handler a running cell has (a handler that raises ``KeyboardInterrupt``, as
    ``signal.default_int_handler`` does), and put the previous one back. Yields a
    :class:`StopButton`: ``press_while_waiting()`` presses it once the run waits for its
    workers.
    """
    from course_lib.parallel.engine.workers import ProcessGroup

    button = StopButton()
    waits = {name: ProcessGroup.__dict__[name] for name in ("join", "recv")}
    for name, method in waits.items():  # the same methods, noting when the run waits
        setattr(ProcessGroup, name, button._noting_the_wait(method))
    previous = signal.signal(signal.SIGINT, button._handler)
    previous_hook = sys.unraisablehook
    sys.unraisablehook = functools.partial(button._unraisable, previous_hook)
    try:
        yield button
    finally:
        button._finish()
        sys.unraisablehook = previous_hook
        signal.signal(signal.SIGINT, previous)
        for name, method in waits.items():
            setattr(ProcessGroup, name, method)
