"""Argument checks shared by the course modules (a leaf: imports only numpy).

Every public function of the course validates its input with these helpers so that
bad input always gives a ``TypeError`` or ``ValueError`` that names the parameter and
the allowed range.
"""

from __future__ import annotations

import numbers
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


def check_int(value: Any, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as ``int`` if it is an integer within [minimum, maximum]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        lo = "-inf" if minimum is None else str(minimum)
        hi = "inf" if maximum is None else str(maximum)
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value}")
    return value


def check_positive(value: Any, name: str, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a finite float that is > 0 (or >= 0 with ``allow_zero``)."""
    arr = as_real(value, name)
    if arr.ndim != 0:
        raise TypeError(f"{name} must be a scalar, got an array of shape {arr.shape}")
    check_range(arr, name, 0.0, np.inf, low_open=not allow_zero)
    return float(arr)


def _fmt(x: float) -> str:
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:g}"
