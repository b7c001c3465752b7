"""Argument checks shared by the course modules (a leaf: imports only numpy).

Every public function of the course validates its input with these helpers so that
bad input always gives a ``TypeError`` or ``ValueError`` that names the parameter and
the allowed range.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np


def as_real(
    value: Any, name: str, *, allow_inf: bool = False, allowed: str | None = None
) -> np.ndarray:
    """Return ``value`` as a float64 array, or raise naming ``name``.

    Booleans, strings, complex numbers and other non-real types raise ``TypeError``;
    NaN (and infinity unless ``allow_inf``) raises ``ValueError``. ``allowed`` (for
    example ``"in [0, 1]"``) is added to every message so that it states the range.
    """
    rule = f" {allowed}" if allowed else ""
    if isinstance(value, (bool, np.bool_)) or value is None or isinstance(value, (str, bytes)):
        raise TypeError(
            f"{name} must be a real number{rule} or an array of them, got {value!r}"
        )
    try:
        arr = np.asarray(value)
    except Exception as exc:  # pragma: no cover - exotic objects
        raise TypeError(
            f"{name} must be a real number{rule} or an array of them, got {type(value).__name__}"
        ) from exc
    if arr.dtype == object and _has_huge_int(arr):
        raise ValueError(f"{name} must be finite{rule}, got an integer too large for a float")
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise TypeError(
            f"{name} must be a real number{rule} or an array of them, got dtype {arr.dtype}"
        )
    arr = arr.astype(np.float64)
    if np.isnan(arr).any():
        raise ValueError(f"{name} must not be NaN; it must be a number{rule}")
    if not allow_inf and np.isinf(arr).any():
        raise ValueError(f"{name} must be finite{rule}, got {value!r}")
    return arr


def check_range(
    arr: np.ndarray,
    name: str,
    low: float = -np.inf,
    high: float = np.inf,
    *,
    low_open: bool = False,
    high_open: bool | None = None,
) -> None:
    """Raise ``ValueError`` unless every element lies in the interval given.

    ``high_open`` defaults to open for an infinite bound (``[1, inf)``): pass
    ``high_open=False`` where infinity itself is allowed (``[1, inf]``).
    """
    if high_open is None:
        high_open = bool(np.isinf(high))
    bad_low = (arr <= low) if low_open else (arr < low)
    bad_high = (arr >= high) if high_open else (arr > high)
    bad = bad_low | bad_high
    if np.any(bad):
        left = "(" if low_open else "["
        right = ")" if high_open else "]"
        first = arr[bad].flat[0] if np.ndim(arr) else float(arr)
        raise ValueError(
            f"{name} must be in {left}{_fmt(low)}, {_fmt(high)}{right}, got {float(first):g}"
        )


def check_array(
    value: Any,
    name: str,
    low: float = -np.inf,
    high: float = np.inf,
    *,
    low_open: bool = False,
    high_open: bool | None = None,
    allow_inf: bool = False,
    whole: bool = False,
) -> np.ndarray:
    """``value`` as a float64 array whose elements all lie in the interval given, or raise.

    :func:`as_real` then :func:`check_range`, with the interval stated in every message;
    ``whole=True`` also requires whole numbers (device counts). The one way the course
    checks an array argument.

    Examples
    --------
    >>> check_array([0.5, 1.0], "p", 0, 1).tolist()
    [0.5, 1.0]
    >>> check_array(0.0, "time", 0, low_open=True)
    Traceback (most recent call last):
    ...
    ValueError: time must be in (0, inf), got 0
    """
    right_open = bool(np.isinf(high)) if high_open is None else high_open
    interval = f"in {'(' if low_open else '['}{_fmt(low)}, {_fmt(high)}{')' if right_open else ']'}"
    arr = as_real(value, name, allow_inf=allow_inf, allowed=interval)
    check_range(arr, name, low, high, low_open=low_open, high_open=right_open)
    if whole and np.any(arr != np.floor(arr)):
        bad = arr[arr != np.floor(arr)].flat[0] if arr.ndim else float(arr)
        raise ValueError(f"{name} must be whole numbers {interval}, got {float(bad):g}")
    return arr


def check_count(value: Any, name: str, low: float = 1.0) -> int:
    """A count (devices, epochs ...) in [``low``, 2**40]; a float from a slider is rounded down.

    Examples
    --------
    >>> check_count(8.7, "devices")
    8
    """
    return int(check_real(value, name, low, 2.0**40))


def broadcast(**arrays: np.ndarray) -> list[np.ndarray]:
    """Broadcast named arrays together, naming them if their shapes do not match."""
    try:
        return list(np.broadcast_arrays(*arrays.values()))
    except ValueError as exc:
        shapes = ", ".join(f"{k} {np.shape(v)}" for k, v in arrays.items())
        raise ValueError(f"shapes do not broadcast together: {shapes}") from exc


def scalar_or_array(result: np.ndarray, *inputs: Any) -> float | np.ndarray:
    """Return a Python float when every input was a scalar, else the array."""
    if all(np.ndim(x) == 0 for x in inputs):
        return float(result)
    return result


#: Largest integer :func:`check_int` accepts when no ``maximum`` is given: every count of
#: the course fits in a signed 64-bit integer, which numpy indices and ``range`` handle.
INT_MAX = 2**63 - 1


def check_int(value: Any, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as ``int`` if it is an integer within [minimum, maximum].

    Without ``maximum`` the bound is :data:`INT_MAX`, so that a huge integer (``10**400``)
    gives a ``ValueError`` here instead of an ``OverflowError`` or a hang further on.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {_short(value)}")
    value = int(value)
    hi = INT_MAX if maximum is None else maximum
    if (minimum is not None and value < minimum) or value > hi:
        lo = "-inf" if minimum is None else str(minimum)
        top = "2**63 - 1" if maximum is None else str(maximum)
        raise ValueError(f"{name} must be an integer in [{lo}, {top}], got {_short(value)}")
    return value


def check_type(value: Any, name: str, types: type | tuple[type, ...], what: str) -> Any:
    """Return ``value`` if it is an instance of ``types``, else raise ``TypeError``.

    Parameters
    ----------
    value : object
        The argument to check.
    name : str
        The parameter's name, used in the message.
    types : type or tuple of type
        Accepted types (as for ``isinstance``).
    what : str
        The accepted types in words, e.g. ``"an MLP"``.

    Returns
    -------
    object
        ``value`` itself.

    Examples
    --------
    >>> check_type(3, "n", int, "an int")
    3
    >>> check_type(None, "model", (int, float), "an MLP")
    Traceback (most recent call last):
        ...
    TypeError: model must be an MLP, got NoneType
    """
    if not isinstance(value, types):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__}")
    return value


def check_float_dtype(value: Any, name: str = "dtype") -> np.dtype:
    """Return ``value`` as a numpy dtype if it is float32 or float64, else raise ``TypeError``.

    The parameter dtype of the course's models (:class:`course_lib.models.MLP`,
    :class:`course_lib.cnn.CNN`).

    Examples
    --------
    >>> check_float_dtype("float32")
    dtype('float32')
    >>> check_float_dtype(np.int64)
    Traceback (most recent call last):
        ...
    TypeError: dtype must be float32 or float64, got int64
    """
    if value is None:  # numpy reads None as float64: never what a caller meant
        raise TypeError(f"{name} must be float32 or float64, got None")
    dtype = np.dtype(value)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"{name} must be float32 or float64, got {dtype}")
    return dtype


def check_real(
    value: Any,
    name: str,
    low: float = -np.inf,
    high: float = np.inf,
    *,
    low_open: bool = False,
    high_open: bool | None = None,
    allow_inf: bool = False,
) -> float:
    """Return ``value`` as a float if it is one real number in the interval given.

    Parameters
    ----------
    value : object
        The argument: a Python or numpy real number (not a bool, string or array).
    name : str
        The parameter's name, used in the messages.
    low, high : float
        Bounds of the interval; ``low_open`` / ``high_open`` exclude them (as in
        :func:`check_range`).
    allow_inf : bool
        Accept infinity (within the bounds); NaN is never accepted.

    Returns
    -------
    float
        ``value`` as a Python float.

    Examples
    --------
    >>> check_real(0.5, "p", 0, 1)
    0.5
    >>> check_real(1.5, "p", 0, 1)
    Traceback (most recent call last):
        ...
    ValueError: p must be in [0, 1], got 1.5
    >>> check_real([0.5], "p", 0, 1)
    Traceback (most recent call last):
        ...
    TypeError: p must be a scalar, got an array of shape (1,)
    """
    left = "(" if low_open else "["
    right = ")" if (high_open if high_open is not None else np.isinf(high)) else "]"
    arr = as_real(value, name, allow_inf=allow_inf, allowed=f"in {left}{_fmt(low)}, {_fmt(high)}{right}")
    if arr.ndim != 0:
        raise TypeError(f"{name} must be a scalar, got an array of shape {arr.shape}")
    check_range(arr, name, low, high, low_open=low_open, high_open=high_open)
    return float(arr)


def check_positive(value: Any, name: str, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a finite float that is > 0 (or >= 0 with ``allow_zero``)."""
    return check_real(value, name, 0.0, np.inf, low_open=not allow_zero)


def check_sequence(
    value: Any, name: str, item_types: type | tuple[type, ...] | None = None, what: str = ""
) -> list:
    """Return ``value`` as a list if it is an iterable (not a string) of ``item_types``.

    Parameters
    ----------
    value : object
        The argument to check: a list, tuple, generator ... but not a ``str``, ``bytes``
        or mapping.
    name : str
        The parameter's name; an item is named ``name[i]`` in the message.
    item_types : type or tuple of type, optional
        Accepted item types (as for ``isinstance``); any item when omitted.
    what : str
        One item in words, e.g. ``"a BatchRun"``.

    Returns
    -------
    list
        The items.

    Examples
    --------
    >>> check_sequence((1, 2), "counts", int, "an int")
    [1, 2]
    >>> check_sequence("abc", "runs")
    Traceback (most recent call last):
        ...
    TypeError: runs must be a sequence, got str
    >>> check_sequence([1, None], "counts", int, "an int")
    Traceback (most recent call last):
        ...
    TypeError: counts[1] must be an int, got NoneType
    """
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a sequence, got {type(value).__name__}")
    items = list(value)
    if item_types is not None:
        for i, item in enumerate(items):
            check_type(item, f"{name}[{i}]", item_types, what or f"of type {item_types}")
    return items


def _has_huge_int(arr: np.ndarray) -> bool:
    """Whether an object array holds a Python int beyond float range (e.g. ``10**400``)."""
    for v in arr.flat:
        if isinstance(v, int) and not isinstance(v, bool):
            try:
                float(v)
            except OverflowError:
                return True
    return False


def _short(value: Any) -> str:
    """``repr(value)``, shortened for huge integers and long reprs."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and abs(int(value)) > 10**30:
        return f"an integer of about {int(abs(int(value)).bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _fmt(x: float) -> str:
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:g}"
