"""Looking at processes and /dev/shm from outside, for the process-fault tests (Linux /proc)."""

from __future__ import annotations

import contextlib
import os
import signal
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


@contextlib.contextmanager
def stop_button():
    """SIGINT raises ``KeyboardInterrupt`` here, as in a kernel while a cell runs.

    A Jupyter kernel ignores SIGINT between cells and installs Python's default handler
    while a cell runs (the stop button); a test process may likewise have inherited an
    ignored SIGINT from whatever ran before it. The interrupt tests press the stop button
    under the handler a running cell has, and put the previous one back.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
