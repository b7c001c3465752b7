"""Worked solutions run with "Run All" but fold their output (the %%solution magic)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_lib.exercises.solution import SUMMARY, Folded, folded_html

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_the_fold_is_closed_and_escapes_text():
    out = folded_html("a < b\n", [{"text/plain": "✓ Correct: x = 1."}, {"image/png": "AAAA", "text/plain": "<Figure>"}])
    assert out.startswith(f"<details><summary>{SUMMARY}</summary>") and out.endswith("</details>")
    assert "<details open" not in out
    assert "a &lt; b" in out and '<img src="data:image/png;base64,AAAA"/>' in out and "<Figure>" not in out
    folded = Folded("hello\n", ({"text/plain": "✓ Correct: x = 1."},))
    assert repr(folded) == "hello\n✓ Correct: x = 1." and folded._repr_html_().count("<pre>") == 2
    with pytest.raises(TypeError, match="stdout"):
        folded_html(None)
    with pytest.raises(TypeError, match="outputs"):
        folded_html("", [1])


def test_the_magic_runs_the_cell_folds_its_output_and_keeps_errors(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext course_lib.exercises.solution\nfrom course_lib.exercises import scaling_laws as ex"),
        nbformat.v4.new_code_cell("%%solution\nprint('working')\nanswer = 1 / ex.EX1_LIMIT['serial']\nex.ex1_limit(answer)"),
        nbformat.v4.new_code_cell("print(round(answer, 2))"),
        nbformat.v4.new_code_cell("%%solution\n1 / 0"),
    ]
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=60, allow_errors=True)
    client.execute(cwd=str(tmp_path))
    (solution,) = nb.cells[1].outputs
    assert solution.output_type == "display_data"
    assert solution.data["text/html"].startswith("<details><summary>")
    assert "✓ Correct" in solution.data["text/plain"] and "working" in solution.data["text/plain"]
    assert nb.cells[2].outputs[0].text.strip() == "33.33"  # the solution's variables stay defined
    assert any(o.output_type == "error" and o.ename == "ZeroDivisionError" for o in nb.cells[3].outputs)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_solution_cell_folds_and_the_setup_loads_the_magic(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    sources = ["".join(c["source"]) for c in cells]
    solutions = [s for c, s in zip(cells, sources) if "solution" in c["metadata"].get("tags", [])]
    assert solutions and all(s.startswith("%%solution\n") for s in solutions)
    setup = [s for c, s in zip(cells, sources) if "setup" in c["metadata"].get("tags", [])]
    assert any("%load_ext course_lib.exercises.solution" in s for s in setup)
    for c in cells:
        if "solution" in c["metadata"].get("tags", []):
            for out in c.get("outputs", []):
                if out["output_type"] in ("display_data", "execute_result", "stream"):
                    assert out["output_type"] == "display_data" and "text/html" in out["data"], (
                        "a solution's stored output is not folded: re-execute the notebook")
