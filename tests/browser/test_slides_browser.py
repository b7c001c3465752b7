"""The offline decks in a real browser, opened from file://: no failed or remote request,
no console error, reveal.js initialised with as many slides as the cell metadata says,
math typeset, every figure drawn (live figures as their static PNG, no slider on a slide),
no code line wider than its slide, speaker notes present, and readable with their formulas
in the speaker view. A screenshot of each title
slide goes to test-artifacts/slides/."""

from __future__ import annotations

import re
import time

import pytest
from browser_support import ARTIFACTS, DURATIONS, evaluate, notebooks

pytestmark = pytest.mark.browser

MATH = re.compile(r"\$\$.+?\$\$|(?<![\\$])\$[^$\s][^$]*?(?<![\\\s])\$|\\\(|\\\[", re.S)

# Promises below reject after 30 s: page.evaluate itself never times out.
# Resolves once MathJax 2 has finished the typesetting queued at start-up (call after
# MathJax.isReady).
MATHJAX_DONE_JS = """() => new Promise((resolve, reject) => {
  setTimeout(() => reject(new Error('MathJax queue still busy after 30 s')), 30000);
  MathJax.Hub.Queue(() => resolve(true));
})"""

# Reveal is loaded through require.js (no window.Reveal): ask the module.
REVEAL_JS = """(url) => new Promise((resolve, reject) => {
  setTimeout(() => reject(new Error('require(reveal.js) did not answer in 30 s')), 30000);
  require([url], R => resolve({
    ready: R.isReady(), total: R.getTotalSlides(), horizontal: R.getHorizontalSlides().length,
    columns: [...document.querySelectorAll('.reveal .slides > section')]
               .map(s => Math.max(1, s.querySelectorAll(':scope > section').length)),
  }), reject);
})"""

# Visit every slide and measure its code: a <pre> (or its <code>) whose content is wider
# than its box is cut off or scrolls sideways. Returns the offenders and how many were seen.
OVERFLOW_JS = """(url) => new Promise((resolve, reject) => {
  setTimeout(() => reject(new Error('require(reveal.js) did not answer in 60 s')), 60000);
  require([url], R => {
    const bad = []; let seen = 0;
    const columns = [...document.querySelectorAll('.reveal .slides > section')];
    columns.forEach((column, h) => {
      const rows = Math.max(1, column.querySelectorAll(':scope > section').length);
      for (let v = 0; v < rows; v++) {
        R.slide(h, v);
        for (const el of R.getCurrentSlide().querySelectorAll('pre, pre > code')) {
          if (el.clientWidth === 0) continue;
          seen++;
          if (el.scrollWidth > el.clientWidth + 1)
            bad.push(`slide ${h}/${v}: ${el.scrollWidth} > ${el.clientWidth} px: ` +
                     el.textContent.split('\\n').sort((a, b) => b.length - a.length)[0].slice(0, 100));
        }
      }
    });
    R.slide(0, 0);
    resolve({bad: bad, seen: seen});
  }, reject);
})"""


def expected_counts(nb):
    """What the deck must show, from the notebook (after the removed cells)."""
    # imported here: a collection without the browser tests skips it
    from course_lib.tools import slides

    kept = slides.kept_cells(nb.cells)
    figures = 0
    for cell in kept:
        if cell.cell_type != "code" or {"remove-output"} & set(cell.metadata.get("tags", [])):
            continue
        figures += sum("image/png" in out.get("data", {}) for out in cell.get("outputs", []))
    # (speaker notes carry their formulas as text: MathJax has nothing to do there)
    math = sum(bool(MATH.search(c.source)) for c in kept if c.cell_type == "markdown"
               and c.metadata.get("slideshow", {}).get("slide_type") not in ("skip", "notes"))
    notes = sum(c.metadata.get("slideshow", {}).get("slide_type") == "notes" for c in kept)
    return figures, math, notes


@pytest.fixture
def deck_page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(30_000)
    log = {"failed": [], "errors": [], "remote": []}
    page.on("requestfailed", lambda r: log["failed"].append(f"{r.url[:120]}: {r.failure}"))
    page.on("request", lambda r: None if r.url.split(":", 1)[0] in ("file", "data", "blob", "about")
            else log["remote"].append(r.url))
    page.on("console", lambda m: log["errors"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: log["errors"].append(f"page error: {e}"))
    yield page, log
    context.close()


@pytest.mark.parametrize("notebook", notebooks(), ids=lambda p: p.stem)
def test_deck_offline(decks, deck_page, notebook):
    page, log = deck_page
    deck = decks[notebook.name]
    import nbformat  # imported here: jsonschema's start-up is paid by the browser run only

    nb = nbformat.read(notebook, as_version=4)
    figures, math_cells, notes = expected_counts(nb)
    t0 = time.perf_counter()
    page.goto(deck.path.as_uri())
    page.wait_for_selector(".reveal.ready")
    reveal_url = page.evaluate(
        "document.querySelector('link[href$=\"dist/reveal.css\"]').getAttribute('href').replace(/\\.css$/, '.js')"
    )
    state = evaluate(page, REVEAL_JS, reveal_url)
    assert state["ready"], "reveal.js did not initialise"
    structure = list(deck.structure)
    assert state["columns"] == structure, f"slides per column {state['columns']} != metadata {structure}"
    assert (state["horizontal"], state["total"]) == (len(structure), sum(structure))

    if math_cells:
        page.wait_for_function("window.MathJax && MathJax.isReady === true")
        evaluate(page, MATHJAX_DONE_JS)
        rendered = page.evaluate("document.querySelectorAll('.reveal .mjx-chtml').length")
        broken = page.evaluate(
            "[...document.querySelectorAll('.reveal .mjx-noError, .reveal .MathJax_Error, .reveal .mjx-merror')]"
            ".map(e => e.textContent.slice(0, 80))"
        )
        assert rendered >= math_cells, f"{rendered} formulas typeset, expected at least {math_cells}"
        assert not broken, f"MathJax could not typeset: {broken}"
        raw = page.evaluate("[...document.querySelectorAll('.jp-MarkdownOutput')].some(e => e.innerText.includes('$$'))")
        assert not raw, "raw $$ left in the rendered Markdown"

    # Every figure: a static PNG, or a live figure's widget (drawn from the saved state).
    page.wait_for_function(
        "n => { const imgs = [...document.querySelectorAll('.reveal .slides img')];"
        " return imgs.length >= n && imgs.every(i => i.complete && i.naturalWidth > 0); }",
        arg=figures, timeout=30_000,
    )
    assert page.evaluate("document.querySelectorAll('.reveal .slides img').length") >= figures
    assert page.evaluate("document.querySelectorAll('.reveal aside.notes').length") == notes
    # A slide show has no kernel: live figures are their static PNG, no slider is on a slide.
    sliders = page.evaluate("document.querySelectorAll('.reveal .slides .widget-slider, .reveal .slides "
                            ".jupyter-widgets').length")
    assert sliders == 0, f"{sliders} widget controls on the slides (they would move nothing)"
    # Every code line fits its slide (the template wraps long lines).
    code = evaluate(page, OVERFLOW_JS, reveal_url, timeout_s=90)
    assert code["seen"] > 0, "no code block measured on any slide"
    assert not code["bad"], f"code wider than its slide: {code['bad'][:5]}"

    page.wait_for_timeout(300)  # let late requests and console messages arrive
    assert not log["remote"], f"the deck requested remote URLs: {log['remote'][:5]}"
    assert not log["failed"], f"failed requests: {log['failed'][:5]}"
    assert not log["errors"], f"console errors: {log['errors'][:5]}"

    out = ARTIFACTS / "slides"
    out.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out / f"{notebook.stem}-title.png"))
    DURATIONS[f"deck open {notebook.stem}"] = time.perf_counter() - t0


def test_index_lists_decks_in_chapter_order(decks, deck_page):
    page, log = deck_page
    index = next(iter(decks.values())).path.parent / "index.html"
    page.goto(index.as_uri())
    hrefs = page.eval_on_selector_all("ol > li > a:first-child", "els => els.map(e => e.getAttribute('href'))")
    assert hrefs == [f"{p.stem}.slides.html" for p in notebooks()]
    titles = page.eval_on_selector_all("ol > li > a:first-child", "els => els.map(e => e.textContent)")
    assert titles == [decks[p.name].title for p in notebooks()]
    assert not log["failed"] and not log["errors"] and not log["remote"]


def test_speaker_view_shows_notes(decks, browser):
    """Key S opens reveal's speaker view (a pop-up) with the current slide's notes, open,
    and their formulas readable: reveal's notes window runs no MathJax, so the deck carries
    each formula as text (course_lib.tools.slides.math_as_text). Chapter 11's bubble note
    has the most formulas."""
    with_math = [d for d in decks.values() if d.source.name.startswith("11_")]
    if not with_math:
        pytest.skip("chapter 11 is not among the decks")
    deck = with_math[0]
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        page.goto(deck.path.as_uri())
        page.wait_for_selector(".reveal.ready")
        target = page.evaluate(
            "() => { const a = [...document.querySelectorAll('.reveal .slides section section aside.notes')]"
            ".find(n => n.querySelector('.ddl-math sub'));"
            " const s = a.closest('section'); const h = [...document.querySelectorAll('.reveal .slides > section')];"
            " const col = h.indexOf(s.parentElement); return [col, [...s.parentElement.children]"
            ".filter(e => e.tagName === 'SECTION').indexOf(s), a.innerText.trim()]; }"
        )
        col, row, text = target
        page.goto(f"{deck.path.as_uri()}#/{col}/{row}")
        page.wait_for_timeout(200)
        with page.expect_popup() as popup_info:
            page.keyboard.press("s")
        popup = popup_info.value
        popup.wait_for_function(
            "t => { const n = document.querySelector('.speaker-controls-notes'); return n && n.innerText.includes(t); }",
            arg=text.splitlines()[0][:40], timeout=20_000,
        )
        # The formulas are there, as text with subscripts, and each one takes up room: none
        # vanished ("has only . Then ..." was the symptom of TeX in a window without MathJax).
        formulas = popup.evaluate(
            "() => [...document.querySelectorAll('.speaker-controls-notes .ddl-math')]"
            ".map(e => [e.innerText, e.getBoundingClientRect().width, e.querySelectorAll('sub').length])"
        )
        assert len(formulas) >= 5, f"the note shows {len(formulas)} formulas: {formulas}"
        assert all(t.strip() and w > 0 for t, w, _ in formulas), f"a formula did not render: {formulas}"
        assert any(subs for _, _, subs in formulas), f"no subscript in the note's formulas: {formulas}"
        notes_text = popup.evaluate("document.querySelector('.speaker-controls-notes').innerText")
        assert "$" not in notes_text and "\\" not in notes_text, f"TeX left in the speaker view: {notes_text[:200]}"
        assert "N" in notes_text and "p" in notes_text
        assert not popup.evaluate("document.querySelectorAll('.speaker-controls-notes details').length"), (
            "the note is still folded in a <details>")
    finally:
        context.close()
