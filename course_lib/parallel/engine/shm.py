"""Shared arrays with a guaranteed clean-up: the memory the workers of a run share.

:class:`SharedArray` is a numpy array in a named ``multiprocessing.shared_memory``
segment, ``/dev/shm/ddl_<creator pid>_<random>`` on Linux. The creator (the parent) owns
it and removes it in :meth:`SharedArray.close` (use ``with``: also on error); workers map it
with ``spec.attach()`` and never remove it - unless the parent died, see
:mod:`course_lib.parallel.engine.workers`. :func:`remove_stale_segments` and :func:`find_leftovers`
deal with what a killed process could not remove.

The course's segments stay out of ``multiprocessing``'s resource tracker: the three rules above
already remove every one of them, and registering a segment starts the tracker, a process
that ignores SIGTERM and so held every Jupyter kernel that had used shared memory for 2.5 s
at "Shut Down" or "Restart" (ipykernel ends a kernel's children with SIGTERM and waits for
them; the server kills the kernel at half of its ``shutdown_wait_time``). See :func:`_open`.

Examples
--------
>>> with SharedArray((2, 3), "float32") as shared:
...     shared.array[:] = 1.0
...     with shared.spec.attach() as view:   # what a worker does
...         float(view.sum())
6.0
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import sys
import threading
from collections.abc import Iterator
from multiprocessing import resource_tracker, shared_memory
from typing import NamedTuple

import numpy as np

from ..._validate import check_int

__all__ = [
    "SHM_PREFIX",
    "Leftovers",
    "SharedArray",
    "SharedSpec",
    "find_leftovers",
    "remove_stale_segments",
    "unlink_segment",
]

#: Prefix of every shared-memory segment the course creates: ``ddl_<pid>_<random>``.
SHM_PREFIX = "ddl_"


_PATCH_LOCK = threading.Lock()  # one temporary replacement of resource_tracker.register at a time


def _new_patch_lock() -> None:
    """In a forked child (a worker under fork): a lock held by another thread of the parent
    at the fork would stay held forever."""
    global _PATCH_LOCK
    _PATCH_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_patch_lock)


def _open(name: str, create: bool = False, size: int = 0) -> shared_memory.SharedMemory:
    """``SharedMemory(name, create, size)`` that the resource tracker never hears of.

    Python 3.13 has ``track=False`` for this. Before, ``SharedMemory.__init__`` always calls
    ``resource_tracker.register``, which starts the tracker process (a child of the kernel that
    ignores SIGTERM) if it does not run yet: for the duration of that one call, ``register``
    is replaced by a function that drops exactly this segment's registration and passes any
    other (another thread's) on to the real one.
    """
    if sys.version_info >= (3, 13):  # pragma: no cover - newer Pythons
        return shared_memory.SharedMemory(name=name, create=create, size=size, track=False)
    if os.name != "posix":  # pragma: no cover - Windows: no resource tracker
        return shared_memory.SharedMemory(name=name, create=create, size=size)
    real = resource_tracker.register

    def register(resource: str, rtype: str) -> None:
        if not (rtype == "shared_memory" and resource.lstrip("/") == name):
            real(resource, rtype)

    with _PATCH_LOCK:
        resource_tracker.register = register
        try:
            return shared_memory.SharedMemory(name=name, create=create, size=size)
        finally:
            resource_tracker.register = real


def _unlink(name: str) -> None:
    """Remove segment ``name`` from ``/dev/shm`` (FileNotFoundError if gone).

    What ``SharedMemory.unlink()`` does, without its message to the resource tracker (which
    would start it before Python 3.13): the segment was never registered (:func:`_open`).
    """
    if os.name == "posix":
        import _posixshmem  # the module SharedMemory itself uses

        _posixshmem.shm_unlink("/" + name)


def _release(shm: shared_memory.SharedMemory) -> None:
    """Close a segment's file descriptor; unmap it when the last array using it dies.

    ``SharedMemory.close()`` unmaps at once, and numpy does not hold a buffer export
    on the memory it wraps: an array still alive then points to unmapped memory and
    the process crashes (segmentation fault) on its next access. Dropping our
    references instead lets reference counting unmap the segment exactly when the
    last view of it goes away.
    """
    buf, mapping = shm._buf, shm._mmap
    shm._buf = shm._mmap = None
    del buf, mapping  # unmapped here unless arrays still use it
    shm.close()  # now only closes the file descriptor


class SharedSpec(NamedTuple):
    """A picklable handle of a :class:`SharedArray` (what a worker receives)."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @contextlib.contextmanager
    def attach(self) -> Iterator[np.ndarray]:
        """Map the segment in this process and yield it as an array (no copy).

        On exit the mapping is released (unmapped once no view of the array is left).
        A worker never unlinks: the creator does.
        """
        shm = _open(self.name)
        array = np.ndarray(self.shape, dtype=np.dtype(self.dtype), buffer=shm.buf)
        try:
            yield array
        finally:
            del array
            _release(shm)


class SharedArray:
    """A numpy array in a new shared-memory segment, unlinked by :meth:`close`.

    Parameters
    ----------
    shape : int or tuple of int
    dtype : numpy dtype
    init : array_like, optional
        Initial content (broadcast to ``shape``); otherwise zeros.

    Use it as a context manager (or call :meth:`close` in ``finally``): the segment is
    removed from ``/dev/shm`` even if views of :attr:`array` are still alive; its memory
    is unmapped when the last of them goes away (never while one can still read it).
    """

    def __init__(self, shape, dtype, init=None):
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        shape = tuple(check_int(s, "shape", 0) for s in shape)
        dtype = np.dtype(dtype)
        nbytes = max(1, math.prod(shape) * dtype.itemsize)
        name = f"{SHM_PREFIX}{os.getpid()}_{secrets.token_hex(6)}"
        self._shm = _open(name, create=True, size=nbytes)
        self.array = np.ndarray(shape, dtype=dtype, buffer=self._shm.buf)
        if init is None:
            self.array.fill(0)
        else:
            self.array[...] = init
        self.spec = SharedSpec(name, shape, dtype.str)

    @property
    def name(self) -> str:
        """Name of the segment (``/dev/shm/<name>`` on Linux)."""
        return self.spec.name

    def close(self) -> None:
        """Unlink the segment, then unmap it (idempotent)."""
        shm, self._shm = self._shm, None
        if shm is None:
            return
        self.array = None
        try:
            _unlink(shm.name)
        except FileNotFoundError:  # pragma: no cover - already removed
            pass
        _release(shm)

    def __enter__(self) -> SharedArray:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._shm is None else "open"
        return f"SharedArray({self.spec.name!r}, shape={self.spec.shape}, dtype={self.spec.dtype}, {state})"


def remove_stale_segments() -> list[str]:
    """Unlink ``/dev/shm/ddl_<pid>_*`` segments whose creating process no longer exists.

    A process killed with SIGKILL (a kernel restart kills the kernel's whole process
    group) cannot unlink its segments, and no resource tracker does it for the course. Every
    :class:`ProcessGroup` calls this when it starts, so such leftovers disappear with
    the next run. Segments of living processes are never touched. Returns the names
    removed (always empty where ``/dev/shm`` does not exist).

    Examples
    --------
    >>> isinstance(remove_stale_segments(), list)
    True
    """
    if not os.path.isdir("/dev/shm"):  # pragma: no cover - not Linux
        return []
    removed = []
    for entry in os.listdir("/dev/shm"):
        if not entry.startswith(SHM_PREFIX):
            continue
        pid_text = entry[len(SHM_PREFIX):].split("_", 1)[0]
        if not pid_text.isdigit() or _alive(int(pid_text)):
            continue
        try:
            os.unlink(os.path.join("/dev/shm", entry))
            removed.append(entry)
        except OSError:  # pragma: no cover - removed concurrently, or not ours
            pass
    return removed


class Leftovers(NamedTuple):
    """What earlier runs left on this machine (see :func:`find_leftovers`)."""

    orphans: tuple[int, ...]
    """Process ids of workers whose parent has died (they map a segment of a dead creator)."""
    segments: tuple[str, ...]
    """``/dev/shm`` segments of the course whose creating process no longer exists."""


def find_leftovers() -> Leftovers:
    """Orphaned workers and stale shared-memory segments of the course (Linux; else empty).

    Every worker maps its run's ``ddl_<parent pid>_*`` segments, so a process that maps a
    segment whose creator is dead is an orphaned worker (its watcher should have ended it
    within milliseconds: one found here is a bug or a machine under great load). What
    :func:`remove_stale_segments` would remove is reported as ``segments``.

    Examples
    --------
    >>> isinstance(find_leftovers().orphans, tuple)
    True
    """
    if not (os.path.isdir("/proc/self") and os.path.isdir("/dev/shm")):  # pragma: no cover
        return Leftovers((), ())
    orphans = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/maps") as f:
                names = {line.split("/dev/shm/", 1)[1].split()[0] for line in f if "/dev/shm/" + SHM_PREFIX in line}
        except OSError:  # gone, or another user's process
            continue
        creators = {n[len(SHM_PREFIX):].split("_", 1)[0] for n in names}
        if any(c.isdigit() and not _alive(int(c)) for c in creators):
            orphans.append(int(entry))
    segments = []
    for entry in os.listdir("/dev/shm"):
        pid_text = entry[len(SHM_PREFIX):].split("_", 1)[0]
        if entry.startswith(SHM_PREFIX) and pid_text.isdigit() and not _alive(int(pid_text)):
            segments.append(entry)
    return Leftovers(tuple(sorted(orphans)), tuple(sorted(segments)))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid <= 2**22  # exists (another user) / impossible pid
    return True


def unlink_segment(name: str) -> None:
    """Remove the segment ``name`` from ``/dev/shm``; ignore it if gone (or not ours to remove)."""
    with contextlib.suppress(OSError):  # FileNotFoundError: gone; PermissionError: another user's
        _unlink(name)
