"""What the tools read from a notebook cell (a dict as in the .ipynb file): one place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._validate import check_type

__all__ = ["cell_source", "cell_tags", "slide_type"]


def _cell(cell: Any) -> Mapping[str, Any]:
    return check_type(cell, "cell", Mapping, "a notebook cell (a dict)")


def cell_source(cell: Any) -> str:
    """The cell's source as one string (the file may store it as a list of lines).

    Examples
    --------
    >>> cell_source({"source": ["a = 1\\n", "b = 2"]})
    'a = 1\\nb = 2'
    """
    src = _cell(cell).get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def cell_tags(cell: Any) -> set[str]:
    """The cell's tags (``metadata.tags``).

    Examples
    --------
    >>> sorted(cell_tags({"metadata": {"tags": ["solution", "setup"]}}))
    ['setup', 'solution']
    """
    return set(_cell(cell).get("metadata", {}).get("tags", []) or [])


def slide_type(cell: Any) -> str:
    """The cell's slide type (``metadata.slideshow.slide_type``), ``"-"`` when unset.

    Examples
    --------
    >>> slide_type({"metadata": {"slideshow": {"slide_type": "notes"}}}), slide_type({"metadata": {}})
    ('notes', '-')
    """
    slideshow = _cell(cell).get("metadata", {}).get("slideshow", {}) or {}
    return slideshow.get("slide_type", "-") or "-"
