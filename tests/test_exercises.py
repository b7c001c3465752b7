"""course_lib.exercises.check: the feedback a learner gets."""

import math

import numpy as np
import pytest

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
    assert not result.correct and "Could not read 'ten' as a number" in result.message
    odd = check(object(), 10.0, name="limit")  # no text at all: the comparison's own error, once
    assert not odd.correct and odd.message.count("✗") == 1


def test_unit_shown_in_messages():
    assert "10 devices" in check(10, 10, unit="devices").message


def test_known_mistake_gets_its_own_hint():
    result = check(9, 10, hint="generic", mistakes={9: "1/(1-p), not 1/(1-p) - 1"})
    assert "1/(1-p), not" in result.message and "generic" not in result.message
    assert "generic" in check(8, 10, hint="generic", mistakes={9: "x"}).message


# ------------------------------------------------------------- every chapter's checkers
def _exercise_functions():
    import importlib
    import inspect
    import pkgutil

    import course_lib.exercises as pkg

    found = []
    for info in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("ex") and name[2:3].isdigit() and fn.__module__ == module.__name__:
                found.append(pytest.param(fn, id=f"{info.name}.{name}"))
    return found


EXERCISES = _exercise_functions()


def test_every_chapter_has_exercises():
    chapters = {p.id.split(".")[0] for p in EXERCISES}
    assert {"scaling_laws"} <= chapters and len(EXERCISES) >= 4


class _Measurement:
    """Stands in for a learner's own measurement (chapter 01's speedup experiment)."""

    processes = np.array([1, 2])
    speedup = np.array([1.0, 1.6])
    efficiency = np.array([1.0, 0.8])


# Exercises on the learner's own measurements take them as extra arguments.
MEASURED = {"measurement": _Measurement(), "speedup": 1.6, "workers": 2,
            # chapter 08's alpha-beta fit: a sweep of t = 2 alpha + m / beta on 2 devices
            "nbytes": np.array([1e3, 1e5, 1e7]), "seconds": 2 * 50e-6 + np.array([1e3, 1e5, 1e7]) / 1e9,
            "devices": 2}


def _call(exercise, answer):
    import inspect

    params = inspect.signature(exercise).parameters
    extra = {k: MEASURED[k] for k in list(params)[1:] if params[k].default is inspect.Parameter.empty}
    return exercise(answer, **extra)


@pytest.mark.parametrize("exercise", EXERCISES)
def test_checker_rejects_missing_and_nonsense_answers(exercise):
    """A checker that accepts anything would pass its notebook's solution cell too."""
    missing = _call(exercise, None)
    assert not missing.correct and "not answered" in missing.message
    for nonsense in (-123456.789, "certainly not this"):
        result = _call(exercise, nonsense)
        assert not result.correct, f"{exercise.__name__} accepted {nonsense!r}"
        assert result.message.startswith("✗")


def test_devices_exercise_wants_a_whole_device_rounded_up():
    from course_lib.exercises.scaling_laws import ex3_devices

    # 1/((1-0.95) + 0.95/N) >= 12  <=>  N >= 0.95 / (1/12 - 0.05) = 28.5
    assert ex3_devices(29).correct
    short = ex3_devices(28)
    assert not short.correct and "One device short" in short.message
    assert not ex3_devices(28.5).correct and not ex3_devices(29.4).correct
