"""Constants and helpers shared by the browser tests and their conftest (a plain module,
so the test modules can import it: tests/browser is on sys.path under pytest's default
``prepend`` import mode)."""

from __future__ import annotations

import importlib.util
import os
import re
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
REQUIRE_I18N = os.environ.get("DDL_REQUIRE_I18N") == "1"
#: The Chinese edition's folder below notebooks/ (the zh notebooks' relative links assume it).
ZH = "zh"

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


def lab_notebooks() -> list[str]:
    """What the JupyterLab tests open, as paths below notebooks/ without ``.ipynb``: every
    English notebook (``07_data_parallelism``), then every Chinese one (``zh/07_data_parallelism``;
    the ``zh_edition`` fixture builds them from locale/). The Chinese ones only when the
    notebooks are the repository's own (not ``$DDL_BROWSER_NOTEBOOKS``): the edition is built
    from the checkout's notebooks and catalogues."""
    english = [nb.stem for nb in notebooks()]
    if NOTEBOOK_DIR.resolve() != (ROOT / "notebooks").resolve():
        return english
    return english + [f"{ZH}/{stem}" for stem in english]


def i18n_missing() -> str | None:
    """Why the Chinese edition cannot be built here (its ``[i18n]`` extra), else None."""
    for module in ("mdpo", "polib"):
        if importlib.util.find_spec(module) is None:
            return f"the Chinese notebooks need {module}: pip install -e '.[i18n]'"
    return None


def unavailable_i18n(reason: str):
    """Skip, or fail when the CI requires the Chinese edition (as tests/test_i18n.py does)."""
    if REQUIRE_I18N:
        pytest.fail(f"{reason} (DDL_REQUIRE_I18N=1 turns this skip into a failure)", pytrace=False)
    pytest.skip(reason)


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


# ------------------------------------------------------------------ English left in Chinese text
# Material that is no sentence even when it is spelled in English letters: URLs, file paths
# (anything with a slash or a backslash), identifiers (a letter or digit, then _ or ., then
# another: snake_case, module.function, file.ext, e.g.) and dtype names (float32, bfloat16,
# int8, fp16, ...). Each is replaced by a break, so the words on either side of it are two
# runs, never one.
_NOT_PROSE = re.compile(r"""
    (?:[A-Za-z][A-Za-z0-9+.-]*://|www\.)\S+     # URLs
  | \S*[/\\]\S*                                 # file paths
  | \S*[A-Za-z0-9][_.][A-Za-z0-9]\S*            # identifiers, dotted names
  | \S*_\S*                                     # _private, __dunder__, trailing_
  | \b(?:bfloat\d*|float\d+|u?int\d+|fp\d+|bf\d+|complex\d+|e\dm\d(?:fn)?)\b   # dtypes
""", re.X)
# A word: two or more ASCII letters (with ' or - inside), or one of the one-letter words a,
# A, I; any other single letter is a symbol (N, C, H, W; r x N x 2), not a word.
_WORD = r"(?<![\w'’-])(?:[A-Za-z]{2,}(?:['’-][A-Za-z]+)*|[A-Za-z](?:['’-][A-Za-z]+)+|[aAI])(?![\w'’-])"
#: An English sentence: at least this many English words in a row, separated only by spaces,
#: tabs or commas (a full stop, a colon, a bracket, a line break or any CJK character ends a run).
ENGLISH_RUN = 4
_SENTENCE = re.compile(rf"{_WORD}(?:[ \t\u00a0,]+{_WORD}){{{ENGLISH_RUN - 1},}}")


#: What a Chinese sentence quotes in English on purpose: a term's English beside it in
#: full-width brackets (（fully sharded data parallelism）, the house rule for a key concept)
#: and a quotation of an English source in Chinese quotation marks (“not real single processor”).
_QUOTED = re.compile(r"（[^（）]*）|“[^“”]*”")


def english_sentences(text: str) -> list[str]:
    """The English sentences left in ``text`` (what a reader sees of a Chinese notebook):
    runs of at least :data:`ENGLISH_RUN` English words (ASCII letters, with ' or - inside a
    word; a single letter only as a, A or I: others are symbols) separated only by spaces,
    tabs or commas, once URLs, file paths, identifiers with
    ``_`` or ``.`` and dtype names are taken out (:data:`_NOT_PROSE`), and what a Chinese
    sentence quotes in English on purpose (:data:`_QUOTED`).

    >>> english_sentences("工作进程 the workers took longer than expected，见 torch.distributed")
    ['the workers took longer than expected']
    >>> english_sentences("算子内并行（intra-operator parallelism），见 https://example.org/a/long/path")
    []
    >>> english_sentences("从 float32 to bfloat16 in ring_all_reduce 里")
    []
    >>> english_sentences("Ring all-reduce, tree all-reduce, and 2D torus")
    ['Ring all-reduce, tree all-reduce, and']
    >>> english_sentences("布局 N, C, H, W，共 r x N x 2 字节；I took a long time")
    ['I took a long time']
    >>> english_sentences("完全分片数据并行（fully sharded data parallelism）；批注写道“not real single processor”")
    []
    """
    text = _QUOTED.sub(" \u2029 ", text)
    return [m.group(0).strip(" \t\u00a0,") for m in _SENTENCE.finditer(_NOT_PROSE.sub(" \u2029 ", text))]
