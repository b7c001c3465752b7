"""course_lib.timing."""

import pytest

from course_lib.timing import Timing, measure


def test_measure_counts_calls():
    calls = []
    t = measure(lambda: calls.append(1), repeat=4, warmup=2, number=3)
    assert len(calls) == 2 + 4 * 3
    assert len(t.times) == 4 and t.best <= t.median


def test_timing_statistics():
    t = Timing((1.0, 2.0, 4.0))
    assert t.median == 2.0 and t.best == 1.0 and t.spread == pytest.approx(1.5)


@pytest.mark.parametrize(("kw", "exc"), [({"repeat": 0}, ValueError), ({"number": 1.5}, TypeError)])
def test_bad_arguments(kw, exc):
    with pytest.raises(exc):
        measure(lambda: None, **kw)
    with pytest.raises(TypeError, match="fn must be callable"):
        measure(3)



def test_compare_names_the_winner_or_a_tie():
    from course_lib.timing import compare

    assert compare(0.5, 1.0) == "2.00x faster"
    assert compare(2.0, 1.0) == "2.00x slower"
    assert compare(1.0, 1.04) == "ties (within 4%)"
    assert compare(1.0, 1.04, tie=0.01) == "1.04x faster"
    assert compare(1.0, 1.0, tie=0.0) == "ties (within 0%)"  # equal times are never a win
    with pytest.raises(ValueError, match="reference"):
        compare(1.0, 0.0)
