"""course_lib.exercises.check: the feedback a learner gets."""

import math

import numpy as np

from course_lib.exercises import check


def test_right_wrong_and_missing_answers():
    assert check(10.0, 10.000000000000002).correct
    wrong = check(9, 10, name="limit", hint="think of n -> inf")
    assert not wrong.correct and "Hint: think of n -> inf" in wrong.message
    missing = check(None, 10)
    assert not missing.correct and "not answered yet" in missing.message
    assert not check(..., 10).correct


def test_tolerance_is_relative():
    assert check(101, 100, rtol=0.02).correct
    assert not check(103, 100, rtol=0.02).correct
    assert check(0.001, 0.0, atol=0.01).correct


def test_infinity_matches_only_infinity():
    assert check(math.inf, math.inf).correct
    assert not check(1e300, math.inf).correct
    assert not check(math.inf, 10).correct


def test_arrays_strings_and_booleans():
    assert check([1, 2, 3], np.array([1.0, 2.0, 3.0])).correct
    assert not check([1, 2], np.array([1.0, 2.0, 3.0])).correct
    assert check("  Gustafson ", "gustafson").correct
    assert check(True, True).correct
    assert not check(1, True).correct  # a number is not a yes/no answer


def test_uncomparable_answer_explains_instead_of_raising():
    result = check("ten", 10.0, name="limit")
    assert not result.correct and "could not compare" in result.message


def test_unit_shown_in_messages():
    assert "10 devices" in check(10, 10, unit="devices").message


def test_known_mistake_gets_its_own_hint():
    result = check(9, 10, hint="generic", mistakes={9: "1/(1-p), not 1/(1-p) - 1"})
    assert "1/(1-p), not" in result.message and "generic" not in result.message
    assert "generic" in check(8, 10, hint="generic", mistakes={9: "x"}).message
