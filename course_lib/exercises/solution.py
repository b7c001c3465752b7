"""Worked solutions that run with "Run All" but stay folded: the ``%%solution`` cell magic.

A worked solution must run whenever the notebook runs (CI tests it, and its verdict
proves the checker), but its output must not sit in the student's way. JupyterLab
collapses a cell's outputs from the ``jupyter.outputs_hidden`` metadata only until the
cell runs again, so metadata alone is not enough. A solution cell therefore starts with
``%%solution``: the cell runs as usual, and everything it prints or displays is shown
inside one closed ``<details>`` element ("worked solution's output"), in JupyterLab, on
GitHub and in nbviewer alike. The plain-text part of the output keeps the full text,
for tests and terminals. An error is not folded: it is raised as usual.

Load it once per notebook, in the setup cell: ``%load_ext course_lib.exercises.solution``.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._validate import check_type
from ..i18n import N_, tr

__all__ = ["SUMMARY", "Folded", "folded_html", "load_ipython_extension"]

#: The text of the closed fold.
SUMMARY = N_("worked solution's output (click to open)")


def folded_html(stdout: str, outputs: Sequence[Mapping[str, Any]] = ()) -> str:
    """The HTML of a closed fold holding ``stdout`` and the rich ``outputs`` (mime bundles).

    Images (PNG) are embedded, HTML is kept, everything else is shown as escaped text.

    Examples
    --------
    >>> folded_html("x = 1\\n", [{"text/plain": "✓ Correct"}])
    "<details><summary>worked solution's output (click to open)</summary><pre>x = 1\\n</pre><pre>✓ Correct</pre></details>"
    """
    check_type(stdout, "stdout", str, "text (str)")
    parts = [f"<pre>{html.escape(stdout)}</pre>"] if stdout else []
    for data in check_type(outputs, "outputs", Sequence, "a sequence of mime bundles (dicts)"):
        check_type(data, "outputs[i]", Mapping, "a mime bundle (dict)")
        if "image/png" in data:
            parts.append(f'<img src="data:image/png;base64,{data["image/png"]}"/>')
        elif "text/html" in data:
            parts.append(str(data["text/html"]))
        elif "text/markdown" in data or "text/plain" in data:
            parts.append(f"<pre>{html.escape(str(data.get('text/markdown', data.get('text/plain'))))}</pre>")
    return f"<details><summary>{tr(SUMMARY)}</summary>{''.join(parts)}</details>"


@dataclass(frozen=True)
class Folded:
    """A solution cell's output, folded (HTML) with its full text as the plain-text form."""

    stdout: str
    outputs: tuple[Mapping[str, Any], ...] = field(default=())

    def __repr__(self) -> str:
        texts = [str(d.get("text/markdown", d.get("text/plain", ""))) for d in self.outputs]
        return "\n".join(t for t in [self.stdout.rstrip("\n"), *texts] if t)

    def _repr_html_(self) -> str:
        return folded_html(self.stdout, self.outputs)


def _solution(line: str, cell: str) -> None:
    """``%%solution``: run the cell, then show all it printed or displayed in one closed fold."""
    from IPython import get_ipython
    from IPython.display import display
    from IPython.utils.capture import capture_output

    shell = get_ipython()
    with capture_output() as captured:
        result = shell.run_cell(cell)
    if not result.success:
        captured.show()  # an error is shown as usual, not folded
        result.raise_error()
        return
    display(Folded(captured.stdout + captured.stderr, tuple(dict(o.data) for o in captured.outputs)))


def load_ipython_extension(ipython) -> None:
    """Register the ``%%solution`` cell magic (``%load_ext course_lib.exercises.solution``)."""
    if not callable(getattr(ipython, "register_magic_function", None)):
        raise TypeError(f"ipython must be an IPython shell (what %load_ext passes), got {type(ipython).__name__}")
    ipython.register_magic_function(_solution, magic_kind="cell", magic_name="solution")
