"""Worker processes: the one place in the course that starts them.

Every trainer and experiment that runs on several processes (data, pipeline, hybrid and
tensor parallelism, the pool of the first speedup experiment, the torch engine) starts its workers
through :class:`ProcessGroup`, so that each gets the same guarantees:

* an exception in a worker is re-raised in the caller as :class:`WorkerError`, with the
  worker's own traceback;
* a worker that dies (``os._exit``, a signal, the out-of-memory killer) raises
  :class:`WorkerDied` naming its rank and the signal, at once;
* a hang (no progress for ``timeout`` seconds) raises :class:`WorkerTimeout`;
* on any error and on ``KeyboardInterrupt`` (the notebook's stop button) every worker is
  stopped (SIGTERM, then SIGKILL) and reaped. Workers ignore SIGINT: the parent decides.

Why starting a worker cannot block, and every wait has an end
-------------------------------------------------------------
Under spawn the parent writes each worker's pickled arguments into a pipe whose read end
it holds itself until the write returns: if the child dies before reading them and they
exceed the pipe's buffer (64 KiB on Linux, 16 KiB at first on macOS), the notebook
freezes. So a starting worker receives only shapes, seeds and shared-memory names
(:attr:`ProcessGroup.start_bytes`, refused above :data:`MAX_START_BYTES` before anything
starts); under forkserver a child killed before its arguments are written is reported as
:class:`WorkerDied` with its signal. The parent never waits without a limit (``timeout``,
``start_timeout``, small messages only in :meth:`ProcessGroup.send`, a grace period and
SIGKILL at clean-up); a worker's waits end by its own ``wait_timeout``, by the parent
stopping it, or by the parent's death (below).

Why a worker never outlives its parent
--------------------------------------
Whatever kills the parent (SIGKILL, a kernel restart, a crash), the operating system
closes every file descriptor the parent held. ``multiprocessing`` gives each child the
read end of a pipe whose write end only the parent holds (``parent_process().sentinel``,
under fork, forkserver and spawn alike, on Linux and macOS): when the parent dies, that
read end reports end-of-file. Every worker runs a small watcher thread blocked on it; when
it wakes, the parent is gone, so the watcher removes the run's shared-memory segments
(nobody else will) and ends the worker with ``os._exit`` - within milliseconds, even if
the worker is busy in a long computation or a blocked wait. JupyterLab's "Restart kernel"
sends SIGKILL to the kernel's whole process group, which would kill the workers before
they could clean up: so each worker moves into a process group of its own at start-up,
outlives the kernel by those milliseconds, cleans up and exits.

Why a kernel still shuts down at once after a run
-------------------------------------------------
At "Shut Down" or "Restart" ipykernel waits until the kernel's children have ended: the
engine leaves none that outlives SIGTERM or that nobody reaps
(:mod:`course_lib.parallel.engine.helpers`).

Synchronisation uses pipes only (:class:`course_lib.parallel.engine.launch.PipeBarrier`, and the
pipes a trainer creates):
``multiprocessing.Barrier`` keeps four named semaphores in ``/dev/shm`` under spawn and
forkserver, which a killed run would leave behind.

A worker's target must live in an importable module, never in a notebook, so that
``spawn`` and ``forkserver`` can find it (:func:`demo_worker` is one).

Examples
--------
>>> with ProcessGroup(demo_worker, 2, args=(3,), kwargs={"value": 10.0},
...                   start_method="fork", timeout=30) as group:
...     group.join()
[0.0, 10.0]
>>> with ProcessGroup(demo_worker, 2, args=(3, Fault("raise", rank=1, step=2)),
...                   start_method="fork") as group:
...     group.join()
Traceback (most recent call last):
...
course_lib.parallel.engine.errors.WorkerError: worker 1 raised FaultInjected: injected fault in worker 1 at step 2
<BLANKLINE>
--- traceback in worker 1 ---
...
>>> Fault("hang", rank=1, step=2)
Fault(kind='hang', rank=1, step=2)
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing as mp
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._validate import check_int, check_positive, check_type
from ...i18n import tr
from ...progress import ProgressBar
from ...timing import keep_freed_memory
from .errors import (
    Fault,
    FaultInjected,
    ProcessGroupError,
    RunStopped,
    WorkerDied,
    WorkerError,
    WorkerTimeout,
)
from .helpers import acquire_helpers, release_helpers, watch_forkserver
from .shm import SharedArray, SharedSpec, remove_stale_segments, unlink_segment

__all__ = [
    "PARENT_GONE_EXIT",
    "Fault",
    "FaultInjected",
    "ProcessGroup",
    "MAX_START_BYTES",
    "ProcessGroupError",
    "RunStopped",
    "WorkerContext",
    "WorkerDied",
    "WorkerError",
    "WorkerTimeout",
    "check_start_method",
    "default_start_method",
    "fastest_start_method",
    "demo_worker",
]

_POLL_S = 0.1  # how often the parent looks at the progress counters
#: Most bytes of a worker's pickled arguments or a message to it: inside every pipe buffer.
MAX_START_BYTES = 16 * 1024
_TERMINATE_GRACE_S = 2.0  # SIGTERM -> wait this long -> SIGKILL


# ------------------------------------------------------------------ start methods
def default_start_method() -> str:
    """The start method the course uses when none is given.

    ``forkserver`` on Linux (fork-safe: workers are forked from a clean server process,
    not from a kernel that runs threads; Python 3.14 made it the default too),
    ``spawn`` elsewhere (the default on macOS and Windows).
    """
    methods = mp.get_all_start_methods()
    if sys.platform.startswith("linux") and "forkserver" in methods:
        return "forkserver"
    return "spawn"


def fastest_start_method() -> str:
    """``fork`` where the platform has it (a worker starts in milliseconds, with the library as
    the parent holds it: what the scratch edition's checks run), else ``spawn``."""
    return "fork" if "fork" in mp.get_all_start_methods() else "spawn"


def check_start_method(start_method: str | None) -> str:
    """Validate ``start_method`` (None means :func:`default_start_method`)."""
    if start_method is None:
        return default_start_method()
    methods = mp.get_all_start_methods()
    if start_method not in methods:
        raise ValueError(f"start_method must be one of {methods} or None, got {start_method!r}")
    return start_method


def _check_importable(target: Callable, start_method: str) -> None:
    """spawn/forkserver re-import the target by name: reject what they cannot find."""
    if not callable(target):
        raise TypeError(f"target must be callable, got {type(target).__name__}")
    if start_method == "fork":
        return
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", "")
    main = sys.modules.get("__main__")
    interactive_main = module == "__main__" and not getattr(main, "__file__", None)
    if module is None or "<locals>" in qualname or "<lambda>" in qualname or interactive_main:
        raise ValueError(tr(
            "target {target} must be a module-level function of an importable module for start_method={method} "
            "(the worker re-imports it by name); functions defined in a notebook or inside another function "
            "cannot be found there", target=repr(qualname or target), method=repr(start_method)))


# ------------------------------------------------------------- what goes in a start
class _SizingPickler(mp.reduction.ForkingPickler):
    """Pickles as the start methods do, counting every pipe end as the small handle that
    spawn and forkserver send in its place (a file-descriptor number)."""

    def persistent_id(self, obj):
        if isinstance(obj, mp.connection.Connection):
            return obj.fileno()
        return None


def pickled_size(obj) -> int:
    """Bytes ``obj`` takes when pickled into a starting worker (pipe ends as handles).

    Examples
    --------
    >>> pickled_size(np.zeros(4096, np.float32)) > 16_000   # data: too big for a start
    True
    >>> pickled_size(SharedSpec("ddl_1_ab", (4096,), "<f4")) < 200   # its name: fine
    True
    """
    buffer = io.BytesIO()
    _SizingPickler(buffer).dump(obj)
    return buffer.tell()


try:  # sending file descriptors (forkserver) is POSIX only
    from multiprocessing import forkserver as _forkserver
    from multiprocessing import popen_forkserver as _popen_forkserver
except ImportError:  # pragma: no cover - Windows
    _popen_forkserver = None

if _popen_forkserver is not None:

    class _ForkServerPopen(_popen_forkserver.Popen):
        """forkserver's launch, surviving a child killed before its arguments are written
        (a broken pipe): the server reports the child's pid and exit status on the
        sentinel as usual, so ``join`` names its rank and signal."""

        def _launch(self, process_obj):
            try:
                super()._launch(process_obj)
            except BrokenPipeError:
                self.pid = _forkserver.read_signed(self.sentinel)

    class _ForkServerProcess(mp.context.ForkServerProcess):
        @staticmethod
        def _Popen(process_obj):
            return _ForkServerPopen(process_obj)


def _process_class(mp_context):
    """The context's Process class; under forkserver :class:`_ForkServerProcess`."""
    if mp_context.get_start_method() == "forkserver" and _popen_forkserver is not None:
        return _ForkServerProcess
    return mp_context.Process


# ------------------------------------------------------------------ worker side
@dataclass(frozen=True)
class WorkerContext:
    """What every worker receives as its first argument."""

    rank: int
    world_size: int
    timeout: float
    """The parent's timeout in seconds (see :attr:`wait_timeout` for waits in a worker)."""
    _counter_spec: SharedSpec | None = None
    _counters: Any = None
    _segments: tuple[str, ...] = ()
    """Shared-memory segments the worker removes if the parent dies first."""
    channel: Any = None
    """This worker's end of a two-way pipe to the parent (``ProcessGroup(channels=True)``)."""

    @property
    def wait_timeout(self) -> float:
        """Timeout for a blocking wait in a worker (a barrier, a receive).

        Longer than the parent's ``timeout``, so that the parent detects a hang first
        and names the hung worker; it only ends waits orphaned by a killed parent.
        """
        return 2.0 * self.timeout + 5.0

    def progress(self, value: int) -> None:
        """Report progress (e.g. steps completed); the parent watches it for hangs.

        A no-op outside a :class:`ProcessGroup` (e.g. a process started by torchrun).
        """
        if self._counters is not None:
            self._counters[0, self.rank] = value


#: Exit code of a worker that ended because its parent died.
PARENT_GONE_EXIT = 75


def _watch_parent(segments: Sequence[str]) -> None:
    """Wait (in a thread) until the parent process is gone; then clean up and exit.

    ``parent_process().sentinel`` is the read end of a pipe whose write end only the
    parent holds: the OS closes it when the parent dies, and the read end becomes
    ready. The run's shared-memory segments are removed here because nobody else
    will; ``os._exit`` then ends the worker at once, whatever its other threads do.
    """
    parent = mp.parent_process()
    if parent is None:  # pragma: no cover - not started by multiprocessing
        return
    mp.connection.wait([parent.sentinel])
    _exit_orphaned(segments)


def _exit_orphaned(segments: Sequence[str]) -> None:
    """The parent is gone: remove the run's segments and end this worker at once."""
    for name in segments:
        unlink_segment(name)
    os._exit(PARENT_GONE_EXIT)


def _parent_gone() -> bool:
    parent = mp.parent_process()
    return parent is not None and bool(mp.connection.wait([parent.sentinel], timeout=0))


def _bootstrap(target, wctx: WorkerContext, conn, args, kwargs) -> None:
    """Entry point of every worker process: run ``target``, send back result or error."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles interrupts
    if hasattr(os, "setpgid"):
        with contextlib.suppress(OSError):  # own process group: survive the kernel's killpg
            os.setpgid(0, 0)
    threading.Thread(target=_watch_parent, args=(wctx._segments,), name="ddl-watch-parent",
                     daemon=True).start()
    keep_freed_memory()
    try:
        with wctx._counter_spec.attach() as counters:
            object.__setattr__(wctx, "_counters", counters)
            counters[1, wctx.rank] = 1  # started: from now on the parent watches for hangs
            try:
                message = ("ok", target(wctx, *args, **kwargs))
            finally:
                object.__setattr__(wctx, "_counters", None)
                del counters
    except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
        message = _error_message(exc)
    if _parent_gone():  # e.g. the target ended on EOF from a dead parent before the watcher woke
        _exit_orphaned(wctx._segments)
    try:
        try:
            conn.send(message)
        except (BrokenPipeError, EOFError):  # the parent is gone: nobody to tell
            pass
        except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable result
            conn.send(_error_message(exc, prefix="could not send the result back: "))
    finally:
        conn.close()


def _error_message(exc: BaseException, prefix: str = "") -> tuple:
    tb = traceback.format_exc()
    try:
        original = pickle.dumps(exc)
        pickle.loads(original)
    except Exception:  # noqa: BLE001 - unpicklable exception: send the text only
        original = None
    return ("error", type(exc).__name__, prefix + str(exc), tb, original)


def demo_worker(wctx: WorkerContext, steps: int, fault: Fault | None = None, value: float = 1.0,
                result: Any = None):
    """A tiny worker for the tests and examples: ``steps`` steps, then ``rank * value``.

    Fires ``fault`` at its step, reports progress after every step, and returns
    ``result`` instead if one is given.
    """
    check_type(wctx, "wctx", WorkerContext, "a WorkerContext")
    steps = check_int(steps, "steps", 0)
    for step in range(steps):
        if fault is not None:
            fault.maybe_fire(wctx.rank, step)
        wctx.progress(step + 1)
    return wctx.rank * value if result is None else result


# ------------------------------------------------------------------ parent side
class ProcessGroup:
    """``world_size`` worker processes running ``target(wctx, *args, *rank_args[r], **kwargs)``.

    Parameters
    ----------
    target : callable
        Module-level function of an importable module; receives a
        :class:`WorkerContext` first. Its return value (picklable) is what
        :meth:`join` returns for that rank.
    world_size : int
        Number of processes, >= 1.
    args : tuple
        Positional arguments for every worker (picklable; multiprocessing objects such
        as a Barrier must come from :attr:`mp_context`).
    rank_args : sequence of tuples, optional
        Extra positional arguments per rank (``len == world_size``), after ``args``.
    kwargs : dict, optional
        Keyword arguments for every worker.
    start_method : {"fork", "forkserver", "spawn"} or None
        None: :func:`default_start_method`.
    timeout : float
        Seconds without progress (see :meth:`WorkerContext.progress`) or a finished
        worker after which :meth:`join` gives up with :class:`WorkerTimeout`, counted
        from the moment every worker has started.
    start_timeout : float or None
        Seconds the workers may take to start (a new interpreter importing numpy takes
        0.3 s on a quiet machine, seconds on a busy one); then :class:`WorkerTimeout`.
        None: ``max(timeout, 120)``.
    name : str
        Process name prefix (shown by ``ps``).
    preload : sequence of str
        Modules the forkserver imports once when it starts (the first forkserver group
        of a kernel decides), so that each worker starts in milliseconds instead of
        re-importing numpy. Ignored for fork and spawn.
    shared : sequence of SharedArray
        The run's shared arrays: if the parent dies, the workers remove them from
        ``/dev/shm`` (the parent still closes them as usual).
    channels : bool
        Give every worker a two-way pipe to the parent (:attr:`WorkerContext.channel`;
        the parent uses :meth:`send` and :meth:`recv`): for workers that serve several
        requests, like a pool.

    Use as a context manager: ``__enter__`` starts the workers, ``__exit__`` stops
    whatever still runs (also after an error or KeyboardInterrupt).
    """

    def __init__(
        self,
        target: Callable,
        world_size: int,
        *,
        args: tuple = (),
        rank_args: Sequence[tuple] | None = None,
        kwargs: dict | None = None,
        start_method: str | None = None,
        timeout: float = 60.0,
        name: str = "ddl-worker",
        preload: Sequence[str] = ("course_lib.parallel.engine.workers",),
        shared: Sequence[SharedArray] = (),
        channels: bool = False,
        start_timeout: float | None = None,
    ):
        self.world_size = check_int(world_size, "world_size", 1)
        self.start_method = check_start_method(start_method)
        _check_importable(target, self.start_method)
        self.timeout = check_positive(timeout, "timeout")
        self.start_timeout = max(self.timeout, 120.0) if start_timeout is None else check_positive(
            start_timeout, "start_timeout")
        if rank_args is not None and len(rank_args) != self.world_size:
            raise ValueError(
                f"rank_args must have one tuple per worker ({self.world_size}), got {len(rank_args)}"
            )
        self.target, self.args, self.kwargs = target, tuple(args), dict(kwargs or {})
        self.rank_args = [tuple(a) for a in rank_args] if rank_args is not None else [()] * self.world_size
        self.name = name
        self.preload = [str(m) for m in preload]
        for a in shared:
            if not isinstance(a, SharedArray):
                raise TypeError(f"shared must hold SharedArray objects, got {type(a).__name__}")
        self.shared = tuple(shared)
        self.channels = bool(channels)
        self._channels: list = []
        self.start_bytes = self._measure_start_bytes()
        """Bytes of each worker's pickled arguments (None where they cannot be pickled,
        which only ``fork`` allows): at most :data:`MAX_START_BYTES` each."""
        self.mp_context = mp.get_context(self.start_method)
        """The multiprocessing context of the workers: create Barriers, Pipes here."""
        self._counters: SharedArray | None = None
        self._procs: list = []
        self._conns: list = []
        self._started = False
        self._holds_helpers = False
        self.start_time: float | None = None

    def _measure_start_bytes(self) -> list[int | None]:
        sizes: list[int | None] = []
        for rank in range(self.world_size):
            try:
                size = pickled_size((self.target, self.args + self.rank_args[rank], self.kwargs))
            except Exception:  # noqa: BLE001 - fork copies instead of pickling
                if self.start_method != "fork":
                    raise
                size = None
            if size is not None and size > MAX_START_BYTES:
                raise ValueError(
                    f"the arguments of worker {rank} (args, rank_args[{rank}], kwargs) pickle to "
                    f"{size:,} bytes; at most MAX_START_BYTES = {MAX_START_BYTES:,} may go into a "
                    "worker at start (a worker killed while reading more would block the start): "
                    "pass arrays as SharedArray specs and derive plans in the worker"
                )
            sizes.append(size)
        return sizes

    # -------------------------------------------------------------- lifecycle
    @property
    def pids(self) -> list[int]:
        """Process ids of the started workers."""
        return [p.pid for p in self._procs if p.pid is not None]

    @property
    def progress(self) -> list[int]:
        """The workers' current progress counters."""
        if self._counters is None:
            return [0] * self.world_size
        return self._counters.array[0].tolist()

    @property
    def started(self) -> list[bool]:
        """Whether each worker has reached its target (its start-up is over)."""
        if self._counters is None:
            return [False] * self.world_size
        return [bool(v) for v in self._counters.array[1]]

    def start(self) -> ProcessGroup:
        """Start the workers (once)."""
        if self._started:
            raise RuntimeError("the process group was already started")
        self._started = True
        self.start_time = time.perf_counter()
        remove_stale_segments()
        acquire_helpers(self.start_method)
        self._holds_helpers = True
        try:
            if self.start_method == "forkserver" and self.preload:
                self.mp_context.set_forkserver_preload(self.preload)
            self._counters = SharedArray((2, self.world_size), np.int64)  # progress, started
            segments = tuple(a.name for a in (*self.shared, self._counters) if a._shm is not None)
            for rank in range(self.world_size):
                recv_end, send_end = self.mp_context.Pipe(duplex=False)
                channel = None
                if self.channels:
                    parent_end, channel = self.mp_context.Pipe(duplex=True)
                    self._channels.append(parent_end)
                wctx = WorkerContext(rank, self.world_size, self.timeout, self._counters.spec,
                                     _segments=segments, channel=channel)
                proc = _process_class(self.mp_context)(
                    target=_bootstrap,
                    args=(self.target, wctx, send_end, self.args + self.rank_args[rank], self.kwargs),
                    name=f"{self.name}-{rank}",
                    daemon=True,
                )
                self._conns.append(recv_end)
                try:
                    proc.start()
                finally:
                    send_end.close()  # the child holds its own copy
                    if channel is not None:
                        channel.close()
                self._procs.append(proc)
        except BaseException:
            self.close()
            raise
        finally:
            if self.start_method == "forkserver":
                watch_forkserver()
        return self

    def join(self, *, progress_total: int | None = None, progress_label: str = "",
             progress_display: bool | None = False) -> list:
        """Wait for every worker and return their results, ordered by rank.

        The group is closed afterwards (every worker reaped, the shared progress
        counters unlinked), whether the workers succeeded or not.

        Parameters
        ----------
        progress_total : int, optional
            Final value of the progress counters (for the progress bar).
        progress_label : str
            Text beside the progress bar.
        progress_display : bool or None
            False: no bar; True: always; None: only in a notebook and only once the
            run has taken longer than about 1.5 s.

        Raises
        ------
        WorkerError, WorkerDied, WorkerTimeout
            After stopping every worker.
        """
        if not self._started:
            raise RuntimeError("start() the process group before join()")
        n = self.world_size
        results: list = [None] * n
        pending = set(range(n))
        last_seen = self.progress
        last_change = time.monotonic()
        starting = True  # start-up has its own limit: a slow import is not a hang
        bar = ProgressBar(progress_total, progress_label, progress_display)
        try:
            while pending:
                waitables = {}
                for r in pending:
                    waitables[self._conns[r]] = r
                    waitables[self._procs[r].sentinel] = r
                ready = mp.connection.wait(list(waitables), timeout=_POLL_S)
                for obj in ready:
                    r = waitables[obj]
                    if r not in pending:
                        continue
                    conn = self._conns[r]
                    if obj is conn or conn.poll():
                        results[r] = self._receive(r)
                        pending.discard(r)
                        last_change = time.monotonic()
                    else:  # process ended and nothing is in the pipe
                        self._procs[r].join(1.0)
                        raise WorkerDied(r, self._procs[r].exitcode)
                now_seen = self.progress
                # Past a limit, look at the workers once more before giving up: the parent
                # itself may have been held up (a loaded machine) between its last look and
                # the clock, while they started, progressed or sent their result.
                if starting:
                    late = [r for r, ok in enumerate(self.started) if not ok and r in pending]
                    if not late:
                        starting, last_change = False, time.monotonic()
                    elif time.perf_counter() - self.start_time > self.start_timeout:
                        late = [r for r, ok in enumerate(self.started) if not ok and r in pending]
                        if late and not mp.connection.wait(list(waitables), timeout=0):
                            raise WorkerTimeout(self.start_timeout, self.progress, [False] * n, starting=late)
                    bar.tick()
                    continue
                if now_seen != last_seen:
                    last_seen, last_change = now_seen, time.monotonic()
                    bar.update(min(now_seen))
                elif time.monotonic() - last_change > self.timeout:
                    if self.progress == now_seen and not mp.connection.wait(list(waitables), timeout=0):
                        raise WorkerTimeout(self.timeout, now_seen, [r not in pending for r in range(n)])
                    continue  # something happened meanwhile: the next round takes it in
                bar.tick()
            bar.update(progress_total if progress_total is not None else min(self.progress))
            bar.finish(ok=True)
            return results
        except KeyboardInterrupt as stop:  # the stop button: one line, once every worker has ended
            bar.finish(ok=False)
            if isinstance(stop, RunStopped):
                raise
            raise RunStopped() from stop
        except BaseException:
            bar.finish(ok=False)
            raise
        finally:
            self.close()

    def send(self, rank: int, message) -> None:
        """Send ``message`` (picklable) to worker ``rank``'s channel (``channels=True``).

        Only small messages (at most :data:`MAX_START_BYTES` pickled, else ValueError):
        they fit the pipe's buffer, so the send returns even if the worker never reads
        it (hung or dead). Send data through shared memory and a short note here.
        """
        size = pickled_size(message)
        if size > MAX_START_BYTES:
            raise ValueError(
                f"message must pickle to at most MAX_START_BYTES = {MAX_START_BYTES:,} bytes, got "
                f"{size:,}: send arrays through a SharedArray and only a short note on the channel"
            )
        try:
            self._channels[rank].send(message)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self._procs[rank].join(1.0)
            raise WorkerDied(rank, self._procs[rank].exitcode) from None

    def recv(self, rank: int):
        """The next message from worker ``rank``'s channel (``channels=True``).

        Raises :class:`WorkerError` if the worker raised instead, :class:`WorkerDied` if
        it died, :class:`WorkerTimeout` if nothing came for ``timeout`` seconds. The
        caller closes the group afterwards (use it as a context manager).
        """
        channel, conn, proc = self._channels[rank], self._conns[rank], self._procs[rank]
        ready = mp.connection.wait([channel, conn, proc.sentinel], timeout=self.timeout)
        if channel in ready:
            with contextlib.suppress(EOFError, OSError):
                return channel.recv()
        if conn in ready or conn.poll():
            self._receive(rank)  # raises the worker's error
            raise ProcessGroupError(f"worker {rank} returned instead of answering")
        if not ready:
            raise WorkerTimeout(self.timeout, self.progress, [False] * self.world_size)
        proc.join(1.0)
        raise WorkerDied(rank, proc.exitcode)

    def _receive(self, rank: int):
        try:
            message = self._conns[rank].recv()
        except (EOFError, OSError):
            self._procs[rank].join(1.0)
            raise WorkerDied(rank, self._procs[rank].exitcode) from None
        if message[0] == "ok":
            return message[1]
        _, exc_type, text, tb, original = message
        exc = None
        if original is not None:
            try:
                exc = pickle.loads(original)
            except Exception:  # noqa: BLE001 - class not importable here
                exc = None
        error = WorkerError(rank, exc_type, text, tb, exc)
        if exc is not None:
            raise error from exc
        raise error

    def close(self) -> None:
        """Stop every worker still running (SIGTERM, then SIGKILL) and reap it; stop the
        resource tracker if this group's start started it and no other group runs. Idempotent."""
        procs = [p for p in self._procs if p.pid is not None]
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        deadline = time.monotonic() + _TERMINATE_GRACE_S
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))
        for proc in procs:
            if proc.is_alive():  # pragma: no cover - ignored SIGTERM
                proc.kill()
                proc.join(5.0)
        for conn in self._conns + self._channels:
            conn.close()
        for proc in procs:
            if not proc.is_alive():
                proc.close()
        self._procs, self._conns, self._channels = [], [], []
        if self._counters is not None:
            self._counters.close()
            self._counters = None
        if self._holds_helpers:
            self._holds_helpers = False
            release_helpers()

    def __enter__(self) -> ProcessGroup:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"ProcessGroup({getattr(self.target, '__qualname__', self.target)}, "
            f"world_size={self.world_size}, start_method={self.start_method!r})"
        )
