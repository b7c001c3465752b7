"""Answer checkers for the notebooks' exercises.

:func:`check` compares a learner's answer with an expected value that the calling
chapter module computes with the course library (never typed in), and prints a
confirmation, a hint, or a reminder that the answer is still missing. One submodule
per notebook, named like it without its number (``exercises.scaling_laws`` ...), holds
that chapter's exercises.

The checkers are forgiving: ``"False"`` answers a yes/no question, ``"2x8"`` a pair,
``"20%"`` a fraction; a value computed from the rounded numbers a notebook shows can be
accepted (``accept``, :func:`shown_tolerance`); a percent for a fraction or MiB for MB
gets its own hint, and :func:`check_count` is the one rule of every count (devices,
micro-batches, steps): a whole number, rounded UP.

The output is plain text, so a notebook executed headless (nbval, slides) shows the
same as JupyterLab, and the checkers never raise: whatever the answer - a huge integer,
NaN, a dict, any object - :func:`check` explains it; a checker that also takes the
learner's own inputs (a measurement) is wrapped in :func:`checker`, which turns inputs
it cannot use into feedback as well.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..i18n import N_, sentences, tr
from ..typed_numbers import read_quantity, unit_kind

__all__ = ["UNIT_SLIPS", "Result", "check", "check_count", "checker", "shown_tolerance"]

#: Words that answer a yes/no question.
_YES_NO = {"true": True, "yes": True, "y": True, "false": False, "no": False, "n": False}
#: Decimal byte units and their binary twins: (decimal, binary, power of 10, power of 2).
_BYTE_UNITS = (("kB", "KiB", 3, 10), ("KB", "KiB", 3, 10), ("MB", "MiB", 6, 20),
               ("GB", "GiB", 9, 30), ("TB", "TiB", 12, 40))
#: Units a right answer is often given in by mistake, by kind (see course_lib.typed_numbers).
_OTHER_UNITS = {"bytes": ("B", "kB", "MB", "GB", "TB"), "s": ("s", "ms", "µs", "min", "h", "days"),
                "FLOP": ("FLOP", "GFLOP", "TFLOP", "PFLOP"), "FLOP/s": ("FLOP/s", "GFLOP/s", "TFLOP/s", "PFLOP/s"),
                "bytes/s": ("B/s", "MB/s", "GB/s", "Gbit/s")}
#: Separators of a pair or grid typed as text: "2x8", "2×8", "2 x 8", "(2, 8)", "2 by 8".
_GRID_SPLIT = re.compile(r"\s*(?:[x×X*,;]|by)\s*|\s+")
#: The nouns :func:`check_count` names (singular and plural), marked for translation; another
#: noun is shown in English.
_COUNT_NOUNS = (N_("device"), N_("devices"), N_("step"), N_("steps"), N_("micro-batch"), N_("micro-batches"),
                N_("virtual stage"), N_("virtual stages"), N_("multiplication"), N_("multiplications"),
                N_("sample"), N_("samples"))


@dataclass(frozen=True)
class Result:
    """Outcome of a check; its text is what the notebook shows."""

    correct: bool
    message: str

    def __post_init__(self) -> None:
        # Feedback is built of translated sentences joined by spaces: none after 。 in Chinese.
        object.__setattr__(self, "message", sentences(self.message))

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
    accept: dict[Any, str] | None = None,
) -> Result:
    """Compare ``answer`` with ``expected`` and explain the outcome.

    Numbers (and arrays) are compared with ``rtol``/``atol``; ``inf`` matches only
    ``inf``. Strings are compared case- and space-insensitively; other objects with
    ``==``. Text is read as a number (``"0.2"``, ``"20%"``, ``"1,024"``), a pair
    (``"2x8"``, ``"2 × 8"``, ``"(2, 8)"``) or a yes/no (``"False"``, ``"no"``) where one
    is asked. The right answer as a percent, or in MiB where ``unit`` is MB (GiB/GB,
    KiB/kB, and the other way round), is told so.

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
    accept : dict, optional
        Other right answers mapped to a note shown with the confirmation, e.g. the
        expected value computed from the rounded numbers a notebook displays.

    Examples
    --------
    >>> check(10, 10.000000000000002, name="limit").correct
    True
    >>> print(check(9, 10, name="limit", hint="S tends to 1/(1-p)"))
    ✗ limit = 9 is not right. Hint: S tends to 1/(1-p)
    >>> print(check(None, 10, name="limit"))
    … limit: not answered yet - replace None with your answer and run the cell again.
    >>> print(check(20, 0.2, name="bubble share"))
    ✗ bubble share = 20 is not right. Give a fraction, not a percent: 20% is 0.2.
    >>> check("False", False).correct and check("2x8", (2, 8)).correct
    True
    """
    suffix = f" {_shown_unit(unit)}" if isinstance(unit, str) and unit else ""
    if answer is None or answer is Ellipsis:
        return Result(False, tr("… {name}: not answered yet - replace None with your answer and run "
                                "the cell again.", name=name))
    # Any exception of the comparison becomes feedback: an answer can be anything the
    # learner typed (10**400 overflows a float, an object's == may raise ...).
    unit = unit if isinstance(unit, str) else ""
    kind_hint = _kind_hint(answer, expected, unit)  # text that is not what is asked: say why, once
    if kind_hint:
        why = _general_mistake(answer, [expected], rtol, atol, unit)  # a named slip says it better
        return Result(False, _wrong(name, _fmt(answer)) + (f" {why}" if why else kind_hint))
    try:
        ok = _matches(answer, expected, rtol, atol, unit)
    except Exception as exc:  # a checker never raises on an answer
        return Result(False, tr("✗ {name}: could not compare {answer} with the answer ({error}).",
                                name=name, answer=_show(answer), error=f"{type(exc).__name__}: {_text(exc)}"))
    if ok:
        return Result(True, tr("✓ Correct: {name} = {value}.", name=name, value=f"{_fmt(expected)}{suffix}"))
    for right, note in _items(accept):
        if _safe_match(answer, right, rtol, atol, unit):
            return Result(True, tr("✓ Correct: {name} = {value} ({note}).", name=name,
                                   value=f"{_fmt(right)}{suffix}", note=note))
    shown = _fmt(answer) if _kind_hint(answer, expected, unit) else _fmt(_coerce(answer, expected, unit))
    text = _wrong(name, f"{shown}{suffix}") + _kind_hint(answer, expected, unit)
    why = _closest_mistake(answer, _items(mistakes), rtol, atol, unit)
    rights = [expected, *(right for right, _ in _items(accept))]
    why = why or _general_mistake(answer, rights, rtol, atol, unit)  # a percent, another unit
    return Result(False, f"{text} {why}" if why else f"{text} {tr('Hint: {hint}', hint=hint)}" if hint else text)


def _shown_unit(unit: str) -> str:
    """``unit`` as the feedback writes it after a number: a word in the reader's language
    ("devices" is 个设备 in Chinese), a symbol (MB, ms, TFLOP/s) as it is."""
    if not isinstance(unit, str):
        return ""
    words = {"devices": tr("devices", context="unit"), "steps": tr("steps", context="unit"),
             "processes": tr("processes", context="unit"), "days": tr("days", context="unit"),
             "GPU-hours": tr("GPU-hours", context="unit"), "bytes": tr("bytes", context="unit")}
    return words.get(unit, unit)


def _wrong(name: str, value: str) -> str:
    """The first sentence of a wrong answer's feedback (``value`` with its unit)."""
    return tr("✗ {name} = {value} is not right.", name=name, value=value)


def check_count(
    answer: Any,
    expected: Any,
    *,
    name: str = "count",
    noun: str = "device",
    round_up: bool = True,
    hint: str = "",
    unit: str = "",
    mistakes: dict[Any, str] | None = None,
) -> Result:
    """:func:`check` for a count - of devices, micro-batches, steps: a whole number.

    The one rule of every count: a non-integer answer is told that a count is a whole
    number, and where the fewest that meet a condition are asked (``round_up``), one
    short of ``expected`` - the solution rounded DOWN - gets its own hint. Otherwise the
    answer must equal ``expected`` (``28.0`` for ``28`` will do).

    Parameters
    ----------
    answer : object
        The learner's answer; ``None`` (or ``...``) means not answered yet.
    expected : int
        The right count, computed by the course library.
    noun : str
        What is counted, singular: ``"device"``, ``"micro-batch"``, ``"step"``.
    round_up : bool
        Whether the count is the fewest that meet a condition (round a fraction UP).
    name, hint, unit, mistakes
        As for :func:`check`; ``mistakes`` come before the one-short hint.

    Examples
    --------
    >>> print(check_count(28.5, 29, name="devices needed", unit="devices"))
    ✗ devices needed = 28.5 devices is not right. A device count is a whole number; round up (a fraction of a device does not exist).
    >>> print(check_count(28, 29, name="devices needed", unit="devices"))  # doctest: +ELLIPSIS
    ✗ devices needed = 28 devices is not right. One device short: ...
    >>> check_count("29", 29).correct
    True
    """
    suffix = f" {_shown_unit(unit)}" if isinstance(unit, str) and unit else ""
    mistakes = dict(_items(mistakes))
    try:
        value = _number(answer, unit)
        if value is not None and abs(value - round(value)) > 1e-9 * max(1e3, abs(value)):
            if round_up:
                why = tr("A {noun} count is a whole number; round up (a fraction of a {noun} does not exist).",
                         noun=tr(noun))
            else:
                why = tr("A {noun} count is a whole number (a fraction of a {noun} does not exist).", noun=tr(noun))
            text = f"{_wrong(name, f'{_fmt(answer)}{suffix}')} {why}"
            return Result(False, text if round_up or not hint else f"{text} {tr('Hint: {hint}', hint=hint)}")
        if round_up and isinstance(expected, (int, np.integer)) and not isinstance(expected, bool):
            short, plural = int(expected) - 1, noun + ("es" if noun.endswith(("ch", "sh", "s", "x")) else "s")
            mistakes.setdefault(short, tr("One {noun} short: with {short} {plural} the condition is not met yet. "
                                          "Round the solution UP to the next whole {noun}.",
                                          noun=tr(noun), short=short, plural=tr(plural)))
    except Exception:  # an odd answer or expected: check() explains it
        pass
    return check(answer, expected, name=name, rtol=1e-9, atol=1e-6, hint=hint, unit=unit,
                 mistakes=mistakes)


def shown_tolerance(decimals: int) -> float:
    """Absolute tolerance of a number shown with ``decimals`` decimals.

    Half a unit of the last digit shown (and a hair, for float rounding): a value
    printed as ``0.378`` is that close to the exact one.

    Parameters
    ----------
    decimals : int
        Decimals shown, 0 to 15.

    Examples
    --------
    >>> round(shown_tolerance(3), 9)
    0.0005
    >>> check(0.378, 0.3785, rtol=0, atol=shown_tolerance(3)).correct
    True
    """
    if isinstance(decimals, (bool, np.bool_)) or not isinstance(decimals, (int, np.integer)):
        raise TypeError(f"decimals must be an int, got {type(decimals).__name__}")
    if not 0 <= decimals <= 15:
        raise ValueError(f"decimals must be in 0..15, got {decimals}")
    return 0.5 * 10.0 ** -int(decimals) * (1 + 1e-9)


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
            return Result(False, tr("✗ could not check the answer with these inputs ({error}).",
                                    error=f"{type(exc).__name__}: {_text(exc)}"))

    return wrapper


def _matches(answer: Any, expected: Any, rtol: float, atol: float, unit: str = "") -> bool:
    answer = _coerce(answer, expected, unit)
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


def _safe_match(answer: Any, value: Any, rtol: float, atol: float, unit: str = "") -> bool:
    try:
        return _matches(answer, value, rtol, atol, unit)
    except Exception:  # an uncomparable answer matches nothing
        return False


def _closest_mistake(answer: Any, mistakes: list[tuple[Any, str]], rtol: float, atol: float, unit: str) -> str:
    """The hint of the known mistake the answer matches; of several, the nearest one.

    Two mistakes can lie within the tolerance of each other (a ring time without the
    latency, and one with a slightly wrong parameter count): the answer's own digits
    tell them apart.
    """
    matched = [(wrong, why) for wrong, why in mistakes if _safe_match(answer, wrong, rtol, atol, unit)]
    if len(matched) < 2:
        return matched[0][1] if matched else ""
    x = _number(answer, unit)
    try:
        return min(matched, key=lambda m: abs(float(m[0]) - x) if x is not None else 0.0)[1]
    except Exception:  # mistakes that are not numbers: the first one
        return matched[0][1]


def _items(table: Any) -> list[tuple[Any, Any]]:
    try:
        return list(table.items()) if table else []
    except Exception:  # not a dict: no entries
        return []


def _coerce(answer: Any, expected: Any, unit: str = "") -> Any:
    """``answer`` typed as text, read as the kind of ``expected`` where it can be.

    A number may carry a unit (``"5.7 MB"``, converted to ``unit``), a factor's ``x``
    (``"33x"``), a percent sign or a decimal comma (:func:`course_lib.typed_numbers.read_quantity`).
    """
    if not isinstance(answer, str):
        return answer
    text = answer.strip().strip("'\"").strip()
    if isinstance(expected, (bool, np.bool_)):
        return _YES_NO.get(text.lower(), answer)
    if isinstance(expected, (tuple, list, np.ndarray)):  # a pair or grid: "2x8", "(2, 8)"
        parts = [_text_number(p) for p in _GRID_SPLIT.split(text.strip("()[] ")) if p]
        return tuple(parts) if parts and None not in parts else answer
    value = _text_number(text, unit) if isinstance(expected, (int, float, np.number)) else None
    return answer if value is None else value


def _text_number(text: str, unit: str = "") -> float | None:
    """A number typed as text, in ``unit``: ``"0.2"``, ``"20%"``, ``"1,024"``, ``"3,75"``,
    ``"5.7 MB"``, ``"33x"``; None if it is none (:func:`_reading_problem` says why)."""
    try:
        return float(text) if text.strip().lower() in ("inf", "+inf", "-inf", "nan") else read_quantity(text, unit)
    except (ValueError, TypeError, OverflowError):
        return None


def _reading_problem(text: str, unit: str) -> str:
    """Why ``text`` is no number in ``unit``, in words."""
    try:
        read_quantity(text.strip().strip("'\"").strip(), unit)
    except (ValueError, TypeError) as exc:
        return _text(exc)
    return ""


def _number(value: Any, unit: str = "") -> float | None:
    """``value`` (text included) as a finite real number, or None."""
    value = _coerce(value, 0.0, unit)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    try:
        x = float(value)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None


def _percent_for_fraction(text: str, x: float, r: float, unit: str) -> str:
    if 0 < r <= 1 and "%" not in text and math.isclose(x / 100, r, rel_tol=0.02):
        return tr("Give a fraction, not a percent: {percent} is {fraction}.", percent=f"{x:g}%",
                  fraction=f"{x / 100:g}")
    return ""


def _percent_sign_read_as_fraction(text: str, x: float, r: float, unit: str) -> str:
    if "%" in text and unit != "%" and math.isclose(x * 100, r, rel_tol=0.02):
        return tr("The percent sign made it a fraction: {typed} is read as {value}. The question asks for the "
                  "number itself: type {number}.", typed=repr(text.strip()), value=f"{x:g}", number=f"{x * 100:g}")
    return ""


def _percent_growth_for_ratio(text: str, x: float, r: float, unit: str) -> str:
    if "%" in text and r > 1 and math.isclose(1 + x, r, rel_tol=0.02):
        return tr("A percentage was read as a fraction: {typed} is {value}, a growth BY {percent}. The question "
                  "asks the ratio, new / old = 1 + {value} = {ratio}.", typed=repr(text.strip()), value=f"{x:g}",
                  percent=f"{x * 100:g} %", ratio=f"{1 + x:g}")
    return ""


def _binary_byte_unit(text: str, x: float, r: float, unit: str) -> str:
    for decimal, binary, p10, p2 in _BYTE_UNITS:
        for asked, other, factor, desc in ((decimal, binary, 10**p10 / 2**p2, f"10^{p10}"),
                                           (binary, decimal, 2**p2 / 10**p10, f"2^{p2}")):
            if unit == asked and math.isclose(x, r * factor, rel_tol=0.005):
                return tr("That is {other}; the question asks {asked} ({power} bytes).", other=other, asked=asked,
                          power=desc)
    return ""


def _bare_scale_suffix(text: str, x: float, r: float, unit: str) -> str:
    match = re.fullmatch(r"\s*[-+\d.,' ]+\s*([kKMGT])\s*", text)
    kind, factor = unit_kind(unit) if unit else ("count", 1.0)
    if match and kind == "bytes":
        scale = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[match.group(1)]
        size = read_quantity(text.strip().rstrip("kKMGT").strip()) * scale / factor
        fields = dict(typed=repr(text.strip()), suffix=match.group(1), unit=unit, value=_fmt(size), text=text.strip())
        if math.isclose(size, r, rel_tol=0.02):
            return tr("{typed} gives a count of {suffix} (thousands, millions), not a size - the right size: give "
                      "the number of {unit}, e.g. {value} for {text}.", **fields)
        return tr("{typed} gives a count of {suffix} (thousands, millions), not a size: give the number of {unit}, "
                  "e.g. {value} for {text}.", **fields)
    return ""


def _other_unit_of_the_kind(text: str, x: float, r: float, unit: str) -> str:
    kind, factor = unit_kind(unit)
    if kind != "count":  # bytes for MB, seconds for ms, ...: the right value in another unit
        for other in _OTHER_UNITS.get(kind, ()):
            if other != unit and math.isclose(x, r * factor / unit_kind(other)[1], rel_tol=0.02):
                return tr("That is the right value in {other}; the question asks {unit}.", other=other, unit=unit)
    return ""


#: The slips of form every checker names: a right answer given as a percent, a percentage read
#: as a fraction, in the binary byte unit, with a bare k/M/G, or in another unit of the kind
#: asked. Each entry: (name, rule(text, answer as read, a right value, unit) -> hint or "").
#: One table for every checker (the hints of one exercise's own mistakes come before it).
UNIT_SLIPS: tuple[tuple[str, Callable[[str, float, float, str], str]], ...] = (
    ("a fraction given as a percent", _percent_for_fraction),
    ("a percentage read as a fraction", _percent_growth_for_ratio),
    ("a percent sign on a plain number", _percent_sign_read_as_fraction),
    ("MiB for MB (and the other binary units)", _binary_byte_unit),
    ("a bare k, M or G where a size is asked", _bare_scale_suffix),
    ("the right value in another unit of the kind", _other_unit_of_the_kind),
)


def _general_mistake(answer: Any, rights: list[Any], rtol: float, atol: float, unit: str) -> str:
    """The hint for a right answer in the wrong form (:data:`UNIT_SLIPS`), or ""."""
    text = answer if isinstance(answer, str) else ""
    x = _number(answer, unit)
    if x is None and text:  # '2460k' where MB are asked: read the number without its suffix
        x = _text_number(text.strip().rstrip("kKMGT").strip())
    reals = [float(r) for r in rights if _number(r) is not None and not isinstance(r, str)]
    if x is None:
        return ""
    for _, rule in UNIT_SLIPS:
        for r in reals:
            try:
                why = rule(text, x, r, unit)
            except Exception:  # a rule that cannot read this answer names nothing
                why = ""
            if why:
                return why
    return ""


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
        return tr("no details")


def _huge(value: int) -> str:
    digits = int(abs(value).bit_length() * 0.30103) + 1
    if value < 0:
        return tr("-an integer of about {digits} digits", digits=digits)
    return tr("an integer of about {digits} digits", digits=digits)


def _cut(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kind_hint(answer: Any, expected: Any, unit: str = "") -> str:
    """A word on the answer's kind when it cannot be right whatever its value.

    Text that is not read as a number gets the reason (a unit of another kind, an unknown
    word); "leave out the quotes" only where that helps: the text is a Python expression
    of numbers (``"1 / (1 - 0.95)"``), which the notebook would compute without them.
    """
    try:
        if not isinstance(_coerce(answer, expected, unit), str):
            return ""  # not text, or text read as what is asked ("False", "2x8", "20%", "5.7 MB")
        text = str(answer).strip().strip("'\"").strip()
    except Exception:  # an odd str subclass: no word on it
        return ""
    if isinstance(expected, (bool, np.bool_)):
        return " " + tr("Answer True or False (yes or no will do too).")
    if isinstance(expected, str):
        return ""
    if _is_arithmetic(text):
        return " " + tr("The answer is a number (or numbers), not text: leave out the quotes, and Python computes it.")
    typed = _cut(repr(text), 40)
    if isinstance(expected, (tuple, list, np.ndarray)):
        return " " + tr("Could not read {typed} as numbers: give them as a tuple, e.g. (2, 8).", typed=typed)
    why = _reading_problem(text, unit)
    example = (tr("{number} or {quantity}", number="8.65", quantity=f"'8.65 {unit}'")
               if unit and unit_kind(unit)[0] != "count" else "3.75")
    fields = dict(typed=typed, unit=unit, why=why, example=example)
    if unit and why:
        return " " + tr("Could not read {typed} as a number of {unit} ({why}): type a number, e.g. {example}.", **fields)
    if unit:
        return " " + tr("Could not read {typed} as a number of {unit}: type a number, e.g. {example}.", **fields)
    if why:
        return " " + tr("Could not read {typed} as a number ({why}): type a number, e.g. {example}.", **fields)
    return " " + tr("Could not read {typed} as a number: type a number, e.g. {example}.", **fields)


def _is_arithmetic(text: str) -> bool:
    """Whether ``text`` is a Python expression of numbers and + - * / ** ( ) only."""
    import ast

    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError):
        return False
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop)
    return all(isinstance(n, allowed) for n in ast.walk(tree)) and not (
        isinstance(tree.body, ast.Constant)) and all(
        isinstance(n.value, (int, float)) for n in ast.walk(tree) if isinstance(n, ast.Constant))
