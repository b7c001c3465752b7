"""Numbers typed by a person, with or without a unit: ``"5.7 MB"``, ``"33x"``, ``"3,75"``, ``"72%"``.

One reader for every place where a learner types a number as text: the answer checkers
(:mod:`course_lib.exercises`) and the value boxes of the live figures
(:mod:`course_lib.live.widgets`). :func:`read_quantity` returns the number in the unit asked
for, converting a unit of the same kind (``"5.7 MB"`` where GB are asked is 0.0057), or
raises a ``ValueError`` that says why the text cannot be read that way - a message meant
for the learner.
"""

from __future__ import annotations

import math
import re

from .i18n import N_, tr

__all__ = ["read_quantity", "unit_kind"]

_PREFIXES = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
#: What a kind of unit measures, as the messages say it.
_KINDS = {"bytes": N_("a size in bytes"), "bytes/s": N_("a bandwidth"), "FLOP": N_("an amount of work in FLOP"),
          "FLOP/s": N_("a rate in FLOP/s"), "s": N_("a time"), "count": N_("a plain number")}
#: Count words: the scale of a count given in thousands, millions, ...
_COUNT_SCALES = {"k": 1e3, "thousand": 1e3, "M": 1e6, "million": 1e6, "B": 1e9, "bn": 1e9, "billion": 1e9,
                 "T": 1e12, "trillion": 1e12}
_FACTOR_WORDS = {"x", "×", "X", "times", "fold"}


def _unit_table() -> dict[str, tuple[str, float]]:
    """Unit text -> (kind, factor to the kind's base unit)."""
    table: dict[str, tuple[str, float]] = {}
    for p, f in _PREFIXES.items():
        table[f"{p}B"] = ("bytes", f)
        table[f"{p}B/s"] = ("bytes/s", f)
        table[f"{p}bit/s"] = ("bytes/s", f / 8)
        for flop in ("FLOP", "FLOPs"):
            table[f"{p}{flop}"] = ("FLOP", f)
        table[f"{p}FLOP/s"] = ("FLOP/s", f)
    for p, e in (("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40)):
        table[f"{p}B"] = ("bytes", 2.0**e)
        table[f"{p}B/s"] = ("bytes/s", 2.0**e)
    table["bytes"] = ("bytes", 1.0)
    for names, f in ((("s", "sec", "second", "seconds"), 1.0), (("ms",), 1e-3), (("µs", "us", "μs"), 1e-6),
                     (("ns",), 1e-9), (("min", "minute", "minutes"), 60.0), (("h", "hour", "hours"), 3600.0),
                     (("d", "day", "days"), 86400.0)):
        for name in names:
            table[name] = ("s", f)
    return table


_UNITS = _unit_table()
#: A number as typed: 1,024 / 1 024 / 3,75 / .5 / 2e-3 (the unit, if any, follows).
_NUMBER = re.compile(r"^\s*(?P<num>[+-]?(?:\d[\d,' ]*)?(?:[.,]\d+)?(?:[eE][+-]?\d+)?)\s*(?P<unit>.*?)\s*$")
_GROUPED = re.compile(r"[+-]?[1-9]\d{0,2}(?:([,' ])\d{3})(?:\1\d{3})*(?:\.\d+)?")


def unit_kind(unit: str) -> tuple[str, float]:
    """The kind of ``unit`` and its factor to the kind's base unit.

    Byte, bandwidth, FLOP, FLOP/s and time units have a kind of their own; any other unit
    (``"devices"``, ``"x"``, ``"million"``, ``""``) is a count, whose factor is its scale
    (``"million"`` is 1e6).

    Examples
    --------
    >>> unit_kind("MB"), unit_kind("ms"), unit_kind("billion"), unit_kind("devices")
    (('bytes', 1000000.0), ('s', 0.001), ('count', 1000000000.0), ('count', 1.0))
    """
    if not isinstance(unit, str):
        raise TypeError(f"unit must be a str, got {type(unit).__name__}")
    if unit in _UNITS:
        return _UNITS[unit]
    return "count", {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}.get(unit.strip(), 1.0)


def _number(text: str) -> float:
    """The number part: decimal point or decimal comma, thousands grouped by ',' ''' or ' '."""
    t = text.strip()
    if _GROUPED.fullmatch(t):
        t = re.sub(r"[,' ]", "", t)
    elif t.count(",") == 1 and "." not in t and re.fullmatch(r"[+-]?\d*,\d+(?:[eE][+-]?\d+)?", t):
        t = t.replace(",", ".")  # a decimal comma: 3,75
    if not re.fullmatch(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", t):
        raise ValueError(tr("{text} is not a number as written (use a decimal point: 3.75)", text=repr(text.strip())))
    return float(t)


def read_quantity(text: str, unit: str = "") -> float:
    """``text`` - a number, perhaps with a unit - as a number in ``unit``.

    A decimal comma (``"3,75"``) and thousands separators (``"1,024"``, ``"1 024"``) are
    read as meant; ``"72%"`` is 0.72; a factor (``"33x"``) is a plain number; a unit of the
    kind asked is converted (``"5.7 MB"`` in GB, ``"8.7 ms"`` in s, ``"25 Gbit/s"`` in
    GB/s); a count may carry the word it counts (``"32 devices"``, ``"4272 samples"``) or a
    scale (``"7.5B"``, ``"13 billion"`` where billions are asked is 13).

    Parameters
    ----------
    text : str
        What was typed.
    unit : str
        The unit the number is wanted in (see :func:`unit_kind`); empty for a plain number.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If the text is no number, or its unit is of another kind than ``unit`` (the
        message says which) or unknown.

    Examples
    --------
    >>> read_quantity("5.7 MB", "MB"), read_quantity("5.7 MB", "GB"), read_quantity("3,75")
    (5.7, 0.0057, 3.75)
    >>> read_quantity("33x"), read_quantity("72%"), read_quantity("13 billion", "billion")
    (33.0, 0.72, 13.0)
    >>> read_quantity("4272 samples"), read_quantity("8 GPUs", "devices")
    (4272.0, 8.0)
    >>> read_quantity("5.7 MB", "ms")
    Traceback (most recent call last):
    ...
    ValueError: '5.7 MB' is a size in bytes; a time in ms is asked
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    kind, scale = unit_kind(unit)
    match = _NUMBER.match(text)
    if match is None or not match.group("num").strip():
        raise ValueError(tr("{text} does not start with a number", text=repr(text.strip())))
    value = _number(match.group("num"))
    typed = match.group("unit").strip().strip(".")
    if not math.isfinite(value):
        raise ValueError(tr("{text} is not a finite number", text=repr(text.strip())))
    if not typed or typed == unit:
        return value
    if typed == "%":
        return value / 100
    if kind == "count":
        if typed in _FACTOR_WORDS:
            return value
        if typed in _COUNT_SCALES:
            return value * _COUNT_SCALES[typed] / scale
        if unit and typed.lower().rstrip("s") == unit.lower().rstrip("s"):  # "32 device(s)"
            return value
        if typed in _UNITS:
            kind_typed = tr(_KINDS[_UNITS[typed][0]])
            if unit:
                raise ValueError(tr("{text} is {kind}; a number of {unit} is asked", text=repr(text.strip()),
                                    kind=kind_typed, unit=unit))
            raise ValueError(tr("{text} is {kind}; a plain number is asked", text=repr(text.strip()), kind=kind_typed))
        if re.fullmatch(r"[A-Za-z][A-Za-z-]*(?: [A-Za-z-]+)?", typed) and typed not in _PREFIXES:
            return value  # the word it counts: "4272 samples", "8 GPUs", "16 micro-batches"
        if unit:
            raise ValueError(tr("{text}: unknown unit {typed}; give a number of {unit}", text=repr(text.strip()),
                                typed=repr(typed), unit=unit))
        raise ValueError(tr("{text}: unknown unit {typed}", text=repr(text.strip()), typed=repr(typed)))
    if typed not in _UNITS:
        raise ValueError(tr("{text}: unknown unit {typed}; give a number in {unit}", text=repr(text.strip()),
                            typed=repr(typed), unit=unit))
    other, factor = _UNITS[typed]
    if other != kind:
        raise ValueError(tr("{text} is {kind}; {asked} in {unit} is asked", text=repr(text.strip()),
                            kind=tr(_KINDS[other]), asked=tr(_KINDS[kind]), unit=unit))
    return value * factor / scale
