"""Constants and helpers shared by the browser tests and their conftest (a plain module,
so the test modules can import it: tests/browser is on sys.path under pytest's default
``prepend`` import mode)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from course_lib.tools.doctor import CHROMIUM_DEFAULT, CHROMIUM_ENV, find_chromium

ROOT = Path(__file__).resolve().parents[2]
# DDL_BROWSER_NOTEBOOKS: test another folder of notebooks (e.g. drafts); default notebooks/.
NOTEBOOK_DIR = Path(os.environ.get("DDL_BROWSER_NOTEBOOKS") or ROOT / "notebooks")
ARTIFACTS = ROOT / "test-artifacts"
VENDOR_DIR = ROOT / "build" / "slides" / "vendor"  # shared with `make slides` (a cache)
# The system chromium: $DDL_CHROMIUM, else Debian's /usr/bin/chromium, else chromium or
# chromium-browser on PATH (the same function tells `python -m course_lib doctor`).
CHROMIUM: Path | None = find_chromium()
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
]
REQUIRE = os.environ.get("DDL_REQUIRE_BROWSER") == "1"

#: notebook name -> list of (slider description, latency in ms), filled by the Lab tests.
LATENCIES: dict[str, list[tuple[str, float]]] = {}
#: phase -> seconds, filled by the fixtures and tests (reported at the end).
DURATIONS: dict[str, float] = {}
#: How many cores were busy (all processes, the test's own included) on average while each
#: notebook's sliders moved (from /proc/stat; Linux only).
CORES_BUSY: dict[str, float] = {}
#: The slide-deck build of the ``decks`` fixture: seconds, notebooks, executed (reported).
SLIDE_BUILD: dict[str, float | int | bool] = {}
#: Goal for the median slider-to-figure latency (reported, not asserted).
LATENCY_GOAL_MS = 300


def notebooks() -> list[Path]:
    """Every notebook of the course, in chapter order (the tests iterate over them)."""
    return sorted(NOTEBOOK_DIR.glob("*.ipynb"))


def unavailable(reason: str):
    """Skip, or fail when the CI requires the browser tests to run."""
    if REQUIRE:
        pytest.fail(f"{reason} (DDL_REQUIRE_BROWSER=1 turns this skip into a failure)", pytrace=False)
    pytest.skip(reason)


def browser_missing() -> str | None:
    if CHROMIUM is None:
        named = os.environ.get(CHROMIUM_ENV, "").strip()
        if named:
            return f"browser tests: ${CHROMIUM_ENV}={named} is not a chromium executable"
        return (f"browser tests need a system chromium ({CHROMIUM_DEFAULT}, or chromium on PATH, "
                f"or ${CHROMIUM_ENV}): apt-get install chromium")
    if importlib.util.find_spec("playwright") is None:
        return "browser tests need playwright: pip install -e '.[browser]' (never `playwright install`)"
    return None


def evaluate(page, js: str, arg=None, timeout_s: float = 60):
    """``page.evaluate(js, arg)`` that fails after ``timeout_s`` (playwright's evaluate
    waits forever for a promise that never settles)."""
    wrapped = (
        "([arg, ms]) => Promise.race([Promise.resolve((" + js + ")(arg)),"
        " new Promise((_, reject) => setTimeout(() => reject(new Error("
        "'no answer after ' + ms / 1000 + ' s')), ms))])"
    )
    return page.evaluate(wrapped, [arg, int(timeout_s * 1000)])


def cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) clock ticks of all cores since boot, from /proc/stat (None elsewhere);
    the difference of two readings over the difference of totals, times the core count,
    is how many cores were busy in between."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def cores_busy(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Average number of busy cores between two :func:`cpu_ticks` readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1]) * (os.cpu_count() or 1)
