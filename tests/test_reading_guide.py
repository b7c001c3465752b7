"""The README's reading guide and the code stay in step.

The guide lists the teaching core - the functions the chapters display - in chapter order,
each with its length in lines (``inspect.getsource``: signature, docstring and body). This
test recounts every row, checks that every function a notebook displays is in the guide, and
that the whole core stays short enough to read in an afternoon (under 800 lines).
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_teaching_core import DISPLAYED, _resolve  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^\| (\d\d) \| `([\w.]+)` \| (\d+) \|", re.MULTILINE)
MAX_TOTAL = 800


def guide() -> list[tuple[str, str, int]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## Reading guide")
    end = text.find("\n## ", start + 1)
    return [(ch, name, int(n)) for ch, name, n in ROW.findall(text[start:end if end > 0 else None])]


def lines_of(dotted: str) -> int:
    return len(inspect.getsource(_resolve(dotted)).splitlines())


def test_every_row_states_the_length_of_its_code():
    rows = guide()
    assert len(rows) >= 8
    wrong = [(name, n, lines_of(name)) for _, name, n in rows if lines_of(name) != n]
    assert wrong == [], f"README reading guide: (function, stated lines, actual lines) {wrong}"


def test_rows_follow_the_chapters():
    """Rows in chapter order, and each row's chapter is the notebook that shows the function (a
    renumbering that leaves a row behind fails)."""
    chapters = [ch for ch, _, _ in guide()]
    assert chapters == sorted(chapters)
    shown = set()
    for notebook, dotted in DISPLAYED:
        obj = _resolve(dotted)
        shown.add((notebook[:2], f"{obj.__module__}.{obj.__qualname__}"))
        if inspect.isclass(obj):  # a class displayed whole: its methods are shown too
            shown |= {(notebook[:2], f"{obj.__module__}.{obj.__qualname__}.{m}") for m in vars(obj)}
    for chapter, name, _ in guide():
        assert (chapter, name) in shown, f"reading guide row {chapter}: chapter {chapter} does not display {name}"


def test_every_displayed_function_is_in_the_guide():
    listed = {name for _, name, _ in guide()}
    for _, dotted in DISPLAYED:
        obj = _resolve(dotted)
        names = {f"{obj.__module__}.{obj.__qualname__}"}
        if inspect.isclass(obj):  # a class may be listed by its methods
            names |= {f"{obj.__module__}.{obj.__qualname__}.{m}" for m in vars(obj)}
        assert names & listed, f"the reading guide does not list {dotted}, which a notebook displays"


def test_the_core_stays_short_and_the_guide_says_how_short():
    total = sum(n for _, _, n in guide())
    assert total < MAX_TOTAL, f"the teaching core has {total} lines (at most {MAX_TOTAL})"
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"Together {total} lines" in text


def _chapter_map() -> dict[str, str]:
    """The README's "What runs on your machine" entries: {"07": text, ...}."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## What runs on your machine")
    section = text[start:text.find("\n#", start + 1)]
    parts = re.split(r"^- \*\*(\d\d)\*\*[^:]*:", section, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def test_the_chapter_map_names_what_each_notebook_runs():
    """Each entry of "What runs on your machine" names a chapter that exists, in order, and every
    `course_lib...` name or keyword argument it quotes appears in that chapter's notebook (an
    entry left behind by a split or a renumbering quotes what another notebook runs)."""
    entries = _chapter_map()
    notebooks = {p.name[:2]: p for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert list(entries) == sorted(entries) and set(entries) <= set(notebooks), list(entries)
    for chapter, text in entries.items():
        source = notebooks[chapter].read_text(encoding="utf-8")
        for quoted in re.findall(r"`([^`]+)`", text):
            name = re.split(r"[=(]", quoted)[0].split(".")[-1]
            if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and name not in {"os", "cpu_count"}:
                assert name in source, f"README entry {chapter} quotes {quoted!r}, not in {notebooks[chapter].name}"
