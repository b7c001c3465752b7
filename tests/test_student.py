"""The student edition: solutions, notes and stored answers out; everything else as it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_lib.tools.student import is_exercise_cell, main, student_notebook, write_student_edition

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _slide_type(cell):
    return cell["metadata"].get("slideshow", {}).get("slide_type")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_edition_drops_solutions_and_notes_and_clears_answers(path):
    nb = _load(path)
    out = student_notebook(nb)
    kept = [c for c in nb["cells"] if "solution" not in c["metadata"].get("tags", []) and _slide_type(c) != "notes"]
    assert len(out["cells"]) == len(kept) < len(nb["cells"])
    assert nb["cells"] == _load(path)["cells"], "the source notebook must not change"
    exercises = 0
    for before, after in zip(kept, out["cells"], strict=True):
        assert "solution" not in after["metadata"].get("tags", [])
        assert _slide_type(after) != "notes"
        if is_exercise_cell(before):
            exercises += 1
            assert after["outputs"] == [] and after["execution_count"] is None
            assert "nbval-check-output" not in after["metadata"]["tags"]
            assert after["source"] == before["source"]
        else:
            assert after == before
    assert exercises >= 5, "every chapter has exercises"
    text = json.dumps(out)
    assert "Speaker notes" not in text and "Talking points" not in text


def test_exercise_cells_are_recognised_by_their_first_line():
    assert is_exercise_cell({"cell_type": "code", "source": ["answer = None  # days\n", "ex.ex3(answer)"]})
    assert not is_exercise_cell({"cell_type": "markdown", "source": "answer = None"})
    assert not is_exercise_cell({"cell_type": "code", "source": "x = 1\nanswer = None"})


def test_write_student_edition(tmp_path):
    src, out = tmp_path / "nb", tmp_path / "student"
    src.mkdir()
    nb = {"cells": [{"cell_type": "code", "metadata": {"tags": ["solution"]}, "source": "1", "outputs": [],
                     "execution_count": 1}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (src / "01_a.ipynb").write_text(json.dumps(nb))
    (src / "notation.md").write_text("# Notation\n")
    (out / "stale").mkdir(parents=True)
    written = write_student_edition(src, out)
    assert [p.name for p in written] == ["01_a.ipynb"]
    assert _load(out / "01_a.ipynb")["cells"] == []
    assert (out / "notation.md").read_text() == "# Notation\n"
    assert not (out / "stale").exists()
    with pytest.raises(ValueError, match="target must differ"):
        write_student_edition(src, src)
    with pytest.raises(ValueError, match="source must be a folder"):
        write_student_edition(tmp_path / "missing", out)
    assert main(["--source", str(tmp_path / "missing"), "--out", str(out)]) == 2


def test_bad_notebooks_are_refused():
    with pytest.raises(TypeError, match="nb"):
        student_notebook([])
    with pytest.raises(ValueError, match="cells"):
        student_notebook({"metadata": {}})
