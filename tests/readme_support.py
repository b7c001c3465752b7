"""The README's slide commands, run once per test run as a lecturer types them.

``readme_slides`` is a fixture that test files import (as ``readme_slides_fixture``) (tests/test_readme_commands.py checks
where the output went, tests/test_slides.py what the decks hold, the browser tests open the
decks). The commands themselves run once per process (:func:`run_readme_slides` is
cached), however many files import the fixture. A plain module, not a second
``conftest.py``: two conftest files (tests/ and tests/browser/) clash under
``--doctest-modules``.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
#: Seconds the README's slide commands may take together (one notebook executed, every
#: notebook exported; the first run also fetches the front-end packages with npm). Tests that use
#: :func:`readme_slides` set a pytest-timeout above this.
SLIDES_TIME_LIMIT = 1500
#: The one-deck command of the README (section "For lecturers"), as typed at the root.
ONE_DECK = [".venv/bin/python", "-m", "course_lib", "slides", "notebooks/02_scaling_laws.ipynb"]
#: The README's command that runs the notebook in a fresh kernel first, as typed.
EXECUTED_DECK = [".venv/bin/python", "-m", "course_lib", "slides", "--execute", "notebooks/02_scaling_laws.ipynb"]


def readme_commands_unavailable() -> str | None:
    """Why the README's commands cannot run here as typed (None if they can)."""
    if Path(sys.prefix).resolve() != VENV.resolve():
        return f"the README's commands run in the course's .venv; these tests run in {sys.prefix}"
    if shutil.which("make") is None:
        return "make is not installed"
    stale = subprocess.run(["make", "-q", ".venv/.install-stamp"], cwd=ROOT, capture_output=True, timeout=60)
    if stale.returncode != 0:
        return ".venv is older than pyproject.toml (make would reinstall first): run `make install`"
    return None


def missing_npm() -> str | None:
    """Why ``make slides`` cannot fetch its front-end packages (None if it can or need not)."""
    from course_lib.tools import slides

    if slides.missing_vendor_packages(ROOT / "build" / "slides" / "vendor") and shutil.which("npm") is None:
        return "make slides needs npm once to fetch reveal.js, MathJax ... (apt-get install npm)"
    return None


@dataclass(frozen=True)
class SlideRun:
    """What the README's slide commands did (see :func:`readme_slides`)."""

    started: float  # time.time() before the first command
    one_deck: subprocess.CompletedProcess
    one_deck_files: dict[str, float]  # build/slides/*.html after the one-deck command -> mtime
    executed_deck: subprocess.CompletedProcess  # the one-deck command with --execute
    make_slides: subprocess.CompletedProcess
    deck_dir: Path
    seconds: float = 0.0  # how long `make slides` took (every notebook exported)


@functools.cache
def run_readme_slides() -> SlideRun:
    """Run the README's slide commands once (later calls return the first run): the one-deck
    command, the same with ``--execute``, then ``make slides``."""
    deck_dir = ROOT / "build" / "slides"
    started = time.time()
    deadline = time.monotonic() + SLIDES_TIME_LIMIT

    def run(cmd: list[str]) -> subprocess.CompletedProcess:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False,
                              timeout=max(60.0, deadline - time.monotonic()))
        if proc.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n"
                               f"{proc.stderr[-3000:]}")
        return proc

    one_deck = run(ONE_DECK)
    files = {p.name: p.stat().st_mtime for p in deck_dir.glob("*.html")} if deck_dir.is_dir() else {}
    executed = run(EXECUTED_DECK)
    t0 = time.monotonic()
    make_slides = run(["make", "slides"])
    return SlideRun(started, one_deck, files, executed, make_slides, deck_dir, time.monotonic() - t0)


@pytest.fixture(scope="session", name="readme_slides")
def readme_slides_fixture() -> SlideRun:
    """The README's slide commands, run once per session from the repository root as typed:
    first the one-deck command, then ``make slides`` (no arguments). Skipped when they
    cannot run here as typed (not the course's .venv, no make, no npm for the first fetch),
    except that a missing npm fails where ``DDL_REQUIRE_BROWSER=1`` (CI)."""
    reason = readme_commands_unavailable()
    if reason:
        pytest.skip(reason)
    reason = missing_npm()
    if reason:
        if os.environ.get("DDL_REQUIRE_BROWSER") == "1":
            pytest.fail(f"DDL_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    try:
        return run_readme_slides()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
