"""The Chinese quick start, README.zh-CN.md (issue 43, point 4), stays true: README.md links
it at the top, every ``make`` target and ``python -m course_lib`` command it names exists,
its links point at files of the checkout, and its chapter table gives every chapter with the
title of its Chinese notebook (the translation of the English title in the chapter's
catalogue)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_ZH = ROOT / "README.zh-CN.md"
LOCALE = ROOT / "locale" / "zh_CN" / "LC_MESSAGES"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _make_targets() -> set[str]:
    """The targets the Makefile defines (rules ``name: ...``; not variables ``NAME := ...``)."""
    names = set()
    for line in _text(ROOT / "Makefile").splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:(?![:=])", line)
        if match and not line.startswith("\t"):
            names.update(match.group(1).split())
    return names


def _make_commands(text: str) -> list[str]:
    """The targets of every ``make TARGET`` the text names (in code or in prose)."""
    return sorted(set(re.findall(r"(?<![\w-])make\s+([a-z][\w-]*)", text)))


def test_readme_links_the_chinese_readme_at_its_top():
    head = _text(README).split("\n## ", 1)[0]
    assert "](README.zh-CN.md)" in head.split("\n\n", 2)[1], "README.md's first paragraph after the title"
    assert "中文" in head
    assert "](README.md)" in _text(README_ZH).split("\n## ", 1)[0]


@pytest.mark.parametrize("path", [README_ZH, README], ids=lambda p: p.name)
def test_every_make_target_of_the_chinese_edition_exists(path):
    text = _text(path)
    if path == README:  # README.md's paragraphs on the Chinese edition and its decks
        text = "\n\n".join(p for p in text.split("\n\n") if re.search(r"\bzh\b|-zh\b|中文|Chinese", p))
    named = _make_commands(text)
    targets = _make_targets()
    assert {"lab-zh", "zh", "test-zh", "slides-zh", "zh-extract"} <= set(named)
    assert [t for t in named if t not in targets] == [], f"{path.name} names make targets the Makefile lacks"
    phony = re.search(r"^\.PHONY:(.*)$", _text(ROOT / "Makefile"), re.M).group(1).split()
    assert [t for t in named if t not in phony] == []


def test_the_course_lib_commands_it_names_exist():
    from course_lib.__main__ import USAGE
    from course_lib.tools import i18n

    text = _text(README_ZH)
    commands = re.findall(r"python -m course_lib ([a-z][\w-]*)((?: [^`\n]*)?)", text)
    assert {c for c, _ in commands} >= {"doctor", "i18n", "slides"}
    for command, rest in commands:
        assert re.search(rf"^  {re.escape(command)}\s", USAGE, re.M), f"python -m course_lib {command}"
        if command == "i18n":
            assert rest.split()[0] in re.findall(r"^  (\w+)\s", i18n.USAGE, re.M), rest
    options = {o for _, rest in commands for o in re.findall(r"--[a-z][\w-]*", rest)}
    assert options >= {"--lang", "--execute"}
    helptext = subprocess.run([sys.executable, "-m", "course_lib", "slides", "--help"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60, check=True).stdout
    assert [o for o in options if o not in helptext] == []
    assert "zh_CN" in helptext


def test_its_links_point_at_files_of_the_checkout():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", _text(README_ZH))
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert local and [link for link in local if not (ROOT / link).exists()] == []


def test_its_chapter_table_gives_every_chapter_with_its_chinese_title():
    rows = dict(re.findall(r"^\| `(\d\d_\w+)` \| (.+?) \|$", _text(README_ZH), re.M))
    assert list(rows) == [p.stem for p in NOTEBOOKS]
    for path in NOTEBOOKS:
        english = json.loads(_text(path))["cells"][0]["source"][0].removeprefix("# ").strip()
        entry = f'\nmsgid "{english}"\nmsgstr "{rows[path.stem]}"\n'
        assert entry in _text(LOCALE / f"{path.stem}.po"), \
            f"{path.stem}: {rows[path.stem]!r} is not the translation of its title {english!r}"
