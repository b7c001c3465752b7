"""Test support: what a run left behind (processes, shared memory, mappings).

Used by the tests (and by the appendix, to show that a failed run leaves nothing): take a
:func:`resource_snapshot` before, run, then :func:`leaked_resources` lists what is new.
Linux only (``/proc``); elsewhere the snapshots are empty.

Examples
--------
>>> before = resource_snapshot()
>>> leaked_resources(before, grace=0.0)
[]
"""

from __future__ import annotations

import gc
import os
import time
from dataclasses import dataclass

from .parallel.engine.shm import SHM_PREFIX

__all__ = ["ResourceSnapshot", "leaked_resources", "resource_snapshot"]

_MP_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


@dataclass(frozen=True)
class ResourceSnapshot:
    """Processes and shared memory held by this process at one moment (Linux ``/proc``).

    Attributes
    ----------
    processes : frozenset of (pid, state, command)
        Every descendant process except multiprocessing's own long-lived helpers (the
        resource tracker, stopped after the last run, and the forkserver, kept between runs on
        purpose for its fast starts; course_lib.parallel.engine.helpers).
    segments : frozenset of str
        ``/dev/shm`` entries named ``ddl_<this pid>_*``.
    mapped : frozenset of str
        ``/dev/shm`` files (segments, POSIX semaphores) mapped into this process,
        except multiprocessing's heap arenas (``pym-*``: one per process, reused by
        every later Barrier or RawArray, never a per-run leak).
    """

    processes: frozenset
    segments: frozenset
    mapped: frozenset


def resource_snapshot() -> ResourceSnapshot:
    """Take a :class:`ResourceSnapshot` (empty sets where ``/proc`` does not exist)."""
    if not os.path.isdir("/proc/self"):  # pragma: no cover - not Linux
        return ResourceSnapshot(frozenset(), frozenset(), frozenset())
    parents: dict[int, list[tuple[int, str]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2 :].split()
        parents.setdefault(int(rest[1]), []).append((int(entry), rest[0]))
    # A worker started by the forkserver is forked from it and keeps its command line:
    # skip only the helpers themselves, not the processes they started.
    found, todo = [], [(os.getpid(), False)]
    while todo:
        parent, parent_is_helper = todo.pop()
        for pid, state in parents.get(parent, []):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                cmd = "?"
            helper = not parent_is_helper and any(h in cmd for h in _MP_HELPERS)
            todo.append((pid, helper))
            if not helper:
                found.append((pid, state, cmd))
    prefix = f"{SHM_PREFIX}{os.getpid()}_"
    segments = {e for e in os.listdir("/dev/shm") if e.startswith(prefix)} if os.path.isdir("/dev/shm") else set()
    mapped = set()
    with open("/proc/self/maps") as f:
        for line in f:
            if "/dev/shm/" in line:
                entry = line.split("/dev/shm/", 1)[1].strip()
                if not entry.startswith("pym-"):
                    mapped.add(entry)
    return ResourceSnapshot(frozenset(found), frozenset(segments), frozenset(mapped))


def leaked_resources(before: ResourceSnapshot, grace: float = 3.0) -> list[str]:
    """What exists now but not in ``before``: processes, segments, mappings.

    When something new is there, collects garbage (an exception's traceback keeps the
    frames, and with them the semaphores, of a failed run alive until then) and waits up
    to ``grace`` seconds for processes to finish exiting. Nothing new at the first look
    returns at once: a collection only frees, and a full one takes 0.1-0.3 s in a process
    that has drawn many figures. Returns a list of descriptions (empty: nothing leaked).
    """
    if not isinstance(before, ResourceSnapshot):
        raise TypeError(f"before must be a ResourceSnapshot (resource_snapshot()), got {type(before).__name__}")
    if not (isinstance(grace, (int, float)) and 0 <= grace < 3600):
        raise ValueError(f"grace must be a number of seconds in [0, 3600), got {grace!r}")
    deadline = time.monotonic() + grace
    old_pids = {p for p, _, _ in before.processes}
    collected = False
    while True:
        now = resource_snapshot()
        procs = [f"process {p} ({state}) {cmd}" for p, state, cmd in now.processes if p not in old_pids]
        leaks = procs + [f"/dev/shm/{s}" for s in sorted(now.segments - before.segments)]
        leaks += [f"mapping of /dev/shm/{m}" for m in sorted(now.mapped - before.mapped)]
        if not leaks or (collected and time.monotonic() > deadline):
            return leaks
        if not collected:  # once: exiting processes need no collection while we wait for them
            gc.collect()
            collected = True
            continue
        time.sleep(0.05)
