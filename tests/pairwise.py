"""All-pairs (pairwise) parameter sets for the slow process-fault tests.

A fault test's behaviour comes from pairs of factors: the trainer with the start method
(how its shared arrays and pipes reach a worker), the start method with the fault (when
a kill can land), the trainer with the fault (what it must clean up). Every
(run, method) pair is kept, and the third factor is rotated over them (a Latin square)
so that every (run, third) and (method, third) pair occurs too: 21 runs instead of 42
or 63, with every pair of factors tested at least once.
"""

from __future__ import annotations

from collections.abc import Sequence


def all_pairs(runs: Sequence[str], methods: Sequence[str], thirds: Sequence[str]) -> list[tuple[str, str, str]]:
    """``(run, method, third)`` covering every pair of the three factors.

    Needs ``len(methods) >= len(thirds)`` (then, for each run, the rotation over the methods
    meets every third) and ``len(runs) >= len(thirds)`` (each method meets every third).

    >>> cases = all_pairs(["a", "b", "c"], ["fork", "spawn"], ["x", "y"])
    >>> cases
    [('a', 'fork', 'x'), ('a', 'spawn', 'y'), ('b', 'fork', 'y'), ('b', 'spawn', 'x'), ('c', 'fork', 'x'), ('c', 'spawn', 'y')]
    >>> sorted({(r, t) for r, _, t in cases}) == [(r, t) for r in "abc" for t in "xy"]
    True
    """
    if len(methods) < len(thirds) or len(runs) < len(thirds):
        raise ValueError(f"all_pairs needs at least as many methods and runs as thirds ({len(thirds)})")
    return [(run, method, thirds[(i + j) % len(thirds)])
            for i, run in enumerate(runs) for j, method in enumerate(methods)]
