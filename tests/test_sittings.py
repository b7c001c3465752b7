"""One chapter = one sitting (issue 27): every notebook stays within two caps.

At most :data:`MAX_CELLS` cells and at most :data:`MAX_WORDS` words of student-facing prose:
the words of the markdown cells once every ``<details>...</details>`` block (speaker notes,
folded answers) is removed, split on whitespace. Code cells and their outputs do not count.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MAX_CELLS = 60
MAX_WORDS = 3200

_DETAILS = re.compile(r"<details\b.*?</details>", re.S | re.I)


def _source(cell) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def prose_words(nb: dict) -> int:
    """Words of the markdown cells of ``nb`` with every ``<details>`` block removed.

    >>> prose_words({"cells": [{"cell_type": "markdown", "source": "one two <details>x y z</details> three"},
    ...                        {"cell_type": "code", "source": "not counted"}]})
    3
    """
    return sum(len(_DETAILS.sub(" ", _source(cell)).split())
               for cell in nb["cells"] if cell["cell_type"] == "markdown")


def sitting_problems(nb: dict) -> list[str]:
    """What makes ``nb`` too long for one sitting (empty if it fits both caps)."""
    problems = []
    if len(nb["cells"]) > MAX_CELLS:
        problems.append(f"{len(nb['cells'])} cells (at most {MAX_CELLS})")
    words = prose_words(nb)
    if words > MAX_WORDS:
        problems.append(f"{words:,} words of prose outside <details> (at most {MAX_WORDS:,})")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_fits_one_sitting(path):
    problems = sitting_problems(json.loads(path.read_text(encoding="utf-8")))
    assert not problems, f"{path.name} is too long for one sitting: {'; '.join(problems)}"


def _markdown(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def test_the_caps_catch_an_oversized_notebook():
    """Made-up notebooks: the rule fails on too many cells and on too many words, and a
    notebook whose long text is all inside <details> (and in code cells) passes."""
    words = " ".join(["word"] * (MAX_WORDS + 1))
    too_long = {"cells": [_markdown(words)]}
    assert prose_words(too_long) == MAX_WORDS + 1
    assert sitting_problems(too_long) == [f"{MAX_WORDS + 1:,} words of prose outside <details> "
                                          f"(at most {MAX_WORDS:,})"]
    too_many = {"cells": [_markdown("a short cell")] * (MAX_CELLS + 1)}
    assert sitting_problems(too_many) == [f"{MAX_CELLS + 1} cells (at most {MAX_CELLS})"]
    folded = {"cells": [_markdown(f"Two words <details><summary>Speaker notes</summary>\n\n{words}\n\n</details>"),
                        _markdown(f"<details>\n{words}\n</details>\n\nand three more"),
                        {"cell_type": "code", "metadata": {}, "source": words}] * (MAX_CELLS // 3)}
    assert prose_words(folded) == 5 * (MAX_CELLS // 3)
    assert sitting_problems(folded) == []
    at_the_caps = {"cells": [_markdown(" ".join(["word"] * MAX_WORDS))] + [_markdown("")] * (MAX_CELLS - 1)}
    assert sitting_problems(at_the_caps) == []
