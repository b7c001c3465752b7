"""Exercises of notebook 11 (pipeline parallelism: the bubble, micro-batches, 1F1B,
interleaved 1F1B).

Expected values come from :mod:`course_lib.schedule`. The givens of each exercise are
module constants, so the notebook can print them.
"""

from __future__ import annotations

from ..i18n import tr
from ..schedule import bubble_fraction, simulate_uniform
from . import Result, check, check_count

__all__ = [
    "BUBBLE",
    "MICRO_BATCHES",
    "STASH",
    "VIRTUAL_STAGES",
    "ex_bubble",
    "ex_micro_batches",
    "ex_stash",
    "ex_virtual_stages",
    "smallest_micro_batches",
    "smallest_virtual_stages",
]

#: Givens of :func:`ex_bubble`: stages and micro-batches.
BUBBLE = {"stages": 5, "micro_batches": 12}
#: Givens of :func:`ex_micro_batches`: stages and the largest acceptable bubble share.
MICRO_BATCHES = {"stages": 8, "target": 0.10}
#: Givens of :func:`ex_stash`: stages and micro-batches.
STASH = {"stages": 4, "micro_batches": 16}
#: Givens of :func:`ex_virtual_stages`: stages, micro-batches and the largest acceptable bubble share.
VIRTUAL_STAGES = {"stages": 6, "micro_batches": 12, "target": 0.05}


def ex_bubble(answer) -> Result:
    """Bubble share of a GPipe step with the N_p stages and M micro-batches of :data:`BUBBLE`."""
    n_p, m = BUBBLE["stages"], BUBBLE["micro_batches"]
    bubble = bubble_fraction(n_p, m)
    return check(
        answer,
        bubble,
        name=tr("bubble share"),
        rtol=1e-3,
        hint=tr("a step lasts M + N_p - 1 slots; every stage is busy in M of them."),
        mistakes={
            (n_p - 1) / m: tr("That is (N_p-1)/M: idle slots per busy slot. The share is idle slots "
                              "over ALL slots of the step, M + N_p - 1."),
            1 - bubble: tr("That is the busy share; the question asks for the idle share."),
        },
    )


def smallest_micro_batches(stages: int, target: float) -> int:
    """Fewest micro-batches ``M`` with ``bubble_fraction(stages, M) <= target``.

    Examples
    --------
    >>> smallest_micro_batches(8, 0.10)
    63
    """
    if not 0 < target < 1:
        raise ValueError(f"target must be in (0, 1), got {target!r}")
    m = 1
    while bubble_fraction(stages, m) > target + 1e-12:
        m += 1
    return m


def ex_micro_batches(answer) -> Result:
    """Fewest micro-batches that keep the bubble of an 8-stage pipeline at or below 10%."""
    n_p, target = MICRO_BATCHES["stages"], MICRO_BATCHES["target"]
    expected = smallest_micro_batches(n_p, target)
    return check_count(
        answer,
        expected,
        name=tr("micro-batches M"),
        noun="micro-batch",
        hint=tr("solve (N_p-1)/(M+N_p-1) <= target for M and round up to a whole micro-batch."),
        mistakes={
            round((n_p - 1) / target): tr("That is M + N_p - 1, the length of the step in slots; subtract N_p - 1."),
        },
    )


def ex_stash(answer) -> Result:
    """How many times more micro-batch activations stage 0 holds under GPipe than under 1F1B."""
    n_p, m = STASH["stages"], STASH["micro_batches"]
    gpipe = simulate_uniform(n_p, m, schedule="gpipe").in_flight()[0]
    one_f = simulate_uniform(n_p, m, schedule="1f1b").in_flight()[0]
    return check(
        answer,
        float(gpipe / one_f),
        name=tr("GPipe / 1F1B activation memory on stage 0"),
        rtol=1e-3,
        hint=tr("GPipe runs all M forwards before the first backward; 1F1B lets stage 0 start a "
                "backward as soon as its first micro-batch has come back through the N_p stages."),
    )


def smallest_virtual_stages(stages: int, micro_batches: int, target: float) -> int:
    """Fewest virtual stages ``v`` with ``bubble_fraction(stages, micro_batches, v) <= target``.

    Examples
    --------
    >>> smallest_virtual_stages(6, 12, 0.05)     # 5 / (12 v + 5) <= 0.05 from v = 8 on
    8
    """
    if not 0 < target < 1:
        raise ValueError(f"target must be in (0, 1), got {target!r}")
    v = 1
    while bubble_fraction(stages, micro_batches, v) > target + 1e-12:
        v += 1
    return v


def ex_virtual_stages(answer) -> Result:
    """Fewest virtual stages per device that bring the bubble of :data:`VIRTUAL_STAGES` to the target."""
    n_p, m, target = VIRTUAL_STAGES["stages"], VIRTUAL_STAGES["micro_batches"], VIRTUAL_STAGES["target"]
    expected = smallest_virtual_stages(n_p, m, target)
    mistakes = {
        smallest_micro_batches(n_p, target): tr("That is the number of micro-batches M that would do it "
                                                "without interleaving; the question fixes M and asks for v."),
    }
    no_fill = int(-(-(n_p - 1) // (target * m)))  # from (N_p-1)/(vM) <= target: the N_p - 1 left out
    if no_fill != expected:
        mistakes[no_fill] = tr("That solves (N_p-1)/(vM) <= target: the step lasts vM + N_p - 1 short slots, "
                               "not vM; keep the N_p - 1 in the denominator.")
    return check_count(
        answer,
        expected,
        name=tr("virtual stages v"),
        noun="virtual stage",
        hint=tr("solve (N_p-1)/(vM+N_p-1) <= target for v and round up to a whole chunk per device."),
        mistakes=mistakes,
    )
