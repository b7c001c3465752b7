"""The README's commands work as typed, from the repository root, and write where it says.

- ``make slides`` (no arguments), the one-deck command
  ``.venv/bin/python -m course_lib slides notebooks/02_scaling_laws.ipynb`` and the same with
  ``--execute`` (the notebook run in a fresh kernel first) write their decks to
  ``build/slides/`` at the repository root, never under ``course_lib/`` (run once per session
  by the ``readme_slides`` fixture of tests/readme_support.py);
- ``make student`` writes the student edition to ``build/student/``;
- outside a checkout the tools say what they looked for instead of writing somewhere else.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
from readme_support import (  # noqa: F401 - readme_slides: the fixture, run once per run
    ROOT,
    SLIDES_TIME_LIMIT,
    readme_commands_unavailable,
    readme_slides_fixture,
)

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))


def _nothing_under_the_package():
    strays = [p for p in ("build", "notebooks") if (ROOT / "course_lib" / p).exists()]
    assert strays == [], f"a tool wrote into course_lib/: {strays}"


@pytest.mark.slow
@pytest.mark.serial  # the browser tests share its decks (run 3 of make test)
@pytest.mark.timeout(SLIDES_TIME_LIMIT + 300)
def test_make_slides_and_the_one_deck_command_write_to_build_slides(readme_slides):
    run = readme_slides
    assert run.deck_dir == ROOT / "build" / "slides"
    # the one-deck command: its deck and an index, at the root
    assert "02_scaling_laws.slides.html" in run.one_deck_files, run.one_deck.stdout
    assert run.one_deck_files["02_scaling_laws.slides.html"] >= run.started - 1
    assert "1 decks" in run.one_deck.stdout and "build/slides/index.html" in run.one_deck.stdout
    assert "stored outputs" in run.one_deck.stdout and "fresh kernel" not in run.one_deck.stdout
    # the same with --execute: the notebook ran in a fresh kernel first
    assert "02_scaling_laws.slides.html" in run.executed_deck.stdout
    assert "executed in a fresh kernel" in run.executed_deck.stdout and "1 decks" in run.executed_deck.stdout
    # make slides: every chapter from its stored outputs, and the index listing them in order
    decks = {p.name: p for p in run.deck_dir.glob("*.slides.html")}
    for notebook in NOTEBOOKS:
        deck = decks.get(f"{notebook.stem}.slides.html")
        assert deck is not None, f"make slides wrote no deck for {notebook.name}"
        assert deck.stat().st_mtime >= run.started - 1, f"{deck.name} is left from an earlier run"
    assert f"{len(NOTEBOOKS)} decks" in run.make_slides.stdout
    assert run.make_slides.stdout.count("stored outputs") == len(NOTEBOOKS)
    index = (run.deck_dir / "index.html").read_text(encoding="utf-8")
    assert re.findall(r'<li><a href="([^"]+)">', index) == [f"{p.stem}.slides.html" for p in NOTEBOOKS]
    assert (run.deck_dir / "vendor" / "node_modules" / "reveal.js" / "package.json").is_file()
    _nothing_under_the_package()


def test_make_student_writes_build_student():
    reason = readme_commands_unavailable()
    if reason:
        pytest.skip(reason)
    proc = subprocess.run(["make", "student"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = ROOT / "build" / "student"
    assert str(out / "notebooks") in proc.stdout and str(out / "README.md") in proc.stdout
    assert sorted(p.name for p in (out / "notebooks").glob("[0-9]*.ipynb")) == [p.name for p in NOTEBOOKS]
    assert (out / "README.md").is_file() and (out / "Makefile").is_file() and (out / "course_lib").is_dir()
    _nothing_under_the_package()


@pytest.mark.parametrize("command", [["slides"], ["student"], ["notation"]])
def test_outside_a_checkout_the_tools_say_what_they_looked_for(tmp_path, command):
    """course_lib installed away from any checkout (here: a copy of the package beside no
    pyproject.toml), run from a folder that is no checkout either."""
    shutil.copytree(ROOT / "course_lib", tmp_path / "site" / "course_lib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "work").mkdir()
    proc = subprocess.run([sys.executable, "-m", "course_lib", *command], cwd=tmp_path / "work",
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "site")},
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0
    assert "no ddl-course folder found: looked for a folder holding pyproject.toml and notebooks/" in proc.stderr
    assert str(tmp_path / "work") in proc.stderr
    assert list((tmp_path / "work").iterdir()) == []
    assert not (tmp_path / "site" / "build").exists() and not (tmp_path / "site" / "course_lib" / "build").exists()
