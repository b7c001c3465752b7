"""Exercises of notebook 09 (pipeline parallelism: the bubble, micro-batches, 1F1B).

Expected values come from :mod:`course_lib.schedule`. The givens of each exercise are
module constants, so the notebook can print them.
"""

from __future__ import annotations

from ..schedule import bubble_fraction, simulate_uniform
from . import Result, check, check_count

__all__ = [
    "BUBBLE",
    "MICRO_BATCHES",
    "STASH",
    "ex_bubble",
    "ex_micro_batches",
    "ex_stash",
    "smallest_micro_batches",
]

#: Givens of :func:`ex_bubble`: stages and micro-batches.
BUBBLE = {"stages": 5, "micro_batches": 12}
#: Givens of :func:`ex_micro_batches`: stages and the largest acceptable bubble share.
MICRO_BATCHES = {"stages": 8, "target": 0.10}
#: Givens of :func:`ex_stash`: stages and micro-batches.
STASH = {"stages": 4, "micro_batches": 16}


def ex_bubble(answer) -> Result:
    """Bubble share of a GPipe step with the N_p stages and M micro-batches of :data:`BUBBLE`."""
    n_p, m = BUBBLE["stages"], BUBBLE["micro_batches"]
    bubble = bubble_fraction(n_p, m)
    return check(
        answer,
        bubble,
        name="bubble share",
        rtol=1e-3,
        hint="a step lasts M + N_p - 1 slots; every stage is busy in M of them.",
        mistakes={
            (n_p - 1) / m: "That is (N_p-1)/M: idle slots per busy slot. The share is idle slots "
            "over ALL slots of the step, M + N_p - 1.",
            1 - bubble: "That is the busy share; the question asks for the idle share.",
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
        name="micro-batches M",
        noun="micro-batch",
        hint="solve (N_p-1)/(M+N_p-1) <= target for M and round up to a whole micro-batch.",
        mistakes={
            round((n_p - 1) / target): "That is M + N_p - 1, the length of the step in slots; subtract N_p - 1.",
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
        name="GPipe / 1F1B activation memory on stage 0",
        rtol=1e-3,
        hint="GPipe runs all M forwards before the first backward; 1F1B lets stage 0 start a "
        "backward as soon as its first micro-batch has come back through the N_p stages.",
    )
