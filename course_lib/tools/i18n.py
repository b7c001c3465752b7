"""The Chinese edition from one source: ``python -m course_lib i18n extract | build | check | stats``.

The English notebooks and ``course_lib``'s printed sentences are the source; gettext
catalogues in ``locale/zh_CN/LC_MESSAGES/`` hold the translations, one per notebook
(``<notebook stem>.po``: its Markdown cells, each message located by its cell id) and one
for the library (``course_lib.po``: every literal passed to :func:`course_lib.i18n.tr`,
:func:`~course_lib.i18n.tr_n` or :func:`~course_lib.i18n.N_`).

``extract``
    Takes the string literals a notebook's code cells print (context ``code``, see
    :mod:`course_lib.tools.i18n_code`), and cuts each Markdown cell into messages with mdpo (paragraphs, list items, headings,
    table cells and ``<summary>`` titles; math, inline code and links stay inside the
    messages, never wrapped) and merges them into the catalogues with GNU gettext's
    ``msgmerge --previous``: an unchanged sentence keeps its translation, an edited one
    becomes *fuzzy* with the old English kept beside it (``#| msgid``) for the translator,
    a removed one is dropped. A new catalogue (a new or renamed notebook) takes the
    translations of identical sentences from the others. Extracting twice writes the same
    bytes: no dates, messages in the order of the notebook (of the source files).
``build``
    Writes ``notebooks/zh/<stem>.ipynb`` for every notebook: the same cells and ids, the
    code's translated literals in their places and nothing else of the code changed, each
    Markdown cell with the translated messages (fuzzy and untranslated ones stay English,
    so a stale translation is never shown), ``metadata.language = "zh-CN"``, and the setup
    cell selecting Chinese for the library (:func:`course_lib.i18n.set_language`). Code
    outputs are cleared: the Chinese notebooks are run, not read stored (nbval runs every
    cell; the outputs nbval compares are those of the English notebooks). The English
    notebooks are never rewritten.
``check``
    ``msgfmt -c`` on every catalogue (named placeholders match), the placeholder and
    glossary rules (:func:`placeholder_problems`, :func:`glossary_problems`) and whether
    the catalogues hold exactly today's English (:func:`stale_catalogues`).
``stats``
    Entries, English words, translated, fuzzy and untranslated entries per catalogue.

Needs the extra ``[i18n]`` (mdpo, polib) and, for ``extract`` and ``check``, GNU gettext's
``msgmerge``, ``msgattrib`` and ``msgfmt``; each command names what to install when one
is missing.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from ..i18n import DOMAIN, field_names
from .i18n_code import CONTEXT, code_messages, literal_problems, translate_code

#: The commands' API. The per-file functions below (cell_messages, notebook_template,
#: library_template, extract_notebook, translate_cell, build_notebook, msgfmt_problems,
#: placeholder_problems, glossary_problems, catalogue_stats) are the pieces the tests drive.
__all__ = ["LANG", "I18nError", "build", "extract", "main", "stale_catalogues"]

#: The language of the edition the tool builds (a gettext locale name).
LANG = "zh_CN"
#: The notebook metadata of the built edition (BCP 47).
NOTEBOOK_LANGUAGE = "zh-CN"
#: The translation functions of course_lib.i18n and the positions of their message arguments.
FUNCTIONS = {"tr": 1, "tr_n": 2, "N_": 1}
#: The lines the build puts at the top of the first code cell.
SETUP_LINES = ("from course_lib.i18n import set_language\n",
               'set_language("zh_CN")  # course_lib 的输出为中文\n')
#: A paragraph appended to a cell while mdpo reads and writes it: mdpo drops an HTML block
#: (the closing ``</details>``) at the very end of a document.
_END = "I18N-END-OF-CELL"
_SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.S)
_HEADER = {
    "Project-Id-Version": "ddl-course",
    "Language-Team": "ddl-course Chinese edition",
    "Last-Translator": "ddl-course contributors",
    "Language": LANG,
    "MIME-Version": "1.0",
    "Content-Type": "text/plain; charset=UTF-8",
    "Content-Transfer-Encoding": "8bit",
    "Plural-Forms": "nplurals=1; plural=0;",
}
_INSTALL_GETTEXT = ("install GNU gettext: apt-get install gettext (Debian, Ubuntu), brew install gettext "
                    "(macOS), or the gettext tools of your distribution")


class I18nError(RuntimeError):
    """Something the i18n commands need is missing, or a source breaks a rule (the message says)."""


# ------------------------------------------------------------------------ tools
def _polib():
    try:
        import polib
    except ImportError as exc:
        raise I18nError("polib is missing: pip install -e '.[i18n]'") from exc
    return polib


def _mdpo() -> None:
    try:
        import mdpo  # noqa: F401
    except ImportError as exc:
        raise I18nError("mdpo is missing: pip install -e '.[i18n]'") from exc


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise I18nError(f"{name} not found: {_INSTALL_GETTEXT}")
    return path


def _run(args: Sequence[str]) -> subprocess.CompletedProcess:
    proc = subprocess.run([_tool(args[0]), *args[1:]], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise I18nError(f"{' '.join(args)} failed:\n{proc.stderr.strip()}")
    return proc


def _root(root) -> Path:
    """``root`` as a Path to a course checkout (pyproject.toml and notebooks/), else ValueError."""
    from .paths import is_repo_root

    if not isinstance(root, (str, os.PathLike)):
        raise TypeError(f"root must be a path (str or pathlib.Path) to a course checkout, got {type(root).__name__}")
    if not is_repo_root(root):
        raise ValueError(f"root must be a course checkout (pyproject.toml and notebooks/), got {str(root)!r}")
    return Path(root)


def _file(path, name: str) -> Path:
    """``path`` as the Path of an existing file, else TypeError/ValueError naming ``name``."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or pathlib.Path), got {type(path).__name__}")
    if not Path(path).is_file():
        raise ValueError(f"{name} must be an existing file, got {str(path)!r}")
    return Path(path)


def _load(catalogue, name: str = "catalogue"):
    """A polib.POFile: ``catalogue`` itself, or read from the path of a .po file."""
    polib = _polib()
    if isinstance(catalogue, polib.POFile):
        return catalogue
    path = _file(catalogue, name)
    try:
        return polib.pofile(str(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{name} {str(path)!r} is no readable PO file: {exc}") from exc


def locale_folder(root: Path) -> Path:
    """``locale/zh_CN/LC_MESSAGES`` of the checkout at ``root``."""
    return Path(root) / "locale" / LANG / "LC_MESSAGES"


def english_notebooks(root: Path) -> list[Path]:
    """The English notebooks: ``notebooks/*.ipynb`` (not the generated ``notebooks/zh/``)."""
    return sorted((Path(root) / "notebooks").glob("*.ipynb"))


# ------------------------------------------------------------------------ messages of a notebook
def _has_words(msgid: str) -> bool:
    """Whether a message holds prose to translate (not only math, code, numbers or a URL)."""
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$|`[^`]*`|\]\([^)]*\)|https?://\S+|\\[A-Za-z]+", " ", msgid, flags=re.S)
    return re.search(r"[A-Za-z]{2,}|[\u4e00-\u9fff]", text) is not None


def cell_messages(source: str) -> list[str]:
    """The messages of one Markdown cell, in order: what mdpo makes of it (paragraphs, list
    items, headings, table cells; math, inline code and links kept inside, never wrapped),
    after the ``<summary>`` titles; messages without prose (a formula, a number) are left out.

    Examples
    --------
    >>> cell_messages("## Amdahl\\n\\nThe limit is $1/(1-p)$.\\n\\n$$S = \\\\frac{1}{1-p}$$\\n")
    ['Amdahl', 'The limit is $1/(1-p)$.']
    >>> cell_messages("<details><summary>Speaker notes</summary>\\n\\nAsk why.\\n\\n</details>")
    ['Speaker notes', 'Ask why.']
    """
    if not isinstance(source, str):
        raise TypeError(f"source must be the Markdown of a cell (str), got {type(source).__name__}")
    _mdpo()
    from mdpo.md2po import markdown_to_pofile

    po = markdown_to_pofile(f"{source}\n\n{_END}\n", wrapwidth=0, location=False)
    found = [m.strip() for m in _SUMMARY.findall(source)]
    found += [e.msgid for e in po if e.msgid != _END]
    out, seen = [], set()
    for msgid in found:
        if msgid and msgid not in seen and _has_words(msgid):
            seen.add(msgid)
            out.append(msgid)
    return out


def _template(entries: dict, *, brace_format: bool):
    """A POFile of ``entries`` ``{(msgctxt, msgid, msgid_plural): [locations]}``, in their
    order; with ``brace_format``, a message with ``{fields}`` is flagged python-brace-format
    (so ``msgfmt -c`` checks that its translation has the same fields)."""
    polib = _polib()
    po = polib.POFile(wrapwidth=0)
    for (msgctxt_, msgid, plural), where in entries.items():
        flags = ["python-brace-format"] if brace_format and field_names(msgid + (plural or "")) else []
        entry = polib.POEntry(msgctxt=msgctxt_, msgid=msgid, msgstr="", flags=flags,
                              occurrences=[(w, "") for w in dict.fromkeys(where)])
        if plural:
            entry.msgid_plural, entry.msgstr_plural = plural, {0: ""}
        po.append(entry)
    return po


def notebook_template(path: Path):
    """The catalogue template (POT) of one notebook: every message of its Markdown cells and
    the string literals its code prints (context ``code``, :mod:`.i18n_code`), located by
    cell id, in the order of the notebook; then the sentences that only its student edition
    says (:func:`.student_cells.student_notebook`)."""
    from .student_cells import student_notebook

    nb = json.loads(_file(path, "path").read_text(encoding="utf-8"))
    entries: dict = {}
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            for msgid in cell_messages(source):
                entries.setdefault((None, msgid, None), []).append(cell["id"])
        elif cell["cell_type"] == "code":
            for msgid, _ in code_messages(source):
                entries.setdefault((CONTEXT, msgid, None), []).append(cell["id"])
    # The student edition rewrites a few sentences (no solutions in it): its Chinese twin
    # is built from the same catalogue, so they are messages too, after the notebook's own.
    for cell in student_notebook(nb)["cells"]:
        if cell["cell_type"] == "markdown":
            for msgid in cell_messages("".join(cell["source"])):
                entries.setdefault((None, msgid, None), []).append(cell["id"])
    return _template(entries, brace_format=False)  # Markdown: braces are LaTeX, not fields


def library_template(root: Path):
    """The template of ``course_lib.po``: the literal messages of every call of ``tr``,
    ``tr_n`` and ``N_`` in ``course_lib/**/*.py``, in the order of the files and lines,
    located by file. A call whose message is no literal string with named fields only
    (an f-string, ``+``, a positional ``{}``) raises :class:`I18nError` naming it."""
    root = _root(root)
    entries: dict = {}
    problems = []
    for path in sorted((root / "course_lib").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), rel)):
            func = getattr(node, "func", None)
            name = getattr(func, "id", getattr(func, "attr", None))
            if not isinstance(node, ast.Call) or name not in FUNCTIONS:
                continue
            args = node.args[:FUNCTIONS[name]]
            if not args or any(isinstance(a, (ast.Name, ast.Attribute, ast.Subscript)) for a in args):
                continue  # a variable: its literal is marked where it is written (N_)
            if not all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in args):
                problems.append(f"{rel}:{node.lineno}: {name}() needs a literal string (no f-string, "
                                "+ or .format): pass numbers as named fields")
                continue
            texts = [a.value for a in args]
            bad = [f for t in texts for f in field_names(t) if not re.fullmatch(r"[A-Za-z_]\w*(![rsa])?(:.*)?", f)]
            if bad:
                problems.append(f"{rel}:{node.lineno}: {name}() has fields {bad}: only named fields "
                                "({name}) can be translated")
                continue
            msgctxt_ = next((k.value.value for k in node.keywords
                        if k.arg == "context" and isinstance(k.value, ast.Constant)), None)
            key = (msgctxt_, texts[0], texts[1] if len(texts) > 1 else None)
            entries.setdefault(key, []).append((rel, node.lineno, node.col_offset))
    if problems:
        raise I18nError("messages that cannot be translated:\n  " + "\n  ".join(problems))
    ordered = sorted(entries.items(), key=lambda kv: min(kv[1]))
    return _template({key: [rel for rel, _, _ in sorted(where)] for key, where in ordered}, brace_format=True)


# ------------------------------------------------------------------------ extract
def _merge(template, target: Path, compendia: Iterable[Path] = ()) -> bool:
    """Merge ``template`` into the catalogue ``target`` (created if missing) with
    ``msgmerge --previous``, dropping obsolete entries; True if the file changed."""
    polib = _polib()
    target = Path(target)
    with tempfile.TemporaryDirectory() as tmp:
        pot, merged, out = Path(tmp, "t.pot"), Path(tmp, "merged.po"), Path(tmp, "out.po")
        template.metadata = {"Content-Type": "text/plain; charset=UTF-8",
                             "Content-Transfer-Encoding": "8bit"}
        template.save(str(pot))
        base = target
        if not target.exists():
            base = Path(tmp, "new.po")
            new = polib.POFile(wrapwidth=0)
            new.header = (f"ddl-course, Chinese edition: {target.stem}.\n"
                          "Translate the msgstr lines only: python -m course_lib i18n extract rewrites the rest\n"
                          "from the English (README, For maintainers).")
            new.metadata = {**_HEADER, "PO-Revision-Date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M+0000")}
            new.save(str(base))
        _run(["msgmerge", "--quiet", "--previous", "--no-wrap",
              *(f"--compendium={c}" for c in compendia), "-o", str(merged), str(base), str(pot)])
        _run(["msgattrib", "--no-obsolete", "--no-wrap", "-o", str(out), str(merged)])
        text = out.read_text(encoding="utf-8")
    if target.exists() and target.read_text(encoding="utf-8") == text:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return True


def extract_notebook(notebook: Path, catalogue: Path, compendia: Iterable[Path] = ()) -> bool:
    """Update one notebook's catalogue from its English (True if it changed)."""
    return _merge(notebook_template(notebook), catalogue, compendia)


def extract(root: Path) -> list[str]:
    """Update every catalogue of the checkout at ``root``; what changed, one line each.

    A notebook without a catalogue takes the translations of identical sentences from
    every existing catalogue; a catalogue whose notebook is gone is removed afterwards.
    """
    root = _root(root)
    folder = locale_folder(root)
    notebooks = english_notebooks(root)
    existing = sorted(p for p in folder.glob("*.po") if p.stem != DOMAIN) if folder.is_dir() else []
    report = []
    for nb in notebooks:
        target = folder / f"{nb.stem}.po"
        compendia = [] if target.exists() else existing
        if extract_notebook(nb, target, compendia):
            report.append(f"updated {target.relative_to(root)}")
    if (root / "course_lib").is_dir():
        target = folder / f"{DOMAIN}.po"
        if _merge(library_template(root), target):
            report.append(f"updated {target.relative_to(root)}")
    stems = {nb.stem for nb in notebooks}
    for old in existing:
        if old.stem not in stems:
            old.unlink()
            report.append(f"removed {old.relative_to(root)} (its notebook is gone; "
                          "its translations went to the new catalogues)")
    return report


# ------------------------------------------------------------------------ build
def _translations(catalogue):
    """A POFile of the translated entries only: no fuzzy, untranslated or obsolete entry is
    ever shown (what ``msgattrib --translated --no-fuzzy --no-obsolete`` keeps)."""
    polib = _polib()
    po = _load(catalogue)
    out = polib.POFile()
    for e in po:
        if e.obsolete or "fuzzy" in e.flags:
            continue
        if e.msgid_plural and any(e.msgstr_plural.values()):
            out.append(polib.POEntry(msgctxt=e.msgctxt, msgid=e.msgid, msgid_plural=e.msgid_plural,
                                     msgstr_plural=dict(e.msgstr_plural)))
        elif e.msgstr:
            out.append(polib.POEntry(msgctxt=e.msgctxt, msgid=e.msgid, msgstr=e.msgstr))
    return out


def _relink(source: str) -> str:
    """Relative links of a notebook in ``notebooks/`` seen from ``notebooks/zh/``: another
    notebook is its Chinese twin, any other file is one folder up."""
    def fix(m: re.Match) -> str:
        target = m.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:|#|/", target) or target.split("#")[0].endswith(".ipynb"):
            return m.group(0)
        return f"{m.group(1)}../{target}{m.group(3)}"

    return re.sub(r"(\]\(|(?:src|href)=\")([^)\"\s]+)([)\"])", fix, source)


def translate_cell(source: str, translations) -> str:
    """One Markdown cell in the language of ``translations`` (a POFile of translated
    entries, :func:`_translations`): mdpo puts each translated message in place, the rest
    stays English; ``<summary>`` titles likewise; links are fixed for ``notebooks/zh/``."""
    if not isinstance(source, str):
        raise TypeError(f"source must be the Markdown of a cell (str), got {type(source).__name__}")
    translations = _translations(translations)
    _mdpo()
    from mdpo.po2md import Po2Md

    table = {e.msgid: e.msgstr for e in translations}
    translator = Po2Md([], wrapwidth=0)
    translator.pofiles = [translations]  # mdpo reads them from paths; the entries are in hand
    out = translator.translate(f"{source}\n\n{_END}\n").rstrip()
    if not out.endswith(_END):
        raise I18nError(f"mdpo lost the end of a cell: {source[:60]!r}")
    out = out[: -len(_END)].rstrip() + "\n"
    out = _SUMMARY.sub(lambda m: f"<summary>{table.get(m.group(1).strip(), m.group(1))}</summary>", out)
    return _relink(out)


def _lines(text: str) -> list[str]:
    return text.rstrip("\n").splitlines(keepends=True)


def build_notebook(notebook: Path, catalogue: Path, out: Path) -> None:
    """Write the Chinese twin of ``notebook`` to ``out`` from ``catalogue``."""
    nb = json.loads(_file(notebook, "notebook").read_text(encoding="utf-8"))
    translations = _translations(catalogue)
    code = {e.msgid: e.msgstr for e in translations if e.msgctxt == CONTEXT}
    for e in [e for e in translations if e.msgctxt == CONTEXT]:
        translations.remove(e)  # mdpo would put them into the prose
    zh = copy.deepcopy(nb)
    zh["metadata"].pop("widgets", None)  # the widget state of outputs that are not there
    zh["metadata"]["language"] = NOTEBOOK_LANGUAGE
    setup_done = False
    for cell in zh["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = _lines(translate_cell("".join(cell["source"]), translations))
        elif cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
            cell["metadata"].pop("execution", None)
            cell["source"] = _lines(translate_code("".join(cell["source"]), code))
            tags = [t for t in cell["metadata"].get("tags", []) if t != "nbval-check-output"]
            if "tags" in cell["metadata"]:
                cell["metadata"]["tags"] = tags
            if not setup_done:  # after a cell magic (%%...), which must stay the first line
                source = list(cell["source"])
                at = 1 if source and source[0].startswith("%%") else 0
                cell["source"] = source[:at] + list(SETUP_LINES) + source[at:]
                setup_done = True
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(zh, indent=1, ensure_ascii=False) + "\n"
    if not out.exists() or out.read_text(encoding="utf-8") != text:
        out.write_text(text, encoding="utf-8")


def build(root: Path, out: Path | None = None) -> list[Path]:
    """Write ``notebooks/zh/`` (or ``out``) from the notebooks and their catalogues; the
    notebooks written. Chinese notebooks whose English notebook is gone are removed."""
    root = _root(root)
    out = Path(out) if out is not None else root / "notebooks" / "zh"
    folder = locale_folder(root)
    written = []
    notebooks = english_notebooks(root)
    missing = [nb.stem for nb in notebooks if not (folder / f"{nb.stem}.po").is_file()]
    if missing:
        raise I18nError(f"no catalogue for {', '.join(missing)}: run python -m course_lib i18n extract")
    for nb in notebooks:
        build_notebook(nb, folder / f"{nb.stem}.po", out / nb.name)
        written.append(out / nb.name)
    for old in out.glob("*.ipynb"):
        if old not in written:
            old.unlink()
    return written


# ------------------------------------------------------------------------ checks
def msgfmt_problems(catalogue: Path) -> str:
    """What ``msgfmt -c`` finds wrong in ``catalogue`` (placeholders, plural forms, header;
    empty when it passes)."""
    path = _file(catalogue, "catalogue")
    proc = subprocess.run([_tool("msgfmt"), "-c", "-o", "/dev/null", str(path)],
                          capture_output=True, text=True, check=False)
    return proc.stderr.strip() if proc.returncode else ""


def placeholder_problems(catalogue) -> list[str]:
    """Translated entries that do not keep what must not be translated. A python-brace-format
    entry (the library's) must have the English fields, spec included (``{t:.2f}`` stays
    ``{t:.2f}``: the check ``msgfmt -c`` makes, with the spec); a code cell's literal
    (context ``code``) valid Python with the English fields (:func:`.i18n_code.literal_problems`);
    any other entry (the notebooks' prose) the same formulas ``$...$`` and inline code, in
    any order."""
    po = _load(catalogue)
    spans = re.compile(r"\$\$.+?\$\$|\$[^$]+\$|`[^`]+`", re.S)
    out = []
    for e in po:
        if e.obsolete:
            continue
        pairs = [(e.msgid, e.msgstr)] if not e.msgid_plural else \
            [(e.msgid_plural, s) for s in e.msgstr_plural.values()]
        for msgid, msgstr in pairs:
            if not msgstr:
                continue
            if e.msgctxt == CONTEXT:  # a code cell's literal: valid Python, the same fields
                out += literal_problems(msgid, msgstr)
                continue
            if "python-brace-format" not in e.flags:
                want, got = sorted(spans.findall(msgid)), sorted(spans.findall(msgstr))
                if want != got:
                    out.append(f"{msgid[:60]!r}: formulas and code {sorted(set(want) ^ set(got))} differ "
                               "between the English and the translation")
                continue
            try:
                want, got = sorted(field_names(msgid)), sorted(field_names(msgstr))
            except ValueError as exc:
                out.append(f"{msgid[:60]!r}: translation is no valid format string ({exc})")
                continue
            if want != got:
                out.append(f"{msgid[:60]!r}: fields {got} in the translation, {want} in the English")
    return out


def _glossary_terms(root: Path) -> list[tuple[str, str]]:
    """(English, Chinese) of every glossary term; "multiply-accumulate (MAC)" is matched by
    its words before the brackets."""
    import csv

    with open(Path(root) / "data" / "glossary.csv", encoding="utf-8", newline="") as f:
        return [(row["term"].split(" (")[0].strip(), row["term_zh"].strip()) for row in csv.DictReader(f)]


def glossary_problems(catalogue, terms: Sequence[tuple[str, str]]) -> list[str]:
    """Translated, not fuzzy entries whose English names a glossary term (a word match, any
    case, plural ``s``/``es`` too; not inside math, code or a ``{field}``) but whose
    translation lacks the term's Chinese. A
    translator comment ``glossary-skip: TERM`` exempts an entry where the English word is
    used in another sense (``reduce`` the memory is no 归约)."""
    po = _load(catalogue)
    if isinstance(terms, (str, bytes)) or not all(
            isinstance(t, tuple) and len(t) == 2 and all(isinstance(x, str) for x in t) for t in terms):
        raise TypeError("terms must be (English, Chinese) pairs of str")
    patterns = [(en, zh, re.compile(rf"(?<![\w-]){re.escape(en)}(?:s|es)?(?![\w-])", re.I)) for en, zh in terms]
    out = []
    for e in po:
        if e.obsolete or "fuzzy" in e.flags or not e.msgstr:
            continue
        skipped = {t.strip() for t in re.findall(r"glossary-skip:\s*([^\n]+)", e.tcomment or "")}
        english = re.sub(r"\$[^$]*\$|`[^`]*`|\{\w[^{}]*\}", " ", e.msgid)  # not in math, code, fields
        for en, zh, pattern in patterns:
            if en not in skipped and pattern.search(english) and zh not in e.msgstr:
                out.append(f"{e.msgid[:60]!r}: names {en!r}, the translation lacks {zh!r}")
    return out


def _keys(po) -> set:
    return {(e.msgctxt, e.msgid, e.msgid_plural or None) for e in po if not e.obsolete}


def stale_catalogues(root: Path) -> list[str]:
    """Catalogues that do not hold exactly the English of today's notebooks and library
    (new messages missing, removed ones still there, a catalogue missing or left over)."""
    root = _root(root)  # the argument first, then the extra it needs
    polib = _polib()
    folder = locale_folder(root)
    templates = {nb.stem: notebook_template(nb) for nb in english_notebooks(root)}
    if (root / "course_lib").is_dir():
        templates[DOMAIN] = library_template(root)
    out = []
    for stem, template in templates.items():
        path = folder / f"{stem}.po"
        if not path.is_file():
            out.append(f"{path.relative_to(root)}: missing")
            continue
        have, want = _keys(polib.pofile(str(path))), _keys(template)
        if have != want:
            new, gone = sorted(want - have, key=str), sorted(have - want, key=str)
            out.append(f"{path.relative_to(root)}: {len(new)} new and {len(gone)} removed messages "
                       f"(first: {(new or gone)[0][1][:60]!r})")
    out += [f"{p.relative_to(root)}: no such notebook" for p in sorted(folder.glob("*.po")) if p.stem not in templates]
    return out


def catalogue_stats(catalogue) -> dict:
    """Entries, English words (whitespace-separated), translated, fuzzy and untranslated
    entries of a catalogue (obsolete entries not counted)."""
    po = _load(catalogue)
    live = [e for e in po if not e.obsolete]
    fuzzy = sum("fuzzy" in e.flags for e in live)
    translated = sum(bool(e.msgstr or any(e.msgstr_plural.values())) and "fuzzy" not in e.flags for e in live)
    return {"entries": len(live), "words": sum(len(e.msgid.split()) for e in live),
            "translated": translated, "fuzzy": fuzzy, "untranslated": len(live) - translated - fuzzy}


# ------------------------------------------------------------------------ command line
USAGE = """usage: python -m course_lib i18n COMMAND

commands:
  extract  update locale/zh_CN/LC_MESSAGES/*.po from the notebooks and course_lib (msgmerge)
  build    write notebooks/zh/*.ipynb from the notebooks and their catalogues
  check    msgfmt -c, placeholders, glossary terms, catalogues up to date (exit 1 on a problem)
  stats    entries, words, translated, fuzzy and untranslated entries per catalogue

Needs pip install -e '.[i18n]' (mdpo, polib) and GNU gettext (msgmerge, msgattrib, msgfmt).
"""


def _stats_table(root: Path) -> str:
    rows = [(p.stem, catalogue_stats(p)) for p in sorted(locale_folder(root).glob("*.po"))]
    total = {k: sum(r[k] for _, r in rows) for k in ("entries", "words", "translated", "fuzzy", "untranslated")}
    lines = [f"{'catalogue':<28} {'entries':>7} {'words':>7} {'done':>6} {'fuzzy':>6} {'todo':>6}"]
    for name, r in [*rows, ("total", total)]:
        lines.append(f"{name:<28} {r['entries']:>7,} {r['words']:>7,} {r['translated']:>6,} "
                     f"{r['fuzzy']:>6,} {r['untranslated']:>6,}")
    return "\n".join(lines)


def _check(root: Path) -> list[str]:
    problems = stale_catalogues(root)
    terms = _glossary_terms(root)
    for path in sorted(locale_folder(root).glob("*.po")):
        rel = path.relative_to(root)
        if text := msgfmt_problems(path):
            problems.append(f"{rel}: msgfmt -c:\n{text}")
        problems += [f"{rel}: {p}" for p in placeholder_problems(path) + glossary_problems(path, terms)]
    return problems


def main(argv: Sequence[str] = ()) -> int:
    """``python -m course_lib i18n extract | build | check | stats``."""
    from .paths import RepoNotFoundError, repo_root

    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0 if args else 2
    command = args[0]
    if command not in ("extract", "build", "check", "stats") or len(args) > 1:
        print(f"i18n: unknown arguments {args}\n\n{USAGE}", end="", file=sys.stderr)
        return 2
    try:
        root = repo_root()
        if command == "extract":
            report = extract(root)
            print("\n".join(report) if report else "catalogues up to date")
        elif command == "build":
            written = build(root)
            print(f"wrote {len(written)} notebooks to {(root / 'notebooks' / 'zh').relative_to(root)}/")
        elif command == "stats":
            print(_stats_table(root))
        else:
            problems = _check(root)
            print("\n".join(problems) if problems else "catalogues: all checks pass")
            return 1 if problems else 0
    except (I18nError, RepoNotFoundError, ModuleNotFoundError) as exc:
        print(f"i18n {command}: error: {exc}", file=sys.stderr)
        return 1
    return 0
