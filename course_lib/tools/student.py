"""The student edition: the notebooks without solutions, speaker notes or answers.

``python -m course_lib student`` (``make student``) writes ``build/student/``: every
notebook of ``notebooks/`` with

- the worked solutions removed (cells tagged ``solution``),
- the speaker notes and talking points removed (slide type ``notes``),
- the outputs of the exercise cells (``answer = None`` and its checker) cleared, so no
  verdict is stored in the file, and the ``nbval-check-output`` tag taken off them,

and everything else as it is, stored outputs included (figures, tables). The notation
page is copied beside them, so the links in the notebooks work. Give ``build/student/`` to
students; lecturers keep ``notebooks/`` (solutions collapsed, notes collapsed) and the
slides (``make slides``), whose speaker view (key S) shows the notes.

CI runs the student edition under nbval, so an edition in which a later cell needs a
removed one fails.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._validate import check_type
from .cells import cell_source, cell_tags, slide_type

__all__ = ["EXERCISE_CELL", "is_exercise_cell", "main", "student_notebook", "write_student_edition"]

#: The first line of an exercise cell (the course's convention, see the README).
EXERCISE_CELL = re.compile(r"^\s*answer\s*=\s*None\b")

ROOT = Path(__file__).resolve().parents[2]


def is_exercise_cell(cell: Mapping[str, Any]) -> bool:
    """True for the code cell in which a learner types an answer (``answer = None``).

    Examples
    --------
    >>> is_exercise_cell({"cell_type": "code", "source": "answer = None  # yours"})
    True
    >>> is_exercise_cell({"cell_type": "code", "source": "answer = 10"})
    False
    """
    return bool(EXERCISE_CELL.match(cell_source(cell))) and cell.get("cell_type") == "code"


def _removed(cell: Mapping[str, Any]) -> bool:
    return "solution" in cell_tags(cell) or slide_type(cell) == "notes"


def student_notebook(nb: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of notebook ``nb`` (a dict as in the .ipynb file) for students.

    Solutions and notes go; exercise cells lose their outputs, execution count and the
    ``nbval-check-output`` tag; every other cell is copied unchanged.

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
        if is_exercise_cell(cell):
            cell["outputs"] = []
            cell["execution_count"] = None
            tags = cell.setdefault("metadata", {}).get("tags", []) or []
            cell["metadata"]["tags"] = [t for t in tags if t != "nbval-check-output"]
        cells.append(cell)
    out["cells"] = cells
    return out


def write_student_edition(source: Path | str = ROOT / "notebooks",
                          target: Path | str = ROOT / "build" / "student") -> list[Path]:
    """Write the student edition of every notebook in ``source`` to ``target``.

    ``target`` is emptied first; Markdown pages beside the notebooks (the notation page)
    are copied as they are. Returns the notebooks written, in chapter order.
    """
    source, target = Path(source), Path(target)
    if not source.is_dir():
        raise ValueError(f"source must be a folder of notebooks, got {source}")
    if target.resolve() == source.resolve():
        raise ValueError("target must differ from source (the edition would overwrite the notebooks)")
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    written = []
    for path in sorted(source.glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        out = target / path.name
        out.write_text(json.dumps(student_notebook(nb), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(out)
    for page in sorted(source.glob("*.md")):
        shutil.copy2(page, target / page.name)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m course_lib student [--source DIR] [--out DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m course_lib student",
                                     description="Write the student edition of the notebooks.")
    parser.add_argument("--source", default=str(ROOT / "notebooks"), help="notebook folder (default: notebooks/)")
    parser.add_argument("--out", default=str(ROOT / "build" / "student"), help="output folder (default: build/student/)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        written = write_student_edition(args.source, args.out)
    except ValueError as exc:
        print(f"student: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} notebooks to {args.out}")
    return 0
