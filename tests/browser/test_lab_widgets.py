"""Every notebook in a real JupyterLab, the English ones and their Chinese twins
(``zh/07_data_parallelism``, built from locale/ by the ``zh_edition`` fixture; skipped
without the ``[i18n]`` extra, failed instead under ``DDL_REQUIRE_I18N=1``): run all cells
without an error, then move every slider of every live figure through the UI and check that
its readout and the figure change. The change-to-redraw latency is recorded and reported
(not asserted: timings depend on the machine). In a Chinese notebook, no English sentence
may be left in what a reader sees outside code (``browser_support.english_sentences``).

Run All goes first, for every notebook, two notebooks at a time (``LANES``): a kernel
running a notebook keeps about two thirds of one core busy (it waits for worker processes,
timers and the browser), so two side by side take about two thirds of the time one after
the other. The English notebooks run first, the Chinese ones when the first Chinese test comes
(a batch each, so no more than one edition's kernels are open at a time). Each notebook's
test then checks what its Run All left and moves its sliders alone, with every other
kernel idle, so the latencies are those of a quiet machine."""

from __future__ import annotations

import sys
import time

import pytest
from browser_support import (
    ARTIFACTS,
    CORES_BUSY,
    DURATIONS,
    LATENCIES,
    ZH,
    cores_busy,
    cpu_ticks,
    english_sentences,
    evaluate,
    lab_notebooks,
    unavailable_i18n,
)

pytestmark = pytest.mark.browser

RUN_ALL_TIMEOUT_MS = 600_000
REDRAW_TIMEOUT_MS = 20_000
LANES = 2  # notebooks whose Run All goes on at the same time
KERNEL_IDLE_JS = "window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'"
CONTROLS = ".widget-slider, .widget-dropdown"  # the controls of a live figure
# JavaScript: live figure i of the notebook in front (root) and its control k (control).
FIND_CONTROL = ("const root = window.jupyterapp.shell.currentWidget.node.querySelectorAll('.ddl-live-figure')[i];\n"
                f"  const control = root.querySelectorAll({CONTROLS!r})[k];")

# Cells of the notebook model, as [index, executionCount, tags, [outputs]] (JupyterLab 4 API).
CELLS_JS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cells = panel.content.model.cells;
  const out = [];
  for (let i = 0; i < cells.length; i++) {
    const c = cells.get(i);
    if (c.type !== 'code') continue;
    const outputs = [];
    for (let j = 0; j < c.outputs.length; j++) {
      const o = c.outputs.get(j).toJSON();
      outputs.push({type: o.output_type, ename: o.ename || '', evalue: o.evalue || '',
                    name: o.name || '', text: [].concat(o.text || []).join('').slice(0, 2000),
                    plain: o.data ? [].concat(o.data['text/plain'] || []).join('') : ''});
    }
    out.push({index: i, count: c.executionCount, outputs: outputs});
  }
  return out;
}"""

# What a student sees of each cell after Run All: collapsed source and outputs (JupyterLab 4).
HIDDEN_JS = """() => window.jupyterapp.shell.currentWidget.content.widgets.map((w, i) => ({
  index: i, tags: w.model.getMetadata('tags') || [],
  slide: (w.model.getMetadata('slideshow') || {}).slide_type || '',
  input: w.inputHidden, output: w.model.type === 'code' ? w.outputHidden : null,
  visible: w.model.type === 'code' && !w.outputHidden ? w.outputArea.node.innerText : ''}))"""

# Every <details> of the notebook (answers, speaker notes, folded solution outputs) and
# every Markdown cell that must hold one: questionnaire and Try-it answers, speaker notes.
DETAILS_JS = """(panel) => {
  const out = {details: [], answers: []};
  (panel || window.jupyterapp.shell.currentWidget).content.widgets.forEach((w, i) => {
    const tags = w.model.getMetadata('tags') || [];
    const slide = (w.model.getMetadata('slideshow') || {}).slide_type || '';
    const found = [...w.node.querySelectorAll('details')];
    if (w.model.type === 'markdown' && (slide === 'notes' || tags.includes('questionnaire-answers')
                                        || tags.includes('try-answer')))
      out.answers.push({index: i, rendered: w.rendered, details: found.length,
                        text: w.node.querySelector('.jp-RenderedMarkdown')?.innerText.trim() || ''});
    for (const d of found) {
      const summary = d.querySelector(':scope > summary');
      out.details.push({index: i, open: d.open, summary: summary ? summary.innerText.trim() : null,
                        shown: d.innerText.trim(), held: d.textContent.length});
    }
  });
  return out;
}"""

# Anything that lies over the notebook: a notification (the news pop-up), a dialog.
OVERLAY_JS = """() => [...document.querySelectorAll(
    '.jp-toast-container .Toastify__toast, .Toastify__toast, .jp-Dialog, .jp-Notification-Toast')]
  .filter(e => e.getClientRects().length > 0)
  .map(e => (e.className.baseVal ?? e.className) + ': ' + e.innerText.trim().slice(0, 120))"""

# Open the first questionnaire answer, return what it shows (its Markdown list and math
# rendered?), and close it again.
OPEN_ANSWER_JS = r"""async () => {
  const w = window.jupyterapp.shell.currentWidget.content.widgets.find(
    w => (w.model.getMetadata('tags') || []).includes('questionnaire-answers'));
  const d = w.node.querySelector('details');
  d.open = true;
  const deadline = performance.now() + 20000;
  const math = () => d.querySelectorAll('mjx-container, .MathJax, .MathJax_CHTML').length;
  const wantsMath = w.model.sharedModel.getSource().includes('$');
  while (wantsMath && math() === 0 && performance.now() < deadline)
    await new Promise(r => setTimeout(r, 100));
  const result = {items: d.querySelectorAll('ol > li, ul > li').length, math: math(), wantsMath: wantsMath,
                  raw: /\$[^$\s][^$]*\$/.test(d.innerText), shown: d.innerText.length};
  d.open = false;
  return result;
}"""

# The kernel's shutdown is asked for, not waited for: a kernel that has used shared memory
# takes 2.6 s to end (ipykernel 7 sends SIGTERM to its children before it exits, and
# multiprocessing's resource tracker ignores SIGTERM, so the server ends the kernel after
# half of its 5 s shutdown_wait_time). The server finishes it while the next test runs.
CLOSE_JS = """async (id) => {
  const panel = [...window.jupyterapp.shell.widgets('main')].find(w => w.id === id);
  if (!panel || !panel.sessionContext) return;
  panel.sessionContext.shutdown().catch(e => console.warn('kernel shutdown: ' + e));
  panel.context.model.dirty = false;
  panel.dispose();
}"""

# Run All in every notebook of `paths`, `lanes` notebooks at a time, in the background: each
# notebook is opened, its kernel waited for, what it shows before Run All is recorded (its
# <details> and anything covering it), then its Run All and the wait for its kernel to be
# idle.
# window.__ddlRuns[path] says how it went: {id, opened, seconds, error, done}.
START_RUNS_JS = """([paths, lanes, timeoutMs]) => {
  const app = window.jupyterapp;
  const details = DETAILS, overlays = OVERLAYS;
  const runs = window.__ddlRuns = {};
  const queue = [...paths];
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const idle = async (panel, ms, what) => {
    const deadline = performance.now() + ms;
    while (panel.sessionContext?.session?.kernel?.status !== 'idle') {
      if (performance.now() > deadline) throw new Error(`kernel not idle ${ms / 1000} s after ${what}`);
      await sleep(250);
    }
  };
  const one = async (path) => {
    const r = runs[path] = {id: null, opened: null, seconds: null, error: null, done: false};
    const t0 = performance.now();
    try {
      const panel = await app.commands.execute('docmanager:open', {path: path, factory: 'Notebook'});
      r.id = panel.id;
      await panel.context.ready;
      await panel.sessionContext.ready;
      await idle(panel, 120000, 'opening');
      // In front (shown at once; the rest of activation follows later): what shows of a
      // <details> (innerText) is measured on the page as laid out. No await in between,
      // so the other lane cannot bring its own notebook to the front meanwhile.
      app.shell.activateById(panel.id);
      r.opened = {details: details(panel), overlays: overlays(), shown: panel.isVisible};
      // widgetId: this notebook's Run All (without it the command takes the current one)
      const run = app.commands.execute('notebook:run-all-cells', {widgetId: panel.id});
      await Promise.race([run, sleep(timeoutMs).then(() => { throw new Error(`Run All not done after ${timeoutMs / 1000} s`); })]);
      await idle(panel, timeoutMs, 'Run All');
      r.seconds = (performance.now() - t0) / 1000;
    } catch (e) {
      r.error = String(e);
    }
    r.done = true;
  };
  const lane = async () => { while (queue.length) await one(queue.shift()); };
  for (let k = 0; k < lanes; k++) lane();
}""".replace("DETAILS", DETAILS_JS).replace("OVERLAYS", OVERLAY_JS)

RUNS_DONE_JS = "() => Object.values(window.__ddlRuns || {}).filter(r => r.done).length"

ACTIVATE_JS = "(id) => window.jupyterapp.shell.activateById(id)"
CURRENT_JS = "(id) => window.jupyterapp.shell.currentWidget?.id === id"

CLOSE_ALL_JS = """async () => {
  for (const panel of [...window.jupyterapp.shell.widgets('main')]) {
    if (!panel.sessionContext) continue;
    await panel.sessionContext.shutdown();
    panel.context.model.dirty = false;
    panel.dispose();
  }
}"""

# Arm a watcher on figure i, control k (a slider or a drop-down): records the time of the
# first key press or input event on the control and the time at which the figure's <img>
# shows a new picture (the widget may replace the element: query it afresh).
ARM_JS = """([i, k]) => {
  FIND_CONTROL
  const before = root.querySelector('img').src;
  const t = window.__ddl = {before: before, key: null, done: null};
  const start = () => { if (t.key === null) t.key = performance.now(); };
  for (const ev of ['keydown', 'input', 'change']) control.addEventListener(ev, start, {capture: true});
  const check = () => {
    const img = root.querySelector('img');
    if (t.done === null && img && img.src !== before) { t.done = performance.now(); obs.disconnect(); }
  };
  const obs = new MutationObserver(check);
  obs.observe(root, {subtree: true, childList: true, attributes: true, attributeFilter: ['src']});
}""".replace("FIND_CONTROL", FIND_CONTROL)

# Each step of a slider move is one call into the page, its elements found inside the
# notebook in front: a playwright locator is resolved against the whole page at every use,
# which with a dozen notebooks open costs about 70 ms a call, more than the redraw itself.
# MOVE_JS: figure i, control k scrolled into view, armed (ARM_JS) and described; a
# slider's handle gets the focus, for the real key press that follows.
MOVE_JS = """([i, k]) => {
  (ARM)([i, k]);
  FIND_CONTROL
  control.scrollIntoView({block: 'nearest'});
  const label = control.querySelector('.widget-label').innerText.trim();
  const select = control.querySelector('select');
  if (select) return {label, before: select.value, options: [...select.options].map(o => o.value)};
  const handle = control.querySelector('.noUi-handle');
  handle.focus();
  return {label, before: control.querySelector('.widget-readout').innerText.trim(), options: null,
          atMax: +handle.getAttribute('aria-valuenow') >= +handle.getAttribute('aria-valuemax')};
}""".replace("ARM", ARM_JS).replace("FIND_CONTROL", FIND_CONTROL)

# The value figure i, control k shows now (a drop-down's selection, a slider's readout).
VALUE_JS = """([i, k]) => {
  FIND_CONTROL
  const select = control.querySelector('select');
  return select ? select.value : control.querySelector('.widget-readout').innerText.trim();
}""".replace("FIND_CONTROL", FIND_CONTROL)

# Resolves once the kernel of the notebook in front has been idle twice, 50 ms apart: the
# redraws that a change caused in linked figures are done, so they are not taken for the
# next control's redraw.
SETTLE_JS = """async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const panel = window.jupyterapp.shell.currentWidget;
  for (let n = 0; n < 2; n++) {
    while (panel.sessionContext.session.kernel.status !== 'idle') await sleep(10);
    await sleep(50);
  }
}"""

# The armed redraw's latency (ms; null before the redraw) and what live figure i's message
# area says (empty unless the figure reports an error).
REPORT_JS = """(i) => {
  const root = window.jupyterapp.shell.currentWidget.node.querySelectorAll('.ddl-live-figure')[i];
  const t = window.__ddl;
  return {
    latency: t && t.done !== null ? t.done - t.key : null,
    message: [...root.querySelectorAll('.widget-html-content')].map(e => e.innerText.trim()).filter(x => x).join(' / '),
  };
}"""


# What a reader sees of each cell outside code, as text: a Markdown cell's rendering without
# its code (pre, code, kbd, samp) and math (typeset, or TeX that is not typeset yet, as in a
# closed <details>), a code cell's outputs (stream text, text/plain, HTML, widgets: labels,
# readouts, drop-down choices) without their pictures and without code they show (a source
# listing, IPython's Code: <div class="highlight">; <pre> and <code> in HTML; stream text and
# text/plain, though rendered in a <pre> too, count); never a code cell's source. Hidden
# content counts (a closed answer, a folded output: one click shows it). Every element that
# is left out, and every block's edge, becomes a break (U+2029), so no run of words goes
# across it; line breaks inside a Markdown paragraph are spaces, as they are on the page.
# Cited works keep their published titles: in Markdown, a link's text, an emphasised title and
# a reference (a list item with an external link and a year, or in a numbered list) are left out.
READER_TEXT_JS = r"""() => {
  const BREAK = '\u2029';
  const BLOCKS = 'address,article,aside,blockquote,br,button,dd,details,div,dl,dt,figcaption,figure,' +
    'footer,h1,h2,h3,h4,h5,h6,header,hr,label,li,ol,option,p,pre,section,summary,table,tbody,td,' +
    'tfoot,th,thead,tr,ul';
  const UNSEEN = 'script,style,template,img,svg,canvas,video,audio,math,mjx-container,' +
    '.MathJax,.MathJax_Display,.MathJax_Preview,.MathJax_SVG';
  const CODE = 'pre,code,kbd,samp,tt';
  // cited works keep their titles: a link's text, an emphasised title, a reference (a list
  // item with a link and a year) stay in the language they were published in
  const CITED = 'a,em,cite';
  const isReference = (li) => li.querySelector('a[href^="http"]') &&
    (/\b(1[89]|20)\d\d\b/.test(li.textContent) || li.parentElement.tagName === 'OL');
  const LISTING = 'code,kbd,samp,tt,.highlight,.jp-RenderedHTMLCommon pre';
  const text = (node, drop) => {
    const copy = node.cloneNode(true);
    if (drop.includes(CITED)) for (const li of copy.querySelectorAll('li')) if (isReference(li)) li.replaceWith(BREAK);
    for (const e of copy.querySelectorAll(drop)) e.replaceWith(BREAK);
    for (const e of copy.querySelectorAll(BLOCKS)) { e.before(BREAK); e.after(BREAK); }
    return copy.textContent;
  };
  return window.jupyterapp.shell.currentWidget.content.widgets.map((w, i) => {
    const cell = {index: i, id: w.model.id, kind: w.model.type, text: ''};
    if (w.model.type === 'markdown') {
      const md = w.node.querySelector('.jp-RenderedMarkdown');
      cell.text = !w.rendered || !md ? null : text(md, UNSEEN + ',' + CODE + ',' + CITED).replace(/[\r\n]+/g, ' ')
        .replace(/\$\$[\s\S]*?\$\$|\$[^$]*\$|\\\([\s\S]*?\\\)|\\\[[\s\S]*?\\\]/g, BREAK);
    } else if (w.model.type === 'code') {
      cell.text = text(w.outputArea.node, UNSEEN + ',' + LISTING);
    }
    return cell;
  });
}"""


def _live_figure_count(cells) -> int:
    return sum(o["plain"].startswith("<live figure") for c in cells for o in c["outputs"])


def _edition(notebook: str) -> str:
    """``zh`` for a Chinese notebook (``zh/07_data_parallelism``), ``en`` for an English one."""
    return ZH if notebook.startswith(f"{ZH}/") else "en"


class LabRuns:
    """What the Run All of each selected notebook did (``window.__ddlRuns``), by notebook
    (``07_data_parallelism``, ``zh/07_data_parallelism``). The selected notebooks of an
    edition run together, ``LANES`` at a time, when the first of them is asked for."""

    def __init__(self, page, wanted: list[str]):
        self.page, self.wanted, self.runs = page, wanted, {}

    def __getitem__(self, notebook: str) -> dict:
        if notebook not in self.runs:
            self._run_all([nb for nb in self.wanted if _edition(nb) == _edition(notebook)] or [notebook])
        return self.runs[notebook]

    def _run_all(self, batch: list[str]) -> None:
        page = self.page
        paths = [f"notebooks/{nb}.ipynb" for nb in batch]
        t0 = time.perf_counter()
        page.evaluate(START_RUNS_JS, [paths, LANES, RUN_ALL_TIMEOUT_MS])
        # every notebook has its own time limits in the page; this one ends the wait whatever happens
        limit = (120 + RUN_ALL_TIMEOUT_MS / 1000) * len(paths) / LANES + 60
        deadline = time.monotonic() + limit
        while page.evaluate(RUNS_DONE_JS) < len(paths):
            if time.monotonic() > deadline:
                pytest.fail(f"Run All of {len(paths)} notebooks not done in {limit:.0f} s", pytrace=False)
            time.sleep(0.5)
        runs = {path.removeprefix("notebooks/").removesuffix(".ipynb"): run
                for path, run in page.evaluate("() => window.__ddlRuns").items()}
        self.runs.update(runs)
        edition = "Chinese " if _edition(batch[0]) == ZH else ""
        DURATIONS[f"lab run-all, {len(paths)} {edition}notebooks {LANES} at a time"] = time.perf_counter() - t0
        for notebook, run in runs.items():
            if run["seconds"] is not None:
                DURATIONS[f"lab run-all {notebook} (beside another)"] = run["seconds"]


@pytest.fixture(scope="module")
def lab_runs(request, lab_page):
    """Run All of every notebook whose test was selected (:class:`LabRuns`). The notebooks
    stay open with their kernels until their test closes them (every one is closed at the end)."""
    wanted = [item.callspec.params["notebook"] for item in request.session.items
              if getattr(item, "originalname", "") == "test_notebook_runs_and_sliders_redraw"]
    try:
        yield LabRuns(lab_page, list(dict.fromkeys(wanted)))
    finally:
        evaluate(lab_page, CLOSE_ALL_JS, timeout_s=120)


@pytest.mark.parametrize("notebook", lab_notebooks())
def test_notebook_runs_and_sliders_redraw(request, lab_page, lab_runs, notebook):
    page = lab_page
    name = f"{notebook}.ipynb"
    chinese = _edition(notebook) == ZH
    if chinese:
        edition = request.getfixturevalue("zh_edition")
        if edition.missing:
            unavailable_i18n(edition.missing)
        assert edition.error is None, edition.error
        assert name.removeprefix(f"{ZH}/") in edition.names, f"the Chinese edition has no {name}"
    run = lab_runs[notebook]
    try:
        assert run["id"] is not None, f"{name}: could not be opened: {run['error']}"
        page.evaluate(ACTIVATE_JS, run["id"])  # its tab in front, as a learner clicks it
        page.wait_for_function(CURRENT_JS, arg=run["id"], timeout=REDRAW_TIMEOUT_MS)
        panel_id = run["id"]
        # Nothing lay over the notebook (JupyterLab's news pop-up, a dialog), and every
        # answer and speaker note was a closed <details> before Run All ...
        assert run["opened"] is not None, f"{name}: its kernel did not start: {run['error']}"
        assert run["opened"]["shown"], f"{name}: was not in front when its <details> were read"
        overlays = run["opened"]["overlays"]
        assert not overlays, f"{name}: something covers the notebook after opening: {overlays}"
        _assert_answers_closed(run["opened"]["details"], name, "after opening")
        # Run All ended when the last cell had finished, or when a cell failed (Lab then
        # drops the rest of the queue), or at its time limit.
        assert run["error"] is None, f"{name}: {run['error']}"
        page.wait_for_function(KERNEL_IDLE_JS, timeout=REDRAW_TIMEOUT_MS)
        cells = page.evaluate(CELLS_JS)

        errors = [
            f"cell {c['index']}: {o['ename']}: {o['evalue']}" for c in cells for o in c["outputs"]
            if o["type"] == "error"
        ] + [
            f"cell {c['index']}: traceback on stderr: {o['text'][-300:]}" for c in cells for o in c["outputs"]
            if o["type"] == "stream" and o["name"] == "stderr" and "Traceback" in o["text"]
        ]
        assert not errors, f"{name}: error output after Run All:\n" + "\n".join(errors)
        not_run = [c["index"] for c in cells if c["count"] is None]
        assert not not_run, f"{name}: Run All did not execute cells {not_run}"
        # Run All executes the worked solutions (so they are tested), but their code stays
        # collapsed and their output folded (%%solution: Lab re-opens collapsed outputs when
        # a cell runs).
        shown = page.evaluate(HIDDEN_JS)
        open_code = [c["index"] for c in shown if "solution" in c["tags"] and not c["input"]]
        verdicts = [c["index"] for c in shown if "solution" in c["tags"] and "✓" in c["visible"]]
        assert not open_code, f"{name}: solution cells {open_code} show their code after Run All"
        assert not verdicts, f"{name}: solution cells {verdicts} show their verdict after Run All"
        # ... and after it: Run All renders every Markdown cell again (it used to expand the
        # collapsed ones) and re-opens collapsed outputs; every <details> stays closed.
        _assert_answers_closed(page.evaluate(DETAILS_JS), name, "after Run All")
        shown = evaluate(page, OPEN_ANSWER_JS, timeout_s=30)
        assert shown["items"] >= 5, f"{name}: the opened answers show no Markdown list: {shown}"
        assert not shown["wantsMath"] or shown["math"] > 0, f"{name}: math in the answers not typeset: {shown}"
        assert not shown["raw"], f"{name}: raw $...$ in the opened answers"
        overlays = page.evaluate(OVERLAY_JS)
        assert not overlays, f"{name}: something covers the notebook after Run All: {overlays}"

        expected = _live_figure_count(cells)
        figures = page.locator(f'[id="{panel_id}"] .ddl-live-figure')
        if expected:
            page.wait_for_function(
                "n => { const r = window.jupyterapp.shell.currentWidget.node"
                ".querySelectorAll('.ddl-live-figure img');"
                " return r.length >= n && [...r].every(i => i.complete && i.naturalWidth > 0); }",
                arg=expected, timeout=60_000,
            )
        assert figures.count() == expected, (
            f"{name}: {expected} live figures in the outputs but {figures.count()} rendered as widgets"
            " (is the widget front-end installed? run `python -m course_lib doctor`)"
        )
        LATENCIES[notebook] = []
        _settle(page)
        ticks = cpu_ticks()
        for i in range(expected):
            _exercise_sliders(page, figures.nth(i), i, notebook)
        if expected:
            CORES_BUSY[notebook] = cores_busy(ticks, cpu_ticks())  # what ran while the sliders moved
        searches = page.locator(f'[id="{panel_id}"] .ddl-glossary')
        for i in range(searches.count()):
            _exercise_search(page, searches.nth(i), name)
        shot = ARTIFACTS / "lab" / f"{notebook}.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot))
        if chinese:
            _assert_no_english(page.evaluate(READER_TEXT_JS), name)
    except BaseException as failure:  # pytest.fail raises a BaseException
        _close_notebook(page, run["id"], failure)
        raise
    _close_notebook(page, run["id"])


def _assert_no_english(cells: list[dict], name: str) -> None:
    """No English sentence (:func:`english_sentences`) in what a reader sees of the Chinese
    notebook ``name`` outside code (``cells``: READER_TEXT_JS's answer); the failure lists
    every one, with its cell (index in the notebook as opened in Lab, and its cell id)."""
    unrendered = [c["index"] for c in cells if c["text"] is None]
    assert not unrendered, f"{name}: Markdown cells {unrendered} are not rendered after Run All"
    found = {}  # (cell, sentence) -> how often (a warning repeated in one output is one line)
    for c in cells:
        for sentence in english_sentences(c["text"]):
            key = (c["index"], c["id"], "Markdown" if c["kind"] == "markdown" else "output", sentence)
            found[key] = found.get(key, 0) + 1
    lines = [f"  cell {index} (id {cell_id}, {kind}): {sentence!r}" + (f" ({n} times)" if n > 1 else "")
             for (index, cell_id, kind, sentence), n in found.items()]
    assert not lines, (f"{name}: {len(lines)} English sentences left in what a reader sees outside code:\n"
                       + "\n".join(lines))


def _assert_answers_closed(found: dict, name: str, when: str) -> None:
    """Every answer and speaker note is rendered as a closed <details>, and no <details> of
    the notebook is open or shows more than its summary line (``found``: DETAILS_JS's answer)."""
    answers = found["answers"]
    assert answers, f"{name}: no answer or notes cells found {when}"
    plain = [a["index"] for a in answers if not a["rendered"] or a["details"] != 1]
    assert not plain, f"{name} {when}: answer/notes cells {plain} are not one rendered <details>"
    opened = [d["index"] for d in found["details"] if d["open"]]
    assert not opened, f"{name} {when}: <details> open in cells {opened}"
    visible = [(d["index"], d["shown"][:80]) for d in found["details"]
               if d["summary"] is None or d["shown"] != d["summary"] or d["held"] <= len(d["summary"])]
    assert not visible, f"{name} {when}: answer text visible beside its summary: {visible}"
    texts = [a["text"] for a in answers]
    assert all(texts), f"{name} {when}: an answer cell shows nothing, not even its summary"


def _close_notebook(page, panel_id: str | None, failure: BaseException | None = None) -> None:
    """Shut down the current notebook's kernel and close it (the next test opens its own).

    When the test has already failed, an error while closing must not replace that
    failure in the report: it is printed (captured output) and added to the failure as
    a note instead of being raised.
    """
    try:
        evaluate(page, CLOSE_JS, panel_id, timeout_s=60)
    except Exception as exc:
        if failure is None:
            raise
        note = f"closing the notebook after the failure failed too: {type(exc).__name__}: {exc}"
        print(note, file=sys.stderr)
        if hasattr(failure, "add_note"):  # Python 3.11+
            failure.add_note(note)


def _settle(page) -> None:
    """SETTLE_JS: wait until the kernel is idle twice 50 ms apart."""
    evaluate(page, SETTLE_JS, timeout_s=REDRAW_TIMEOUT_MS / 1000)


def _exercise_search(page, box, name):
    """A searchable table (the glossary): typing a word keeps exactly the rows containing it."""
    rows = box.locator("tbody tr")
    total = rows.count()
    assert total > 1, f"{name}: the searchable table shows {total} rows"
    texts = [t.lower() for t in rows.all_inner_texts()]
    # a word that occurs in some rows but not all of them, taken from the table itself
    words = sorted({w for t in texts for w in t.split() if len(w) > 5 and w.isalpha()})
    query = next(w for w in words if 0 < sum(w in t for t in texts) < total)
    expected = sum(query in t for t in texts)
    box.locator("input").fill(query)
    page.wait_for_function(
        "([id, n]) => document.getElementById(id).querySelectorAll('.ddl-glossary tbody tr').length === n",
        arg=[box.evaluate("e => e.closest('.jp-NotebookPanel').id"), expected], timeout=REDRAW_TIMEOUT_MS,
    )
    assert all(query in t.lower() for t in rows.all_inner_texts()), f"{name}: filter {query!r} kept other rows"


def _exercise_sliders(page, figure, i, notebook):
    """Move every control of live figure ``i`` once through the UI (a key press on a
    slider's handle, a new choice in a drop-down); check and time the redraw."""
    controls = figure.locator(CONTROLS).count()
    assert controls > 0, f"{notebook}.ipynb: live figure {i} has no slider"
    for k in range(controls):
        shown = page.evaluate(MOVE_JS, [i, k])
        label, before = shown["label"], shown["before"]
        if shown["options"] is not None:  # a drop-down: the next choice
            options = shown["options"]
            control = figure.element_handle().query_selector_all(CONTROLS)[k]
            control.query_selector("select").select_option(options[(options.index(before) + 1) % len(options)])
        else:
            page.keyboard.press("ArrowLeft" if shown["atMax"] else "ArrowRight")
        after = page.evaluate(VALUE_JS, [i, k])
        where = f"{notebook}.ipynb: figure {i}, control {label!r}"
        assert after != before, f"{where}: value stayed at {before} after the change"
        try:
            page.wait_for_function("window.__ddl.done !== null", timeout=REDRAW_TIMEOUT_MS, polling="raf")
        except Exception:
            message = page.evaluate(REPORT_JS, i)["message"]  # as it is: the kernel may still be busy
            pytest.fail(f"{where}: figure not redrawn within {REDRAW_TIMEOUT_MS / 1000:.0f} s after "
                        f"{before} -> {after}" + (f"; the figure says: {message}" if message else ""), pytrace=False)
        _settle(page)
        report = page.evaluate(REPORT_JS, i)
        LATENCIES[notebook].append((f"figure {i} {label} {before}->{after}", round(report["latency"], 1)))
        assert not report["message"], f"{where}: the figure reports an error after {before} -> {after}: {report['message']}"
