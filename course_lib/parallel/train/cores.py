"""Are the cores free? A check before every measured speedup: busy loops side by side.

A speedup measured while other programs run is not the machine's: :func:`check_cores` runs
one busy loop per core side by side, then one alone, and compares (its processes are a
:class:`~course_lib.parallel.engine.workers.ProcessGroup`, like every run's). Its verdict,
:class:`CoreCheck`, says whether the numbers measured now are this machine's.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass

from ..._validate import check_int, check_positive
from ...timing import available_cores
from ..engine.workers import ProcessGroup

__all__ = ["CoreCheck", "check_cores"]


def _busy_worker(wctx, spins: int) -> float:
    """Spin a fixed pure-Python loop; return its own seconds (start-up not counted)."""
    t0 = time.perf_counter()
    total = 0
    for i in range(spins):
        total += i & 7
    return time.perf_counter() - t0


@dataclass(frozen=True)
class CoreCheck:
    """Whether this machine's cores are free to measure speedups on (:func:`check_cores`).

    Attributes
    ----------
    cores : int
        Cores this process may use.
    load : float
        The one-minute load average before the check (NaN where the OS has none).
    slowdown : float
        Time of one busy loop when ``cores`` of them run side by side, over its time
        alone: about 1 when every core is free, about 2 when half the machine is taken.
    """

    cores: int
    load: float
    slowdown: float

    #: Most slowdown of loops side by side, and most load per core, of a machine whose
    #: cores are free (the load is a one-minute average: it also holds this notebook's own
    #: last minute, so only a full core's worth per core counts as other work).
    MAX_SLOWDOWN = 1.25
    MAX_LOAD_PER_CORE = 1.0

    @property
    def free(self) -> bool:
        """True when the speedups measured now are this machine's, not a shared one's."""
        quiet_load = math.isnan(self.load) or self.load < self.MAX_LOAD_PER_CORE * self.cores
        return self.slowdown <= self.MAX_SLOWDOWN and quiet_load

    def __str__(self) -> str:
        seen = (f"{self.cores} busy loops side by side took {self.slowdown:.2f}x the time of one alone; "
                f"load average {self.load:.2f}")
        if self.free:
            return f"your {self.cores} cores are free ({seen}): the speedups below are your machine's."
        return (f"your {self.cores} cores were shared with other work ({seen}): the speedups below "
                "are not your machine's. Close other programs and run the cell again.")


def check_cores(seconds: float = 0.2, *, rounds: int = 3, start_method: str | None = None) -> CoreCheck:
    """Are the cores free? Busy loops of about ``seconds`` each, one per core side by side,
    then one alone (processes of :class:`~course_lib.parallel.engine.workers.ProcessGroup`); the
    slowdown is the median over ``rounds`` rounds (1..20).

    Examples
    --------
    >>> check = check_cores(0.05, rounds=1)
    >>> check.cores >= 1 and check.slowdown > 0
    True
    """
    seconds = check_positive(seconds, "seconds")
    rounds = check_int(rounds, "rounds", 1, 20)
    cores = available_cores()
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - Windows
        load = float("nan")
    spins = 200_000
    t0 = time.perf_counter()
    _busy_worker(None, spins)
    spins = max(10_000, int(spins * seconds / max(time.perf_counter() - t0, 1e-6)))

    def run(n: int) -> float:
        with ProcessGroup(_busy_worker, n, args=(spins,), start_method=start_method, timeout=60,
                          name="ddl-busy") as group:
            return statistics.median(group.join())

    ratios = [run(cores) / run(1) for _ in range(rounds)]  # a host's jitter: the median of rounds
    return CoreCheck(cores, float(load), statistics.median(ratios))
