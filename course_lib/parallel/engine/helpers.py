"""multiprocessing's helper processes, which a Jupyter kernel must not wait for at its shutdown.

Jupyter's "Shut Down" and "Restart" end a kernel by a shutdown request: ipykernel (7) then
sends SIGTERM to every child of the kernel in the kernel's process group and looks again
after 0.01, 0.03, 0.1, 0.3, 1, 3 and 10 s until none is left; the server sends SIGTERM to
the kernel at half of its shutdown_wait_time (2.5 s). Workers have left that group (see
:mod:`course_lib.parallel.engine.workers`) and are reaped by close(); two helpers of multiprocessing have not:

* the resource tracker (spawn and forkserver start it, for every worker to share) ignores
  SIGTERM and SIGINT and ends only when every holder of its pipe has closed it. The course
  needs it for nothing (shm.py keeps its segments out of it), so if a group's start started
  it, it is stopped when the last group of this process closes (:func:`release_helpers`): the
  next run starts another, a few milliseconds (one more process start) per run;
* the forkserver dies of SIGTERM, but nobody waits for it: a zombie, still a child. It is
  kept between runs on purpose (its preload makes every later worker start in
  milliseconds), so a thread waits for its end and reaps it at once (:func:`watch_forkserver`).

Both touch multiprocessing's private state only as multiprocessing does itself: the
tracker as ResourceTracker._stop() does (close() waits at most 2 s for its end) and
the server as ForkServer.ensure_running() does with a server it finds dead. A tracker that
someone else started (e.g. by a multiprocessing Lock of their own) is left alone.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

__all__ = ["acquire_helpers", "release_helpers", "watch_forkserver"]

_TERMINATE_GRACE_S = 2.0  # how long a closing group waits for the tracker to end

try:  # multiprocessing's forkserver, where the platform has one
    from multiprocessing import forkserver as _forkserver
    from multiprocessing import popen_forkserver as _popen_forkserver
except ImportError:  # pragma: no cover - Windows
    _forkserver = _popen_forkserver = None

_helpers_lock = threading.Lock()
_live_groups = 0  # groups of this process started and not yet closed
_tracker_pid: int | None = None  # the resource tracker a group's start started
_watched_servers: set[int] = set()  # forkservers a thread waits for


def _forget_helpers() -> None:
    """In a forked child: the helpers and groups above are the parent's."""
    global _helpers_lock, _live_groups, _tracker_pid, _watched_servers
    _helpers_lock, _live_groups, _tracker_pid, _watched_servers = threading.Lock(), 0, None, set()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_helpers)


def _resource_tracker():
    """multiprocessing's resource tracker of this process (None where it has none)."""
    if os.name != "posix":  # pragma: no cover - Windows
        return None
    from multiprocessing import resource_tracker

    tracker = getattr(resource_tracker, "_resource_tracker", None)
    return tracker if all(hasattr(tracker, a) for a in ("_fd", "_pid", "_lock")) else None


def acquire_helpers(start_method: str) -> None:
    """A group starts: count it, and start the resource tracker its workers will share
    (spawn and forkserver only), remembering it if it was not running yet."""
    global _live_groups, _tracker_pid
    with _helpers_lock:
        tracker = _resource_tracker() if start_method != "fork" else None
        if tracker is not None:
            before = tracker._pid
            tracker.ensure_running()
            if tracker._pid is not None and tracker._pid != before:
                _tracker_pid = tracker._pid
        _live_groups += 1


def release_helpers() -> None:
    """A group has closed: if it was the last one, stop the tracker a group started."""
    global _live_groups, _tracker_pid
    with _helpers_lock:
        _live_groups -= 1
        if _live_groups > 0 or _tracker_pid is None:
            return
        pid, _tracker_pid = _tracker_pid, None
        tracker = _resource_tracker()
        with tracker._lock:
            if tracker._pid != pid or tracker._fd is None:
                return  # restarted by multiprocessing meanwhile: not the course's
            os.close(tracker._fd)  # end of file: it exits (nothing of the course is registered)
            tracker._fd = tracker._pid = None
    # It exits within milliseconds (a run shorter than its start-up waits for the rest of it).
    # Should a process someone else started meanwhile hold its pipe too, it ends after that
    # one: the thread goes on waiting and reaps it then, never leaving a zombie behind.
    reaper = threading.Thread(target=_reap, args=(pid,), name="ddl-reap-tracker", daemon=True)
    reaper.start()
    reaper.join(_TERMINATE_GRACE_S)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def watch_forkserver() -> None:
    """Make sure a thread reaps the running forkserver as soon as it ends."""
    server = getattr(_forkserver, "_forkserver", None) if _popen_forkserver is not None else None
    pid = getattr(server, "_forkserver_pid", None)
    if pid is None or not hasattr(server, "_lock"):
        return
    with _helpers_lock:
        if pid in _watched_servers:
            return
        _watched_servers.add(pid)
    threading.Thread(target=_reap_forkserver, args=(server, pid), name="ddl-reap-forkserver",
                     daemon=True).start()


def _reap_forkserver(server, pid: int) -> None:
    """Wait until forkserver ``pid`` has ended (SIGTERM at a kernel's shutdown, or any other
    death), then reap it and forget it as ``ForkServer.ensure_running`` does with a dead
    server: the next forkserver group starts a new one."""
    try:
        while True:
            if hasattr(os, "waitid"):
                os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # ended; not reaped yet
            else:  # pragma: no cover - macOS: no waitid
                time.sleep(0.1)
            with server._lock:
                if server._forkserver_pid != pid:
                    return  # multiprocessing found it dead first, and reaped it
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    continue
                os.close(server._forkserver_alive_fd)
                server._forkserver_address = server._forkserver_alive_fd = server._forkserver_pid = None
                return
    except ChildProcessError:  # reaped by someone else
        pass
    finally:
        with _helpers_lock:
            _watched_servers.discard(pid)
