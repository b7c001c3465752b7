"""A worker killed while it starts ends the run with ``WorkerDied``, never a hang.

For every process-based trainer and experiment (``tests/process_runs.py``) and every start
method, the first worker is killed with SIGKILL at one of three points of its start-up, seen
from outside through ``/proc`` (the point rotates over the run-method pairs so that every
trainer and every start method meets every point: ``tests/pairwise.py``):

* ``at once``: the moment its process exists (under spawn: before the new interpreter
  has read anything of its arguments, while the parent may still be writing them);
* ``while starting``: 30 ms later (spawn: the interpreter is starting or unpickling its
  arguments; fork and forkserver: importing or already at work);
* ``at its entry point``: once it has left the parent's process group, the first thing
  its entry point does (its arguments are read).

Each run must end within seconds with ``WorkerDied`` naming the rank and SIGKILL, and leave
no process, no ``/dev/shm`` entry (segments, semaphores) and no mapping behind. Each test
has a hard time limit of its own (pytest-timeout): a start that blocks fails by name
instead of hanging the suite. A last test makes the forkserver's broken-pipe case certain:
the child is killed before the parent writes its arguments.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from course_lib.parallel.engine.workers import WorkerDied
from course_lib.testing import leaked_resources, resource_snapshot

sys.path.insert(0, str(Path(__file__).parent))
import process_runs  # noqa: E402
from pairwise import all_pairs  # noqa: E402
from proc_support import descendants, new_shm, wait_until  # noqa: E402
from test_process_faults import _torch_or_skip  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc and /dev/shm"),
    pytest.mark.slow,
]

METHODS = ["fork", "forkserver", "spawn"]
POINTS = ["at once", "while starting", "at its entry point"]
NOTICED_WITHIN = 15.0  # seconds from the kill to WorkerDied (the other workers' start included)


def _new_workers(old: set[int]) -> list[int]:
    """Worker processes of this test process that were not there before, oldest pid first."""
    return sorted(p for p in descendants(os.getpid())[1] if p not in old)


def _own_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False


def _kill_first_worker(point: str, old: set[int], killed: dict) -> threading.Thread:
    """In a thread: find the first new worker, wait for ``point``, SIGKILL it."""
    def body():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = _new_workers(old)
            if found:
                pid = found[0]
                if point == "while starting":
                    time.sleep(0.03)
                elif point == "at its entry point":
                    wait_until(lambda pid=pid: _own_group(pid), 30, poll=0.001)
                killed["at"] = time.monotonic()
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:  # pragma: no cover - it ended first
                    pass
                return
            time.sleep(0.0005)
    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


@pytest.fixture(autouse=True)
def helpers_running():
    """multiprocessing's helpers (resource tracker, forkserver) run before the test looks:
    for a moment after it is started, a helper looks like any other new process."""
    import multiprocessing
    from multiprocessing import forkserver, resource_tracker

    from course_lib.parallel.train.data import PRELOAD

    resource_tracker.ensure_running()
    multiprocessing.get_context("forkserver").set_forkserver_preload(list(PRELOAD))
    forkserver.ensure_running()


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("run", "method", "point"), all_pairs(list(process_runs.RUNS), METHODS, POINTS))
def test_a_worker_killed_while_starting_ends_the_run(run, method, point):
    _torch_or_skip(run)
    before = resource_snapshot()
    shm_before = set(os.listdir("/dev/shm"))
    old = set(descendants(os.getpid())[0])
    killed: dict = {}
    thread = _kill_first_worker(point, old, killed)
    with pytest.raises(WorkerDied, match=r"worker \d+ was killed by signal SIGKILL") as info:
        process_runs.RUNS[run](method)
    ended = time.monotonic()
    thread.join(5)
    assert "at" in killed, "no worker was seen starting"
    assert 0 <= info.value.rank < process_runs.WORKERS[run]
    assert info.value.exitcode == -signal.SIGKILL
    assert ended - killed["at"] < NOTICED_WITHIN
    assert leaked_resources(before) == []
    clean = wait_until(lambda: not _ours(new_shm(shm_before)), 10.0)
    assert clean is not None, f"left in /dev/shm: {sorted(_ours(new_shm(shm_before)))}"


def _ours(entries: set[str]) -> set[str]:
    """This test process's segments (named ddl_<pid>_...) and any POSIX semaphore."""
    return {e for e in entries if e.startswith(f"ddl_{os.getpid()}_") or e.startswith("sem.")}


@pytest.mark.timeout(60)
def test_forkserver_child_killed_before_the_parent_writes_its_arguments(monkeypatch):
    """The one window a kill from outside rarely hits: the server has forked the child,
    the parent has not yet written its arguments. The write then fails with a broken pipe;
    the run must still end with ``WorkerDied`` naming the signal."""
    from multiprocessing import forkserver

    connect = forkserver.connect_to_new_process
    server_children: list[int] = []

    def connect_then_kill_the_child(fds):
        old = set(descendants(os.getpid())[0])
        sentinel, w = connect(fds)
        if server_children:  # only the first worker
            return sentinel, w
        pid = wait_until(lambda: _new_workers(old), 30, poll=0.001)
        assert pid is not None, "the forkserver started no child"
        child = _new_workers(old)[0]
        server_children.append(child)
        os.kill(child, signal.SIGKILL)
        # reaped by the server once dead: then its end of the argument pipe is closed too
        assert wait_until(lambda: not os.path.exists(f"/proc/{child}"), 10, poll=0.001) is not None
        return sentinel, w

    before = resource_snapshot()
    monkeypatch.setattr(forkserver, "connect_to_new_process", connect_then_kill_the_child)
    t0 = time.monotonic()
    with pytest.raises(WorkerDied, match=r"worker 0 was killed by signal SIGKILL"):
        process_runs.data_parallel_shm("forkserver")
    assert time.monotonic() - t0 < NOTICED_WITHIN
    assert len(server_children) == 1
    monkeypatch.undo()
    assert leaked_resources(before) == []
