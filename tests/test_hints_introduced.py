"""Issue 44, item 7: a hint names only what the learner has met.

Every function or method a checker's hint (or a named mistake) of chapters 09-14 mentions must
appear in the notebooks before it: in an earlier chapter, or in this chapter above the exercise's
answer cell (its question included; hidden worked solutions do not count, the learner has not
opened them yet). The names looked for are the callables of ``course_lib`` and the methods of the
running example, so notation (``n_ckpt``, ``N_p``) and prose are left alone.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import pytest

import course_lib
from course_lib.models import MLP

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHAPTERS = ("09_memory", "10_activations", "11_pipeline_parallelism", "12_tensor_parallelism",
            "14_hybrid_parallelism")
#: Wrong answers that match no right answer: they bring out the generic hint.
PROBES = (987_654.321, 987_654, (987, 654))


def _library_names() -> set[str]:
    names = {n for n, _ in inspect.getmembers(MLP, callable) if not n.startswith("_")}
    for info in pkgutil.walk_packages(course_lib.__path__, "course_lib."):
        if any(part.startswith("_") for part in info.name.split(".")) or ".tools" in info.name:
            continue
        module = importlib.import_module(info.name)
        names |= {n for n, v in vars(module).items() if callable(v) and not n.startswith("_")}
    return {n for n in names if "_" in n or n.islower() and len(n) > 5}


LIBRARY = _library_names()


def _source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _exercises(path: Path):
    """(checker name, text the learner has seen before its answer cell) of every exercise."""
    earlier = "".join(_source(c) for p in NOTEBOOKS if p.name < path.name
                      for c in json.loads(p.read_text(encoding="utf-8"))["cells"])
    seen = earlier
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        text = _source(cell)
        if "solution" in cell["metadata"].get("tags", []):
            continue
        match = re.search(r"\bex\.(ex_\w+)\(answer", text)
        if match and text.lstrip().startswith("answer = None"):
            yield match.group(1), seen
        seen += text


def _named(message: str) -> set[str]:
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*", message))
    return {w.split(".")[-1] for w in words} & LIBRARY


def test_the_probe_finds_a_name():
    assert "partition_layers" in _named("split the layers with partition_layers; use model.layer_range(lo, hi)")
    assert "layer_range" in _named("model.layer_range(lo, hi)") and not _named("n_ckpt near sqrt(n_layers)")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_hints_name_only_what_the_learner_has_met(chapter):
    path = ROOT / "notebooks" / f"{chapter}.ipynb"
    module = importlib.import_module(f"course_lib.exercises.{chapter[3:]}")
    found = list(_exercises(path))
    assert found, f"{chapter}: no exercise found"
    unmet = {}
    for checker, seen in found:
        messages = " ".join(str(getattr(module, checker)(probe)) for probe in PROBES)
        missing = {name for name in _named(messages) if name not in seen}
        if missing:
            unmet[checker] = sorted(missing)
    assert not unmet, f"{chapter}: hints name what no notebook has introduced before them: {unmet}"
