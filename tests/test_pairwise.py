"""The all-pairs sets of the slow process-fault tests cover every pair of factors."""

from __future__ import annotations

import itertools

import pytest
from pairwise import all_pairs

RUNS = ["data_parallel_shm", "data_parallel_pipe", "pipeline", "hybrid", "tensor_parallel", "parallel_map",
        "torch_gloo"]
METHODS = ["fork", "forkserver", "spawn"]


@pytest.mark.parametrize("thirds", [["parent", "group"], ["at once", "while starting", "at its entry point"]])
def test_every_pair_of_factors_occurs(thirds):
    cases = all_pairs(RUNS, METHODS, thirds)
    assert len(cases) == len(RUNS) * len(METHODS)
    for (a, b) in itertools.combinations(range(3), 2):
        factors = (RUNS, METHODS, thirds)
        assert {(c[a], c[b]) for c in cases} == set(itertools.product(factors[a], factors[b]))


def test_too_few_methods_for_the_thirds_is_refused():
    with pytest.raises(ValueError, match="at least as many methods"):
        all_pairs(RUNS, ["fork", "spawn"], ["a", "b", "c"])
