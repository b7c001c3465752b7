"""The Chinese decks beside the English (issue 43, point 4): ``python -m course_lib slides
--lang zh_CN`` and ``make slides-zh`` export the Chinese edition (``notebooks/zh/``, built
by ``make zh`` from the catalogues) to ``build/slides/zh/`` with their own index. Their
prose and speaker notes are the translations; their code cells show the English notebook's
stored outputs (the Chinese notebooks are generated without outputs).

The deck tests build a Chinese notebook from its catalogue in a temporary checkout (the
``[i18n]`` extra: skipped without mdpo and polib, failed under ``DDL_REQUIRE_I18N=1``) and
export it against faked front-end files, as tests/test_slides_content.py does for the
English decks. ``make slides-zh`` as typed is a serial test, like ``make slides`` in
tests/test_readme_commands.py, and skips where that one does (no .venv, make or npm).
"""

from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import fast_schema  # noqa: F401 - before nbformat: see its docstring
import nbformat
import pytest
from readme_support import SLIDES_TIME_LIMIT, missing_npm, readme_commands_unavailable

from course_lib.tools import slides

ROOT = Path(__file__).resolve().parent.parent
LOCALE = ROOT / "locale" / "zh_CN" / "LC_MESSAGES"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
#: The chapter the deck tests translate and export (short, with figures, notes and formulas).
STEM = "02_scaling_laws"
NOTES = re.compile(r'<aside class="notes">(.*?)</aside>', re.S)
CJK = re.compile(r"[\u4e00-\u9fff]")
#: An English word of prose: a run of three or more Latin letters.
WORD = re.compile(r"[A-Za-z]{3,}")


def _require(what: str, present: bool) -> None:
    if not present:
        if os.environ.get("DDL_REQUIRE_I18N") == "1":
            pytest.fail(f"DDL_REQUIRE_I18N=1 but {what} is missing")
        pytest.skip(f"{what} is missing (pip install -e '.[i18n]')")


@pytest.fixture
def vendor(tmp_path):
    """A vendor folder that looks installed (package.json of every pinned package)."""
    root = tmp_path / "vendor"
    for name, version in slides.VENDOR_PACKAGES.items():
        pkg = root / "node_modules" / name
        pkg.mkdir(parents=True)
        (pkg / "package.json").write_text(json.dumps({"name": name, "version": version}))
    return root


@pytest.fixture
def chinese_notebook(tmp_path):
    """``notebooks/zh/02_scaling_laws.ipynb`` of a temporary checkout, built from its catalogue
    as ``make zh`` builds it, beside a copy of its English notebook."""
    for module in ("mdpo", "polib"):
        _require(module, importlib.util.find_spec(module) is not None)
    from course_lib.tools import i18n as tools

    english = tmp_path / "notebooks" / f"{STEM}.ipynb"
    english.parent.mkdir()
    shutil.copy(ROOT / "notebooks" / english.name, english)
    zh = english.parent / "zh" / english.name
    tools.build_notebook(english, LOCALE / f"{STEM}.po", zh)
    return zh


def _visible_prose(deck: str) -> str:
    """The text of a deck's Markdown cells: no scripts, styles, code, formulas, outputs or notes."""
    body = NOTES.sub(" ", deck.split("<body", 1)[1])
    cells = [c for c in body.split('<div class="jp-Cell ')[1:] if c.startswith("jp-MarkdownCell")]
    text = " ".join(c.split(">", 1)[1].split("</section>")[0] for c in cells)  # past the div's attributes
    text = re.sub(r"<(code|pre|script|style)\b.*?</\1>", " ", text, flags=re.S)
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    return re.sub(r"\$\$.*?\$\$|\$[^$]*\$|https?://\S+", " ", text, flags=re.S)


def _title(path: Path) -> str:
    first = json.loads(path.read_text(encoding="utf-8"))["cells"][0]
    return "".join(first["source"]).splitlines()[0].lstrip("# ").strip()


def _kept_pngs(path: Path) -> int:
    cells = slides.kept_cells(nbformat.read(path, as_version=4).cells)
    return sum("image/png" in o.get("data", {}) for c in cells if c.cell_type == "code"
               and "remove-output" not in c.metadata.get("tags", []) for o in c.get("outputs", []))


def test_a_chinese_deck_from_a_built_chinese_notebook(chinese_notebook, vendor, tmp_path):
    english = chinese_notebook.parent.parent / chinese_notebook.name
    before = english.read_bytes(), chinese_notebook.read_bytes()
    messages = []
    out = tmp_path / "slides" / "zh"
    (deck,) = slides.build_slides([chinese_notebook], out, vendor_dir=vendor, language="zh_CN",
                                  log=messages.append)
    text = deck.path.read_text(encoding="utf-8")
    # the page is Chinese: its lang, its title, its prose
    assert re.search(r'<html lang="zh">', text)
    zh_title, en_title = _title(chinese_notebook), _title(english)
    assert CJK.search(zh_title) and zh_title != en_title
    assert f"<title>{html.escape(zh_title)} slides</title>" in text and en_title not in text
    prose = _visible_prose(text)
    assert len(CJK.findall(prose)) > 2000, "the deck's prose is not Chinese"
    assert len(CJK.findall(prose)) > 5 * len(WORD.findall(prose)), f"English left in the prose: {prose[:500]}"
    # the speaker notes are translated, one per notes cell, open
    asides = NOTES.findall(text)
    notes_cells = [c for c in slides.kept_cells(nbformat.read(chinese_notebook, as_version=4).cells)
                   if c.metadata.get("slideshow", {}).get("slide_type") == "notes"]
    assert len(asides) == len(notes_cells) > 0
    for aside in asides:
        body = html.unescape(re.sub(r"<[^>]+>", "", aside))
        assert "<details" not in aside and len(CJK.findall(body)) > 3 * len(WORD.findall(body)), body[:300]
    # the code cells show the English notebook's stored outputs (every code cell matched)
    assert text.count('src="data:image/png;base64,') >= _kept_pngs(english) > 0
    assert slides.WIDGET_VIEW_MIME not in text
    assert messages == [f"slides: {deck.path} ({sum(deck.structure)} slides, stored outputs of the English "
                        f"notebook, {deck.seconds:.1f} s)"]
    # its own index lists it, in Chinese
    index = (out / "index.html").read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in index and "幻灯片" in index and "打印版" in index
    assert re.findall(r'<li><a href="([^"]+)">([^<]+)</a>', index) == [(deck.path.name, html.escape(zh_title))]
    # the notebooks are read, never written
    assert (english.read_bytes(), chinese_notebook.read_bytes()) == before


def test_a_deck_shows_no_output_of_a_cell_whose_english_changed(chinese_notebook, vendor, tmp_path):
    """A Chinese edition older than its English notebook (make zh not rerun): a code cell
    whose English code changed keeps no output, and the build says so."""
    english = chinese_notebook.parent.parent / chinese_notebook.name
    nb = json.loads(english.read_text(encoding="utf-8"))
    changed = next(c for c in nb["cells"] if c["cell_type"] == "code" and c["outputs"]
                   and "setup" not in c["metadata"].get("tags", []))
    changed["source"] = ["# edited in English\n", *changed["source"]]
    english.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    zh = nbformat.read(chinese_notebook, as_version=4)
    merged, unmatched = slides.stored_outputs_from(zh, nbformat.read(english, as_version=4))
    assert unmatched == [changed["id"]]
    assert [c["outputs"] for c in merged["cells"] if c.get("id") == changed["id"]] == [[]]
    assert all(c["outputs"] for c in merged["cells"] if c.get("cell_type") == "code"
               and c.get("id") in {e["id"] for e in nb["cells"] if e["cell_type"] == "code" and e["outputs"]}
               and c.get("id") != changed["id"])
    messages = []
    slides.build_slides([chinese_notebook], tmp_path / "out", vendor_dir=vendor, language="zh_CN",
                        log=messages.append)
    assert any("1 code cells differ from the English notebook" in m and "make zh" in m for m in messages), messages


def test_the_command_line_writes_chinese_decks_and_refuses_english_notebooks(chinese_notebook, vendor, tmp_path, capsys):
    out = tmp_path / "out"
    assert slides.main(["--lang", "zh_CN", str(chinese_notebook), "-o", str(out), "--vendor", str(vendor)]) == 0
    assert "1 decks" in capsys.readouterr().out
    assert (out / f"{STEM}.slides.html").is_file() and 'lang="zh-CN"' in (out / "index.html").read_text("utf-8")
    english = chinese_notebook.parent.parent / chinese_notebook.name
    assert slides.main(["--lang", "zh_CN", str(english), "-o", str(out), "--vendor", str(vendor)]) == 1
    assert "no notebook of the Chinese edition" in capsys.readouterr().err
    with pytest.raises(ValueError, match="language must be one of"):
        slides.build_slides([chinese_notebook], out, vendor_dir=vendor, language="zh")


def test_english_decks_and_index_stay_english(vendor, tmp_path):
    """The language of the Chinese decks changes nothing for the English ones."""
    (deck,) = slides.build_slides([ROOT / "notebooks" / f"{STEM}.ipynb"], tmp_path, vendor_dir=vendor,
                                  log=lambda m: None)
    assert '<html lang="en">' in deck.path.read_text(encoding="utf-8")
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert '<html lang="en">' in index and "print version" in index and not CJK.search(index)


# ------------------------------------------------------------------ make slides-zh, as typed
def _make_slides_zh_unavailable() -> str | None:
    reason = readme_commands_unavailable() or missing_npm()
    if reason:
        return reason
    stale = subprocess.run(["make", "-q", ".venv/.i18n-stamp"], cwd=ROOT, capture_output=True, timeout=60)
    if stale.returncode != 0:
        return "the [i18n] extra is not installed in .venv (make zh would install it first)"
    missing = [t for t in ("msgmerge", "msgattrib", "msgfmt") if shutil.which(t) is None]
    return f"GNU gettext is missing ({', '.join(missing)})" if missing else None


@pytest.mark.slow
@pytest.mark.serial  # exports every chapter, into build/slides/ as make slides does (run 2 of make test)
@pytest.mark.timeout(SLIDES_TIME_LIMIT + 300)
def test_make_slides_zh_writes_the_chinese_decks_beside_the_english():
    reason = _make_slides_zh_unavailable()
    if reason:
        if os.environ.get("DDL_REQUIRE_BROWSER") == "1" and "npm" in reason:
            pytest.fail(f"DDL_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    proc = subprocess.run(["make", "slides-zh"], cwd=ROOT, capture_output=True, text=True,
                          timeout=SLIDES_TIME_LIMIT, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = ROOT / "build" / "slides" / "zh"
    assert f"{len(NOTEBOOKS)} decks" in proc.stdout and str(out / "index.html") in proc.stdout
    assert proc.stdout.count("stored outputs of the English notebook") == len(NOTEBOOKS)
    assert "differ from the English notebook" not in proc.stdout
    index = (out / "index.html").read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in index
    assert re.findall(r'<li><a href="([^"]+)">', index) == [f"{p.stem}.slides.html" for p in NOTEBOOKS]
    vendor = (ROOT / "build" / "slides" / "vendor").resolve()
    for notebook in NOTEBOOKS:
        text = (out / f"{notebook.stem}.slides.html").read_text(encoding="utf-8")
        assert '<html lang="zh">' in text and CJK.search(NOTES.findall(text)[0]), notebook.name
        for url in re.findall(r'<(?:script|link)\b[^>]*?(?:src|href)="([^"]+)"', text):
            target = (out / url.split("?")[0]).resolve()
            assert target.is_relative_to(vendor) and target.exists(), f"{notebook.name}: {url}"
