"""Measuring run time the same way everywhere in the course.

Timings on a shared machine are noisy: :func:`measure` repeats a call and reports the
median (robust to a few slow outliers) with the spread, and never asserts anything.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import statistics
import sys
import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ._validate import check_int, check_positive
from .i18n import tr

__all__ = [
    "CpuTicks",
    "Timing",
    "available_cores",
    "blas_threads",
    "compare",
    "cpu_ticks",
    "current_blas_threads",
    "keep_freed_memory",
    "measure",
    "minor_faults",
    "pad",
    "pin_to_core",
]


@dataclass(frozen=True)
class Timing:
    """Wall-clock times of repeated calls, in seconds."""

    times: tuple[float, ...]

    @property
    def median(self) -> float:
        """Median time of one call."""
        return statistics.median(self.times)

    @property
    def best(self) -> float:
        """Fastest call."""
        return min(self.times)

    @property
    def spread(self) -> float:
        """(max - min) / median: how noisy the measurement was."""
        return (max(self.times) - min(self.times)) / self.median if self.median > 0 else 0.0

    def __repr__(self) -> str:
        return f"Timing(median={self.median:.4g} s, best={self.best:.4g} s, n={len(self.times)})"


def measure(fn: Callable[[], object], *, repeat: int = 5, warmup: int = 1, number: int = 1) -> Timing:
    """Time ``fn()``: ``warmup`` untimed calls, then ``repeat`` timed rounds.

    Each round calls ``fn`` ``number`` times and records the time per call.

    Examples
    --------
    >>> t = measure(lambda: sum(range(1000)), repeat=3)
    >>> len(t.times), t.median > 0
    (3, True)
    """
    repeat = check_int(repeat, "repeat", 1)
    warmup = check_int(warmup, "warmup", 0)
    number = check_int(number, "number", 1)
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return Timing(tuple(times))


def compare(time: float, reference: float, *, tie: float = 0.05) -> str:
    """Say how ``time`` compares with ``reference``: a tie within ``tie``, else the factor.

    Measured times on a shared machine vary by a few percent from run to run, so a
    difference below ``tie`` (relative, default 5%) is reported as a tie rather than as
    a winner.

    Parameters
    ----------
    time, reference : float
        Two measured durations, > 0, same unit.
    tie : float
        Relative difference still called a tie, >= 0.

    Examples
    --------
    >>> compare(0.80, 1.00)
    '1.25x faster'
    >>> compare(1.50, 1.00)
    '1.50x slower'
    >>> compare(1.03, 1.00)
    'ties (within 3%)'
    """
    time = check_positive(time, "time")
    reference = check_positive(reference, "reference")
    tie = check_positive(tie, "tie", allow_zero=True)
    ratio = max(time, reference) / min(time, reference)
    if ratio <= 1.0 + tie:
        return tr("ties (within {difference})", difference=f"{ratio - 1:.0%}")
    if time < reference:
        return tr("{ratio} faster", ratio=f"{ratio:.2f}x")
    return tr("{ratio} slower", ratio=f"{ratio:.2f}x")


def pad(text: str, width: int, align: str = ">") -> str:
    """``text`` padded with spaces to ``width`` columns on the screen, as ``f"{text:>{width}}"``
    does, but counting a Chinese character (East Asian wide or full-width) as two columns: the
    columns of a printed table stay aligned in the Chinese edition. Longer text is not cut.

    ``align``: ``">"`` (right), ``"<"`` (left) or ``"^"`` (centred).

    Examples
    --------
    >>> pad("time [s]", 10), pad("时间 [s]", 10), pad("N", 3, "<") + "|"
    ('  time [s]', '  时间 [s]', 'N  |')
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    width = check_int(width, "width", 0)
    if align not in ("<", ">", "^"):
        raise ValueError(f"align must be '<', '>' or '^', got {align!r}")
    wide = sum(unicodedata.east_asian_width(c) in "WF" for c in text)
    return f"{text:{align}{max(0, width - wide)}}"


# ------------------------------------------------------------ cores and BLAS threads
def available_cores() -> int:
    """Cores this process may run on (the CPU affinity mask where the OS has one).

    Containers and batch systems often allow fewer cores than ``os.cpu_count()`` reports.

    Examples
    --------
    >>> 1 <= available_cores() <= (os.cpu_count() or 1)
    True
    """
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


@functools.lru_cache(maxsize=1)
def _blas_controller():
    """threadpoolctl's handle on numpy's BLAS (created once: it scans the loaded libraries)."""
    import numpy  # noqa: F401  (loads the BLAS, so that threadpoolctl finds it)
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController().select(user_api="blas")


@contextlib.contextmanager
def blas_threads(n: int | None, *, name: str = "blas_threads") -> Iterator[None]:
    """Limit the BLAS thread pool of this process to ``n`` threads (None: leave it alone).

    ``name`` is the caller's parameter, named in the error for a bad ``n``.

    The one way the course sets BLAS threads: one thread per worker process avoids
    oversubscribing the cores, and timings of one core use one thread.

    Examples
    --------
    >>> with blas_threads(1):
    ...     current_blas_threads()
    1
    """
    if n is None:
        yield
        return
    n = check_int(n, name, 1)
    with _blas_controller().limit(limits=n):
        yield


def current_blas_threads() -> int:
    """Threads the BLAS libraries of this process may use now (the largest; 1 if none).

    Workers report it, so that tests can check the one-thread-per-worker rule.

    Examples
    --------
    >>> current_blas_threads() >= 1
    True
    """
    try:
        counts = [int(lib.num_threads) for lib in _blas_controller().lib_controllers]
    except Exception:  # noqa: BLE001 - a BLAS that threadpoolctl does not know
        return 1
    return max(counts, default=1)


def keep_freed_memory() -> bool:
    """Stop glibc from handing freed memory back to the OS after every step (Linux).

    A fresh process (spawn, forkserver) starts with glibc's default thresholds: a
    temporary array of a few MB is mapped with ``mmap`` and unmapped when freed, so
    every training step page-faults its temporaries in again (about 2,000 faults and
    20-25% of the step for the running example at batch 512, measured). A process
    forked from a kernel that has already freed big arrays has higher thresholds and
    does not pay this - which made fork look faster than spawn. Raising the mmap and
    trim thresholds keeps freed blocks for reuse. Returns False where it does not apply
    (not glibc).

    Blocks of 32 MiB or more (glibc's largest threshold) are still mapped and unmapped
    every time: the running example's hidden activations at batch 8,192 are exactly
    32 MiB (8192 x 1024 x 4 bytes), so such a step page-faults about 1,100 times, in the
    serial loop and in a worker alike (measured; :func:`minor_faults` counts them).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc only (musl has no mallopt)
        m_trim_threshold, m_mmap_threshold = -1, -3
        ok = libc.mallopt(m_mmap_threshold, 32 << 20) == 1  # 32 MB: glibc's maximum
        return libc.mallopt(m_trim_threshold, 128 << 20) == 1 and ok
    except (OSError, AttributeError):  # pragma: no cover - other C libraries
        return False


# ------------------------------------------------- counts that load cannot change
def minor_faults() -> int:
    """Minor page faults of this process so far (0 where the OS does not count them).

    A minor fault is the kernel mapping a fresh page on its first touch: a temporary array
    that is unmapped after every step (glibc's mmap threshold, :func:`keep_freed_memory`)
    pays one per page, every step. The count, unlike a time, does not change with the
    machine's load.

    Examples
    --------
    >>> before = minor_faults(); _ = bytearray(8 << 20); minor_faults() >= before
    True
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return 0
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


@dataclass(frozen=True)
class CpuTicks:
    """Clock ticks of every CPU since boot, from ``/proc/stat`` (Linux): what each CPU spent
    working (``busy``), idle, and ``steal`` (time a hypervisor ran another guest on the
    physical core this virtual CPU runs on: the guest's program did not advance)."""

    cpus: tuple[int, ...]
    busy: tuple[int, ...]
    idle: tuple[int, ...]
    steal: tuple[int, ...]

    def steal_since(self, earlier: CpuTicks) -> tuple[float, float]:
        """``(mean, max)`` over the CPUs of the steal share of their ticks since ``earlier``
        (NaN where nothing was counted)."""
        shares = []
        before = {c: (b, i, s) for c, b, i, s in zip(earlier.cpus, earlier.busy, earlier.idle, earlier.steal)}
        for c, b, i, s in zip(self.cpus, self.busy, self.idle, self.steal):
            if c in before:
                db, di, ds = b - before[c][0], i - before[c][1], s - before[c][2]
                if db + di + ds > 0:
                    shares.append(ds / (db + di + ds))
        if not shares:
            return math.nan, math.nan
        return sum(shares) / len(shares), max(shares)


def cpu_ticks() -> CpuTicks:
    """The per-CPU line of ``/proc/stat`` now (an empty :class:`CpuTicks` where there is none).

    Columns: user nice system idle iowait irq softirq steal (guest time is already in user).

    Examples
    --------
    >>> a = cpu_ticks(); b = cpu_ticks(); len(a.cpus) == len(b.cpus)
    True
    """
    cpus, busy, idle, steal = [], [], [], []
    try:
        with open("/proc/stat") as f:
            for line in f:
                name, *fields = line.split()
                if not (name.startswith("cpu") and name[3:].isdigit()):
                    continue
                v = [int(x) for x in fields[:8]] + [0] * max(0, 8 - len(fields))
                cpus.append(int(name[3:]))
                busy.append(v[0] + v[1] + v[2] + v[5] + v[6])
                idle.append(v[3] + v[4])
                steal.append(v[7])
    except OSError:
        pass
    return CpuTicks(tuple(cpus), tuple(busy), tuple(idle), tuple(steal))


def pin_to_core(index: int) -> int | None:
    """Pin this process to the ``index``-th core it may run on (modulo their number);
    return that core's number, or None where the OS has no affinity call (macOS, Windows).

    A pinned process is never moved between cores by the scheduler: its caches stay warm,
    and N pinned workers of a run sit on N different cores.
    """
    if not hasattr(os, "sched_setaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    core = cores[check_int(index, "index", 0) % len(cores)]
    os.sched_setaffinity(0, {core})
    return core
