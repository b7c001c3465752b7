"""Exercises of chapter 02 (scaling laws). Expected values come from course_lib.scaling."""

from __future__ import annotations

from ..datasets import lamb_scaling_table
from ..scaling import amdahl, amdahl_limit, devices_needed, efficiency, gustafson
from . import Result, check, check_count

__all__ = [
    "ex1_limit",
    "ex2_speedup",
    "ex3_devices",
    "ex4_gustafson",
    "ex5_lamb_efficiency",
    "ex6_which_law",
]


def ex1_limit(answer) -> Result:
    """Largest speedup of a program whose serial part is 5% of its run time."""
    p = 0.95
    return check(
        answer,
        amdahl_limit(p),
        name="largest speedup",
        hint="let N grow without bound in S = 1/((1-p) + p/N).",
        mistakes={
            amdahl_limit(p) - 1: "That is 1/(1-p) - 1. With unlimited devices the parallel part "
            "takes no time and only the serial 5% remains, so S = 1/0.05."
        },
    )


def ex2_speedup(answer) -> Result:
    """Speedup of the p = 0.9 program on N = 16 devices."""
    return check(
        answer,
        amdahl(0.9, 16),
        name="speedup on 16 devices",
        hint="S = 1/((1-p) + p/N) with p = 0.9 and N = 16.",
        mistakes={gustafson(0.9, 16): "That is Gustafson's scaled speedup; the problem here is fixed."},
    )


def ex3_devices(answer) -> Result:
    """Fewest devices that give a speedup of 12 when p = 0.95."""
    return check_count(
        answer,
        devices_needed(0.95, 12),
        name="devices needed",
        unit="devices",
        hint="solve 1/((1-p) + p/N) >= 12 for N and round UP to a whole device.",
    )


def ex4_gustafson(answer) -> Result:
    """Scaled speedup with p = 0.9 (of the parallel run) on N = 64 devices."""
    p, n = 0.9, 64
    return check(
        answer,
        gustafson(p, n),
        rtol=1e-3,  # p*N alone is only 0.1 (0.17%) below the answer
        name="scaled speedup",
        hint="S = (1-p) + p*N: the serial part stays, the parallel part grows with N.",
        mistakes={
            amdahl(p, n): "That is Amdahl's speedup of a fixed problem.",
            p * n: "Serial part forgotten: p*N is the parallel part alone. The serial part "
            "(1-p) still runs once on the scaled problem: S = (1-p) + p*N.",
        },
    )


def ex5_lamb_efficiency(answer) -> Result:
    """Parallel efficiency of the 1,024-chip LAMB run relative to the 16-chip run."""
    table = lamb_scaling_table()
    t, chips = table["time_minutes"], table["devices"]
    speedup = t[0] / t[-1]
    n = chips[-1] / chips[0]
    return check(
        answer,
        efficiency(speedup, n),
        name="efficiency at 1,024 chips",
        hint="speedup = T(16 chips) / T(1,024 chips); efficiency = speedup / (1,024 / 16).",
        mistakes={speedup / chips[-1]: "Divide by the 64x increase in chips, not by 1,024."},
    )


def ex6_which_law(answer) -> Result:
    """Which law describes training with a fixed per-device batch as devices are added?"""
    return check(
        answer,
        "Gustafson",
        name="law",
        hint="the global batch - the work of one step - grows with the number of devices. "
        "Answer 'Amdahl' or 'Gustafson'.",
    )
