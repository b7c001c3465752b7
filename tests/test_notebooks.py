"""Static checks of every notebook: structure the course promises, and CI coverage.

The notebooks themselves are executed by nbval (`make test` passes notebooks/ with
--nbval-lax); these tests check what execution cannot: slide metadata, learning goals,
summary, hidden solutions, static fallbacks, stored reference outputs.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SLIDE_TYPES = {"slide", "subslide", "fragment", "-", "skip", "notes"}
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _is_notes(cell):
    return cell["metadata"].get("slideshow", {}).get("slide_type") == "notes"


def _load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell):
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


ids = [p.name for p in NOTEBOOKS]


def test_notebooks_are_numbered_in_chapter_order():
    assert NOTEBOOKS, "no notebooks found"
    numbers = [int(re.match(r"(\d\d)_", p.name).group(1)) for p in NOTEBOOKS]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    assert numbers == list(range(1, len(numbers) + 1)), f"chapter numbers with a gap: {numbers}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_the_title_carries_the_files_number(path):
    """A chapter's first line is "# NN · title" with NN its file's number (a renumbering that
    renames the file but not the title, or the reverse, fails here)."""
    first = _source(_load(path)["cells"][0]).splitlines()[0]
    assert first.startswith(f"# {path.name[:2]} · "), f"{path.name} starts with {first!r}"


@pytest.mark.slow  # more than 3 s on two free cores (make test runs it, make test-fast does not)
def test_make_test_executes_every_notebook():
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "--nbval-lax" in recipe and "notebooks" in recipe
    # only the generated Chinese edition is left to `make test-zh`; no English notebook is left out
    assert recipe.replace("--ignore=notebooks/zh ", "").count("--ignore") == 0 and "--deselect" not in recipe
    assert "--ignore=notebooks/zh " in recipe and "notebooks/zh" in makefile.split("\ntest-zh:", 1)[1].split("\n\n")[0]
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "--nbval-lax",
         "--nbval-current-env", "-p", "no:cacheprovider", "notebooks"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    ).stdout
    collected = {line.split("::")[0] for line in out.splitlines() if ".ipynb::" in line}
    assert {f"notebooks/{p.name}" for p in NOTEBOOKS} <= collected


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_every_cell_has_slide_metadata(path):
    for i, cell in enumerate(_load(path)["cells"]):
        slide_type = cell["metadata"].get("slideshow", {}).get("slide_type")
        assert slide_type in SLIDE_TYPES, f"cell {i} has slide_type {slide_type!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_learning_goals_first_and_summary_last(path):
    cells = _load(path)["cells"]
    assert cells[0]["cell_type"] == "markdown" and "Learning goals" in _source(cells[0])
    assert cells[0]["metadata"]["slideshow"]["slide_type"] == "slide"
    last_md = [c for c in cells if c["cell_type"] == "markdown" and not _is_notes(c)][-1]
    assert re.search(r"^## Summary", _source(last_md), re.M), "the last cell a student sees is not the summary"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_exercises_have_checks_and_hidden_solutions(path):
    cells = _load(path)["cells"]
    solutions = [c for c in cells if "solution" in c["metadata"].get("tags", [])]
    exercises = [
        c for c in cells
        if c["cell_type"] == "markdown" and re.search(r"^#+ *Exercise \d", _source(c), re.M)
    ]
    assert exercises, "no exercises"
    assert len(solutions) >= len(exercises), "every exercise needs a solution cell"
    for cell in solutions:
        hidden = cell["metadata"].get("jupyter", {})
        assert hidden.get("source_hidden") is True and hidden.get("outputs_hidden") is True, \
            f"a solution must hide its code and its output: {_source(cell)[:80]}"
        outputs = "".join(
            "".join(o.get("data", {}).get("text/plain", "")) + "".join(o.get("text", ""))
            for o in cell.get("outputs", [])
        )
        assert "✓" in outputs, f"solution cell does not pass its own check: {_source(cell)[:80]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_no_errors_saved_and_checked_cells_have_reference_output(path):
    for i, cell in enumerate(_load(path)["cells"]):
        if cell["cell_type"] != "code":
            continue
        assert all(o["output_type"] != "error" for o in cell["outputs"]), f"error saved in cell {i}"
        if "nbval-check-output" in cell["metadata"].get("tags", []):
            # nbval passes such a cell silently when nothing is stored: require a reference
            assert cell["outputs"] and cell["execution_count"], f"cell {i} has no stored output"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_every_live_widget_carries_a_static_figure(path):
    for i, cell in enumerate(_load(path)["cells"]):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_VIEW in data and "ddl-no-fallback" not in cell["metadata"].get("tags", []):
                assert "image/png" in data or "text/html" in data, f"cell {i}: widget without fallback"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_chinese_terms_present(path):
    text = "".join(_source(c) for c in _load(path)["cells"] if c["cell_type"] == "markdown")
    assert re.search(r"[\u4e00-\u9fff]", text), "no Chinese term beside the key concepts"


def test_summary_quiz_questions_state_the_checkers_inputs():
    """Notebook 14's question texts and course_lib.exercises.summary's constants must agree."""
    from course_lib.exercises import summary

    nb = _load(ROOT / "notebooks" / "16_summary.ipynb")
    questions = {}
    for cell in nb["cells"]:
        match = re.match(r"### Exercise (\d+):", _source(cell))
        if match:
            questions[int(match.group(1))] = _source(cell)
    q1, q2, q3, q4, q5, q6, q7, q8 = (
        summary.Q1_TIMES, summary.Q2, summary.Q3, summary.Q4, summary.Q5, summary.Q6_CONV1, summary.Q7, summary.Q8,
    )
    expected = {
        1: [f"{q1['t1']:g} s on one device", f"{q1['t4']:g} s on {q1['devices']}"],
        2: [f"$p = {q2['p']:g}$", f"at least {q2['target']:g}"],
        3: [f"$N = {q3['devices']}$", f"{q3['p']:.0%}"],
        4: [f"{q4['devices']} NVIDIA", f"'{q4['device_id']}'", f"\\eta = {q4['efficiency']:g}"],
        5: [f"$N = {q5['devices']}$", f"$t_c = {q5['compute_s']:g}$",
            f"$\\beta = {q5['bandwidth'] / 1e9:g}$ GB/s", f"$\\alpha = {q5['latency'] * 1e6:g}$ µs"],
        6: [f"{q6['kernel']}×{q6['kernel']}", f"{q6['c_out']} filters", f"stride {q6['stride']}",
            f"padding {q6['padding']}", f"{q6['image']}×{q6['image']}", f"batch of {q6['batch']}"],
        7: [f"$N_p = {q7['stages']}$", f"$M = {q7['micro_batches']}$"],
        8: [f"MLP({q8['sizes']})", f"{q8['batch_size']:,}", f"{q8['devices']} devices"],
    }
    assert sorted(questions) == sorted(expected)
    for number, phrases in expected.items():
        for phrase in phrases:
            assert phrase in questions[number], f"exercise {number} should state {phrase!r}"


_VERDICT_IN_PROSE = re.compile(r"(faster|slower) than serial\b|\b\d+(\.\d+)?\s*(x|×) (faster|slower)\b", re.I)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_measured_comparisons_are_printed_not_typed(path):
    """A measured comparison ("1.4x faster", "slower than serial") belongs in a cell's
    output, computed (timing.compare), never in prose: an outside read found prose
    contradicting the outputs two cells above it."""
    for i, cell in enumerate(_load(path)["cells"]):
        if cell["cell_type"] == "markdown":
            hit = _VERDICT_IN_PROSE.search(_source(cell))
            assert hit is None, f"{path.name} cell {i}: typed verdict {hit.group(0)!r}"


def test_the_comparison_table_is_cited_by_its_section():
    """The source's table of schemes is numbered 表6-3-1 but stands in section 6.2.4: every
    mention of the number names the section too."""
    texts = [(p.name, _source(c)) for p in NOTEBOOKS for c in _load(p)["cells"]]
    texts += [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "course_lib").rglob("*.py"))]
    for name, text in texts:
        for m in re.finditer("6-3-1", text):
            assert "6.2.4" in text[max(0, m.start() - 200) : m.end() + 50], f"{name}: 6-3-1 without 6.2.4"


#: Chinese that is not a term: the source's section titles (quoted, not glossed) and the
#: headings and interface words of the course itself.
SOURCE_TITLES = {"分布式深度学习计算简介", "串行计算到并行计算的演进", "串行计算到并行计算", "并行计算加速定律",
                 "分布式训练算法分类", "小结与讨论"}
COURSE_WORDS = {"复习测验", "术语表", "勘误", "讨论", "参考文献", "中文"}
_CJK = re.compile(r"[\u3400-\u9fff]+")


def _glossed_prose(text: str) -> str:
    """The prose whose Chinese must be glossary terms: without quotations (block quotes,
    quoted strings), code, italic titles and figure/table numbers (图6-1-3, 表6-3-1)."""
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(">"))
    text = re.sub(r'"[^"]{0,160}"|“[^”]*”|「[^」]*」|`[^`]*`', " ", text)
    text = re.sub(r"(?<!\*)\*(?!\*)[^*\n]+\*(?!\*)", " ", text)
    return re.sub(r"[图表]\s?\d[\d\-.]*", " ", text)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_chinese_term_is_the_glossarys(path):
    """One Chinese term per concept, and the glossary is its single source: every Chinese
    word in a notebook's prose is a glossary term (or a source title or course heading)."""
    from course_lib.datasets import load_glossary

    terms = sorted({g.term_zh for g in load_glossary()} | SOURCE_TITLES | COURSE_WORDS, key=len, reverse=True)
    for i, cell in enumerate(_load(path)["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        text = _glossed_prose(_source(cell))
        for term in terms:
            text = text.replace(term, " ")
        left = _CJK.findall(text)
        assert not left, f"{path.name} cell {i}: Chinese that is not the glossary's term: {left}"


def test_the_glossary_check_catches_a_synonym():
    """The check above can fail: a synonym of a glossary term is caught, a quotation is not."""
    from course_lib.datasets import load_glossary

    terms = {g.term_zh for g in load_glossary()}
    assert "组合并行" in terms and "组合式并行" not in terms
    assert _CJK.findall(_glossed_prose("hybrid parallelism (组合式并行)").replace("组合并行", ""))
    assert not _CJK.findall(_glossed_prose('the source says "组合式并行"\n> 引文'))


def _closed(cell):
    """(summary, body) when the cell is one closed <details> block (cells.details_parts)."""
    from course_lib.tools.cells import details_parts

    return details_parts(cell)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_no_markdown_cell_relies_on_collapsing(path):
    """Hidden text stays hidden only inside <details>: JupyterLab expands a collapsed
    Markdown cell when Run All renders it, and GitHub and nbviewer ignore the collapse."""
    for i, cell in enumerate(_load(path)["cells"]):
        if cell["cell_type"] == "markdown":
            assert not cell["metadata"].get("jupyter", {}).get("source_hidden"), (
                f"{path.name} cell {i} is collapsed: put what it hides in a <details> block instead")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_speaker_notes_are_closed_details(path):
    """Lecturers' notes (slide type "notes") are closed <details> blocks in the notebook
    (the student edition drops them; the slides show them open in the speaker view)."""
    notes = [(i, c) for i, c in enumerate(_load(path)["cells"])
             if c["metadata"].get("slideshow", {}).get("slide_type") == "notes"]
    assert notes, "no speaker notes"
    for i, cell in notes:
        parts = _closed(cell)
        assert parts, f"notes cell {i} is not one closed <details> block: {_source(cell)[:80]!r}"
        assert not parts[1].lower().startswith("speaker notes"), f"notes cell {i} repeats its summary"


def _sections(cells):
    """Index of each "## " heading's cell and the cells of its section."""
    starts = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
              and re.search(r"^## ", _source(c), re.M)]
    return [(start, cells[start:end]) for start, end in zip(starts, [*starts[1:], len(cells)])]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_every_section_has_speaker_notes(path):
    """Every "## " section has at least one notes cell: the lecturer has something to say
    on each part of the deck (issue 25: chapter 06 had one note in 37 slides)."""
    cells = _load(path)["cells"]
    missing = [
        re.search(r"^## (.*)$", _source(cells[start]), re.M).group(1)
        for start, section in _sections(cells)
        if not any(c["metadata"].get("slideshow", {}).get("slide_type") == "notes" for c in section)
    ]
    assert not missing, f"{path.name}: sections without speaker notes: {missing}"


def test_the_section_rule_sees_a_section_without_notes():
    notes = {"cell_type": "markdown", "metadata": {"slideshow": {"slide_type": "notes"}}, "source": "x"}
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "# T\n## Goals"}, notes,
             {"cell_type": "markdown", "metadata": {}, "source": "## 1 · A"},
             {"cell_type": "code", "metadata": {}, "source": "## not a heading"}]
    sections = _sections(cells)
    assert [start for start, _ in sections] == [0, 2]
    assert [any(c is notes for c in section) for _, section in sections] == [True, False]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_every_chapter_ends_with_a_questionnaire_and_hidden_answers(path):
    """fast.ai-style: 5-8 conceptual questions before the summary, answers closed below them."""
    cells = _load(path)["cells"]
    starts = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and _source(c).startswith("## Questionnaire")]
    assert len(starts) == 1, "one questionnaire per chapter"
    q, a = cells[starts[0]], cells[starts[0] + 1]
    questions = re.findall(r"^\d+\. ", _source(q), flags=re.M)
    answers = re.findall(r"^\d+\. ", (_closed(a) or ("", ""))[1], flags=re.M)
    assert 5 <= len(questions) <= 8 and len(answers) == len(questions)
    assert "questionnaire-answers" in a["metadata"].get("tags", [])
    assert _closed(a), "the answers must be one closed <details> block (they stay closed after Run All)"
    later = [c for c in cells[starts[0] + 2:] if c["cell_type"] == "markdown" and not _is_notes(c)]
    assert later and _source(later[0]).startswith("## Summary")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_every_try_it_prompt_asks_and_has_a_closed_answer(path):
    """No open-ended "things to try" without feedback: each prompt is followed by an answer
    that stays closed until opened (also after Run All)."""
    cells = _load(path)["cells"]
    for i, cell in enumerate(cells):
        text = _source(cell)
        assert not (cell["cell_type"] == "markdown" and text.lower().startswith("things to try")), (
            f"cell {i}: a 'things to try' prompt without questions and answers")
        if cell["cell_type"] == "markdown" and text.startswith("**Try it.**"):
            nxt = cells[i + 1]
            assert "?" in text, f"cell {i}: the prompt asks no question"
            assert "try-answer" in nxt["metadata"].get("tags", []), f"cell {i}: no answer cell follows"
    for i, cell in enumerate(cells):
        if "try-answer" not in cell["metadata"].get("tags", []):
            continue
        if cell["cell_type"] == "markdown":
            assert _closed(cell), f"answer cell {i} is not one closed <details> block"
            continue
        # Code: Lab re-opens a cell's collapsed output when the cell runs, so the answer
        # is folded by %%solution (one closed <details> output) and its code collapsed.
        assert _source(cell).startswith("%%solution\n"), f"answer cell {i} does not fold its output"
        assert cell["metadata"].get("jupyter", {}).get("source_hidden") is True, f"answer cell {i} shows its code"
        for out in cell["outputs"]:
            html = "".join(out.get("data", {}).get("text/html", ""))
            assert out["output_type"] == "display_data" and html.startswith("<details><summary>"), (
                f"answer cell {i}: a stored output is not folded: re-execute the notebook")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_code_cells_fit_on_a_slide(path):
    """One idea per cell: no code cell longer than 15 lines (longer code belongs in course_lib)."""
    long = [(i, len(_source(c).rstrip("\n").split("\n"))) for i, c in enumerate(_load(path)["cells"])
            if c["cell_type"] == "code" and len(_source(c).rstrip("\n").split("\n")) > 15]
    assert not long, f"{path.name}: (cell, lines) over 15 lines: {long}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_stored_figures_are_2x_and_shown_at_display_size(path):
    """Every stored PNG is rendered at the course's 2x density and shown at half its pixels.

    At least 1,000 pixels wide (crisp on a HiDPI screen and a projector), shown between
    500 and 960 CSS pixels wide (a notebook column or a slide never shrinks it, so its
    text stays at the 10 pt the style module sets).
    """
    import base64
    import struct

    from course_lib.plots.style import DENSITY, DISPLAY_DPI, MAX_WIDTH_IN, MIN_WIDTH_IN

    for i, cell in enumerate(_load(path)["cells"]):
        for out in cell.get("outputs", []):
            png = out.get("data", {}).get("image/png")
            if png is None:
                continue
            raw = base64.b64decode(png)
            width = struct.unpack(">I", raw[16:20])[0]
            shown = out.get("metadata", {}).get("image/png", {}).get("width")
            assert width >= MIN_WIDTH_IN * DISPLAY_DPI * DENSITY, f"cell {i}: figure {width} px wide"
            assert shown == round(width / DENSITY), f"cell {i}: {width} px figure shown at {shown} px"
            assert shown <= MAX_WIDTH_IN * DISPLAY_DPI, f"cell {i}: shown {shown} px wide"


def test_answers_render_inside_details_in_nbconvert():
    """nbviewer and the HTML export render what a closed block holds: the answers' Markdown
    list is parsed (the blank line after </summary> makes it Markdown, not raw HTML) and
    their math reaches MathJax unescaped, inside the <details> element."""
    import nbformat
    from nbconvert import HTMLExporter

    answers = [nbformat.from_dict({**c, "source": _source(c)}) for p in NOTEBOOKS for c in _load(p)["cells"]
               if {"questionnaire-answers", "try-answer"} & set(c["metadata"].get("tags", []))
               and c["cell_type"] == "markdown"]
    assert len(answers) >= len(NOTEBOOKS)
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nbformat.v4.new_notebook(cells=answers))
    blocks = re.findall(r"<details><summary>[^<]+</summary>(.*?)</details>", body, re.S)
    assert len(blocks) == len(answers)
    for block in blocks:
        assert re.search(r"<(ol|ul)>\s*<li>", block), f"Markdown not parsed inside <details>: {block[:120]!r}"
    assert sum("$" in b for b in blocks) >= len(NOTEBOOKS) - 1, "math missing from the answers"
    assert not any("&#36;" in b or "\\$" in b for b in blocks)


def _summary_outputs() -> list[str]:
    nb = _load(ROOT / "notebooks" / "16_summary.ipynb")
    return ["".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]


def test_summary_rows_name_every_chapter_in_order():
    """Chapter 16's "thread in one page" prints one row per chapter 01-15, each starting with
    the chapter's number, except the hybrid chapter (14), which combines them; a renumbering
    that forgets a row's label fails."""
    nb = _load(ROOT / "notebooks" / "16_summary.ipynb")
    code = "".join(_source(c) for c in nb["cells"][:10] if c["cell_type"] == "code")
    labels = [int(n) for n in re.findall(r'print\(f?"(\d\d) [a-z]', code)]
    hybrid = int(next(p.name[:2] for p in NOTEBOOKS if "hybrid" in p.name))
    assert labels == [n for n in range(1, 16) if n != hybrid], labels
    outputs = ["".join(o.get("text", "")) for c in nb["cells"][:10] if c["cell_type"] == "code"
               for o in c.get("outputs", [])]
    stored = [int(n) for n in re.findall(r"^(\d\d) [a-z]", "".join(outputs), re.M)]
    assert stored == labels, "the stored rows are not the code's: re-execute chapter 16"


def test_summary_names_modules_that_exist():
    """Every `module.function` a chapter 16 question names is importable (quiz 8 once named
    hybrid.scheme_comparison, which never existed)."""
    import importlib

    nb = _load(ROOT / "notebooks" / "16_summary.ipynb")
    text = "".join(_source(c) for c in nb["cells"] if c["cell_type"] == "markdown")
    names = set(re.findall(r"`([a-z_]+)\.([a-z_]+)`", text))
    assert ("planner", "scheme_comparison") in names
    for module, attr in names:
        assert hasattr(importlib.import_module(f"course_lib.{module}"), attr), f"{module}.{attr}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_numbered_lists_count_from_one(path):
    """Every numbered list (a questionnaire, its answers) counts 1, 2, 3, ... in order."""
    for i, cell in enumerate(_load(path)["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        blocks = re.split(r"\n\s*\n(?!\s*(?:\d+\.|\s{2}))", _source(cell))
        for block in blocks:
            numbers = [int(n) for n in re.findall(r"^(\d+)\. ", block, re.M)]
            if len(numbers) > 1:
                assert numbers == list(range(numbers[0], numbers[0] + len(numbers))), f"cell {i}: {numbers}"


PAPERS = {  # the papers the course computes with (issue 38 L13): name in the reference -> its link
    "Kaplan": "arxiv.org/abs/2001.08361", "Goyal": "arxiv.org/abs/1706.02677",
    "Gitman": "arxiv.org/abs/1708.03888", "McCandlish": "arxiv.org/abs/1812.06162",
    "Lavin": "arxiv.org/abs/1509.09308", "S. Li et al.": "arxiv.org/abs/2006.15704",
    "Q. Ho": "b7bb35b9c6ca2aee2df08cf09d7016c2", "Micikevicius": "arxiv.org/abs/1710.03740",
    "Rajbhandari": "arxiv.org/abs/1910.02054", "T. Chen": "arxiv.org/abs/1604.06174",
    "Korthikanti": "arxiv.org/abs/2205.05198", "Huang": "arxiv.org/abs/1811.06965",
    "Shoeybi": "arxiv.org/abs/1909.08053", "Narayanan": "arxiv.org/abs/2104.04473",
    "You et al.": "arxiv.org/abs/1904.00962",
}


def test_summary_cites_the_papers_the_course_computes_with():
    nb = _load(ROOT / "notebooks" / "16_summary.ipynb")
    refs = next(_source(c) for c in nb["cells"] if _source(c).startswith("## 6 · References"))
    items = re.split(r"\n(?=\d+\. )", refs)
    for name, link in PAPERS.items():
        hits = [item for item in items if name in item]
        assert len(hits) == 1, f"{name}: {len(hits)} references"
        assert link in hits[0], f"{name}'s reference has no link to {link}"
