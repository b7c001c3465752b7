"""What the tools read from a notebook cell (a dict as in the .ipynb file): one place."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .._validate import check_type

__all__ = ["cell_source", "cell_tags", "details_block", "details_parts", "slide_type"]

# One closed <details> block: the summary on the first line, then a blank line (without it
# JupyterLab's and GitHub's Markdown renderers leave the body unparsed), the body, a blank
# line and </details> on a line of its own.
_DETAILS = re.compile(r"\A<details><summary>(?P<summary>[^<\n]+)</summary>\n\n(?P<body>.+?)\n\n</details>\n?\Z", re.S)


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


def details_block(summary: str, body: str) -> str:
    """Markdown that shows ``summary`` and keeps ``body`` closed until it is clicked.

    The course hides answers and speaker notes this way, not by collapsing a cell:
    JupyterLab expands a collapsed Markdown cell when Run All renders it, GitHub and
    nbviewer ignore the collapse, but a ``<details>`` element stays closed everywhere.
    Markdown and math in ``body`` still render (the blank lines around it make it a
    Markdown block, not raw HTML).

    Examples
    --------
    >>> print(details_block("Answer (click to open)", "$S = 4$."))
    <details><summary>Answer (click to open)</summary>
    <BLANKLINE>
    $S = 4$.
    <BLANKLINE>
    </details>
    """
    check_type(summary, "summary", str, "the text shown while closed (str)")
    check_type(body, "body", str, "the Markdown shown when opened (str)")
    summary, body = summary.strip(), body.strip()
    if not summary or "\n" in summary or "<" in summary:
        raise ValueError(f"summary must be one line of plain text, got {summary!r}")
    if not body:
        raise ValueError("body must be non-empty Markdown")
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


def details_parts(cell: Any) -> tuple[str, str] | None:
    """``(summary, body)`` of a Markdown cell that is one closed :func:`details_block`,
    else None (not such a block, or one that opens by itself: ``<details open>``).

    Examples
    --------
    >>> details_parts({"cell_type": "markdown", "source": details_block("Notes", "Ask the room.")})
    ('Notes', 'Ask the room.')
    >>> details_parts({"cell_type": "markdown", "source": "Ask the room."}) is None
    True
    """
    if _cell(cell).get("cell_type") != "markdown":
        return None
    match = _DETAILS.match(cell_source(cell))
    return (match["summary"], match["body"]) if match else None
