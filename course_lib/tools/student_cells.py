"""What the student edition does to a notebook: no solutions, notes or stored answers.

:func:`student_notebook` is the transformation (:mod:`course_lib.tools.student` writes the
edition with it, :mod:`course_lib.tools.scratch` builds on it, and
:mod:`course_lib.tools.i18n` takes the sentences it rewrites into the Chinese catalogues).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from .._validate import check_type
from .cells import cell_source, cell_tags, slide_type

__all__ = ["EXERCISE_CELL", "LECTURER_OUTPUT", "STUDENT_TEXT", "is_exercise_cell", "student_notebook", "student_text"]

#: The line of an exercise cell in which the learner types the answer (the course's
#: convention, see the README); givens the learner chooses may come on lines before it.
EXERCISE_CELL = re.compile(r"^answer\s*=\s*None\b", re.M)

#: Sentences of the lecturer's edition that the student edition rewrites: (pattern, new text).
#: They speak of the worked solutions (removed in this edition) or of commands of the
#: repository that the edition does not hold. tests/test_student.py checks that no Markdown
#: cell of the edition still mentions a solution.
STUDENT_TEXT: tuple[tuple[re.Pattern[str], str], ...] = (
    # "A worked solution is hidden below each exercise (click the collapsed cell to reveal it)."
    # "The solution cells are hidden (click to expand) - try first." (01)
    # "Solutions are hidden below each exercise (click to expand)." (03)
    (re.compile(r"\b(?:(?:An?|The)\s+)?(?:worked\s+)?[Ss]olutions?(?:\s+cells?)?\s+(?:is|are)\s+hidden"
                r"(?:\s+below\s+each\s+exercise)?(?:\s*\([^)]*\))?(?:\s*-\s*try\s+first)?\."),
     "Run the cell to check your answer."),
    # "(The solution prints the steps too: compare the two ratios.)" (an exercise's worked solution)
    (re.compile(r"\s*\(The\s+solution\s[^)]*\)"), ""),
    # "For slides of every chapter, see `make slides` (README, section for lecturers)." (14)
    (re.compile(r"\s*For\s+slides\s+of\s+every\s+chapter,\s+see\s+`make\s+slides`[^.]*\."), ""),
    # The repository's tests are not part of the edition: "(`course_lib.testing`; `tests/a.py`,
    # `tests/b.py`)" keeps what the edition holds, "(`tests/a.py`)" goes, "`tests/x.py` checks it"
    # and "fails `tests/x.py`" name the course's tests, "the test suite (`make test`)" too (15, 03).
    (re.compile(r"(\(`[^`]+`);\s*`tests/[^`]+`(?:,\s*`tests/[^`]+`)*\)"), r"\1)"),
    (re.compile(r"\s*\(`tests/[^`]+`(?:,\s*`tests/[^`]+`)*\)"), ""),
    (re.compile(r"`tests/[^`]+`\s+checks\s+it"), "the course's tests check it"),
    (re.compile(r"fails\s+`tests/[^`]+`"), "fails the course's tests"),
    (re.compile(r"the\s+test\s+suite\s*\(`make\s+test`\)"),
     "the course's test suite (in the course's repository, not in this edition)"),
)

#: Tag of a cell whose stored output shows the lecturer's machine (the doctor's report of the
#: repository, with its slide and browser-test tools): the edition stores no output for it.
LECTURER_OUTPUT = "lecturer-output"

def is_exercise_cell(cell: Mapping[str, Any]) -> bool:
    """True for the code cell in which a learner types an answer (a line ``answer = None``).

    Examples
    --------
    >>> is_exercise_cell({"cell_type": "code", "source": "answer = None  # yours"})
    True
    >>> is_exercise_cell({"cell_type": "code", "source": "days = None  # your given\\nanswer = None"})
    True
    >>> is_exercise_cell({"cell_type": "code", "source": "answer = 10"})
    False
    """
    return bool(EXERCISE_CELL.search(cell_source(cell))) and cell.get("cell_type") == "code"


def student_text(markdown: str) -> str:
    """Markdown of the lecturer's edition as the student edition says it (:data:`STUDENT_TEXT`).

    Examples
    --------
    >>> student_text("Replace `None` and run the cell. A worked solution is hidden below each\\n"
    ...              "exercise (click the collapsed cell to reveal it).")
    'Replace `None` and run the cell. Run the cell to check your answer.'
    >>> student_text("How many samples? (The solution prints the steps too: compare the two ratios.)")
    'How many samples?'
    """
    check_type(markdown, "markdown", str, "Markdown text (str)")
    for pattern, new in STUDENT_TEXT:
        markdown = pattern.sub(new, markdown)
    return markdown


def _removed(cell: Mapping[str, Any]) -> bool:
    return "solution" in cell_tags(cell) or slide_type(cell) == "notes"


def student_notebook(nb: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of notebook ``nb`` (a dict as in the .ipynb file) for students.

    Solutions and notes go; exercise cells lose their outputs, execution count and the
    ``nbval-check-output`` tag; Markdown cells say what this edition holds
    (:func:`student_text`); every other cell is copied unchanged.

    Examples
    --------
    >>> nb = {"cells": [
    ...     {"cell_type": "markdown", "metadata": {}, "source": "### Exercise 1"},
    ...     {"cell_type": "code", "metadata": {"tags": ["nbval-check-output"]}, "source": "answer = None",
    ...      "outputs": [{"output_type": "stream", "name": "stdout", "text": "no answer"}],
    ...      "execution_count": 3},
    ...     {"cell_type": "code", "metadata": {"tags": ["solution"]}, "source": "answer = 1",
    ...      "outputs": [], "execution_count": 4},
    ...     {"cell_type": "markdown", "metadata": {"slideshow": {"slide_type": "notes"}},
    ...      "source": "Speaker notes: ..."}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    >>> out = student_notebook(nb)
    >>> [c["source"] for c in out["cells"]], out["cells"][1]["outputs"], out["cells"][1]["metadata"]
    (['### Exercise 1', 'answer = None'], [], {'tags': []})
    """
    check_type(nb, "nb", Mapping, "a notebook (a dict with a 'cells' list)")
    if not isinstance(nb.get("cells"), list):
        raise ValueError("nb must be a notebook (a dict with a 'cells' list)")
    out = copy.deepcopy(dict(nb))
    cells = []
    for cell in out["cells"]:
        if _removed(cell):
            continue
        if is_exercise_cell(cell) or LECTURER_OUTPUT in cell_tags(cell):
            cell["outputs"] = []
            cell["execution_count"] = None
            tags = cell.setdefault("metadata", {}).get("tags", []) or []
            cell["metadata"]["tags"] = [t for t in tags if t != "nbval-check-output"]
        if cell.get("cell_type") == "markdown":
            text = student_text(cell_source(cell))
            if text != cell_source(cell):  # same form as the file's: a list of lines or a str
                cell["source"] = text.splitlines(keepends=True) if isinstance(cell["source"], list) else text
        cells.append(cell)
    out["cells"] = cells
    return out
