"""A hint names only what the learner has met: every function, module or attribute name a
checker's hint (or named mistake) mentions was used by the chapter it belongs to or an
earlier one, in its code or its text.

The names are read from the checkers' source (every string of a checker module), as code-like
tokens: ``word_with_underscore``, ``module.attribute`` or ``call(``. A hint that said "look at
``stage_params``" in the memory chapter, a function the pipeline chapter introduces later,
fails here.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
#: Code-like tokens of a hint: snake_case names, dotted names, calls.
TOKEN = re.compile(r"\b(?:[a-z_][a-z0-9]*\.)*[a-z][a-z0-9]*_[a-z0-9_]+\b|\b[a-z][a-z0-9_]*(?=\()")
#: Words of a hint that are plain English or Python, not names a chapter introduces.
COMMON = {"len", "max", "min", "sum", "round", "abs", "int", "float", "print", "range", "sorted", "np", "math",
          "i", "e", "k", "f", "g", "x", "y", "n", "s"}


def _source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _used_until(index: int) -> set[str]:
    """Every word of the code and text of notebooks 0 .. index (their names, and each dotted part)."""
    words: set[str] = set()
    for path in NOTEBOOKS[: index + 1]:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            text = _source(cell)
            for o in cell.get("outputs", []):
                text += "".join(o.get("text", ""))
            for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text):
                words.add(word)
    return words


def _hint_tokens(module) -> dict[str, set[str]]:
    """Per checker function of ``module``: the code-like tokens of its string constants."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("ex"):
            keys = {id(n.slice) for n in ast.walk(node) if isinstance(n, ast.Subscript)}  # g["key"]: no text
            strings = [n.value for n in ast.walk(node)
                       if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in keys]
            strings += ["".join(v.value for v in n.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
                        for n in ast.walk(node) if isinstance(n, ast.JoinedStr)]
            body = ast.get_docstring(node) or ""
            tokens = {t for s in strings if s != body for t in TOKEN.findall(s)}
            out[node.name] = {t for t in tokens if t not in COMMON}
    return out


CHAPTERS = [(i, p) for i, p in enumerate(NOTEBOOKS)
            if importlib.util.find_spec(f"course_lib.exercises.{p.stem.split('_', 1)[1]}") is not None]


@pytest.mark.parametrize(("index", "path"), CHAPTERS, ids=[p.stem for _, p in CHAPTERS])
def test_every_hint_names_only_what_the_chapter_or_an_earlier_one_used(index, path):
    module = importlib.import_module(f"course_lib.exercises.{path.stem.split('_', 1)[1]}")
    used = _used_until(index)
    ahead = {}
    for fn, tokens in _hint_tokens(module).items():
        unknown = sorted(t for t in tokens if not all(part in used for part in t.split(".")))
        if unknown:
            ahead[fn] = unknown
    assert ahead == {}, f"{path.name}: hints name what no chapter up to this one has used: {ahead}"


def test_the_rule_sees_a_hint_that_points_ahead():
    memory_index = next(i for i, p in enumerate(NOTEBOOKS) if p.stem.endswith("_memory"))
    pipeline_index = next(i for i, p in enumerate(NOTEBOOKS) if p.stem.endswith("_pipeline_parallelism"))
    assert "stage_params" not in _used_until(memory_index)  # the pipeline chapter brings it
    assert "stage_params" in _used_until(pipeline_index)
    assert TOKEN.findall("count the parameters (stage_params) of schedule.partition_layers(model, 4)") == [
        "stage_params", "schedule.partition_layers"]
