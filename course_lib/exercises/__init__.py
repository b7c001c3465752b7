"""Answer checkers for the notebooks' exercises.

:func:`check` compares a learner's answer with an expected value that the calling
chapter module computes with the course library (never typed in), and prints a
confirmation, a hint, or a reminder that the answer is still missing. One submodule
per chapter (``exercises.ch02`` ...) holds that chapter's exercises.

The output is plain text, so a notebook executed headless (nbval, slides) shows the
same as JupyterLab, and the checkers never raise on a wrong answer: a learner's
mistake must not stop "Run all". Whatever the answer - a huge integer, NaN, a string
such as ``"2x8"``, a dict, any object - :func:`check` explains it; a checker that also
takes the learner's own inputs (a measurement) is wrapped in :func:`checker`, which
turns inputs it cannot use into feedback as well.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Result", "check", "checker"]


@dataclass(frozen=True)
class Result:
    """Outcome of a check; its text is what the notebook shows."""

    correct: bool
    message: str

    def __bool__(self) -> bool:
        return self.correct

    def __repr__(self) -> str:
        return self.message

    def _repr_markdown_(self) -> str:
        return self.message


def check(
    answer: Any,
    expected: Any,
    *,
    name: str = "answer",
    rtol: float = 1e-2,
    atol: float = 0.0,
    hint: str = "",
    unit: str = "",
    mistakes: dict[Any, str] | None = None,
) -> Result:
    """Compare ``answer`` with ``expected`` and explain the outcome.

    Numbers (and arrays) are compared with ``rtol``/``atol``; ``inf`` matches only
    ``inf``. Strings are compared case- and space-insensitively; other objects with
    ``==``.

    Parameters
    ----------
    answer : object
        The learner's answer; ``None`` (or ``...``) means not answered yet.
    expected : object
        The right answer, computed by the course library.
    name : str
        What is being asked, used in the message.
    rtol, atol : float
        Tolerances for numbers.
    hint : str
        Shown after a wrong answer.
    unit : str
        Unit of the answer, shown in the messages.
    mistakes : dict, optional
        Known wrong answers (computed by the caller) mapped to a targeted hint, shown
        instead of ``hint`` when the answer matches one of them.

    Examples
    --------
    >>> check(10, 10.000000000000002, name="limit").correct
    True
    >>> print(check(9, 10, name="limit", hint="S tends to 1/(1-p)"))
    ✗ limit = 9 is not right. Hint: S tends to 1/(1-p)
    >>> print(check(None, 10, name="limit"))
    … limit: not answered yet - replace None with your answer and run the cell again.
    """
    suffix = f" {unit}" if unit else ""
    if answer is None or answer is Ellipsis:
        return Result(
            False,
            f"… {name}: not answered yet - replace None with your answer and run the cell again.",
        )
    # Any exception of the comparison becomes feedback: an answer can be anything the
    # learner typed (10**400 overflows a float, an object's == may raise ...).
    try:
        ok = _matches(answer, expected, rtol, atol)
    except Exception as exc:  # a checker never raises on an answer
        return Result(
            False,
            f"✗ {name}: could not compare {_show(answer)} with the answer "
            f"({type(exc).__name__}: {_text(exc)}).{_kind_hint(answer, expected)}",
        )
    if ok:
        return Result(True, f"✓ Correct: {name} = {_fmt(expected)}{suffix}.")
    text = f"✗ {name} = {_fmt(answer)}{suffix} is not right.{_kind_hint(answer, expected)}"
    for wrong, why in (mistakes or {}).items():
        try:
            if _matches(answer, wrong, rtol, atol):
                return Result(False, f"{text} {why}")
        except Exception:  # an uncomparable answer is no known mistake
            continue
    if hint:
        text += f" Hint: {hint}"
    return Result(False, text)


def checker(fn: Callable[..., Result]) -> Callable[..., Result]:
    """Decorator for a checker that also takes the learner's own inputs.

    Such a checker computes its expected value from those inputs (e.g. a measurement
    of chapter 01), so an input it cannot use would raise while computing it; the
    wrapper shows that as feedback instead.

    Examples
    --------
    >>> @checker
    ... def ex_ratio(answer, measurement):
    ...     return check(answer, measurement["a"] / measurement["b"], name="ratio")
    >>> print(ex_ratio(2.0, {"a": 4.0, "b": 2.0}))
    ✓ Correct: ratio = 2.
    >>> print(ex_ratio(2.0, None))
    ✗ could not check the answer with these inputs (TypeError: 'NoneType' object is not subscriptable).
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Result:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # a checker never raises on the learner's input
            return Result(
                False,
                f"✗ could not check the answer with these inputs ({type(exc).__name__}: {_text(exc)}).",
            )

    return wrapper


def _matches(answer: Any, expected: Any, rtol: float, atol: float) -> bool:
    if isinstance(expected, str):
        return " ".join(str(answer).lower().split()) == " ".join(expected.lower().split())
    if isinstance(expected, (bool, np.bool_)):
        return bool(answer) == bool(expected) and isinstance(answer, (bool, np.bool_))
    if isinstance(expected, (int, float, np.number, np.ndarray, list, tuple)):
        try:
            a = np.asarray(answer, dtype=float)
        except OverflowError:
            return False  # an integer beyond float range (10**400) is no finite answer
        e = np.asarray(expected, dtype=float)
        if a.shape != e.shape:
            return False
        both_inf = np.isinf(a) & np.isinf(e) & (np.sign(a) == np.sign(e))
        close = np.isclose(a, e, rtol=rtol, atol=atol)
        return bool(np.all(both_inf | (close & np.isfinite(e))))
    return answer == expected


def _fmt(value: Any) -> str:
    """The value as shown in a message: numbers to 6 digits, text as typed, short."""
    try:
        if isinstance(value, (float, np.floating)):
            if math.isinf(value):
                return "inf" if value > 0 else "-inf"
            return f"{float(value):.6g}"
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
            return _huge(value)
        if isinstance(value, np.ndarray):
            return _cut(np.array2string(value, precision=4))
        if isinstance(value, str):
            return _cut(repr(value))
        return _cut(str(value))
    except Exception:  # a broken __str__ must not hide the feedback
        return f"<a {type(value).__name__}>"


def _show(value: Any) -> str:
    """``repr(value)`` that never raises and stays short."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        return _huge(value)
    try:
        return _cut(repr(value))
    except Exception:  # a broken __repr__ must not hide the feedback
        return f"<a {type(value).__name__}>"


def _text(exc: BaseException) -> str:
    try:
        return _cut(str(exc))
    except Exception:  # any failure of str() itself
        return "no details"


def _huge(value: int) -> str:
    digits = int(abs(value).bit_length() * 0.30103) + 1
    return f"{'-' if value < 0 else ''}an integer of about {digits} digits"


def _cut(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kind_hint(answer: Any, expected: Any) -> str:
    """A word on the answer's kind when it cannot be right whatever its value."""
    if isinstance(answer, str) and isinstance(expected, (bool, np.bool_)):
        return " Answer True or False, without quotes."
    if isinstance(answer, str) and not isinstance(expected, str):
        return " The answer is a number (or numbers), not text: leave out the quotes."
    return ""
