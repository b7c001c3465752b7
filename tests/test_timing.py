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

