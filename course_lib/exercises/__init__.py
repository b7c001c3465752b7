"""Answer checkers for the notebooks' exercises.

:func:`check` compares a learner's answer with an expected value that the calling
chapter module computes with the course library (never typed in), and prints a
confirmation, a hint, or a reminder that the answer is still missing. One submodule
per chapter (``exercises.ch02`` ...) holds that chapter's exercises.

The output is plain text, so a notebook executed headless (nbval, slides) shows the
same as JupyterLab, and the checkers never raise on a wrong answer: a learner's
mistake must not stop "Run all".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Result", "check"]


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
    try:
        ok = _matches(answer, expected, rtol, atol)
    except (TypeError, ValueError) as exc:
        return Result(False, f"✗ {name}: could not compare {answer!r} with the answer ({exc}).")
    if ok:
        return Result(True, f"✓ Correct: {name} = {_fmt(expected)}{suffix}.")
    text = f"✗ {name} = {_fmt(answer)}{suffix} is not right."
    for wrong, why in (mistakes or {}).items():
        try:
            if _matches(answer, wrong, rtol, atol):
                return Result(False, f"{text} {why}")
        except (TypeError, ValueError):
            continue
    if hint:
        text += f" Hint: {hint}"
    return Result(False, text)


def _matches(answer: Any, expected: Any, rtol: float, atol: float) -> bool:
    if isinstance(expected, str):
        return " ".join(str(answer).lower().split()) == " ".join(expected.lower().split())
    if isinstance(expected, (bool, np.bool_)):
        return bool(answer) == bool(expected) and isinstance(answer, (bool, np.bool_))
    if isinstance(expected, (int, float, np.number, np.ndarray, list, tuple)):
        a = np.asarray(answer, dtype=float)
        e = np.asarray(expected, dtype=float)
        if a.shape != e.shape:
            return False
        both_inf = np.isinf(a) & np.isinf(e) & (np.sign(a) == np.sign(e))
        close = np.isclose(a, e, rtol=rtol, atol=atol)
        return bool(np.all(both_inf | (close & np.isfinite(e))))
    return answer == expected


def _fmt(value: Any) -> str:
    if isinstance(value, (float, np.floating)):
        if math.isinf(value):
            return "inf"
        return f"{float(value):.6g}"
    if isinstance(value, np.ndarray):
        return np.array2string(value, precision=4)
    return str(value)
