"""Exercise answer cells define what the learner may use BEFORE the ``answer =`` line.

An answer cell runs top to bottom: a name the cell assigns after ``answer = ...`` does not
exist yet when the learner's expression on that line runs (05 Ex 2 assigned ``S_pipe`` two
lines below ``answer =``, so an answer using it raised ``NameError``). For every exercise
answer cell of every notebook (a code cell with an ``answer = None`` line that is not a
solution), every name the cell assigns is assigned before its first ``answer =`` line.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _source(cell) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def _answer_cells(path: Path) -> list[tuple[str, str]]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [(cell.get("id", str(i)), _source(cell)) for i, cell in enumerate(nb["cells"])
            if cell["cell_type"] == "code" and "answer = None" in _source(cell)
            and not _source(cell).lstrip().startswith("%%solution")
            and "solution" not in cell.get("metadata", {}).get("tags", [])]


def late_names(source: str) -> list[str]:
    """Names ``source`` assigns only after its first ``answer =`` line (sorted)."""
    tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith("%")))
    answer_line = min(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "answer"
                      and isinstance(n.ctx, ast.Store))
    first: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            first[node.id] = min(first.get(node.id, node.lineno), node.lineno)
    return sorted(name for name, line in first.items() if name != "answer" and line > answer_line)


CELLS = [(path.name, cid, src) for path in NOTEBOOKS for cid, src in _answer_cells(path)]


def test_every_notebook_has_answer_cells():
    assert {name[:2] for name, *_ in CELLS} >= {"01", "02", "03", "04", "05", "06", "07", "13", "14", "15", "16"}
    assert len(CELLS) >= 35


@pytest.mark.parametrize(("name", "cid", "source"), CELLS, ids=[f"{n[:2]}-{c}" for n, c, _ in CELLS])
def test_names_the_learner_may_use_exist_before_the_answer_line(name, cid, source):
    late = late_names(source)
    assert not late, f"{name} cell {cid}: {late} assigned after `answer =`: the learner's answer cannot use them"


def test_the_rule_catches_the_reported_cell():
    reported = '''answer = None  # your answer
serial, pipes = comm_runs["serial, 1 BLAS thread"], comm_runs["pipes to rank 0, 2 workers"]
S_pipe = serial.time_per_step() / pipes.time_per_step()
ex.ex2_karp_flatt(answer, speedup=S_pipe, workers=N_PAR)
'''
    assert late_names(reported) == ["S_pipe", "pipes", "serial"]
    fixed = "\n".join(reported.splitlines()[1:3] + reported.splitlines()[:1] + reported.splitlines()[3:])
    assert late_names(fixed) == []
