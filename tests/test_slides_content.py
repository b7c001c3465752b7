"""What the decks show (issue 25, point 6), without a browser: speaker notes with their
formulas as text (reveal.js's speaker view runs no MathJax), live figures as their static
PNG without sliders, code that wraps at the slide's edge. The decks are built once, from
the stored outputs (as ``make slides`` does); tests/browser/test_slides_browser.py opens the
decks that ``make slides`` wrote."""

from __future__ import annotations

import copy
import functools
import html
import json
import re
from pathlib import Path

import fast_schema  # noqa: F401 - before nbformat: see its docstring
import nbformat
import pytest

from course_lib.tools import slides
from course_lib.tools.cells import details_parts

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
NOTES = re.compile(r'<aside class="notes">(.*?)</aside>', re.S)
TEX_MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$(?!\s)(.+?)(?<![\\\s])\$(?!\d)", re.S)


class _Decks(dict):
    """Each notebook's deck from its stored outputs, built on first use and once per test
    process (under pytest-xdist a worker builds only the decks of the tests it runs).
    The front-end files are faked: the export only writes relative URLs to them."""

    def __init__(self, tmp: Path):
        super().__init__()
        self.vendor = tmp / "vendor"
        self.out = tmp / "out"
        for name, version in slides.VENDOR_PACKAGES.items():
            pkg = self.vendor / "node_modules" / name
            pkg.mkdir(parents=True)
            (pkg / "package.json").write_text(json.dumps({"name": name, "version": version}))

    def __missing__(self, name: str) -> str:
        # every deck in one folder, as make slides writes them (one exporter serves them all)
        built = slides.build_slides([ROOT / "notebooks" / name], self.out, vendor_dir=self.vendor,
                                    execute=False, log=lambda msg: None)
        self[name] = built[0].path.read_text(encoding="utf-8")
        return self[name]


@pytest.fixture(scope="module")
def decks(tmp_path_factory):
    """``decks[notebook file name]``: its deck's HTML (see :class:`_Decks`)."""
    return _Decks(tmp_path_factory.mktemp("decks"))


@functools.cache  # each notebook read once per test process (several MB of stored outputs)
def _kept(path):
    return tuple(slides.kept_cells(nbformat.read(path, as_version=4).cells))


def _notes_cells(path):
    return [c for c in _kept(path) if c.metadata.get("slideshow", {}).get("slide_type") == "notes"]


# ------------------------------------------------------------------ formulas as text
@pytest.mark.parametrize(("tex", "text"), [
    ("$N_p$", "N<sub>p</sub>"),
    ("$2(N-1)\\alpha$", "2(N-1)α"),
    ("$2m/\\beta$", "2m/β"),
    ("$(N_p-1)/(M+N_p-1)$", "(N<sub>p</sub>-1)/(M+N<sub>p</sub>-1)"),
    ("$\\frac{S(N)}{N}$", "S(N)/N"),
    ("$\\frac{1/S - 1/N}{1 - 1/N}$", "(1/S - 1/N)/(1 - 1/N)"),
    ("$T = D \\cdot C / (r \\cdot N \\cdot \\eta)$", "T = D · C / (r · N · η)"),
    ("$B = 16{,}384$", "B = 16,384"),
    ("$t_{\\text{iter}}(64)$", "t<sub>iter</sub>(64)"),
    ("$N_d \\times N_p \\times N_t$", "N<sub>d</sub> × N<sub>p</sub> × N<sub>t</sub>"),
    ("$10^{-6}$", "10<sup>-6</sup>"),
    ("$$S(N) = (1-p) + p\\,N$$", "S(N) = (1-p) + p N"),
    ("$\\sqrt{2}$", "√2"),
    ("$a * b$", "a &#42; b"),  # no Markdown emphasis from a formula
])
def test_math_as_text_hand_derived(tex, text):
    assert slides.math_as_text(tex) == f'<span class="ddl-math">{text}</span>'


def test_math_as_text_leaves_prose_alone():
    prose = "It costs \\$5 and 10$ more; a lone $ sign stays."
    assert slides.math_as_text(prose) == prose
    assert slides.math_as_text("no math") == "no math"
    with pytest.raises(TypeError, match="markdown"):
        slides.math_as_text(None)


def test_an_unknown_command_stays_readable():
    assert slides.math_as_text("$\\foo x$") == '<span class="ddl-math">&#92;foo x</span>'


# ------------------------------------------------------------------ what the deck takes from a notebook
def test_deck_notebook_copies_and_keeps_widget_only_outputs():
    view = {"output_type": "display_data", "metadata": {},
            "data": {slides.WIDGET_VIEW_MIME: {"model_id": "x"}, "text/plain": "<widget>"}}
    nb = {"metadata": {"widgets": {"state": {}}}, "cells": [
        {"cell_type": "code", "metadata": {}, "source": "w", "outputs": [view]},
        {"cell_type": "markdown", "metadata": {"slideshow": {"slide_type": "notes"}}, "source": "Plain $p$."},
    ]}
    before = copy.deepcopy(nb)
    out = slides.deck_notebook(nb)
    assert nb == before, "deck_notebook modified its argument"
    # a widget without a static form is kept, and so is the state it needs
    assert slides.WIDGET_VIEW_MIME in out["cells"][0]["outputs"][0]["data"] and "widgets" in out["metadata"]
    # notes that are not (yet) a <details> block are taken as they are
    assert out["cells"][1]["source"] == 'Plain <span class="ddl-math">p</span>.'


# ------------------------------------------------------------------ the built decks
#: The decks make test-fast builds (each about a second): notes with formulas, live figures,
#: the bubble note; make test builds every deck (the others are marked slow).
FAST_DECKS = ("02_scaling_laws", "11_pipeline_parallelism")


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem, marks=[] if p.stem in FAST_DECKS else [pytest.mark.slow])
                                  for p in NOTEBOOKS])
def test_deck_notes_are_open_and_live_figures_static(decks, path):
    """One test per deck (each deck is built once): its notes, then its live figures."""
    _notes_are_open_with_formulas_as_text(decks[path.name], path)
    _live_figures_are_static(decks[path.name], path)


def _notes_are_open_with_formulas_as_text(deck, path):
    """Every notes cell becomes one speaker note, open (no <details>), with each of its
    formulas as HTML text: no TeX left for a window without MathJax to drop."""
    asides = NOTES.findall(deck)
    cells = _notes_cells(path)
    assert len(asides) == len(cells) > 0
    formulas = 0
    for aside, cell in zip(asides, cells):
        assert "<details" not in aside and "<summary" not in aside, "a speaker note is still folded"
        assert not TEX_MATH.search(html.unescape(re.sub(r"<[^>]+>", "", aside))), f"TeX left in a note: {aside[:200]}"
        body = details_parts(cell)[1]
        for match in TEX_MATH.finditer(body):
            formulas += 1
            text = slides.math_as_text(match.group(0))
            # the deck's Markdown renderer may write an escaped character (&#42; for *) as itself
            assert text in aside or html.unescape(text) in html.unescape(aside), \
                f"formula {match.group(0)!r} is not in the deck's note as {text!r}"
        assert re.sub(r"<[^>]+>", "", aside).strip(), "an empty speaker note"
    if path.name.endswith("_pipeline_parallelism.ipynb"):
        assert formulas >= 10, "the pipeline chapter's bubble note derives the bubble with formulas"
        assert '<span class="ddl-math">2(M+N<sub>p</sub>-1)</span>' in deck


def _live_figures_are_static(deck, path):
    """A slide show has no kernel: a live figure shows its stored PNG, never its sliders."""
    live = [o for c in _kept(path) if c.cell_type == "code" and "remove-output" not in c.metadata.get("tags", [])
            for o in c.get("outputs", []) if slides.WIDGET_VIEW_MIME in o.get("data", {})]
    pngs = [o for c in _kept(path) if c.cell_type == "code" and "remove-output" not in c.metadata.get("tags", [])
            for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert slides.WIDGET_VIEW_MIME not in deck and "widget-state+json" not in deck
    assert "widget-slider" not in deck and "embed-amd" not in deck
    assert deck.count('src="data:image/png;base64,') >= len(pngs)
    if path.stem.split("_", 1)[1] in ("scaling_laws", "training_cost", "operator_parallelism", "data_parallelism",
                                      "memory", "pipeline_parallelism", "hybrid_parallelism"):
        assert live, "this chapter has live figures: the check above would be empty"


def test_code_wraps_at_the_slide_edge(decks):
    """The deck's style wraps long code lines (white-space: pre-wrap on every pre)."""
    deck = decks[NOTEBOOKS[0].name]
    style = re.search(r"\.reveal pre, \.reveal pre code, \.reveal \.highlight pre \{([^}]*)\}", deck)
    assert style and "white-space: pre-wrap" in style.group(1)


def test_answers_stay_out_of_the_decks():
    """Questionnaire and Try-it answers are skipped slides; if one ever is shown, it is closed."""
    for path in NOTEBOOKS:
        for cell in _kept(path):
            tags = set(cell.metadata.get("tags", []))
            if tags & {"questionnaire-answers", "try-answer"}:
                assert cell.metadata.get("slideshow", {}).get("slide_type") == "skip", (
                    f"{path.name}: an answer cell is on a slide")
