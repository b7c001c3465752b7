"""Measuring run time the same way everywhere in the course.

Timings on a shared machine are noisy: :func:`measure` repeats a call and reports the
median (robust to a few slow outliers) with the spread, and never asserts anything.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from ._validate import check_int, check_positive

__all__ = ["Timing", "compare", "measure"]


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
        return f"ties (within {ratio - 1:.0%})"
    return f"{ratio:.2f}x {'faster' if time < reference else 'slower'}"
