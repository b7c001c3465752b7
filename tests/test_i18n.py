"""The Chinese edition from one source (issue 43): catalogues in step with the English, the
build that never shows a stale translation, the runtime translation of the library's text.

The catalogue tests need the extra ``[i18n]`` (mdpo, polib) and GNU gettext (msgmerge,
msgattrib, msgfmt); they are skipped where one is missing, unless ``DDL_REQUIRE_I18N=1``
(CI), which makes them fail.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import pytest

from course_lib import i18n
from course_lib.i18n import set_language, tr, tr_n

ROOT = Path(__file__).resolve().parent.parent
LOCALE = ROOT / "locale" / "zh_CN" / "LC_MESSAGES"
#: The notebook the copy tests edit (any would do; this one is short and has every kind of cell).
NOTEBOOK = "02_scaling_laws"


def _require(what: str, present: bool) -> None:
    if not present:
        if os.environ.get("DDL_REQUIRE_I18N") == "1":
            pytest.fail(f"DDL_REQUIRE_I18N=1 but {what} is missing")
        pytest.skip(f"{what} is missing (pip install -e '.[i18n]'; apt-get install gettext)")


@pytest.fixture
def tools():
    """The i18n tool module, with mdpo, polib and gettext present (else a skip)."""
    import importlib.util

    for module in ("mdpo", "polib"):
        _require(module, importlib.util.find_spec(module) is not None)
    for tool in ("msgmerge", "msgattrib", "msgfmt"):
        _require(tool, shutil.which(tool) is not None)
    from course_lib.tools import i18n as tools

    return tools


@pytest.fixture
def english(monkeypatch):
    """The library in English for the test, whatever DDL_LANG was (restored afterwards)."""
    monkeypatch.setenv(i18n.ENV, "en")
    return monkeypatch


@pytest.fixture
def chinese(english):
    """As :func:`english`, for a test that selects Chinese: it reads the catalogue with polib
    (the ``[i18n]`` extra; else a skip, a failure under ``DDL_REQUIRE_I18N=1``)."""
    import importlib.util

    _require("polib", importlib.util.find_spec("polib") is not None)
    return english


def _copy(tmp_path: Path, stems=(NOTEBOOK,)) -> Path:
    """A checkout in ``tmp_path`` with copies of some notebooks and their catalogues."""
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "pyproject.toml").write_text("")
    folder = tmp_path / "locale" / "zh_CN" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    for stem in stems:
        shutil.copy(ROOT / "notebooks" / f"{stem}.ipynb", tmp_path / "notebooks")
        shutil.copy(LOCALE / f"{stem}.po", folder)
    return tmp_path


def _clear() -> None:
    i18n._catalogue.cache_clear()
    i18n._table.cache_clear()


def _cells(path: Path) -> dict:
    return {c["id"]: "".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]}


# ------------------------------------------------------------------------ kept in step
def test_an_edited_sentence_becomes_fuzzy_and_the_chinese_notebook_shows_its_english(tmp_path, tools):
    import polib

    root = _copy(tmp_path)
    nb = root / "notebooks" / f"{NOTEBOOK}.ipynb"
    po_path = root / "locale" / "zh_CN" / "LC_MESSAGES" / f"{NOTEBOOK}.po"
    po = polib.pofile(str(po_path))
    text = nb.read_text(encoding="utf-8")
    # two sentences of the notebook's prose, each written once, in plain words (no markup)
    plain = [e for e in po if len(e.msgid.split()) >= 8 and text.count(e.msgid) == 1
             and not any(c in e.msgid for c in "*`$[\\\"")]
    edited, kept = plain[0], plain[-1]
    edited.msgstr, kept.msgstr = "旧的译文。", "保留的译文。"
    po.save(str(po_path))
    old_english = edited.msgid
    first, rest = old_english.split(" ", 1)
    new_english = f"{first} indeed {rest}"  # one word more
    nb.write_text(text.replace(old_english, new_english), encoding="utf-8")

    assert tools.extract(root) == [f"updated locale/zh_CN/LC_MESSAGES/{NOTEBOOK}.po"]
    po = polib.pofile(str(po_path))
    fuzzy = [e for e in po if "fuzzy" in e.flags]
    assert [(e.msgid, e.previous_msgid, e.msgstr) for e in fuzzy] == [
        (new_english, old_english, "旧的译文。")]  # exactly one, the old English kept beside it
    assert po.find(kept.msgid).msgstr == "保留的译文。" and not po.find(old_english)

    tools.build(root)
    zh = "".join(_cells(root / "notebooks" / "zh" / f"{NOTEBOOK}.ipynb").values())
    assert new_english in zh and "旧的译文" not in zh  # the English, never the stale Chinese
    assert "保留的译文。" in zh and kept.msgid not in zh


@pytest.mark.slow  # reads or merges every catalogue: 3 s
def test_extracting_twice_writes_the_same_bytes(tmp_path, tools):
    root = _copy(tmp_path, (NOTEBOOK, "16_summary"))
    (root / "course_lib").symlink_to(ROOT / "course_lib")
    tools.extract(root)
    first = {p.name: p.read_bytes() for p in sorted((root / "locale").rglob("*.po"))}
    assert tools.extract(root) == []
    assert {p.name: p.read_bytes() for p in sorted((root / "locale").rglob("*.po"))} == first
    assert set(first) == {f"{NOTEBOOK}.po", "16_summary.po", "course_lib.po"}
    assert first[f"{NOTEBOOK}.po"] == (LOCALE / f"{NOTEBOOK}.po").read_bytes()  # the committed one is that fixed point
    assert 'msgid "✓ Correct: {name} = {value}."' in first["course_lib.po"].decode()


@pytest.mark.slow  # reads or merges every catalogue: 3 s
def test_the_catalogues_hold_todays_english(tools):
    """Fails when a notebook's Markdown or a translated library sentence changed and
    ``python -m course_lib i18n extract`` was not run (the message names the catalogue)."""
    assert tools.stale_catalogues(ROOT) == []


def test_the_stale_check_sees_an_edit(tmp_path, tools):
    root = _copy(tmp_path)
    nb = root / "notebooks" / f"{NOTEBOOK}.ipynb"
    nb.write_text(nb.read_text(encoding="utf-8").replace("Learning goals", "What you will learn"), encoding="utf-8")
    (root / "notebooks" / "16_new.ipynb").write_text(nb.read_text(encoding="utf-8"), encoding="utf-8")
    stale = tools.stale_catalogues(root)
    assert len(stale) == 2 and "1 new and 1 removed messages" in stale[0] and stale[1].endswith("16_new.po: missing")


def test_msgfmt_check_passes_on_every_catalogue(tools):
    catalogues = sorted(LOCALE.glob("*.po"))
    assert len(catalogues) == len(list((ROOT / "notebooks").glob("*.ipynb"))) + 1
    assert {p.name: tools.msgfmt_problems(p) for p in catalogues if tools.msgfmt_problems(p)} == {}
    assert {p.name: tools.placeholder_problems(p) for p in catalogues if tools.placeholder_problems(p)} == {}


def test_a_translation_with_a_missing_or_renamed_placeholder_fails(tmp_path, tools):
    import polib

    def catalogue(msgstr: str) -> Path:
        po = polib.POFile()
        po.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Language": "zh_CN",
                       "Plural-Forms": "nplurals=1; plural=0;"}
        po.append(polib.POEntry(msgid="{workers} workers took {time}", msgstr=msgstr, flags=["python-brace-format"]))
        path = tmp_path / f"{abs(hash(msgstr))}.po"
        po.save(str(path))
        return path

    good = catalogue("{workers} 个进程用了 {time}")
    assert tools.msgfmt_problems(good) == "" and tools.placeholder_problems(good) == []
    for bad, name in (("{workers} 个进程用了很久", "time"), ("{workers} 个进程用了 {tme}", "time")):
        assert name in tools.msgfmt_problems(catalogue(bad))
        assert tools.placeholder_problems(catalogue(bad))
    # a format spec is part of the field: {t:.2f} must stay {t:.2f}
    po = polib.POFile()
    po.append(polib.POEntry(msgid="took {t:.2f} s", msgstr="用了 {t} 秒", flags=["python-brace-format"]))
    assert tools.placeholder_problems(po) == ["'took {t:.2f} s': fields ['t'] in the translation, ['t:.2f'] in the English"]
    # a notebook's sentence keeps its formulas and code as written
    po = polib.POFile()
    po.append(polib.POEntry(msgid="The limit $1/(1-p)$ of `amdahl`", msgstr="`amdahl` 的极限 $1/(1-p)$"))
    po.append(polib.POEntry(msgid="On $N$ devices", msgstr="在 $n$ 个设备上"))
    assert tools.placeholder_problems(po) == [
        "'On $N$ devices': formulas and code ['$N$', '$n$'] differ between the English and the translation"]


def test_the_extractor_refuses_what_cannot_be_translated(tmp_path, tools):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "pyproject.toml").write_text("")
    package = tmp_path / "course_lib"
    package.mkdir()
    (package / "ok.py").write_text('from .i18n import N_, tr, tr_n\nA = N_("a constant")\n'
                                   'def f(n, word):\n    return tr("{n} steps", n=n) + tr(word) + '
                                   'tr_n("{count} worker", "{count} workers", n) + tr("x", context="menu")\n')
    po = tools.library_template(tmp_path)
    assert [(e.msgctxt, e.msgid, e.msgid_plural, e.flags) for e in po] == [
        (None, "a constant", "", []), (None, "{n} steps", "", ["python-brace-format"]),
        (None, "{count} worker", "{count} workers", ["python-brace-format"]), ("menu", "x", "", [])]
    assert po[0].occurrences == [("course_lib/ok.py", "")]  # no line numbers: no churn when code moves
    for call, why in (('tr(f"{n} steps")', "literal string"), ('tr("{} steps".format(n))', "literal string"),
                      ('tr("a" + "b")', "literal string"), ('tr("{} steps", n=n)', "only named fields"),
                      ('tr("{0} steps", n=n)', "only named fields")):
        (package / "bad.py").write_text(f"from .i18n import tr\nn = 1\nx = {call}\n")
        with pytest.raises(tools.I18nError, match=f"course_lib/bad.py:3: tr.*{why}"):
            tools.library_template(tmp_path)


# ------------------------------------------------------------------------ the build
def test_the_build_writes_a_runnable_chinese_twin_and_never_touches_the_english(tmp_path, tools):
    root = _copy(tmp_path)
    source = root / "notebooks" / f"{NOTEBOOK}.ipynb"
    before = source.read_bytes()
    assert tools.build(root) == [root / "notebooks" / "zh" / f"{NOTEBOOK}.ipynb"]
    assert source.read_bytes() == before
    en, zh = json.loads(before), json.loads((root / "notebooks" / "zh" / f"{NOTEBOOK}.ipynb").read_text("utf-8"))
    assert zh["metadata"]["language"] == "zh-CN" and "widgets" not in zh["metadata"]
    assert [(c["id"], c["cell_type"], c["metadata"].get("slideshow")) for c in zh["cells"]] == \
        [(c["id"], c["cell_type"], c["metadata"].get("slideshow")) for c in en["cells"]]
    code = [c for c in zh["cells"] if c["cell_type"] == "code"]
    assert "".join(code[0]["source"]).startswith("".join(tools.SETUP_LINES))
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert not any("nbval-check-output" in c["metadata"].get("tags", []) for c in code)
    markdown = "".join("".join(c["source"]) for c in zh["cells"] if c["cell_type"] == "markdown")
    assert "](../notation.md)" in markdown and "](notation.md)" not in markdown
    assert markdown.count("<details>") == markdown.count("</details>") > 0  # mdpo keeps a closing block
    # a second build changes nothing
    written = (root / "notebooks" / "zh" / f"{NOTEBOOK}.ipynb").read_bytes()
    tools.build(root)
    assert (root / "notebooks" / "zh" / f"{NOTEBOOK}.ipynb").read_bytes() == written


def _blank_strings(source: str) -> str:
    """The syntax tree of a code cell with every string literal made the same."""
    import ast

    from course_lib.tools.i18n_code import _mask_magics

    class Blank(ast.NodeTransformer):
        def visit_JoinedStr(self, node):
            return ast.Constant("")

        def visit_Constant(self, node):
            return ast.Constant("") if isinstance(node.value, str) else node

    return ast.dump(Blank().visit(ast.parse(_mask_magics(source))))


@pytest.mark.parametrize("stem", sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb")))
def test_the_chinese_code_differs_from_the_english_only_in_its_literals(stem, tools):
    """Point 2: what a notebook's code prints is translated, and nothing else of the code
    changes: every code cell, with the catalogue's translations written in, has the English
    cell's syntax tree once the string literals are blanked, and a translated literal is there."""
    from course_lib.tools.i18n_code import CONTEXT, code_shape, translate_code

    table = {e.msgid: e.msgstr for e in tools._translations(LOCALE / f"{stem}.po") if e.msgctxt == CONTEXT}
    changed = 0
    for cell_id, source in ((c["id"], "".join(c["source"])) for c in json.loads(
            (ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"):
        zh = translate_code(source, table)
        assert _blank_strings(zh) == _blank_strings(source), cell_id
        assert code_shape(zh) == code_shape(source), cell_id  # the Chinese deck finds its English outputs
        changed += zh != source
    assert changed or not any(k != v for k, v in table.items())


def test_the_build_uses_what_msgattrib_keeps(tmp_path, tools):
    """The build's filter is ``msgattrib --translated --no-fuzzy --no-obsolete`` (mdpo alone
    would apply fuzzy entries)."""
    import subprocess

    import polib

    source = polib.pofile(str(LOCALE / "course_lib.po"))
    po = polib.POFile()
    po.metadata = source.metadata
    po.extend(e for e in source if e.translated())  # singular and plural entries
    assert any(e.msgid_plural for e in po) and any(not e.msgid_plural for e in po)
    po[0].flags.append("fuzzy")
    po[1].msgstr = ""
    po.append(polib.POEntry(msgid="gone", msgstr="没了", obsolete=True))
    po.append(polib.POEntry(msgid="not yet", msgstr=""))
    po.save(str(tmp_path / "in.po"))
    subprocess.run(["msgattrib", "--translated", "--no-fuzzy", "--no-obsolete", "-o", str(tmp_path / "out.po"),
                    str(tmp_path / "in.po")], check=True)

    def entries(pofile):
        return [(e.msgctxt, e.msgid, e.msgstr, dict(e.msgstr_plural)) for e in pofile]

    kept = entries(polib.pofile(str(tmp_path / "out.po")))
    assert entries(tools._translations(tmp_path / "in.po")) == kept
    assert len(kept) == len(po) - 4


def test_a_cell_keeps_its_math_tables_code_and_closing_tags(tools):
    import polib

    source = ("## Amdahl\n\nThe limit is $1/(1-p)$ for `scaling.amdahl`, see [the table](notation.md).\n\n"
              "$$S(N) = \\frac{1}{(1-p) + p/N}$$\n\n| $N$ | speedup |\n|---|---|\n| 8 | 5.9 |\n\n"
              "<details><summary>Answer</summary>\n\nAsk why.\n\n</details>")
    assert tools.cell_messages(source) == [
        "Answer", "Amdahl", "The limit is $1/(1-p)$ for `scaling.amdahl`, see [the table](notation.md).",
        "speedup", "Ask why."]
    po = polib.POFile()
    for en, zh in (("The limit is $1/(1-p)$ for `scaling.amdahl`, see [the table](notation.md).",
                    "极限是 $1/(1-p)$（`scaling.amdahl`），见[表](notation.md)。"),
                   ("speedup", "加速比"), ("Answer", "答案"), ("Ask why.", "问为什么。")):
        po.append(polib.POEntry(msgid=en, msgstr=zh))
    po.append(polib.POEntry(msgid="Amdahl", msgstr="阿姆达尔", flags=["fuzzy"]))
    out = tools.translate_cell(source, po)
    assert "## Amdahl\n" in out  # fuzzy: English
    assert "极限是 $1/(1-p)$（`scaling.amdahl`），见[表](../notation.md)。" in out
    assert "\\frac{1}{(1-p) + p/N}" in out and "| 8 | 5.9 |" in out and "| $N$ | 加速比 |" in out
    assert out.rstrip().endswith("问为什么。\n\n</details>") and "<summary>答案</summary>" in out


# ------------------------------------------------------------------------ the glossary
@pytest.mark.slow  # reads or merges every catalogue: 3 s
def test_translations_use_the_glossary_terms(tools):
    """Each glossary term whose English a source message names is translated by the
    glossary's Chinese (untranslated and fuzzy entries are skipped)."""
    terms = tools._glossary_terms(ROOT)
    assert ("speedup", "加速比") in terms and ("multiply-accumulate", "乘加运算") in terms
    problems = {p.name: tools.glossary_problems(p, terms) for p in sorted(LOCALE.glob("*.po"))}
    assert {k: v for k, v in problems.items() if v} == {}


def test_the_glossary_check_can_fail(tools):
    import polib

    po = polib.POFile()
    po.append(polib.POEntry(msgid="The speedups of strong scaling", msgstr="强扩展的速度提升"))
    po.append(polib.POEntry(msgid="reduce the memory", msgstr="减少内存", tcomment="glossary-skip: reduce"))
    po.append(polib.POEntry(msgid="speedup of {speedup}", msgstr="加速比 {speedup}"))
    po.append(polib.POEntry(msgid="a speedup", msgstr="一个速度", flags=["fuzzy"]))
    terms = [("speedup", "加速比"), ("strong scaling", "强扩展"), ("reduce", "归约")]
    assert tools.glossary_problems(po, terms) == [
        "'The speedups of strong scaling': names 'speedup', the translation lacks '加速比'"]


# ------------------------------------------------------------------------ the runtime
def test_set_language_switches_the_wrapped_strings(chinese):
    from course_lib.exercises import check
    from course_lib.parallel.train.cores import CoreCheck

    busy = CoreCheck(cores=2, load=0.3, slowdown=1.9)
    assert str(check(10, 10, name="limit")) == "✓ Correct: limit = 10."
    assert str(busy).startswith("your 2 cores were shared with other work (")
    set_language("zh_CN")
    assert i18n.language() == "zh_CN" and os.environ[i18n.ENV] == "zh_CN"  # inherited by workers
    assert str(check(10, 10, name="limit")) == "✓ 正确：limit = 10。"
    assert str(check(9, 10, name="limit", hint="S → 1/(1-p)")) == "✗ limit = 9 不正确。提示：S → 1/(1-p)"
    assert str(check(8, 8, name="N", unit="devices")) == "✓ 正确：N = 8 个设备。"  # a unit word, translated
    assert str(check(8, 8, name="m", unit="MB")) == "✓ 正确：m = 8 MB。"  # a symbol, as it is
    from course_lib.live.widgets import Slider

    assert Slider("n", "N", 0, 10, 1, 16, unit="devices", kind="log2").description == "N [设备]"  # a slider's unit
    assert str(busy).startswith("你的 2 个核心被其他工作共用（")
    assert "其他工作拖慢了并排运行的忙循环（1.90x > 1.25x）" in str(busy)  # numbers formatted by the code
    set_language("zh-CN")  # the notebooks' metadata spelling
    assert i18n.language() == "zh_CN"
    set_language("en")
    assert str(check(10, 10, name="limit")) == "✓ Correct: limit = 10."


def test_sentences_join_as_each_language_writes():
    assert i18n.sentences("✗ N = 3 is not right.", "", " Hint: try 4. ") == "✗ N = 3 is not right. Hint: try 4."
    assert i18n.sentences("✗ N = 3 不正确。", "提示：试试 4。", "（见第 2 节）") == "✗ N = 3 不正确。提示：试试 4。（见第 2 节）"
    assert i18n.sentences("时间：  3 s", "a b") == "时间：3 s a b"
    with pytest.raises(TypeError, match=r"parts\[1\]"):
        i18n.sentences("a", 3)


def test_an_unknown_language_names_the_parameter_and_the_choices(english):
    with pytest.raises(ValueError, match=r"lang must be one of 'en', 'zh_CN' \(or 'zh-CN'\), got 'fr'"):
        set_language("fr")
    with pytest.raises(TypeError, match="lang must be a language code"):
        set_language(None)
    assert i18n.language() == "en"
    english.setenv(i18n.ENV, "klingon")
    with pytest.warns(UserWarning, match="not a course language"):
        assert i18n.language() == "en"
    with pytest.raises(TypeError, match="message must be the English text"):
        tr(None)
    with pytest.raises(TypeError, match="count must be an integer"):
        tr_n("{count} step", "{count} steps", 1.5)


def test_translation_happens_before_the_fields_are_filled(tmp_path, chinese):
    """The catalogue is looked up with the English as written ({fields} unfilled); plural
    forms by the catalogue's rule; a translation whose fields do not match falls back to the
    English instead of raising; fuzzy entries are not used."""
    import polib

    folder = tmp_path / "zh_CN" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    po = polib.POFile()
    po.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Plural-Forms": "nplurals=1; plural=0;"}
    po.append(polib.POEntry(msgid="{n} workers took {time}", msgstr="{time} 内完成，共 {n} 个进程"))
    po.append(polib.POEntry(msgid="{count} step", msgid_plural="{count} steps", msgstr_plural={0: "{count} 步"}))
    po.append(polib.POEntry(msgid="broken {x}", msgstr="坏的 {y}"))
    po.append(polib.POEntry(msgid="stale", msgstr="过时的", flags=["fuzzy"]))
    po.save(str(folder / "course_lib.po"))
    chinese.setattr(i18n, "locale_dir", lambda: tmp_path)
    _clear()
    try:
        set_language("zh_CN")
        assert tr("{n} workers took {time}", n=4, time="1.25 s") == "1.25 s 内完成，共 4 个进程"
        assert (tr_n("{count} step", "{count} steps", 1), tr_n("{count} step", "{count} steps", 3)) == ("1 步", "3 步")
        assert tr("broken {x}", x=1) == "broken 1" and tr("stale") == "stale"
        assert tr("not in the catalogue") == "not in the catalogue"
    finally:
        _clear()


def test_a_missing_catalogue_is_reported_when_the_language_is_chosen(tmp_path, chinese):
    chinese.setattr(i18n, "locale_dir", lambda: tmp_path)
    _clear()
    try:
        with pytest.raises(FileNotFoundError, match="no catalogue for zh_CN"):
            set_language("zh_CN")
        assert i18n.language() == "en"
        chinese.setenv(i18n.ENV, "zh_CN")  # set outside the course: English, never an error
        with pytest.warns(UserWarning, match="printing in English: no catalogue for zh_CN"):
            assert tr("{n} steps", n=2) == "2 steps"
    finally:
        _clear()


# ------------------------------------------------------------------------ figures
def test_english_figures_keep_their_font_and_chinese_ones_get_a_cjk_font(chinese):
    from course_lib.plots.style import CJK_FONTS, cjk_font, rc_params

    assert "font.family" not in rc_params()  # English: the style as it was
    set_language("zh_CN")
    font = cjk_font()
    if font is None:
        pytest.skip("no font with Chinese glyphs installed (apt-get install fonts-noto-cjk or fonts-wqy-zenhei)")
    assert rc_params()["font.family"] == [font, "DejaVu Sans"]
    assert font in CJK_FONTS or font


def test_a_chinese_figure_renders_every_glyph(chinese):
    from course_lib.plots import figure_to_png
    from course_lib.plots.scaling import laws_figure
    from course_lib.plots.style import cjk_font

    set_language("zh_CN")
    if cjk_font() is None:
        pytest.skip("no font with Chinese glyphs installed (apt-get install fonts-noto-cjk or fonts-wqy-zenhei)")
    fig = laws_figure(0.95, 16)
    assert fig.axes[0].get_title() == "固定规模与增长规模的问题，p = 0.95"
    assert fig.axes[0].get_xlabel() == "设备数量 N"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns "Glyph ... missing from font(s)"
        assert figure_to_png(fig, dpi=50)[1:4] == b"PNG"
    # words around a formula are drawn by mathtext, in the first family only (it logs, not warns)
    import logging

    from course_lib.plots import new_figure
    from course_lib.plots.style import styled

    @styled
    def with_math():
        fig, ax = new_figure(size=(6.4, 3.0))
        ax.set_title("$N_p$ 个流水阶段，气泡 $(N_p-1)/(M+N_p-1)$")
        ax.plot([1e-3, 1.0], [1.0, 2.0])
        ax.set_xscale("log")  # tick labels 10^{-3}: a minus sign, which a CJK font may lack
        return fig

    seen = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logger = logging.getLogger("matplotlib.mathtext")
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            figure_to_png(with_math(), dpi=50)
    finally:
        logger.removeHandler(handler)
    assert not [m for m in seen if "glyph" in m], seen


def test_the_doctor_names_the_font_to_install(english):
    from course_lib.plots import style
    from course_lib.tools import doctor

    english.setattr(style, "cjk_font", lambda: None)
    note = doctor.check_figure_font()
    assert note.status == doctor.INFO and "only the Chinese edition" in note.detail
    english.setenv(i18n.ENV, "zh_CN")
    warn = doctor.check_figure_font()
    # the doctor speaks the chosen language: the warning in Chinese where polib reads the catalogue
    assert warn.status == doctor.WARN and ("empty boxes" in warn.detail or "空方框" in warn.detail), warn.detail
    assert "fonts-noto-cjk" in warn.fix or "PingFang" in warn.fix or "YaHei" in warn.fix
    english.setattr(style, "cjk_font", lambda: "WenQuanYi Zen Hei")
    assert doctor.check_figure_font().status == doctor.OK


# ------------------------------------------------------------------------ the command
def test_the_command_line(capsys, tools):
    from course_lib.__main__ import main

    assert main(["i18n", "--help"]) == 0 and "extract" in capsys.readouterr().out
    assert main(["i18n", "translate"]) == 2 and "unknown arguments" in capsys.readouterr().err
    assert main(["i18n", "stats"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["catalogue", "entries", "words", "done", "fuzzy", "todo"]
    assert out.splitlines()[-1].startswith("total")
