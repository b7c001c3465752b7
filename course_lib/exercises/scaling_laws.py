"""Exercises of chapter 02 (scaling laws). Expected values come from course_lib.scaling.

The givens of each exercise are module constants, so the notebook can print them; none of
them is a case the chapter has already printed the answer of.
"""

from __future__ import annotations

import re

from ..datasets import lamb_scaling_table
from ..i18n import tr
from ..scaling import amdahl, amdahl_limit, devices_needed, efficiency, gustafson
from . import Result, check, check_count

__all__ = [
    "EX1_LIMIT",
    "EX2_SPEEDUP",
    "EX3_DEVICES",
    "EX4_GUSTAFSON",
    "EX5_LAMB",
    "EX6_ARCHIVE",
    "ex1_limit",
    "ex2_speedup",
    "ex3_devices",
    "ex4_gustafson",
    "ex5_lamb_efficiency",
    "ex6_which_law",
]

#: Givens of :func:`ex1_limit`: the serial share of the run time.
EX1_LIMIT = {"serial": 0.03}
#: Givens of :func:`ex2_speedup`: Amdahl's parallel fraction and the devices.
EX2_SPEEDUP = {"p": 0.8, "devices": 12}
#: Givens of :func:`ex3_devices`: the parallel fraction and the speedup to reach.
EX3_DEVICES = {"p": 0.95, "target": 12}
#: Givens of :func:`ex4_gustafson`: Gustafson's parallel fraction (of the parallel run) and the devices.
EX4_GUSTAFSON = {"p": 0.8, "devices": 48}
#: Givens of :func:`ex5_lamb_efficiency`: a run of the LAMB table and the run it is compared with (chips).
EX5_LAMB = {"devices": 1024, "baseline": 128}
#: Givens of :func:`ex6_which_law`: a fixed archive of images classified with a fixed batch per
#: GPU on more and more GPUs (section 4's strong-scaled job, weakly scaled steps, in inference).
EX6_ARCHIVE = {"images": 10_000_000, "batch_per_gpu": 256, "gpus": (8, 64)}


def ex1_limit(answer) -> Result:
    """Largest speedup of a program whose serial part is :data:`EX1_LIMIT` of its run time."""
    serial = EX1_LIMIT["serial"]
    p = 1 - serial
    return check(
        answer,
        amdahl_limit(p),
        name=tr("largest speedup"),
        hint=tr("let N grow without bound in S = 1/((1-p) + p/N)."),
        mistakes={
            amdahl_limit(p) - 1: tr("That is 1/(1-p) - 1. With unlimited devices the parallel part "
                                    "takes no time and only the serial {share} remains, so S = 1/{serial}.",
                                    share=f"{serial:.0%}", serial=f"{serial:g}")
        },
    )


def ex2_speedup(answer) -> Result:
    """Speedup of the program of :data:`EX2_SPEEDUP` (Amdahl's p) on its N devices."""
    p, n = EX2_SPEEDUP["p"], EX2_SPEEDUP["devices"]
    return check(
        answer,
        amdahl(p, n),
        name=tr("speedup on {n} devices", n=n),
        hint=tr("S = 1/((1-p) + p/N) with p = {p} and N = {n}.", p=f"{p:g}", n=n),
        mistakes={gustafson(p, n): tr("That is Gustafson's scaled speedup; the problem here is fixed."),
                  amdahl_limit(p): tr("That is the limit 1/(1-p) for unlimited devices; put in N.")},
    )


def ex3_devices(answer) -> Result:
    """Fewest devices that give the speedup of :data:`EX3_DEVICES` at its p."""
    p, target = EX3_DEVICES["p"], EX3_DEVICES["target"]
    return check_count(
        answer,
        devices_needed(p, target),
        name=tr("devices needed"),
        unit="devices",
        hint=tr("solve 1/((1-p) + p/N) >= {target} for N and round UP to a whole device.", target=f"{target:g}"),
    )


def ex4_gustafson(answer) -> Result:
    """Scaled speedup with :data:`EX4_GUSTAFSON` (p of the parallel run, N devices)."""
    p, n = EX4_GUSTAFSON["p"], EX4_GUSTAFSON["devices"]
    return check(
        answer,
        gustafson(p, n),
        rtol=1e-3,  # p*N alone is only (1-p) below the answer
        name=tr("scaled speedup"),
        hint=tr("S = (1-p) + p·N: the serial part stays, the parallel part grows with N."),
        mistakes={
            amdahl(p, n): tr("That is Amdahl's speedup of a fixed problem."),
            p * n: tr("Serial part forgotten: p·N is the parallel part alone. The serial part "
                      "(1-p) still runs once on the scaled problem: S = (1-p) + p·N."),
        },
    )


def _lamb_rows() -> tuple[int, int, dict]:
    table = lamb_scaling_table()
    chips = [int(c) for c in table["devices"]]
    return chips.index(EX5_LAMB["baseline"]), chips.index(EX5_LAMB["devices"]), table


def ex5_lamb_efficiency(answer) -> Result:
    """Parallel efficiency of the LAMB run of :data:`EX5_LAMB` relative to its baseline run."""
    i0, i, table = _lamb_rows()
    t, chips = table["time_minutes"], table["devices"]
    speedup = t[i0] / t[i]
    n = chips[i] / chips[i0]
    base, big = f"{int(chips[i0]):,}", f"{int(chips[i]):,}"
    return check(
        answer,
        efficiency(speedup, n),
        name=tr("efficiency at {big} chips relative to {base}", big=big, base=base),
        hint=tr("speedup = T({base} chips) / T({big} chips); efficiency = speedup / ({big} / {base}).",
                big=big, base=base),
        mistakes={
            speedup / chips[i]: tr("Divide by the {factor} increase in chips, not by {big}.", factor=f"{n:g}x",
                                   big=big),
            efficiency(t[0] / t[i], chips[i] / chips[0]): tr(
                "That is relative to the {first}-chip run (the η column of section 4); the question compares "
                "with the {base}-chip run.", first=int(chips[0]), base=base),
        },
    )


def _law_name(answer):
    """ "Gustafson's law", "gustafson law", "Amdahl’s Law" -> "gustafson", "amdahl"; other answers as given."""
    if isinstance(answer, str):
        answer = re.sub(r"[’'`]s\b|\blaw\b|[^a-z\s-]", " ", answer.lower())
        answer = " ".join(answer.replace("-", " ").split())
    return answer


def ex6_which_law(answer) -> Result:
    """Which law describes the speedup of the whole archive of :data:`EX6_ARCHIVE`?

    Each GPU takes a fixed batch, so one step grows with the GPUs (weak scaling of a step);
    the archive does not: its images are a fixed amount of work that more GPUs split ever
    finer, which is Amdahl's fixed problem (strong scaling of the job), as for section 4's
    LAMB runs. The name will do in any usual form: ``"Amdahl"``, ``"Amdahl's law"``,
    ``"amdahl law"``.
    """
    g = EX6_ARCHIVE
    return check(
        _law_name(answer),
        "Amdahl",  # the archive is the same amount of work on any number of GPUs
        name=tr("law of the whole archive"),
        hint=tr("does the work of the whole job (the images to classify) grow with the GPUs, or "
                "do more GPUs split a fixed amount of work? Answer 'Amdahl' or 'Gustafson'."),
        mistakes={"Gustafson": tr("That is the law of one step: with {images} images per GPU the step grows with "
                                  "the GPUs. The question asks about the whole archive, {millions} million images "
                                  "however many GPUs share them: a fixed problem (strong scaling of the job).",
                                  images=g["batch_per_gpu"], millions=f"{g['images'] / 1e6:g}")},
    )
