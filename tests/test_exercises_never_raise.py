"""Exercise checkers never raise: every answer, however odd, gets feedback.

A learner may type anything into an answer cell - a huge integer, ``nan``, ``"2x8"``,
``"True"`` in quotes, a list, a dict, some object - and "Run all" must not stop at the
checker. For EVERY checker of every ``course_lib.exercises`` module (found by walking
the package: public callables whose first parameter is ``answer``), and for each of its
required parameters in turn (the learner's own measurement, ``speedup``/``workers``,
and :func:`~course_lib.exercises.check`'s ``expected``), the odd value goes into that
position and the checker must return a :class:`~course_lib.exercises.Result` whose
notebook display (what IPython prints for it) is a non-empty text.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import io
import pkgutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import course_lib.exercises as exercises
from course_lib.exercises import Result


class _Nasty:
    """An object whose every conversion and comparison raises."""

    def __repr__(self):
        raise RuntimeError("no repr")

    __str__ = __repr__

    def __float__(self):
        raise RuntimeError("no float")

    def __eq__(self, other):
        raise RuntimeError("no ==")

    __hash__ = object.__hash__


class _Measurement:
    """Stands in for a learner's own measurement (chapter 01's speedup experiment)."""

    processes = np.array([1, 2])
    speedup = np.array([1.0, 1.6])
    efficiency = np.array([1.0, 0.8])


#: Valid values of the parameters besides ``answer`` (when the odd value is elsewhere).
VALID = {"measurement": _Measurement(), "speedup": 1.6, "workers": 2, "expected": 10.0}

#: The odd answers every checker gets (by name, for the test ids).
ODD = {
    "10**400": 10**400,
    "-10**400": -(10**400),
    "10**5000": 10**5000,  # str() of it raises ValueError (int max str digits)
    "nan": float("nan"),
    "inf": float("inf"),
    "-inf": float("-inf"),
    "'abc'": "abc",
    "'True'": "True",
    "'2x8'": "2x8",
    "'2×8'": "2×8",
    "'(2, 8)'": "(2, 8)",
    "'2 by 8 by'": "2 by 8 by",
    "'x'": "x",
    "'20%'": "20%",
    "'%'": "%",
    "'1e999%'": "1e999%",
    "'1,024'": "1,024",
    "'nan'": "nan",
    "'no'": "no",
    "''": "",
    "'  '": "  ",
    "True": True,
    "None": None,
    "Ellipsis": ...,
    "[]": [],
    "[1, [2]]": [1, [2]],
    "[2, 8]": [2, 8],
    "(2, 8, 3)": (2, 8, 3),
    "{}": {},
    "{'D': 2}": {"D": 2},
    "set()": set(),
    "object()": object(),
    "_Nasty()": _Nasty(),
    "1j": 1j,
    "b'2'": b"2",
    "array([nan])": np.array([np.nan]),
    "array(object)": np.array([None, "x"], dtype=object),
    "int": int,
    "print": print,
}


def _checkers():
    """(id, checker) of every public callable of the exercises package taking ``answer``."""
    found = []
    modules = [exercises] + [
        importlib.import_module(f"{exercises.__name__}.{info.name}")
        for info in pkgutil.iter_modules(exercises.__path__)
    ]
    for module in modules:
        for name in module.__all__:
            fn = getattr(module, name)
            if not callable(fn) or isinstance(fn, type):
                continue
            params = list(inspect.signature(fn).parameters)
            if params[:1] == ["answer"]:
                short = module.__name__.removeprefix("course_lib.")
                found.append((f"{short}.{name}", fn))
    return found


CHECKERS = _checkers()


@functools.cache  # asked on every call of a checker (thousands): inspect.signature once per checker
def _positions(fn):
    """Required parameters of ``fn``: where an odd value is tried."""
    return [
        p.name for p in inspect.signature(fn).parameters.values()
        if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


CASES = [
    pytest.param(fn, where, id=f"{ident}[{where}]")
    for ident, fn in CHECKERS
    for where in _positions(fn)
]


@functools.cache
def _formatter():
    """One IPython display formatter for the module (building its formatters costs ~30 ms)."""
    from IPython.core.formatters import DisplayFormatter

    return DisplayFormatter()


def _display_text(result) -> str:
    """What a notebook shows for ``result``: IPython's text/plain (and markdown) of it."""
    bundle, _ = _formatter().format(result)
    return bundle.get("text/markdown") or bundle.get("text/plain", "")


def _run(fn, where, odd):
    kwargs = {name: (odd if name == where else VALID.get(name, 1.0)) for name in _positions(fn)}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = fn(**kwargs)
    assert isinstance(result, Result), f"{fn.__name__} returned {type(result).__name__}"
    shown = _display_text(result) + out.getvalue()
    assert shown.strip(), f"{fn.__name__}({where}=...) shows nothing"
    assert isinstance(result.message, str) and result.message.strip()
    return result


def test_every_chapter_module_has_checkers():
    modules = {ident.split(".")[1] for ident, _ in CHECKERS}
    assert {"serial_to_parallel", "scaling_laws", "training_cost", "large_batches", "operator_parallelism", "operator_algorithms", "data_parallelism", "collectives", "memory", "pipeline_parallelism", "tensor_parallelism", "hybrid_parallelism", "summary", "under_the_hood"} <= modules
    assert {"exercises.check", "exercises.check_count"} <= {ident for ident, _ in CHECKERS}
    assert len(CHECKERS) >= 40


@pytest.mark.parametrize(("fn", "where"), CASES)
def test_listed_odd_values_get_feedback(fn, where):
    for key, odd in ODD.items():
        try:
            _run(fn, where, odd)
        except Exception as exc:  # report which value broke it
            raise AssertionError(f"{fn.__name__}({where}={key}) raised {type(exc).__name__}: {exc}") from exc


_ODD_VALUES = st.one_of(
    st.sampled_from(list(ODD.values())),
    st.text(max_size=12),
    st.text("0123456789.,%x×X*()[] -+eby", max_size=12),  # nearly numbers, pairs, percents
    st.builds(lambda x, u: f"{x:g}{u}", st.floats(allow_nan=True, allow_infinity=True),  # numbers with units
              st.sampled_from(["", " MB", "MB", " MiB", " GB", " B", " ms", " s", " µs", "x", " x", "%", " GB/s",
                               " Gbit/s", " TFLOP/s", " devices", " days", " h", "B", " parsecs", " ms ms"])),
    st.builds(lambda x: f"{x:.3f}".replace(".", ","), st.floats(-1e6, 1e6)),  # decimal commas
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**450), max_value=10**450),
    st.lists(st.one_of(st.integers(), st.text(max_size=3), st.none()), max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=3),
    st.complex_numbers(),
)


@pytest.mark.parametrize(("fn", "where"), CASES)
@settings(max_examples=12, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(odd=_ODD_VALUES)
def test_any_value_gets_feedback(fn, where, odd):
    _run(fn, where, odd)


def test_huge_integer_answer_is_wrong_not_an_overflow():
    from course_lib.exercises.scaling_laws import ex1_limit

    result = ex1_limit(10**400)
    assert not result.correct and "is not right" in result.message
    assert "about 401 digits" in result.message


def test_quoted_answers_are_read_as_meant_or_get_a_hint_about_quotes():
    from course_lib.exercises.data_parallelism import ex1_mean_of_means
    from course_lib.exercises.hybrid_parallelism import _best_split, ex_best_split

    assert ex1_mean_of_means("False").correct and ex1_mean_of_means("no").correct
    wrong = ex1_mean_of_means("True")
    assert not wrong.correct and "could not" not in wrong.message
    assert "Answer True or False" in ex1_mean_of_means("perhaps").message
    best = _best_split()
    assert ex_best_split(f"{best.data}x{best.pipeline}").correct
    # "leave out the quotes" only where it helps: an expression of numbers Python computes
    assert "leave out the quotes" not in ex_best_split("two by sixteen").message
    assert "as numbers" in ex_best_split("two by sixteen").message
    from course_lib.exercises.scaling_laws import ex1_limit
    assert "leave out the quotes" in ex1_limit("1 / (1 - 0.96) + 1").message


def test_learner_measurement_that_cannot_be_used_gets_feedback():
    from course_lib.exercises.data_parallelism import ex2_karp_flatt
    from course_lib.exercises.serial_to_parallel import ex5_measured_efficiency

    bad = ex5_measured_efficiency(0.8, "my measurement")
    assert not bad.correct and "could not check" in bad.message
    assert not ex2_karp_flatt(0.1, speedup="fast", workers=2).correct
    assert ex5_measured_efficiency(0.4, _Measurement()).correct  # N - S = 2 - 1.6


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(answer=_ODD_VALUES, other=_ODD_VALUES, expected=st.sampled_from(
    [0.2, 29, 1.5, (2, 8), False, "Gustafson", 10**400, float("nan"), _Nasty()]))
def test_odd_known_mistakes_and_alternatives_get_feedback(answer, other, expected):
    """The readers of text, the percent and unit rules and check_count's whole-number rule
    never raise, whatever the answer, the expected value or the caller's tables hold."""
    from course_lib.exercises import check, check_count

    try:
        table = {other: "m", 0.002: "m"}
    except TypeError:  # an unhashable value cannot be a key
        table = {0.002: "m"}
    for unit in ("", "MB", "GiB", "kB"):
        for result in (
            check(answer, expected, unit=unit, mistakes=table, accept=table),
            check(answer, expected, mistakes=other, accept=other),
            check_count(answer, expected, unit=unit, mistakes=table),
            check_count(answer, expected, noun="micro-batch", round_up=False, hint="h"),
        ):
            assert isinstance(result, Result) and result.message.strip()


_UNITS_OF_A_KIND = {"bytes": ["B", "kB", "MB", "GB", "KiB", "MiB", "GiB"], "s": ["s", "ms", "µs", "h", "days"],
                    "bytes/s": ["GB/s", "MB/s", "Gbit/s"], "FLOP/s": ["GFLOP/s", "TFLOP/s"],
                    "FLOP": ["FLOP", "GFLOP", "GFLOPs"]}


@settings(max_examples=200, deadline=None, database=None)
@given(value=st.floats(1e-3, 1e6), kind=st.sampled_from(sorted(_UNITS_OF_A_KIND)), data=st.data())
def test_a_right_value_typed_with_any_unit_of_its_kind_is_right(value, kind, data):
    """``check`` reads "5.7 MB" into the unit asked, whatever unit of that kind is typed,
    with a decimal point or a decimal comma."""
    from course_lib.exercises import check
    from course_lib.typed_numbers import unit_kind

    asked = data.draw(st.sampled_from(_UNITS_OF_A_KIND[kind]))
    typed = data.draw(st.sampled_from(_UNITS_OF_A_KIND[kind]))
    number = value * unit_kind(asked)[1] / unit_kind(typed)[1]
    text = f"{number:.9g} {typed}"
    assert check(text, value, unit=asked, rtol=1e-6).correct, text
    if "." in text and "e" not in text and len(text.split(" ")[0].split(".")[1]) != 3:
        assert check(text.replace(".", ","), value, unit=asked, rtol=1e-6).correct, text


@settings(max_examples=100, deadline=None, database=None)
@given(value=st.floats(1e-3, 1e6), typed=st.sampled_from(["MB", "ms", "GB/s", "TFLOP/s", "days"]),
       asked=st.sampled_from(["MB", "ms", "GB/s", "TFLOP/s", "days", "", "devices"]))
def test_a_value_with_a_unit_of_another_kind_gets_the_reason_never_leave_out_the_quotes(value, typed, asked):
    from course_lib.exercises import check
    from course_lib.typed_numbers import unit_kind

    if unit_kind(typed)[0] == unit_kind(asked)[0]:
        return
    result = check(f"{value:g} {typed}", value, unit=asked)
    assert not result.correct and "leave out the quotes" not in result.message
    assert "Could not read" in result.message and " is asked" in result.message
